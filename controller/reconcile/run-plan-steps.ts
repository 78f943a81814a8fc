/**
 * The Run planner's steps, in the order `planRun` takes them. The first three decide whether
 * there is a spec to act on at all (without copying the status, so a resync of thousands of
 * finished runs stays cheap); the rest edit one working state, `RunWork`, and any of them may end
 * the pipeline by returning `STOP`. Each is exported to be tested on its own.
 */
import jsonpatch, { type Operation } from 'fast-json-patch';
import { jobNameFor, type ObservedJob } from '../backends/types.js';
import type { CodeRepoState } from '../git/code-repos.js';
import type { RunSpec } from '../spec/schema.js';
import { SCHEDULING_PHASES, TERMINAL_PHASES } from '../status/phases.js';
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
import { EndClass } from '../status/types.js';
import { WORKER_HEARTBEAT_MISSING, workerConditions } from './run-plan-workers.js';
import {
  applyHeartbeat,
  applyObservation,
  costLimitMessage,
  guardrails,
  heartbeatTimeoutMs,
  hours,
  runTimeMs,
} from './run-plan-attempts.js';
import {
  cancelAction,
  clone,
  finishPlan,
  IMMUTABLE_FIELDS,
  isLiveAttempt,
  markCancelled,
  markInvalid,
  newDoc,
  RECONCILE_ANNOTATION,
  RESTART_GRACE_MS,
  RETRY_ANNOTATION,
  setPhase,
  SUBMIT_TAKEOVER_MS,
  summaryOf,
  type DesiredRun,
  type InvalidRun,
  type PlanContext,
  type RunAction,
  type RunPlan,
  type RunPlanInput,
} from './run-plan-model.js';
import { solve, type Decision } from './solver.js';

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
  setPhase(doc, Phase.Cancelled, Reason.SpecDeleted, 'the spec was removed from the watched branch');
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
  st.conditions = setCondition(
    st.conditions,
    { type: ConditionType.Valid, status: 'True', reason: 'Valid', message: '' },
    w.now,
  );
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
  setPhase(
    w.doc,
    Phase.Scheduling,
    Reason.RestartOnSpecChange,
    'the spec changed; a new attempt starts from the last checkpoint',
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
    setPhase(
      w.doc,
      Phase.Scheduling,
      'RetryRequested',
      'adv retry: a new attempt starts from the last checkpoint',
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
    setPhase(w.doc, Phase.Cancelled, Reason.Suspended, 'spec.suspend is true');
  clearStalled(st);
  w.headline = `run/${w.name}: ${st.phase}${st.reason === Reason.Suspended ? ' (suspended)' : ''}`;
  return STOP;
};

/** Unsuspended, or its spec restored: the run resumes with a new attempt. */
export const resume: RunStep = (w) => {
  const st = w.doc.status;
  if (st.phase === Phase.Cancelled && SELF_UNDOING_CANCELS.has(st.reason))
    setPhase(w.doc, Phase.Scheduling, 'Resumed', 'resumed: a new attempt starts from the last checkpoint');
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
    st.conditions = removeCondition(
      removeCondition(st.conditions, ConditionType.Lost),
      ConditionType.Restoring,
    );
  }
  return undefined;
};

// ---------------------------------------------------------------------------------------------
// 4. A new attempt, or the completion of a write-ahead record

/**
 * A new attempt when none is live and one is due. Ends the pipeline whenever the run has no live
 * attempt; a human-fixable cause (a code ref or secret that does not resolve) stalls the run.
 */
export const schedule: RunStep = (w) => {
  const st = w.doc.status;
  if (isLiveAttempt(st.attempts.at(-1)) || !SCHEDULING_PHASES.has(st.phase)) return undefined;
  if (outOfTotalTime(w) || inBackoff(w) || heldStall(w)) return STOP;
  const codeCommit = codeCommitOf(w);
  if (typeof codeCommit !== 'object') return codeCommit;
  const missing = missingSecrets(w);
  if (missing) return stall(w, Reason.SecretMissing, missing);
  clearStalled(st);
  const choice = solve(w.spec, w.ctx.backends, st.attempts, w.ctx.now);
  if (choice.backend) createAttempt(w, choice.backend, choice.why, codeCommit.commit);
  else waitForBackend(w, choice);
  return STOP;
};

