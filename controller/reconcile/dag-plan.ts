/**
 * The DAG planner: pure, like the Run planner. A DAG is reconciled into child Runs
 * (`<dag>.<node>`, owned by the DAG): a node's child exists once everything it needs has
 * succeeded and the outputs it reads are complete; from then on the child is an ordinary Run,
 * planned, retried and resumed by `planRun`. The DAG's status is the state of every node.
 *
 * Cancelling (suspending) the DAG suspends its children; a node removed from the DAG, or the
 * whole DAG removed, drops its child from the desired state, and the Run planner cancels it.
 *
 * The planner is a pipeline of named steps (dag-plan-steps.ts); children and the caches that
 * keep them are in dag-plan-children.ts. This module composes them and is the one to import.
 */
import type { DagSpec } from '../spec/schema.js';
import type { DagStatusDoc, RunStatusDoc } from '../status/types.js';
import { DagPlanCaches } from './dag-plan-children.js';
import {
  copyStatus,
  DAG_STEPS,
  dagDeleted,
  finishWork,
  keepLastValid,
  neverValid,
  startWork,
} from './dag-plan-steps.js';
import type { DesiredRun, InvalidRun } from './run-plan-model.js';

export {
  childName,
  DAG_LABEL,
  DagPlanCaches,
  nodeRunSpec,
  NODE_LABEL,
  type DagPlanCacheLimits,
} from './dag-plan-children.js';

/** A DAG as git asks for it. */
export interface DesiredDag {
  name: string;
  spec: DagSpec;
  labels?: Record<string, string>;
  /** `adv retry dag` sets the retry annotation: its failed nodes' children get it (dag-plan-steps.ts). */
  annotations?: Record<string, string>;
  generation: string;
  file: string;
}

/** A DAG spec that failed validation: its first error, located (the same shape as a Run's). */
export type InvalidDag = InvalidRun;

/** What the DAG planner knows besides the DAG itself. */
export interface DagPlanContext {
  now: number;
  specCommit: string;
  /** The object store outputs go to (`file:///…`, `s3://…`); absent without a Storage spec. */
  storeUrl?: string;
  /**
   * Node orders and child Runs kept between calls: pass one per controller. Absent, a fresh one is
   * used for the call (correct, but every child is rebuilt and rehashed).
   */
  caches?: DagPlanCaches;
}

/** What `planDag` plans from: the DAG's desired and current state, and its children's. */
export interface DagPlanInput {
  name: string;
  desired?: DesiredDag;
  invalid?: InvalidDag;
  current?: DagStatusDoc;
  /** The status the commit message compares against (default `current`): the one before this pass. */
  since?: DagStatusDoc;
  /** The child Run's status, by child name. */
  child: (name: string) => RunStatusDoc | undefined;
  /** Whether `run/output` has a manifest: true, false, or undefined when not known yet. */
  outputReady: (key: string) => boolean | undefined;
}

/** The planner's answer: the next status, the children that should exist, what it needs to know. */
export interface DagPlan {
  /** The next status; the same object as `current` when nothing changed. */
  doc: DagStatusDoc | undefined;
  summary?: string;
  /** The child Runs that should exist now, with their specs. */
  children: DesiredRun[];
  /** Outputs (`run/output`) the planner needs to know are complete before it can go on. */
  unknownOutputs: string[];
}

/**
 * Plans one DAG. An invalid spec is marked and the last valid one goes on; with none, or with the
 * DAG removed, there are no children. Otherwise DAG_STEPS run in order on one working state.
 */
export function planDag(input: DagPlanInput, ctx: DagPlanContext): DagPlan {
  const { name, invalid, current } = input;
  const now = new Date(ctx.now).toISOString();
  const doc = copyStatus(current, name, now);
  const desired = invalid ? keepLastValid(name, doc, invalid, input.desired, now) : input.desired;
  if (!desired) return invalid ? neverValid(name, current, doc, invalid) : dagDeleted(name, current, doc);
  const w = startWork(input, ctx, ctx.caches ?? new DagPlanCaches(), doc, desired);
  for (const step of DAG_STEPS) step(w);
  return finishWork(w);
}
