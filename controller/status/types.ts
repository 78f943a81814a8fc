/**
 * What the controller writes to the status branch: one YAML file per object. Kubernetes-shaped
 * (phase, conditions with observedGeneration) so it reads like `kubectl get -o yaml`.
 */
import { VerifyReason } from '../git/signatures.js';
import type { DagSpec, RunSpec, SweepSpec } from '../spec/schema.js';
import type { AttemptPhase, Phase } from '../phase.js';

/** The phase words are defined once, in phase.ts; these names are where status callers find them. */
export { AttemptPhase, Phase } from '../phase.js';

/**
 * How an attempt ended, as its status records it: the class alone decides what happens next
 * (reconcile/classify.ts assigns it, run-plan.ts acts on it).
 */
export const EndClass = {
  Succeeded: 'Succeeded',
  Preempted: 'Preempted',
  Infrastructure: 'Infrastructure',
  UserError: 'UserError',
  Timeout: 'Timeout',
  Cancelled: 'Cancelled',
  /**
   * A setup step (Backend, Environment or Run `setup`, a module, the uv sync) failed on the host
   * and the workload never started: often host-specific, so the next attempt goes elsewhere first.
   */
  SetupFailed: 'SetupFailed',
  /** The attempt could not start for a reason only a person can fix; no budget, no backend health. */
  Stalled: 'Stalled',
} as const;
export type EndClass = (typeof EndClass)[keyof typeof EndClass];

/** Condition types, documented: what each means when True. */
export const ConditionType = {
  /** The spec passed validation. False carries the loader's file:line message. */
  Valid: 'Valid',
  /** A backend was chosen for the current attempt. */
  Scheduled: 'Scheduled',
  /** The current attempt is running. */
  Ready: 'Ready',
  /** The spec changed in a way the run refused (immutable fields, onSpecChange: Reject). */
  SpecChangeRejected: 'SpecChangeRejected',
  /** A checkpoint has been committed. */
  Checkpointed: 'Checkpointed',
  /** The controller could not reach the backend or the git remote; the state shown may be stale. */
  Stale: 'Stale',
  /**
   * The running attempt's heartbeat is older than policy.heartbeatTimeoutSec (reason
   * `WorkerHeartbeatMissing`: the heartbeat of a process other than 0 of a multi-host attempt).
   */
  Lost: 'Lost',
  /** A process of the current multi-host attempt has not finished its restore: its workload waits. */
  Restoring: 'Restoring',
  /** The current attempt's `adv exec` is fetching the run's datasets (`inputs`): its workload waits. */
  FetchingData: 'FetchingData',
  /** False: the last attempt's exit code is not in `policy.retryOn.exitCodes`, so the run failed at once. */
  Retryable: 'Retryable',
  /** (Backend) It failed several runs in a row; the solver tries it after the others. */
  Degraded: 'Degraded',
  /**
   * A human must act (a secret is not set, `code.ref` names nothing): the controller does not
   * retry on a timer, and it is not counted against the backend. Removed once nothing stalls the run.
   */
  Stalled: 'Stalled',
  /**
   * (Source, with `--trusted-signers`) The watched branch's head is signed by a trusted key and
   * descends from the last verified commit acted on. False: it is not acted on (loop/desired/verified-head.ts).
   */
  Verified: 'Verified',
} as const;

