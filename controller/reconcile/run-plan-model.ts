/**
 * The Run planner's vocabulary: what goes in (desired, current, observed, context), what comes
 * out (the next status and actions), the pipeline's working state (`RunWork`), its constants, and
 * the small status-document helpers every step uses. No planning happens here; run-plan.ts composes the steps.
 */
import { createHash } from 'node:crypto';
import type { ObservedJob } from '../backends/types.js';
import type { CodeRepoState } from '../git/code-repos.js';
import type { RunSpec } from '../spec/schema.js';
import { LIVE_ATTEMPT_PHASES } from '../status/phases.js';
import {
  AttemptPhase,
  ConditionType,
  Phase,
  Reason,
  removeCondition,
  setCondition,
  type Attempt,
  type Condition,
  type Heartbeat,
  type RunStatus,
  type RunStatusDoc,
} from '../status/types.js';
import type { BackendInfo } from './solver.js';

/** Changing its value asks for a pass over the run now (`adv reconcile run NAME`). */
export const RECONCILE_ANNOTATION = 'adventuretime.dev/reconcile-requested-at';
/** Changing its value asks for a new attempt of a finished run (`adv retry`). */
export const RETRY_ANNOTATION = 'adventuretime.dev/retry-requested-at';

/** A run as git asks for it: its spec, where it was declared, and its generation. */
export interface DesiredRun {
  name: string;
  spec: RunSpec;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  generation: string;
  file: string;
  owner?: string;
}

/** A run whose spec failed validation: its first error, located. */
export interface InvalidRun {
  name: string;
  file: string;
  line: number;
  column: number;
  message: string;
}

/** What the planner knows besides the run itself; resolved by the caller, so planning stays pure. */
export interface PlanContext {
  now: number;
  /** Commit of the watched branch being acted on. */
  specCommit: string;
  backends: readonly BackendInfo[];
  /** `code.ref` → commit, resolved by the caller; a missing entry means the ref does not exist. */
  codeRefs: ReadonlyMap<string, string>;
  /**
   * Run name → where its code from another repository (`code.repo`) stands, found by the caller
   * (`resolveCodeRepos`). A run with `code.repo` and no entry waits for its code.
   */
  codeRepos?: ReadonlyMap<string, CodeRepoState>;
  /** This controller's id: it completes only its own write-ahead records, unless they are stale. */
  controllerId?: string;
  /**
   * A message naming the secrets of `names` that do not resolve and where the controller looked
   * (`secret WANDB_API_KEY is not set: looked in the controller's environment`); undefined when
   * all resolve. Absent: secrets are not checked before submitting.
   */
  missingSecrets?: (names: readonly string[]) => string | undefined;
}

/** What `planRun` plans from: the run's desired, current and observed state. */
export interface RunPlanInput {
  name: string;
  desired?: DesiredRun;
  invalid?: InvalidRun;
  current?: RunStatusDoc;
  observed?: ObservedJob;
  /** The current attempt's heartbeat from the object store, when read this pass. */
  heartbeat?: Heartbeat;
}

/** A write-ahead record of another controller older than this is taken over (that one is gone). */
export const SUBMIT_TAKEOVER_MS = 5 * 60_000;

/** How long a restart waits for the cancelled attempt's last checkpoint. */
export const RESTART_GRACE_MS = 15_000;

/** A running attempt without a heartbeat for this long gets the `Lost` condition. */
export const DEFAULT_HEARTBEAT_TIMEOUT_SEC = 600;

/** What the controller does for a run after the plan; the planner itself does no I/O. */
export type RunAction =
  /** Find the job by name and adopt it; submit only if it does not exist. */
  | { type: 'submit'; run: string; attempt: number; backend: string; jobName: string }
  | { type: 'cancel'; run: string; attempt: number; backend: string; jobName: string; jobId?: string };

/** The planner's answer: the next status, its one-line summary, and the actions. */
export interface RunPlan {
  /** The next status; the same object as `current` when nothing changed. */
  doc: RunStatusDoc | undefined;
  summary?: string;
  actions: RunAction[];
  /** Look again after this long even without an event (backoff, no backend yet). */
  requeueAfterMs?: number;
}

/** Spec fields whose change cannot be applied to a live attempt. */
export const IMMUTABLE_FIELDS = [
  'command',
  'entry',
  'code',
  'resources',
  'parallelism',
  'env',
  'secrets',
  'setup',
  'workingDir',
  // Resolved to `name@version#digest` (desired.ts): a new version or an edit of it is a change.
  'environment',
  // Each input's dataset, resolved the same way (spec/datasets.ts).
  'inputs',
  // Where the first attempt started from: a fork that has run cannot start elsewhere.
  'forkFrom',
] as const;

/** Hash of the canonical JSON of a spec: its generation. */
export function generationOf(spec: unknown): string {
  return createHash('sha256').update(canonicalJson(spec)).digest('hex').slice(0, 16);
}

/** JSON with object keys sorted and undefined members left out: equal values give equal text. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(v)
    .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`).join(',')}}`;
}

/** The attempt may still have a job on its backend (see LIVE_ATTEMPT_PHASES). */
export const isLiveAttempt = (a: Attempt | undefined): a is Attempt =>
  a !== undefined && LIVE_ATTEMPT_PHASES.has(a.phase);

/** The action that cancels attempt `a`'s job. */
export function cancelAction(run: string, a: Attempt): RunAction {
  return {
    type: 'cancel',
    run,
    attempt: a.n,
    backend: a.backend,
    jobName: a.jobName,
    ...(a.jobId ? { jobId: a.jobId } : {}),
  };
}

/** Marks a live attempt cancelled by the controller (its job is cancelled by the action). */
export function markCancelled(a: Attempt, reason: string, now: string): void {
  Object.assign(a, { phase: AttemptPhase.Cancelled, reason, finishedAt: now });
}

