/**
 * `adv dataset push` and `ls` against a real git specs repo and a file store: a push is
 * deterministic (the same files → the same digest, the same manifest bytes, one version), a
 * changed file is a new version, and what is recorded is a Dataset the repo loads.
 */
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DatasetIndex, DirectorySource, git, loadSpecs } from '../../controller/index.js';
import { contentDigest, pushedPrefix } from '../../runtime/datasets/contract.js';
import { FileStore } from '../../runtime/store/file.js';
import { captureIo } from '../../test/helpers/io.js';
import { runCli } from '../program.js';
import { manifestText, packDir } from './dataset.js';

const ID = ['-c', 'user.name=T', '-c', 'user.email=t@example.com'];
let tmp: string;
let repo: string;
let storeDir: string;

async function writeTree(root: string, files: Record<string, string>): Promise<void> {
  for (const [rel, text] of Object.entries(files)) {
    await mkdir(join(root, rel, '..'), { recursive: true });
    await writeFile(join(root, rel), text);
  }
}

beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-dataset-cli-'));
  repo = join(tmp, 'specs');
  storeDir = join(tmp, 'store');
  await mkdir(repo);
  await git(['init', '--quiet', '-b', 'main'], { cwd: repo });
  await writeTree(repo, {
    'runs/train.yaml':
      'apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata:\n  name: train\nspec:\n  command: x\n  inputs: [{ dataset: tokens, as: train }]\n',
  });
  await git([...ID, 'add', '-A'], { cwd: repo });
  await git([...ID, 'commit', '--quiet', '-m', 'init'], { cwd: repo });
});
afterEach(() => rm(tmp, { recursive: true, force: true }));

async function adv(...args: string[]) {
  const io = captureIo({}, tmp);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}
const push = (dir: string, ...more: string[]) =>
  adv('dataset', 'push', dir, 'tokens', '--repo', repo, '--store', `file://${storeDir}`, ...more);
const loadRepo = () => loadSpecs(new DirectorySource(repo));
const log = async () =>
  (await git(['log', '--format=%s', 'main'], { cwd: repo })).toString().trim().split('\n');

