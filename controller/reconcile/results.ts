/**
 * Recording the outcome of an executed action into a run's status. Pure, like the planner: the
 * controller calls these after the backend answered.
 */
import { transition } from '../status/transition.js';
import {
  AttemptPhase,
  ConditionType,
  Phase,
  Reason,
  type Attempt,
  type RunStatusDoc,
} from '../status/types.js';
import { EndClass } from '../status/types.js';
import { summaryOf } from './run-plan.js';

export function recordSubmitted(
  current: RunStatusDoc,
  n: number,
  jobId: string,
  adopted: boolean,
  nowMs: number,
): { doc: RunStatusDoc; summary: string } {
  const doc = structuredClone(current);
  const a = doc.status.attempts.find((x) => x.n === n);
  if (a) {
    a.jobId = jobId;
    if (a.phase === AttemptPhase.Submitting) a.phase = AttemptPhase.Queued;
  }
  if (doc.status.phase === Phase.Scheduling)
    transition(
      doc.status,
      {
        phase: Phase.Queued,
        // The same words the first observation of a queued job uses, so it adds no commit.
        reason: adopted ? Reason.Adopted : 'Queued',
        message: adopted
          ? `attempt ${n} was already on ${a?.backend} (found by name ${a?.jobName}) and was adopted`
          : `attempt ${n} queued on ${a?.backend}`,
      },
      new Date(nowMs).toISOString(),
    );
  return { doc, summary: summaryOf(doc) + (adopted ? ' [adopted]' : '') };
}

export function recordSubmitFailed(
  current: RunStatusDoc,
  n: number,
  message: string,
  nowMs: number,
  retryAfterSec = 30,
): { doc: RunStatusDoc; summary: string } {
  const doc = structuredClone(current);
  const now = new Date(nowMs).toISOString();
  const a = endUnstarted(doc, n, EndClass.Infrastructure, Reason.SubmitFailed, message, now);
  const why = `attempt ${n} could not be submitted to ${a?.backend}: ${message}`;
  transition(
    doc.status,
    {
      phase: Phase.Scheduling,
      reason: Reason.SubmitFailed,
      message: why,
      conditions: [
        { type: ConditionType.Scheduled, status: 'False', reason: Reason.SubmitFailed, message: why },
      ],
    },
    now,
  );
  doc.status.nextAttemptAfter = new Date(nowMs + retryAfterSec * 1000).toISOString();
  return {
    doc,
    summary: `run/${doc.metadata.name}: submit of attempt ${n} to ${a?.backend} failed: ${message}`,
  };
}

/**
 * The submission could not be made for a reason only a person can fix (a missing secret): the
 * attempt never started, counts against no budget and no backend's health, and the run waits with
 * a `Stalled` condition that says what to fix. Nothing is retried until the spec or the secret changes.
 */
export function recordSubmitStalled(
  current: RunStatusDoc,
  n: number,
  stall: { reason: string; message: string; hint?: string },
  nowMs: number,
): { doc: RunStatusDoc; summary: string } {
  const doc = structuredClone(current);
  const now = new Date(nowMs).toISOString();
  const message = stall.hint ? `${stall.message}; ${stall.hint}` : stall.message;
  endUnstarted(doc, n, EndClass.Stalled, stall.reason, message, now);
  delete doc.status.nextAttemptAfter;
  transition(
    doc.status,
    {
      phase: Phase.Pending,
      reason: stall.reason,
      message,
      conditions: [
        {
          type: ConditionType.Stalled,
          status: 'True',
          reason: stall.reason,
          message,
          // The spec it stalled on: the same spec is not tried again (run-plan-steps `heldStall`).
          ...(doc.status.observedGeneration ? { observedGeneration: doc.status.observedGeneration } : {}),
        },
        { type: ConditionType.Scheduled, status: 'False', reason: stall.reason, message },
      ],
    },
    now,
  );
  return { doc, summary: `run/${doc.metadata.name}: Stalled (${stall.message})` };
}

/** Ends attempt `n`, whose job never started, with the class and reason that say why. */
function endUnstarted(
  doc: RunStatusDoc,
  n: number,
  cls: EndClass,
  reason: string,
  message: string,
  finishedAt: string,
): Attempt | undefined {
  const a = doc.status.attempts.find((x) => x.n === n);
  if (a) Object.assign(a, { phase: AttemptPhase.Failed, class: cls, reason, message, finishedAt });
  return a;
}
