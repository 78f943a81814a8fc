/**
 * What a job's environment starts from. Jobs inherit nothing else from the controller: its own
 * environment holds the git token, the webhook secret and cloud credentials, which no job may read.
 * A job gets this small base (so a shell, Python or Node finds its way around), then what the
 * controller resolved for it: the run's `env`, its `secrets`, the backend's `passEnv`, and the
 * store's credentials.
 *
 * On hosts reached over SSH the base is the host's own login environment; the controller's never
 * travels there (the adapter writes the job's variables into the job's env file).
 */

import type { JobRequest } from './types.js';

/** Variables a job on the controller's machine takes from the controller's environment. */
export const JOB_BASE_ENV: readonly string[] = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'SHELL',
  'LANG',
  'LANGUAGE',
  'TZ',
  'TMPDIR',
  'TERM',
];

/** The base environment of a job, picked from `from`: `JOB_BASE_ENV` and every `LC_*` locale variable. */
export function baseJobEnv(from: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(from))
    if (v !== undefined && (JOB_BASE_ENV.includes(k) || k.startsWith('LC_'))) out[k] = v;
  return out;
}

/**
 * The values of a backend's `passEnv` names, from `from` (names that are not set there are left
 * out; `missing` lists them so the controller can say so).
 */
export function passedEnv(
  names: readonly string[] | undefined,
  from: NodeJS.ProcessEnv,
): { env: Record<string, string>; missing: string[] } {
  const env: Record<string, string> = {};
  const missing: string[] = [];
  for (const n of names ?? []) {
    const v = from[n];
    if (v === undefined) missing.push(n);
    else env[n] = v;
  }
  return { env, missing };
}

/**
 * The variables that carry a job's setup to `adv exec` (the contract every backend delivers):
 * `ADV_SETUP`, the items as a JSON list, and `ADV_UV`, the uv settings as a JSON object; each
 * left out when there is nothing to say. `ADV_CACHE_DIR` is the backend's own (where its hosts
 * keep uv environments): each adapter adds it.
 */
export function setupVariables(job: Pick<JobRequest, 'setup' | 'uv'>): Record<string, string> {
  return {
    ...(job.setup?.length ? { ADV_SETUP: JSON.stringify(job.setup) } : {}),
    ...(job.uv ? { ADV_UV: JSON.stringify(job.uv) } : {}),
  };
}
