import { describe, expect, it } from 'vitest';
import { Listings } from './listings.js';

describe('Listings', () => {
  it('answers from the first list begun after the question, item or not', async () => {
    const l = new Listings<string>();
    l.publish(90, new Map([['a', 'old']]));
    const waiting = l.after(100, 'a', 60_000);
    l.publish(95, new Map([['a', 'stale']])); // older than the last: ignored
    l.publish(110, new Map([['a', 'fresh']]));
    expect(await waiting).toEqual({ item: 'fresh' });
    // A list that does not hold the key says so (the machine is not listed).
    expect(await l.after(105, 'b', 60_000)).toEqual({});
  });

  it('gives up when no list comes in time: the caller asks for itself', async () => {
    const l = new Listings<string>();
    expect(await l.after(0, 'a', 10)).toBeUndefined();
  });
});
