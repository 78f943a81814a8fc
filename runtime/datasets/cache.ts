/**
 * The host's dataset cache: one blob per distinct file content, named by its sha256, shared by
 * every job on the host (and every attempt). Layout under `datasetCacheDir()`:
 *
 *   blobs/<aa>/<sha256>          the bytes, read-only; jobs get hard links to it
 *   blobs/<aa>/<sha256>.json     {@link BlobRecord}: when it was last used, and the stat it had
 *                                when its content was last verified
 *   blobs/<aa>/<sha256>.partial  a download under way (or cut short: the next fetch resumes it)
 *   blobs/<aa>/<sha256>.lock     proper-lockfile's lock of whoever fetches it now
 *
 * The record keeps last use because atime is unreliable (noatime, relatime). A blob is trusted
 * without re-reading it while its size, mtime and inode are those recorded when it was hashed
 * (git's index trick): a job that writes into its hard-linked input changes the mtime, and the
 * blob is hashed again (and fetched again if it no longer matches) before anyone else gets it.
 * `ADV_DATASET_VERIFY=full` hashes every blob on every use instead (safer against a change that
 * keeps the mtime, costs a full read of the dataset per job).
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { check } from 'proper-lockfile';
import { CHUNK } from '../store/file.js';
import { cacheRoot } from '../uv.js';

/** `ADV_CACHE_MAX_BYTES` when unset: 100 GiB. */
export const DEFAULT_MAX_BYTES = 100 * 1024 ** 3;

/** `$ADV_CACHE_DIR/datasets`, else `${XDG_CACHE_HOME:-$HOME/.cache}/adventuretime/datasets`. */
export function datasetCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheRoot(env), 'datasets');
}

/** What the cache keeps beside a blob. */
export interface BlobRecord {
  size: number;
  /** The blob's stat when its content was last hashed and found right. */
  mtimeMs: number;
  ino: number;
  /** Last time a job used it (ms since the epoch): eviction takes the oldest first. */
  lastUse: number;
}

export interface CacheOptions {
  /** Bytes the blobs may take; past it, the least recently used go. */
  maxBytes?: number;
  /** `stat` (default): re-hash a blob only when its stat changed; `full`: on every use. */
  verify?: 'stat' | 'full';
  now?: () => number;
}

/** Reads the cache's options from the environment, with a clear error for a bad value. */
export function cacheOptionsFromEnv(env: NodeJS.ProcessEnv): CacheOptions {
  const max = env.ADV_CACHE_MAX_BYTES;
  if (max !== undefined && max !== '' && !/^\d+$/.test(max))
    throw new Error(`ADV_CACHE_MAX_BYTES=${max} is not a number of bytes`);
  const verify = env.ADV_DATASET_VERIFY;
  if (verify && verify !== 'full' && verify !== 'stat')
    throw new Error(`ADV_DATASET_VERIFY=${verify}: use full (hash on every use) or stat (the default)`);
  return {
    ...(max ? { maxBytes: Number(max) } : {}),
    ...(verify === 'full' ? { verify: 'full' as const } : {}),
  };
}

const SHA256 = /^[0-9a-f]{64}$/;

export class BlobCache {
  readonly maxBytes: number;
  private readonly now: () => number;

  constructor(
    readonly dir: string,
    private readonly o: CacheOptions = {},
  ) {
    this.maxBytes = o.maxBytes ?? DEFAULT_MAX_BYTES;
    this.now = o.now ?? Date.now;
  }

  blobPath(sha256: string): string {
    if (!SHA256.test(sha256)) throw new Error(`not a sha256: ${JSON.stringify(sha256)}`);
    return join(this.dir, 'blobs', sha256.slice(0, 2), sha256);
  }

