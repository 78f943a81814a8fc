/**
 * An attempt's life after submission, for the Run planner: what the backend and the heartbeat
 * say about it, the guardrails that stop it, and how its end (classify.ts) moves the run on —
 * a new attempt at once, after a backoff, or none. Pure, like the planner.
 */
import { JobState, type ObservedJob } from '../backends/types.js';
import type { RunSpec } from '../spec/schema.js';
import {
  AttemptPhase,
  ConditionType,
  Phase,
  Reason,
  removeCondition,
  setCondition,
  type Attempt,
  type Heartbeat,
  type RunStatus,
  type RunStatusDoc,
} from '../status/types.js';
import { classifyEnd } from './classify.js';
import { EndClass } from '../status/types.js';
import { formatMoney, runCost } from '../status/cost.js';
import { transition, type RunTransition } from '../status/transition.js';
import { DEFAULT_HEARTBEAT_TIMEOUT_SEC, RESTART_GRACE_MS, type PlanContext } from './run-plan-model.js';
import { solve } from './solver.js';

const DEFAULTS = {
  maxAttempts: 3,
  maxInfraAttempts: 100,
  backoffInitialSec: 30,
  backoffMaxSec: 1800,
  backoffFactor: 2,
};

/** The class of an ended attempt (inferred for records written before classes existed). */
function classOf(a: Attempt): EndClass | undefined {
  if (a.class) return a.class;
  if (a.reason === Reason.SubmitFailed || a.phase === AttemptPhase.Lost) return EndClass.Infrastructure;
  if (a.phase === AttemptPhase.Preempted) return EndClass.Preempted;
  if (a.phase === AttemptPhase.Failed) return EndClass.UserError;
  if (a.phase === AttemptPhase.Succeeded) return EndClass.Succeeded;
  if (a.phase === AttemptPhase.Cancelled) return EndClass.Cancelled;
  return undefined;
}

/** It committed a checkpoint past the one it started from. */
const madeProgress = (a: Attempt) => a.lastStep !== undefined && a.lastStep > (a.startStep ?? -1);

/**
 * Attempts that count against maxAttempts: user-code failures, failed setup steps (a step that
 * fails on every backend ends the run), and time-outs that made no progress (a time-out after a
 * new checkpoint is a long run going on, as submitit requeues it).
 */
export const userFailures = (attempts: readonly Attempt[], from = 1) =>
  attempts.filter((a) => {
    if (a.n < from) return false;
    const c = classOf(a);
    return (
      c === EndClass.UserError || c === EndClass.SetupFailed || (c === EndClass.Timeout && !madeProgress(a))
    );
  }).length;

/** Attempts ended by preemption or infrastructure: their own, generous cap (maxInfraAttempts). */
export const infraFailures = (attempts: readonly Attempt[], from = 1) =>
  attempts.filter((a) => {
    if (a.n < from) return false;
    const c = classOf(a);
    return c === EndClass.Preempted || c === EndClass.Infrastructure;
  }).length;

/** Wall-clock time the run's attempts have run, in ms (a live one up to now). */
export function runTimeMs(attempts: readonly Attempt[], nowMs: number): number {
  let sum = 0;
  for (const a of attempts) {
    if (!a.startedAt) continue;
    const end = a.finishedAt ? Date.parse(a.finishedAt) : nowMs;
    sum += Math.max(0, end - Date.parse(a.startedAt));
  }
  return sum;
}

/** `1.50h` */
export const hours = (ms: number) => `${(ms / 3_600_000).toFixed(2)}h`;

/** How long a running attempt may go without a heartbeat (policy.heartbeatTimeoutSec). */
export const heartbeatTimeoutMs = (spec: RunSpec) =>
  (spec.policy?.heartbeatTimeoutSec ?? DEFAULT_HEARTBEAT_TIMEOUT_SEC) * 1000;

/** How an attempt ended, as `endAttempt` records it. */
export interface AttemptEnd {
  phase: AttemptPhase;
  class: EndClass;
  reason?: string;
  message?: string;
  exitCode?: number;
  finishedAt?: string;
  /** The run's reason while it waits for the next attempt (default from the class). */
  runReason?: string;
}

