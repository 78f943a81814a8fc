/**
 * `ADV_DATASETS` → `<job dir>/inputs/<as>/`: each dataset's file list is resolved from its source
 * (a pushed manifest, a URL list, a run's output), every file fetched through the host cache
 * (fetch.ts; {@link FETCH_CONCURRENCY} at a time), then hard-linked from the cache into the job's
 * dir (copied, a clone where the file system can, when the cache is on another file system). The
 * dir is built beside its final name and renamed in: a job never sees half a dataset.
 */
import { constants } from 'node:fs';
import { copyFile, link, mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import pLimit, { type LimitFunction } from 'p-limit';
import { readOutputManifest, outputPrefix } from '../artifacts.js';
import type { ObjectStore } from '../store/types.js';
import {
  contentDigest,
  DATASET_MANIFEST,
  type DatasetFile,
  type DatasetInput,
  type DatasetManifest,
} from './contract.js';
import type { BlobCache } from './cache.js';
import { fetchBlob, storeSource, urlSource, type BlobSource, type FetchOptions } from './fetch.js';

/** A dataset's `as`: its directory under inputs/ and part of `ADV_INPUT_<as>_DIR`. */
const AS = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Blobs fetched at once (per job). */
export const FETCH_CONCURRENCY = 8;

/** What the heartbeat shows while a dataset is fetched. */
export interface DatasetProgress {
  dataset: string;
  bytes: number;
  total: number;
}

export interface MaterialiseOptions {
  store: ObjectStore | undefined;
  cache: BlobCache;
  /** `<job dir>/inputs`. */
  inputsDir: string;
  log: (line: string) => void;
  onProgress?: (p: DatasetProgress) => void;
  concurrency?: number;
  staleMs?: number;
  /** A stop notice: no more fetches start, waits and URL downloads are abandoned. */
  signal?: AbortSignal;
  fetchImpl?: typeof fetch;
}

/** One dataset's files, each with where its bytes come from. */
interface Resolved {
  files: (Omit<DatasetFile, 'size'> & { size?: number; source: BlobSource })[];
}

/** Thrown for any dataset that cannot be materialised; the message names it. */
export class DatasetError extends Error {
  readonly code = 'DatasetFailed';
}

/**
 * Materialises every input; returns `ADV_INPUT_<as>_DIR` for each and the bytes moved over the
 * network (0 when the cache held everything).
 */
export async function materialiseDatasets(
  inputs: readonly DatasetInput[],
  o: MaterialiseOptions,
): Promise<{ env: Record<string, string>; moved: number }> {
  const env: Record<string, string> = {};
  const used = new Set<string>();
  let moved = 0;
  for (const input of inputs) {
    const dest = join(o.inputsDir, input.as);
    try {
      if (!AS.test(input.as))
        throw new Error(`"as" must match ${AS.source} (a directory name and part of a variable's name)`);
      const r = await resolveFiles(input, o);
      const paths = new Set<string>();
      for (const f of r.files)
        if (paths.size === paths.add(f.path).size) throw new Error(`it lists ${f.path} twice`);
      moved += await materialiseOne(input, r, dest, used, o);
    } catch (e) {
      throw new DatasetError(`dataset ${input.dataset} (input ${input.as}): ${(e as Error).message}`, {
        cause: e,
      });
    }
    env[`ADV_INPUT_${input.as}_DIR`] = dest;
  }
  const { removed } = await o.cache.evict(used);
  if (removed.length) o.log(`dataset cache: ${removed.length} least recently used blobs evicted`);
  return { env, moved };
}

async function materialiseOne(
  input: DatasetInput,
  r: Resolved,
  dest: string,
  used: Set<string>,
  o: MaterialiseOptions,
): Promise<number> {
  const total = r.files.reduce((n, f) => n + (f.size ?? 0), 0);
  const done = new Map<string, number>();
  let last = 0;
  const report = (force = false) => {
    const bytes = [...done.values()].reduce((a, b) => a + b, 0);
    if (!force && Date.now() - last < 500) return;
    last = Date.now();
    o.onProgress?.({ dataset: input.dataset, bytes, total });
  };
  report(true);
  const limit = pLimit(o.concurrency ?? FETCH_CONCURRENCY);
  const tmp = `${dest}.adv-tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  let moved = 0;
  const fetched: { size: number; sha256: string; path: string }[] = [];
  try {
    await settleAll(
      limit,
      r.files.map((f) => async () => {
        const opts: FetchOptions = {
          onProgress: (n) => (done.set(f.path, n), report()),
          log: o.log,
          ...(o.staleMs ? { staleMs: o.staleMs } : {}),
          ...(o.signal ? { signal: o.signal } : {}),
        };
        const label = `${input.dataset} ${f.path}`;
        const want = {
          sha256: f.sha256,
          label,
          source: f.source,
          ...(f.size !== undefined ? { size: f.size } : {}),
        };
        const got = await fetchBlob(o.cache, want, opts);
        used.add(f.sha256);
        done.set(f.path, got.size);
        moved += got.moved;
        fetched.push({ size: got.size, sha256: f.sha256, path: f.path });
        await place(o.cache, want, got.path, join(tmp, ...f.path.split('/')), opts);
      }),
      o.signal,
    );
    report(true);
    if (input.digest && contentDigest(fetched) !== input.digest)
      throw new Error(`its files hash to ${contentDigest(fetched)}, not the pinned ${input.digest}`);
    await putInPlace(tmp, dest, fetched);
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    throw e;
  }
  o.log(
    `input ${input.as}: ${input.dataset} (${r.files.length} files, ${total} bytes) in ${dest}; ${moved ? `${moved} bytes fetched` : 'all from the host cache'}`,
  );
  return moved;
}

/**
 * Renames the built dir to `dest`. The processes of one job on one host share its job dir: when a
 * sibling has already put the same files there (the same paths and sizes, nothing more), that dir
 * stays — replacing it could pull files from under a workload that already started. Anything else
 * there (an earlier attempt's other version) is replaced.
 */
async function putInPlace(tmp: string, dest: string, files: readonly DatasetFile[]): Promise<void> {
  await mkdir(dirname(dest), { recursive: true });
  try {
    return await rename(tmp, dest);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw e;
  }
  if (await holds(dest, files)) return void (await rm(tmp, { recursive: true, force: true }));
  await rm(dest, { recursive: true, force: true });
  await rename(tmp, dest);
}

/** Whether `dir` holds exactly these files (by path and size). */
async function holds(dir: string, files: readonly DatasetFile[]): Promise<boolean> {
  const present = await readdir(dir, { recursive: true, withFileTypes: true });
  if (present.filter((e) => !e.isDirectory()).length !== files.length) return false;
  for (const f of files) {
    const s = await stat(join(dir, ...f.path.split('/'))).catch(() => undefined);
    if (!s?.isFile() || s.size !== f.size) return false;
  }
  return true;
}

/**
 * Runs the tasks through `limit`; on the first failure starts no more, waits for those under way
 * (so none writes into a dir removed after it), then throws that failure.
 */
async function settleAll(
  limit: LimitFunction,
  tasks: (() => Promise<void>)[],
  signal?: AbortSignal,
): Promise<void> {
  let failed = false;
  const results = await Promise.allSettled(
    tasks.map((t) =>
      limit(async () => {
        if (failed || signal?.aborted) return;
        await t().catch((e: unknown) => {
          failed = true;
          throw e;
        });
      }),
    ),
  );
  const bad = results.find((r) => r.status === 'rejected');
  if (bad) throw (bad as PromiseRejectedResult).reason;
  // Tasks skipped for a stop notice: the dir is not complete.
  signal?.throwIfAborted();
}

/** A hard link to the blob, or a copy (a clone where it can) across file systems. */
async function place(
  cache: BlobCache,
  want: Parameters<typeof fetchBlob>[1],
  blob: string,
  target: string,
  opts: FetchOptions,
): Promise<void> {
  await mkdir(dirname(target), { recursive: true });
  try {
    await link(blob, target);
    return;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    // Evicted by another job between the fetch and the link: fetch it again.
    if (code === 'ENOENT') {
      const again = await fetchBlob(cache, want, opts);
      return copyFile(again.path, target, constants.COPYFILE_FICLONE);
    }
    if (code !== 'EXDEV' && code !== 'EPERM' && code !== 'EMLINK') throw e;
  }
  await copyFile(blob, target, constants.COPYFILE_FICLONE);
}

async function resolveFiles(input: DatasetInput, o: MaterialiseOptions): Promise<Resolved> {
  const src = input.source;
  const needStore = (): ObjectStore => {
    if (!o.store) throw new Error('no object store to fetch it from (pass --store or set ADV_STORE)');
    return o.store;
  };
  if ('store' in src) {
    const store = needStore();
    const prefix = src.store.prefix;
    const raw = await store.get(prefix + DATASET_MANIFEST);
    if (!raw) throw new Error(`no ${DATASET_MANIFEST} under ${store.url}${prefix} (was the push finished?)`);
    const m = parseManifest(new TextDecoder().decode(raw), `${store.url}${prefix}${DATASET_MANIFEST}`);
    if (input.digest && m.digest !== input.digest)
      throw new Error(`${store.url}${prefix} holds ${m.digest}, but the spec pins ${input.digest}`);
    return { files: m.files.map((f) => ({ ...f, source: storeSource(store, prefix + f.path) })) };
  }
  if ('urls' in src) {
    return {
      files: src.urls.map((u) => {
        checkPath(u.path);
        return {
          path: u.path,
          sha256: u.sha256,
          ...(u.size !== undefined ? { size: u.size } : {}),
          source: urlSourceFor(u.url, o),
        };
      }),
    };
  }
  if ('output' in src) {
    const store = needStore();
    const { run, output } = src.output;
    const m = await readOutputManifest(store, run, output);
    if (m === undefined)
      throw new Error(`output ${output} of run ${run} is not complete (no manifest in ${store.url})`);
    if (typeof m === 'string') throw new Error(`output ${output} of run ${run}: ${m}`);
    const prefix = outputPrefix(run, output);
    return { files: m.files.map((f) => ({ ...f, source: storeSource(store, prefix + f.path) })) };
  }
  throw new Error(`unknown source ${JSON.stringify(src)}: expected store, urls or output`);
}

/** https:// (and http:// for tests on loopback) by fetch; s3:// as a key of the job's store. */
function urlSourceFor(url: string, o: MaterialiseOptions): BlobSource {
  if (/^https?:\/\//.test(url)) return urlSource(url, o.fetchImpl);
  if (url.startsWith('s3://')) {
    const store = o.store;
    const base = store?.url.split('?')[0];
    if (!store || !base?.startsWith('s3://') || !url.startsWith(base))
      throw new Error(
        `${url} is not in the job's store (${store?.url ?? 'none'}): s3:// URLs must name keys of it`,
      );
    return storeSource(store, url.slice(base.length));
  }
  throw new Error(`${url}: only https:// and s3:// URLs are fetched`);
}

function parseManifest(text: string, where: string): DatasetManifest {
  let m: DatasetManifest;
  try {
    m = JSON.parse(text) as DatasetManifest;
  } catch {
    throw new Error(`${where} is not JSON`);
  }
  if (m?.kind !== 'DatasetManifest' || !Array.isArray(m.files))
    throw new Error(`${where} is not a DatasetManifest`);
  for (const f of m.files) checkPath(f.path);
  const digest = contentDigest(m.files);
  if (digest !== m.digest) throw new Error(`${where} says ${m.digest} but its files hash to ${digest}`);
  return m;
}

function checkPath(p: string): void {
  if (!p || p.startsWith('/') || p.split('/').some((s) => s === '..' || s === '.' || s === ''))
    throw new Error(`file path ${JSON.stringify(p)} is not a relative path inside the dataset`);
}
