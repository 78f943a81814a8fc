import { describe, expect, it } from 'vitest';
import type { Heartbeat } from '../../runtime/heartbeat.js';
import { ConditionType } from '../status/types.js';
import { workerConditions } from './run-plan-workers.js';

const NOW = '2026-11-28T06:00:00.000Z';
const beat = (extra: Partial<Heartbeat> = {}): Heartbeat => ({
  time: NOW,
  run: 'r',
  attempt: 1,
  host: 'h',
  pid: 1,
  ...extra,
});
const opts = { attempt: 1, limitMs: 600_000, nowMs: Date.parse(NOW), now: NOW };

describe('FetchingData, from the heartbeat of an attempt that fetches its datasets', () => {
  it('says which dataset and how far, in tenths, and goes once the fetch is done', () => {
    const f = (bytes: number) =>
      beat({ fetchingDataset: { dataset: 'tokens@2', bytes, total: 2 * 2 ** 30 } });
    const at = workerConditions([], f(2 ** 30 + 5), opts);
    const c = at.find((x) => x.type === ConditionType.FetchingData);
    expect(c).toMatchObject({ status: 'True', reason: 'FetchingDataset' });
    expect(c?.message).toContain('dataset tokens@2: 50% of 2.0 GiB');
    // A few more bytes in the same tenth: the same condition, so no new status commit.
    expect(workerConditions(at, f(2 ** 30 + 9000), opts)).toEqual(at);
    expect(workerConditions(at, beat(), opts).some((x) => x.type === ConditionType.FetchingData)).toBe(false);
  });
});
