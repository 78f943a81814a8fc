/**
 * `adv plan`: what the controller would do if HEAD were merged. It calls the same planners the
 * controller calls (planRun, planDag, the solver) on HEAD's specs and the status branch as it
 * is, and reports the actions they return; nothing here decides anything itself.
 */
import jsonpatch from 'fast-json-patch';
import type { LoadedObject } from '../spec/loader.js';
import type { RunStatusDoc } from '../status/types.js';
import type { RunSpec } from '../spec/schema.js';
import { planSweepChanges } from './sweep-plan-changes.js';
import type { ItemFn, PlanInput, PlanReport, RunChange } from './plan-changes-model.js';
import { planDag, type DesiredDag } from './dag-plan.js';
import { desiredDag, desiredRun } from './desired.js';
import { DatasetIndex, inputsChange } from '../spec/datasets.js';
import { EnvironmentIndex, shortRef } from '../spec/environments.js';
import { IMMUTABLE_FIELDS, planRun, type DesiredRun, type PlanContext } from './run-plan.js';

export type {
  ItemFn,
  PlanError,
  PlanInput,
  PlanReport,
  RunChange,
  RunPlanItem,
  SweepPlanItem,
} from './plan-changes-model.js';

const runsOf = (objects: readonly LoadedObject[]) => {
  const environments = new EnvironmentIndex(objects);
  const datasets = new DatasetIndex(objects);
  return new Map(
    objects.filter((o) => o.kind === 'Run').map((o) => [o.name, desiredRun(o, environments, datasets)]),
  );
};

/**
 * What changed of a run's Environment, in words, when it did: another version
 * (`Environment cuda12: cuda12@1 → cuda12@2`), or the version in use edited in place.
 */
export function environmentChange(from: RunSpec | undefined, to: RunSpec | undefined): string | undefined {
  const a = from?.environment;
  const b = to?.environment;
  if (a === b || !to) return undefined;
  if (!a) return `Environment ${shortRef(b!)} added`;
  if (!b) return `Environment ${shortRef(a)} removed`;
  const [sa, sb] = [shortRef(a), shortRef(b)];
  if (sa === sb) return `Environment ${sa} changed`;
  const [na, nb] = [sa.split('@')[0], sb.split('@')[0]];
  return na === nb ? `Environment ${na} changed: ${sa} → ${sb}` : `Environment ${sa} → ${sb}`;
}
const dagsOf = (objects: readonly LoadedObject[]) =>
  new Map(objects.filter((o) => o.kind === 'DAG').map((o) => [o.name, desiredDag(o)]));

export function planChanges(input: PlanInput): PlanReport {
  const ctx: PlanContext = { ...input.ctx, specCommit: input.head.commit };
  const report: PlanReport = {
    base: input.base.commit,
    head: input.head.commit,
    runs: [],
    dags: [],
    errors: input.head.errors,
  };
  const item = (name: string, desired: DesiredRun | undefined, baseSpec: RunSpec | undefined, file: string) =>
    report.runs.push(runItem(input, ctx, name, desired, baseSpec, file));
  planRunChanges(input, item);
  planDagChanges(input, ctx, item, report);
  planSweepChanges(input, ctx, item, report);
  report.runs.sort((x, y) => (x.run < y.run ? -1 : 1));
  return report;
}

/** What the Run planner would do with one run, as a plan line. */
function runItem(
  input: PlanInput,
  ctx: PlanContext,
  name: string,
  desired: DesiredRun | undefined,
  baseSpec: RunSpec | undefined,
  file: string,
): PlanReport['runs'][number] {
  const current = input.runStatus(name);
  const p = planRun({ name, ...(desired ? { desired } : {}), ...(current ? { current } : {}) }, ctx);
  const from = current?.appliedSpec ?? baseSpec;
  const patch = from && desired ? jsonpatch.compare(from, desired.spec) : [];
  const immutable = patch
    .filter((op) => IMMUTABLE_FIELDS.some((f) => op.path === `/${f}` || op.path.startsWith(`/${f}/`)))
    .map((op) => op.path);
  const submit = p.actions.find((a) => a.type === 'submit');
  const classified = classifyChange(p, desired, current, patch.length > 0);
  const { change } = classified;
  const changed =
    change === 'start' || change === 'wait'
      ? []
      : [environmentChange(from, desired?.spec), inputsChange(from, desired?.spec)];
  const why = [...changed, classified.why].filter(Boolean).join('; ') || undefined;
  return {
    run: name,
    change,
    file,
    ...(desired?.owner ? { owner: desired.owner } : {}),
    ...(submit ? { backend: submit.backend } : {}),
    ...(why ? { why } : {}),
    patch,
    immutable,
  };
}

