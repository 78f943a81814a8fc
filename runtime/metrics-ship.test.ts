/**
 * Following the workload's metrics file: complete lines only, from where the last read ended, in
 * bounded reads; shipped as parts that readers of metrics.ts read back; lines with a secret value
 * dropped; and adv exec giving the workload the file and shipping it at the end of the attempt.
 */
import { existsSync } from 'node:fs';
import { appendFile, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../test/helpers/wait.js';
import { advExec } from './exec.js';
import { metricsPrefix, readAttemptMetrics } from './metrics.js';
import { LineTail, MetricsShipper } from './metrics-ship.js';
import { ExitReason, type ExitRecord } from './records.js';
import { FileStore } from './store/file.js';
import { Worker } from './worker.js';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-metrics-ship-'));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

let n = 0;
const fresh = () => join(tmp, `case-${n++}`);
const line = (step: number, loss = step / 10) => `${JSON.stringify({ step, metrics: { loss } })}\n`;
const RECORD: ExitRecord = { exitCode: 0, reason: ExitReason.Completed, startedAt: '', finishedAt: '' };
const text = (b: Buffer | undefined) => b?.toString('utf8');

async function partsOf(store: FileStore, run: string, attempt: number): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of store.list(metricsPrefix(run, attempt))) keys.push(o.key);
  return keys.sort();
}

describe('LineTail', () => {
  it('returns complete lines only; a partial last line waits for its newline, or for the end', async () => {
    const file = fresh();
    const logs: string[] = [];
    const tail = new LineTail(file, { log: (l) => logs.push(l) });
    expect(await tail.next()).toBeUndefined(); // no file yet
    await writeFile(file, line(1) + '{"step":2,"metr');
    expect(text(await tail.next())).toBe(line(1));
    expect(await tail.next()).toBeUndefined();
    await appendFile(file, 'ics":{"loss":0.2}}\n{"step":3');
    expect(text(await tail.next())).toBe('{"step":2,"metrics":{"loss":0.2}}\n');
    expect(await tail.next()).toBeUndefined();
    // The writer ended: its last line is shipped as it is (readers skip what does not parse).
    expect(text(await tail.next(true))).toBe('{"step":3');
    expect(await tail.next(true)).toBeUndefined();
    expect(logs).toEqual([]);
  });

  it('reads from where the last read ended, never from the start again', async () => {
    const file = fresh();
    const tail = new LineTail(file, { log: () => {} });
    await writeFile(file, line(1) + line(2));
    expect(text(await tail.next())).toBe(line(1) + line(2));
    expect(tail.position).toBe(Buffer.byteLength(line(1) + line(2)));
    await appendFile(file, line(3));
    expect(await tail.pending()).toBe(Buffer.byteLength(line(3)));
    expect(text(await tail.next())).toBe(line(3));
    expect(await tail.pending()).toBe(0);
  });

  it('reads a large file in bounded chunks of whole lines, every line once and in order', async () => {
    const file = fresh();
    const lines = Array.from({ length: 20_000 }, (_, i) => line(i));
    await writeFile(file, lines.join(''));
    const tail = new LineTail(file, { maxReadBytes: 16 * 1024, log: () => {} });
    const chunks: Buffer[] = [];
    for (let c = await tail.next(); c; c = await tail.next()) chunks.push(c);
    expect(chunks.length).toBeGreaterThan(20);
    for (const c of chunks) {
      expect(c.length).toBeLessThanOrEqual(16 * 1024);
      expect(c.at(-1)).toBe(0x0a);
    }
    expect(Buffer.concat(chunks).toString('utf8')).toBe(lines.join(''));
  });

  it('skips a line longer than one read, says so, and goes on with the next', async () => {
    const file = fresh();
    const logs: string[] = [];
    const tail = new LineTail(file, { maxReadBytes: 1024, log: (l) => logs.push(l) });
    await writeFile(file, line(1) + `{"step":2,"metrics":{"x":1},"pad":"${'p'.repeat(5000)}"}\n` + line(3));
    const got: string[] = [];
    for (let c = await tail.next(); c; c = await tail.next()) got.push(c.toString());
    expect(got.join('')).toBe(line(1) + line(3));
    expect(logs.join('\n')).toMatch(/longer than 1024 bytes: skipped/);
  });

  it('says that rotation and truncation are not supported, and ships the new content from its start', async () => {
    const file = fresh();
    const logs: string[] = [];
    const tail = new LineTail(file, { log: (l) => logs.push(l) });
    await writeFile(file, line(1) + line(2) + line(3));
    await tail.next();
    await writeFile(file, line(4)); // truncated, shorter than what was read
    expect(text(await tail.next())).toBe(line(4));
    expect(logs.join('\n')).toMatch(
      /was truncated while the workload ran: rotating or truncating .* not supported/,
    );
    await writeFile(`${file}.new`, line(5) + line(6));
    await rename(`${file}.new`, file); // a new file in its place (a rotation)
    expect(text(await tail.next())).toBe(line(5) + line(6));
    expect(logs.join('\n')).toMatch(/was replaced while the workload ran/);
  });
});