/** Reasons, as constants so tests and users can match on them. */
export const Reason = {
  /** The user code exited with a code `policy.retryOn.exitCodes` does not list: no further attempt. */
  ExitCodeNotRetryable: 'ExitCodeNotRetryable',
  SpecDeleted: 'SpecDeleted',
  Suspended: 'Suspended',
  Completed: 'Completed',
  Error: 'Error',
  AttemptsExhausted: 'AttemptsExhausted',
  SpecInvalid: 'SpecInvalid',
  NoBackend: 'NoBackend',
  SubmitFailed: 'SubmitFailed',
  Adopted: 'Adopted',
  ImmutableFieldChanged: 'ImmutableFieldChanged',
  RestartOnSpecChange: 'RestartOnSpecChange',
  Lost: 'Lost',
  Preempted: 'Preempted',
  BackoffWaiting: 'BackoffWaiting',
  /** Nothing can start the run now and no scheduler can hold it: it waits. */
  NoCapacity: 'NoCapacity',
  /** The attempt sat queued past `policy.queuedTimeoutSec` and was withdrawn. */
  QueuedTimeout: 'QueuedTimeout',
  /** The attempt ran past `policy.maxHours` and was stopped. */
  MaxHoursExceeded: 'MaxHoursExceeded',
  /** The run's attempts together ran past `policy.maxTotalHours`. */
  TotalTimeExceeded: 'TotalTimeExceeded',
  /** The run's attempts together cost more than `policy.maxCost`. */
  CostLimitExceeded: 'CostLimitExceeded',
  /** The job could not be observed past the threshold and sent no heartbeat. */
  Unreachable: 'Unreachable',
  /** `code.ref` names no branch, tag or commit of the repository (stalled). */
  CodeRefNotFound: 'CodeRefNotFound',
  /** The code repository (`code.repo`) or a submodule of it is being fetched: the run waits. */
  FetchingCode: 'FetchingCode',
  /** The code repository or a submodule could not be fetched (token, URL, network); retried. */
  CodeFetchFailed: 'CodeFetchFailed',
  /** The code cannot ship as it is (a submodule URL refused, over the size limits); stalled. */
  CodeRepoInvalid: 'CodeRepoInvalid',
  /** A secret in `spec.secrets` is not set where the controller looks for it (stalled). */
  SecretMissing: 'SecretMissing',
  /** `spec.forkFrom` names a checkpoint the store does not have committed (stalled). */
  ForkSourceMissing: 'ForkSourceMissing',
  /** (Source) Some documents of the specs repo could not be loaded. */
  LoadFailed: 'LoadFailed',
  /** (Source) Every document loaded. */
  Loaded: 'Loaded',
  /** (Source) The head is signed by a key of the trusted signers file. */
  TrustedSigner: 'TrustedSigner',
  /** (Source) Why a head is not acted on: the signature check's own words (git/signatures.ts). */
  ...VerifyReason,
} as const;

/** One aspect of a status, Kubernetes-style: True, False or Unknown, with the reason why. */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: string;
}

/** One submission of a run to a backend, and how it went. */
export interface Attempt {
  n: number;
  backend: string;
  jobName: string;
  jobId?: string;
  phase: AttemptPhase;
  submittedAt?: string;
  startedAt?: string;
  finishedAt?: string;
  exitCode?: number;
  reason?: string;
  message?: string;
  /** Spec commit this attempt was submitted for. */
  specCommit: string;
  /** Code commit shipped to the backend. */
  codeCommit?: string;
  /** Id of the controller that wrote the write-ahead record (only it completes the submission). */
  controller?: string;
  /**
   * Its price when it was chosen (`attemptCost` turns it into money): the Backend's
   * `capabilities.costPerHour` × the nodes the run spans, billed from `submitted` where the backend
   * creates what it runs on (a TPU node bills from its create), else from `started`.
   */
  price?: { perHour: number; from: 'submitted' | 'started' };
  /** Checkpoint step this attempt restored from (absent: from scratch). */
  startStep?: number;
  /** Latest checkpoint this attempt committed. */
  lastStep?: number;
  /** When that checkpoint was committed: work after it is lost if the attempt ends badly. */
  lastStepAt?: string;
  /** What the end was (classify.ts): decides whether and how the run goes on. */
  class?: EndClass;
  /** The solver's decision for this attempt: every backend looked at, and why. */
  why?: string;
}

/** The latest committed checkpoint of a run, as `adv exec` reported it. */
export interface CheckpointRef {
  step: number;
  createdAt: string;
  uri: string;
}

/** What `adv exec` writes to `runs/<run>/attempts/<n>/heartbeat.json`: one type for writer and reader. */
export type { Heartbeat } from '../../runtime/heartbeat.js';

