import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  metricAt,
  metricNames,
  metricsPrefix,
  parseMetricLines,
  readRunMetrics,
  runCurve,
} from './metrics.js';
import { openStore } from './store/index.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('metric lines', () => {
  it('keeps what parses and skips the rest', () => {
    const text = [
      '{"step": 1, "time": 10.5, "metrics": {"loss": 2.5, "note": "x", "nan": null}}',
      '{"step": 2, "metrics": {"loss": 2.0}}',
      'not json',
      '{"step": -1, "metrics": {"loss": 1}}',
      '{"step": 1.5, "metrics": {"loss": 1}}',
      '{"step": 3, "metrics": {}}',
      '{"step": 4, "metrics": {"loss": 1.5}', // cut off mid-line
      '',
    ].join('\n');
    expect(parseMetricLines(text)).toEqual([
      { step: 1, time: 10.5, metrics: { loss: 2.5 } },
      { step: 2, metrics: { loss: 2 } },
    ]);
  });
});

describe('a run across attempts', () => {
  it('reads the parts of every attempt and makes one curve, the redone steps kept aside', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'adv-metrics-'));
    dirs.push(dir);
    const store = await openStore(`file://${dir}`);
    const line = (step: number, loss: number) => JSON.stringify({ step, metrics: { loss } }) + '\n';
    await store.put(`${metricsPrefix('r', 1)}part-000000`, line(10, 5) + line(20, 4));
    await store.put(`${metricsPrefix('r', 1)}part-000001`, line(30, 3));
    await store.put(
      `${metricsPrefix('r', 2)}part-000000`,
      line(30, 3.1) + line(40, 2) + '{"step":50,"metrics":{"acc":0.9}}\n',
    );
    const attempts = await readRunMetrics(store, 'r');
    expect(attempts.map((a) => [a.attempt, a.events.length])).toEqual([
      [1, 3],
      [2, 3],
    ]);
    expect(metricNames(attempts)).toEqual(['acc', 'loss']);
    const { points, redone } = runCurve(attempts, 'loss');
    expect(points.map((p) => [p.step, p.value, p.attempt])).toEqual([
      [10, 5, 1],
      [20, 4, 1],
      [30, 3.1, 2],
      [40, 2, 2],
    ]);
    expect(redone.map((p) => [p.step, p.attempt])).toEqual([[30, 1]]);
    expect(metricAt(points, 35)).toBe(3.1);
    expect(metricAt(points, 5)).toBeUndefined();
  });
});
