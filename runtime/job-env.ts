/**
 * What a job's environment starts from on the machine that starts it (the controller's, for the
 * local backend; an agent's host): a small base, never that process's whole environment, which
 * holds tokens and cloud credentials no job may read. The controller's `backends/job-env.ts` adds
 * what it resolves for a job (passEnv, tracking ids).
 */
import type { SetupItem, UvSettings } from './setup.js';

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
 * The variables that carry a job's setup to `adv exec` (the contract every backend delivers):
 * `ADV_SETUP`, the items as a JSON list, and `ADV_UV`, the uv settings as a JSON object; each
 * left out when there is nothing to say. `ADV_CACHE_DIR` is the backend's own (where its hosts
 * keep uv environments): each adapter adds it.
 */
export function setupVariables(job: {
  setup?: readonly SetupItem[];
  uv?: UvSettings;
}): Record<string, string> {
  return {
    ...(job.setup?.length ? { ADV_SETUP: JSON.stringify(job.setup) } : {}),
    ...(job.uv ? { ADV_UV: JSON.stringify(job.uv) } : {}),
  };
}
