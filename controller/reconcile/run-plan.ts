/**
 * The Run planner: pure. Given what git asks for (desired), what the status branch says was done
 * (current) and what the backend reports (observed), it returns the next status and the actions to
 * take. No I/O: the controller executes the actions, and `adv plan` calls the same function.
 */
import jsonpatch from 'fast-json-patch';
import { createHash } from 'node:crypto';
import { jobNameFor, JobState, type ObservedJob } from '../backends/types.js';
import type { Backend as BackendObject, RunSpec } from '../spec/schema.js';
import {
  AttemptPhase,
  ConditionType,
  Phase,
  Reason,
  removeCondition,
  setCondition,
  TERMINAL_PHASES,
  type Attempt,
  type Heartbeat,
  type RunStatusDoc,
} from '../status/types.js';

export const RECONCILE_ANNOTATION = 'adventuretime.dev/reconcile-requested-at';

export interface DesiredRun {
  name: string;
  spec: RunSpec;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  generation: string;
  file: string;
  owner?: string;
}

export interface InvalidRun {
  name: string;
  file: string;
  line: number;
  column: number;
  message: string;
}

export interface BackendInfo {
  name: string;
  spec: BackendObject['spec'];
  /** An adapter exists for its type and it is not suspended. */
  usable: boolean;
  /** Why not, when not usable. */
  why?: string;
}

export interface PlanContext {
  now: number;
  /** Commit of the watched branch being acted on. */
  specCommit: string;
  backends: readonly BackendInfo[];
  /** `code.ref` → commit, resolved by the caller; a missing entry means the ref does not exist. */
  codeRefs: ReadonlyMap<string, string>;
  /** This controller's id: it completes only its own write-ahead records, unless they are stale. */
  controllerId?: string;
}

/** A write-ahead record of another controller older than this is taken over (that one is gone). */
export const SUBMIT_TAKEOVER_MS = 5 * 60_000;

/** How long a restart waits for the cancelled attempt's last checkpoint. */
export const RESTART_GRACE_MS = 15_000;

export type RunAction =
  /** Find the job by name and adopt it; submit only if it does not exist. */
  | { type: 'submit'; run: string; attempt: number; backend: string; jobName: string }
  | { type: 'cancel'; run: string; attempt: number; backend: string; jobName: string; jobId?: string };

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
] as const;

/** Hash of the canonical JSON of a spec: its generation. */
export function generationOf(spec: unknown): string {
  return createHash('sha256').update(canonicalJson(spec)).digest('hex').slice(0, 16);
}

export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(v)
    .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`).join(',')}}`;
}

const isLive = (a: Attempt | undefined): a is Attempt =>
  a !== undefined &&
  (a.phase === AttemptPhase.Submitting ||
    a.phase === AttemptPhase.Queued ||
    a.phase === AttemptPhase.Running);

const DEFAULTS = {
  maxAttempts: 3,
  maxInfraAttempts: 100,
  backoffInitialSec: 30,
  backoffMaxSec: 1800,
  backoffFactor: 2,
};

/** Attempts that ended in a user-code failure (they count against maxAttempts). */
const userFailures = (attempts: readonly Attempt[]) =>
  attempts.filter((a) => a.phase === AttemptPhase.Failed && a.reason !== Reason.SubmitFailed).length;
const infraFailures = (attempts: readonly Attempt[]) =>
  attempts.filter(
    (a) =>
      a.phase === AttemptPhase.Preempted || a.phase === AttemptPhase.Lost || a.reason === Reason.SubmitFailed,
  ).length;