describe('MetricsShipper', () => {
  it('ships complete lines as parts in order, drops lines that hold a secret value, and readers get the events', async () => {
    const file = fresh();
    const store = new FileStore(fresh());
    const logs: string[] = [];
    const s = new MetricsShipper({
      store,
      run: 'r',
      attempt: 2,
      file,
      secrets: ['hunter2-token'],
      log: (l) => logs.push(l),
    });
    await writeFile(file, line(1) + line(2));
    await s.flush();
    await appendFile(
      file,
      '{"step":3,"metrics":{"hunter2-token":1}}\n' + line(4) + '{"step":5,"metrics":{"loss":',
    );
    await s.flush();
    await appendFile(file, '0.5}}');
    await s.flush(true);
    expect(await partsOf(store, 'r', 2)).toEqual(
      ['part-000000', 'part-000001', 'part-000002'].map((p) => metricsPrefix('r', 2) + p),
    );
    const events = await readAttemptMetrics(store, 'r', 2);
    expect(events.map((e) => e.step)).toEqual([1, 2, 4, 5]);
    expect(s.lines).toBe(4);
    const all = (await partsOf(store, 'r', 2)).map((k) => store.get(k));
    expect(Buffer.concat((await Promise.all(all)).map((b) => Buffer.from(b!))).toString()).not.toContain(
      'hunter2',
    );
    expect(logs.join('\n')).toMatch(/1 metric line\(s\) held a secret value and were not shipped/);
  });

  it('poll ships once the pending bytes reach the threshold, and not before', async () => {
    const file = fresh();
    const store = new FileStore(fresh());
    const s = new MetricsShipper({ store, run: 'r', attempt: 1, file, partBytes: 1000, log: () => {} });
    await writeFile(file, line(1));
    await s.poll();
    expect(await partsOf(store, 'r', 1)).toEqual([]);
    await appendFile(file, Array.from({ length: 60 }, (_, i) => line(i + 2)).join(''));
    await s.poll();
    expect((await readAttemptMetrics(store, 'r', 1)).length).toBe(61);
  });
});

