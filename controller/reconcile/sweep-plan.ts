/**
 * The Sweep planner: pure, like the DAG's. A Sweep is reconciled into child Runs, one per point
 * (`<sweep>-<hash8 of its params>`, owned by the sweep, labelled `adventuretime.dev/sweep`); from
 * then on a child is an ordinary Run, planned, retried and resumed by `planRun`.
 *
 * Editing the sweep changes only the points that changed: a new point gets a new child, a removed
 * point's child leaves the desired state (the Run planner cancels it if live), and the other
 * children are the same runs with the same generation (their spec is the template and their own
 * params, nothing else of the sweep). `maxConcurrent` holds points back: a point has no child run
 * until fewer than that many are unfinished; waiting points are created in expansion order.
 */
import type { SweepSpec } from '../spec/schema.js';
import { expandPoints, pointRunName, pointRunSpec, type Params } from '../spec/sweep-params.js';
import { TERMINAL_PHASES } from '../status/phases.js';
import {
  Phase,
  Reason,
  type RunStatusDoc,
  type SweepPointStatus,
  type SweepStatusDoc,
} from '../status/types.js';
import { setOwnerPhase } from '../status/transition.js';
import {
  canonicalJson,
  generationOf,
  markInvalid,
  markValid,
  type DesiredRun,
  type InvalidRun,
} from './run-plan-model.js';

/** Label every child carries (the sweep's name), for `-l` selectors. */
export const SWEEP_LABEL = 'adventuretime.dev/sweep';
/** Annotation prefix of a child's parameters: `adventuretime.dev/param.<name>: <value>`. */
export const PARAM_ANNOTATION_PREFIX = 'adventuretime.dev/param.';

/** A Sweep as git asks for it. */
export interface DesiredSweep {
  name: string;
  spec: SweepSpec;
  labels?: Record<string, string>;
  generation: string;
  file: string;
}

/** A Sweep spec that failed validation: its first error, located (the same shape as a Run's). */
export type InvalidSweep = InvalidRun;

export interface SweepPlanInput {
  name: string;
  desired?: DesiredSweep;
  invalid?: InvalidSweep;
  current?: SweepStatusDoc;
  /** The status the commit message compares against (default `current`): the one before this pass. */
  since?: SweepStatusDoc;
  /** The child Run's status, by child name. */
  child: (name: string) => RunStatusDoc | undefined;
}

export interface SweepPlanContext {
  now: number;
  specCommit: string;
  /** Points and child Runs kept between calls; absent, every child is rebuilt for the call. */
  caches?: SweepPlanCaches;
}

export interface SweepPlan {
  /** The next status; the same object as `current` when nothing changed. */
  doc: SweepStatusDoc | undefined;
  summary?: string;
  /** The child Runs that should exist now. */
  children: DesiredRun[];
}

/** One point of a sweep generation: its child name and params, its child Run once built. */
interface Point {
  run: string;
  params: Params;
  child?: DesiredRun;
}

/**
 * Each sweep's points for the generation (and labels and file) last planned, with their child Runs
 * built once. One entry per sweep: an edit replaces it, so a long-running controller keeps no more
 * than the sweeps it has. One per controller: the controller relies on an unchanged child being the
 * same object as before.
 */
export class SweepPlanCaches {
  private readonly bySweep = new Map<string, { key: string; points: Point[] }>();

  /** The points of `desired`, in expansion order. */
  points(desired: DesiredSweep): Point[] {
    const key = `${desired.generation}|${JSON.stringify(desired.labels ?? {})}|${desired.file}`;
    const hit = this.bySweep.get(desired.name);
    if (hit?.key === key) return hit.points;
    const points = expandPoints(desired.spec).map((params) => ({
      run: pointRunName(desired.name, params),
      params,
    }));
    this.bySweep.set(desired.name, { key, points });
    return points;
  }

  /** The child Run of a point, built on first use. */
  child(desired: DesiredSweep, point: Point): DesiredRun {
    point.child ??= childRun(desired, point.run, point.params);
    return point.child;
  }

  forget(sweep: string): void {
    this.bySweep.delete(sweep);
  }
}

/** The child Run of one point: the template with the params, owned and labelled by the sweep. */
export function childRun(desired: DesiredSweep, run: string, params: Params): DesiredRun {
  const spec = pointRunSpec(desired.spec.template, params);
  if (desired.spec.suspend) spec.suspend = true;
  const annotations: Record<string, string> = {};
  for (const [k, v] of Object.entries(params)) annotations[`${PARAM_ANNOTATION_PREFIX}${k}`] = String(v);
  return {
    name: run,
    spec,
    generation: generationOf(spec),
    file: desired.file,
    owner: desired.name,
    labels: { ...(desired.labels ?? {}), [SWEEP_LABEL]: desired.name },
    annotations,
  };
}

/**
 * Plans one Sweep. An invalid spec is marked and the last valid one goes on; with none, or with the
 * sweep removed, there are no children (the Run planner cancels the live ones).
 */
