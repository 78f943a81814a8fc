/**
 * Waiting in integration tests. A test waits on something it can observe — a manifest in the
 * store, a step dir, a status commit, a pid file — never on a fixed sleep; and how long it may
 * wait scales with what it exercises on this machine now (measured per-operation cost × count),
 * not with one constant picked on an idle laptop. Nothing here asserts how long anything took.
 */
import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** What is awaited, in words: the error says "timed out after … waiting for <what>". */
  what: string;
  /** Give up after this long. Default 30 s; never later than `budget` runs out. */
  timeoutMs?: number;
  /** A shared allowance this wait draws from (see `Budget`). */
  budget?: Budget;
  /** Poll interval. Default 50 ms. */
  everyMs?: number;
  /** Stop at once, with this reason, when the awaited thing can no longer happen (its process exited). */
  giveUpIf?: () => string | false | undefined | Promise<string | false | undefined>;
  /** The state worth seeing when it fails (a process' output, a status doc), appended to the error. */
  detail?: () => unknown;
}

/**
 * Polls `condition` until it returns a truthy value, and resolves to that value. A throw from the
 * condition counts as "not yet" (and is reported if the time runs out).
 *
 * The older positional form `waitFor(what, check, timeoutMs?, everyMs?)` is still accepted.
 */
export async function waitFor<T>(condition: () => Promise<T> | T, opts: WaitOptions): Promise<NonNullable<T>>;
export async function waitFor<T>(
  what: string,
  check: () => Promise<T> | T,
  timeoutMs?: number,
  everyMs?: number,
): Promise<NonNullable<T>>;
export async function waitFor<T>(
  a: string | (() => Promise<T> | T),
  b: WaitOptions | (() => Promise<T> | T),
  timeoutMs?: number,
  everyMs?: number,
): Promise<NonNullable<T>> {
  const [condition, opts] =
    typeof a === 'string'
      ? [b as () => Promise<T> | T, { what: a, timeoutMs, everyMs } as WaitOptions]
      : [a, b as WaitOptions];
  const started = Date.now();
  const limit = opts.timeoutMs ?? 30_000;
  const deadline = Math.min(started + limit, opts.budget?.deadline ?? Infinity);
  let last: unknown;
  for (;;) {
    try {
      const v = await condition();
      if (v) return v as NonNullable<T>;
      last = undefined;
    } catch (e) {
      last = e;
    }
    const stop = await opts.giveUpIf?.();
    if (stop) throw new Error(`gave up waiting for ${opts.what}: ${stop}${await explain(opts, last)}`);
    if (Date.now() >= deadline) {
      const by =
        opts.budget && opts.budget.deadline <= started + limit ? ` (the budget: ${opts.budget})` : '';
      throw new Error(
        `timed out after ${Date.now() - started} ms${by} waiting for ${opts.what}${await explain(opts, last)}`,
      );
    }
    await sleep(Math.min(opts.everyMs ?? 50, Math.max(1, deadline - Date.now())));
  }
}

async function explain(opts: WaitOptions, last: unknown): Promise<string> {
  let out = last ? `; last error: ${String(last)}` : '';
  if (opts.detail) {
    try {
      const d = await opts.detail();
      out += `\n${typeof d === 'string' ? d : JSON.stringify(d, null, 1)}`;
    } catch (e) {
      out += `\n(no detail: ${String(e)})`;
    }
  }
  return out;
}

/**
 * An allowance of time for one piece of a test, sized from what it does: `Budget.for('200 ssh
 * commands', { perOpMs: measured, count: 200, concurrency: 8 })`. Waits can draw from it
 * (`waitFor(…, { budget })`) and `within` fails work that outlives it, naming the budget.
 */
export class Budget {
  readonly deadline: number;

  constructor(
    readonly what: string,
    readonly ms: number,
  ) {
    this.deadline = Date.now() + ms;
  }