/** Ends attempt `a` with class `e.class`, and moves the run on as the class says (classify.ts). */
export function endAttempt(doc: RunStatusDoc, a: Attempt, spec: RunSpec, nowMs: number, e: AttemptEnd): void {
  const now = new Date(nowMs).toISOString();
  recordEnd(a, e, now);
  const next = runAfterEnd(doc.status, a, spec, nowMs, e);
  const notReady = {
    type: ConditionType.Ready,
    status: 'False',
    reason: readyReasonOf(e.class),
    message: '',
  } as const;
  transition(doc.status, { ...next, conditions: [notReady, ...(next.conditions ?? [])] }, now);
}

/** Why the run is no longer Ready once an attempt of class `cls` ended. */
const readyReasonOf = (cls: EndClass): string =>
  cls === EndClass.Succeeded ? Reason.Completed : cls === EndClass.UserError ? Reason.Error : cls;

/** Where the run goes after attempt `a` ended with class `e.class`. */
function runAfterEnd(st: RunStatus, a: Attempt, spec: RunSpec, nowMs: number, e: AttemptEnd): RunTransition {
  switch (e.class) {
    case EndClass.Succeeded:
      return { phase: Phase.Succeeded, reason: Reason.Completed, message: `${where(a)} exited 0` };
    case EndClass.Cancelled:
      return {
        phase: Phase.Cancelled,
        reason: 'CancelledOnBackend',
        message: `${where(a)} was cancelled on the backend, not by the controller`,
      };
    case EndClass.Preempted:
    case EndClass.Infrastructure:
      return infraEnd(st, a, spec, e);
    case EndClass.Timeout:
      if (madeProgress(a)) return timeoutAfterProgress(st, a, e);
      break;
    case EndClass.SetupFailed:
      return setupFailure(st, a, spec, e);
    case EndClass.UserError:
      if (!retryable(a, spec)) return notRetryable(a, spec);
      break;
  }
  return userFailure(st, a, spec, nowMs, e);
}

/** `policy.retryOn.exitCodes`: absent, every user-code failure is worth another attempt. */
function retryable(a: Attempt, spec: RunSpec): boolean {
  const codes = spec.policy?.retryOn?.exitCodes;
  return !codes || (a.exitCode !== undefined && codes.includes(a.exitCode));
}

/** An exit code `policy.retryOn` does not list: the run fails now, whatever attempts are left. */
function notRetryable(a: Attempt, spec: RunSpec): RunTransition {
  const codes = spec.policy!.retryOn!.exitCodes.join(', ');
  const message = `${where(a)} exited ${a.exitCode ?? 'without an exit code'}, which policy.retryOn.exitCodes (${codes}) does not list: not retried`;
  return {
    phase: Phase.Failed,
    reason: Reason.ExitCodeNotRetryable,
    message,
    conditions: [
      { type: ConditionType.Retryable, status: 'False', reason: Reason.ExitCodeNotRetryable, message },
    ],
  };
}

function recordEnd(a: Attempt, e: AttemptEnd, now: string): void {
  a.phase = e.phase;
  a.class = e.class;
  a.finishedAt = e.finishedAt ?? now;
  if (e.exitCode !== undefined) a.exitCode = e.exitCode;
  if (e.reason) a.reason = e.reason;
  if (e.message) a.message = e.message;
  else delete a.message;
}

const where = (a: Attempt) => `attempt ${a.n} on ${a.backend}`;

const resumesFrom = (st: RunStatus) =>
  st.checkpoint ? `from step ${st.checkpoint.step}` : 'from the start (no checkpoint yet)';

/** Preemption or infrastructure: a new attempt at once, until maxInfraAttempts. */
function infraEnd(st: RunStatus, a: Attempt, spec: RunSpec, e: AttemptEnd): RunTransition {
  const max = spec.policy?.maxInfraAttempts ?? DEFAULTS.maxInfraAttempts;
  if (infraFailures(st.attempts, st.budgetFromAttempt) >= max)
    return {
      phase: Phase.Failed,
      reason: Reason.AttemptsExhausted,
      message: `${max} attempts ended by preemption or infrastructure failure`,
    };
  return {
    phase: Phase.Scheduling,
    reason: e.runReason ?? (e.class === EndClass.Preempted ? Reason.Preempted : Reason.Lost),
    message: `${where(a)} ended: ${e.reason ?? e.class}; a new attempt starts ${resumesFrom(st)}`,
  };
}

