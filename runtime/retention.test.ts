import type { Static } from '@sinclair/typebox';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { RetentionSchema } from '../controller/spec/schema.js';
import { listCheckpoints, uploadCheckpoint } from './checkpoint.js';
import { metricsPrefix } from './metrics.js';
import {
  parseKeepBest,
  parseRetention,
  planRetention,
  RetentionKeeper,
  retentionFromEnv,
  type RetentionPolicy,
} from './retention.js';
import { openStore } from './store/index.js';

const curve = (pairs: [number, number][]) => pairs.map(([step, value]) => ({ step, value }));

describe('planRetention', () => {
  it('declares the same policy as the Run schema', () => {
    expectTypeOf<Static<typeof RetentionSchema>>().toEqualTypeOf<RetentionPolicy>();
  });

  it.each([
    { name: 'keepLast keeps the newest N', policy: { keepLast: 2 }, keep: [50, 40], del: [30, 20, 10] },
    {
      name: 'keepEvery keeps multiples besides the newest',
      policy: { keepEvery: 20 },
      keep: [50, 40, 20],
      del: [30, 10],
    },
    { name: 'rules add up', policy: { keepLast: 1, keepEvery: 30 }, keep: [50, 30], del: [40, 20, 10] },
    { name: 'no rule keeps everything', policy: {}, keep: [50, 40, 30, 20, 10], del: [] },
  ])('$name', ({ policy, keep, del }) => {
    const plan = planRetention([10, 20, 30, 40, 50], [], policy);
    expect(plan.keep).toEqual(keep);
    expect(plan.delete).toEqual(del);
  });

  it('never deletes the newest committed step, even with keepEvery alone', () => {
    const plan = planRetention([3, 7], [], { keepEvery: 2 });
    expect(plan.keep).toEqual([7]);
    expect(plan.why.get(7)).toContain('the newest committed');
    expect(plan.delete).toEqual([3]);
  });

  it('keeps a protected step (a live attempt restored it)', () => {
    const plan = planRetention([10, 20, 30], [], { keepLast: 1 }, [10]);
    expect(plan.keep).toEqual([30, 10]);
    expect(plan.why.get(10)).toBe('a live attempt restored it');
  });

  it('keepBest keeps the step with the lowest value at its step (min) and says why', () => {
    // loss logged every 5 steps; checkpoints every 10: the value at a step is the last logged at or before it.
    const loss = curve([
      [0, 5],
      [5, 4],
      [10, 3],
      [15, 1],
      [20, 2],
      [25, 2.5],
      [30, 2.2],
      [35, 2.1],
      [40, 3],
    ]);
    const plan = planRetention([10, 20, 30, 40], loss, {
      keepLast: 1,
      keepBest: { metric: 'loss', mode: 'min' },
    });
    expect(plan.keep).toEqual([40, 20]);
    expect(plan.delete).toEqual([30, 10]);
    expect(plan.why.get(20)).toBe('the best by loss (min: 2)');
    expect(plan.why.get(30)).toBe('not among the newest 1, not among the 1 best by loss');
  });

  it('keepBest max with a count, ties going to the newer step', () => {
    const acc = curve([
      [10, 0.5],
      [20, 0.9],
      [30, 0.9],
      [40, 0.7],
      [50, 0.1],
    ]);
    const plan = planRetention([10, 20, 30, 40, 50], acc, {
      keepBest: { metric: 'acc', mode: 'max', count: 2 },
    });
    expect(plan.keep).toEqual([50, 30, 20]);
    expect(plan.why.get(30)).toMatch(/^best 1 of 2/);
    expect(plan.why.get(20)).toMatch(/^best 2 of 2/);
  });

  it('keepBest keeps a step the metric has not been logged up to: it may be the best', () => {
    const loss = curve([
      [10, 3],
      [20, 2],
    ]);
    const plan = planRetention([10, 20, 30, 40], loss, { keepBest: { metric: 'loss', mode: 'min' } });
    expect(plan.keep).toEqual([40, 30, 20]);
    expect(plan.why.get(30)).toBe('loss not logged up to this step yet');
    expect(plan.delete).toEqual([10]);
  });

  it('keepBest with no metric at all deletes nothing it cannot judge', () => {
    const plan = planRetention([10, 20], [], { keepBest: { metric: 'loss', mode: 'min' } });
    expect(plan.delete).toEqual([]);
  });
});