  /**
   * `count` operations of `perOpMs` each, `concurrency` at a time, times `headroom` (default 4:
   * the machine may get slower after the measurement), plus `fixedMs`, and never under `minMs`.
   */
  static for(
    what: string,
    o: {
      perOpMs: number;
      count?: number;
      concurrency?: number;
      headroom?: number;
      fixedMs?: number;
      minMs?: number;
    },
  ): Budget {
    const rounds = Math.ceil((o.count ?? 1) / (o.concurrency ?? 1));
    const ms = Math.max(o.minMs ?? 10_000, rounds * o.perOpMs * (o.headroom ?? 4) + (o.fixedMs ?? 0));
    return new Budget(what, Math.ceil(ms));
  }

  remainingMs(): number {
    return Math.max(0, this.deadline - Date.now());
  }

  /** Resolves as `work` does, or rejects when the budget runs out first. */
  async within<T>(work: Promise<T> | (() => Promise<T>)): Promise<T> {
    const p = typeof work === 'function' ? work() : work;
    let timer: NodeJS.Timeout | undefined;
    const out = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${this.what} did not finish within its budget: ${this}`)),
        this.remainingMs(),
      );
    });
    try {
      return await Promise.race([p, out]);
    } finally {
      clearTimeout(timer);
    }
  }

  toString(): string {
    return `${this.what}: ${Math.round(this.ms / 100) / 10} s`;
  }
}

/**
 * What one operation costs on this machine right now: the slowest of `samples` runs after one
 * warm-up run (which pays for connecting, caches and JIT). Used to size a `Budget`, never asserted.
 */
export async function measureMs(op: () => Promise<unknown>, samples = 3): Promise<number> {
  await op();
  let worst = 0;
  for (let i = 0; i < samples; i++) {
    const t = performance.now();
    await op();
    worst = Math.max(worst, performance.now() - t);
  }
  return worst;
}

/**
 * Runs `count` operations one after another, held to a budget sized from the first `sample` of
 * them: their mean cost × the count × `headroom`. For a loop whose cost is the machine's (a
 * commit and a push each), not the test's. Resolves to the measured cost of one operation.
 */
export async function repeatWithinBudget(
  what: string,
  count: number,
  op: (i: number) => Promise<unknown>,
  o: { sample?: number; sampleMs?: number; headroom?: number } = {},
): Promise<number> {
  const sample = Math.min(o.sample ?? 10, count);
  const first = new Budget(`the first ${sample} of ${what}`, o.sampleMs ?? 60_000 * sample);
  const t = performance.now();
  for (let i = 0; i < sample; i++) await first.within(op(i));
  const perOpMs = (performance.now() - t) / sample;
  const rest = Budget.for(`${what} (${perOpMs.toFixed(0)} ms each when measured)`, {
    perOpMs,
    count: count - sample,
    headroom: o.headroom ?? 4,
  });
  for (let i = sample; i < count; i++) await rest.within(op(i));
  return perOpMs;
}

/** Runs a controller's passes until `done` holds, every 200 ms, bounded by `timeoutMs`. */
export const passUntil = (
  c: { pass(): Promise<unknown> },
  what: string,
  done: () => boolean | Promise<boolean>,
  timeoutMs = 120_000,
) =>
  waitFor(
    async () => {
      await c.pass();
      return done();
    },
    { what, timeoutMs, everyMs: 200 },
  );

/** Pauses a random time in [0, maxMs): to vary *where* in a phase something happens, never to wait for it. */
export const jitter = (maxMs: number): Promise<void> => sleep(Math.floor(Math.random() * maxMs));

/**
 * vitest's own timeout for a test that sizes its `Budget` at run time from measured costs: only a
 * guard against a hang, kept clear of any budget a slow machine can justify.
 */
export const HANG_GUARD_MS = 30 * 60_000;

/**
 * Stops a server process the test started: SIGTERM, then waits for it to exit (its files may be
 * removed after that), with SIGKILL if it has not gone after `graceMs`.
 */
export async function stopProcess(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}
