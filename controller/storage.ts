/**
 * From a `Storage` spec to the store URL jobs and tools use. Credentials stay out of the URL:
 * `credentialsSecret: NAME` makes jobs receive NAME_ACCESS_KEY_ID / NAME_SECRET_ACCESS_KEY from
 * the controller's environment, out of band.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { StorageSpec } from './spec/schema.js';

export interface StoreTarget {
  url: string;
  /** Environment a job needs to reach the store (credentials). */
  env: Record<string, string>;
  /** Names of credential variables that were asked for but are not set. */
  missing: string[];
}

export function storeTarget(
  spec: StorageSpec,
  dataDir: string,
  env: NodeJS.ProcessEnv = process.env,
): StoreTarget {
  if (spec.type === 'file') {
    return { url: pathToFileURL(resolve(dataDir, spec.file?.path ?? 'store')).href, env: {}, missing: [] };
  }
  const s3 = spec.s3!;
  const q = new URLSearchParams();
  if (s3.endpoint) q.set('endpoint', s3.endpoint);
  if (s3.region) q.set('region', s3.region);
  if (s3.forcePathStyle) q.set('forcePathStyle', 'true');
  const jobEnv: Record<string, string> = {};
  const missing: string[] = [];
  if (s3.credentialsSecret) {
    q.set('credentials', s3.credentialsSecret);
    for (const v of [`${s3.credentialsSecret}_ACCESS_KEY_ID`, `${s3.credentialsSecret}_SECRET_ACCESS_KEY`]) {
      if (env[v]) jobEnv[v] = env[v]!;
      else missing.push(v);
    }
  } else {
    for (const v of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE'])
      if (env[v]) jobEnv[v] = env[v]!;
  }
  const prefix = (s3.prefix ?? '').replace(/^\/+|\/+$/g, '');
  const query = q.toString();
  return { url: `s3://${s3.bucket}/${prefix}${query ? `?${query}` : ''}`, env: jobEnv, missing };
}
