/**
 * Reconciling Sweeps, the way DAGs are: plan each due Sweep (pure, sweep-plan.ts), stage its
 * status, and make the desired state hold exactly its children, so that a new, changed or dropped
 * child is planned by the Run planner in the same pass. A child that moves hints its Sweep again
 * (reconcilers.ts), which is how `maxConcurrent` creates the next point when one finishes.
 */
import { planSweep } from '../../reconcile/sweep-plan.js';
import type { RunStatusDoc, SweepStatusDoc } from '../../status/types.js';
import type { PassScope } from './pass-scope.js';

/** Plans one Sweep: stages its status and sets its children in the desired state. */
export function reconcileSweep(s: PassScope, name: string): void {
  const current = s.status.get<SweepStatusDoc>('Sweep', name);
  if (!s.sweepPassBase.has(name)) s.sweepPassBase.set(name, current);
  const since = s.sweepPassBase.get(name);
  const desired = s.desired.sweeps.get(name);
  const invalid = s.desired.invalidSweeps.get(name);
  const plan = planSweep(
    {
      name,
      ...(desired ? { desired } : {}),
      ...(invalid ? { invalid } : {}),
      ...(current ? { current } : {}),
      ...(since ? { since } : {}),
      child: (run: string) => s.status.get<RunStatusDoc>('Run', run),
    },
    { now: s.planContext.now, specCommit: s.planContext.specCommit, caches: s.sweepCaches },
  );
  if (plan.doc && plan.doc !== current && plan.summary) {
    s.status.stage('Sweep', name, plan.doc, { summary: plan.summary, trailers: [['Sweep', name]] });
    s.logger.info({ sweep: name, phase: plan.doc.status.phase }, plan.summary);
  }
  for (const key of s.desired.setSweepChildren(name, plan.children)) s.hint(key);
}
