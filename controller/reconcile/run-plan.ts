/**
 * The Run planner: pure. Given what git asks for (desired), what the status branch says was done
 * (current) and what the backend reports (observed), it returns the next status and the actions to
 * take. No I/O: the controller executes the actions, and `adv plan` calls the same function.
 */
import jsonpatch from 'fast-json-patch';
import { createHash } from 'node:crypto';
import { jobNameFor, JobState, type ObservedJob } from '../backends/types.js';
import type { RunSpec } from '../spec/schema.js';
import {
  AttemptPhase,
  ConditionType,
  Phase,
  Reason,
  removeCondition,
  setCondition,
  TERMINAL_PHASES,
  type Attempt,
  type Condition,
  type Heartbeat,
  type RunStatusDoc,
} from '../status/types.js';
import { classifyEnd, EndClass } from './classify.js';
import { solve, type BackendInfo } from './solver.js';

export type { BackendInfo } from './solver.js';

export const RECONCILE_ANNOTATION = 'adventuretime.dev/reconcile-requested-at';
/** Changing its value asks for a new attempt of a finished run (`adv retry`). */
export const RETRY_ANNOTATION = 'adventuretime.dev/retry-requested-at';

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
 * Attempts that count against maxAttempts: user-code failures, and time-outs that made no
 * progress (a time-out after a new checkpoint is a long run going on, as submitit requeues it).
 */
