/** The object store a command reads: `--store URL` / `ADV_STORE`, else the repo's Storage spec. */
import { AdvError, ErrorCode, storeTarget, type LoadResult, type Storage } from '../controller/index.js';
import { openStore, type ObjectStore } from '../runtime/store/index.js';
import { defaultDataDir, gitToken, resolveRepo } from './repo.js';
import { openSpecsWorkTree } from './specs-writer.js';
import type { Io } from './output.js';

export interface StoreOpts {
  store?: string;
  repo?: string;
  branch?: string;
  dataDir?: string;
}

export async function openCommandStore(opts: StoreOpts, io: Io): Promise<ObjectStore> {
  const explicit = opts.store ?? io.env.ADV_STORE;
  if (explicit) return openStore(explicit, io.env);
  const repo = await resolveRepo(opts.repo, io.cwd);
  const wt = await openSpecsWorkTree(repo, opts.branch ?? 'main', await gitToken(io.env), {
    anyBranch: true,
  });
  try {
    return await openSpecsStore(await wt.load(), repo, opts, io);
  } finally {
    await wt.close();
  }
}

/** The store of the Storage spec among `specs` (loaded from `repo`), as the controller opens it. */
export async function openSpecsStore(
  specs: LoadResult,
  repo: string,
  opts: StoreOpts,
  io: Io,
): Promise<ObjectStore> {
  const storage = specs.objects.find((o) => o.kind === 'Storage')?.object as Storage | undefined;
  if (!storage) {
    throw new AdvError(ErrorCode.NotFound, `${repo} has no Storage spec`, {
      hint: 'pass --store URL (file:///path or s3://bucket/prefix)',
    });
  }
  const dataDir = opts.dataDir ?? (await defaultDataDir(repo, io.env));
  const target = storeTarget(storage.spec, dataDir, io.env);
  return openStore(target.url, { ...io.env, ...target.env });
}
