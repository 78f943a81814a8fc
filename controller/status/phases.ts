/**
 * Every set of phases the controller decides on, in one place: which runs are finished, which
 * attempts may still hold a job, when a new attempt is scheduled, which DAG nodes hold up the
 * nodes after them. The words themselves are phase.ts's; the members are literals checked against
 * the phase types, and the ended set is phase.ts's own (a job's and an attempt's end are one set).
 */
import { ENDED_STATES } from '../phase.js';
import type { AttemptPhase, DagNodeStatus, Phase } from './types.js';

/**
 * Run (and DAG) phases nothing moves on from by itself: only a spec change, unsuspending or
 * `adv retry` starts the run again. A resync skips runs in these phases cheaply.
 */
export const TERMINAL_PHASES: ReadonlySet<Phase> = new Set<Phase>(['Succeeded', 'Failed', 'Cancelled']);

/** Run phases in which a new attempt is scheduled, once none is live and the next one is due. */
export const SCHEDULING_PHASES: ReadonlySet<Phase> = new Set<Phase>(['Pending', 'Scheduling']);

/**
 * Attempt phases whose job may exist on its backend: it is cancelled when the run stops and
 * counts against the backend's `maxConcurrent`. `Submitting` is live: the job may have been
 * created before the write-ahead record was completed.
 */
export const LIVE_ATTEMPT_PHASES: ReadonlySet<AttemptPhase> = new Set<AttemptPhase>([
  'Submitting',
  'Queued',
  'Running',
]);

/**
 * Attempt phases of an attempt that has ended: its logs are complete once its exit is recorded.
 * The same words as a job's ended states (`isEnded`).
 */
export const ENDED_ATTEMPT_PHASES: ReadonlySet<AttemptPhase> = ENDED_STATES;

/** The phase of a DAG node: its child run's phase, or `Waiting` / `Skipped` before it has one. */
export type NodePhase = DagNodeStatus['phase'];

/**
 * Node phases of a child run still in flight: they keep the DAG Running, and failFast suspends
 * them once another node failed.
 */
export const LIVE_NODE_PHASES: ReadonlySet<NodePhase> = new Set<NodePhase>([
  'Pending',
  'Scheduling',
  'Queued',
  'Running',
]);

/** Node phases that stop every node needing them: those are skipped (`UpstreamFailed`). */
export const BLOCKING_NODE_PHASES: ReadonlySet<NodePhase> = new Set<NodePhase>([
  'Failed',
  'Cancelled',
  'Skipped',
]);
