import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { git } from '../controller/index.js';
import { keepSnapshot, snapshotRef, snapshotWorkTree } from './snapshot.js';

const ID = ['-c', 'user.name=T', '-c', 'user.email=t@example.com'];
let dir: string;
const run = async (...args: string[]) => (await git([...ID, ...args], { cwd: dir })).toString('utf8').trim();
const write = async (rel: string, text: string) => {
  await mkdir(join(dir, rel, '..'), { recursive: true });
  await writeFile(join(dir, rel), text);
};

/** Everything a user could see change: every file (the .git dir's too, objects aside), by hash. */
async function fingerprint(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const path = join(e.parentPath, e.name);
    if (!e.isFile() || path.includes('/.git/objects/')) continue;
    out[path.slice(dir.length + 1)] = createHash('sha256')
      .update(await readFile(path))
      .digest('hex');
  }
  return out;
}

const show = (commit: string, rel: string) => run('show', `${commit}:${rel}`);

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'adv-snap-'));
  await run('init', '--quiet', '-b', 'main');
  await write('.gitignore', '*.log\n');
  await write('train.py', 'committed\n');
  await write('lib/util.py', 'committed\n');
  await write('old.py', 'to be deleted\n');
  await run('add', '-A');
  await run('commit', '--quiet', '-m', 'init');
});
afterEach(() => rm(dir, { recursive: true, force: true }));

describe('snapshotWorkTree', () => {
  it('commits the work tree as it is — modified, staged, deleted, untracked — and touches nothing else', async () => {
    await write('lib/util.py', 'staged\n');
    await run('add', 'lib/util.py');
    await write('lib/util.py', 'in the work tree\n');
    await write('train.py', 'modified\n');
    await rm(join(dir, 'old.py'));
    await write('data/new.txt', 'untracked\n');
    await write('debug.log', 'ignored\n');
    const head = await run('rev-parse', 'HEAD');
    const before = await fingerprint();
    const status = await run('status', '--porcelain');

    const snap = await snapshotWorkTree(join(dir, 'lib'));

    expect(snap).toMatchObject({ toplevel: dir, prefix: 'lib', head, branch: 'main', dirty: true });
    expect(snap.commit).not.toBe(head);
    expect(await run('rev-parse', `${snap.commit}^`)).toBe(head);
    expect(await show(snap.commit, 'lib/util.py')).toBe('in the work tree');
    expect(await show(snap.commit, 'train.py')).toBe('modified');
    expect(await show(snap.commit, 'data/new.txt')).toBe('untracked');
    const files = (await run('ls-tree', '-r', '--name-only', snap.commit)).split('\n');
    expect(files).not.toContain('old.py');
    expect(files).not.toContain('debug.log');
    // The branch, HEAD, the index and every file: byte for byte as they were.
    expect(await fingerprint()).toEqual(before);
    expect(await run('status', '--porcelain')).toBe(status);
    expect(await run('rev-parse', 'HEAD')).toBe(head);
  });

  it('a clean tree is HEAD itself; a detached HEAD works the same', async () => {
    const head = await run('rev-parse', 'HEAD');
    await write('ignored.log', 'not code\n');
    expect(await snapshotWorkTree(dir)).toMatchObject({
      commit: head,
      dirty: false,
      branch: 'main',
      prefix: '',
    });
    await run('checkout', '--quiet', '--detach');
    const clean = await snapshotWorkTree(dir);
    expect(clean).toMatchObject({ commit: head, dirty: false });
    expect(clean.branch).toBeUndefined();
    await write('train.py', 'detached edit\n');
    const before = await fingerprint();
    const dirty = await snapshotWorkTree(dir);
    expect(dirty.dirty).toBe(true);
    expect(await show(dirty.commit, 'train.py')).toBe('detached edit');
    expect(await fingerprint()).toEqual(before);
  });

  it('keeps the snapshot under its ref, and says what to do outside a repo or before a first commit', async () => {
    await write('train.py', 'edit\n');
    const snap = await snapshotWorkTree(dir);
    await keepSnapshot(dir, 'my-run', snap.commit);
    expect(await run('rev-parse', snapshotRef('my-run'))).toBe(snap.commit);
    const empty = await mkdtemp(join(tmpdir(), 'adv-snap-empty-'));
    try {
      await expect(snapshotWorkTree(empty)).rejects.toThrow(/is not inside a git repository/);
      await git(['init', '--quiet'], { cwd: empty });
      await expect(snapshotWorkTree(empty)).rejects.toThrow(/has no commit yet/);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });
});
