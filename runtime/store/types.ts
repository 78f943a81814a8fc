/**
 * The object store port: what `adv exec` and the controller need from S3 or a directory.
 * Keys are `/`-separated, relative to the store's prefix. Writes of one object are atomic in both
 * implementations (S3 PUT; rename in a directory), which the checkpoint protocol builds on.
 */
import type { Readable } from 'node:stream';

export interface ObjectInfo {
  key: string;
  size: number;
  lastModified?: Date;
}

export interface TransferResult {
  size: number;
  /** Hex sha256 of the bytes transferred, computed while they streamed. */
  sha256: string;
}

export interface TransferOptions {
  /** Called with the bytes transferred so far (for progress bars). */
  onProgress?: (bytes: number) => void;
}

export interface GetOptions extends TransferOptions {
  /**
   * Resume: read the object from this byte and append to `path`, which is cut to this length
   * first. The result then counts and hashes only the bytes read (from `offset`).
   */
  offset?: number;
}

export interface ObjectStore {
  /** Where it is, for messages and status (`file:///…`, `s3://bucket/prefix`). Never has secrets. */
  readonly url: string;
  put(key: string, body: Uint8Array | string): Promise<void>;
  /** Uploads a file, hashing it on the way. */
  putFile(key: string, path: string, opts?: TransferOptions): Promise<TransferResult>;
  get(key: string): Promise<Uint8Array | undefined>;
  /** Downloads to a file, hashing on the way; undefined when the object does not exist. */
  getToFile(key: string, path: string, opts?: GetOptions): Promise<TransferResult | undefined>;
  getStream(key: string): Promise<Readable | undefined>;
  head(key: string): Promise<ObjectInfo | undefined>;
  /** Every object under a prefix, recursively. */
  list(prefix: string): AsyncIterable<ObjectInfo>;
  /** The "folders" directly under a prefix (ending in `/`), like `ls`. */
  listFolders(prefix: string): Promise<string[]>;
  delete(keys: readonly string[]): Promise<void>;
  /**
   * Copies one object to another key inside the store (S3 CopyObject; a file copy): the bytes
   * never pass through this process. Atomic like a put. False when `src` does not exist.
   */
  copy(src: string, dst: string): Promise<boolean>;
}

/** Thrown for a key that could escape the store (`..`, absolute, empty segments). */
export function assertSafeKey(key: string): void {
  if (
    !key ||
    key.startsWith('/') ||
    key.split('/').some((s, i, a) => s === '..' || s === '.' || (s === '' && i < a.length - 1))
  ) {
    throw new Error(`unsafe object key ${JSON.stringify(key)}`);
  }
}
