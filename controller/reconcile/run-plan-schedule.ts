/**
 * The Run pipeline's `schedule` step: a new attempt when none is live and one is due — the code
 * commit it runs, the secrets it needs, the guardrails that hold it back, the backend the solver
 * picks (or the wait when none can take it), and the write-ahead attempt record.
 */
import { jobNameFor } from '../backends/types.js';
import type { CodeRepoState } from '../git/code-repos.js';
import { SCHEDULING_PHASES } from '../status/phases.js';
import { transition } from '../status/transition.js';
import { AttemptPhase, ConditionType, Phase, Reason, type Attempt } from '../status/types.js';
import { costLimitMessage, hours, runTimeMs } from './run-plan-attempts.js';
import {
  clearStalled,
  isLiveAttempt,
  STOP,
  type PlanContext,
  type RunStep,
  type RunWork,
  type StepResult,
} from './run-plan-model.js';
import { solve, type Decision } from './solver.js';

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
  transition(
    w.doc.status,
    {
      phase: Phase.Pending,
      reason: Reason.FetchingCode,
      message,
      conditions: [{ type: ConditionType.Scheduled, status: 'False', reason: Reason.FetchingCode, message }],
    },
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
    transition(st, { phase: Phase.Failed, reason: Reason.CostLimitExceeded, message: overBudget }, w.now);
    clearStalled(st);
    return true;
  }
  const total = runTimeMs(st.attempts, w.ctx.now);
  const max = w.spec.policy?.maxTotalHours;
  if (max === undefined || total < max * 3_600_000) return false;
  delete st.nextAttemptAfter;
  transition(
    st,
    {
      phase: Phase.Failed,
      reason: Reason.TotalTimeExceeded,
      message: `the run's attempts ran ${hours(total)} in total, past policy.maxTotalHours (${max}h)`,
    },
    w.now,
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
  transition(
    w.doc.status,
    {
      phase: Phase.Pending,
      reason,
      message,
      conditions: [
        { type: ConditionType.Scheduled, status: 'False', reason, message },
        { type: ConditionType.Stalled, status: 'True', reason, message },
      ],
    },
    w.now,
  );
  return STOP;
}

/** No backend can take the run now: wait (NoCapacity: one may free up soon). */
function waitForBackend(w: RunWork, choice: Decision): void {
  const reason = choice.wait === 'NoCapacity' ? Reason.NoCapacity : Reason.NoBackend;
  transition(
    w.doc.status,
    {
      phase: Phase.Pending,
      reason,
      message: choice.why,
      conditions: [{ type: ConditionType.Scheduled, status: 'False', reason, message: choice.why }],
    },
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
  transition(
    st,
    {
      phase: Phase.Scheduling,
      reason: 'Submitting',
      message: `submitting attempt ${n} to ${backend}`,
      conditions: [{ type: ConditionType.Scheduled, status: 'True', reason: 'BackendChosen', message: why }],
    },
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
  return { price: { perHour, from: info?.traits.billsFrom ?? 'submitted' } };
}

function jobNameMaxOf(ctx: PlanContext, backend: string): number {
  const info = ctx.backends.find((b) => b.name === backend);
  return info?.traits?.jobNameMax ?? 63;
}
