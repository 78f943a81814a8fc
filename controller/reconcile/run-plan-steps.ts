/**
 * The Run planner's steps, in the order `planRun` takes them. The first three decide whether
 * there is a spec to act on at all (without copying the status, so a resync of thousands of
 * finished runs stays cheap); the rest edit one working state, `RunWork`, and any of them may end
 * the pipeline by returning `STOP`. Each is exported to be tested on its own.
 */
import jsonpatch, { type Operation } from 'fast-json-patch';
import type { ObservedJob } from '../backends/types.js';
import type { RunSpec } from '../spec/schema.js';
import { TERMINAL_PHASES } from '../status/phases.js';
import {
  AttemptPhase,
  ConditionType,
  Phase,
  Reason,
  removeCondition,
  setCondition,
  type RunStatus,
  type RunStatusDoc,
} from '../status/types.js';
import { EndClass } from '../status/types.js';
import { transition } from '../status/transition.js';
import { WORKER_HEARTBEAT_MISSING, workerConditions } from './run-plan-workers.js';
import { applyHeartbeat, applyObservation, guardrails, heartbeatTimeoutMs } from './run-plan-attempts.js';
import {
  cancelAction,
  clone,
  finishPlan,
  IMMUTABLE_FIELDS,
  isLiveAttempt,
  markCancelled,
  markInvalid,
  markValid,
  newDoc,
  RECONCILE_ANNOTATION,
  RESTART_GRACE_MS,
  RETRY_ANNOTATION,
  SUBMIT_TAKEOVER_MS,
  summaryOf,
  type DesiredRun,
  type InvalidRun,
  type PlanContext,
  type RunAction,
  type RunPlan,
  type RunPlanInput,
  clearStalled,
  STOP,
  type RunStep,
  type RunWork,
} from './run-plan-model.js';
import { schedule } from './run-plan-schedule.js';

/** Cancelled for one of these reasons, the run resumes by itself when the cause goes away. */
const SELF_UNDOING_CANCELS: ReadonlySet<string | undefined> = new Set([Reason.Suspended, Reason.SpecDeleted]);

// ---------------------------------------------------------------------------------------------
// Before the pipeline: is there a spec to act on?

/**
 * A spec that is present but invalid: say so, act on nothing (a live attempt keeps running on
 * the last valid spec, as Flux keeps the last applied revision).
 */
export function invalidSpec(
  name: string,
  invalid: InvalidRun,
  current: RunStatusDoc | undefined,
  ctx: PlanContext,
): RunPlan {
  const doc = clone(current) ?? newDoc(name, ctx.now);
  const st = doc.status;
  markInvalid(st, invalid, new Date(ctx.now).toISOString());
  if (!current) {
    st.reason = Reason.SpecInvalid;
    st.message = 'the spec is invalid; see the Valid condition';
  }
  return finishPlan(current, doc, [`run/${name}: spec invalid (${invalid.file}:${invalid.line})`], []);
}

/** The spec was removed from the branch: cancel what is live; the status file stays. */
export function specDeleted(name: string, current: RunStatusDoc | undefined, ctx: PlanContext): RunPlan {
  if (!current || TERMINAL_PHASES.has(current.status.phase)) return { doc: current, actions: [] };
  const now = new Date(ctx.now).toISOString();
  const doc = clone(current);
  const actions: RunAction[] = [];
  const live = doc.status.attempts.at(-1);
  if (isLiveAttempt(live)) {
    actions.push(cancelAction(name, live));
    markCancelled(live, Reason.SpecDeleted, now);
  }
  transition(
    doc.status,
    {
      phase: Phase.Cancelled,
      reason: Reason.SpecDeleted,
      message: 'the spec was removed from the watched branch',
    },
    now,
  );
  clearStalled(doc.status);
  return finishPlan(current, doc, [`run/${name}: Cancelled (spec deleted)`], actions);
}

/**
 * A finished run whose spec, labels and annotations are what was acted on has nothing to plan:
 * skipping the copy-and-compare keeps a resync of thousands of finished runs cheap. It must give
 * exactly what the full path gives (run-plan.test.ts checks it).
 */
export function isSettled(
  current: RunStatusDoc,
  desired: DesiredRun,
  observed: ObservedJob | undefined,
): boolean {
  const st = current.status;
  if (observed || !TERMINAL_PHASES.has(st.phase) || st.observedGeneration !== desired.generation)
    return false;
  if (st.phase === Phase.Cancelled && SELF_UNDOING_CANCELS.has(st.reason) && !desired.spec.suspend)
    return false;
  if (st.specFile !== desired.file || st.owner !== desired.owner) return false;
  if (JSON.stringify(current.metadata.labels) !== JSON.stringify(desired.labels)) return false;
  const requested = desired.annotations?.[RECONCILE_ANNOTATION];
  if (requested !== undefined && requested !== st.lastHandledReconcileAt) return false;
  const retry = desired.annotations?.[RETRY_ANNOTATION];
  if (retry !== undefined && retry !== st.lastHandledRetryAt) return false;
  return st.conditions.some((c) => c.type === ConditionType.Valid && c.status === 'True');
}

