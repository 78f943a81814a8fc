/** Resolving `--repo` and the data dir the way every command does. */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { AdvError, ErrorCode, git, isRemoteUrl } from '../controller/index.js';

/** `--repo` or, by default, the repository the current directory is in. */
export async function resolveRepo(repo: string | undefined, cwd: string): Promise<string> {
  if (repo) {
    if (isRemoteUrl(repo)) return repo;
    const path = resolve(cwd, repo);
    if (!existsSync(path)) {
      throw new AdvError(ErrorCode.NotFound, `${path} does not exist`, {
        hint: `check --repo, or create a specs repo with "adv init ${repo}"`,
      });
    }
    return path;
  }
  try {
    return (await git(['rev-parse', '--show-toplevel'], { cwd })).toString('utf8').trim();
  } catch {
    throw new AdvError(ErrorCode.UsageError, `${cwd} is not inside a git repository`, {
      hint: 'pass --repo PATH|URL, or run the command inside your specs repo (adv init DIR makes one)',
    });
  }
}

/** Default data dir: inside the repo's git dir for a local repo, under ~/.local/share for a URL. */
export async function defaultDataDir(repo: string, env: NodeJS.ProcessEnv): Promise<string> {
  if (!isRemoteUrl(repo)) {
    const gitdir = (await git(['rev-parse', '--absolute-git-dir'], { cwd: repo })).toString('utf8').trim();
    return join(gitdir, 'adventuretime');
  }
  const base = env.XDG_DATA_HOME ?? join(env.HOME ?? homedir(), '.local', 'share');
  const id = createHash('sha256').update(repo).digest('hex').slice(0, 16);
  return join(base, 'adventuretime', id);
}

/** A token for smart HTTP(S): `ADV_GIT_TOKEN`, or the first line of `ADV_GIT_TOKEN_FILE`. */
export async function gitToken(env: NodeJS.ProcessEnv): Promise<string | undefined> {
  if (env.ADV_GIT_TOKEN) return env.ADV_GIT_TOKEN;
  if (env.ADV_GIT_TOKEN_FILE) {
    const { readFile } = await import('node:fs/promises');
    return (await readFile(env.ADV_GIT_TOKEN_FILE, 'utf8')).split('\n')[0]!.trim();
  }
  return undefined;
}

/** Parses `10s`, `500ms`, `2m`, or a number of seconds. */
export function parseDuration(v: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(v.trim());
  if (!m)
    throw new AdvError(ErrorCode.UsageError, `"${v}" is not a duration`, {
      hint: 'write e.g. 500ms, 10s, 2m',
    });
  const n = Number(m[1]);
  const unit = m[2] ?? 's';
  return n * (unit === 'ms' ? 1 : unit === 's' ? 1000 : unit === 'm' ? 60_000 : 3_600_000);
}
