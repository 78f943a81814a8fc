/**
 * `adv get sweeps` and `adv describe sweep NAME [--metric M --mode min|max]`: a Sweep's status from
 * the status branch, and its points ranked by the last value of a metric their runs logged
 * (runtime/metrics.ts, read from the object store).
 */
import { stringify } from 'yaml';
import { AdvError, ErrorCode, age, type SweepStatusDoc } from '../../controller/index.js';
import { readRunMetrics, runCurve } from '../../runtime/metrics.js';
import type { ObjectStore } from '../../runtime/store/index.js';
import { phaseStyle, renderTable } from '../format.js';
import { colours, printable, safe, type Io } from '../output.js';
import { parseSelector, selectorMatches } from '../selector.js';
import { openStatus, type StatusReader } from '../status-reader.js';
import { openCommandStore, type StoreOpts } from '../store.js';
import { conditionsSection, history, ownerHeader } from '../describe-sections.js';

const ACTIVE = new Set(['Pending', 'Scheduling', 'Queued', 'Running']);

interface GetOpts {
  repo?: string;
  statusBranch?: string;
  output: string;
  selector?: string;
  watch?: boolean;
  tree?: boolean;
}

/** `adv get sweeps [NAME]`: one row per Sweep (points succeeded, active, waiting, failed). */
export async function getSweeps(io: Io, name: string | undefined, opts: GetOpts): Promise<void> {
  if (opts.watch || opts.tree)
    throw new AdvError(ErrorCode.UsageError, `${opts.watch ? '--watch' : '--tree'} is for runs`, {
      hint: 'adv get sweeps lists sweeps once; adv get runs -l adventuretime.dev/sweep=NAME -w watches the points',
    });
  const requirements = parseSelector(opts.selector ?? '');
  const r = await openStatus(opts, io);
  try {
    let names = r.store.names('Sweep');
    if (name) {
      if (!names.includes(name))
        throw new AdvError(ErrorCode.NotFound, `sweep "${printable(name)}" has no status`, {
          hint: 'adv get sweeps lists what exists',
        });
      names = [name];
    }
    const docs = names
      .map((n) => r.store.get<SweepStatusDoc>('Sweep', n)!)
      .filter((d) => selectorMatches(d.metadata.labels, requirements));
    if (opts.output === 'json')
      return void io.stdout.write(
        JSON.stringify(docs.length === 1 && name ? docs[0] : { items: docs }, null, 2) + '\n',
      );
    if (opts.output === 'yaml') return void io.stdout.write(docs.map((d) => stringify(d)).join('---\n'));
    if (opts.output === 'name')
      return void io.stdout.write(docs.map((d) => `sweep/${printable(d.metadata.name)}\n`).join(''));
    const wide = opts.output === 'wide';
    const rows = docs.map((d) => {
      const points = Object.values(d.status.points);
      const n = (p: string) => points.filter((x) => x.phase === p).length;
      return [
        d.metadata.name,
        d.status.phase,
        `${n('Succeeded')}/${points.length}`,
        String(points.filter((x) => ACTIVE.has(x.phase)).length),
        String(n('Waiting')),
        String(n('Failed')),
        age(d.status.createdAt),
        d.status.reason ?? '',
        ...(wide ? [d.status.specFile ?? '', d.status.message ?? ''] : []),
      ];
    });
    const headers = ['NAME', 'PHASE', 'SUCCEEDED', 'ACTIVE', 'WAITING', 'FAILED', 'AGE', 'REASON'];
    io.stdout.write(
      rows.length
        ? renderTable(
            [...headers, ...(wide ? ['FILE', 'MESSAGE'] : [])],
            rows,
            phaseStyle(colours(io.stdout, io.env)),
          )
        : 'No sweeps found.\n',
    );
  } finally {
    await r.close();
  }
}

export interface DescribeSweepOpts extends StoreOpts {
  statusBranch?: string;
  output: string;
  metric?: string;
  mode?: string;
}

