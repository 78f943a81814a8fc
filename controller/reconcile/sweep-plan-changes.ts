/**
 * `adv plan` for Sweeps: the points an edit adds and cancels, and the child runs the Sweep planner
 * would start or drop, from the same `planSweep` the controller calls.
 */
import type { LoadedObject } from '../spec/loader.js';
import { expandPoints, pointRunName } from '../spec/sweep-params.js';
import type { RunSpec } from '../spec/schema.js';
import type { ItemFn, PlanInput, PlanReport } from './plan-changes-model.js';
import type { PlanContext } from './run-plan.js';
import { desiredSweep } from './desired.js';
import { planSweep, type DesiredSweep } from './sweep-plan.js';

const sweepsOf = (objects: readonly LoadedObject[]) =>
  new Map(objects.filter((o) => o.kind === 'Sweep').map((o) => [o.name, desiredSweep(o)]));

const pointNames = (d: DesiredSweep | undefined): string[] =>
  d ? expandPoints(d.spec).map((p) => pointRunName(d.name, p)) : [];

/** Sweeps added, changed or removed between BASE and HEAD; their child runs go through `item`. */
export function planSweepChanges(input: PlanInput, ctx: PlanContext, item: ItemFn, report: PlanReport): void {
  const baseSweeps = sweepsOf(input.base.objects);
  const headSweeps = sweepsOf(input.head.objects);
  for (const name of new Set([...baseSweeps.keys(), ...headSweeps.keys()])) {
    const b = baseSweeps.get(name);
    const h = headSweeps.get(name);
    const current = input.sweepStatus?.(name);
    if (b && h && b.generation === h.generation && current) continue;
    const plan = (desired: DesiredSweep, specCommit: string) =>
      planSweep(
        { name, desired, ...(current ? { current } : {}), child: input.runStatus },
        { now: ctx.now, specCommit },
      );
    // What the controller acts on now: the points of its status, else BASE's.
    const before = current ? Object.keys(current.status.points) : pointNames(b);
    const after = pointNames(h);
    const beforeChildren = b ? plan(b, input.base.commit).children : [];
    const afterPlan = h ? plan(h, input.head.commit) : undefined;
    const mark = (run: string, spec: Parameters<ItemFn>[1], prev: RunSpec | undefined, file: string) => {
      item(run, spec, prev, file);
      report.runs[report.runs.length - 1]!.sweep = name;
    };
    const prevByName = new Map(beforeChildren.map((c) => [c.name, c]));
    for (const child of afterPlan?.children ?? []) {
      const prev = prevByName.get(child.name);
      if (prev && prev.generation === child.generation && input.runStatus(child.name)) continue;
      mark(child.name, child, prev?.spec, child.file);
    }
    const kept = new Set(afterPlan?.children.map((c) => c.name));
    for (const run of before)
      if (!kept.has(run) && !after.includes(run) && input.runStatus(run))
        mark(run, undefined, prevByName.get(run)?.spec ?? input.runStatus(run)?.appliedSpec, (h ?? b)!.file);
    const afterSet = new Set(after);
    const beforeSet = new Set(before);
    (report.sweeps ??= []).push({
      sweep: name,
      file: (h ?? b)!.file,
      change: !b ? 'new' : !h ? 'removed' : 'changed',
      added: after.filter((r) => !beforeSet.has(r)),
      cancelled: before.filter((r) => !afterSet.has(r)),
      summary: afterPlan?.doc
        ? (afterPlan.summary ?? `sweep/${name}: ${afterPlan.doc.status.phase}`)
        : `sweep/${name}: removed`,
    });
  }
}
