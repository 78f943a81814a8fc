import { describe, expect, it } from 'vitest';
import { WorkQueue } from './queue.js';

describe('WorkQueue', () => {
  it('deduplicates keys and hands out only due ones', () => {
    let now = 0;
    const q = new WorkQueue({ now: () => now });
    q.add('Run/a');
    q.add('Run/a');
    q.addAfter('Run/b', 1000);
    expect(q.takeDue()).toEqual(['Run/a']);
    expect(q.takeDue()).toEqual([]);
    expect(q.nextDueAt()).toBe(1000);
    now = 1000;
    expect(q.takeDue()).toEqual(['Run/b']);
  });

  it('an earlier request wins over a later one', () => {
    const q = new WorkQueue({ now: () => 0 });
    q.addAfter('k', 5000);
    q.addAfter('k', 100);
    q.addAfter('k', 9000);
    expect(q.nextDueAt()).toBe(100);
  });

  it('backs off exponentially per key, capped, until forgotten', () => {
    const q = new WorkQueue({ now: () => 0, baseDelayMs: 100, maxDelayMs: 1000 });
    expect([1, 2, 3, 4, 5].map(() => q.addRateLimited('k'))).toEqual([100, 200, 400, 800, 1000]);
    q.forget('k');
    expect(q.addRateLimited('k')).toBe(100);
  });
});
