/**
 * An S3-compatible store (AWS S3, MinIO, R2, …) through @aws-sdk/client-s3; multipart uploads
 * through @aws-sdk/lib-storage with a part size that grows with the object (5 MiB parts would cap
 * an object at ~48 GiB: S3 allows 10,000 parts). Throttling and 5xx are retried by the SDK's
 * standard retry strategy, and whole transfers once more by `withRetries`, since a failed stream
 * cannot be replayed by the SDK.
 */
import { createReadStream } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCopyCommand,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { CHUNK, hashing, openForWrite } from './file.js';
import {
  assertSafeKey,
  type ObjectInfo,
  type ObjectStore,
  type GetOptions,
  type TransferOptions,
  type TransferResult,
} from './types.js';

export interface S3StoreOptions {
  bucket: string;
  prefix?: string;
  endpoint?: string;
  region?: string;
  forcePathStyle?: boolean;
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** SDK attempts per request (default 8). */
  maxAttempts?: number;
  /** Whole-transfer retries on top (default 4). */
  transferRetries?: number;
  /** Backoff base for whole-transfer retries, ms (default 500). */
  retryBaseMs?: number;
  /**
   * A request whose socket is idle this long (nothing sent or received) fails and is retried
   * (default REQUEST_IDLE_MS); connecting gets CONNECT_MS. Without them a server that accepts and
   * never answers holds a request — and what waits on it: a heartbeat, adv exec's end — for ever.
   */
  requestIdleMs?: number;
}

/** The largest object one CopyObject may copy (5 GiB); a larger one is copied part by part. */
export const COPY_MAX_SINGLE = 5 * 1024 ** 3;

/** Default of `requestIdleMs`: a large part on a slow link still moves bytes well within it. */
export const REQUEST_IDLE_MS = 120_000;
const CONNECT_MS = 30_000;

const MiB = 1024 * 1024;

/** Part size for an object of `size` bytes: at least 8 MiB, and few enough parts (≤ 9,000). */
export function partSizeFor(size: number): number {
  return Math.max(8 * MiB, Math.ceil(size / 9000 / MiB) * MiB);
}

export function isRetryable(e: unknown): boolean {
  const err = e as {
    name?: string;
    code?: string;
    $metadata?: { httpStatusCode?: number };
    $retryable?: unknown;
  };
  const status = err.$metadata?.httpStatusCode ?? 0;
  return (
    status >= 500 ||
    status === 429 ||
    Boolean(err.$retryable) ||
    /Throttl|SlowDown|RequestTimeout|InternalError|ServiceUnavailable|TimeoutError|ECONNRESET|ECONNREFUSED|EPIPE|socket hang up/i.test(
      `${err.name ?? ''} ${err.code ?? ''} ${(e as Error).message ?? ''}`,
    )
  );
}

export class S3Store implements ObjectStore {
  readonly url: string;
  readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly retries: number;
  private readonly retryBaseMs: number;

  constructor(opts: S3StoreOptions) {
    this.bucket = opts.bucket;
    this.prefix = opts.prefix ? opts.prefix.replace(/^\/+|\/+$/g, '') + '/' : '';
    this.url = `s3://${opts.bucket}/${this.prefix}`;
    this.retries = opts.transferRetries ?? 4;
    this.retryBaseMs = opts.retryBaseMs ?? 500;
    const config: S3ClientConfig = {
      region: opts.region ?? 'us-east-1',
      maxAttempts: opts.maxAttempts ?? 8,
      retryMode: 'standard',
      ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
      ...(opts.forcePathStyle ? { forcePathStyle: true } : {}),
      ...(opts.credentials ? { credentials: opts.credentials } : {}),
      // An idle socket, not a whole request: a large part on a slow link keeps moving bytes.
      requestHandler: {
        socketTimeout: opts.requestIdleMs ?? REQUEST_IDLE_MS,
        connectionTimeout: Math.min(CONNECT_MS, opts.requestIdleMs ?? CONNECT_MS),
      },
    };
    this.client = new S3Client(config);
  }

  private k(key: string): string {
    assertSafeKey(key);
    return this.prefix + key;
  }