/**
 * The commit the next attempt runs: the pinned one, else `code.ref` resolved in the specs repo,
 * or, for `code.repo`, what the caller found there. Code still being fetched waits (the fetch
 * names the run when it ends); what a person must fix stalls the run.
 */
function codeCommitOf(w: RunWork): { commit: string } | StepResult {
  const st = w.doc.status;
  if (w.spec.code?.repo) return codeRepoCommit(w, w.ctx.codeRepos?.get(w.name));
  const codeRef = w.spec.code?.ref;
  const commit = st.codeCommit ?? (codeRef ? w.ctx.codeRefs.get(codeRef) : w.ctx.specCommit);
  if (commit) return { commit };
  return stall(
    w,
    Reason.CodeRefNotFound,
    `code.ref "${codeRef}" does not name a branch, tag or commit of the repository`,
  );
}

const CODE_REPO_FIX: Record<string, string> = {
  SecretMissing: 'set it where the controller reads secrets, then adv reconcile run',
  CodeRefNotFound: 'push that branch or tag to the repository, or fix code.ref',
  CodeFetchFailed: 'fix what the message says; the controller tries again on its own',
  CodeRepoInvalid: 'fix the repository or code.repo',
};

function codeRepoCommit(w: RunWork, s: CodeRepoState | undefined): { commit: string } | StepResult {
  if (s?.state === 'ready') return { commit: s.commit };
  if (s?.state === 'failed') {
    const fix = CODE_REPO_FIX[s.reason] ?? 'fix code.repo';
    const r = stall(w, s.reason, `${s.message} (fix: ${fix}${fix.endsWith('run') ? ` ${w.name}` : ''})`);
    if (s.retryInMs !== undefined) w.requeueAfterMs = s.retryInMs;
    return r;
  }
  const message = s?.message ?? `waiting for the code of ${w.spec.code?.repo}`;
  setPhase(w.doc, Phase.Pending, Reason.FetchingCode, message);
  w.doc.status.conditions = setCondition(
    w.doc.status.conditions,
    { type: ConditionType.Scheduled, status: 'False', reason: Reason.FetchingCode, message },
    w.now,
  );
  w.requeueAfterMs = 5_000;
  return STOP;
}

/**
 * A submission the operating system refused for this very spec (arguments too large, a NUL byte),
 * or a fork whose source checkpoint is not in the store, is not tried again until the spec
 * changes, or a person asks (`adv reconcile`, `adv retry`): every retry would fail the same way.
 */
const HELD_STALLS: ReadonlySet<string> = new Set([
  'ArgumentsTooLarge',
  'NulByte',
  // The fork's source checkpoint is not in the store: asking again copies nothing more.
  Reason.ForkSourceMissing,
]);

function heldStall(w: RunWork): boolean {
  const c = w.doc.status.conditions.find((x) => x.type === ConditionType.Stalled && x.status === 'True');
  return c !== undefined && HELD_STALLS.has(c.reason) && c.observedGeneration === w.desired.generation;
}

/** When a secret of the spec does not resolve: which, where the controller looked, and the fix. */
function missingSecrets(w: RunWork): string | undefined {
  const names = w.spec.secrets ?? [];
  const message = names.length ? w.ctx.missingSecrets?.(names) : undefined;
  if (!message) return undefined;
  const several = names.filter((n) => w.ctx.missingSecrets?.([n])).length > 1;
  return `${message}; set ${several ? 'them' : 'it'} in the controller's environment, then adv reconcile run ${w.name}`;
}

/** `maxTotalHours` or `maxCost` reached between attempts: the run fails instead of starting another. */
function outOfTotalTime(w: RunWork): boolean {
  const st = w.doc.status;
  const overBudget = costLimitMessage(st.attempts, w.spec, w.ctx.now);
  if (overBudget) {
    delete st.nextAttemptAfter;
    setPhase(w.doc, Phase.Failed, Reason.CostLimitExceeded, overBudget);
    clearStalled(st);
    return true;
  }
  const total = runTimeMs(st.attempts, w.ctx.now);
  const max = w.spec.policy?.maxTotalHours;
  if (max === undefined || total < max * 3_600_000) return false;
  delete st.nextAttemptAfter;
  setPhase(
    w.doc,
    Phase.Failed,
    Reason.TotalTimeExceeded,
    `the run's attempts ran ${hours(total)} in total, past policy.maxTotalHours (${max}h)`,
  );
  clearStalled(st);
  return true;
}

