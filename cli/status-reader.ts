/** Opens the status branch of a specs repo for reading (fetching it first for a URL). */
import { createHash } from 'node:crypto';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { AdvError, ErrorCode, SpecsRepo, StatusWriter, isRemoteUrl } from '../controller/index.js';
import { gitToken, resolveRepo } from './repo.js';
import type { Io } from './output.js';

export interface StatusReader {
  repo: SpecsRepo;
  store: StatusWriter;
  close(): Promise<void>;
}

/** Where the CLI keeps its clone or view of a specs repo: `$XDG_CACHE_HOME/adventuretime/<hash>`. */
export function cacheDirFor(repoArg: string, env: NodeJS.ProcessEnv): string {
  return join(
    env.XDG_CACHE_HOME ?? join(env.HOME ?? homedir(), '.cache'),
    'adventuretime',
    createHash('sha256').update(repoArg).digest('hex').slice(0, 16),
  );
}

export async function openStatus(
  opts: { repo?: string; branch?: string; statusBranch?: string },
  io: Io,
): Promise<StatusReader> {
  const repoArg = await resolveRepo(opts.repo, io.cwd);
  const cache = cacheDirFor(repoArg, io.env);
  const token = await gitToken(io.env);
  const repo = await SpecsRepo.open({
    repo: repoArg,
    dataDir: cache,
    ...(opts.branch ? { branch: opts.branch } : {}),
    ...(opts.statusBranch ? { statusBranch: opts.statusBranch } : {}),
    ...(token ? { token } : {}),
  });
  if (isRemoteUrl(repoArg)) {
    try {
      await repo.refresh();
    } catch (e) {
      throw new AdvError(ErrorCode.GitError, (e as Error).message, {
        hint: 'check --repo and ADV_GIT_TOKEN',
      });
    }
  }
  const store = new StatusWriter(
    repo.git,
    repo.mode === 'remote' ? `refs/remotes/origin/${repo.statusBranch}` : repo.statusRef,
    { name: 'adv', email: 'adv@localhost' },
  );
  await store.load();
  if (!store.head) {
    await repo.close();
    throw new AdvError(ErrorCode.NotFound, `no status branch ${repo.statusBranch} in ${repo.location} yet`, {
      hint: 'start the controller on this repo (adv controller), or check --repo',
    });
  }
  return { repo, store, close: () => repo.close() };
}
