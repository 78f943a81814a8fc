/**
 * The Run planner: pure. Given what git asks for (desired), what the status branch says was done
 * (current) and what the backend reports (observed), it returns the next status and the actions to
 * take. No I/O: the controller executes the actions, and `adv plan` calls the same function.
 *
 * The planner is a pipeline of named steps (run-plan-steps.ts); the attempt lifecycle they share
 * is in run-plan-attempts.ts, the vocabulary in run-plan-model.ts. This module composes them and
 * is the one to import.
 */
import { finishWork, invalidSpec, isSettled, RUN_STEPS, specDeleted, startWork } from './run-plan-steps.js';
import { STOP, type PlanContext, type RunPlan, type RunPlanInput } from './run-plan-model.js';

export type { BackendInfo } from './solver.js';
export {
  canonicalJson,
  DEFAULT_HEARTBEAT_TIMEOUT_SEC,
  generationOf,
  IMMUTABLE_FIELDS,
  isLiveAttempt,
  markInvalid,
  RECONCILE_ANNOTATION,
  RESTART_GRACE_MS,
  RETRY_ANNOTATION,
  SUBMIT_TAKEOVER_MS,
  summaryOf,
  type DesiredRun,
  type InvalidRun,
  type PlanContext,
  type RunAction,
  type RunPlan,
  type RunPlanInput,
} from './run-plan-model.js';
export { endAttempt, infraFailures, runTimeMs, userFailures, type AttemptEnd } from './run-plan-attempts.js';

/**
 * Plans one run. Without a desired spec it reports the invalid spec or cancels the deleted run;
 * a settled run comes back as it is; otherwise RUN_STEPS run in order on one working state, until
 * one of them ends the pipeline.
 */
export function planRun(input: RunPlanInput, ctx: PlanContext): RunPlan {
  const { name, desired, invalid, current } = input;
  if (!desired) return invalid ? invalidSpec(name, invalid, current, ctx) : specDeleted(name, current, ctx);
  if (current && !input.heartbeat && isSettled(current, desired, input.observed))
    return { doc: current, actions: [] };
  const w = startWork(input, desired, ctx);
  for (const step of RUN_STEPS) if (step(w) === STOP) break;
  return finishWork(w);
}
