/**
 * Caches in the data dir are disposable. Valid JSON of the wrong shape under the right stamp (a
 * hand edit, a bit flip, another build) used to crash every start with a TypeError — exit 70, a
 * systemd crash loop. Now each is thrown away and rebuilt, and an empty controller id is made again.
 */
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import { removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml } from './helpers/git/specs-repo.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('caches in the data dir', () => {
  it.each([
    ['an object where a list is expected', { runs: 1 }],
    ['a list of the wrong entries', [1, 'two', null, [3]]],
    ['entries with holes', [['runs/a.yaml', 'k', [{ file: 'x' }], []]]],
  ])('a cache holding %s is rebuilt, not a crash', async (_what, garbage) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'adv-caches-'));
    cleanups.push(() => removeTree(dataDir));
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/a.yaml': runYaml('a', 'true'),
    });
    cleanups.push(() => wt.cleanup());
    const first = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
    await first.runUntilIdle({ timeoutMs: 60_000 });
    await first.stop();
    // Same stamps, data of another shape; and an empty id (a truncated write).
    for (const f of ['spec-cache.json', 'status-cache.json']) {
      const saved = JSON.parse(await readFile(join(dataDir, f), 'utf8')) as { stamp: string };
      await writeFile(join(dataDir, f), JSON.stringify({ stamp: saved.stamp, data: garbage }));
    }
    await writeFile(join(dataDir, 'controller-id'), '');

    await wt.write('runs/b.yaml', runYaml('b', 'true'));
    await wt.commit('one more');
    const second = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
    cleanups.push(() => second.stop());
    await second.runUntilIdle({ timeoutMs: 60_000 });
    expect(second.runStatus('a')?.status.phase).toBe('Succeeded');
    expect(second.runStatus('a')?.status.attempts).toHaveLength(1);
    expect(second.runStatus('b')?.status.phase).toBe('Succeeded');
    expect((await readFile(join(dataDir, 'controller-id'), 'utf8')).trim()).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('the status branch deleted under a running controller', () => {
  it('is put back where it was: no history lost, no attempt adopted again', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'adv-deleted-'));
    cleanups.push(() => removeTree(dataDir));
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/a.yaml': runYaml('a', 'true'),
    });
    cleanups.push(() => wt.cleanup());
    const c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
    cleanups.push(() => c.stop());
    await c.runUntilIdle({ timeoutMs: 60_000 });
    const before = await wt.git('rev-parse', 'adventuretime/status');
    const attempt = c.runStatus('a')!.status.attempts[0]!;
    await wt.git('branch', '-D', 'adventuretime/status');
    await c.pass();
    expect(await wt.git('rev-parse', 'adventuretime/status')).toBe(before);
    expect(c.runStatus('a')!.status.attempts).toEqual([attempt]);
  });
});
