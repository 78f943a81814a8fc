/**
 * What the `gcp-tpu` adapter derives from a job, without calling anything: the node's name and
 * labels within GCP's rules, the job each worker runs (the multi-host contract), and how a node's
 * state reads as an observation.
 */
import { dnsLabelOf, labelValue } from '../names.js';
import type { JobRequest } from '../types.js';

export { labelValue };

/** Label every node this adapter creates carries, with the Backend's name as its value. */
export const MANAGED_BY_LABEL = 'adventuretime-backend';
export const RUN_LABEL = 'adventuretime-run';
export const ATTEMPT_LABEL = 'adventuretime-attempt';

/** The JAX coordinator's default port on worker 0. */
export const DEFAULT_COORDINATOR_PORT = 8476;

/**
 * A node name for a job name (GCP's rule: a lowercase RFC 1035 label of at most 63 characters):
 * see `dnsLabelOf`.
 */
export const nodeNameOf = (jobName: string): string => dnsLabelOf(jobName);

/** The labels of a job's node: who manages it, and which run and attempt it serves. */
export function nodeLabels(
  backend: string,
  job: Pick<JobRequest, 'run' | 'attempt'>,
): Record<string, string> {
  return {
    [MANAGED_BY_LABEL]: labelValue(backend),
    [RUN_LABEL]: labelValue(job.run),
    [ATTEMPT_LABEL]: String(job.attempt),
  };
}

/**
 * The job worker `k` of `n` runs: the same request with the multi-host contract (as on SLURM) and
 * `TPU_WORKER_ID`, so `jax.distributed.initialize()` needs no arguments. Worker 0 keeps the job
 * name (its job dir holds the attempt's records); the others get `<job>-w<k>`, so workers that
 * share a file system (or one test machine) never share a job dir.
 */
export function workerJob(job: JobRequest, k: number, n: number, coordinator: string): JobRequest {
  const id = String(k);
  return {
    ...job,
    jobName: k === 0 ? job.jobName : `${job.jobName}-w${k}`,
    env: {
      ...job.env,
      ADV_PROCESS_ID: id,
      JAX_PROCESS_ID: id,
      TPU_WORKER_ID: id,
      ADV_NUM_PROCESSES: String(n),
      JAX_NUM_PROCESSES: String(n),
      ADV_COORDINATOR_ADDRESS: coordinator,
      JAX_COORDINATOR_ADDRESS: coordinator,
      // Each worker has a job dir of its own (bootstrap.ts): no proc-<k> subdir in it.
      ADV_OWN_JOB_DIR: '1',
    },
  };
}
