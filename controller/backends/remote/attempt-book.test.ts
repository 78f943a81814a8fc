import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { JobState } from '../types.js';
import { AttemptBook } from './attempt-book.js';

const book = (lines: string[] = []) =>
  new AttemptBook(pino({ level: 'info' }, { write: (l: string) => void lines.push(l) }));

describe('AttemptBook', () => {
  it('an orphan is a listed object no owner’s key names and that is not already going', () => {
    const b = book();
    const listed = new Map([
      ['vc-a', { going: false }],
      ['vc-b', { going: false }],
      ['vc-c', { going: true }],
    ]);
    const orphans = b.orphans(
      listed,
      ['a'],
      (job) => `vc-${job}`,
      (o) => o.going,
    );
    expect(orphans.map(([key]) => key)).toEqual(['vc-b']);
  });

  it('forgets ended attempts no longer polled; a cancel mark stays while `keep` says so', () => {
    const b = book();
    const ended = { jobName: 'a', jobId: '1', state: JobState.Preempted };
    b.recordEnd('a', ended);
    b.markCancelled('a');
    b.markCancelled('b');
    b.forgetUnpolled(new Set(['a']), (job) => job === 'b');
    expect(b.endedAs('a')).toBe(ended);
    expect([b.wasCancelled('a'), b.wasCancelled('b')]).toEqual([true, true]);
    b.forgetUnpolled(new Set());
    expect(b.endedAs('a')).toBeUndefined();
    expect([b.wasCancelled('a'), b.wasCancelled('b')]).toEqual([false, false]);
  });

  it('a delete that fails is logged, never thrown; drain waits for every delete under way', async () => {
    const lines: string[] = [];
    const b = book(lines);
    let release!: () => void;
    const slow = new Promise<void>((r) => (release = r));
    void b.track(Promise.reject(new Error('forbidden')), 'cannot delete it', { what: 'x' });
    void b.track(slow, 'cannot delete it', { what: 'y' });
    let drained = false;
    const draining = b.drain().then(() => (drained = true));
    await new Promise((r) => setImmediate(r));
    expect(drained).toBe(false);
    release();
    await draining;
    expect(lines.map((l) => JSON.parse(l) as { msg: string; what: string; err: string })).toEqual([
      expect.objectContaining({ msg: 'cannot delete it', what: 'x', err: 'forbidden' }),
    ]);
  });
});
