/**
 * The one vocabulary of where things stand: a run's (and DAG's, Sweep's) `Phase`, an attempt's
 * `AttemptPhase`, a job's observed `JobState`. Each word is spelled here once and the three sets are
 * derived from it, so a new state is added in one place. `status/types.ts` and the backend port
 * (`backends/types.ts`) re-export them under the names their callers use.
 *
 * Imports nothing: status/, the port and every adapter sit above it, and the port may not reach
 * status/ (that would close a loop through spec/schema.ts).
 */

/** A run's (or DAG's) phase, as `adv get` shows it. */
export const Phase = {
  Pending: 'Pending',
  Scheduling: 'Scheduling',
  Queued: 'Queued',
  Running: 'Running',
  Succeeded: 'Succeeded',
  Failed: 'Failed',
  Cancelled: 'Cancelled',
  Preempted: 'Preempted',
  /** Gone without an end record: no heartbeat, or the job vanished from its backend. */
  Lost: 'Lost',
} as const;
export type Phase = (typeof Phase)[keyof typeof Phase];

/** An attempt's own phase: `Submitting` is the write-ahead record made before the backend is asked. */
export const AttemptPhase = { Submitting: 'Submitting', ...Phase } as const;
export type AttemptPhase = (typeof AttemptPhase)[keyof typeof AttemptPhase];

// The controller's own steps before a job exists: no backend reports them.
const { Scheduling: _scheduling, Queued: _queued, ...observed } = Phase;

/**
 * Observed states, the same for every backend: the run phases a job can be seen in (a job waiting
 * on its backend is `Pending`; the run shows it as `Queued`), and `Unknown`.
 */
export const JobState = {
  ...observed,
  /** Cannot observe right now (backend unreachable): not a failure. */
  Unknown: 'Unknown',
} as const;
export type JobState = (typeof JobState)[keyof typeof JobState];

/**
 * The words of an end: a job in one of these states has ended (however), and so has an attempt in
 * that phase; nothing more will happen to it.
 */
export const ENDED_STATES: ReadonlySet<Phase> = new Set<Phase>([
  Phase.Succeeded,
  Phase.Failed,
  Phase.Cancelled,
  Phase.Preempted,
  Phase.Lost,
]);
