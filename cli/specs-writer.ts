/**
 * How the CLI changes the specs repo: like a person would — edit files, commit, push. For a local
 * repo, in its work tree on the watched branch; for a URL, in a temporary clone, pushed with a
 * retry when someone else pushed first. The controller never writes the watched branch.
 *
 * `adv apply` writes a whole file into the work tree and commits it. `adv cancel`, `retry` and
 * `reconcile` change one value of a committed file: they read the branch's commit, not the work
 * tree, and commit with git plumbing (`commitFile`), so a person's uncommitted edits are never
 * swept into the commit.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  AdvError,
  DirectorySource,
  ErrorCode,
  credentialEnv,
  git,
  isRemoteUrl,
  isSpecFile,
  loadSpecs,
  runGit,
  type LoadResult,
  type SpecFileRef,
  type SpecSource,
} from '../controller/index.js';
import { FALLBACK_IDENTITY, hasIdentity } from './commands/init.js';

/** A file name is a file name, not a pathspec (`*` in it matches only itself). */
const LITERAL = { GIT_LITERAL_PATHSPECS: '1' };

/** `--repo` and `--branch` of the commands that commit to the specs repo. */
export interface RepoOpts {
  repo?: string;
  branch: string;
}

/** One file as the branch, the index and the work tree have it. */
export interface FileState {
  /** The committed content (undefined: not in the branch's commit). */
  committed?: string;
  /** The index holds something else than the commit for it (a staged change or removal). */
  staged: boolean;
  /** The work tree's content (undefined: no such file). */
  worktree?: string;
}

export interface SpecsWorkTree {
  dir: string;
  /** All specs as they are now in the work tree. */
  load(): Promise<LoadResult>;
  /** The commit the watched branch points at. */
  branchHead(): Promise<string>;
  /** All specs as committed in `commit` (the work tree is not read). */
  loadCommitted(commit: string): Promise<LoadResult>;
  /** `rel` in `commit`, in the index and in the work tree. */
  fileState(rel: string, commit: string): Promise<FileState>;
  /**
   * Commits `content` as `rel` on top of `parent` (which the branch must still point at) from the
   * committed tree — nothing else of the index or the work tree goes in — and pushes, for a URL.
   * Then the index entry of `rel` becomes the new content (it matched `parent`: the caller checked
   * `staged`), and the work tree file becomes `worktree` when given, else is left as it is.
   */
  commitFile(
    rel: string,
    content: string,
    message: string,
    parent: string,
    worktree?: string,
  ): Promise<string>;
  /**
   * A commit of `parent`'s tree with `rel` set to `content`, made from the committed tree in an
   * index of its own: no ref, no index, no file is changed. Returns it and the blob and mode of `rel`.
   */
  commitOnto(
    rel: string,
    content: string,
    message: string,
    parent: string,
  ): Promise<{ commit: string; blob: string; mode: string }>;
  read(rel: string): Promise<string | undefined>;
  write(rel: string, content: string): Promise<void>;
  remove(rel: string): Promise<void>;
  /** Commits the given paths (and pushes, for a URL). Returns the new commit. */
  commit(paths: string[], message: string): Promise<string>;
  close(): Promise<void>;
}

