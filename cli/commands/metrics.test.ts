/**
 * `adv metrics`: the run's curve across attempts as a table, CSV and JSON, read from a file store
 * seeded with the parts adv exec ships; `--follow` until the run ends.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../test/helpers/wait.js';
import { captureIo } from '../../test/helpers/io.js';
import { attemptPrefix } from '../../runtime/checkpoint.js';
import { metricsPrefix, type AttemptMetrics } from '../../runtime/metrics.js';
import { FileStore } from '../../runtime/store/file.js';
import { runCli } from '../program.js';
import { describeMetrics, formatMetric, metricRows, metricsCsv, metricsSection } from './metrics.js';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-metrics-cli-'));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

const ev = (step: number, metrics: Record<string, number>) => ({ step, metrics });
/** Attempt 1 logged steps 10..50; attempt 2 resumed from the checkpoint at 30 and went on to 60. */
const RESUMED: AttemptMetrics[] = [
  {
    attempt: 1,
    events: [10, 20, 30, 40, 50].map((s) =>
      ev(s, { loss: 1 / s, ...(s % 20 === 0 ? { acc: s / 100 } : {}) }),
    ),
  },
  { attempt: 2, events: [40, 50, 60].map((s) => ev(s, { loss: 2 / s })) },
];

describe('metricRows', () => {
  it('one row per step of the curve across attempts; the redone points only when asked', () => {
    const rows = metricRows(RESUMED, ['loss']);
    expect(rows.map((r) => [r.step, r.attempt])).toEqual([
      [10, 1],
      [20, 1],
      [30, 1],
      [40, 2],
      [50, 2],
      [60, 2],
    ]);
    expect(rows.find((r) => r.step === 40)!.values).toEqual([2 / 40]);
    const all = metricRows(RESUMED, ['loss'], true);
    expect(all.filter((r) => r.redone).map((r) => [r.step, r.attempt])).toEqual([
      [40, 1],
      [50, 1],
    ]);
  });

  it('a metric another attempt did not log keeps its own curve: acc at 40 stays attempt 1’s', () => {
    const rows = metricRows(RESUMED, ['acc', 'loss']);
    expect(rows.filter((r) => r.step === 40).map((r) => [r.attempt, r.values])).toEqual([
      [1, [0.4, undefined]],
      [2, [undefined, 2 / 40]],
    ]);
  });

  it('CSV has full precision, empty fields for absent values, quoted names', () => {
    const csv = metricsCsv(
      ['loss', 'a,b'],
      [{ step: 1, attempt: 2, redone: false, values: [1 / 3, undefined] }],
      false,
    );
    expect(csv).toBe(`step,attempt,loss,"a,b"\n1,2,${1 / 3},\n`);
    expect(formatMetric(1 / 3)).toBe('0.333333');
    expect(formatMetric(12)).toBe('12');
  });
});

