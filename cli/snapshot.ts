/**
 * The code `adv submit` ships: the work tree of the current directory's git repository, as it is.
 *
 * A clean tree is HEAD's commit. A tree with uncommitted changes (modified, staged, deleted, and
 * untracked files that are not ignored) becomes a commit of its own, as `git stash create` makes
 * one but with the untracked files in it: `git add -A` into a temporary index (GIT_INDEX_FILE, a
 * copy of the real one so unchanged files are not hashed again), `write-tree`, `commit-tree` with
 * HEAD as its parent. Only objects are written: the branch, HEAD, the index and every file of the
 * work tree stay byte-identical. The commit is kept reachable by a ref of our own
 * (`refs/adventuretime/snapshots/<run>`), which is also what is pushed for the controller to fetch.
 */
import { existsSync } from 'node:fs';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { AdvError, ErrorCode, git, runGit } from '../controller/index.js';
import { FALLBACK_IDENTITY, hasIdentity } from './commands/init.js';

/** Where a run's snapshot commit is kept, locally and on the remote the controller fetches. */
export const snapshotRef = (run: string): string => `refs/adventuretime/snapshots/${run}`;

export interface CodeSnapshot {
  /** The work tree's top directory. */
  toplevel: string;
  /** Where the command was started, relative to `toplevel` ('' at the top). */
  prefix: string;
  /** HEAD's commit. */
  head: string;
  /** The checked-out branch (undefined: a detached HEAD). */
  branch?: string;
  /** The commit that holds the work tree as it is: HEAD's when clean, else the snapshot. */
  commit: string;
  /** Whether the work tree differed from HEAD (and `commit` is a snapshot). */
  dirty: boolean;
}

const out = async (args: string[], cwd: string, env?: NodeJS.ProcessEnv) =>
  (await git(args, { cwd, ...(env ? { env } : {}) })).toString('utf8').trim();

/** Snapshots the work tree that `cwd` is in; see the header for what is and is not touched. */
export async function snapshotWorkTree(cwd: string): Promise<CodeSnapshot> {
  const top = await runGit(['rev-parse', '--show-toplevel'], { cwd });
  if (top.code !== 0)
    throw new AdvError(
      ErrorCode.UsageError,
      `${cwd} is not inside a git repository: there is no code to ship`,
      {
        hint: "run adv submit in your code's git repository (git init; git add -A; git commit), or pass -f with a spec whose code is elsewhere",
      },
    );
  const toplevel = top.stdout.toString('utf8').trim();
  const headR = await runGit(['rev-parse', '--verify', '--quiet', 'HEAD^{commit}'], { cwd: toplevel });
  if (headR.code !== 0)
    throw new AdvError(ErrorCode.UsageError, `${toplevel} has no commit yet`, {
      hint: 'commit once (git add -A && git commit -m init): a snapshot needs a commit to start from',
    });
  const head = headR.stdout.toString('utf8').trim();
  const prefix = (await out(['rev-parse', '--show-prefix'], cwd)).replace(/\/$/, '');
  const sym = await runGit(['symbolic-ref', '--quiet', '--short', 'HEAD'], { cwd: toplevel });
  const branch = sym.code === 0 ? sym.stdout.toString('utf8').trim() : undefined;

  const scratch = await mkdtemp(join(tmpdir(), 'adv-snapshot-'));
  try {
    const index = join(scratch, 'index');
    let real = await out(['rev-parse', '--git-path', 'index'], toplevel);
    if (!isAbsolute(real)) real = join(toplevel, real);
    if (existsSync(real)) await copyFile(real, index);
    const env = { GIT_INDEX_FILE: index };
    // `:/` is the whole work tree, wherever the command was started.
    await git(['add', '-A', '--', ':/'], { cwd: toplevel, env });
    const tree = await out(['write-tree'], toplevel, env);
    if (tree === (await out(['rev-parse', `${head}^{tree}`], toplevel)))
      return { toplevel, prefix, head, ...(branch ? { branch } : {}), commit: head, dirty: false };
    const id = (await hasIdentity(toplevel)) ? [] : FALLBACK_IDENTITY;
    const message = `adv submit: snapshot of ${branch ?? 'a detached HEAD'} at ${head.slice(0, 10)} with uncommitted changes`;
    const commit = await out(
      [...id, 'commit-tree', '--no-gpg-sign', tree, '-p', head, '-m', message],
      toplevel,
    );
    return { toplevel, prefix, head, ...(branch ? { branch } : {}), commit, dirty: true };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Keeps `commit` reachable in the code repository as the run's snapshot ref (never a branch). */
export async function keepSnapshot(toplevel: string, run: string, commit: string): Promise<void> {
  await git(['update-ref', '-m', `adv submit ${run}`, snapshotRef(run), commit], { cwd: toplevel });
}