/** A time-out after a new checkpoint is a long run going on: a new attempt at once. */
function timeoutAfterProgress(st: RunStatus, a: Attempt, e: AttemptEnd): RunTransition {
  return {
    phase: Phase.Scheduling,
    reason: 'Timeout',
    message: `${where(a)} reached its time limit (${e.reason ?? 'TIMEOUT'}) after committing step ${a.lastStep}; a new attempt starts ${resumesFrom(st)}`,
  };
}

/**
 * A setup step failed on the host (adv exec says which, with its exit code and last lines: the
 * attempt's message). It counts against maxAttempts like a user error, but the next attempt starts
 * at once, without backoff: the solver tries the backends where setup has not failed first.
 */
function setupFailure(st: RunStatus, a: Attempt, spec: RunSpec, e: AttemptEnd): RunTransition {
  const failures = userFailures(st.attempts, st.budgetFromAttempt);
  const max = spec.policy?.maxAttempts ?? DEFAULTS.maxAttempts;
  const step = e.message?.split('\n')[0]?.trim() || `a setup step exited ${a.exitCode ?? '?'}`;
  if (failures >= max)
    return {
      phase: Phase.Failed,
      reason: Reason.AttemptsExhausted,
      message: `${where(a)}: ${step}; ${failures} of ${max} attempts failed`,
    };
  return {
    phase: Phase.Scheduling,
    reason: EndClass.SetupFailed,
    message: `${where(a)}: ${step}; a new attempt starts on another backend where one fits (${failures} of ${max})`,
  };
}

/** A user error, or a time-out without progress: counts against maxAttempts, with backoff. */
function userFailure(st: RunStatus, a: Attempt, spec: RunSpec, nowMs: number, e: AttemptEnd): RunTransition {
  const failures = userFailures(st.attempts, st.budgetFromAttempt);
  const max = spec.policy?.maxAttempts ?? DEFAULTS.maxAttempts;
  const what =
    e.class === EndClass.Timeout
      ? `reached its time limit (${e.reason ?? 'TIMEOUT'}) without a new checkpoint`
      : `exited ${a.exitCode ?? '?'}${a.reason && a.reason !== 'Error' ? ` (${a.reason})` : ''}`;
  if (failures >= max)
    return {
      phase: Phase.Failed,
      reason: Reason.AttemptsExhausted,
      message: `${where(a)} ${what}; ${failures} of ${max} attempts failed`,
    };
  const b = spec.policy?.backoff ?? {};
  const delaySec = Math.min(
    (b.initialSec ?? DEFAULTS.backoffInitialSec) * Math.pow(b.factor ?? DEFAULTS.backoffFactor, failures - 1),
    b.maxSec ?? DEFAULTS.backoffMaxSec,
  );
  st.nextAttemptAfter = new Date(nowMs + delaySec * 1000).toISOString();
  return {
    phase: Phase.Scheduling,
    reason: Reason.BackoffWaiting,
    message: `${where(a)} ${what}; retrying in ${delaySec}s ${resumesFrom(st)} (${failures} of ${max})`,
  };
}

/**
 * Guardrails on a live attempt: `maxTotalHours` over the run, `maxHours` per attempt, and
 * `queuedTimeoutSec` (withdraw and go elsewhere, when there is an elsewhere). True when the
 * attempt was stopped and its job must be cancelled.
 */
export function guardrails(doc: RunStatusDoc, a: Attempt, spec: RunSpec, ctx: PlanContext): boolean {
  return (
    costGuard(doc, a, spec, ctx.now) ||
    totalTimeGuard(doc, a, spec, ctx.now) ||
    maxHoursGuard(doc, a, spec, ctx.now) ||
    queuedTimeoutGuard(doc, a, spec, ctx)
  );
}

/** `maxCost`: the run fails once its attempts together cost more (a live one is stopped). */
function costGuard(doc: RunStatusDoc, a: Attempt, spec: RunSpec, nowMs: number): boolean {
  const message = costLimitMessage(doc.status.attempts, spec, nowMs);
  if (!message) return false;
  endAttempt(doc, a, spec, nowMs, {
    phase: AttemptPhase.Failed,
    class: EndClass.Timeout,
    reason: Reason.CostLimitExceeded,
    message,
  });
  delete doc.status.nextAttemptAfter;
  transition(
    doc.status,
    { phase: Phase.Failed, reason: Reason.CostLimitExceeded, message },
    new Date(nowMs).toISOString(),
  );
  return true;
}

