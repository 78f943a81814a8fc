/**
 * What the `gcp-tpu` adapter derives from a job, without calling anything: the node's name and
 * labels within GCP's rules, the job each worker runs (the multi-host contract), and how a node's
 * state reads as an observation.
 */
import type { Backend as BackendObject } from '../../spec/schema.js';
import { attemptSubdir, CheckpointMode, execModeEnv, launchMode, offeredModes } from '../checkpoint-mode.js';
import { dnsLabelOf, labelValue } from '../names.js';
import { parseTpuType } from '../tpu-slice.js';
import type { BackendTraits, JobRequest } from '../types.js';

export { labelValue };

/** Label every node this adapter creates carries, with the Backend's name as its value. */
export const MANAGED_BY_LABEL = 'adventuretime-backend';
export const RUN_LABEL = 'adventuretime-run';
export const ATTEMPT_LABEL = 'adventuretime-attempt';

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

/** What a `gcp-tpu` Backend offers a job (see `checkpoint-mode.ts`): the descriptor's traits. */
export const TPU_TRAITS: BackendTraits = {
  queuesWhenFull: false,
  multiNode: true,
  tpus: true,
  billsFrom: 'submitted',
  jobNameMax: 63,
  // The node is created with this accelerator type: the slice every job here gets.
  tpuSlice: (spec) =>
    spec.gcpTpu ? parseTpuType(spec.gcpTpu.acceleratorType, spec.gcpTpu.chips) : undefined,
  preemptible: (spec) =>
    spec.gcpTpu?.spot === true ||
    spec.gcpTpu?.preemptible === true ||
    spec.capabilities?.preemptible === true,
  // Each worker VM has a disk of its own: one dir for all is the declared mount, or the store.
  // `auto` never takes the store: a plain-dir workload (rename or COMMITTED) would write there and
  // never finish a step, since in store mode only the framework's commit marker does.
  checkpointModes: (spec) => [
    ...(spec.gcpTpu?.sharedMount ? [CheckpointMode.Shared] : []),
    CheckpointMode.PerProcess,
    CheckpointMode.Store,
  ],
  howToOffer: {
    [CheckpointMode.Shared]:
      'declare gcpTpu.sharedMount (a Filestore or NFS mount every worker has), or use checkpoint.mode: store',
  },
};

/**
 * The `adv exec` options of a job's workers: the run's mode among those this Backend offers (the
 * store only when the job has one), and in `shared` mode the attempt's dir under the mount.
 */
export function workerCheckpointEnv(job: JobRequest, spec: BackendObject['spec']): Record<string, string> {
  const offered = offeredModes(TPU_TRAITS, spec).filter((m) => m !== CheckpointMode.Store || job.store);
  const mode = launchMode(job.spec, TPU_TRAITS, spec, offered);
  const mount = spec.gcpTpu?.sharedMount?.replace(/\/+$/, '');
  return execModeEnv(mode, job.spec, mount ? `${mount}/${attemptSubdir(job)}` : undefined);
}

/**
 * The job worker `k` of `n` runs: the same request with the multi-host facts `adv exec` derives
 * the JAX and torch variables from (one process per worker VM), `TPU_WORKER_ID`, and the checkpoint
 * options (`workerCheckpointEnv`). Worker 0 keeps the job name (its job dir holds the attempt's
 * records); the others get `<job>-w<k>`, so workers that share a file system (or one test machine)
 * never share a job dir.
 */
export function workerJob(
  job: JobRequest,
  k: number,
  n: number,
  coordinator: string,
  checkpoint: Record<string, string> = {},
): JobRequest {
  const id = String(k);
  return {
    ...job,
    jobName: k === 0 ? job.jobName : `${job.jobName}-w${k}`,
    env: {
      ...job.env,
      ADV_PROCESS_ID: id,
      TPU_WORKER_ID: id,
      ADV_NUM_PROCESSES: String(n),
      ADV_COORDINATOR_ADDRESS: coordinator,
      ADV_LOCAL_PROCESS_ID: '0',
      ADV_LOCAL_PROCESS_COUNT: '1',
      ...checkpoint,
      // Each worker has a job dir of its own (bootstrap.ts): no proc-<k> subdir in it.
      ADV_OWN_JOB_DIR: '1',
    },
  };
}
