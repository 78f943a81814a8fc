/**
 * When `adv controller --once` may stop: nothing can change without an outside event. Every run is
 * finished, stalled or waiting for something only a person or the clock past the timeout changes;
 * every desired object has a status; nothing is staged.
 */
import { AdvError, ErrorCode } from '../../errors.js';
import { isLiveAttempt } from '../../reconcile/run-plan.js';
import type { StatusWriter } from '../../status/writer.js';
import { TERMINAL_PHASES } from '../../status/phases.js';
import type { DagStatusDoc, RunStatusDoc } from '../../status/types.js';
import type { SweepStatusDoc } from '../../status/types.js';
import type { DesiredState } from '../desired/desired-state.js';

/** Run reasons that mean a new attempt is coming by itself. */
const RETRYING_REASONS: ReadonlySet<string> = new Set([
  'BackoffWaiting',
  'SubmitFailed',
  'Preempted',
  'Lost',
]);

export function isIdle(status: StatusWriter, desired: DesiredState): boolean {
  for (const name of status.names('Run')) {
    const st = status.get<RunStatusDoc>('Run', name)!.status;
    if (TERMINAL_PHASES.has(st.phase)) continue;
    if (isLiveAttempt(st.attempts.at(-1))) return false;
    if ((st.reason && RETRYING_REASONS.has(st.reason)) || st.phase === 'Scheduling') return false;
  }
  for (const name of desired.runs.keys()) if (!status.get('Run', name)) return false;
  for (const name of desired.dags.keys()) {
    const d = status.get<DagStatusDoc>('DAG', name);
    if (!d) return false;
    if (!TERMINAL_PHASES.has(d.status.phase) && Object.values(d.status.nodes).some(waitsByItself))
      return false;
  }
  for (const name of desired.sweeps.keys()) {
    const d = status.get<SweepStatusDoc>('Sweep', name);
    // A point waiting for a free slot is created when one finishes: it moves by itself.
    if (!d || Object.values(d.status.points).some((p) => p.reason === 'MaxConcurrent')) return false;
  }
  return status.stagedCount === 0;
}

/** A node waiting for its needs or for an output manifest to show up in the store: it will. */
const waitsByItself = (n: DagStatusDoc['status']['nodes'][string]) =>
  n.phase === 'Waiting' && (n.reason === 'WaitingForNeeds' || n.reason === 'WaitingForOutputs');

/** `--once` gave up: with runs in flight, or standing by for another controller's lease. */
export function onceTimedOut(timeoutMs: number, leader: boolean, leaseBranch: string): AdvError {
  const after = `timed out after ${Math.round(timeoutMs / 1000)}s`;
  return leader
    ? new AdvError(ErrorCode.Waiting, `${after} with runs still in flight`, {
        hint: 'adv get runs shows which; raise --timeout, or run the controller without --once',
      })
    : new AdvError(
        ErrorCode.Waiting,
        `${after} waiting for another controller's lease on the status branch`,
        {
          hint: `the other controller is running (it renews its lease): stop it, or let it do the work (git log -1 ${leaseBranch} says which it is)`,
        },
      );
}
