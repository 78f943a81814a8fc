/**
 * How fast `adv exec` ships metric events, against the log path, in the same run. The bundled
 * adv exec (file store) runs a workload that writes N events of the metric line format as fast as
 * it can, in writes of 10,000 lines: once appended to `$ADV_METRICS_FILE` (shipped as metric parts),
 * once to its stdout (shipped as log parts, the baseline). The time is adv exec's whole run: it
 * exits after its last part is in the store. Then the store is read back and every event counted,
 * so a run that lost any fails the bench. Medians of BENCH_REPS (default 3); N is
 * BENCH_METRIC_EVENTS (default 1,000,000).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { logsPrefix } from '../runtime/checkpoint.js';
import { readAttemptMetrics } from '../runtime/metrics.js';
import { FileStore } from '../runtime/store/file.js';
import { median, table } from './lib.js';

const BUNDLE = fileURLToPath(new URL('../dist/adv-exec.mjs', import.meta.url));
const EVENTS = Number(process.env.BENCH_METRIC_EVENTS ?? 1_000_000);
const REPS = Number(process.env.BENCH_REPS ?? 3);
const tmp = mkdtempSync(join(tmpdir(), 'adv-bench-metrics-'));

/** The workload: N metric lines in writes of 10,000, to the metrics file or to stdout. */
const WORKLOAD = `
const fs = require('node:fs');
const [n, where] = [Number(process.argv[1]), process.argv[2]];
const fd = where === 'metrics' ? fs.openSync(process.env.ADV_METRICS_FILE, 'a') : 1;
const t = Date.now() / 1000;
for (let i = 0; i < n; i += 10000) {
  let chunk = '';
  for (let s = i; s < Math.min(n, i + 10000); s++)
    chunk += '{"step":' + s + ',"time":' + t + ',"metrics":{"loss":' + 1 / (s + 1) + ',"lr":0.001}}\\n';
  fs.writeSync(fd, chunk);
}
`;

/** One adv exec run; its wall time (ms), and the events the store holds after it. */
async function once(where: 'metrics' | 'logs', rep: number): Promise<{ ms: number; events: number }> {
  const root = join(tmp, `${where}-${rep}`);
  const t0 = performance.now();
  execFileSync(
    process.execPath,
    [
      BUNDLE,
      ...['--store', `file://${root}`, '--run', 'bench', '--job-dir', join(root, 'job')],
      ...['--', process.execPath, '-e', WORKLOAD, String(EVENTS), where],
    ],
    // The log path's output goes to the store; the terminal gets none of it.
    { stdio: ['ignore', 'ignore', 'inherit'], env: { PATH: process.env.PATH } },
  );
  const ms = performance.now() - t0;
  const store = new FileStore(root);
  let events = 0;
  if (where === 'metrics') events = (await readAttemptMetrics(store, 'bench', 1)).length;
  else
    for await (const o of store.list(logsPrefix('bench', 1, 0)))
      for (const b of Buffer.from((await store.get(o.key))!)) if (b === 0x0a) events++;
  if (events !== EVENTS) throw new Error(`${where}: ${events} events in the store, not ${EVENTS}`);
  return { ms, events };
}

const rows: (string | number)[][] = [];
let base = 0;
for (const [what, where] of [
  ['stdout, shipped as log parts (baseline)', 'logs'],
  ['$ADV_METRICS_FILE, shipped as metric parts', 'metrics'],
] as const) {
  const runs: number[] = [];
  for (let r = 0; r < REPS; r++) runs.push((await once(where, r)).ms);
  const med = median(runs);
  const perSec = EVENTS / (med / 1000);
  if (!base) base = perSec;
  rows.push([what, EVENTS, Math.round(med), Math.round(perSec), (perSec / base).toFixed(2) + '×']);
}
rmSync(tmp, { recursive: true, force: true });
console.log(
  table(
    ['adv exec, workload writes N events', 'N', `ms (median of ${REPS})`, 'events/s', 'vs log path'],
    rows,
  ),
);
