import { execFileSync } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { removeTree } from '../../test/helpers/io.js';
import { CodeRepos } from './code-repos.js';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await removeTree(d);
});

describe('CodeRepos', () => {
  it('makes flat.git once when many prepares ask for it at the same moment (no fight over its config lock)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'adv-code-repos-'));
    dirs.push(dir);
    const repos = new CodeRepos({ dir, logger: pino({ level: 'silent' }), now: Date.now });
    try {
      const got = await Promise.allSettled(
        Array.from({ length: 24 }, () => repos.withFlat((_port, gitdir) => Promise.resolve(gitdir))),
      );
      expect(got.filter((g) => g.status === 'rejected')).toEqual([]);
      expect(
        execFileSync('git', ['--git-dir', join(dir, 'flat.git'), 'rev-parse', '--is-bare-repository'], {
          encoding: 'utf8',
        }).trim(),
      ).toBe('true');
    } finally {
      await repos.close();
    }
  });
});
