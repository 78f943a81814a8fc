/**
 * The DAG planner's vocabulary: what goes in (the desired DAG, its status, its children's) and
 * what comes out. No planning happens here; dag-plan.ts composes the steps.
 */
import type { DagSpec } from '../spec/schema.js';
import type { DagStatusDoc, RunStatusDoc } from '../status/types.js';
import type { DagPlanCaches } from './dag-plan-children.js';
import type { DesiredRun, InvalidRun } from './run-plan-model.js';

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