/** Why the run is past `policy.maxCost`, or undefined while it is not (or has no price). */
export function costLimitMessage(
  attempts: readonly Attempt[],
  spec: RunSpec,
  nowMs: number,
): string | undefined {
  const max = spec.policy?.maxCost;
  const total = max === undefined ? undefined : runCost(attempts, nowMs);
  if (max === undefined || total === undefined || total < max) return undefined;
  return `the run's attempts cost ${formatMoney(total)} in total, past policy.maxCost (${max})`;
}

/** `maxTotalHours`: the run fails, whatever the attempt's class would say. */
function totalTimeGuard(doc: RunStatusDoc, a: Attempt, spec: RunSpec, nowMs: number): boolean {
  const st = doc.status;
  const max = spec.policy?.maxTotalHours;
  const total = runTimeMs(st.attempts, nowMs);
  if (max === undefined || total <= max * 3_600_000) return false;
  const message = `the run's attempts ran ${hours(total)} in total, past policy.maxTotalHours (${max}h)`;
  endAttempt(doc, a, spec, nowMs, {
    phase: AttemptPhase.Failed,
    class: EndClass.Timeout,
    reason: Reason.TotalTimeExceeded,
    message,
  });
  delete st.nextAttemptAfter;
  transition(
    st,
    { phase: Phase.Failed, reason: Reason.TotalTimeExceeded, message },
    new Date(nowMs).toISOString(),
  );
  return true;
}

/** `maxHours`: the attempt ends as a time-out (the run goes on if it made progress). */
function maxHoursGuard(doc: RunStatusDoc, a: Attempt, spec: RunSpec, nowMs: number): boolean {
  const st = doc.status;
  const max = spec.policy?.maxHours;
  if (a.phase !== AttemptPhase.Running || !a.startedAt || max === undefined) return false;
  const ran = nowMs - Date.parse(a.startedAt);
  if (ran <= max * 3_600_000) return false;
  endAttempt(doc, a, spec, nowMs, {
    phase: AttemptPhase.Failed,
    class: EndClass.Timeout,
    reason: Reason.MaxHoursExceeded,
    message: `ran ${hours(ran)}, past policy.maxHours (${max}h)`,
  });
  // The stopped attempt gets its grace period to commit a last checkpoint first.
  if (st.phase === Phase.Scheduling)
    st.nextAttemptAfter = new Date(
      Math.max(nowMs + RESTART_GRACE_MS, Date.parse(st.nextAttemptAfter ?? new Date(nowMs).toISOString())),
    ).toISOString();
  return true;
}

/** `queuedTimeoutSec`: withdraw the job, but only when another backend could take it. */
function queuedTimeoutGuard(doc: RunStatusDoc, a: Attempt, spec: RunSpec, ctx: PlanContext): boolean {
  const limit = spec.policy?.queuedTimeoutSec;
  if (a.phase !== AttemptPhase.Queued || a.startedAt || limit === undefined || !a.submittedAt) return false;
  const waited = ctx.now - Date.parse(a.submittedAt);
  if (waited <= limit * 1000) return false;
  // Otherwise it keeps its place in the queue.
  const others = ctx.backends.filter((b) => b.name !== a.backend);
  if (!solve(spec, others, doc.status.attempts, ctx.now).backend) return false;
  endAttempt(doc, a, spec, ctx.now, {
    phase: AttemptPhase.Cancelled,
    class: EndClass.Infrastructure,
    reason: Reason.QueuedTimeout,
    message: `queued ${Math.round(waited / 1000)}s on ${a.backend}, past policy.queuedTimeoutSec (${limit}s); withdrawn`,
    runReason: Reason.QueuedTimeout,
  });
  return true;
}

/** Applies what the backend reports; true when the attempt was given up and its job must be cancelled. */
export function applyObservation(
  doc: RunStatusDoc,
  a: Attempt,
  o: ObservedJob,
  spec: RunSpec,
  nowMs: number,
): boolean {
  const st = doc.status;
  if (o.jobId && o.jobId !== 'unknown') a.jobId = o.jobId;
  if (o.startedAt) a.startedAt ??= o.startedAt;
  // The backend knows the price better than the Backend spec did (a rented instance's own rate).
  if (o.pricePerHour !== undefined && o.pricePerHour !== a.price?.perHour)
    a.price = { perHour: o.pricePerHour, from: a.price?.from ?? 'submitted' };
  if (o.state === JobState.Unknown) return unobservable(doc, a, o, spec, nowMs);
  st.conditions = removeCondition(st.conditions, ConditionType.Stale);
  const cls = classifyEnd(o);
  if (!cls) {
    stillGoing(doc, a, o, new Date(nowMs).toISOString());
    return false;
  }
  endAttempt(doc, a, spec, nowMs, {
    phase: endPhaseOf(cls, o),
    class: cls,
    ...(o.reason ? { reason: o.reason } : {}),
    ...(o.message ? { message: o.message } : {}),
    ...(o.exitCode !== undefined ? { exitCode: o.exitCode } : {}),
    ...(o.finishedAt ? { finishedAt: o.finishedAt } : {}),
  });
  return false;
}

