import { describe, expect, it } from 'vitest';
import { AttemptPhase, Phase, type Attempt, type RunStatusDoc } from '../status/types.js';
import { attemptUsage, runUsage, usageReport } from './usage.js';

const T0 = Date.parse('2026-11-01T00:00:00Z');
const at = (h: number) => new Date(T0 + h * 3_600_000).toISOString();

const attempt = (fromH: number, toH: number | undefined, price?: Attempt['price']): Attempt => ({
  n: 1,
  backend: 'b',
  jobName: 'j',
  phase: AttemptPhase.Succeeded,
  specCommit: 'c',
  submittedAt: at(fromH - 1),
  startedAt: at(fromH),
  ...(toH !== undefined ? { finishedAt: at(toH) } : {}),
  ...(price ? { price } : {}),
});

const doc = (
  name: string,
  attempts: Attempt[],
  gpus: number,
  labels?: Record<string, string>,
): RunStatusDoc => ({
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'RunStatus',
  metadata: { name, ...(labels ? { labels } : {}) },
  appliedSpec: { command: ['x'], resources: { gpus, nodes: 2 } },
  status: { phase: Phase.Succeeded, conditions: [], attempts },
});

describe('usage', () => {
  it('bills from submission or start as the price says, and counts GPU-hours from the start', () => {
    const p = { perHour: 3, from: 'submitted' as const };
    expect(attemptUsage(attempt(0, 2, p), 4, {}, T0)).toEqual({
      cost: 9,
      priced: 1,
      gpuHours: 8,
      hours: 2,
      attempts: 1,
    });
    expect(attemptUsage(attempt(0, 2, { ...p, from: 'started' }), 4, {}, T0).cost).toBe(6);
    // A live attempt runs to now; one without a price costs nothing and says so (priced 0).
    expect(attemptUsage(attempt(0, undefined), 1, {}, T0 + 3 * 3_600_000)).toMatchObject({
      cost: 0,
      priced: 0,
      hours: 3,
    });
  });

  it('clips attempts to the period, and leaves out those outside it', () => {
    const a = attempt(0, 10, { perHour: 1, from: 'started' });
    expect(
      attemptUsage(a, 1, { sinceMs: T0 + 4 * 3_600_000, untilMs: T0 + 6 * 3_600_000 }, T0),
    ).toMatchObject({ cost: 2, hours: 2 });
    expect(attemptUsage(a, 1, { sinceMs: T0 + 20 * 3_600_000 }, T0)).toMatchObject({ attempts: 0, hours: 0 });
  });

  it('reports per run (most expensive first) and per label value, with the total', () => {
    const price = { perHour: 2, from: 'started' as const };
    const r = usageReport(
      [
        doc('a', [attempt(0, 1, price)], 1, { team: 'nlp' }),
        doc('b', [attempt(0, 3, price)], 0, { team: 'nlp' }),
        doc('c', [attempt(0, 2)], 4),
        doc('never', [], 1),
      ],
      { by: 'team' },
      T0,
    );
    expect(r.runs.map((x) => [x.name, x.cost, x.gpuHours])).toEqual([
      ['b', 6, 0],
      ['a', 2, 2],
      ['c', 0, 16],
    ]);
    expect(r.groups!.map((x) => [x.name, x.cost, x.gpuHours])).toEqual([
      ['nlp', 8, 2],
      ['(none)', 0, 16],
    ]);
    expect(r.total).toEqual({ cost: 8, priced: 2, gpuHours: 18, hours: 6, attempts: 3 });
    expect(runUsage(doc('x', [], 1), {}, T0).attempts).toBe(0);
  });
});
