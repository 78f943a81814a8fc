import { describe, expect, it } from 'vitest';
import { StallingError } from '../../errors.js';
import { WorkQueue } from '../../reconcile/queue.js';
import { requeue, type ReconcileOutcome } from './requeue.js';

describe('requeue: one place turns an outcome into a queue decision', () => {
  const table: { name: string; outcomes: ReconcileOutcome[]; delays: (number | undefined)[] }[] = [
    { name: 'a result without a delay is done', outcomes: [{}], delays: [undefined] },
    {
      name: 'a result asks to be looked at after its delay',
      outcomes: [{ requeueAfterMs: 5000 }],
      delays: [5000],
    },
    {
      name: 'an error backs off exponentially; a plan result does not reset the backoff',
      outcomes: [new Error('x'), { requeueAfterMs: 30_000 }, new Error('x')],
      delays: [1000, 30_000, 2000],
    },
    {
      name: 'a success of the key’s actions resets the backoff',
      outcomes: [new Error('x'), new Error('x'), { resetBackoff: true }, new Error('x')],
      delays: [1000, 2000, undefined, 1000],
    },
    {
      name: 'stalling is not retried and clears the backoff',
      outcomes: [new Error('x'), new StallingError('SecretMissing', 'no secret'), new Error('x')],
      delays: [1000, undefined, 1000],
    },
  ];
  for (const t of table)
    it(t.name, () => {
      const q = new WorkQueue({ now: () => 0 });
      const got = t.outcomes.map((o) => {
        const d = requeue(q, 'Run/a', o);
        q.takeDue();
        return d;
      });
      expect(got).toEqual(t.delays);
    });

  it('a stalled key is not in the queue afterwards', () => {
    const q = new WorkQueue({ now: () => 0 });
    requeue(q, 'Run/a', new StallingError('CodeRefNotFound', 'no ref'));
    expect(q.length).toBe(0);
  });
});