/** The working state for `input`, whose desired run is `desired`. */
export function startWork(input: RunPlanInput, desired: DesiredRun, ctx: PlanContext): RunWork {
  return {
    name: input.name,
    desired,
    current: input.current,
    observed: input.observed,
    heartbeat: input.heartbeat,
    ctx,
    now: new Date(ctx.now).toISOString(),
    doc: clone(input.current) ?? newDoc(input.name, ctx.now),
    spec: desired.spec,
    events: [],
    actions: [],
  };
}

/** The plan the working state amounts to. */
export function finishWork(w: RunWork): RunPlan {
  const plan = finishPlan(w.current, w.doc, [w.headline ?? summaryOf(w.doc), ...w.events], w.actions);
  return w.requeueAfterMs !== undefined ? { ...plan, requeueAfterMs: w.requeueAfterMs } : plan;
}

// ---------------------------------------------------------------------------------------------
// The spec

/** The spec file, owner and labels follow the desired run, which is valid (it parsed). */
export const adoptSpec: RunStep = (w) => {
  const { doc, desired } = w;
  const st = doc.status;
  st.specFile = desired.file;
  if (desired.owner) st.owner = desired.owner;
  if (desired.labels) doc.metadata.labels = desired.labels;
  else delete doc.metadata.labels;
  markValid(st, w.now);
  if (st.reason === Reason.SpecInvalid && !st.attempts.length) {
    delete st.reason;
    delete st.message;
  }
  return undefined;
};

/** A JSON Patch from the spec last acted on to the desired one. */
interface SpecDiff {
  applied: RunSpec | undefined;
  ops: Operation[];
  /** The operations on IMMUTABLE_FIELDS. */
  immutable: Operation[];
}

/**
 * 1. The diff between the spec last acted on and the desired one decides what a change means:
 * mutable fields apply; immutable ones are refused for a started run, or restart it from its
 * last checkpoint when it opted in (`policy.onSpecChange: Restart`).
 */
export const diffSpec: RunStep = (w) => {
  const st = w.doc.status;
  if (st.observedGeneration !== w.desired.generation) {
    const applied = w.doc.appliedSpec;
    const ops = applied ? jsonpatch.compare(applied, w.desired.spec) : [];
    const immutable = ops.filter((op) =>
      IMMUTABLE_FIELDS.some((f) => op.path === `/${f}` || op.path.startsWith(`/${f}/`)),
    );
    const restart = w.desired.spec.policy?.onSpecChange === 'Restart';
    if (applied && immutable.length > 0 && hasRun(st) && !restart)
      rejectSpecChange(w, { applied, ops, immutable });
    else acceptSpecChange(w, { applied, ops, immutable });
  }
  w.spec = w.doc.appliedSpec ?? w.desired.spec;
  return undefined;
};

/**
 * Whether an attempt of the run got as far as its backend. One that stalled before its submit (a
 * secret missing, a fork's source not in the store) ran nothing, so the fix a person makes to the
 * spec — even to an immutable field — applies instead of being refused.
 */
function hasRun(st: RunStatus): boolean {
  return st.attempts.some((a) => a.class !== EndClass.Stalled);
}

function acceptSpecChange(w: RunWork, { applied, ops, immutable }: SpecDiff): void {
  const st = w.doc.status;
  if (applied && immutable.length > 0 && hasRun(st)) restartOnSpecChange(w, immutable);
  else if (applied && ops.length > 0) w.events.push(`spec updated (${ops.map((o) => o.path).join(', ')})`);
  w.doc.appliedSpec = w.desired.spec;
  const fork = w.desired.spec.forkFrom;
  // Lineage stays once an attempt ran: its checkpoints descend from the parent's.
  if (fork) st.forkedFrom = { run: fork.run, step: fork.step };
  else if (!hasRun(st)) delete st.forkedFrom;
  st.observedGeneration = w.desired.generation;
  st.specCommit = w.ctx.specCommit;
  st.conditions = removeCondition(st.conditions, ConditionType.SpecChangeRejected);
}

