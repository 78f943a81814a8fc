/**
 * Code shipping: the run's code is a git tree; its payload is a deterministic tar.gz of that tree
 * (sorted paths, mtime 0, owner 0, modes from git), so the same tree always gives the same bytes
 * and a second run of the same commit ships nothing. Named by tree id.
 */
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import type { GitPort } from '../../git/port.js';

/** Every file of a tree, depth first, sorted: [path, mode, blob id]. */
async function walk(git: GitPort, tree: string, prefix = ''): Promise<[string, string, string][]> {
  const out: [string, string, string][] = [];
  const entries = [...(await git.readTree(tree))].sort((a, b) =>
    a.path < b.path ? -1 : a.path > b.path ? 1 : 0,
  );
  for (const e of entries) {
    if (e.type === 'tree') out.push(...(await walk(git, e.oid, `${prefix}${e.path}/`)));
    else if (e.type === 'blob') out.push([`${prefix}${e.path}`, e.mode, e.oid]);
    // submodules (commit entries) are not shipped
  }
  return out;
}

/** A tar of small files (job dirs sent in one go), deterministic like the code payload. */
export async function packFiles(
  files: readonly { name: string; body: string | Buffer; mode?: number }[],
): Promise<Buffer> {
  const tar = pack();
  const chunks: Buffer[] = [];
  tar.on('data', (b: unknown) => chunks.push(b as Buffer));
  const ended = new Promise<void>((r) => tar.on('end', () => r()));
  for (const f of files)
    tar.entry(
      { name: f.name, mode: f.mode ?? 0o600, mtime: new Date(0), uid: 0, gid: 0, uname: '', gname: '' },
      Buffer.from(f.body),
    );
  tar.finalize();
  await ended;
  return Buffer.concat(chunks);
}

export async function buildPayload(git: GitPort, tree: string): Promise<Buffer> {
  const files = await walk(git, tree);
  const blobs = await git.readBlobs(files.map(([, , oid]) => oid));
  const tar = pack();
  const chunks: Buffer[] = [];
  tar.on('data', (b: unknown) => chunks.push(b as Buffer));
  const ended = new Promise<void>((r) => tar.on('end', () => r()));
  files.forEach(([path, mode], i) => {
    const body = Buffer.from(blobs[i]!);
    const header = { name: path, mtime: new Date(0), uid: 0, gid: 0, uname: '', gname: '' };
    if (mode === '120000') tar.entry({ ...header, type: 'symlink', linkname: body.toString('utf8') });
    else tar.entry({ ...header, mode: mode === '100755' ? 0o755 : 0o644 }, body);
  });
  tar.finalize();
  await ended;
  // Node's gzip writes mtime 0 and no name: the bytes depend on the tree alone.
  return gzipSync(Buffer.concat(chunks), { level: 6 });
}

/** The tree to ship: the commit's, or the subtree at `path`. */
export async function codeTree(git: GitPort, commit: string, path?: string): Promise<string> {
  let tree = (await git.readCommit(commit)).tree;
  for (const part of (path ?? '').split('/').filter(Boolean)) {
    const e = (await git.readTree(tree)).find((x) => x.path === part && x.type === 'tree');
    if (!e) throw new Error(`code.path ${path} is not a folder at ${commit.slice(0, 12)}`);
    tree = e.oid;
  }
  return tree;
}
