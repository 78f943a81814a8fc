/**
 * Failed enrollments per source address: a token bucket of `burst` failures that refills one every
 * `refillMs`; an address whose bucket is empty is answered 429 until it refills. Only failures
 * count (an agent that enrolls once is never slowed), so guessing the enrollment token over the
 * network goes at one try per `refillMs`. IPv6 addresses count per /64 (what one host is given);
 * the table is bounded, its oldest entries dropped first.
 */
import { isIPv6 } from 'node:net';

const MAX_ADDRESSES = 4096;

interface Bucket {
  tokens: number;
  at: number;
}

export class FailureThrottle {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly now: () => number,
    private readonly burst = 5,
    private readonly refillMs = 10_000,
  ) {}

  /** Seconds `address` must wait before it may try again; 0 when it may now. */
  waitSec(address: string): number {
    const b = this.bucket(sourceKey(address));
    return b.tokens >= 1 ? 0 : Math.ceil(((1 - b.tokens) * this.refillMs) / 1000);
  }

  /** Counts a failure of `address`; true when its bucket is now empty (the first 429 is next). */
  failed(address: string): boolean {
    const key = sourceKey(address);
    const b = this.bucket(key);
    b.tokens = Math.max(0, b.tokens - 1);
    this.buckets.delete(key); // re-inserted last: the table drops the least recently failed first
    this.buckets.set(key, b);
    if (this.buckets.size > MAX_ADDRESSES) this.buckets.delete(this.buckets.keys().next().value!);
    return b.tokens < 1;
  }

  private bucket(key: string): Bucket {
    const t = this.now();
    const b = this.buckets.get(key);
    if (!b) return { tokens: this.burst, at: t };
    b.tokens = Math.min(this.burst, b.tokens + (t - b.at) / this.refillMs);
    b.at = t;
    return b;
  }
}

/** The unit an address is counted in: an IPv4 address (IPv4-mapped ones too), or an IPv6 /64. */
export function sourceKey(address: string): string {
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (v4) return v4[1]!;
  if (!isIPv6(address)) return address;
  const [head = '', tail] = address.toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')
    .concat('::/64');
}