describe('the worker and adv exec ship the metrics file', () => {
  it('process 0 ships on its timer and at finish (the last partial line too); process 1 ships nothing', async () => {
    const dir = fresh();
    await mkdir(dir, { recursive: true });
    const store = new FileStore(join(dir, 'store'));
    const file0 = join(dir, 'm0.jsonl');
    const file1 = join(dir, 'm1.jsonl');
    await writeFile(file0, '');
    await writeFile(file1, line(7));
    const opts = { store, run: 'w', attempt: 1, log: () => {}, heartbeatSec: 3600, logFlushMs: 50 };
    const w0 = new Worker({ ...opts, ckptDir: join(dir, 'c0'), metricsFile: file0 });
    const w1 = new Worker({
      ...opts,
      ckptDir: join(dir, 'c1'),
      metricsFile: file1,
      process: 1,
      processes: 2,
    });
    await w1.start();
    await w1.finish(RECORD, { workloadExitedOnItsOwn: true });
    expect(await partsOf(store, 'w', 1)).toEqual([]);
    await w0.start();
    await appendFile(file0, line(1));
    // Shipped while it runs, by the timer: the part appears without a finish.
    await waitFor(async () => (await partsOf(store, 'w', 1)).length > 0, {
      what: 'a metrics part shipped by the timer',
      timeoutMs: 100_000,
    });
    await appendFile(file0, line(2) + '{"step":3,"metrics":{"loss":0.3}}');
    await w0.finish(RECORD, { workloadExitedOnItsOwn: true });
    expect((await readAttemptMetrics(store, 'w', 1)).map((e) => e.step)).toEqual([1, 2, 3]);
  }, 120_000);

  it('ships a part once the threshold is crossed, long before the log timer', async () => {
    const dir = fresh();
    await mkdir(dir, { recursive: true });
    const store = new FileStore(join(dir, 'store'));
    const file = join(dir, 'm.jsonl');
    await writeFile(file, '');
    const w = new Worker({
      store,
      run: 't',
      attempt: 1,
      ckptDir: join(dir, 'ckpt'),
      log: () => {},
      heartbeatSec: 3600,
      logFlushMs: 3_600_000,
      logPartBytes: 1000,
      metricsPollMs: 20,
      metricsFile: file,
    });
    await w.start();
    await appendFile(file, Array.from({ length: 40 }, (_, i) => line(i)).join(''));
    await waitFor(async () => (await partsOf(store, 't', 1)).length > 0, {
      what: 'a metrics part shipped past the threshold',
      timeoutMs: 100_000,
    });
    expect((await readAttemptMetrics(store, 't', 1)).length).toBe(40);
    await w.finish(RECORD, { workloadExitedOnItsOwn: true });
  }, 120_000);

  it('adv exec sets ADV_METRICS_FILE (in the job dir, or a temporary dir it removes) and ships it, less the lines holding a secret value', async () => {
    const dir = fresh();
    await mkdir(dir, { recursive: true });
    const store = new FileStore(join(dir, 'store'));
    const jobDir = join(dir, 'job');
    const write = `printf '%s\\n' '{"step":1,"metrics":{"loss":1}}' '{"step":2,"metrics":{"loss":0.5}}' >> "$ADV_METRICS_FILE"`;
    // A line holding the value of a secret the backend delivered (named in ADV_REDACT) is not shipped.
    const leak = `echo "{\\"step\\":3,\\"metrics\\":{\\"$API_TOKEN\\":1}}" >> "$ADV_METRICS_FILE"`;
    const { record } = await advExec({
      run: 'e',
      attempt: 1,
      argv: ['sh', '-c', `${write}; ${leak}`],
      jobDir,
      store,
      env: { ADV_REDACT: 'API_TOKEN', API_TOKEN: 'tok-5ecret-value' },
      log: () => {},
    });
    expect(record.reason).toBe('Completed');
    expect((await readAttemptMetrics(store, 'e', 1)).map((e) => e.metrics.loss)).toEqual([1, 0.5]);
    // The workload did write it.
    expect(await readFile(join(jobDir, 'metrics.jsonl'), 'utf8')).toContain(
      '{"step":3,"metrics":{"tok-5ecret-value":1}}',
    );

    // No job dir: a temporary dir of adv exec's own, gone once it has ended.
    const seen = join(dir, 'seen');
    await advExec({
      run: 'e',
      attempt: 2,
      argv: ['sh', '-c', `${write}; echo "$ADV_METRICS_FILE" > "${seen}"`],
      store,
      cwd: dir,
      log: () => {},
    });
    expect((await readAttemptMetrics(store, 'e', 2)).length).toBe(2);
    const path = (await readFile(seen, 'utf8')).trim();
    expect(path).toMatch(/^\/.*adv-metrics-.*\/metrics\.jsonl$/);
    expect(existsSync(join(path, '..'))).toBe(false);
  }, 120_000);
});