export function planSweep(input: SweepPlanInput, ctx: SweepPlanContext): SweepPlan {
  const { name, invalid, current } = input;
  // Nothing asks for it and nothing was recorded: there is no status to write.
  if (!input.desired && !invalid && !current) return { doc: undefined, children: [] };
  const now = new Date(ctx.now).toISOString();
  const doc = copyStatus(current, name, now);
  let desired = input.desired;
  if (invalid) {
    markInvalid(doc.status, invalid, now);
    desired ??= lastValid(name, doc, invalid);
  }
  if (!desired) {
    ctx.caches?.forget(name);
    if (invalid) {
      doc.status.reason = Reason.SpecInvalid;
      doc.status.message = 'the spec is invalid; see the Valid condition';
      return finish(input, doc, [], `sweep/${name}: spec invalid (${invalid.file}:${invalid.line})`);
    }
    if (current && !TERMINAL_PHASES.has(doc.status.phase))
      setOwnerPhase(
        doc.status,
        Phase.Cancelled,
        Reason.SpecDeleted,
        'the Sweep was removed; its live points are cancelled',
      );
    return finish(input, doc, [], `sweep/${name}: ${doc.status.phase} (spec deleted)`);
  }
  if (!invalid) adoptSpec(doc, desired, ctx.specCommit, now);
  if (desired.labels) doc.metadata.labels = desired.labels;
  else delete doc.metadata.labels;
  const { children, changed } = planPoints(input, ctx.caches ?? new SweepPlanCaches(), doc, desired, now);
  sweepPhase(doc, desired.spec);
  return finish(input, doc, children, summaryOf(input, doc), changed);
}

/** The status to edit: a copy of `current` deep enough for what the planner replaces, or a new one. */
function copyStatus(current: SweepStatusDoc | undefined, name: string, now: string): SweepStatusDoc {
  if (current) return { ...current, metadata: { ...current.metadata }, status: { ...current.status } };
  return {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'SweepStatus',
    metadata: { name },
    status: { phase: Phase.Pending, createdAt: now, conditions: [], points: {} },
  };
}

/** The spec last acted on, while the desired one is invalid. */
function lastValid(name: string, doc: SweepStatusDoc, invalid: InvalidSweep): DesiredSweep | undefined {
  if (!doc.appliedSpec) return undefined;
  return {
    name,
    spec: doc.appliedSpec,
    generation: doc.status.observedGeneration ?? generationOf(doc.appliedSpec),
    file: invalid.file,
    ...(doc.metadata.labels ? { labels: doc.metadata.labels } : {}),
  };
}

function adoptSpec(doc: SweepStatusDoc, desired: DesiredSweep, specCommit: string, now: string): void {
  const st = doc.status;
  markValid(st, now);
  if (st.observedGeneration !== desired.generation) {
    doc.appliedSpec = desired.spec;
    st.observedGeneration = desired.generation;
    st.specCommit = specCommit;
  }
  st.specFile = desired.file;
}

/**
 * Every point's status, and the children that should exist: a point whose child was created
 * (earlier, or now if a slot is free) keeps it; the rest wait. A child counts against
 * `maxConcurrent` until it is finished. Returns the children and whether any point changed (points
 * are compared field by field: a sweep of 10,000 points is planned whenever one of them moves).
 */
function planPoints(
  input: SweepPlanInput,
  caches: SweepPlanCaches,
  doc: SweepStatusDoc,
  desired: DesiredSweep,
  now: string,
): { children: DesiredRun[]; changed: boolean } {
  const before = doc.status.points;
  const points = caches.points(desired);
  const kids = points.map((p) => input.child(p.run));
  // A child left over from an earlier removal of the point is not ours until a slot makes it so.
  const isCreated = points.map((p, i) => {
    const prev = before[p.run];
    return (prev !== undefined && prev.phase !== 'Waiting') || (kids[i] !== undefined && !finished(kids[i]));
  });
  const live = points.filter((_, i) => isCreated[i] && !finished(kids[i])).length;
  const max = desired.spec.maxConcurrent;
  let slots = max === undefined ? Infinity : Math.max(0, max - live);
  const children: DesiredRun[] = [];
  const next: Record<string, SweepPointStatus> = {};
  let changed = Object.keys(before).length !== points.length;
  points.forEach((p, i) => {
    let ps: SweepPointStatus;
    if (isCreated[i]) ps = childPoint(p.params, kids[i]);
    else if (desired.spec.suspend) ps = waiting(p.params, Reason.Suspended, 'the Sweep is suspended');
    else if (slots > 0) {
      slots--;
      ps = { phase: Phase.Pending, params: p.params, reason: 'Created', message: 'child run created' };
    } else ps = waiting(p.params, 'MaxConcurrent', `waiting for one of ${max} unfinished points to finish`);
    if (ps.phase !== 'Waiting') children.push(caches.child(desired, p));
    const prev = before[p.run];
    ps.since = prev && prev.phase === ps.phase && prev.attempts === ps.attempts ? prev.since : now;
    // The run name is the hash of the params: the same name, the same params.
    if (prev && samePoint(prev, ps)) next[p.run] = prev;
    else {
      next[p.run] = ps;
      changed = true;
    }
  });
  doc.status.points = next;
  return { children, changed };
}

