/**
 * The data behind the dashboard's metric plots: a run's curves across attempts (with the resume
 * points and the redone steps) and several runs' curves of one metric side by side. Read from the
 * object store with runtime/metrics.ts, the one reader of the metric parts `adv exec` ships.
 *
 * Series are columnar (`steps[i]`, `values[i]`) as the plot wants them, and cut down on the server
 * to about as many points as the plot has pixels (`downsample`): min and max per bucket, so a
 * spike is never averaged away.
 */
import { TERMINAL_PHASES } from '../status/phases.js';
import { metricNames, readRunMetrics, runCurve, type AttemptMetrics } from '../../runtime/metrics.js';
import type { ObjectStore } from '../../runtime/store/types.js';
import type { RunStatusDoc } from '../status/types.js';

/** Points per series when the page does not say (about a wide plot's pixels). */
export const DEFAULT_POINTS = 1200;
/** The most points per series a page may ask for: more than any screen's width. */
export const MAX_POINTS = 8000;
/** The most runs one compare page overlays. */
export const MAX_COMPARE_RUNS = 50;

export interface Point {
  step: number;
  value: number;
  attempt: number;
}

/** One line of a plot, columnar; `total` is how many points it had before downsampling. */
export interface Series {
  steps: number[];
  values: number[];
  attempts: number[];
  total: number;
}

/** Where an attempt after the first took over the curve. */
export interface ResumeMark {
  attempt: number;
  /** The checkpoint step it restored, or (not recorded) the first step it logged. */
  step: number;
  /** Whether `step` is the restored checkpoint's (status `startStep`) rather than a guess. */
  restored: boolean;
  label: string;
}

export interface RunMetricSeries {
  /** The run's curve: each attempt's points replace the earlier ones from its first step on. */
  curve: Series;
  /** The points a later attempt logged again after resuming (drawn faded). */
  redone: Series;
  resumes: ResumeMark[];
}

export interface RunMetricsData {
  run: string;
  /** The run has ended: no more points will come. */
  done: boolean;
  metrics: string[];
  series: Record<string, RunMetricSeries>;
}

/**
 * At most about `max` of `points` (in step order): the first and last point, and per bucket of
 * consecutive points its minimum and maximum (in their order), so the line's envelope and every
 * spike survive. Fewer than `max` points come back unchanged.
 */
export function downsample<T extends { value: number }>(points: readonly T[], max: number): T[] {
  const n = points.length;
  if (n <= max || max < 4) return points.slice();
  const buckets = Math.floor((max - 2) / 2);
  const out: T[] = [points[0]!];
  const inner = n - 2;
  for (let b = 0; b < buckets; b++) {
    const from = 1 + Math.floor((b * inner) / buckets);
    const to = 1 + Math.floor(((b + 1) * inner) / buckets);
    if (from >= to) continue;
    let lo = from;
    let hi = from;
    for (let i = from + 1; i < to; i++) {
      if (points[i]!.value < points[lo]!.value) lo = i;
      if (points[i]!.value > points[hi]!.value) hi = i;
    }
    if (lo === hi) out.push(points[lo]!);
    else out.push(points[Math.min(lo, hi)]!, points[Math.max(lo, hi)]!);
  }
  out.push(points[n - 1]!);
  return out;
}

function columns(points: readonly Point[], max: number): Series {
  const kept = downsample(points, max);
  return {
    steps: kept.map((p) => p.step),
    values: kept.map((p) => p.value),
    attempts: kept.map((p) => p.attempt),
    total: points.length,
  };
}

/** The resume points of a curve: each attempt after the first that logged points on it. */
export function resumeMarks(points: readonly Point[], doc: RunStatusDoc | undefined): ResumeMark[] {
  const first = new Map<number, number>();
  for (const p of points) if (!first.has(p.attempt)) first.set(p.attempt, p.step);
  const attempts = [...first.keys()].sort((a, b) => a - b).slice(1);
  return attempts.map((n) => {
    const restored = doc?.status.attempts.find((a) => a.n === n)?.startStep;
    return restored !== undefined
      ? { attempt: n, step: restored, restored: true, label: `attempt ${n} resumed from step ${restored}` }
      : {
          attempt: n,
          step: first.get(n)!,
          restored: false,
          label: `attempt ${n} took over at step ${first.get(n)!}`,
        };
  });
}

/** A run's plots' data from the attempts' metric events (pure: `runMetricsData` reads them). */
export function runSeries(
  attempts: readonly AttemptMetrics[],
  doc: RunStatusDoc | undefined,
  opts: { metric?: string; points: number },
): Record<string, RunMetricSeries> {
  const names = metricNames(attempts).filter((m) => opts.metric === undefined || m === opts.metric);
  const out: Record<string, RunMetricSeries> = {};
  for (const m of names) {
    const { points, redone } = runCurve(attempts, m);
    out[m] = {
      curve: columns(points, opts.points),
      redone: columns(
        redone.slice().sort((a, b) => a.step - b.step || a.attempt - b.attempt),
        opts.points,
      ),
      resumes: resumeMarks(points, doc),
    };
  }
  return out;
}

/** A run's metrics for its page: every metric (or the one asked for) as a plot's series. */
export async function runMetricsData(
  store: ObjectStore,
  doc: RunStatusDoc,
  opts: { metric?: string; points?: number } = {},
): Promise<RunMetricsData> {
  const run = doc.metadata.name;
  // Ended is decided before reading: the last part is shipped before the run's end is recorded.
  const done = TERMINAL_PHASES.has(doc.status.phase);
  const attempts = await readRunMetrics(store, run);
  return {
    run,
    done,
    metrics: metricNames(attempts),
    series: runSeries(attempts, doc, { ...opts, points: opts.points ?? DEFAULT_POINTS }),
  };
}

export interface CompareRun {
  run: string;
  /** The run's curve of the metric (empty when it has none). */
  series: Series;
  /** Why there is no line for this run, when there is none. */
  missing?: string;
}

export interface CompareData {
  metric: string | null;
  /** Every metric any of the runs logged: what else could be compared. */
  metrics: string[];
  runs: CompareRun[];
  done: boolean;
}

/**
 * Several runs' curves of one metric (`loss` by default, else the first logged by any run).
 * `runs` not on the status branch are listed with why, not dropped silently.
 */
export async function compareData(
  store: ObjectStore,
  runs: readonly { name: string; doc: RunStatusDoc | undefined }[],
  opts: { metric?: string; points?: number } = {},
): Promise<CompareData> {
  const read = await Promise.all(
    runs.map(async (r) => ({ ...r, attempts: r.doc ? await readRunMetrics(store, r.name) : [] })),
  );
  const names = [...new Set(read.flatMap((r) => metricNames(r.attempts)))].sort();
  const metric = opts.metric ?? (names.includes('loss') ? 'loss' : (names[0] ?? null));
  const points = opts.points ?? DEFAULT_POINTS;
  const empty: Series = { steps: [], values: [], attempts: [], total: 0 };
  return {
    metric,
    metrics: names,
    done: read.every((r) => !r.doc || TERMINAL_PHASES.has(r.doc.status.phase)),
    runs: read.map((r) => {
      if (!r.doc) return { run: r.name, series: empty, missing: 'no such run on the status branch' };
      const curve = metric === null ? [] : runCurve(r.attempts, metric).points;
      if (!curve.length)
        return { run: r.name, series: empty, missing: `logged no ${metric ?? 'metrics'} yet` };
      return { run: r.name, series: columns(curve, points) };
    }),
  };
}
