/**
 * Fetching one blob into the host cache, once per host however many jobs want it at once:
 *
 * 1. A verified blob already there is a hit (cache.ts says how it is verified).
 * 2. Otherwise the fetcher takes the blob's lock (proper-lockfile: a directory made atomically,
 *    its mtime refreshed while held, stale after {@link LOCK_STALE_MS} when its holder died), looks
 *    again (another job may have fetched it while this one waited), and downloads to
 *    `<blob>.partial`, from the partial's size when one is left (a fetcher SIGKILLed mid-way).
 * 3. The whole file is checked against the sha256 and size the dataset names, then renamed into
 *    place read-only. A mismatch deletes it and fetches once more from byte 0; a second mismatch
 *    is an error naming the dataset, the file and where it came from.
 */
import { chmod, mkdir, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { lock } from 'proper-lockfile';
import { hashing, openForWrite } from '../store/file.js';
import type { ObjectStore, TransferResult } from '../store/types.js';
import type { BlobCache } from './cache.js';
import { hashFile, LOCK_STALE_MS } from './cache.js';

/** Where one file's bytes come from. */
export interface BlobSource {
  /** For messages: the URL or the store key. */
  readonly where: string;
  /**
   * Writes the bytes from `offset` on to `path` (cut to `offset` first; 0: a new file). The
   * result hashes what was read, and says where it started when that is not `offset` (a server
   * that ignored the range); undefined when the object does not exist.
   */
  download(
    path: string,
    offset: number,
    onProgress: (bytes: number) => void,
    signal?: AbortSignal,
  ): Promise<(TransferResult & { from?: number }) | undefined>;
}

export interface WantedBlob {
  sha256: string;
  /** Absent for a URL listed without a size: then only the sha256 is checked. */
  size?: number;
  /** `dataset file` for messages: `imagenet@3 train/0001.tar`. */
  label: string;
  source: BlobSource;
}

export interface FetchOptions {
  /** Bytes moved for this blob so far (resumed bytes count from the offset). */
  onProgress?: (bytes: number) => void;
  log?: (line: string) => void;
  /** The lock's staleness (tests shorten it; proper-lockfile's floor is 2 s). */
  staleMs?: number;
  /** Abandons the wait for the lock and a URL download (a stop notice); a store read runs on. */
  signal?: AbortSignal;
}

/** What fetching one blob did. */
export interface Fetched {
  path: string;
  /** Bytes this call moved (0 for a hit, or when another job fetched it while this one waited). */
  moved: number;
  size: number;
}

/** The blob's path in the cache, verified: from the cache when it holds it, else fetched. */
export async function fetchBlob(cache: BlobCache, b: WantedBlob, o: FetchOptions = {}): Promise<Fetched> {
  const hit = await cache.lookup(b.sha256, b.size);
  if (hit) return { path: hit, moved: 0, size: (await stat(hit)).size };
  const path = cache.blobPath(b.sha256);
  await mkdir(dirname(path), { recursive: true });
  const release = await lockBlob(path, b.label, o);
  try {
    const again = await cache.lookup(b.sha256, b.size);
    if (again) return { path: again, moved: 0, size: (await stat(again)).size };
    return await download(cache, b, path, o);
  } finally {
    await release().catch(() => undefined);
  }
}

/**
 * Takes the blob's lock, waiting as long as a live holder keeps it fresh (that holder is moving
 * the bytes), or until `o.signal` aborts: the wait is ours, not proper-lockfile's, so an aborted
 * job leaves no retry timer holding its process open.
 */
async function lockBlob(path: string, label: string, o: FetchOptions): Promise<() => Promise<void>> {
  const stale = Math.max(2000, o.staleMs ?? LOCK_STALE_MS);
  for (let waitMs = 50; ; waitMs = Math.min(500, Math.ceil(waitMs * 1.2))) {
    o.signal?.throwIfAborted();
    try {
      return await lock(path, {
        realpath: false,
        stale,
        update: Math.floor(stale / 3),
        onCompromised: (e) =>
          o.log?.(
            `warning: the cache lock of ${label} was taken over (${e.message}); fetching on regardless`,
          ),
      });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ELOCKED') throw e;
    }
    await sleep(waitMs, undefined, o.signal ? { signal: o.signal } : {});
  }
}

async function download(cache: BlobCache, b: WantedBlob, path: string, o: FetchOptions): Promise<Fetched> {
  const partial = `${path}.partial`;
  let moved = 0;
  for (let tries = 2; ; tries--) {
    let offset = (await stat(partial).catch(() => undefined))?.size ?? 0;
    if (b.size !== undefined && offset > b.size) offset = 0;
    if (offset) o.log?.(`${b.label}: resuming at byte ${offset} of ${b.size ?? '?'} from ${b.source.where}`);
    const r = await b.source.download(partial, offset, (n) => o.onProgress?.(offset + n), o.signal);
    if (!r) throw new Error(`${b.label}: ${b.source.where} does not exist`);
    moved += r.size;
    const from = r.from ?? offset;
    const size = from + r.size;
    const sha = from ? await hashFile(partial) : r.sha256;
    if (sha === b.sha256 && (b.size === undefined || size === b.size)) {
      await chmod(partial, 0o444);
      await rename(partial, path);
      await cache.added(b.sha256);
      return { path, moved, size };
    }
    await rm(partial, { force: true });
    const got = `${size} bytes with sha256 ${sha}`;
    const want = `${b.size ?? '?'} bytes with sha256 ${b.sha256}`;
    if (tries <= 1)
      throw new Error(
        `${b.label}: ${b.source.where} gave ${got} twice, expected ${want} (has the object changed since the dataset was pushed?)`,
      );
    o.log?.(`${b.label}: ${b.source.where} gave ${got}, expected ${want}: fetching it again`);
  }
}

/** A blob source reading an https (or loopback http) URL, resuming with a Range request. */
export function urlSource(url: string, fetchImpl: typeof fetch = fetch): BlobSource {
  return {
    where: url,
    async download(path, offset, onProgress, signal) {
      const res = await fetchImpl(url, {
        ...(offset ? { headers: { range: `bytes=${offset}-` } } : {}),
        ...(signal ? { signal } : {}),
      });
      if (res.status === 404) return undefined;
      if (!res.ok || !res.body) throw new Error(`GET ${url}: HTTP ${res.status} ${res.statusText}`);
      // A server that ignores Range sends everything again: start the file over.
      const from = offset && res.status === 206 ? offset : 0;
      const h = hashing(onProgress);
      await mkdir(dirname(path), { recursive: true });
      await pipeline(Readable.fromWeb(res.body as never), h, await openForWrite(path, from));
      return { ...h.result(), from };
    },
  };
}

/** A blob source reading one key of the object store (S3 with a Range header; a file from an offset). */
export function storeSource(store: ObjectStore, key: string): BlobSource {
  return {
    where: store.url + key,
    download: (path, offset, onProgress) => store.getToFile(key, path, { offset, onProgress }),
  };
}