function restartOnSpecChange(w: RunWork, immutable: Operation[]): void {
  const st = w.doc.status;
  w.events.push(
    `spec changed (${immutable.map((o) => o.path).join(', ')}): restarting from the last checkpoint`,
  );
  const live = st.attempts.at(-1);
  transition(
    st,
    {
      phase: Phase.Scheduling,
      reason: Reason.RestartOnSpecChange,
      message: 'the spec changed; a new attempt starts from the last checkpoint',
    },
    w.now,
  );
  delete st.codeCommit;
  delete st.codeRepo;
  if (isLiveAttempt(live)) {
    w.actions.push(cancelAction(w.name, live));
    markCancelled(live, Reason.RestartOnSpecChange, w.now);
    // Give the cancelled attempt its grace period to write a last checkpoint first.
    st.nextAttemptAfter = new Date(w.ctx.now + RESTART_GRACE_MS).toISOString();
  }
}

/** Apply what can be applied; refuse the rest, naming the fields. */
function rejectSpecChange(w: RunWork, { applied, ops, immutable }: SpecDiff & { applied: RunSpec }): void {
  const st = w.doc.status;
  const mutableOps = ops.filter((op) => !immutable.includes(op));
  if (mutableOps.length > 0)
    w.doc.appliedSpec = jsonpatch.applyPatch(clone(applied), mutableOps, false, false).newDocument;
  const fields = [...new Set(immutable.map((o) => o.path))].join(', ');
  const before = st.conditions;
  st.conditions = setCondition(
    st.conditions,
    {
      type: ConditionType.SpecChangeRejected,
      status: 'True',
      reason: Reason.ImmutableFieldChanged,
      message: `cannot change ${fields} of a started run; revert the change, or set policy.onSpecChange: Restart to restart from the last checkpoint`,
      observedGeneration: w.desired.generation,
    },
    w.now,
  );
  if (before !== st.conditions) w.events.push(`spec change rejected (${fields})`);
}

// ---------------------------------------------------------------------------------------------
// Requests: annotations, suspend

/** `adv reconcile run`: records that the request was seen (the pass itself is the answer). */
export const reconcileAnnotation: RunStep = (w) => {
  const st = w.doc.status;
  const requested = w.desired.annotations?.[RECONCILE_ANNOTATION];
  if (requested && requested !== st.lastHandledReconcileAt) {
    st.lastHandledReconcileAt = requested;
    clearStalled(st); // a person asked: a held stall is tried again
  }
  return undefined;
};

/**
 * `adv retry`: a finished run gets a new attempt (from its last checkpoint), with a fresh
 * failure budget; a run still in flight just records that the request was seen.
 */
export const retryAnnotation: RunStep = (w) => {
  const st = w.doc.status;
  const retry = w.desired.annotations?.[RETRY_ANNOTATION];
  if (!retry || retry === st.lastHandledRetryAt) return undefined;
  st.lastHandledRetryAt = retry;
  clearStalled(st);
  st.conditions = removeCondition(st.conditions, ConditionType.Retryable);
  if (TERMINAL_PHASES.has(st.phase) && !w.spec.suspend) {
    st.budgetFromAttempt = (st.attempts.at(-1)?.n ?? 0) + 1;
    delete st.nextAttemptAfter;
    transition(
      st,
      {
        phase: Phase.Scheduling,
        reason: 'RetryRequested',
        message: 'adv retry: a new attempt starts from the last checkpoint',
      },
      w.now,
    );
    w.events.push('retry requested');
  }
  return undefined;
};

/** 2. Suspend cancels the live attempt, and ends the pipeline: nothing else happens to the run. */
export const suspend: RunStep = (w) => {
  if (!w.spec.suspend) return undefined;
  const st = w.doc.status;
  const last = st.attempts.at(-1);
  if (isLiveAttempt(last)) {
    w.actions.push(cancelAction(w.name, last));
    markCancelled(last, Reason.Suspended, w.now);
  }
  if (st.phase !== Phase.Succeeded && st.phase !== Phase.Failed)
    transition(
      st,
      { phase: Phase.Cancelled, reason: Reason.Suspended, message: 'spec.suspend is true' },
      w.now,
    );
  clearStalled(st);
  w.headline = `run/${w.name}: ${st.phase}${st.reason === Reason.Suspended ? ' (suspended)' : ''}`;
  return STOP;
};

/** Unsuspended, or its spec restored: the run resumes with a new attempt. */
export const resume: RunStep = (w) => {
  const st = w.doc.status;
  if (st.phase === Phase.Cancelled && SELF_UNDOING_CANCELS.has(st.reason))
    transition(
      st,
      {
        phase: Phase.Scheduling,
        reason: 'Resumed',
        message: 'resumed: a new attempt starts from the last checkpoint',
      },
      w.now,
    );
  return undefined;
};

// ---------------------------------------------------------------------------------------------
// 3. What the backend and the worker's heartbeat say about the current attempt

/** The worker's heartbeat for the current attempt: its checkpoints. */
export const recordHeartbeat: RunStep = (w) => {
  const last = w.doc.status.attempts.at(-1);
  if (last && w.heartbeat && w.heartbeat.attempt === last.n)
    applyHeartbeat(w.doc, last, w.heartbeat, w.ctx.now);
  return undefined;
};

