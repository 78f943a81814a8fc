import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRefFile } from './loose.js';
import { git, NativeGit } from './native.js';

const me = { name: 'adv', email: 'adv@example.invalid' };
const bytes = (s: string) => Buffer.from(s, 'utf8');

describe('small commits written in-process', () => {
  let dir: string;
  let gitdir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-loose-'));
    gitdir = join(dir, 'repo.git');
    await git(['init', '--quiet', '--bare', gitdir]);
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  /** The same commits through fast-import (looseCommitMaxFiles 0) and in-process: the same ids. */
  it('writes the very commit fast-import writes, tree order and deletions included', async () => {
    const fast = new NativeGit(gitdir, { looseCommitMaxFiles: 0 });
    const loose = new NativeGit(gitdir);
    const base = new Map<string, Uint8Array | null>([
      ['runs/a.yaml', bytes('a: 1\n')],
      ['runs/a-b.yaml', bytes('ab\n')],
      ['runs/a0.yaml', bytes('a0\n')],
      ['runs/deep/x.yaml', bytes('x\n')],
      ['dags/only.yaml', bytes('only\n')],
      ['sources/specs.yaml', bytes('s\n')],
      ['runs/é.yaml', bytes('accent\n')],
      // A folder sorts as `x/`: after `x-y.yaml` and `x.yaml` ('-' and '.' come before '/').
      ['runs/x/inner.yaml', bytes('inner\n')],
      ['runs/x-y.yaml', bytes('xy\n')],
    ]);
    const root = { files: base, message: 'first\n', author: me, time: 1_700_000_000 };
    const r1 = await fast.commitFiles(root);
    expect(await loose.commitFiles(root)).toBe(r1);
    // Edits that exercise the order: a file beside a folder of a close name, a new folder, a
    // deletion that empties a folder (git has no empty folders), a file replacing a folder.
    const edits = new Map<string, Uint8Array | null>([
      ['runs/a.yaml', bytes('a: 2\n')],
      ['runs/a.b.yaml', bytes('dot\n')],
      ['runs/deep', bytes('a file where a folder was\n')],
      ['dags/only.yaml', null],
      ['alerts/new/one.yaml', bytes('new\n')],
      ['runs/zz.yaml', bytes('zz\n')],
      ['runs/x.yaml', bytes('x\n')],
      ['runs/x/inner2.yaml', bytes('inner2\n')],
    ]);
    const next = {
      parent: r1,
      files: edits,
      message: 'second\n\nTrailer: x\n',
      author: me,
      time: 1_700_000_001,
    };
    const r2 = await fast.commitFiles(next);
    expect(await loose.commitFiles(next)).toBe(r2);
    // And git finds nothing wrong with the objects written in-process.
    await git(['update-ref', 'refs/heads/check', r2], { gitdir });
    await git(['fsck', '--strict', '--no-dangling'], { gitdir });
    const tree = (await git(['ls-tree', '-r', '--name-only', r2], { gitdir })).toString();
    expect(tree).not.toContain('dags/');
    expect(tree).toContain('runs/deep\n');
    await fast.close();
    await loose.close();
  });

  it('refuses a path that would escape or corrupt the tree', async () => {
    const g = new NativeGit(gitdir);
    for (const path of ['../x', 'a//b', 'a/./b', '.git/config', 'a\nb'])
      await expect(
        g.commitFiles({ files: new Map([[path, bytes('x')]]), message: 'm\n', author: me }),
      ).rejects.toThrow(/refusing to write path/);
    await g.close();
  });
});

describe('refs read from their files', () => {
  let dir: string;
  let gitdir: string;
  let c1: string;
  let c2: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-refs-'));
    gitdir = join(dir, 'repo.git');
    await git(['init', '--quiet', '--bare', gitdir]);
    const g = new NativeGit(gitdir);
    c1 = await g.commitFiles({ files: new Map([['a', bytes('1')]]), message: 'one\n', author: me });
    c2 = await g.commitFiles({
      parent: c1,
      files: new Map([['a', bytes('2')]]),
      message: 'two\n',
      author: me,
    });
    await g.close();
    await git(['update-ref', 'refs/heads/packed', c1], { gitdir });
    await git(['pack-refs', '--all'], { gitdir });
    await git(['update-ref', 'refs/heads/loose', c2], { gitdir });
    await git(['symbolic-ref', 'HEAD', 'refs/heads/loose'], { gitdir });
    await git(['tag', '-a', '-m', 'annotated', 'v1', c1], {
      gitdir,
      env: { GIT_COMMITTER_NAME: 'a', GIT_COMMITTER_EMAIL: 'a@b' },
    });
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('answers loose, packed, symbolic and missing refs as rev-parse does', async () => {
    expect(await readRefFile(gitdir, 'refs/heads/loose')).toBe(c2);
    expect(await readRefFile(gitdir, 'refs/heads/packed')).toBe(c1);
    expect(await readRefFile(gitdir, 'HEAD')).toBe(c2);
    expect(await readRefFile(gitdir, 'refs/heads/none')).toBeUndefined();
    // Not a plain ref name: left to git.
    expect(await readRefFile(gitdir, 'loose')).toBeNull();
    expect(await readRefFile(gitdir, 'refs/heads/../../config')).toBeNull();
    const g = new NativeGit(gitdir);
    for (const ref of [
      'refs/heads/loose',
      'refs/heads/packed',
      'HEAD',
      'refs/heads/none',
      'loose',
      'refs/tags/v1',
    ]) {
      const r = await git(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], { gitdir }).then(
        (b) => b.toString().trim(),
        () => undefined,
      );
      // An annotated tag points to a tag object: peeled by git, not by the file reader.
      expect(await g.resolveRef(ref), ref).toBe(r);
    }
    await g.close();
  });

  it('goes to git when the file holds something it does not understand', async () => {
    await writeFile(join(gitdir, 'refs', 'heads', 'odd'), 'garbage\n');
    expect(await readRefFile(gitdir, 'refs/heads/odd')).toBeNull();
  });
});