describe('adv metrics', () => {
  async function seeded(name: string): Promise<{ store: FileStore; url: string }> {
    const root = join(tmp, name);
    const store = new FileStore(root);
    for (const a of RESUMED)
      await store.put(
        `${metricsPrefix('r', a.attempt)}part-000000`,
        a.events.map((e) => JSON.stringify(e)).join('\n') + '\n',
      );
    return { store, url: `file://${root}` };
  }
  async function adv(args: string[]) {
    const io = captureIo({}, tmp);
    const code = await runCli(args, io);
    return { code, out: io.out(), err: io.err() };
  }

  it('prints the curve as a table, CSV and JSON; --attempt and --metric narrow it', async () => {
    const { url } = await seeded('print');
    const table = await adv(['metrics', 'r', '--store', url]);
    expect(table.code, table.err).toBe(0);
    const lines = table.out.trim().split('\n');
    expect(lines[0]).toMatch(/^STEP\s+ATTEMPT\s+ACC\s+LOSS$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 2).join(' '))).toEqual([
      '10 1',
      '20 1',
      '30 1',
      '40 1', // acc, from attempt 1 (attempt 2 logged no acc)
      '40 2',
      '50 2',
      '60 2',
    ]);
    const csv = await adv([
      'metrics',
      'r',
      '--store',
      url,
      '-o',
      'csv',
      '--metric',
      'loss',
      '--all-attempts',
    ]);
    expect(csv.out.split('\n')[0]).toBe('step,attempt,loss,redone');
    expect(csv.out).toContain(`40,1,${1 / 40},true`);
    expect(csv.out).toContain(`40,2,${2 / 40},false`);
    const json = JSON.parse(
      (await adv(['metrics', 'r', '--store', url, '-o', 'json', '--metric', 'acc'])).out,
    ) as {
      attempts: AttemptMetrics[];
    };
    expect(json.attempts).toEqual([{ attempt: 1, events: [ev(20, { acc: 0.2 }), ev(40, { acc: 0.4 })] }]);
    const two = await adv(['metrics', 'r', '--store', url, '--attempt', '2', '-o', 'csv']);
    expect(two.out.trim().split('\n').slice(1)).toEqual([
      `40,2,${2 / 40}`,
      `50,2,${2 / 50}`,
      `60,2,${2 / 60}`,
    ]);
  });

  it('adv describe run gets the last value of each metric on the curve; nothing without metrics or a store', async () => {
    const { store, url } = await seeded('describe');
    const lines = await metricsSection(store, 'r');
    expect(lines[1]).toBe('Metrics (last value; adv metrics r shows them all):');
    expect(lines[2]!.split('\n').map((l) => l.split(/\s+/))).toEqual([
      ['METRIC', 'LAST', 'STEP', 'ATTEMPT'],
      ['acc', '0.4', '40', '1'],
      ['loss', '0.0333333', '60', '2'],
    ]);
    expect(await metricsSection(store, 'other')).toEqual([]);
    expect(await describeMetrics({ store: url }, captureIo({}, tmp), 'r')).toEqual(lines);
    // No --store, no $ADV_STORE, no specs repo here: the rest of describe goes on without it.
    expect(await describeMetrics({}, captureIo({}, tmp), 'r')).toEqual([]);
  });

  it('says what is wrong: no metrics, an unknown metric, an attempt without metrics', async () => {
    const { url } = await seeded('errors');
    const none = await adv(['metrics', 'nothing', '--store', url]);
    expect(none.code).toBe(3);
    expect(none.err).toMatch(/no metrics for run nothing in file:.*\n\s+fix: .*\$ADV_METRICS_FILE/);
    const unknown = await adv(['metrics', 'r', '--store', url, '--metric', 'Loss']);
    expect(unknown.code).toBe(3);
    expect(unknown.err).toMatch(/run r has no metric "Loss" \(it logged: acc, loss\)/);
    const attempt = await adv(['metrics', 'r', '--store', url, '--attempt', '3']);
    expect(attempt.err).toMatch(/no metrics from attempt 3 \(attempts with metrics: 1, 2\)/);
  });

  it('--follow prints points as their parts arrive, past a preempted attempt, until the newest attempt ends', async () => {
    const { store, url } = await seeded('follow');
    await store.put(`${attemptPrefix('r', 1)}exit.json`, JSON.stringify({ reason: 'Preempted' }));
    const io = captureIo({}, tmp);
    let done = false;
    const running = runCli(
      ['metrics', 'r', '--store', url, '-f', '--interval', '20', '-o', 'csv'],
      io,
    ).finally(() => (done = true));
    const until = (what: string, ok: () => boolean) =>
      waitFor(ok, {
        what,
        timeoutMs: 100_000,
        everyMs: 20,
        giveUpIf: () => done && 'adv metrics -f ended',
        detail: () => io.out() + io.err(),
      });
    await until('attempt 2’s first part', () => io.out().includes(`60,2,`));
    await store.put(`${metricsPrefix('r', 2)}part-000001`, JSON.stringify(ev(70, { loss: 0.7 })) + '\n');
    await until('the new point', () => io.out().includes('70,2,,0.7'));
    expect(done).toBe(false); // attempt 2 has not ended
    await store.put(`${metricsPrefix('r', 2)}part-000002`, JSON.stringify(ev(80, { loss: 0.8 })) + '\n');
    await store.put(`${attemptPrefix('r', 2)}exit.json`, JSON.stringify({ reason: 'Completed' }));
    expect(await running).toBe(0);
    // The part written just before the exit record is printed too, and every point once.
    expect(io.out()).toContain('80,2,,0.8');
    expect(io.out().match(/^60,2,/gm)).toHaveLength(1);
    expect(io.out().match(/^step,attempt,/gm)).toHaveLength(1); // one header, not one per part
    // -o json follows as JSON lines: one event each, with its attempt.
    const json = captureIo({}, tmp);
    expect(await runCli(['metrics', 'r', '--store', url, '-f', '--interval', '20', '-o', 'json'], json)).toBe(
      0,
    );
    const events = json
      .out()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { attempt: number; step: number });
    expect(events.map((e) => `${e.attempt}/${e.step}`)).toEqual([
      ...[10, 20, 30, 40, 50].map((s) => `1/${s}`),
      ...[40, 50, 60, 70, 80].map((s) => `2/${s}`),
    ]);
  }, 120_000);
});
