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

import { createHash } from 'node:crypto';
// The base and the setup variables are the worker side's own (the agent starts jobs with them too).
export { JOB_BASE_ENV, baseJobEnv, setupVariables } from '../../runtime/job-env.js';

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

/** The variable that names a run for experiment trackers, the same in every attempt. */
export const TRACKING_ID_ENV = 'ADV_TRACKING_ID';

/**
 * A run's tracking id: stable across its attempts, so a resumed attempt continues the same tracked
 * run (W&B, anything keyed by an id the client chooses). `anchor` tells runs of one name apart
 * where they are different runs: the controller passes when it first saw the run (its status's
 * `createdAt`), `adv run` the store its checkpoints are in. Lowercase letters, digits and `-`,
 * at most 64 characters: what W&B takes as a run id.
 */
export function trackingId(run: string, anchor: string): string {
  const hash = createHash('sha256').update(`${run}\n${anchor}`).digest('hex').slice(0, 8);
  const readable = run
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .slice(0, 55)
    .replace(/^-+|-+$/g, '');
  return readable ? `${readable}-${hash}` : hash;
}

/**
 * The tracking variables of a job: `ADV_TRACKING_ID`, and W&B's own (`WANDB_RUN_ID` = it,
 * `WANDB_RESUME=allow`, `WANDB_NAME` = the run, `WANDB_RUN_GROUP` = the DAG or sweep it belongs
 * to). The caller lets the run's own `env` replace the WANDB_* ones.
 */
export function trackingVariables(run: string, anchor: string, group?: string): Record<string, string> {
  const id = trackingId(run, anchor);
  return {
    [TRACKING_ID_ENV]: id,
    WANDB_RUN_ID: id,
    WANDB_RESUME: 'allow',
    WANDB_NAME: run,
    ...(group ? { WANDB_RUN_GROUP: group } : {}),
  };
}
