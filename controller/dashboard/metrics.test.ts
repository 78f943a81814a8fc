import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { metricsPrefix, type AttemptMetrics } from '../../runtime/metrics.js';
import { openStore } from '../../runtime/store/index.js';
import type { RunStatusDoc } from '../status/types.js';
import { compareData, downsample, resumeMarks, runMetricsData, runSeries } from './metrics.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A run's status document with just what the plots read: phase and each attempt's restored step. */
function runDoc(name: string, phase: string, startSteps: (number | undefined)[]): RunStatusDoc {
  return {
    metadata: { name },
    status: {
      phase,
      conditions: [],
      attempts: startSteps.map((startStep, i) => ({
        n: i + 1,
        ...(startStep === undefined ? {} : { startStep }),
      })),
    },
  } as unknown as RunStatusDoc;
}

const events = (steps: number[], loss: (s: number) => number) =>
  steps.map((step) => ({ step, metrics: { loss: loss(step) } }));
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('downsample', () => {
  it('keeps a series that fits as it is', () => {
    const pts = range(1, 10).map((s) => ({ step: s, value: s }));
    expect(downsample(pts, 10)).toEqual(pts);
  });

  it('keeps the first, the last, and each bucket’s min and max in step order: a spike survives', () => {
    const pts = range(0, 9999).map((s) => ({ step: s, value: s === 5003 ? 1000 : s === 7001 ? -1000 : 1 }));
    const out = downsample(pts, 200);
    expect(out.length).toBeLessThanOrEqual(200);
    expect(out.length).toBeGreaterThan(100);
    expect(out[0]).toEqual(pts[0]);
    expect(out.at(-1)).toEqual(pts.at(-1));
    expect(out.map((p) => p.value)).toContain(1000);
    expect(out.map((p) => p.value)).toContain(-1000);
    const steps = out.map((p) => p.step);
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    expect(new Set(steps).size).toBe(steps.length);
  });

  it('keeps the envelope of a noisy line', () => {
    const pts = range(0, 4999).map((s) => ({ step: s, value: Math.sin(s) }));
    const out = downsample(pts, 500);
    expect(Math.max(...out.map((p) => p.value))).toBe(Math.max(...pts.map((p) => p.value)));
    expect(Math.min(...out.map((p) => p.value))).toBe(Math.min(...pts.map((p) => p.value)));
  });
});

describe('a run’s plot data', () => {
  const attempts: AttemptMetrics[] = [
    { attempt: 1, events: events(range(1, 12), (s) => 10 - s / 2) },
    { attempt: 2, events: events(range(11, 20), (s) => 9.9 - s / 2) },
  ];

  it('one curve across attempts, the redone points aside, the resume at the restored step', () => {
    const s = runSeries(attempts, runDoc('r', 'Succeeded', [undefined, 10]), { points: 1000 }).loss!;
    expect(s.curve.steps).toEqual(range(1, 20));
    expect(s.curve.attempts).toEqual([...range(1, 10).map(() => 1), ...range(11, 20).map(() => 2)]);
    expect(s.redone.steps).toEqual([11, 12]);
    expect(s.redone.attempts).toEqual([1, 1]);
    expect(s.resumes).toEqual([
      { attempt: 2, step: 10, restored: true, label: 'attempt 2 resumed from step 10' },
    ]);
  });

  it('without the restored step in status, marks where the attempt took over', () => {
    const points = [
      { step: 1, value: 1, attempt: 1 },
      { step: 5, value: 1, attempt: 3 },
    ];
    expect(resumeMarks(points, undefined)).toEqual([
      { attempt: 3, step: 5, restored: false, label: 'attempt 3 took over at step 5' },
    ]);
  });

  it('reads every attempt’s parts from the store, and says whether the run has ended', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'adv-dash-metrics-'));
    dirs.push(dir);
    const store = await openStore(`file://${dir}`);
    const lines = (steps: number[], extra = {}) =>
      steps.map((step) => JSON.stringify({ step, metrics: { loss: 1 / step, ...extra } }) + '\n').join('');
    await store.put(`${metricsPrefix('r', 1)}part-000000`, lines(range(1, 6)));
    await store.put(`${metricsPrefix('r', 1)}part-000001`, lines(range(7, 8), { lr: 0.1 }));
    await store.put(`${metricsPrefix('r', 2)}part-000000`, lines(range(6, 30)));
    const live = await runMetricsData(store, runDoc('r', 'Running', [undefined, 5]), { points: 16 });
    expect(live.done).toBe(false);
    expect(live.metrics).toEqual(['loss', 'lr']);
    expect(live.series.loss!.curve.total).toBe(30);
    expect(live.series.loss!.curve.steps.length).toBeLessThanOrEqual(16);
    expect(live.series.loss!.redone.steps).toEqual([6, 7, 8]);
    expect(live.series.lr!.curve.steps).toEqual([7, 8]);
    const one = await runMetricsData(store, runDoc('r', 'Succeeded', [undefined, 5]), { metric: 'lr' });
    expect(one.done).toBe(true);
    expect(Object.keys(one.series)).toEqual(['lr']);

    await store.put(`${metricsPrefix('s', 1)}part-000000`, lines(range(1, 3)));
    const cmp = await compareData(store, [
      { name: 'r', doc: runDoc('r', 'Succeeded', []) },
      { name: 's', doc: runDoc('s', 'Running', []) },
      { name: 'gone', doc: undefined },
    ]);
    expect(cmp.metric).toBe('loss');
    expect(cmp.metrics).toEqual(['loss', 'lr']);
    expect(cmp.done).toBe(false);
    expect(cmp.runs.map((x) => [x.run, x.series.steps.length, x.missing])).toEqual([
      ['r', 30, undefined],
      ['s', 3, undefined],
      ['gone', 0, 'no such run on the status branch'],
    ]);
    const lr = await compareData(store, [{ name: 's', doc: runDoc('s', 'Running', []) }], { metric: 'lr' });
    expect(lr.runs[0]!.missing).toBe('logged no lr yet');
  });
});