/** `adv describe sweep NAME`: the sweep, its conditions, every point (best first by `--metric`). */
export async function describeSweep(io: Io, name: string, opts: DescribeSweepOpts): Promise<void> {
  const mode = opts.mode ?? 'min';
  if (mode !== 'min' && mode !== 'max')
    throw new AdvError(ErrorCode.UsageError, `--mode is min or max, not "${printable(mode)}"`, {
      hint: 'min: lower is better (a loss); max: higher is better (an accuracy)',
    });
  if (opts.mode && !opts.metric)
    throw new AdvError(ErrorCode.UsageError, '--mode ranks by a metric', { hint: 'add --metric NAME' });
  const r = await openStatus(opts, io);
  try {
    const doc = r.store.get<SweepStatusDoc>('Sweep', name);
    if (!doc)
      throw new AdvError(ErrorCode.NotFound, `sweep "${printable(name)}" has no status`, {
        hint: 'adv get sweeps lists what exists',
      });
    const values = opts.metric
      ? await lastValues(io, opts, Object.keys(doc.status.points), opts.metric)
      : undefined;
    if (opts.output !== 'text') {
      const out = values
        ? { ...doc, metric: { name: opts.metric, mode, last: Object.fromEntries(values) } }
        : doc;
      return void io.stdout.write(
        opts.output === 'json' ? JSON.stringify(out, null, 2) + '\n' : stringify(out),
      );
    }
    io.stdout.write(
      (await describeText(r, doc, values && { metric: opts.metric!, mode, values })).join('\n') + '\n',
    );
  } finally {
    await r.close();
  }
}

/** The last value of `metric` on each run's curve (across attempts); runs without one are left out. */
async function lastValues(
  io: Io,
  opts: StoreOpts,
  runs: readonly string[],
  metric: string,
): Promise<Map<string, number>> {
  const store: ObjectStore = await openCommandStore(opts, io);
  const out = new Map<string, number>();
  // A few runs at a time: a sweep of thousands of points is not thousands of store calls at once.
  for (let i = 0; i < runs.length; i += 16)
    await Promise.all(
      runs.slice(i, i + 16).map(async (run) => {
        const last = runCurve(await readRunMetrics(store, run), metric).points.at(-1);
        if (last) out.set(run, last.value);
      }),
    );
  return out;
}

interface Ranking {
  metric: string;
  mode: 'min' | 'max';
  values: Map<string, number>;
}

/** Points in expansion order, or best first by the metric (points without a value last, in order). */
export function rankPoints(runs: readonly string[], ranking: Ranking | undefined): string[] {
  if (!ranking) return [...runs];
  const { values, mode } = ranking;
  const sign = mode === 'min' ? 1 : -1;
  const index = new Map(runs.map((r, i) => [r, i]));
  return [...runs].sort((a, b) => {
    const [va, vb] = [values.get(a), values.get(b)];
    if (va === undefined || vb === undefined)
      return va === vb ? index.get(a)! - index.get(b)! : va === undefined ? 1 : -1;
    return sign * (va - vb) || index.get(a)! - index.get(b)!;
  });
}

async function describeText(
  r: StatusReader,
  doc: SweepStatusDoc,
  ranking: Ranking | undefined,
): Promise<string[]> {
  const st = doc.status;
  const name = doc.metadata.name;
  const out = ownerHeader(name, st);
  const max = doc.appliedSpec?.maxConcurrent;
  out.push(safe`Concurrency:  ${max === undefined ? 'no limit' : `at most ${max} unfinished points`}`);
  out.push(
    safe`Points:       ${
      Object.entries(st.counts ?? {})
        .map(([p, n]) => `${n} ${p}`)
        .join(', ') || 'none'
    }`,
  );
  out.push(...conditionsSection(st.conditions));
  out.push(
    '',
    ranking
      ? safe`Points (by ${ranking.metric}, ${ranking.mode === 'min' ? 'lowest' : 'highest'} first):`
      : 'Points:',
  );
  const runs = rankPoints(Object.keys(st.points), ranking);
  const params = [...new Set(runs.flatMap((run) => Object.keys(st.points[run]!.params)))];
  const rows = runs.map((run) => {
    const p = st.points[run]!;
    const v = ranking?.values.get(run);
    return [
      ...params.map((k) => (p.params[k] === undefined ? '-' : String(p.params[k]))),
      run,
      p.phase,
      p.attempts !== undefined ? String(p.attempts) : '-',
      ...(ranking ? [v === undefined ? '-' : String(v)] : []),
      [p.reason, p.message].filter(Boolean).join(': '),
    ];
  });
  const headers = [
    ...params.map((k) => k.toUpperCase()),
    'RUN',
    'PHASE',
    'ATTEMPTS',
    ...(ranking ? [ranking.metric.toUpperCase()] : []),
    'REASON',
  ];
  out.push(rows.length ? renderTable(headers, rows).trimEnd() : '  (none)');
  out.push(...(await history(r, 'sweep', name)));
  return out;
}
