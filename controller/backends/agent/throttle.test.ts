import { describe, expect, it } from 'vitest';
import { FailureThrottle, sourceKey } from './throttle.js';

describe('failed enrollments per source address', () => {
  it.each([
    ['192.0.2.7', '192.0.2.7'],
    ['::ffff:192.0.2.7', '192.0.2.7'],
    ['2001:db8:1:2:aaaa:bbbb:cccc:dddd', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:0db8::', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
  ])('counts %s as %s', (address, key) => {
    expect(sourceKey(address)).toBe(key);
  });

  it('lets a burst of failures through, then one per refill, and never slows an address that did not fail', () => {
    let t = 0;
    const th = new FailureThrottle(() => t, 3, 10_000);
    for (let i = 0; i < 2; i++) expect(th.failed('2001:db8::1')).toBe(false);
    expect(th.failed('2001:db8::2')).toBe(true); // the same /64
    expect(th.waitSec('2001:db8::3')).toBe(10);
    expect(th.waitSec('192.0.2.1')).toBe(0);
    t += 5_000;
    expect(th.waitSec('2001:db8::1')).toBe(5);
    t += 5_000;
    expect(th.waitSec('2001:db8::1')).toBe(0);
  });
});
