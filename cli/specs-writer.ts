/**
 * How the CLI changes the specs repo: like a person would — edit files, commit, push. For a local
 * repo, in its work tree on the watched branch; for a URL, in a temporary clone, pushed with a
 * retry when someone else pushed first. The controller never writes the watched branch.
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
  loadSpecs,
  runGit,
  type LoadResult,
} from '../controller/index.js';
import { FALLBACK_IDENTITY, hasIdentity } from './commands/init.js';

/** `--repo` and `--branch` of the commands that commit to the specs repo. */
export interface RepoOpts {
  repo?: string;
  branch: string;
}

export interface SpecsWorkTree {
  dir: string;
  /** All specs as they are now in the work tree. */
  load(): Promise<LoadResult>;
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
  opts: { anyBranch?: boolean } = {},
): Promise<SpecsWorkTree> {
  const env = credentialEnv(token);
  let dir: string;
  let temp = false;
  if (isRemoteUrl(repo)) {
    dir = await mkdtemp(join(tmpdir(), 'adv-apply-'));
    temp = true;
    const r = await runGit(['clone', '--quiet', '--depth', '1', '--branch', branch, repo, dir], { env });
    if (r.code !== 0) {
      await rm(dir, { recursive: true, force: true });
      throw new AdvError(ErrorCode.GitError, `cannot clone ${repo}: ${r.stderr.trim()}`, {
        hint: 'check --repo, --branch and ADV_GIT_TOKEN',
      });
    }
  } else {
    dir = repo;
    const head = (await runGit(['symbolic-ref', '--quiet', '--short', 'HEAD'], { cwd: dir })).stdout
      .toString()
      .trim();
    if (head !== branch && !opts.anyBranch) {
      throw new AdvError(
        ErrorCode.UsageError,
        `${dir} has "${head || 'a detached HEAD'}" checked out, not the watched branch "${branch}"`,
        {
          hint: `git switch ${branch} first, or pass --branch`,
        },
      );
    }
  }
  const id = (await hasIdentity(dir)) ? [] : FALLBACK_IDENTITY;
  return {
    dir,
    load: () => loadSpecs(new DirectorySource(dir)),
    read: async (rel) => (existsSync(join(dir, rel)) ? readFile(join(dir, rel), 'utf8') : undefined),
    write: async (rel, content) => {
      await mkdir(dirname(join(dir, rel)), { recursive: true });
      await writeFile(join(dir, rel), content);
    },
    remove: async (rel) => {
      await rm(join(dir, rel), { force: true });
    },
    commit: async (paths, message) => {
      await git(['add', '--', ...paths], { cwd: dir });
      const diff = await runGit(['diff', '--cached', '--quiet', '--', ...paths], { cwd: dir });
      if (diff.code === 0)
        throw new AdvError(
          ErrorCode.UsageError,
          'nothing to commit: the specs repo already has this content',
          { hint: 'no change needed' },
        );
      await git([...id, 'commit', '--quiet', '-m', message, '--', ...paths], { cwd: dir });
      if (temp) {
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
      return (await git(['rev-parse', 'HEAD'], { cwd: dir })).toString().trim();
    },
    close: async () => {
      if (temp) await rm(dir, { recursive: true, force: true });
    },
  };
}