export const userFailures = (attempts: readonly Attempt[], from = 1) =>
  attempts.filter((a) => {
    if (a.n < from) return false;
    const c = classOf(a);
    return c === EndClass.UserError || (c === EndClass.Timeout && !madeProgress(a));
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
    markInvalid(st, invalid, now);
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

  // `adv retry`: a finished run gets a new attempt (from its last checkpoint), with a fresh
  // failure budget; a run still in flight just records that the request was seen.
  const retry = desired.annotations?.[RETRY_ANNOTATION];
  if (retry && retry !== st.lastHandledRetryAt) {
    st.lastHandledRetryAt = retry;
    if (TERMINAL_PHASES.has(st.phase) && !spec.suspend) {
      st.budgetFromAttempt = (st.attempts.at(-1)?.n ?? 0) + 1;
      delete st.nextAttemptAfter;
      setPhase(
        doc,
        Phase.Scheduling,
        'RetryRequested',
        'adv retry: a new attempt starts from the last checkpoint',
        now,
      );
      events.push('retry requested');
    }
  }

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
  if (isLive(last) && observed && observed.jobName === last.jobName) {
    if (applyObservation(doc, last, observed, spec, ctx.now)) actions.push(cancelAction(name, last));
    const endedAs = st.attempts.at(-1)?.class;
    if (endedAs && endedAs !== EndClass.Succeeded && st.message) events.push(st.message);
  }
  // Guardrails: time limits, and a queue that does not move.
  if (isLive(last) && last.phase !== AttemptPhase.Submitting && guardrails(doc, last, spec, ctx)) {
    actions.push(cancelAction(name, last));
    if (st.message) events.push(st.message);
  }
  last = st.attempts.at(-1);
  if (last?.phase === AttemptPhase.Running && st.lastHeartbeat) {
    const limit = heartbeatTimeoutMs(spec);
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
    const total = runTimeMs(st.attempts, ctx.now);
    const maxTotal = spec.policy?.maxTotalHours;
    if (maxTotal !== undefined && total >= maxTotal * 3_600_000) {
      delete st.nextAttemptAfter;
      setPhase(
        doc,
        Phase.Failed,
        Reason.TotalTimeExceeded,
        `the run's attempts ran ${hours(total)} in total, past policy.maxTotalHours (${maxTotal}h)`,
        now,
      );
    } else if (due > ctx.now) {
      requeueAfterMs = due - ctx.now;
    } else {
      const codeRef = spec.code?.ref;
      const codeCommit = st.codeCommit ?? (codeRef ? ctx.codeRefs.get(codeRef) : ctx.specCommit);
      const choice = solve(spec, ctx.backends, st.attempts, ctx.now);
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
        const reason = choice.wait === 'NoCapacity' ? Reason.NoCapacity : Reason.NoBackend;
        setPhase(doc, Phase.Pending, reason, choice.why, now);
        st.conditions = setCondition(
          st.conditions,
          { type: ConditionType.Scheduled, status: 'False', reason, message: choice.why },
          now,
        );
        requeueAfterMs = reason === Reason.NoCapacity ? 10_000 : 30_000;
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
          why: choice.why,
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

/** Applies what the backend reports; true when the attempt was given up and its job must be cancelled. */
function applyObservation(
  doc: RunStatusDoc,
  a: Attempt,
  o: ObservedJob,
  spec: RunSpec,
  nowMs: number,
): boolean {
  const st = doc.status;
  const now = new Date(nowMs).toISOString();
  if (o.jobId && o.jobId !== 'unknown') a.jobId = o.jobId;
  if (o.startedAt) a.startedAt ??= o.startedAt;
  if (o.state === JobState.Unknown) {
    // Cannot observe right now: not a failure. Only a sustained loss of observation AND a missing
    // heartbeat (the worker cannot reach the store either) makes the attempt lost.
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
  st.conditions = removeCondition(st.conditions, ConditionType.Stale);
  const cls = classifyEnd(o);
  if (!cls) {
    if (o.state === JobState.Pending) {
      a.phase = AttemptPhase.Queued;
      setPhase(doc, Phase.Queued, 'Queued', `attempt ${a.n} queued on ${a.backend}`, now);
    } else {
      a.phase = AttemptPhase.Running;
      setPhase(doc, Phase.Running, 'Running', `attempt ${a.n} running on ${a.backend}`, now);
      st.conditions = setCondition(
        st.conditions,
        { type: ConditionType.Ready, status: 'True', reason: 'Running', message: '' },
        now,
      );
    }
    return false;
  }
  const phase =
    cls === EndClass.Succeeded
      ? AttemptPhase.Succeeded
      : cls === EndClass.Cancelled
        ? AttemptPhase.Cancelled
        : cls === EndClass.Preempted
          ? AttemptPhase.Preempted
          : o.state === JobState.Lost
            ? AttemptPhase.Lost
            : AttemptPhase.Failed;
  endAttempt(doc, a, spec, nowMs, {
    phase,
    class: cls,
    ...(o.reason ? { reason: o.reason } : {}),
    ...(o.message ? { message: o.message } : {}),
    ...(o.exitCode !== undefined ? { exitCode: o.exitCode } : {}),
    ...(o.finishedAt ? { finishedAt: o.finishedAt } : {}),
  });
  return false;
}

interface AttemptEnd {
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
  const st = doc.status;
  const now = new Date(nowMs).toISOString();
  a.phase = e.phase;
  a.class = e.class;
  a.finishedAt = e.finishedAt ?? now;
  if (e.exitCode !== undefined) a.exitCode = e.exitCode;
  if (e.reason) a.reason = e.reason;
  if (e.message) a.message = e.message;
  else delete a.message;
  const where = `attempt ${a.n} on ${a.backend}`;
  const from = st.checkpoint ? `from step ${st.checkpoint.step}` : 'from the start (no checkpoint yet)';
  const ready = (reason: string) =>
    (st.conditions = setCondition(
      st.conditions,
      { type: ConditionType.Ready, status: 'False', reason, message: '' },
      now,
    ));
  switch (e.class) {
    case EndClass.Succeeded:
      setPhase(doc, Phase.Succeeded, Reason.Completed, `${where} exited 0`, now);
      ready(Reason.Completed);
      return;
    case EndClass.Cancelled:
      setPhase(
        doc,
        Phase.Cancelled,
        'CancelledOnBackend',
        `${where} was cancelled on the backend, not by the controller`,
        now,
      );
      ready('Cancelled');
      return;
    case EndClass.Preempted:
    case EndClass.Infrastructure: {
      ready(e.class);
      const max = spec.policy?.maxInfraAttempts ?? DEFAULTS.maxInfraAttempts;
      if (infraFailures(st.attempts, st.budgetFromAttempt) >= max) {
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
          e.runReason ?? (e.class === EndClass.Preempted ? Reason.Preempted : Reason.Lost),
          `${where} ended: ${e.reason ?? e.class}; a new attempt starts ${from}`,
          now,
        );
      }
      return;
    }
    case EndClass.Timeout:
      ready(e.class);
      if (madeProgress(a)) {
        setPhase(
          doc,
          Phase.Scheduling,
          'Timeout',
          `${where} reached its time limit (${e.reason ?? 'TIMEOUT'}) after committing step ${a.lastStep}; a new attempt starts ${from}`,
          now,
        );
        return;
      }
      break;
    case EndClass.UserError:
      ready(Reason.Error);
      break;
  }
  // A user error, or a time-out without progress: counts against maxAttempts, with backoff.
  const failures = userFailures(st.attempts, st.budgetFromAttempt);
  const max = spec.policy?.maxAttempts ?? DEFAULTS.maxAttempts;
  const what =
    e.class === EndClass.Timeout
      ? `reached its time limit (${e.reason ?? 'TIMEOUT'}) without a new checkpoint`
      : `exited ${a.exitCode ?? '?'}${a.reason && a.reason !== 'Error' ? ` (${a.reason})` : ''}`;
  if (failures >= max) {
    setPhase(
      doc,
      Phase.Failed,
      Reason.AttemptsExhausted,
      `${where} ${what}; ${failures} of ${max} attempts failed`,
      now,
    );
    return;
  }
  const b = spec.policy?.backoff ?? {};
  const delaySec = Math.min(
    (b.initialSec ?? DEFAULTS.backoffInitialSec) * Math.pow(b.factor ?? DEFAULTS.backoffFactor, failures - 1),
    b.maxSec ?? DEFAULTS.backoffMaxSec,
  );
  st.nextAttemptAfter = new Date(nowMs + delaySec * 1000).toISOString();
  setPhase(
    doc,
    Phase.Scheduling,
    Reason.BackoffWaiting,
    `${where} ${what}; retrying in ${delaySec}s ${from} (${failures} of ${max})`,
    now,
  );
}

/**
 * Guardrails on a live attempt: `maxTotalHours` over the run, `maxHours` per attempt, and
 * `queuedTimeoutSec` (withdraw and go elsewhere, when there is an elsewhere). True when the
 * attempt was stopped and its job must be cancelled.
 */
function guardrails(doc: RunStatusDoc, a: Attempt, spec: RunSpec, ctx: PlanContext): boolean {
  const st = doc.status;
  const p = spec.policy ?? {};
  const nowMs = ctx.now;
  const now = new Date(nowMs).toISOString();
  const total = runTimeMs(st.attempts, nowMs);
  if (p.maxTotalHours !== undefined && total > p.maxTotalHours * 3_600_000) {
    const message = `the run's attempts ran ${hours(total)} in total, past policy.maxTotalHours (${p.maxTotalHours}h)`;
    endAttempt(doc, a, spec, nowMs, {
      phase: AttemptPhase.Failed,
      class: EndClass.Timeout,
      reason: Reason.TotalTimeExceeded,
      message,
    });
    delete st.nextAttemptAfter;
    setPhase(doc, Phase.Failed, Reason.TotalTimeExceeded, message, now);
    return true;
  }
  if (a.phase === AttemptPhase.Running && a.startedAt && p.maxHours !== undefined) {
    const ran = nowMs - Date.parse(a.startedAt);
    if (ran > p.maxHours * 3_600_000) {
      endAttempt(doc, a, spec, nowMs, {
        phase: AttemptPhase.Failed,
        class: EndClass.Timeout,
        reason: Reason.MaxHoursExceeded,
        message: `ran ${hours(ran)}, past policy.maxHours (${p.maxHours}h)`,
      });
      // The stopped attempt gets its grace period to commit a last checkpoint first.
      if (st.phase === Phase.Scheduling)
        st.nextAttemptAfter = new Date(
          Math.max(nowMs + RESTART_GRACE_MS, Date.parse(st.nextAttemptAfter ?? now)),
        ).toISOString();
      return true;
    }
  }
  if (a.phase === AttemptPhase.Queued && !a.startedAt && p.queuedTimeoutSec !== undefined && a.submittedAt) {
    const waited = nowMs - Date.parse(a.submittedAt);
    if (waited > p.queuedTimeoutSec * 1000) {
      // Withdraw only when another backend could take it: otherwise keep its place in the queue.
      const elsewhere = solve(
        spec,
        ctx.backends.filter((b) => b.name !== a.backend),
        st.attempts,
        nowMs,
      );
      if (!elsewhere.backend) return false;
      endAttempt(doc, a, spec, nowMs, {
        phase: AttemptPhase.Cancelled,
        class: EndClass.Infrastructure,
        reason: Reason.QueuedTimeout,
        message: `queued ${Math.round(waited / 1000)}s on ${a.backend}, past policy.queuedTimeoutSec (${p.queuedTimeoutSec}s); withdrawn`,
        runReason: Reason.QueuedTimeout,
      });
      return true;
    }
  }
  return false;
}

const hours = (ms: number) => `${(ms / 3_600_000).toFixed(2)}h`;

const heartbeatTimeoutMs = (spec: RunSpec) =>
  (spec.policy?.heartbeatTimeoutSec ?? DEFAULT_HEARTBEAT_TIMEOUT_SEC) * 1000;

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
  const retry = desired.annotations?.[RETRY_ANNOTATION];
  if (retry !== undefined && retry !== st.lastHandledRetryAt) return false;
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
    if (hb.lastCheckpoint.step !== hb.restoredFrom) {
      a.lastStep = hb.lastCheckpoint.step;
      a.lastStepAt = hb.lastCheckpoint.createdAt;
    }
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
