/**
 * The one place a reconcile's outcome becomes a queue decision, as controller-runtime's
 * `reconcileHandler` does: a result may ask to be looked at again after a delay; a stalling error is
 * not retried (a person must change the spec or the environment, which re-queues the key by
 * itself); any other error backs off exponentially.
 *
 * An expected wait (no capacity yet, a backoff, an output not there yet) is a result with
 * `requeueAfterMs`, never an error: the planners are pure and say how long to wait in what they
 * return, and a backend that does not answer (an unknown submit outcome, an unreachable host) is an
 * error on purpose, so that its retries back off instead of coming at a fixed delay.
 */
import { isStalling } from '../../errors.js';
import type { WorkQueue } from '../../reconcile/queue.js';

/** What a reconcile returns when it did not fail. */
export interface ReconcileResult {
  /** Look again after this long even without an event (backoff, no capacity yet, a timer). */
  requeueAfterMs?: number;
  /**
   * The key's actions went through (a job was submitted or adopted): its failure backoff starts
   * over. A plan alone does not reset it, so an unreachable backend keeps backing off.
   */
  resetBackoff?: boolean;
}

/** A reconcile's outcome: its result, or the error it ended with. */
export type ReconcileOutcome = ReconcileResult | Error;

/** Applies an outcome to the queue; returns the delay chosen (undefined: not requeued). */
export function requeue(queue: WorkQueue, key: string, outcome: ReconcileOutcome): number | undefined {
  if (outcome instanceof Error) {
    if (isStalling(outcome)) {
      queue.forget(key);
      return undefined;
    }
    return queue.addRateLimited(key);
  }
  if (outcome.resetBackoff) queue.forget(key);
  if (outcome.requeueAfterMs === undefined) return undefined;
  queue.addAfter(key, outcome.requeueAfterMs);
  return outcome.requeueAfterMs;
}