const finished = (child: RunStatusDoc | undefined): boolean =>
  child !== undefined && TERMINAL_PHASES.has(child.status.phase);

const samePoint = (a: SweepPointStatus, b: SweepPointStatus): boolean =>
  a.phase === b.phase &&
  a.attempts === b.attempts &&
  a.reason === b.reason &&
  a.message === b.message &&
  a.since === b.since;

const waiting = (params: Params, reason: string, message: string): SweepPointStatus => ({
  phase: 'Waiting',
  params,
  reason,
  message,
});

/** A point whose child exists: the child's phase and attempts (Pending until its status exists). */
function childPoint(params: Params, child: RunStatusDoc | undefined): SweepPointStatus {
  if (!child) return { phase: Phase.Pending, params, reason: 'Created', message: 'child run created' };
  const s = child.status;
  return {
    phase: s.phase,
    params,
    attempts: s.attempts.length,
    ...(s.reason ? { reason: s.reason } : {}),
    ...(s.message ? { message: s.message } : {}),
  };
}

const succeededOf = (all: readonly SweepPointStatus[]) =>
  `${all.filter((n) => n.phase === Phase.Succeeded).length}/${all.length} points succeeded`;

/** The sweep's phase from its points', and the count of points by phase. */
function sweepPhase(doc: SweepStatusDoc, spec: SweepSpec): void {
  const all = Object.values(doc.status.points);
  const count = (p: string) => all.filter((n) => n.phase === p).length;
  const unfinished = all.some((n) => !TERMINAL_PHASES.has(n.phase as Phase) && n.reason !== Reason.Suspended);
  const stopped = count(Phase.Failed) + count(Phase.Cancelled);
  doc.status.counts = Object.fromEntries(
    [...new Set(all.map((n) => n.phase))].sort().map((p) => [p, count(p)]),
  );
  const ok = succeededOf(all);
  if (count(Phase.Succeeded) === all.length) setOwnerPhase(doc.status, Phase.Succeeded, Reason.Completed, ok);
  else if (spec.suspend)
    setOwnerPhase(doc.status, Phase.Cancelled, Reason.Suspended, `spec.suspend is true; ${ok}`);
  else if (stopped && !unfinished)
    setOwnerPhase(doc.status, Phase.Failed, 'PointsFailed', `${stopped} failed or cancelled; ${ok}`);
  else if (all.some((n) => n.phase !== 'Waiting' && n.phase !== Phase.Pending))
    setOwnerPhase(doc.status, Phase.Running, 'Running', ok);
  else setOwnerPhase(doc.status, Phase.Pending, 'Pending', ok);
}

/** `sweep/s: Running (2/6 points succeeded); 3 points added; s-1a2b3c4d Succeeded`. */
function summaryOf(input: SweepPlanInput, doc: SweepStatusDoc): string {
  const st = doc.status;
  const before = (input.since ?? input.current)?.status.points ?? {};
  const added = Object.keys(st.points).filter((r) => !before[r]).length;
  const removed = Object.keys(before).filter((r) => !st.points[r]).length;
  const moved = Object.entries(st.points)
    .filter(([r, p]) => before[r] && before[r].phase !== p.phase)
    .map(([r, p]) => `${r} ${p.phase}`);
  const parts = [`sweep/${input.name}: ${st.phase} (${succeededOf(Object.values(st.points))})`];
  if (input.current && added) parts.push(`${added} point${added === 1 ? '' : 's'} added`);
  if (removed) parts.push(`${removed} point${removed === 1 ? '' : 's'} removed`);
  if (moved.length)
    parts.push(
      `${moved.slice(0, 10).join(', ')}${moved.length > 10 ? `, and ${moved.length - 10} more` : ''}`,
    );
  return parts.join('; ');
}

/** The plan: `current` itself when nothing changed. */
function finish(
  input: SweepPlanInput,
  doc: SweepStatusDoc,
  children: DesiredRun[],
  summary: string,
  pointsChanged = true,
): SweepPlan {
  const current = input.current;
  if (current && (!pointsChanged || current.status.points === doc.status.points) && sameShell(current, doc))
    return { doc: current, children };
  return { doc, summary, children };
}

/** Everything but the points (compared one by one) and the applied spec (compared by generation). */
function sameShell(a: SweepStatusDoc, b: SweepStatusDoc): boolean {
  const shell = (d: SweepStatusDoc) =>
    canonicalJson({ ...d, appliedSpec: undefined, status: { ...d.status, points: undefined } });
  return a.status.observedGeneration === b.status.observedGeneration && shell(a) === shell(b);
}
