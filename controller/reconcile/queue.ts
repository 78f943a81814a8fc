/**
 * A work queue keyed by `kind/name`, as controller-runtime's: a key is in it at most once, may be
 * due now or later, and failures back off exponentially per key. Events only add keys; each pass
 * re-reads the state, so a key added twice is looked at once.
 */
export interface QueueOptions {
  baseDelayMs?: number;
  maxDelayMs?: number;
  now?: () => number;
}

export class WorkQueue {
  private readonly due = new Map<string, number>();
  private readonly failures = new Map<string, number>();
  private readonly base: number;
  private readonly max: number;
  private readonly now: () => number;

  constructor(opts: QueueOptions = {}) {
    this.base = opts.baseDelayMs ?? 1000;
    this.max = opts.maxDelayMs ?? 5 * 60_000;
    this.now = opts.now ?? Date.now;
  }

  /** Due now. */
  add(key: string): void {
    this.due.set(key, Math.min(this.due.get(key) ?? Infinity, this.now()));
  }

  /** Due after `ms`, unless it is already due sooner. */
  addAfter(key: string, ms: number): void {
    const at = this.now() + ms;
    const cur = this.due.get(key);
    if (cur === undefined || at < cur) this.due.set(key, at);
  }

  /** After a failure: base × 2^(failures-1), capped. */
  addRateLimited(key: string): number {
    const n = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, n);
    const delay = Math.min(this.base * 2 ** (n - 1), this.max);
    this.addAfter(key, delay);
    return delay;
  }

  /** A success: the key's backoff starts over. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  /** Removes and returns every key due by now. */
  takeDue(): string[] {
    const now = this.now();
    const out: string[] = [];
    for (const [k, at] of this.due) if (at <= now) out.push(k);
    for (const k of out) this.due.delete(k);
    return out.sort();
  }

  /** When the next key falls due, or undefined when the queue is empty. */
  nextDueAt(): number | undefined {
    let min: number | undefined;
    for (const at of this.due.values()) if (min === undefined || at < min) min = at;
    return min;
  }

  get length(): number {
    return this.due.size;
  }
}