/** The next attempt is not due yet (backoff, restart grace): look again when it is. */
function inBackoff(w: RunWork): boolean {
  const due = w.doc.status.nextAttemptAfter ? Date.parse(w.doc.status.nextAttemptAfter) : 0;
  if (due <= w.ctx.now) return false;
  w.requeueAfterMs = due - w.ctx.now;
  return true;
}

/**
 * A human must act: Pending with `Stalled=True` and `Scheduled=False`. No requeue (a timer would
 * only repeat the message) and no attempt, so nothing counts against a backend.
 */
function stall(w: RunWork, reason: string, message: string): StepResult {
  const st = w.doc.status;
  setPhase(w.doc, Phase.Pending, reason, message);
  st.conditions = setCondition(
    st.conditions,
    { type: ConditionType.Scheduled, status: 'False', reason, message },
    w.now,
  );
  st.conditions = setCondition(
    st.conditions,
    { type: ConditionType.Stalled, status: 'True', reason, message },
    w.now,
  );
  return STOP;
}

function clearStalled(st: RunStatus): void {
  st.conditions = removeCondition(st.conditions, ConditionType.Stalled);
}

/** No backend can take the run now: wait (NoCapacity: one may free up soon). */
function waitForBackend(w: RunWork, choice: Decision): void {
  const st = w.doc.status;
  const reason = choice.wait === 'NoCapacity' ? Reason.NoCapacity : Reason.NoBackend;
  setPhase(w.doc, Phase.Pending, reason, choice.why);
  st.conditions = setCondition(
    st.conditions,
    { type: ConditionType.Scheduled, status: 'False', reason, message: choice.why },
    w.now,
  );
  w.requeueAfterMs = reason === Reason.NoCapacity ? 10_000 : 30_000;
}

/** Writes the attempt's write-ahead record (`Submitting`), and asks for its submission. */
function createAttempt(w: RunWork, backend: string, why: string, codeCommit: string): void {
  const st = w.doc.status;
  st.codeCommit = codeCommit;
  const code = w.ctx.codeRepos?.get(w.name);
  if (w.spec.code?.repo && code?.state === 'ready') st.codeRepo = code.repo;
  else delete st.codeRepo;
  const n = (st.attempts.at(-1)?.n ?? 0) + 1;
  const attempt: Attempt = {
    n,
    backend,
    jobName: jobNameFor(w.name, n, jobNameMaxOf(w.ctx, backend)),
    phase: AttemptPhase.Submitting,
    submittedAt: w.now,
    specCommit: st.specCommit ?? w.ctx.specCommit,
    codeCommit,
    ...(w.ctx.controllerId ? { controller: w.ctx.controllerId } : {}),
    ...priceOf(w, backend),
    why,
  };
  st.attempts.push(attempt);
  delete st.nextAttemptAfter;
  setPhase(w.doc, Phase.Scheduling, 'Submitting', `submitting attempt ${n} to ${backend}`);
  st.conditions = setCondition(
    st.conditions,
    { type: ConditionType.Scheduled, status: 'True', reason: 'BackendChosen', message: why },
    w.now,
  );
  w.actions.push({ type: 'submit', run: w.name, attempt: n, backend, jobName: attempt.jobName });
}

/**
 * The longest job name `backend` accepts (its type's traits); 63, Kubernetes', for a backend
 * passed in without traits.
 */
/**
 * The attempt's price, from the Backend's `capabilities.costPerHour` (per node) and the nodes the
 * run spans; a backend that creates what it runs on (no queue of its own) bills from the submit.
 */
function priceOf(w: RunWork, backend: string): Pick<Attempt, 'price'> {
  const info = w.ctx.backends.find((b) => b.name === backend);
  const perNode = info?.spec.capabilities?.costPerHour;
  if (perNode === undefined) return {};
  const perHour = perNode * (w.spec.resources?.nodes ?? 1);
  return { price: { perHour, from: info?.traits.queuesWhenFull ? 'started' : 'submitted' } };
}

function jobNameMaxOf(ctx: PlanContext, backend: string): number {
  const info = ctx.backends.find((b) => b.name === backend);
  return info?.traits?.jobNameMax ?? 63;
}

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
    setPhase(
      w.doc,
      Phase.Scheduling,
      'Submitting',
      `attempt ${last.n} is being submitted to ${last.backend} by controller ${last.controller}; if that controller is gone, this one finds the job by name or submits it at ${at}`,
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