export function planRun(
  input: {
    name: string;
    desired?: DesiredRun;
    invalid?: InvalidRun;
    current?: RunStatusDoc;
    observed?: ObservedJob;
    /** The current attempt's heartbeat from the object store, when read this pass. */
    heartbeat?: Heartbeat;
  },
  ctx: PlanContext,
): RunPlan {
  const { name, desired, invalid, current, observed, heartbeat } = input;
  const now = new Date(ctx.now).toISOString();
  const actions: RunAction[] = [];
  const events: string[] = [];

  // A spec that is present but invalid: say so, act on nothing (a live attempt keeps running on
  // the last valid spec, as Flux keeps the last applied revision).
  if (invalid && !desired) {
    const doc = clone(current) ?? newDoc(name, ctx);
    const st = doc.status;
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
    if (!current) {
      st.reason = Reason.SpecInvalid;
      st.message = 'the spec is invalid; see the Valid condition';
    }
    return finish(current, doc, [`run/${name}: spec invalid (${invalid.file}:${invalid.line})`], actions);
  }

  // The spec was removed from the branch: cancel what is live; the status file stays.
  if (!desired) {
    if (!current || TERMINAL_PHASES.has(current.status.phase)) return { doc: current, actions };
    const doc = clone(current)!;
    const live = doc.status.attempts.at(-1);
    if (isLive(live)) {
      actions.push(cancelAction(name, live));
      Object.assign(live, { phase: AttemptPhase.Cancelled, reason: Reason.SpecDeleted, finishedAt: now });
    }
    setPhase(doc, Phase.Cancelled, Reason.SpecDeleted, 'the spec was removed from the watched branch', now);
    return finish(current, doc, [`run/${name}: Cancelled (spec deleted)`], actions);
  }

  if (current && !heartbeat && isSettled(current, desired, observed)) return { doc: current, actions };

  const doc = clone(current) ?? newDoc(name, ctx);
  const st = doc.status;
  st.specFile = desired.file;
  if (desired.owner) st.owner = desired.owner;
  if (desired.labels) doc.metadata.labels = desired.labels;
  else delete doc.metadata.labels;
  st.conditions = setCondition(
    st.conditions,
    { type: ConditionType.Valid, status: 'True', reason: 'Valid', message: '' },
    now,
  );
  if (st.reason === Reason.SpecInvalid && !st.attempts.length) {
    delete st.reason;
    delete st.message;
  }

  // 1. The diff between the spec last acted on and the current one decides what a change means.
  if (st.observedGeneration !== desired.generation) {
    const applied = doc.appliedSpec;
    const ops = applied ? jsonpatch.compare(applied, desired.spec) : [];
    const immutable = ops.filter((op) =>
      IMMUTABLE_FIELDS.some((f) => op.path === `/${f}` || op.path.startsWith(`/${f}/`)),
    );
    const started = st.attempts.length > 0;
    const restart = desired.spec.policy?.onSpecChange === 'Restart';
    if (!applied || immutable.length === 0 || !started || restart) {
      if (applied && immutable.length > 0 && started) {
        events.push(
          `spec changed (${immutable.map((o) => o.path).join(', ')}): restarting from the last checkpoint`,
        );
        const live = st.attempts.at(-1);
        setPhase(
          doc,
          Phase.Scheduling,
          Reason.RestartOnSpecChange,
          'the spec changed; a new attempt starts from the last checkpoint',
          now,
        );
        delete st.codeCommit;
        if (isLive(live)) {
          actions.push(cancelAction(name, live));
          Object.assign(live, {
            phase: AttemptPhase.Cancelled,
            reason: Reason.RestartOnSpecChange,
            finishedAt: now,
          });
          // Give the cancelled attempt its grace period to write a last checkpoint first.
          st.nextAttemptAfter = new Date(ctx.now + RESTART_GRACE_MS).toISOString();
        }
      } else if (applied && ops.length > 0) {
        events.push(`spec updated (${ops.map((o) => o.path).join(', ')})`);
      }
      doc.appliedSpec = desired.spec;
      st.observedGeneration = desired.generation;
      st.specCommit = ctx.specCommit;
      st.conditions = removeCondition(st.conditions, ConditionType.SpecChangeRejected);
    } else {
      // Apply what can be applied; refuse the rest, naming the fields.
      const mutableOps = ops.filter((op) => !immutable.includes(op));
      if (mutableOps.length > 0)
        doc.appliedSpec = jsonpatch.applyPatch(clone(applied)!, mutableOps, false, false).newDocument;
      const fields = [...new Set(immutable.map((o) => o.path))].join(', ');
      const before = st.conditions;
      st.conditions = setCondition(
        st.conditions,
        {
          type: ConditionType.SpecChangeRejected,
          status: 'True',
          reason: Reason.ImmutableFieldChanged,
          message: `cannot change ${fields} of a started run; revert the change, or set policy.onSpecChange: Restart to restart from the last checkpoint`,
          observedGeneration: desired.generation,
        },
        now,
      );
      if (before !== st.conditions) events.push(`spec change rejected (${fields})`);
    }
  }
  const spec = doc.appliedSpec ?? desired.spec;

  const requested = desired.annotations?.[RECONCILE_ANNOTATION];
  if (requested && requested !== st.lastHandledReconcileAt) st.lastHandledReconcileAt = requested;

  // 2. Suspend cancels; unsuspend resumes with a new attempt.
  let last = st.attempts.at(-1);
  if (spec.suspend) {
    if (isLive(last)) {
      actions.push(cancelAction(name, last));
      Object.assign(last, { phase: AttemptPhase.Cancelled, reason: Reason.Suspended, finishedAt: now });
    }
    if (st.phase !== Phase.Succeeded && st.phase !== Phase.Failed)
      setPhase(doc, Phase.Cancelled, Reason.Suspended, 'spec.suspend is true', now);
    return finish(
      current,
      doc,
      [`run/${name}: ${st.phase}${st.reason === Reason.Suspended ? ' (suspended)' : ''}`, ...events],
      actions,
    );
  }
  if (st.phase === Phase.Cancelled && (st.reason === Reason.Suspended || st.reason === Reason.SpecDeleted)) {
    setPhase(doc, Phase.Scheduling, 'Resumed', 'resumed: a new attempt starts from the last checkpoint', now);
  }

  // 3. What the backend and the worker's heartbeat say about the current attempt.
  last = st.attempts.at(-1);
  if (last && heartbeat && heartbeat.attempt === last.n) applyHeartbeat(doc, last, heartbeat, ctx.now);
  if (isLive(last) && observed && observed.jobName === last.jobName)
    applyObservation(doc, last, observed, spec, ctx.now);
  last = st.attempts.at(-1);
  if (last?.phase === AttemptPhase.Running && st.lastHeartbeat) {
    const limit = (spec.policy?.heartbeatTimeoutSec ?? DEFAULT_HEARTBEAT_TIMEOUT_SEC) * 1000;
    const age = ctx.now - Date.parse(st.lastHeartbeat);
    st.conditions =
      age > limit
        ? setCondition(
            st.conditions,
            {
              type: ConditionType.Lost,
              status: 'True',
              reason: 'HeartbeatMissing',
              message: `no heartbeat for ${Math.round(age / 1000)}s (limit ${limit / 1000}s)`,
            },
            now,
          )
        : removeCondition(st.conditions, ConditionType.Lost);
  } else if (last && !isLive(last)) {
    st.conditions = removeCondition(st.conditions, ConditionType.Lost);
  }

  // 4. Schedule a new attempt when there is none and one is due.
  last = st.attempts.at(-1);
  let requeueAfterMs: number | undefined;
  if (!isLive(last) && (st.phase === Phase.Pending || st.phase === Phase.Scheduling)) {
    const due = st.nextAttemptAfter ? Date.parse(st.nextAttemptAfter) : 0;
    if (due > ctx.now) {
      requeueAfterMs = due - ctx.now;
    } else {
      const codeRef = spec.code?.ref;
      const codeCommit = st.codeCommit ?? (codeRef ? ctx.codeRefs.get(codeRef) : ctx.specCommit);
      const choice = chooseBackend(spec, ctx.backends);
      if (!codeCommit) {
        setPhase(
          doc,
          Phase.Pending,
          'CodeRefNotFound',
          `code.ref "${codeRef}" does not name a branch, tag or commit of the repository`,
          now,
        );
        st.conditions = setCondition(
          st.conditions,
          { type: ConditionType.Scheduled, status: 'False', reason: 'CodeRefNotFound', message: st.message! },
          now,
        );
      } else if (!choice.backend) {
        setPhase(doc, Phase.Pending, Reason.NoBackend, choice.why, now);
        st.conditions = setCondition(
          st.conditions,
          { type: ConditionType.Scheduled, status: 'False', reason: Reason.NoBackend, message: choice.why },
          now,
        );
        requeueAfterMs = 30_000;
      } else {
        st.codeCommit = codeCommit;
        const n = (st.attempts.at(-1)?.n ?? 0) + 1;
        const attempt: Attempt = {
          n,
          backend: choice.backend,
          jobName: jobNameFor(name, n),
          phase: AttemptPhase.Submitting,
          submittedAt: now,
          specCommit: st.specCommit ?? ctx.specCommit,
          codeCommit,
          ...(ctx.controllerId ? { controller: ctx.controllerId } : {}),
        };
        st.attempts.push(attempt);
        delete st.nextAttemptAfter;
        setPhase(doc, Phase.Scheduling, 'Submitting', `submitting attempt ${n} to ${choice.backend}`, now);
        st.conditions = setCondition(
          st.conditions,
          { type: ConditionType.Scheduled, status: 'True', reason: 'BackendChosen', message: choice.why },
          now,
        );
        actions.push({
          type: 'submit',
          run: name,
          attempt: n,
          backend: choice.backend,
          jobName: attempt.jobName,
        });
      }
    }
  } else if (last && last.phase === AttemptPhase.Submitting && !last.jobId) {
    // A write-ahead record without a job id: the submission may or may not have happened. Its
    // writer finishes it (finding the job by name first); another controller waits, and takes
    // over only once the record is old enough that its writer must be gone.
    const age = ctx.now - Date.parse(last.submittedAt ?? now);
    if (
      last.controller &&
      ctx.controllerId &&
      last.controller !== ctx.controllerId &&
      age < SUBMIT_TAKEOVER_MS
    ) {
      requeueAfterMs = SUBMIT_TAKEOVER_MS - age;
    } else {
      actions.push({
        type: 'submit',
        run: name,
        attempt: last.n,
        backend: last.backend,
        jobName: last.jobName,
      });
    }
  }

  return {
    ...finish(current, doc, [summaryOf(doc), ...events], actions),
    ...(requeueAfterMs !== undefined ? { requeueAfterMs } : {}),
  };
}

