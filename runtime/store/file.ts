/** A directory as an object store (`file:///path`): the embedded default. */
import { createHash } from 'node:crypto';
import { constants, createReadStream, createWriteStream } from 'node:fs';
import {
  copyFile,
  mkdir,
  readdir,
  readFile,
  rename,
  rm,
  rmdir,
  stat,
  truncate,
  writeFile,
} from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { Transform, type Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import {
  assertSafeKey,
  type ObjectInfo,
  type ObjectStore,
  type GetOptions,
  type TransferOptions,
  type TransferResult,
} from './types.js';

const TMP = '.adv-tmp-';
/** Large reads: fewer, bigger chunks through the hash (node streams default to 64 KiB). */
export const CHUNK = 4 * 1024 * 1024;
let seq = 0;

/** A Transform that hashes and counts what passes through. */
export function hashing(onProgress?: (bytes: number) => void): Transform & { result(): TransferResult } {
  const h = createHash('sha256');
  let size = 0;
  const t = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      h.update(chunk);
      size += chunk.length;
      onProgress?.(size);
      cb(null, chunk);
    },
  }) as Transform & { result(): TransferResult };
  t.result = () => ({ size, sha256: h.digest('hex') });
  return t;
}

export class FileStore implements ObjectStore {
  readonly url: string;

  constructor(readonly root: string) {
    // Ends in '/', like the S3 store's, so `url + key` is the object's URI.
    this.url = pathToFileURL(root).href.replace(/\/?$/, '/');
  }

  private path(key: string): string {
    assertSafeKey(key);
    return join(this.root, ...key.split('/'));
  }

  /** Writes to a temporary name in the same folder, then renames: readers never see half a file. */
  private async atomically(key: string, write: (tmp: string) => Promise<void>): Promise<void> {
    const final = this.path(key);
    const tmp = join(dirname(final), `${TMP}${process.pid}-${seq++}`);
    // Twice at most: a `delete` of the folder's last object may prune it between mkdir and write.
    for (let tries = 2; ; tries--) {
      await mkdir(dirname(final), { recursive: true });
      try {
        await write(tmp);
        await rename(tmp, final);
        return;
      } catch (e) {
        await rm(tmp, { force: true });
        if (tries <= 1 || (e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      }
    }
  }

  async put(key: string, body: Uint8Array | string): Promise<void> {
    await this.atomically(key, (tmp) => writeFile(tmp, body));
  }

  async putFile(key: string, path: string, opts: TransferOptions = {}): Promise<TransferResult> {
    const h = hashing(opts.onProgress);
    await this.atomically(key, (tmp) =>
      pipeline(
        createReadStream(path, { highWaterMark: CHUNK }),
        h,
        createWriteStream(tmp, { highWaterMark: CHUNK }),
      ),
    );
    return h.result();
  }

  /** A copy-on-write clone where the file system has them (btrfs, XFS), else a kernel-side copy. */
  async copy(src: string, dst: string): Promise<boolean> {
    const from = this.path(src);
    if (!(await stat(from).catch(() => undefined))?.isFile()) return false;
    await this.atomically(dst, (tmp) => copyFile(from, tmp, constants.COPYFILE_FICLONE));
    return true;
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    return readFile(this.path(key)).catch(notFound);
  }

  async getToFile(key: string, path: string, opts: GetOptions = {}): Promise<TransferResult | undefined> {
    const src = this.path(key);
    if (!(await stat(src).catch(() => undefined))) return undefined;
    const h = hashing(opts.onProgress);
    await mkdir(dirname(path), { recursive: true });
    const start = opts.offset ?? 0;
    await pipeline(
      createReadStream(src, { highWaterMark: CHUNK, start }),
      h,
      await openForWrite(path, start),
    );
    return h.result();
  }

  async getStream(key: string): Promise<Readable | undefined> {
    const p = this.path(key);
    return (await stat(p).catch(() => undefined)) ? createReadStream(p) : undefined;
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    const s = await stat(this.path(key)).catch(() => undefined);
    return s?.isFile() ? { key, size: s.size, lastModified: s.mtime } : undefined;
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    const base =
      prefix.endsWith('/') || prefix === '' ? prefix : prefix.slice(0, prefix.lastIndexOf('/') + 1);
    const dir = base ? this.path(base.slice(0, -1)) : this.root;
    const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
    const out: ObjectInfo[] = [];
    for (const e of entries) {
      if (!e.isFile() || e.name.startsWith(TMP)) continue;
      const full = join(e.parentPath, e.name);
      const key = relative(this.root, full).split(sep).join('/');
      if (!key.startsWith(prefix)) continue;
      const s = await stat(full).catch(() => undefined);
      if (s) out.push({ key, size: s.size, lastModified: s.mtime });
    }
    out.sort((a, b) => (a.key < b.key ? -1 : 1));
    yield* out;
  }

  async listFolders(prefix: string): Promise<string[]> {
    const dir = prefix ? this.path(prefix.replace(/\/$/, '')) : this.root;
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    return entries
      .filter((e) => e.isDirectory())
      .map((e) => `${prefix}${e.name}/`)
      .sort();
  }

  /**
   * Removes the objects, then the folders they leave empty (as S3 has no empty "folders"): a
   * framework that lists the directory itself, as Orbax lists steps, must not find an empty step.
   */
  async delete(keys: readonly string[]): Promise<void> {
    await Promise.all(keys.map((k) => rm(this.path(k), { force: true })));
    const dirs = new Set<string>();
    for (const k of keys)
      for (let d = dirname(this.path(k)); d.startsWith(this.root + sep); d = dirname(d)) dirs.add(d);
    // Deepest first; a folder something else still holds (or writes into) stays.
    for (const d of [...dirs].sort((a, b) => b.length - a.length)) await rmdir(d).catch(() => undefined);
  }
}

/** A write stream at `offset` of `path`: the file cut to that length first (0: a new file). */
export async function openForWrite(path: string, offset: number): Promise<Writable> {
  if (!offset) return createWriteStream(path, { highWaterMark: CHUNK });
  await truncate(path, offset);
  return createWriteStream(path, { highWaterMark: CHUNK, flags: 'a' });
}

function notFound(e: NodeJS.ErrnoException): undefined {
  if (e.code === 'ENOENT' || e.code === 'EISDIR') return undefined;
  throw e;
}
