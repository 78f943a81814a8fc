/**
 * `adv plan`'s vocabulary: what goes in (BASE's and HEAD's objects, the status as it is) and the
 * report that comes out. plan-changes.ts plans Runs and DAGs, sweep-plan-changes.ts Sweeps; both
 * write into one report.
 */
import type { Operation } from 'fast-json-patch';
import type { LoadedObject } from '../spec/loader.js';
import type { RunSpec } from '../spec/schema.js';
import type { DagStatusDoc, RunStatusDoc, SweepStatusDoc } from '../status/types.js';
import type { DesiredRun, PlanContext } from './run-plan.js';

export type RunChange =
  /** A new run (or a DAG node that would start): submitted to `backend`. */
  | 'start'
  /** Waits: no backend can take it, a code ref is missing, … (`why`). */
  | 'wait'
  /** A changed spec whose change is applied to the live run (mutable fields only). */
  | 'update'
  /** A changed spec with immutable fields, `onSpecChange: Restart`: cancel, then a new attempt. */
  | 'restart'
  /** A changed spec with immutable fields on a started run: the controller refuses it. */
  | 'reject'
  /** Removed, or suspended: live attempts are cancelled. */
  | 'cancel'
  /** Changed, but nothing happens (a finished run, a label). */
  | 'noop';

export interface RunPlanItem {
  run: string;
  change: RunChange;
  /** The spec file (HEAD's, or BASE's for a removal). */
  file: string;
  /** DAG that owns it. */
  owner?: string;
  /** The Sweep it is a point of (then `owner` is that Sweep, not a DAG). */
  sweep?: string;
  backend?: string;
  /** The solver's reasons, or why it waits, or what is refused. */
  why?: string;
  /** JSON Patch from BASE's spec to HEAD's (empty for new and removed runs). */
  patch: Operation[];
  /** Paths of the patch that cannot be applied to a started run. */
  immutable: string[];
}

export interface PlanError {
  file: string;
  line: number;
  column: number;
  message: string;
}

export interface PlanReport {
  base: string;
  head: string;
  runs: RunPlanItem[];
  dags: { dag: string; file: string; change: 'new' | 'changed' | 'removed'; summary: string }[];
  /** Sweeps added, changed or removed: the points added and cancelled. */
  sweeps?: SweepPlanItem[];
  errors: PlanError[];
}

export interface PlanInput {
  base: { commit: string; objects: readonly LoadedObject[] };
  head: { commit: string; objects: readonly LoadedObject[]; errors: PlanError[] };
  runStatus: (name: string) => RunStatusDoc | undefined;
  dagStatus: (name: string) => DagStatusDoc | undefined;
  sweepStatus?: (name: string) => SweepStatusDoc | undefined;
  /** Backends as the controller would see them from HEAD's specs. */
  ctx: Omit<PlanContext, 'specCommit'>;
  storeUrl?: string;
}

/** One Sweep of the plan: the points added and the points cancelled (removed), by child run name. */
export interface SweepPlanItem {
  sweep: string;
  file: string;
  change: 'new' | 'changed' | 'removed';
  added: string[];
  cancelled: string[];
  summary: string;
}

export type ItemFn = (
  name: string,
  desired: DesiredRun | undefined,
  baseSpec: RunSpec | undefined,
  file: string,
) => void;