/** The status of a run seen for the first time. */
export function newDoc(name: string, nowMs: number): RunStatusDoc {
  return {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'RunStatus',
    metadata: { name },
    status: {
      phase: Phase.Pending,
      createdAt: new Date(nowMs).toISOString(),
      conditions: [],
      attempts: [],
    },
  };
}

/**
 * A deep copy, so a plan never edits the status it was given. Status documents are plain data
 * (what YAML parses to): copied member by member, ~4× faster than `structuredClone`, which a pass
 * over 1,000 live runs calls 1,000 times; anything else falls back to it.
 */
export function clone<T>(v: T): T {
  return v === undefined ? v : (copyData(v) as T);
}

function copyData(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(copyData);
  const proto = Object.getPrototypeOf(v) as unknown;
  if (proto !== Object.prototype && proto !== null) return structuredClone(v);
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) out[k] = copyData((v as Record<string, unknown>)[k]);
  return out;
}

/**
 * Whether two plain-data values have the same `canonicalJson` (undefined members absent, key order
 * ignored), without building it: the end of every run's plan asks whether its status changed.
 * Never says equal where `canonicalJson` differs; may say different where it is equal only for
 * values no status holds (NaN, a class instance), which costs one comparison of the written file.
 */
export function sameData(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => sameData(x ?? null, b[i] ?? null));
  }
  const pa = Object.getPrototypeOf(a) as unknown;
  const pb = Object.getPrototypeOf(b) as unknown;
  if ((pa !== Object.prototype && pa !== null) || (pb !== Object.prototype && pb !== null)) return false;
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  let na = 0;
  for (const k of Object.keys(ra)) {
    if (ra[k] === undefined) continue;
    na++;
    if (rb[k] === undefined || !sameData(ra[k], rb[k])) return false;
  }
  let nb = 0;
  for (const k of Object.keys(rb)) if (rb[k] !== undefined) nb++;
  return na === nb;
}

/** `run/foo: Running (attempt 2 on slurm-a, job 81234)` */
export function summaryOf(doc: RunStatusDoc): string {
  const a = doc.status.attempts.at(-1);
  const name = doc.metadata.name;
  if (!a) return `run/${name}: ${doc.status.phase}${doc.status.reason ? ` (${doc.status.reason})` : ''}`;
  const job = a.jobId ? `, job ${a.jobId}` : '';
  if (a.phase === AttemptPhase.Submitting) return `run/${name}: Submitting attempt ${a.n} to ${a.backend}`;
  const exit = a.exitCode !== undefined && a.finishedAt ? `, exit ${a.exitCode}` : '';
  return `run/${name}: ${doc.status.phase} (attempt ${a.n} on ${a.backend}${job}${exit})`;
}

/**
 * The plan for `doc`: `current` itself when nothing changed (nothing to write), else `doc` with a
 * summary of the clauses in `lines` (the first is the headline).
 */
export function finishPlan(
  current: RunStatusDoc | undefined,
  doc: RunStatusDoc,
  lines: string[],
  actions: RunAction[],
): RunPlan {
  if (current && sameData(current, doc)) return { doc: current, actions };
  const [head, ...rest] = lines.filter(Boolean);
  return { doc, summary: rest.length ? `${head}; ${rest.join('; ')}` : head, actions };
}

/** `Valid=True`: the spec acted on parsed and passed every rule (runs, DAGs and Sweeps alike). */
export function markValid(st: { conditions: Condition[] }, now: string): void {
  st.conditions = setCondition(
    st.conditions,
    { type: ConditionType.Valid, status: 'True', reason: 'Valid', message: '' },
    now,
  );
}

/** `Valid=False` with the file, line and column of the problem: the same for runs and DAGs. */
export function markInvalid(
  st: { conditions: Condition[]; specFile?: string },
  invalid: InvalidRun,
  now: string,
): void {
  st.conditions = setCondition(
    st.conditions,
    {
      type: ConditionType.Valid,
      status: 'False',
      reason: Reason.SpecInvalid,
      message: `${invalid.file}:${invalid.line}:${invalid.column}: ${invalid.message}`,
    },
    now,
  );
  st.specFile = invalid.file;
}

/** What a step returns to end the pipeline; the plan is then the working state as it stands. */
export const STOP = 'stop';
/** `STOP`, or undefined to go on with the next step. */
export type StepResult = typeof STOP | undefined;

/** The working state of one `planRun` call once there is a spec to act on. */
export interface RunWork {
  readonly name: string;
  readonly desired: DesiredRun;
  /** The status before this pass: never edited. */
  readonly current: RunStatusDoc | undefined;
  readonly observed: ObservedJob | undefined;
  readonly heartbeat: Heartbeat | undefined;
  readonly ctx: PlanContext;
  /** `ctx.now` as an ISO time, for the status. */
  readonly now: string;
  /** The next status: a copy of `current` (or a new one) that the steps edit in place. */
  readonly doc: RunStatusDoc;
  /** The spec acted on: what has been applied of the desired one (set by `diffSpec`). */
  spec: RunSpec;
  /** Clauses for the summary, after its headline. */
  readonly events: string[];
  readonly actions: RunAction[];
  /** Look again after this long even without an event. */
  requeueAfterMs?: number;
  /** The summary's headline, when the step that ended the pipeline has its own. */
  headline?: string;
}

/** One step of the Run pipeline. */
export type RunStep = (w: RunWork) => StepResult;

/** The run can be tried again: a person acted, or what held it is gone. */
export function clearStalled(st: RunStatus): void {
  st.conditions = removeCondition(st.conditions, ConditionType.Stalled);
}
