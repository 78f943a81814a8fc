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

/**
 * The variables that hold the store's credentials: `<NAME>_ACCESS_KEY_ID` and
 * `<NAME>_SECRET_ACCESS_KEY` for `credentialsSecret: NAME`, else the AWS SDK's own; none for a
 * `file` store. Only the controller hands them out: no spec may name them as a secret.
 */
export function storeCredentialNames(spec: StorageSpec): string[] {
  if (spec.type !== 's3') return [];
  const prefix = spec.s3?.credentialsSecret;
  return prefix
    ? [`${prefix}_ACCESS_KEY_ID`, `${prefix}_SECRET_ACCESS_KEY`]
    : ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_PROFILE'];
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
  if (s3.credentialsSecret) q.set('credentials', s3.credentialsSecret);
  const prefix = (s3.prefix ?? '').replace(/^\/+|\/+$/g, '');
  const query = q.toString();
  return { url: `s3://${s3.bucket}/${prefix}${query ? `?${query}` : ''}`, ...credentialsOf(spec, env) };
}

/** The store's credentials a job needs, from `env`; those a `credentialsSecret` names but `env` lacks. */
function credentialsOf(spec: StorageSpec, env: NodeJS.ProcessEnv): Omit<StoreTarget, 'url'> {
  const jobEnv: Record<string, string> = {};
  const missing: string[] = [];
  for (const v of storeCredentialNames(spec)) {
    if (env[v]) jobEnv[v] = env[v]!;
    else if (spec.s3?.credentialsSecret) missing.push(v);
  }
  return { env: jobEnv, missing };
}

/**
 * The target of a store named by URL (`--store`, `ADV_STORE`) rather than by a Storage spec: an
 * `s3://` URL's credentials (`?credentials=NAME`, else the AWS SDK's own variables) come from `env`.
 */
export function urlStoreTarget(url: string, env: NodeJS.ProcessEnv = process.env): StoreTarget {
  if (!url.startsWith('s3://')) return { url, env: {}, missing: [] };
  const credentialsSecret = new URL(url).searchParams.get('credentials') ?? undefined;
  const spec: StorageSpec = {
    type: 's3',
    s3: { bucket: '', ...(credentialsSecret ? { credentialsSecret } : {}) },
  };
  return { url, ...credentialsOf(spec, env) };
}
