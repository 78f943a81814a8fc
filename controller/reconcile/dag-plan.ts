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
 * keep them are in dag-plan-children.ts, what goes in and out in dag-plan-model.ts. This module
 * composes them and is the one to import.
 */
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
import type { DagPlan, DagPlanContext, DagPlanInput } from './dag-plan-model.js';

export {
  childName,
  DAG_LABEL,
  DagPlanCaches,
  nodeRunSpec,
  NODE_LABEL,
  type DagPlanCacheLimits,
} from './dag-plan-children.js';
export type { DagPlan, DagPlanContext, DagPlanInput, DesiredDag, InvalidDag } from './dag-plan-model.js';

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