  /** Retries a whole transfer with exponential backoff when the failure is transient. */
  private async withRetries<T>(what: string, fn: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn();
      } catch (e) {
        if (attempt >= this.retries || !isRetryable(e))
          throw new Error(`${what}: ${(e as Error).message}`, { cause: e });
        await new Promise((r) => setTimeout(r, this.retryBaseMs * 2 ** attempt));
      }
    }
  }

  async put(key: string, body: Uint8Array | string): Promise<void> {
    await this.withRetries(`put ${key}`, () =>
      this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.k(key), Body: body })),
    );
  }

  async putFile(key: string, path: string, opts: TransferOptions = {}): Promise<TransferResult> {
    const { size } = await stat(path);
    return this.withRetries(`upload ${path} to ${key}`, async () => {
      const h = hashing(opts.onProgress);
      const body = createReadStream(path, { highWaterMark: CHUNK }).pipe(h);
      const upload = new Upload({
        client: this.client,
        params: { Bucket: this.bucket, Key: this.k(key), Body: body, ContentLength: size },
        partSize: partSizeFor(size),
        queueSize: 4,
        leavePartsOnError: false,
      });
      await upload.done();
      return h.result();
    });
  }

  async get(key: string): Promise<Uint8Array | undefined> {
    return this.withRetries(`get ${key}`, async () => {
      try {
        const r = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.k(key) }));
        return await r.Body!.transformToByteArray();
      } catch (e) {
        if (isMissing(e)) return undefined;
        throw e;
      }
    });
  }

  async getToFile(key: string, path: string, opts: GetOptions = {}): Promise<TransferResult | undefined> {
    const offset = opts.offset ?? 0;
    return this.withRetries(`download ${key}`, async () => {
      let r;
      try {
        r = await this.client.send(
          new GetObjectCommand({
            Bucket: this.bucket,
            Key: this.k(key),
            ...(offset ? { Range: `bytes=${offset}-` } : {}),
          }),
        );
      } catch (e) {
        if (isMissing(e)) return undefined;
        throw e;
      }
      await mkdir(dirname(path), { recursive: true });
      const h = hashing(opts.onProgress);
      // Each try starts again from `offset` (openForWrite cuts what a failed try appended).
      await pipeline(r.Body as Readable, h, await openForWrite(path, offset));
      return h.result();
    });
  }

  async getStream(key: string): Promise<Readable | undefined> {
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.k(key) }));
      return r.Body as Readable;
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw e;
    }
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    return this.withRetries(`head ${key}`, async () => {
      try {
        const r = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.k(key) }));
        return {
          key,
          size: r.ContentLength ?? 0,
          ...(r.LastModified ? { lastModified: r.LastModified } : {}),
        };
      } catch (e) {
        if (isMissing(e)) return undefined;
        throw e;
      }
    });
  }

  /** Every page of a ListObjectsV2 (1,000 keys a page), with or without a delimiter. */
  private async *pages(prefix: string, delimiter?: string) {
    let token: string | undefined;
    do {
      const page = await this.withRetries(`list ${prefix}`, () =>
        this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: this.prefix + prefix,
            ...(delimiter ? { Delimiter: delimiter } : {}),
            ...(token ? { ContinuationToken: token } : {}),
          }),
        ),
      );
      yield page;
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async *list(prefix: string): AsyncIterable<ObjectInfo> {
    for await (const page of this.pages(prefix)) {
      for (const o of page.Contents ?? []) {
        yield {
          key: o.Key!.slice(this.prefix.length),
          size: o.Size ?? 0,
          ...(o.LastModified ? { lastModified: o.LastModified } : {}),
        };
      }
    }
  }

  async listFolders(prefix: string): Promise<string[]> {
    const out: string[] = [];
    for await (const page of this.pages(prefix, '/')) {
      for (const p of page.CommonPrefixes ?? []) out.push(p.Prefix!.slice(this.prefix.length));
    }
    return out.sort();
  }

  /** Server-side: CopyObject, or UploadPartCopy part by part past COPY_MAX_SINGLE. */
  async copy(src: string, dst: string): Promise<boolean> {
    const info = await this.head(src);
    if (!info) return false;
    // URL-encoded, as CopySource must be (boto3's quote(key, safe='/~')).
    const source = `${this.bucket}/${this.k(src).split('/').map(encodeURIComponent).join('/')}`;
    const Key = this.k(dst);
    if (info.size <= COPY_MAX_SINGLE) {
      await this.withRetries(`copy ${src} to ${dst}`, () =>
        this.client.send(new CopyObjectCommand({ Bucket: this.bucket, Key, CopySource: source })),
      );
      return true;
    }
    await this.withRetries(`copy ${src} to ${dst}`, () => this.copyInParts(source, Key, info.size));
    return true;
  }

  /** A multipart upload whose parts are ranges of the source; aborted when a part fails. */
  private async copyInParts(source: string, Key: string, size: number): Promise<void> {
    const { UploadId } = await this.client.send(
      new CreateMultipartUploadCommand({ Bucket: this.bucket, Key }),
    );
    // Big parts: each is one server-side request, and S3 allows up to 5 GiB per part.
    const part = Math.max(512 * MiB, partSizeFor(size));
    try {
      const parts: { ETag: string; PartNumber: number }[] = [];
      for (let start = 0, n = 1; start < size; start += part, n++) {
        const r = await this.client.send(
          new UploadPartCopyCommand({
            Bucket: this.bucket,
            Key,
            UploadId,
            PartNumber: n,
            CopySource: source,
            CopySourceRange: `bytes=${start}-${Math.min(start + part, size) - 1}`,
          }),
        );
        parts.push({ ETag: r.CopyPartResult!.ETag!, PartNumber: n });
      }
      await this.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.bucket,
          Key,
          UploadId,
          MultipartUpload: { Parts: parts },
        }),
      );
    } catch (e) {
      await this.client
        .send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key, UploadId }))
        .catch(() => undefined);
      throw e;
    }
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 16) {
      await Promise.all(
        keys
          .slice(i, i + 16)
          .map((key) =>
            this.withRetries(`delete ${key}`, () =>
              this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.k(key) })),
            ),
          ),
      );
    }
  }
}

function isMissing(e: unknown): boolean {
  const err = e as { name?: string; $metadata?: { httpStatusCode?: number } };
  return err.name === 'NoSuchKey' || err.name === 'NotFound' || err.$metadata?.httpStatusCode === 404;
}