/** The kind of change a plan is, and why, in the words of the plan report. */
function classifyChange(
  p: ReturnType<typeof planRun>,
  desired: DesiredRun | undefined,
  current: RunStatusDoc | undefined,
  patched: boolean,
): { change: RunChange; why?: string } {
  const submit = p.actions.find((a) => a.type === 'submit');
  const cancel = p.actions.find((a) => a.type === 'cancel');
  const st = p.doc?.status;
  const rejected = st?.conditions.find((c) => c.type === 'SpecChangeRejected' && c.status === 'True');
  if (!desired)
    return {
      change: cancel ? 'cancel' : 'noop',
      why: cancel ? 'the spec is removed' : 'the spec is removed; the run has finished and its status stays',
    };
  if (desired.spec.suspend)
    return {
      change: cancel ? 'cancel' : 'noop',
      why: cancel ? 'spec.suspend: true' : 'spec.suspend: true; nothing is running',
    };
  const said = (change: RunChange, why: string | undefined) => (why ? { change, why } : { change });
  if (cancel && !submit) return said('restart', st?.message);
  if (submit)
    return said(cancel || current?.status.attempts.length ? 'restart' : 'start', st?.attempts.at(-1)?.why);
  if (rejected) return said('reject', rejected.message);
  if (!current && st && !st.attempts.length) return said('wait', st.message);
  return { change: patched ? 'update' : 'noop' };
}

/** Runs added, changed or removed between BASE and HEAD. */
function planRunChanges(input: PlanInput, item: ItemFn): void {
  const baseRuns = runsOf(input.base.objects);
  const headRuns = runsOf(input.head.objects);
  for (const [name, desired] of headRuns) {
    const b = baseRuns.get(name);
    // Unchanged and not waiting to start: nothing to say.
    if (b && b.generation === desired.generation && input.runStatus(name)) continue;
    item(name, desired, b?.spec, desired.file);
  }
  for (const [name, b] of baseRuns) if (!headRuns.has(name)) item(name, undefined, b.spec, b.file);
}

/** DAGs: the nodes HEAD would start now, and the children a change would cancel. */
function planDagChanges(input: PlanInput, ctx: PlanContext, item: ItemFn, report: PlanReport): void {
  const baseDags = dagsOf(input.base.objects);
  const headDags = dagsOf(input.head.objects);
  for (const name of new Set([...baseDags.keys(), ...headDags.keys()])) {
    const b = baseDags.get(name);
    const h = headDags.get(name);
    if (b && h && b.generation === h.generation && input.dagStatus(name)) continue;
    const current = input.dagStatus(name);
    // What the DAG planner makes of a version of the spec, given the status as it is.
    const plan = (desired: DesiredDag, specCommit: string) =>
      planDag(
        { name, desired, ...(current ? { current } : {}), child: input.runStatus, outputReady: () => false },
        { now: ctx.now, specCommit, ...(input.storeUrl ? { storeUrl: input.storeUrl } : {}) },
      );
    const before = b ? plan(b, input.base.commit).children : [];
    const after = h ? plan(h, input.head.commit) : undefined;
    const beforeByName = new Map(before.map((c) => [c.name, c]));
    for (const child of after?.children ?? []) {
      const prev = beforeByName.get(child.name);
      if (prev && prev.generation === child.generation && input.runStatus(child.name)) continue;
      item(child.name, child, prev?.spec, child.file);
    }
    for (const gone of before)
      if (!after?.children.some((c) => c.name === gone.name) && input.runStatus(gone.name))
        item(gone.name, undefined, gone.spec, gone.file);
    report.dags.push({
      dag: name,
      file: (h ?? b)!.file,
      change: !b ? 'new' : !h ? 'removed' : 'changed',
      summary: after?.doc
        ? (after.summary ?? `dag/${name}: ${after.doc.status.phase}`)
        : `dag/${name}: removed`,
    });
  }
}
