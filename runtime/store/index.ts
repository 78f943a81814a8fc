/**
 * Opening a store from its URL:
 *   file:///abs/path  (or a plain path)
 *   s3://bucket/prefix?endpoint=https://…&region=…&forcePathStyle=true&credentials=NAME
 * Credentials are never in the URL: `credentials=NAME` names environment variables
 * NAME_ACCESS_KEY_ID / NAME_SECRET_ACCESS_KEY; without it the SDK's default chain is used
 * (AWS_ACCESS_KEY_ID, ~/.aws/credentials, …).
 */
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FileStore } from './file.js';
import type { ObjectStore } from './types.js';

export type { ObjectStore, ObjectInfo, TransferResult } from './types.js';
export { FileStore } from './file.js';

export async function openStore(url: string, env: NodeJS.ProcessEnv = process.env): Promise<ObjectStore> {
  if (url.startsWith('s3://')) {
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
    // Loaded only when needed: the SDK is most of what adv exec would otherwise load.
    const { S3Store } = await import('./s3.js');
    return new S3Store({
      bucket: u.hostname,
      prefix: decodeURIComponent(u.pathname.replace(/^\//, '')),
      ...(q.get('endpoint') ? { endpoint: q.get('endpoint')! } : {}),
      ...(q.get('region') ? { region: q.get('region')! } : {}),
      ...(q.get('forcePathStyle') === 'true' ? { forcePathStyle: true } : {}),
      ...(credentials ? { credentials } : {}),
    });
  }
  if (url.startsWith('file://')) return new FileStore(fileURLToPath(url));
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url))
    throw new Error(`unsupported store URL ${url}: use file:///path or s3://bucket/prefix`);
  return new FileStore(resolve(url));
}