/** What the backend reports about the live attempt's job: queued, running, or how it ended. */
export const observe: RunStep = (w) => {
  const st = w.doc.status;
  const last = st.attempts.at(-1);
  if (!isLiveAttempt(last) || !w.observed || w.observed.jobName !== last.jobName) return undefined;
  if (applyObservation(w.doc, last, w.observed, w.spec, w.ctx.now))
    w.actions.push(cancelAction(w.name, last));
  const endedAs = st.attempts.at(-1)?.class;
  if (endedAs && endedAs !== EndClass.Succeeded && st.message) w.events.push(st.message);
  return undefined;
};

/** Time limits, and a queue that does not move: they stop the live attempt. */
export const enforceGuardrails: RunStep = (w) => {
  const st = w.doc.status;
  const last = st.attempts.at(-1);
  if (!isLiveAttempt(last) || last.phase === AttemptPhase.Submitting) return undefined;
  if (guardrails(w.doc, last, w.spec, w.ctx)) {
    w.actions.push(cancelAction(w.name, last));
    if (st.message) w.events.push(st.message);
  }
  return undefined;
};

/** `Lost` while a running attempt's heartbeat is older than its limit; gone once it ended. */
export const lostCondition: RunStep = (w) => {
  const st = w.doc.status;
  const last = st.attempts.at(-1);
  if (last?.phase === AttemptPhase.Running && st.lastHeartbeat) {
    const limit = heartbeatTimeoutMs(w.spec);
    const age = w.ctx.now - Date.parse(st.lastHeartbeat);
    const byWorker =
      st.conditions.find((c) => c.type === ConditionType.Lost)?.reason === WORKER_HEARTBEAT_MISSING;
    if (age > limit)
      st.conditions = setCondition(
        st.conditions,
        {
          type: ConditionType.Lost,
          status: 'True',
          reason: 'HeartbeatMissing',
          message: `no heartbeat for ${Math.round(age / 1000)}s (limit ${limit / 1000}s)`,
        },
        w.now,
      );
    else if (!byWorker) st.conditions = removeCondition(st.conditions, ConditionType.Lost);
    // The other processes of a multi-host attempt: only on passes that read the heartbeats.
    if (age <= limit && w.heartbeat?.attempt === last.n)
      st.conditions = workerConditions(st.conditions, w.heartbeat, {
        attempt: last.n,
        limitMs: limit,
        nowMs: w.ctx.now,
        now: w.now,
      });
  } else if (last && !isLiveAttempt(last)) {
    st.conditions = [ConditionType.Lost, ConditionType.Restoring, ConditionType.FetchingData].reduce(
      removeCondition,
      st.conditions,
    );
  }
  return undefined;
};

// ---------------------------------------------------------------------------------------------
// 4. A new attempt, or the completion of a write-ahead record

/**
 * A write-ahead record without a job id: the submission may or may not have happened. Its
 * writer finishes it (finding the job by name first); another controller waits, and takes over
 * only once the record is old enough that its writer must be gone.
 */
export const finishWriteAhead: RunStep = (w) => {
  const last = w.doc.status.attempts.at(-1);
  if (!last || last.phase !== AttemptPhase.Submitting || last.jobId) return undefined;
  const age = w.ctx.now - Date.parse(last.submittedAt ?? w.now);
  const theirs = last.controller && w.ctx.controllerId && last.controller !== w.ctx.controllerId;
  if (theirs && age < SUBMIT_TAKEOVER_MS) {
    w.requeueAfterMs = SUBMIT_TAKEOVER_MS - age;
    // Said where a person looks (adv get, describe): a wait of minutes with no word reads as a hang.
    const at = new Date(w.ctx.now + w.requeueAfterMs).toISOString();
    transition(
      w.doc.status,
      {
        phase: Phase.Scheduling,
        reason: 'Submitting',
        message: `attempt ${last.n} is being submitted to ${last.backend} by controller ${last.controller}; if that controller is gone, this one finds the job by name or submits it at ${at}`,
      },
      w.now,
    );
  } else
    w.actions.push({
      type: 'submit',
      run: w.name,
      attempt: last.n,
      backend: last.backend,
      jobName: last.jobName,
    });
  return undefined;
};

/** The pipeline, in order, after the spec to act on is known. */
export const RUN_STEPS: readonly RunStep[] = [
  adoptSpec,
  diffSpec,
  reconcileAnnotation,
  retryAnnotation,
  suspend,
  resume,
  recordHeartbeat,
  observe,
  enforceGuardrails,
  lostCondition,
  schedule,
  finishWriteAhead,
];
