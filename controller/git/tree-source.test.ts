import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IsoGit } from './iso.js';
import { git, NativeGit } from './native.js';
import type { GitPort } from './port.js';
import { GitTreeSource, TreeListingCache } from './tree-source.js';

const enc = (s: string) => new TextEncoder().encode(s);

describe('GitTreeSource', () => {
  let dir: string;
  let gitdir: string;
  let tree: string;
  const files = new Map<string, Uint8Array>([
    ['specs/runs/a.yaml', enc('kind: Run\n')],
    ['specs/runs/deep/b.yml', enc('kind: DAG\nmetadata: {}\n')],
    ['specs/data.yaml', new Uint8Array(2 * 2 ** 20).fill(0x61)],
    ['specs/README.md', enc('not a spec\n')],
    ['top.yaml', enc('a: 1\n')],
  ]);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-tree-source-'));
    gitdir = join(dir, 'repo.git');
    await git(['init', '--quiet', '--bare', gitdir]);
    const port = new NativeGit(gitdir);
    const commit = await port.commitFiles({
      files,
      message: 'specs',
      author: { name: 'T', email: 't@e.com' },
    });
    tree = (await port.readCommit(commit)).tree;
    await port.close();
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const listWith = async (port: GitPort, subdir = '') => {
    try {
      return await new GitTreeSource(port, tree, new TreeListingCache(port), subdir).list();
    } finally {
      await port.close();
    }
  };

  it('gives each spec file its blob size (native reader), under a subfolder too', async () => {
    const all = await listWith(new NativeGit(gitdir));
    expect(all.map((f) => [f.path, f.size])).toEqual([
      ['specs/data.yaml', 2 * 2 ** 20],
      ['specs/runs/a.yaml', 10],
      ['specs/runs/deep/b.yml', 23],
      ['top.yaml', 5],
    ]);
    const sub = await listWith(new NativeGit(gitdir), 'specs');
    expect(sub.map((f) => [f.path, f.size])).toEqual([
      ['data.yaml', 2 * 2 ** 20],
      ['runs/a.yaml', 10],
      ['runs/deep/b.yml', 23],
    ]);
  });

  it('leaves sizes unknown where the reader has none cheaply (isomorphic-git)', async () => {
    const all = await listWith(new IsoGit(gitdir));
    expect(all.map((f) => f.path)).toEqual([
      'specs/data.yaml',
      'specs/runs/a.yaml',
      'specs/runs/deep/b.yml',
      'top.yaml',
    ]);
    expect(all.every((f) => f.size === undefined)).toBe(true);
  });
});
