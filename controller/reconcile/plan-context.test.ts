import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backendInfoOf } from '../backends/registry.js';
import { git, NativeGit } from '../git/native.js';
import type { CodeRepoState } from '../git/code-repos.js';
import type { RunSpec } from '../spec/schema.js';
import { planContextOf } from './plan-context.js';

const AUTHOR = {
  GIT_AUTHOR_NAME: 't',
  GIT_AUTHOR_EMAIL: 't@localhost',
  GIT_COMMITTER_NAME: 't',
  GIT_COMMITTER_EMAIL: 't@localhost',
};

describe('planContextOf: the planner context of the controller’s pass and of adv plan', () => {
  let dir: string;
  let gitdir: string;
  let port: NativeGit;
  const commits: string[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-plan-context-'));
    gitdir = join(dir, 'repo.git');
    await git(['init', '--quiet', '--bare', gitdir]);
    const tree = (await git(['hash-object', '-t', 'tree', '-w', '--stdin'], { gitdir, input: '' }))
      .toString()
      .trim();
    for (const m of ['local', 'remote'])
      commits.push((await git(['commit-tree', tree, '-m', m], { gitdir, env: AUTHOR })).toString().trim());
    await git(['update-ref', 'refs/heads/feature', commits[0]!], { gitdir });
    await git(['update-ref', 'refs/remotes/origin/feature', commits[1]!], { gitdir });
    await git(['update-ref', 'refs/tags/v1', commits[0]!], { gitdir });
    port = new NativeGit(gitdir);
  });
  afterAll(async () => {
    await port?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const specs: RunSpec[] = [
    { command: ['a'], code: { ref: 'feature' } },
    { command: ['b'], code: { ref: 'v1' } },
    { command: ['c'], code: { ref: 'no-such-ref' } },
    { command: ['d'], code: { repo: 'https://example.com/other.git', ref: 'main' } },
    { command: ['e'] },
  ];
  const backends = [backendInfoOf('local', { type: 'local' })];
  /** What adv plan gives: no secrets, no code repositories, no controller id. */
  const sources = (remote: boolean) => ({
    now: 5,
    specCommit: 'c'.repeat(40),
    backends,
    git: port,
    remote,
    specs,
  });

  it('resolves each code ref once, the remote’s branch first in a clone, and leaves out what names nothing', async () => {
    const clone = await planContextOf(sources(true));
    expect([...clone.codeRefs]).toEqual([
      ['feature', commits[1]],
      ['v1', commits[0]],
    ]);
    const local = await planContextOf(sources(false));
    expect(local.codeRefs.get('feature')).toBe(commits[0]);
  });

  it('adv plan’s context: no secrets check, no other repositories, no controller id', async () => {
    const ctx = await planContextOf(sources(true));
    expect(Object.keys(ctx).sort()).toEqual(['backends', 'codeRefs', 'now', 'specCommit']);
    expect(ctx).toMatchObject({ now: 5, specCommit: 'c'.repeat(40), backends });
  });

  it('the controller’s context: where each code.repo run’s code stands, its id and its secrets check', async () => {
    const asked: string[] = [];
    const ready: CodeRepoState = {
      state: 'ready',
      commit: 'e'.repeat(40),
      repo: 'https://example.com/other.git',
    };
    const missingSecrets = (names: readonly string[]) => (names.length ? 'not set' : undefined);
    const ctx = await planContextOf({
      ...sources(false),
      codeRepos: {
        states: {
          state: async (run, code, head) => {
            asked.push(`${run} ${code.repo} ${head}`);
            return ready;
          },
        },
        runs: specs.map((spec, i) => ({ name: `r${i}`, spec })),
      },
      controllerId: 'me',
      missingSecrets,
    });
    expect(asked).toEqual([`r3 https://example.com/other.git ${'c'.repeat(40)}`]);
    expect([...ctx.codeRepos!]).toEqual([['r3', ready]]);
    expect(ctx.controllerId).toBe('me');
    expect(ctx.missingSecrets).toBe(missingSecrets);
  });
});