function applyObservation(doc: RunStatusDoc, a: Attempt, o: ObservedJob, spec: RunSpec, nowMs: number): void {
  const st = doc.status;
  const now = new Date(nowMs).toISOString();
  if (o.jobId && o.jobId !== 'unknown') a.jobId = o.jobId;
  if (o.startedAt) a.startedAt ??= o.startedAt;
  const end = (phase: AttemptPhase) => {
    a.phase = phase;
    a.finishedAt = o.finishedAt ?? now;
    if (o.exitCode !== undefined) a.exitCode = o.exitCode;
    if (o.reason) a.reason = o.reason;
    if (o.message) a.message = o.message;
    else delete a.message;
  };
  switch (o.state) {
    case JobState.Pending:
      a.phase = AttemptPhase.Queued;
      setPhase(doc, Phase.Queued, 'Queued', `attempt ${a.n} queued on ${a.backend}`, now);
      break;
    case JobState.Running:
      a.phase = AttemptPhase.Running;
      setPhase(doc, Phase.Running, 'Running', `attempt ${a.n} running on ${a.backend}`, now);
      st.conditions = setCondition(
        st.conditions,
        { type: ConditionType.Ready, status: 'True', reason: 'Running', message: '' },
        now,
      );
      break;
    case JobState.Succeeded:
      end(AttemptPhase.Succeeded);
      setPhase(doc, Phase.Succeeded, Reason.Completed, `attempt ${a.n} on ${a.backend} exited 0`, now);
      st.conditions = setCondition(
        st.conditions,
        { type: ConditionType.Ready, status: 'False', reason: Reason.Completed, message: '' },
        now,
      );
      break;
    case JobState.Failed: {
      end(AttemptPhase.Failed);
      const failures = userFailures(st.attempts);
      const max = spec.policy?.maxAttempts ?? DEFAULTS.maxAttempts;
      st.conditions = setCondition(
        st.conditions,
        { type: ConditionType.Ready, status: 'False', reason: Reason.Error, message: '' },
        now,
      );
      if (failures >= max) {
        setPhase(
          doc,
          Phase.Failed,
          Reason.AttemptsExhausted,
          `attempt ${a.n} exited ${a.exitCode ?? '?'}; ${failures} of ${max} attempts failed`,
          now,
        );
      } else {
        const b = spec.policy?.backoff ?? {};
        const delaySec = Math.min(
          (b.initialSec ?? DEFAULTS.backoffInitialSec) *
            Math.pow(b.factor ?? DEFAULTS.backoffFactor, failures - 1),
          b.maxSec ?? DEFAULTS.backoffMaxSec,
        );
        st.nextAttemptAfter = new Date(nowMs + delaySec * 1000).toISOString();
        setPhase(
          doc,
          Phase.Scheduling,
          Reason.BackoffWaiting,
          `attempt ${a.n} exited ${a.exitCode ?? '?'}; retrying in ${delaySec}s (${failures} of ${max})`,
          now,
        );
      }
      break;
    }
    case JobState.Cancelled:
      end(AttemptPhase.Cancelled);
      setPhase(
        doc,
        Phase.Cancelled,
        'CancelledOnBackend',
        `attempt ${a.n} was cancelled on ${a.backend}, not by the controller`,
        now,
      );
      break;
    case JobState.Preempted:
    case JobState.Lost: {
      end(o.state === JobState.Preempted ? AttemptPhase.Preempted : AttemptPhase.Lost);
      const max = spec.policy?.maxInfraAttempts ?? DEFAULTS.maxInfraAttempts;
      if (infraFailures(st.attempts) >= max) {
        setPhase(
          doc,
          Phase.Failed,
          Reason.AttemptsExhausted,
          `${max} attempts ended by preemption or infrastructure failure`,
          now,
        );
      } else {
        setPhase(
          doc,
          Phase.Scheduling,
          o.state === JobState.Preempted ? Reason.Preempted : Reason.Lost,
          `attempt ${a.n} on ${a.backend} ended: ${o.reason ?? o.state}; starting a new attempt`,
          now,
        );
      }
      break;
    }
    case JobState.Unknown:
      st.conditions = setCondition(
        st.conditions,
        {
          type: ConditionType.Stale,
          status: 'True',
          reason: o.reason ?? 'Unobservable',
          message: o.message ?? '',
        },
        now,
      );
      return;
  }
  st.conditions = removeCondition(st.conditions, ConditionType.Stale);
}

