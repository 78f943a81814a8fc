/**
 * Opening a store from its URL:
 *   file:///abs/path  (or a plain path)
 *   s3://bucket/prefix?endpoint=https://…&region=…&forcePathStyle=true&credentials=NAME&idleTimeout=SEC
 * `idleTimeout`: seconds a request's socket may stay silent before the request fails and the SDK
 * tries it again (default 120: a large part on a slow link still moves bytes well within it; a
 * store on a near link can say less, so a wedged request costs seconds, not minutes).
 * Credentials are never in the URL: `credentials=NAME` names environment variables
 * NAME_ACCESS_KEY_ID / NAME_SECRET_ACCESS_KEY; without it the SDK's default chain is used
 * (AWS_ACCESS_KEY_ID, ~/.aws/credentials, …).
 */
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FileStore } from './file.js';
import type { S3StoreOptions } from './s3.js';
import type { ObjectStore } from './types.js';

export type { ObjectStore, ObjectInfo, TransferResult } from './types.js';
export { FileStore } from './file.js';

/** The S3 store's options a `s3://` URL names (credentials from `env`); throws on a bad value. */
export function s3OptionsFromUrl(url: string, env: NodeJS.ProcessEnv): S3StoreOptions {
  const u = new URL(url);
  const q = u.searchParams;
  const cred = q.get('credentials');
  let credentials: { accessKeyId: string; secretAccessKey: string } | undefined;
  if (cred) {
    const id = env[`${cred}_ACCESS_KEY_ID`];
    const secret = env[`${cred}_SECRET_ACCESS_KEY`];
    if (!id || !secret)
      throw new Error(`store credentials ${cred}_ACCESS_KEY_ID / ${cred}_SECRET_ACCESS_KEY are not set`);
    credentials = { accessKeyId: id, secretAccessKey: secret };
  }
  const idle = q.get('idleTimeout');
  if (idle !== null && !/^[1-9]\d{0,5}$/.test(idle))
    throw new Error(`store URL idleTimeout=${idle} is not a number of seconds (1 to 999999)`);
  return {
    bucket: u.hostname,
    prefix: decodeURIComponent(u.pathname.replace(/^\//, '')),
    ...(q.get('endpoint') ? { endpoint: q.get('endpoint')! } : {}),
    ...(q.get('region') ? { region: q.get('region')! } : {}),
    ...(q.get('forcePathStyle') === 'true' ? { forcePathStyle: true } : {}),
    ...(credentials ? { credentials } : {}),
    ...(idle ? { requestIdleMs: Number(idle) * 1000 } : {}),
  };
}

export async function openStore(url: string, env: NodeJS.ProcessEnv = process.env): Promise<ObjectStore> {
  if (url.startsWith('s3://')) {
    const opts = s3OptionsFromUrl(url, env);
    // Loaded only when needed: the SDK is most of what adv exec would otherwise load.
    const { S3Store } = await import('./s3.js');
    return new S3Store(opts);
  }
  if (url.startsWith('file://')) return new FileStore(fileURLToPath(url));
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url))
    throw new Error(`unsupported store URL ${url}: use file:///path or s3://bucket/prefix`);
  return new FileStore(resolve(url));
}
