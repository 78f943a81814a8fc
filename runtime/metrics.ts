/**
 * Workload metrics: the record the workload writes, and where `adv exec` ships it.
 *
 * The workload (the `adventuretime` Python helper's `log(step, **metrics)`, or anything else)
 * appends one JSON object per line to the file `$ADV_METRICS_FILE` names:
 *
 *     {"step": 120, "time": 1764250000.25, "metrics": {"loss": 0.52, "lr": 0.001}}
 *
 * `step` is a non-negative integer, `time` seconds since the epoch (optional), `metrics` maps a
 * name to a finite number. `adv exec` ships complete lines as immutable parts under
 * `runs/<run>/attempts/<n>/metrics/part-NNNNNN` (process 0 only), like the output under `logs/`.
 * Readers take what parses and skip the rest: a half-written or hand-made line never hides the
 * others.
 */
import { attemptPrefix } from './checkpoint.js';
import type { ObjectStore } from './store/types.js';

/** The variable `adv exec` sets to the file the workload appends its metric lines to. */
export const METRICS_FILE_ENV = 'ADV_METRICS_FILE';

export const metricsPrefix = (run: string, attempt: number): string =>
  `${attemptPrefix(run, attempt)}metrics/`;

/** One line of the metrics file, as read back. */
export interface MetricEvent {
  step: number;
  /** Seconds since the epoch, when the workload said. */
  time?: number;
  metrics: Record<string, number>;
}

/** The events of one attempt, in the order they were written. */
export interface AttemptMetrics {
  attempt: number;
  events: MetricEvent[];
}

/** One line as a MetricEvent; undefined for anything that is not one (with no metric left). */
export function parseMetricLine(line: string): MetricEvent | undefined {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const o = v as { step?: unknown; time?: unknown; metrics?: unknown };
  if (typeof o.step !== 'number' || !Number.isSafeInteger(o.step) || o.step < 0) return undefined;
  if (typeof o.metrics !== 'object' || o.metrics === null || Array.isArray(o.metrics)) return undefined;
  const metrics: Record<string, number> = {};
  for (const [k, x] of Object.entries(o.metrics as Record<string, unknown>))
    if (typeof x === 'number' && Number.isFinite(x)) metrics[k] = x;
  if (!Object.keys(metrics).length) return undefined;
  return {
    step: o.step,
    ...(typeof o.time === 'number' && Number.isFinite(o.time) ? { time: o.time } : {}),
    metrics,
  };
}

/** Every event in `text` (JSON lines); what does not parse is skipped. */
export function parseMetricLines(text: string): MetricEvent[] {
  const out: MetricEvent[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const e = parseMetricLine(line);
    if (e) out.push(e);
  }
  return out;
}

/** The events one attempt shipped, in part order. */
export async function readAttemptMetrics(
  store: ObjectStore,
  run: string,
  attempt: number,
): Promise<MetricEvent[]> {
  const keys: string[] = [];
  for await (const o of store.list(metricsPrefix(run, attempt))) keys.push(o.key);
  keys.sort();
  const texts = await Promise.all(keys.map((k) => store.get(k)));
  return texts.flatMap((b) => (b ? parseMetricLines(Buffer.from(b).toString('utf8')) : []));
}

/** The attempts of a run that shipped metrics, oldest first. */
export async function readRunMetrics(store: ObjectStore, run: string): Promise<AttemptMetrics[]> {
  const folders = await store.listFolders(`runs/${run}/attempts/`);
  const attempts = folders
    .map((f) => Number(f.replace(/\/$/, '').split('/').pop()))
    .filter((n) => Number.isSafeInteger(n) && n > 0)
    .sort((a, b) => a - b);
  const out: AttemptMetrics[] = [];
  for (const attempt of attempts) {
    const events = await readAttemptMetrics(store, run, attempt);
    if (events.length) out.push({ attempt, events });
  }
  return out;
}

/**
 * The run's curve of one metric as one line across attempts: each attempt's points replace the
 * earlier attempts' points from its first step on (the steps it redid after resuming). `redone`
 * holds the replaced points, so a plot can still show them.
 */
export function runCurve(
  attempts: readonly AttemptMetrics[],
  metric: string,
): {
  points: { step: number; value: number; attempt: number }[];
  redone: { step: number; value: number; attempt: number }[];
} {
  let points: { step: number; value: number; attempt: number }[] = [];
  const redone: { step: number; value: number; attempt: number }[] = [];
  for (const a of attempts) {
    const own = a.events
      .filter((e) => e.metrics[metric] !== undefined)
      .map((e) => ({ step: e.step, value: e.metrics[metric]!, attempt: a.attempt }));
    if (!own.length) continue;
    const from = own[0]!.step;
    for (const p of points) if (p.step >= from) redone.push(p);
    points = points.filter((p) => p.step < from).concat(own);
  }
  return { points, redone };
}

/** The value at `step` on a curve: the one logged at the greatest step not past it (the last such when repeated). */
export function metricAt(
  curve: readonly { step: number; value: number }[],
  step: number,
): number | undefined {
  let found: { step: number; value: number } | undefined;
  for (const p of curve) if (p.step <= step && (!found || p.step >= found.step)) found = p;
  return found?.value;
}

/** The metric names that appear in any attempt, sorted. */
export function metricNames(attempts: readonly AttemptMetrics[]): string[] {
  const names = new Set<string>();
  for (const a of attempts) for (const e of a.events) for (const k of Object.keys(e.metrics)) names.add(k);
  return [...names].sort();
}