/** First fit over the selector order, then priority. The full solver replaces this (issue 6). */
export function chooseBackend(
  spec: RunSpec,
  backends: readonly BackendInfo[],
): { backend?: string; why: string } {
  const sel = spec.backendSelector ?? {};
  const byName = new Map(backends.map((b) => [b.name, b]));
  const ordered = sel.order?.length
    ? sel.order.map((n) => byName.get(n)).filter((b): b is BackendInfo => b !== undefined)
    : [...backends].sort(
        (a, b) => (b.spec.priority ?? 0) - (a.spec.priority ?? 0) || (a.name < b.name ? -1 : 1),
      );
  const reasons: string[] = [];
  for (const b of ordered) {
    if (sel.allowed?.length && !sel.allowed.includes(b.name)) continue;
    if (sel.forbidden?.includes(b.name)) continue;
    if (!b.usable) {
      reasons.push(`${b.name}: ${b.why ?? 'not usable'}`);
      continue;
    }
    const gpus = spec.resources?.gpus ?? 0;
    const have = b.spec.capabilities?.gpus;
    if (gpus > 0 && have !== undefined && have < gpus) {
      reasons.push(`${b.name}: has ${have} GPUs per node, run needs ${gpus}`);
      continue;
    }
    return { backend: b.name, why: [...reasons, `${b.name}: chosen`].join('; ') };
  }
  return { why: reasons.length ? reasons.join('; ') : 'no backend is defined that the selector allows' };
}