describe('adv dataset push', () => {
  const files = { 'a.txt': 'alpha\n', 'sub/b.bin': 'beta beta\n', 'sub/deeper/c': '' };

  it('pushes the same directory twice as one version: same digest, same manifest bytes, nothing uploaded again', async () => {
    const data = join(tmp, 'data');
    await writeTree(data, files);
    const first = await push(data);
    expect(first.code, first.err).toBe(0);
    const m = await packDir(data, 'tokens');
    expect(m.digest).toBe(contentDigest(m.files));
    expect(m.files.map((f) => f.path)).toEqual(['a.txt', 'sub/b.bin', 'sub/deeper/c']);
    expect(first.out).toContain(`tokens@1 pushed to file://${storeDir}/${pushedPrefix('tokens', m.digest)}`);
    expect(first.out).toContain('3 files, 16 B, 3 uploaded, 0 already there');

    // Every file under the content's prefix, and the manifest (written last) as packDir makes it.
    const store = new FileStore(storeDir);
    const prefix = pushedPrefix('tokens', m.digest);
    expect(Buffer.from((await store.get(`${prefix}sub/b.bin`))!).toString()).toBe('beta beta\n');
    const stored = Buffer.from((await store.get(`${prefix}manifest.json`))!).toString();
    expect(stored).toBe(manifestText(m));

    // The same files made elsewhere, written in another order, later: byte-identical manifest.
    const copy = join(tmp, 'copy');
    await writeTree(copy, Object.fromEntries(Object.entries(files).reverse()));
    expect(manifestText(await packDir(copy, 'tokens'))).toBe(stored);

    const again = await push(copy);
    expect(again.code, again.err).toBe(0);
    expect(again.out).toBe(
      `tokens@1 already pushed: ${m.digest} (3 files, 16 B, 0 uploaded, 3 already there)\n`,
    );
    expect(await log()).toEqual([`dataset tokens@1: ${m.digest.slice(0, 19)}`, 'init']);

    // What was recorded is a Dataset the repo loads, and the run that names it resolves to it.
    const specs = await loadRepo();
    expect(specs.diagnostics.filter((d) => d.severity === 'error')).toEqual([]);
    const v1 = new DatasetIndex(specs.objects).resolve('tokens');
    expect(v1).toMatchObject({ version: 1, spec: { digest: m.digest, source: { store: { prefix } } } });
  });

  it('records a changed file as the next version, beside the first in the same file', async () => {
    const data = join(tmp, 'data');
    await writeTree(data, files);
    expect((await push(data)).code).toBe(0);
    const m1 = await packDir(data, 'tokens');
    await writeFile(join(data, 'a.txt'), 'alpha, edited\n');
    const second = await push(data);
    expect(second.code, second.err).toBe(0);
    const m2 = await packDir(data, 'tokens');
    expect(second.out).toContain('tokens@2 pushed');
    expect(second.out).toContain(`digest: "${m2.digest}"`);
    const text = await readFile(join(repo, 'datasets/tokens.yaml'), 'utf8');
    expect(text.match(/^kind: Dataset$/gm)).toHaveLength(2);
    const index = new DatasetIndex((await loadRepo()).objects);
    expect(index.resolve('tokens')).toMatchObject({ version: 2, spec: { digest: m2.digest } });
    expect(index.resolve('tokens@1')!.spec.digest).not.toBe(m2.digest);
    expect((await log())[0]).toBe(`dataset tokens@2: ${m2.digest.slice(0, 19)}`);

    const ls = await adv('dataset', 'ls', '--repo', repo, '--store', `file://${storeDir}`);
    expect(ls.code, ls.err).toBe(0);
    const rows = ls.out
      .trim()
      .split('\n')
      .map((l) => l.split(/\s+/));
    expect(rows[0]).toEqual(['NAME', 'VERSION', 'SOURCE', 'DIGEST', 'FILES', 'SIZE']);
    expect(rows.slice(1)).toEqual(
      [m1.digest, m2.digest].map((d, i) => {
        const size = i ? ['24', 'B'] : ['16', 'B'];
        return ['tokens', String(i + 1), 'store', pushedPrefix('tokens', d), d.slice(0, 19), '3', ...size];
      }),
    );
  });

  it('refuses a symlink, says which, and uploads and commits nothing', async () => {
    const data = join(tmp, 'data');
    await writeTree(data, files);
    await symlink(join(data, 'a.txt'), join(data, 'sub', 'link.txt'));
    const r = await push(data);
    expect(r.code).not.toBe(0);
    expect(r.err).toContain(
      `${join(data, 'sub', 'link.txt')} is a symlink: a dataset holds regular files only`,
    );
    expect(await log()).toEqual(['init']);
    await expect(readFile(join(storeDir, 'datasets'))).rejects.toThrow();

    await rm(join(data, 'sub', 'link.txt'));
    await writeFile(join(data, 'two\nlines'), 'x');
    const named = await push(data);
    expect(named.code).not.toBe(0);
    expect(named.err).toContain('has a control character in its name');
  });

  it("notes a push to another store than the repo's Storage, which jobs read from", async () => {
    const data = join(tmp, 'data');
    await writeTree(data, files);
    const lab = join(tmp, 'lab-store');
    await writeTree(repo, {
      'storage.yaml': `apiVersion: adventuretime.dev/v1alpha1\nkind: Storage\nmetadata: {name: default}\nspec: {type: file, file: {path: ${lab}}}\n`,
    });
    const elsewhere = await push(data);
    expect(elsewhere.code, elsewhere.err).toBe(0);
    expect(elsewhere.err).toBe(
      `note: pushing to file://${storeDir}, but the repo's Storage is file://${lab}: jobs read datasets from the latter\n`,
    );
    const there = await adv('dataset', 'push', data, 'tokens', '--repo', repo);
    expect(there.code, there.err).toBe(0);
    expect(there.err).toBe('');
    expect(there.out).toContain(`tokens@1 already pushed`);
  });

  it('lists no datasets, then each version as JSON with its digest and size', async () => {
    const none = await adv('dataset', 'ls', '--repo', repo, '-o', 'json');
    expect(none.code, none.err).toBe(0);
    expect(JSON.parse(none.out)).toEqual([]);
    const data = join(tmp, 'data');
    await writeTree(data, files);
    expect((await push(data)).code).toBe(0);
    const { digest } = await packDir(data, 'tokens');
    const ls = await adv('dataset', 'ls', '--repo', repo, '--store', `file://${storeDir}`, '-o', 'json');
    expect(JSON.parse(ls.out)).toEqual([
      {
        name: 'tokens',
        version: 1,
        source: `store ${pushedPrefix('tokens', digest)}`,
        digest,
        files: 3,
        bytes: 16,
      },
    ]);
  });
});