export async function openSpecsWorkTree(
  repo: string,
  branch: string,
  token: string | undefined,
  opts: {
    anyBranch?: boolean;
    /**
     * For a URL: a local repository whose objects the clone borrows (`--reference-if-able`), so
     * a commit made there (an `adv submit` snapshot) can be pushed from the clone.
     */
    reference?: string;
  } = {},
): Promise<SpecsWorkTree> {
  const env = credentialEnv(token);
  const { dir, temp } = await workTreeOf(repo, branch, env, opts);
  const id = (await hasIdentity(dir)) ? [] : FALLBACK_IDENTITY;
  const ref = `refs/heads/${branch}`;
  const publish = () => (temp ? pushWithRetry(dir, repo, branch, env) : Promise.resolve());
  const commitOnto: SpecsWorkTree['commitOnto'] = (rel, content, message, parent) =>
    commitOntoIn(dir, id, rel, content, message, parent);
  return {
    dir,
    load: () => loadSpecs(new DirectorySource(dir)),
    branchHead: async () => {
      const r = await runGit(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], { cwd: dir });
      if (r.code !== 0)
        throw new AdvError(ErrorCode.NotFound, `branch ${branch} of ${repo} has no commit yet`, {
          hint: `commit your specs to ${branch}, or pass --branch`,
        });
      return r.stdout.toString().trim();
    },
    loadCommitted: (commit) => loadSpecs(new CommitSource(dir, commit)),
    fileState: (rel, commit) => fileStateIn(dir, rel, commit),
    commitOnto,
    commitFile: async (rel, content, message, parent, worktree) => {
      const { commit, blob, mode } = await commitOnto(rel, content, message, parent);
      // Compare-and-swap: a commit made to the branch meanwhile is never overwritten.
      const cas = await runGit(['update-ref', '-m', `adv: ${message}`, ref, commit, parent], { cwd: dir });
      if (cas.code !== 0)
        throw new AdvError(
          ErrorCode.GitError,
          `${branch} moved while ${rel} was being edited; nothing was committed`,
          {
            hint: 'run the command again',
          },
        );
      await git(['update-index', '--add', '--cacheinfo', `${mode},${blob},${rel}`], { cwd: dir });
      if (worktree !== undefined) {
        await writeFile(join(dir, rel), worktree);
        await runGit(['update-index', '-q', '--refresh'], { cwd: dir });
      }
      await publish();
      return (await git(['rev-parse', ref], { cwd: dir })).toString().trim();
    },
    read: async (rel) => (existsSync(join(dir, rel)) ? readFile(join(dir, rel), 'utf8') : undefined),
    write: async (rel, content) => {
      await mkdir(dirname(join(dir, rel)), { recursive: true });
      await writeFile(join(dir, rel), content);
    },
    remove: async (rel) => {
      await rm(join(dir, rel), { force: true });
    },
    commit: async (paths, message) => {
      await commitPaths(dir, id, paths, message);
      await publish();
      return (await git(['rev-parse', 'HEAD'], { cwd: dir })).toString().trim();
    },
    close: async () => {
      if (temp) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The work tree to edit: a temporary clone of a URL, or a local repo with `branch` checked out. */
async function workTreeOf(
  repo: string,
  branch: string,
  env: NodeJS.ProcessEnv,
  opts: { anyBranch?: boolean; reference?: string },
): Promise<{ dir: string; temp: boolean }> {
  if (isRemoteUrl(repo)) {
    const dir = await mkdtemp(join(tmpdir(), 'adv-apply-'));
    const from = opts.reference ? ['--reference-if-able', opts.reference] : ['--depth', '1'];
    const r = await runGit(['clone', '--quiet', ...from, '--branch', branch, repo, dir], { env });
    if (r.code !== 0) {
      await rm(dir, { recursive: true, force: true });
      throw new AdvError(ErrorCode.GitError, `cannot clone ${repo}: ${r.stderr.trim()}`, {
        hint: 'check --repo, --branch and ADV_GIT_TOKEN',
      });
    }
    return { dir, temp: true };
  }
  const head = (await runGit(['symbolic-ref', '--quiet', '--short', 'HEAD'], { cwd: repo })).stdout
    .toString()
    .trim();
  if (head !== branch && !opts.anyBranch) {
    throw new AdvError(
      ErrorCode.UsageError,
      `${repo} has "${head || 'a detached HEAD'}" checked out, not the watched branch "${branch}"`,
      {
        hint: `git switch ${branch} first, or pass --branch`,
      },
    );
  }
  return { dir: repo, temp: false };
}

/** Pushes the clone's HEAD to `branch`, rebasing onto what others pushed first (up to 5 tries). */
async function pushWithRetry(
  dir: string,
  repo: string,
  branch: string,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const push = await runGit(['push', '--quiet', 'origin', `HEAD:refs/heads/${branch}`], {
      cwd: dir,
      env,
    });
    if (push.code === 0) break;
    if (attempt >= 5 || !/rejected|fetch first|non-fast-forward/.test(push.stderr)) {
      throw new AdvError(ErrorCode.GitError, `push to ${repo} failed: ${push.stderr.trim()}`, {
        hint: 'check that the token may push to the branch',
      });
    }
    await git(['pull', '--quiet', '--rebase', 'origin', branch], { cwd: dir, env });
  }
}

/** `SpecsWorkTree.commitOnto` in `dir`, committing as `id` (git's identity options, or none). */
async function commitOntoIn(
  dir: string,
  id: readonly string[],
  rel: string,
  content: string,
  message: string,
  parent: string,
): Promise<{ commit: string; blob: string; mode: string }> {
  const mode =
    /^(\d+) blob /.exec(
      (await git(['ls-tree', parent, '--', rel], { cwd: dir, env: LITERAL })).toString(),
    )?.[1] ?? '100644';
  const blob = (await git(['hash-object', '-w', '--stdin'], { cwd: dir, input: content })).toString().trim();
  // The new tree: the parent's, with this one file changed, built in an index of our own.
  const scratch = await mkdtemp(join(tmpdir(), 'adv-edit-'));
  let commit: string;
  try {
    const idx = { GIT_INDEX_FILE: join(scratch, 'index') };
    await git(['read-tree', parent], { cwd: dir, env: idx });
    await git(['update-index', '--add', '--cacheinfo', `${mode},${blob},${rel}`], { cwd: dir, env: idx });
    const tree = (await git(['write-tree'], { cwd: dir, env: idx })).toString().trim();
    const sign = (await runGit(['config', '--bool', 'commit.gpgsign'], { cwd: dir })).stdout
      .toString()
      .trim();
    commit = (
      await git(
        [...id, 'commit-tree', tree, '-p', parent, ...(sign === 'true' ? ['-S'] : []), '-m', message],
        {
          cwd: dir,
        },
      )
    )
      .toString()
      .trim();
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return { commit, blob, mode };
}

/** `SpecsWorkTree.fileState` in `dir`. */
async function fileStateIn(dir: string, rel: string, commit: string): Promise<FileState> {
  const committed = await runGit(['rev-parse', '--verify', '--quiet', `${commit}:${rel}`], { cwd: dir });
  const blob = committed.code === 0 ? committed.stdout.toString().trim() : undefined;
  const staged = (await git(['ls-files', '--stage', '-z', '--', rel], { cwd: dir, env: LITERAL })).toString();
  const indexBlob = /^\d+ ([0-9a-f]+) 0\t/.exec(staged)?.[1];
  return {
    ...(blob ? { committed: (await git(['cat-file', 'blob', blob], { cwd: dir })).toString('utf8') } : {}),
    staged: indexBlob !== blob,
    ...(existsSync(join(dir, rel)) ? { worktree: await readFile(join(dir, rel), 'utf8') } : {}),
  };
}

/** Commits `paths` as they are in the work tree; a usage error when nothing of them changed. */
async function commitPaths(
  dir: string,
  id: readonly string[],
  paths: string[],
  message: string,
): Promise<void> {
  await git(['add', '--', ...paths], { cwd: dir });
  const diff = await runGit(['diff', '--cached', '--quiet', '--', ...paths], { cwd: dir });
  if (diff.code === 0)
    throw new AdvError(ErrorCode.UsageError, 'nothing to commit: the specs repo already has this content', {
      hint: 'no change needed',
    });
  await git([...id, 'commit', '--quiet', '-m', message, '--', ...paths], { cwd: dir });
}

/** The spec files of a commit, read with git (`ls-tree`, `cat-file --batch`): the work tree is never read. */
class CommitSource implements SpecSource {
  private oids = new Map<string, string>();

  constructor(
    private readonly dir: string,
    private readonly commit: string,
  ) {}

  async list(): Promise<SpecFileRef[]> {
    const out = (
      await git(['ls-tree', '-r', '-z', '-l', '--full-tree', this.commit], { cwd: this.dir })
    ).toString('utf8');
    const files: SpecFileRef[] = [];
    for (const entry of out.split('\0')) {
      const m = /^(100644|100755) blob ([0-9a-f]+) +(\d+)\t(.*)$/s.exec(entry);
      if (!m) continue; // trees, symlinks, submodules
      const path = m[4]!;
      const dirs = path.split('/').slice(0, -1);
      // As DirectorySource: hidden directories and node_modules are never spec folders.
      if (!isSpecFile(path) || dirs.some((d) => d.startsWith('.') || d === 'node_modules')) continue;
      this.oids.set(path, m[2]!);
      // The size from the tree: the loader refuses a file over its limit without reading it.
      files.push({ path, key: m[2]!, size: Number(m[3]) });
    }
    return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  async readMany(paths: readonly string[]): Promise<Uint8Array[]> {
    if (!paths.length) return [];
    const input = paths.map((p) => this.oids.get(p) ?? `${this.commit}:${p}`).join('\n') + '\n';
    const buf = await git(['cat-file', '--batch'], { cwd: this.dir, input });
    const out: Uint8Array[] = [];
    let at = 0;
    for (const p of paths) {
      const nl = buf.indexOf(0x0a, at);
      const header = buf.subarray(at, nl).toString('utf8');
      const size = Number(/ blob (\d+)$/.exec(header)?.[1] ?? NaN);
      if (!Number.isInteger(size))
        throw new AdvError(ErrorCode.GitError, `cannot read ${p} at ${this.commit.slice(0, 10)}: ${header}`);
      out.push(buf.subarray(nl + 1, nl + 1 + size));
      at = nl + 1 + size + 1;
    }
    return out;
  }
}