/**
 * A finished run whose spec, labels and annotations are what was acted on has nothing to plan:
 * skipping the copy-and-compare keeps a resync of thousands of finished runs cheap. It must give
 * exactly what the full path gives (run-plan.test.ts checks it).
 */
function isSettled(current: RunStatusDoc, desired: DesiredRun, observed: ObservedJob | undefined): boolean {
  const st = current.status;
  if (observed || !TERMINAL_PHASES.has(st.phase) || st.observedGeneration !== desired.generation)
    return false;
  if (
    st.phase === Phase.Cancelled &&
    (st.reason === Reason.Suspended || st.reason === Reason.SpecDeleted) &&
    !desired.spec.suspend
  )
    return false;
  if (st.specFile !== desired.file || st.owner !== desired.owner) return false;
  if (JSON.stringify(current.metadata.labels) !== JSON.stringify(desired.labels)) return false;
  const requested = desired.annotations?.[RECONCILE_ANNOTATION];
  if (requested !== undefined && requested !== st.lastHandledReconcileAt) return false;
  return st.conditions.some((c) => c.type === ConditionType.Valid && c.status === 'True');
}

/** A running attempt without a heartbeat for this long gets the `Lost` condition. */
export const DEFAULT_HEARTBEAT_TIMEOUT_SEC = 600;