/** A Run's status: its phase, conditions and every attempt. */
export interface RunStatus {
  phase: Phase;
  /** When the controller first saw the run. */
  createdAt?: string;
  reason?: string;
  message?: string;
  /** Hash of the spec last acted on. */
  observedGeneration?: string;
  /** Commit of the watched branch the spec last acted on came from. */
  specCommit?: string;
  specFile?: string;
  /** Code commit, pinned at the first submission. */
  codeCommit?: string;
  /** The repository `codeCommit` is from, when it is not the specs repo (`code.repo`). */
  codeRepo?: string;
  /** DAG that owns this run, if any. */
  owner?: string;
  conditions: Condition[];
  attempts: Attempt[];
  /** Not before this time is the next attempt submitted (backoff). */
  nextAttemptAfter?: string;
  /** Last value of the reconcile-requested-at annotation handled. */
  lastHandledReconcileAt?: string;
  /** Last value of the retry-requested-at annotation handled (`adv retry`). */
  lastHandledRetryAt?: string;
  /** Failures count from this attempt on (`adv retry` gives a fresh budget). */
  budgetFromAttempt?: number;
  /** Time of the last heartbeat of the current attempt. */
  lastHeartbeat?: string;
  /** The latest committed checkpoint. */
  checkpoint?: CheckpointRef;
  /** The run and checkpoint step it was forked from (`spec.forkFrom`): its lineage. */
  forkedFrom?: { run: string; step: number };
}

/** A Run's status file on the status branch. */
export interface RunStatusDoc {
  apiVersion: 'adventuretime.dev/v1alpha1';
  kind: 'RunStatus';
  metadata: { name: string; labels?: Record<string, string> };
  /** The spec last acted on: the base of the next JSON Patch diff. */
  appliedSpec?: RunSpec;
  status: RunStatus;
}

/** A Backend's status file: its health as the controller saw it. */
export interface BackendStatusDoc {
  apiVersion: 'adventuretime.dev/v1alpha1';
  kind: 'BackendStatus';
  metadata: { name: string };
  status: {
    type: string;
    conditions: Condition[];
    activeAttempts: number;
    /** Runs whose latest attempt here failed, most recent last, since its last success. */
    failureStreak?: { run: string; attempt: number; class: string; finishedAt: string }[];
  };
}

/** One node of a DAG, as the DAG's status file shows it. */
export interface DagNodeStatus {
  /** The child run's phase, or `Waiting` (not created yet) or `Skipped` (an upstream failed). */
  phase: Phase | 'Waiting' | 'Skipped';
  /** The child run: `<dag>.<node>`. */
  run: string;
  attempts?: number;
  reason?: string;
  /** Why it waits: "waiting for train (Running)". */
  message?: string;
  startedAt?: string;
  finishedAt?: string;
  /** When the node last changed phase. */
  since?: string;
}

/** A DAG's status file: its phase and every node's. */
/** What the status of an object that owns child runs (a DAG, a Sweep) says about itself. */
export interface OwnerStatusCore {
  phase: Phase;
  reason?: string;
  message?: string;
  createdAt?: string;
  observedGeneration?: string;
  specCommit?: string;
  specFile?: string;
  conditions: Condition[];
}

export interface DagStatusDoc {
  apiVersion: 'adventuretime.dev/v1alpha1';
  kind: 'DAGStatus';
  metadata: { name: string; labels?: Record<string, string> };
  /** The spec last acted on (used while a later version is invalid). */
  appliedSpec?: DagSpec;
  status: OwnerStatusCore & {
    /** Every node, by id. */
    nodes: Record<string, DagNodeStatus>;
    /** Nodes by phase. */
    counts?: Record<string, number>;
  };
}

/** One point of a Sweep, as the Sweep's status file shows it. */
export interface SweepPointStatus {
  /** The child run's phase, or `Waiting` (no child run yet: `maxConcurrent`, or the sweep is suspended). */
  phase: Phase | 'Waiting';
  /** The point's parameters. */
  params: Record<string, string | number | boolean>;
  attempts?: number;
  reason?: string;
  message?: string;
  /** When the point last changed phase. */
  since?: string;
}

/** A Sweep's status file: its phase, every point's (by child run name) and counts by phase. */
export interface SweepStatusDoc {
  apiVersion: 'adventuretime.dev/v1alpha1';
  kind: 'SweepStatus';
  metadata: { name: string; labels?: Record<string, string> };
  /** The spec last acted on (used while a later version is invalid). */
  appliedSpec?: SweepSpec;
  status: OwnerStatusCore & {
    /** Every point of the spec acted on, by child run name (`<sweep>-<hash8>`), in expansion order. */
    points: Record<string, SweepPointStatus>;
    /** Points by phase. */
    counts?: Record<string, number>;
  };
}

/**
 * A problem that kept a document of the specs repo from loading, where it is and how to fix it.
 * Recorded by file, never by the document's name: a name that failed validation is not a key.
 */