describe('parseRetention / parseKeepBest', () => {
  it('reads a valid policy', () => {
    expect(parseRetention('{"keepLast":2,"keepBest":{"metric":"loss","mode":"min"}}')).toEqual({
      keepLast: 2,
      keepBest: { metric: 'loss', mode: 'min' },
    });
    expect(parseKeepBest('val/loss:min:3')).toEqual({ metric: 'val/loss', mode: 'min', count: 3 });
  });

  it.each([
    ['[1]', /must be an object/],
    ['{"keepLast":0}', /keepLast must be a whole number/],
    ['{"keepBest":{"metric":"loss","mode":"low"}}', /keepBest.mode is min or max/],
    ['{nope', /not JSON/],
  ])('refuses %s, saying what is wrong', (json, err) => {
    expect(() => parseRetention(json)).toThrow(err);
  });

  it('refuses a keep-best without a mode', () => {
    expect(() => parseKeepBest('loss')).toThrow(/METRIC:min or METRIC:max/);
  });
});

describe('RetentionKeeper (adv exec)', () => {
  it('deletes after a commit what the policy does not keep, and judges again at the end with late metrics', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'adv-keeper-'));
    try {
      const store = await openStore(`file://${join(dir, 'store')}`);
      for (const step of [10, 20, 30, 40]) {
        const src = join(dir, `src-${step}`);
        await mkdir(src);
        await writeFile(join(src, 'w'), String(step));
        await uploadCheckpoint(store, { run: 'r', step, attempt: 1, dir: src });
      }
      const logLoss = (part: number, step: number, loss: number) =>
        store.put(
          `${metricsPrefix('r', 1)}part-00000${part}`,
          JSON.stringify({ step, metrics: { loss } }) + '\n',
        );
      await logLoss(0, 10, 0.5);
      await logLoss(1, 20, 0.1);
      const lines: string[] = [];
      const keeper = new RetentionKeeper({
        store,
        run: 'r',
        policy: { keepBest: { metric: 'loss', mode: 'min' } },
        log: (l) => lines.push(l),
      });
      const steps = async () => (await listCheckpoints(store, 'r')).map((i) => i.step);
      keeper.committed({ step: 40 });
      await keeper.settled();
      // 30 and 40 have no loss yet: kept until they do.
      expect(await steps()).toEqual([40, 30, 20]);
      expect(lines).toEqual(['retention: deleted checkpoint 10 (not among the 1 best by loss)']);
      await logLoss(2, 30, 0.3);
      await logLoss(3, 40, 0.4);
      await keeper.finish();
      expect(await steps()).toEqual([40, 20]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('is absent without a policy, and says why for one that does not parse', async () => {
    const store = await openStore(`file://${tmpdir()}/adv-keeper-none`);
    const lines: string[] = [];
    expect(retentionFromEnv({}, store, 'r', (l) => lines.push(l))).toBeUndefined();
    expect(
      retentionFromEnv({ ADV_RETENTION: '{"keepLast":0}' }, store, 'r', (l) => lines.push(l)),
    ).toBeUndefined();
    expect(lines[0]).toMatch(
      /^warning: ADV_RETENTION: keepLast must be a whole number ≥ 1, not 0; no checkpoint is deleted by this attempt$/,
    );
    expect(retentionFromEnv({ ADV_RETENTION: '{"keepLast":2}' }, store, 'r', () => {})).toBeInstanceOf(
      RetentionKeeper,
    );
  });
});
