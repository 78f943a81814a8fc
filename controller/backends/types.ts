/**
 * The backend port. One adapter per backend type, each in its own folder, registered in
 * `registry.ts`. Adapters act only on what the planner's actions ask for.
 */
import type { Logger } from 'pino';
import { ExitReason } from '../../runtime/records.js';
import type { Backend as BackendObject, BackendType, RunSpec } from '../spec/schema.js';

/** What the controller asks a backend to run: one attempt of one run. */
export interface JobRequest {
  /** Deterministic: `adv-<run>-<attempt>` (shortened with a hash where a backend limits length). */
  jobName: string;
  run: string;
  attempt: number;
  spec: RunSpec;
  /** The argument vector to run inside `adv exec` (from `command` or `entry`). */
  argv: string[];
  /** Code to run: a commit of the specs repo (or `code.repo`), and a sub-path. */
  code: { commit: string; path?: string };
  /** Environment for the workload (contract variables are added by `adv exec`). */
  env: Record<string, string>;
  /** The object store for checkpoints, logs and heartbeats, and the env to reach it. */
  store?: { url: string; env: Record<string, string> };
}

export interface JobHandle {
  backend: string;
  jobName: string;
  /** The backend's own id: a pid, a SLURM job id, … */
  jobId: string;
}

export interface SubmitResult extends JobHandle {
  /** The job already existed under its name and was adopted, not submitted again. */
  adopted?: boolean;
}

/** Observed states, the same for every backend. */
export const JobState = {
  Pending: 'Pending',
  Running: 'Running',
  Succeeded: 'Succeeded',
  Failed: 'Failed',
  Cancelled: 'Cancelled',
  Preempted: 'Preempted',
  /** The job is gone without an end record. */
  Lost: 'Lost',
  /** Cannot observe right now (backend unreachable): not a failure. */
  Unknown: 'Unknown',
} as const;
export type JobState = (typeof JobState)[keyof typeof JobState];

export interface ObservedJob {
  jobName: string;
  jobId: string;
  state: JobState;
  /** The backend's own word for it: `PREEMPTED`, `NonZeroExitCode`, `OUT_OF_MEMORY`, … */
  reason?: string;
  message?: string;
  exitCode?: number;
  startedAt?: string;
  finishedAt?: string;
}

/** What a backend can tell about its free resources right now (for the solver). */
export interface Capacity {
  /** GPUs free to start on now, over the whole backend. */
  freeGpus: number;
  /** SLURM: per partition and GPU type. */
  partitions?: { partition: string; gpuType: string; totalGpus: number; freeGpus: number }[];
  /** A host: each GPU, and whether a process already uses it. */
  gpus?: { index: number; name: string; memoryTotalMiB: number; memoryUsedMiB: number; busy: boolean }[];
  /** Why the figures are partial (no nvidia-smi, …). */
  note?: string;
}

/** Every handle observed as `Unknown`: the backend could not be asked (not a failure). */
export function unobservable(handles: readonly JobHandle[], reason: string, message: string): ObservedJob[] {
  return handles.map((h) => ({
    jobName: h.jobName,
    jobId: h.jobId,
    state: JobState.Unknown,
    reason,
    message,
  }));
}

/** What `adv exec`'s exit record says, as an observation: the same on every backend that has one. */
export function observedFromExit(
  base: { jobName: string; jobId: string },
  x: { exitCode: number; reason: string; message?: string; startedAt?: string; finishedAt?: string },
): ObservedJob {
  const state =
    x.reason === ExitReason.Completed
      ? JobState.Succeeded
      : x.reason === ExitReason.Cancelled
        ? JobState.Cancelled
        : x.reason === ExitReason.Preempted
          ? JobState.Preempted
          : JobState.Failed;
  return {
    ...base,
    state,
    reason: x.reason,
    exitCode: x.exitCode,
    ...(x.message ? { message: x.message } : {}),
    ...(x.startedAt ? { startedAt: x.startedAt } : {}),
    ...(x.finishedAt ? { finishedAt: x.finishedAt } : {}),
  };
}

export interface Backend {
  readonly name: string;
  readonly type: BackendType;
  /** Idempotent by job name: a second submit of the same name returns the existing job. */
  submit(job: JobRequest): Promise<JobHandle>;
  /**
   * Optional: find-or-submit many jobs in one native call (per backend, per pass). Results are in
   * order: a handle (`adopted` when the job already existed under its name) or the error for it.
   */
  submitMany?(jobs: readonly JobRequest[]): Promise<(SubmitResult | Error)[]>;
  /** Finds a job by name (adoption after a crash). */
  find(jobName: string): Promise<JobHandle | undefined>;
  /** ONE native call per backend per poll, for all handles. */
  poll(handles: readonly JobHandle[]): Promise<ObservedJob[]>;
  cancel(handle: JobHandle): Promise<void>;
  logs(handle: JobHandle, opts?: { follow?: boolean; since?: number }): AsyncIterable<string>;
  /** Free resources, where the backend can tell. */
  capacity?(): Promise<Capacity>;
  close?(): Promise<void>;
}

/** What an adapter may use: everything injected, nothing global. */
export interface BackendContext {
  dataDir: string;
  logger: Logger;
  /** The git directory of the specs repo, to export code trees from. */
  gitdir: string;
  now: () => number;
}

export interface BackendFactory {
  type: BackendType;
  create(spec: BackendObject, ctx: BackendContext): Backend;
}

/** `adv-<run>-<n>`, shortened with a hash when longer than `max` (SLURM allows long names; k8s 63). */
export function jobNameFor(run: string, attempt: number, max = 63): string {
  const full = `adv-${run}-${attempt}`;
  if (full.length <= max) return full;
  let h = 0x811c9dc5;
  for (const ch of full) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  const tail = `-${h.toString(36)}-${attempt}`;
  return `adv-${run.slice(0, max - 4 - tail.length)}${tail}`;
}