export interface LoadError {
  file: string;
  line: number;
  column: number;
  /** The loader's diagnostic code (`YamlSyntax`, `FileTooLarge`, `SchemaPattern`, …). */
  code: string;
  /** The document's kind, when it says one. */
  kind?: string;
  message: string;
  fix?: string;
}

/**
 * The specs repo as the controller last loaded it (`sources/specs.yaml`), as Flux reports a
 * source's errors on its object: every document that could not be loaded and is not reported on a
 * Run's or DAG's own status (a whole file that does not parse, a name that is not a name, a bad
 * Backend or Storage). `Ready` is False while there is any.
 */
export interface SourceStatusDoc {
  apiVersion: 'adventuretime.dev/v1alpha1';
  kind: 'SourceStatus';
  metadata: { name: string };
  status: {
    conditions: Condition[];
    /** The watched branch's commit at which this set of errors was first seen. */
    since?: string;
    errorCount: number;
    /** By file and line: the first few of each file, at most a few hundred (all are counted). */
    errors: LoadError[];
    /** With `--trusted-signers`: the last commit of the watched branch that verified and was acted on. */
    verified?: { commit: string; signer: string };
    /** With `--trusted-signers`: the head that was not acted on, and why (see the `Verified` condition). */
    refused?: { commit: string; reason: string };
  };
}

/** Where one event of an Alert stands: recorded pending, then delivered, or failed for good. */
export interface AlertDelivery {
  event: string;
  /** `run/foo`, `dag/bar`, `sweep/baz`. */
  object: string;
  attempt: number;
  /** When the event happened, as the object's status says. */
  at: string;
  state: 'pending' | 'delivered' | 'failed';
  tries: number;
  /** Not before this time is it tried again (backoff). */
  nextTryAt?: string;
  lastError?: string;
  deliveredAt?: string;
  /** What the message says: the object's phase, reason and message, and its spec commit. */
  phase?: string;
  reason?: string;
  message?: string;
  specCommit?: string;
  labels?: Record<string, string>;
}

/** An Alert's status file (`alerts/<name>.yaml`): its outbox, by event id. */
export interface AlertStatusDoc {
  apiVersion: 'adventuretime.dev/v1alpha1';
  kind: 'AlertStatus';
  metadata: { name: string };
  status: {
    /** Events that happened before this are not recorded (when the Alert was first seen, or pruned up to). */
    since: string;
    provider: string;
    conditions: Condition[];
    counts: { pending: number; delivered: number; failed: number };
    /** By event id (`Run/foo/2/RunFailed`): the receiver's idempotency key. */
    deliveries: Record<string, AlertDelivery>;
  };
}

/** Any status file. */
export type StatusDoc =
  | RunStatusDoc
  | BackendStatusDoc
  | DagStatusDoc
  | SweepStatusDoc
  | SourceStatusDoc
  | { kind: string; metadata: { name: string } };

/** Folder of each status kind on the status branch. */
export const STATUS_DIRS = {
  Run: 'runs',
  DAG: 'dags',
  Backend: 'backends',
  Source: 'sources',
  Alert: 'alerts',
  Sweep: 'sweeps',
} as const;
/** The name of the watched specs' source status: `sources/specs.yaml`. */
export const SPECS_SOURCE = 'specs';
/** A kind that has status files. */
export type StatusKind = keyof typeof STATUS_DIRS;

/** Sets or replaces a condition, keeping lastTransitionTime when the status did not change. */
export function setCondition(
  list: Condition[],
  c: Omit<Condition, 'lastTransitionTime'>,
  now: string,
): Condition[] {
  const prev = list.find((x) => x.type === c.type);
  if (
    prev &&
    prev.status === c.status &&
    prev.reason === c.reason &&
    prev.message === c.message &&
    prev.observedGeneration === c.observedGeneration
  ) {
    return list;
  }
  const next: Condition = {
    ...c,
    lastTransitionTime: prev && prev.status === c.status ? prev.lastTransitionTime : now,
  };
  if (next.observedGeneration === undefined) delete next.observedGeneration;
  return [...list.filter((x) => x.type !== c.type), next];
}

/** Removes a condition; the same list when it had none, so callers can tell nothing changed. */
export function removeCondition(list: Condition[], type: string): Condition[] {
  return list.some((c) => c.type === type) ? list.filter((c) => c.type !== type) : list;
}
