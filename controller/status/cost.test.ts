import { describe, expect, it } from 'vitest';
import { attemptCost, formatCost, formatMoney, runCost } from './cost.js';
import type { Attempt } from './types.js';

const attempt = (over: Partial<Attempt>): Attempt => ({
  n: 1,
  backend: 'tpu',
  jobName: 'adv-r-1',
  phase: 'Succeeded',
  specCommit: 'c',
  ...over,
});

describe('attempt cost', () => {
  const t = (h: number) => new Date(Date.parse('2026-11-24T00:00:00Z') + h * 3_600_000).toISOString();

  it('is hours billed × the recorded price: from the submit or from the start, to the end', () => {
    const spot = attempt({
      price: { perHour: 4, from: 'submitted' },
      submittedAt: t(0),
      startedAt: t(0.25),
      finishedAt: t(2),
    });
    expect(attemptCost(spot, 0)).toEqual({ amount: 8, hours: 2, perHour: 4 });
    const queued = { ...spot, price: { perHour: 4, from: 'started' as const } };
    expect(attemptCost(queued, 0)?.amount).toBe(7);
    expect(formatCost(attemptCost(spot, 0)!)).toBe('8.00 (2.00 h × 4/h)');
  });

  it('runs to now while the attempt is live; nothing before billing starts or without a price', () => {
    const live = attempt({ price: { perHour: 3, from: 'started' }, startedAt: t(0), phase: 'Running' });
    expect(attemptCost(live, Date.parse(t(0.5)))?.amount).toBe(1.5);
    expect(attemptCost({ ...live, startedAt: undefined }, Date.parse(t(1)))).toBeUndefined();
    expect(attemptCost(attempt({ startedAt: t(0), finishedAt: t(1) }), 0)).toBeUndefined();
  });

  it("sums a run's priced attempts, and says nothing when none is priced", () => {
    const a = attempt({ price: { perHour: 2, from: 'submitted' }, submittedAt: t(0), finishedAt: t(1) });
    const b = attempt({
      n: 2,
      price: { perHour: 1, from: 'submitted' },
      submittedAt: t(1),
      finishedAt: t(4),
    });
    expect(runCost([a, b, attempt({ n: 3 })], 0)).toBe(5);
    expect(runCost([attempt({})], 0)).toBeUndefined();
    expect(formatMoney(0.003)).toBe('0.0030');
    expect(formatMoney(12.345)).toBe('12.35');
  });
});