function applyHeartbeat(doc: RunStatusDoc, a: Attempt, hb: Heartbeat, nowMs: number): void {
  const st = doc.status;
  const now = new Date(nowMs).toISOString();
  st.lastHeartbeat = hb.time;
  if (hb.restoredFrom !== undefined) a.startStep = hb.restoredFrom;
  if (hb.lastCheckpoint) {
    if (hb.lastCheckpoint.step !== hb.restoredFrom) a.lastStep = hb.lastCheckpoint.step;
    if (!st.checkpoint || st.checkpoint.step !== hb.lastCheckpoint.step) {
      st.checkpoint = { ...hb.lastCheckpoint };
      st.conditions = setCondition(
        st.conditions,
        {
          type: ConditionType.Checkpointed,
          status: 'True',
          reason: 'Committed',
          message: `step ${hb.lastCheckpoint.step} committed at ${hb.lastCheckpoint.createdAt}`,
        },
        now,
      );
    }
  }
}

function cancelAction(run: string, a: Attempt): RunAction {
  return {
    type: 'cancel',
    run,
    attempt: a.n,
    backend: a.backend,
    jobName: a.jobName,
    ...(a.jobId ? { jobId: a.jobId } : {}),
  };
}

function setPhase(doc: RunStatusDoc, phase: Phase, reason: string, message: string, _now: string): void {
  doc.status.phase = phase;
  doc.status.reason = reason;
  doc.status.message = message;
}

function newDoc(name: string, ctx: PlanContext): RunStatusDoc {
  return {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'RunStatus',
    metadata: { name },
    status: {
      phase: Phase.Pending,
      createdAt: new Date(ctx.now).toISOString(),
      conditions: [],
      attempts: [],
    },
  };
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

function finish(
  current: RunStatusDoc | undefined,
  doc: RunStatusDoc,
  lines: string[],
  actions: RunAction[],
): RunPlan {
  if (current && canonicalJson(current) === canonicalJson(doc)) return { doc: current, actions };
  const [head, ...rest] = lines.filter(Boolean);
  return { doc, summary: rest.length ? `${head}; ${rest.join('; ')}` : head, actions };
}

function clone<T>(v: T): T {
  return v === undefined ? v : (structuredClone(v) as T);
}

export const isLiveAttempt = isLive;
