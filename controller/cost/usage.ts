/**
 * What runs used, from their status documents alone: money (each attempt's recorded price × the
 * hours it billed) and GPU-hours (the hours it ran × the GPUs it held), optionally clipped to a
 * period, per run and per label value. Status files of deleted runs stay on the status branch
 * (Cancelled, attempts kept), so they count too. Read by `adv cost`, `adv describe`, the dashboard.
 */
import { billedFrom } from '../status/cost.js';
import type { Attempt, RunStatusDoc } from '../status/types.js';

/** A period: attempts count only for the part of their time inside it (ms since the epoch). */
export interface Period {
  sinceMs?: number;
  untilMs?: number;
}

/** Money and GPU-hours over some attempts. */
export interface Usage {
  /** Money, in the unit of the Backends' costPerHour; 0 when none was priced (see `priced`). */
  cost: number;
  /** Attempts that had a price. */
  priced: number;
  gpuHours: number;
  /** Hours attempts ran (start to end, or to now). */
  hours: number;
  attempts: number;
}

const EMPTY: Usage = { cost: 0, priced: 0, gpuHours: 0, hours: 0, attempts: 0 };

/** Hours of [from, to] inside the period; 0 when outside it or not begun. */
function hoursWithin(fromIso: string | undefined, toMs: number, p: Period): number {
  if (!fromIso) return 0;
  const from = Math.max(Date.parse(fromIso), p.sinceMs ?? -Infinity);
  const to = Math.min(toMs, p.untilMs ?? Infinity);
  return Number.isFinite(from) && to > from ? (to - from) / 3_600_000 : 0;
}

/** One attempt's use within the period; `gpus`: the GPUs it held (GPUs per node × nodes). */
export function attemptUsage(a: Attempt, gpus: number, p: Period, nowMs: number): Usage {
  const end = a.finishedAt ? Date.parse(a.finishedAt) : nowMs;
  const ran = hoursWithin(a.startedAt, end, p);
  const billed = a.price ? hoursWithin(billedFrom(a), end, p) : 0;
  const counts = ran > 0 || billed > 0;
  return {
    cost: a.price ? billed * a.price.perHour : 0,
    priced: a.price && counts ? 1 : 0,
    gpuHours: ran * gpus,
    hours: ran,
    attempts: counts ? 1 : 0,
  };
}

/** The GPUs a run's attempts hold: `resources.gpus` × `resources.nodes` of the spec acted on. */
export function gpusOf(doc: RunStatusDoc): number {
  const r = doc.appliedSpec?.resources;
  return (r?.gpus ?? 0) * (r?.nodes ?? 1);
}

/** Sums usages. */
export function addUsage(x: Usage, y: Usage): Usage {
  return {
    cost: x.cost + y.cost,
    priced: x.priced + y.priced,
    gpuHours: x.gpuHours + y.gpuHours,
    hours: x.hours + y.hours,
    attempts: x.attempts + y.attempts,
  };
}

/** A run's use within the period. */
export function runUsage(doc: RunStatusDoc, p: Period, nowMs: number): Usage {
  const gpus = gpusOf(doc);
  return doc.status.attempts.reduce((u, a) => addUsage(u, attemptUsage(a, gpus, p, nowMs)), EMPTY);
}

/** One row of the report: a run, or a label value (`(none)` for runs without the label). */
export interface UsageRow extends Usage {
  name: string;
}

export interface UsageReport {
  runs: UsageRow[];
  /** Per value of the `by` label, when asked. */
  groups?: UsageRow[];
  total: Usage;
}

/** Every run that used something in the period, most expensive first; grouped by a label if asked. */
export function usageReport(
  docs: Iterable<RunStatusDoc>,
  opts: Period & { by?: string },
  nowMs: number,
): UsageReport {
  const runs: UsageRow[] = [];
  const groups = new Map<string, Usage>();
  for (const doc of docs) {
    const u = runUsage(doc, opts, nowMs);
    if (!u.attempts) continue;
    runs.push({ name: doc.metadata.name, ...u });
    if (opts.by !== undefined) {
      const key = doc.metadata.labels?.[opts.by] ?? '(none)';
      groups.set(key, addUsage(groups.get(key) ?? EMPTY, u));
    }
  }
  const order = (x: UsageRow, y: UsageRow) =>
    y.cost - x.cost || y.gpuHours - x.gpuHours || (x.name < y.name ? -1 : 1);
  runs.sort(order);
  return {
    runs,
    ...(opts.by !== undefined
      ? { groups: [...groups].map(([name, u]) => ({ name, ...u })).sort(order) }
      : {}),
    total: runs.reduce<Usage>((t, r) => addUsage(t, r), EMPTY),
  };
}