  /**
   * The blob's path when the cache holds it with the right content (verified as the options say),
   * its last use updated; undefined when it must be fetched (a wrong one is deleted).
   */
  async lookup(sha256: string, size?: number): Promise<string | undefined> {
    const path = this.blobPath(sha256);
    const s = await stat(path).catch(() => undefined);
    if (!s?.isFile()) return undefined;
    const rec = await this.record(sha256);
    const unchanged = rec && rec.size === s.size && rec.mtimeMs === s.mtimeMs && rec.ino === s.ino;
    const wrongSize = size !== undefined && s.size !== size;
    if (wrongSize || this.o.verify === 'full' || !unchanged) {
      if (wrongSize || (await hashFile(path)) !== sha256) {
        await this.remove(sha256);
        return undefined;
      }
    }
    await this.writeRecord(sha256, { size: s.size, mtimeMs: s.mtimeMs, ino: s.ino, lastUse: this.now() });
    return path;
  }

  /** Records a blob just renamed into place (its content verified by the caller). */
  async added(sha256: string): Promise<void> {
    const s = await stat(this.blobPath(sha256));
    await this.writeRecord(sha256, { size: s.size, mtimeMs: s.mtimeMs, ino: s.ino, lastUse: this.now() });
  }

  async remove(sha256: string): Promise<void> {
    const p = this.blobPath(sha256);
    await rm(p, { force: true });
    await rm(`${p}.json`, { force: true });
  }

  /**
   * Deletes the least recently used blobs (and partial downloads, by their mtime) until the rest
   * fit in `maxBytes`. Never one in `keep` (the job's own), nor one locked by a fetch under way. Hard links already made into job dirs
   * keep their bytes: the bound is the cache's, not the jobs'.
   */
  async evict(keep: ReadonlySet<string> = new Set()): Promise<{ removed: string[]; bytes: number }> {
    const blobs: { sha: string; size: number; lastUse: number; partial: boolean }[] = [];
    const root = join(this.dir, 'blobs');
    for (const sub of await readdir(root).catch(() => [] as string[])) {
      for (const name of await readdir(join(root, sub)).catch(() => [] as string[])) {
        // A partial download counts too: one left by a fetcher that died, and never resumed,
        // would otherwise hold its bytes outside the bound for ever.
        const partial = name.endsWith('.partial');
        const sha = partial ? name.slice(0, -'.partial'.length) : name;
        if (!SHA256.test(sha)) continue;
        const s = await stat(join(root, sub, name)).catch(() => undefined);
        if (!s) continue;
        const lastUse = partial ? s.mtimeMs : ((await this.record(sha))?.lastUse ?? 0);
        blobs.push({ sha, size: s.size, lastUse, partial });
      }
    }
    let bytes = blobs.reduce((n, b) => n + b.size, 0);
    const removed: string[] = [];
    blobs.sort((a, b) => a.lastUse - b.lastUse);
    for (const b of blobs) {
      if (bytes <= this.maxBytes) break;
      if (keep.has(b.sha) || (await this.fetching(b.sha))) continue;
      if (b.partial) await rm(`${this.blobPath(b.sha)}.partial`, { force: true });
      else await this.remove(b.sha);
      bytes -= b.size;
      removed.push(b.partial ? `${b.sha}.partial` : b.sha);
    }
    return { removed, bytes };
  }

  private fetching(sha256: string): Promise<boolean> {
    return check(this.blobPath(sha256), { realpath: false, stale: LOCK_STALE_MS }).catch(() => false);
  }

  private async record(sha256: string): Promise<BlobRecord | undefined> {
    try {
      return JSON.parse(await readFile(`${this.blobPath(sha256)}.json`, 'utf8')) as BlobRecord;
    } catch {
      return undefined;
    }
  }

  /** Atomic (temporary name, then rename): a reader never sees half a record. */
  private async writeRecord(sha256: string, rec: BlobRecord): Promise<void> {
    const p = `${this.blobPath(sha256)}.json`;
    const tmp = `${p}.${process.pid}.${Math.random().toString(36).slice(2)}`;
    await writeFile(tmp, JSON.stringify(rec));
    await rename(tmp, p);
  }
}

/** A fetcher's lock goes stale this long after its holder stopped updating it (SIGKILL, lost host). */
export const LOCK_STALE_MS = 30_000;

/** Hex sha256 of a file's bytes, streamed (checkpoint.ts's sha256File reads the whole file into memory). */
export async function hashFile(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: CHUNK })) h.update(chunk as Buffer);
  return h.digest('hex');
}
