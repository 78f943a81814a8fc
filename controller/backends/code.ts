/**
 * Code shipping: the run's code is a git tree; its payload is a deterministic tar.gz of that tree
 * (sorted paths, mtime 0, owner 0, modes from git), so the same tree always gives the same bytes
 * and a second run of the same commit ships nothing. Named by tree id.
 *
 * Adapters get this as `ctx.code` (a `CodeExporter`) and never open git themselves.
 */
import { spawn } from 'node:child_process';
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import { runGit } from '../git/native.js';
import { toolEnv } from '../internal/child-env.js';
import type { CodeRepos } from '../git/code-repos.js';
import type { GitPort } from '../git/port.js';
import type { CodeExporter } from './types.js';

/**
 * The `CodeExporter` over a git port: trees and payloads through the port, extraction by `git
 * archive`. With `repos`, a commit of a code repository (`code.repo`) ships as its flat tree
 * (submodules in place, `git/code-repos.ts`): the planner prepared it before the attempt was
 * made; after a restart it is flattened again from the mirrors on disk. A commit of the specs
 * repo ships as before (its own gitlinks are not followed). `payload` takes a tree `treeOf` gave.
 */
export function gitCodeExporter(git: GitPort, repos?: CodeRepos): CodeExporter {
  const flatOf = async (commit: string): Promise<string | undefined> => {
    if (!repos) return undefined;
    const known = repos.preparedTree(commit);
    if (known || (await git.resolveRef(commit))) return known;
    return repos.flatTreeOf(commit);
  };
  const flatSubtree = (repos: CodeRepos, flat: string, commit: string, path?: string) =>
    repos.withFlat(async (port) => {
      const tree = await subtree(port, flat, commit, path);
      repos.noteFlatTree(tree);
      return tree;
    });
  return {
    treeOf: async (commit, path) => {
      const flat = await flatOf(commit);
      return flat ? flatSubtree(repos!, flat, commit, path) : codeTree(git, commit, path);
    },
    payload: (tree) =>
      repos?.isFlatTree(tree) ? repos.withFlat((port) => buildPayload(port, tree)) : buildPayload(git, tree),
    extractTo: async (commit, path, dest) => {
      const flat = await flatOf(commit);
      if (!flat) return extractTree(git.gitdir, path ? `${commit}:${path}` : commit, dest);
      const tree = await flatSubtree(repos!, flat, commit, path);
      return repos!.withFlat((_, gitdir) => extractTree(gitdir, tree, dest));
    },
  };
}

/** Every file of a tree, depth first, sorted: [path, mode, blob id]. */
async function walk(git: GitPort, tree: string, prefix = ''): Promise<[string, string, string][]> {
  const out: [string, string, string][] = [];
  const entries = [...(await git.readTree(tree))].sort((a, b) =>
    a.path < b.path ? -1 : a.path > b.path ? 1 : 0,
  );
  for (const e of entries) {
    if (e.type === 'tree') out.push(...(await walk(git, e.oid, `${prefix}${e.path}/`)));
    else if (e.type === 'blob') out.push([`${prefix}${e.path}`, e.mode, e.oid]);
    // gitlinks of the specs repo are not shipped (a code repo's are flattened into trees first)
  }
  return out;
}

/** The deterministic tar.gz of a tree: the same tree gives the same bytes. */
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
  return subtree(git, (await git.readCommit(commit)).tree, commit, path);
}

/** The subtree of `root` at `path` (`commit` names it in the message when that is no folder). */
async function subtree(git: GitPort, root: string, commit: string, path?: string): Promise<string> {
  let tree = root;
  for (const part of (path ?? '').split('/').filter(Boolean)) {
    const e = (await git.readTree(tree)).find((x) => x.path === part && x.type === 'tree');
    if (!e) throw new Error(`code.path ${path} is not a folder at ${commit.slice(0, 12)}`);
    tree = e.oid;
  }
  return tree;
}

/** Extracts `treeish` (`commit[:path]`, a tree) of the repo at `gitdir` into `dest` with `git archive | tar`. */
async function extractTree(gitdir: string, treeish: string, dest: string): Promise<void> {
  const archive = await runGit(['archive', '--format=tar', treeish], { gitdir });
  if (archive.code !== 0) throw new Error(`cannot export code ${treeish}: ${archive.stderr.trim()}`);
  await new Promise<void>((resolve, reject) => {
    const tar = spawn('tar', ['-x', '-C', dest], { stdio: ['pipe', 'ignore', 'pipe'], env: toolEnv('tar') });
    let err = '';
    tar.stderr.on('data', (b: Buffer) => (err += b.toString()));
    tar.on('error', reject);
    tar.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`tar failed: ${err.trim()}`))));
    tar.stdin.end(archive.stdout);
  });
}

/** The other side effect the controller injects into adapters (`BackendContext.ssh`): a real ssh2 transport. */
export { defaultSshTransport } from '../transport/ssh.js';
