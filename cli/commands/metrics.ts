/**
 * `adv metrics RUN`: the metric events a run's workload logged (runtime/metrics.ts), read from the
 * object store as `adv logs` reads output — the same on every backend. The table is the run's
 * curve across attempts: where an attempt resumed from an older checkpoint, its points replace
 * the ones it redid (`--all-attempts` shows those too).
 */
import type { Command } from 'commander';
import { Option } from 'commander';
import { AdvError, ErrorCode, type RunStatusDoc } from '../../controller/index.js';
import { attemptPrefix } from '../../runtime/checkpoint.js';
import {
  metricNames,
  metricsPrefix,
  parseMetricLines,
  readRunMetrics,
  runCurve,
  type AttemptMetrics,
  type MetricEvent,
} from '../../runtime/metrics.js';
import type { ObjectStore } from '../../runtime/store/index.js';
import { renderTable } from '../format.js';
import { checkName } from '../names.js';
import { printable, type Io } from '../output.js';
import { openStatus, type StatusReader } from '../status-reader.js';
import { openCommandStore, type StoreOpts } from '../store.js';
import { attemptNumber } from './logs.js';

/** One row of the table: a step of one attempt, with a value per selected metric. */
export interface MetricRow {
  step: number;
  attempt: number;
  /** A point a later attempt redid (shown with `--all-attempts` only). */
  redone: boolean;
  values: (number | undefined)[];
}

/**
 * The rows for `metrics` (one column each): every point on each metric's curve across attempts,
 * one row per (step, attempt), by step; with `allAttempts`, the redone points too.
 */
export function metricRows(
  attempts: readonly AttemptMetrics[],
  metrics: readonly string[],
  allAttempts = false,
): MetricRow[] {
  const rows = new Map<string, MetricRow>();
  const add = (p: { step: number; attempt: number; value: number }, col: number, redone: boolean) => {
    const key = `${p.step}/${p.attempt}/${redone}`;
    let row = rows.get(key);
    if (!row)
      rows.set(
        key,
        (row = { step: p.step, attempt: p.attempt, redone, values: metrics.map(() => undefined) }),
      );
    row.values[col] = p.value;
  };
  metrics.forEach((m, col) => {
    const curve = runCurve(attempts, m);
    for (const p of curve.points) add(p, col, false);
    if (allAttempts) for (const p of curve.redone) add(p, col, true);
  });
  return [...rows.values()].sort((a, b) => a.step - b.step || a.attempt - b.attempt);
}

/** A value for a person: six significant digits, integers as they are. */
export function formatMetric(v: number | undefined): string {
  if (v === undefined) return '-';
  return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6)));
}

/** RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled. */
function csvField(s: string): string {
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** The rows as CSV (full precision; an absent value is an empty field), header first. */
export function metricsCsv(
  metrics: readonly string[],
  rows: readonly MetricRow[],
  allAttempts: boolean,
): string {
  const head = ['step', 'attempt', ...metrics, ...(allAttempts ? ['redone'] : [])];
  const lines = [head.map(csvField).join(',')];
  for (const r of rows)
    lines.push(
      [
        String(r.step),
        String(r.attempt),
        ...r.values.map((v) => (v === undefined ? '' : String(v))),
        ...(allAttempts ? [r.redone ? 'true' : 'false'] : []),
      ].join(','),
    );
  return lines.join('\n') + '\n';
}

/** The events with only `metrics` kept (all when empty); an event left with none is dropped. */
function only(events: readonly MetricEvent[], metrics: readonly string[]): MetricEvent[] {
  if (!metrics.length) return [...events];
  return events.flatMap((e) => {
    const kept = Object.fromEntries(Object.entries(e.metrics).filter(([k]) => metrics.includes(k)));
    return Object.keys(kept).length ? [{ ...e, metrics: kept }] : [];
  });
}

/** The last point of each metric's curve, for `adv describe run` (empty when the run logged none). */
export async function metricsSection(store: ObjectStore, run: string): Promise<string[]> {
  const attempts = await readRunMetrics(store, run);
  const names = metricNames(attempts);
  if (!names.length) return [];
  const rows = names.map((m) => {
    const last = runCurve(attempts, m).points.at(-1)!;
    return [m, formatMetric(last.value), String(last.step), String(last.attempt)];
  });
  return [
    '',
    `Metrics (last value; adv metrics ${run} shows them all):`,
    renderTable(['METRIC', 'LAST', 'STEP', 'ATTEMPT'], rows).trimEnd(),
  ];
}

/**
 * The Metrics section of `adv describe run`, from the store `opts` name (or the repo's Storage
 * spec); nothing when there is no store to read or the run logged no metric: describe reads git,
 * and a store it cannot reach must not keep it from showing the rest.
 */
export async function describeMetrics(opts: StoreOpts, io: Io, run: string): Promise<string[]> {
  try {
    return await metricsSection(await openCommandStore(opts, io), run);
  } catch {
    return [];
  }
}

interface MetricsOpts extends StoreOpts {
  follow?: boolean;
  output: 'table' | 'csv' | 'json';
  metric: string[];
  attempt?: number;
  allAttempts?: boolean;
  /** How often the store is read again with `--follow` (ms). */
  interval: number;
}

export function registerMetrics(program: Command, io: Io): void {
  program
    .command('metrics')
    .description(
      "Print a run's metrics (what its workload appended to $ADV_METRICS_FILE) from the object store",
    )
    .argument('<run>', 'run name')
    .addOption(
      new Option('-o, --output <format>', 'table, csv, or json (the events of each attempt)')
        .choices(['table', 'csv', 'json'])
        .default('table'),
    )
    .option(
      '--metric <name>',
      'this metric only (repeat for several)',
      (v: string, a: string[]) => [...a, v],
      [],
    )
    .option('--attempt <n>', "this attempt's events only", attemptNumber)
    .option('--all-attempts', 'also the points a later attempt redid after resuming from an older checkpoint')
    .option('-f, --follow', 'print new points as they arrive, until the run ends')
    .addOption(
      new Option('--interval <ms>', 'with --follow: how often to look')
        .default(1000)
        .argParser(Number)
        .hideHelp(),
    )
    .option('--store <url>', 'object store (default: $ADV_STORE, else the Storage spec of the repo)')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--data-dir <dir>', "the controller's data dir (where a file store's relative path starts)")
    .addHelpText(
      'after',
      '\nExamples:\n  adv metrics train\n  adv metrics train --metric loss -o csv > loss.csv\n  adv metrics train -f\n  adv metrics train --all-attempts   # with the steps redone after each resume',
    )
    .action(async (run: string, opts: MetricsOpts) => {
      checkName(run);
      const store = await openCommandStore(opts, io);
      if (opts.follow) return followMetrics(io, store, run, opts);
      const all = await readRunMetrics(store, run);
      const attempts = opts.attempt === undefined ? all : all.filter((a) => a.attempt === opts.attempt);
      const names = chosenMetrics(run, store, all, attempts, opts);
      if (opts.output === 'json') {
        const out = attempts
          .map((a) => ({ attempt: a.attempt, events: only(a.events, opts.metric) }))
          .filter((a) => a.events.length);
        return void io.stdout.write(JSON.stringify({ run, attempts: out }, null, 2) + '\n');
      }
      const rows = metricRows(attempts, names, opts.allAttempts);
      if (opts.output === 'csv') return void io.stdout.write(metricsCsv(names, rows, !!opts.allAttempts));
      io.stdout.write(tableOf(names, rows, !!opts.allAttempts));
    });
}

/** The metrics to show: `--metric` (each must exist), else every one the run logged. */
function chosenMetrics(
  run: string,
  store: ObjectStore,
  all: readonly AttemptMetrics[],
  attempts: readonly AttemptMetrics[],
  opts: MetricsOpts,
): string[] {
  if (!all.length)
    throw new AdvError(ErrorCode.NotFound, `no metrics for run ${run} in ${store.url}`, {
      hint: 'a workload logs a metric by appending {"step": N, "metrics": {"loss": 0.5}} as a line to $ADV_METRICS_FILE (docs/metrics.md); adv logs shows its output',
    });
  if (!attempts.length)
    throw new AdvError(
      ErrorCode.NotFound,
      `run ${run} has no metrics from attempt ${opts.attempt} (attempts with metrics: ${all.map((a) => a.attempt).join(', ')})`,
      { hint: `pass one of those, or leave out --attempt for the run's curve across attempts` },
    );
  const known = metricNames(attempts);
  const unknown = opts.metric.filter((m) => !known.includes(m));
  if (unknown.length)
    throw new AdvError(
      ErrorCode.NotFound,
      `run ${run} has no metric ${unknown.map((m) => `"${printable(m)}"`).join(', ')} (it logged: ${known.map((m) => printable(m)).join(', ')})`,
      { hint: 'metric names are case-sensitive; leave out --metric to see them all' },
    );
  return opts.metric.length ? opts.metric : known;
}

function tableOf(names: readonly string[], rows: readonly MetricRow[], allAttempts: boolean): string {
  return renderTable(
    ['STEP', 'ATTEMPT', ...names.map((n) => printable(n).toUpperCase()), ...(allAttempts ? ['REDONE'] : [])],
    rows.map((r) => [
      String(r.step),
      String(r.attempt),
      ...r.values.map(formatMetric),
      ...(allAttempts ? [r.redone ? 'redone' : ''] : []),
    ]),
  );
}

const ENDED = new Set(['Succeeded', 'Failed', 'Cancelled']);

/**
 * `--follow`: each attempt's events as their parts arrive (a resumed attempt's first rows are the
 * steps it redoes), until the run ends: its status says so where the status branch can be read;
 * else once the newest attempt has an exit record that is not a preemption (a preempted attempt
 * is followed by the next). With `--attempt N`, until that attempt's exit record is there.
 */
async function followMetrics(io: Io, store: ObjectStore, run: string, opts: MetricsOpts): Promise<void> {
  const reader = await openStatus(opts, io).catch(() => undefined);
  const printed = new Set<string>();
  const out = new FollowPrinter(io, opts);
  io.stderr.write(`following the metrics of run ${run} (Ctrl-C stops following; the run goes on)\n`);
  try {
    for (;;) {
      const ended = await runEnded(store, run, opts.attempt, reader);
      for (const attempt of await attemptsOf(store, run, opts.attempt)) {
        const keys: string[] = [];
        for await (const o of store.list(metricsPrefix(run, attempt)))
          if (!printed.has(o.key)) keys.push(o.key);
        for (const key of keys.sort()) {
          const body = await store.get(key);
          if (body)
            out.events(attempt, only(parseMetricLines(Buffer.from(body).toString('utf8')), opts.metric));
          printed.add(key);
        }
      }
      // The last part is written before the exit record, and the exit record before the status.
      if (ended) return;
      await new Promise((r) => setTimeout(r, opts.interval));
    }
  } finally {
    await reader?.close();
  }
}

async function attemptsOf(store: ObjectStore, run: string, only: number | undefined): Promise<number[]> {
  if (only !== undefined) return [only];
  return (await store.listFolders(`runs/${run}/attempts/`))
    .map((f) => Number(f.split('/').at(-2)))
    .filter((n) => Number.isSafeInteger(n) && n > 0)
    .sort((a, b) => a - b);
}

async function runEnded(
  store: ObjectStore,
  run: string,
  attempt: number | undefined,
  reader: StatusReader | undefined,
): Promise<boolean> {
  if (reader && attempt === undefined) {
    await reader.repo.refresh().catch(() => undefined);
    await reader.store.load();
    const doc = reader.store.get<RunStatusDoc>('Run', run);
    if (doc) return ENDED.has(doc.status.phase);
  }
  const newest = attempt ?? (await attemptsOf(store, run, undefined)).at(-1);
  if (newest === undefined) return false;
  const body = await store.get(`${attemptPrefix(run, newest)}exit.json`);
  if (!body) return false;
  if (attempt !== undefined) return true;
  try {
    return (JSON.parse(Buffer.from(body).toString('utf8')) as { reason?: string }).reason !== 'Preempted';
  } catch {
    return true;
  }
}

/** Prints followed events as they come: table rows (a new header when a new metric appears), CSV, or JSON lines. */
class FollowPrinter {
  private names: string[] = [];
  private headed = false;

  constructor(
    private readonly io: Io,
    private readonly opts: MetricsOpts,
  ) {
    if (opts.metric.length) this.names = [...opts.metric];
  }

  events(attempt: number, events: readonly MetricEvent[]): void {
    if (!events.length) return;
    if (this.opts.output === 'json') {
      for (const e of events) this.io.stdout.write(JSON.stringify({ attempt, ...e }) + '\n');
      return;
    }
    const fresh = [...new Set(events.flatMap((e) => Object.keys(e.metrics)))].filter(
      (m) => !this.names.includes(m),
    );
    if (fresh.length) {
      this.names.push(...fresh.sort());
      this.headed = false;
    }
    const rows = events.map((e) => ({
      step: e.step,
      attempt,
      redone: false,
      values: this.names.map((m) => e.metrics[m]),
    }));
    if (this.opts.output === 'csv') {
      const csv = metricsCsv(this.names, rows, false);
      this.io.stdout.write(this.headed ? csv.slice(csv.indexOf('\n') + 1) : csv);
      this.headed = true;
      return;
    }
    const cells = (c: string[]) => c.map((x, i) => (i < c.length - 1 ? x.padEnd(12) : x)).join(' ') + '\n';
    if (!this.headed)
      this.io.stdout.write(cells(['STEP', 'ATTEMPT', ...this.names.map((n) => printable(n).toUpperCase())]));
    for (const r of rows)
      this.io.stdout.write(cells([String(r.step), String(r.attempt), ...r.values.map(formatMetric)]));
    this.headed = true;
  }
}
