/**
 * What one pass's reconciles share (reconcilers.ts makes it each pass; the Run, DAG and Sweep
 * reconciles read it). Declared apart so that each reconcile's module needs only this, not the
 * module that composes them.
 */
import type { Logger } from 'pino';
import type { ObjectStore } from '../../../runtime/store/index.js';
import type { ControllerMetrics } from '../../metrics.js';
import type { DagPlanCaches } from '../../reconcile/dag-plan.js';
import type { PlanContext } from '../../reconcile/run-plan.js';
import type { BackendInfo } from '../../reconcile/solver.js';
import type { SweepPlanCaches } from '../../reconcile/sweep-plan.js';
import type { DagStatusDoc, SweepStatusDoc } from '../../status/types.js';
import type { StatusWriter } from '../../status/writer.js';
import type { DesiredState } from '../desired/desired-state.js';
import type { Observation } from '../observe/observer.js';

/** What one pass's reconciles share: its inputs, and what they hand out to later reconciles. */
export interface PassScope {
  desired: DesiredState;
  status: StatusWriter;
  observation: Observation;
  planContext: PlanContext;
  /** The plan context's backends by name: the pass counts its own picks into them. */
  infos: Map<string, BackendInfo>;
  objects: ObjectStore | undefined;
  storeUrl: string | undefined;
  dagCaches: DagPlanCaches;
  /** Outputs (`run/output`) seen complete: a manifest, once written, stays. */
  outputsReady: Set<string>;
  /** Each DAG's status at the start of the pass (its commit message lists every node that moved). */
  dagPassBase: Map<string, DagStatusDoc | undefined>;
  /** Sweep points and child Runs kept between passes (sweep-plan.ts). */
  sweepCaches: SweepPlanCaches;
  /** Each Sweep's status at the start of the pass (its commit message lists every point that moved). */
  sweepPassBase: Map<string, SweepStatusDoc | undefined>;
  /** Runs waiting for a backend to have room (`NoCapacity`), woken when an attempt ends. */
  waitingForCapacity: Set<string>;
  /** Says a key should be looked at (now) in this pass or the next. */
  hint(key: string): void;
  metrics: ControllerMetrics;
  logger: Logger;
}