/**
 * Cannot observe right now: not a failure (`Stale`). Only a sustained loss of observation AND a
 * missing heartbeat (the worker cannot reach the store either) makes the attempt lost.
 */
function unobservable(doc: RunStatusDoc, a: Attempt, o: ObservedJob, spec: RunSpec, nowMs: number): boolean {
  const st = doc.status;
  st.conditions = setCondition(
    st.conditions,
    {
      type: ConditionType.Stale,
      status: 'True',
      reason: o.reason ?? 'Unobservable',
      message: o.message ?? '',
    },
    new Date(nowMs).toISOString(),
  );
  const since = Date.parse(st.conditions.find((c) => c.type === ConditionType.Stale)!.lastTransitionTime);
  const limit = heartbeatTimeoutMs(spec);
  const beat = st.lastHeartbeat ? Date.parse(st.lastHeartbeat) : 0;
  if (nowMs - since <= limit || nowMs - beat <= limit) return false;
  st.conditions = removeCondition(st.conditions, ConditionType.Stale);
  endAttempt(doc, a, spec, nowMs, {
    phase: AttemptPhase.Lost,
    class: EndClass.Infrastructure,
    reason: Reason.Unreachable,
    message: `${a.backend} could not be observed for ${Math.round((nowMs - since) / 1000)}s and the job sent no heartbeat (${o.message ?? o.reason ?? 'unobservable'})`,
    runReason: Reason.Lost,
  });
  return true;
}

/** Queued or running on the backend. */
function stillGoing(doc: RunStatusDoc, a: Attempt, o: ObservedJob, now: string): void {
  if (o.state === JobState.Pending) {
    a.phase = AttemptPhase.Queued;
    // The backend's own word on why it waits (a SLURM reason, "no agent can run it: …").
    const why = o.message ? `: ${o.message}` : '';
    transition(
      doc.status,
      { phase: Phase.Queued, reason: 'Queued', message: `attempt ${a.n} queued on ${a.backend}${why}` },
      now,
    );
    return;
  }
  a.phase = AttemptPhase.Running;
  // Ready=True comes with the phase.
  transition(
    doc.status,
    { phase: Phase.Running, reason: 'Running', message: `attempt ${a.n} running on ${a.backend}` },
    now,
  );
}

/** The attempt's phase for an end of class `cls`. */
function endPhaseOf(cls: EndClass, o: ObservedJob): AttemptPhase {
  if (cls === EndClass.Succeeded) return AttemptPhase.Succeeded;
  if (cls === EndClass.Cancelled) return AttemptPhase.Cancelled;
  if (cls === EndClass.Preempted) return AttemptPhase.Preempted;
  return o.state === JobState.Lost ? AttemptPhase.Lost : AttemptPhase.Failed;
}

/** Records the worker's heartbeat: its time, the step it restored from, its latest checkpoint. */
export function applyHeartbeat(doc: RunStatusDoc, a: Attempt, hb: Heartbeat, nowMs: number): void {
  const st = doc.status;
  st.lastHeartbeat = hb.time;
  if (hb.restoredFrom !== undefined) a.startStep = hb.restoredFrom;
  const ckpt = hb.lastCheckpoint;
  if (!ckpt) return;
  if (ckpt.step !== hb.restoredFrom) {
    a.lastStep = ckpt.step;
    a.lastStepAt = ckpt.createdAt;
  }
  if (st.checkpoint && st.checkpoint.step === ckpt.step) return;
  st.checkpoint = { ...ckpt };
  st.conditions = setCondition(
    st.conditions,
    {
      type: ConditionType.Checkpointed,
      status: 'True',
      reason: 'Committed',
      message: `step ${ckpt.step} committed at ${ckpt.createdAt}`,
    },
    new Date(nowMs).toISOString(),
  );
}
