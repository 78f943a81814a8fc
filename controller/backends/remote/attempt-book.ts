/**
 * The bookkeeping every adapter that creates what its attempts run on shares (a TPU node, a rented
 * instance, a Volcano Job): how attempts ended here, which were cancelled, the deletes still under
 * way, and which listed objects are orphans. It calls nothing itself: the adapter (or
 * `MachineLifecycle`) says what to delete and how.
 */
import type { Logger } from 'pino';
import type { JobHandle, ObservedJob } from '../types.js';

export class AttemptBook {
  /** Attempts that ended here, so a poll after their machine's deletion still says how. */
  private readonly ended = new Map<string, ObservedJob>();
  /** Job names cancelled here: a machine that goes away after a cancel is Cancelled, not Lost. */
  private readonly cancelled = new Set<string>();
  /** Delete requests under way: a controller that stops (`--once`) still makes them. */
  private readonly deleting = new Set<Promise<void>>();
  /** The same, by what they delete: a second ask while one is under way is that one. */
  private readonly deletingKey = new Map<string, Promise<void>>();

  constructor(private readonly logger: Logger) {}

  /** How the attempt ended, when it ended here. */
  endedAs(jobName: string): ObservedJob | undefined {
    return this.ended.get(jobName);
  }

  /** Records how the attempt ended: later polls answer with it. */
  recordEnd(jobName: string, o: ObservedJob): ObservedJob {
    this.ended.set(jobName, o);
    return o;
  }

  markCancelled(jobName: string): void {
    this.cancelled.add(jobName);
  }

  wasCancelled(jobName: string): boolean {
    return this.cancelled.has(jobName);
  }

  /**
   * Tracks a delete request until it is made (`drain` waits for it). It never rejects: a failure is
   * logged with `what` (the next poll's sweep asks again).
   */
  track(asked: Promise<unknown>, what: string, fields: Record<string, unknown>): Promise<void> {
    const p: Promise<void> = asked
      .then(() => undefined)
      .catch((e: unknown) => this.logger.warn({ ...fields, err: (e as Error).message }, what))
      .finally(() => this.deleting.delete(p));
    this.deleting.add(p);
    return p;
  }

  /**
   * Deletes `key` once: while a delete of it is under way, a second ask (the sweep of the next
   * poll, an end and a cancel at once) is the first one, not another call to the cloud's API.
   */
  deleteOnce(
    key: string,
    ask: () => Promise<unknown>,
    what: string,
    fields: Record<string, unknown>,
  ): Promise<void> {
    const under = this.deletingKey.get(key);
    if (under) return under;
    const p = this.track(ask(), what, fields).finally(() => this.deletingKey.delete(key));
    this.deletingKey.set(key, p);
    return p;
  }

  /** Whether a delete of `key` is under way (the sweep leaves it alone). */
  isDeleting(key: string): boolean {
    return this.deletingKey.has(key);
  }

  /** Waits for every delete request under way to be made. */
  async drain(): Promise<void> {
    await Promise.all(this.deleting);
  }

  /**
   * Forgets what was kept for attempts the controller no longer polls (it recorded their end); a
   * cancel mark stays while `keep` says so (a provisioning task may still read it).
   */
  forgetUnpolled(polled: ReadonlySet<string>, keep: (jobName: string) => boolean = () => false): void {
    for (const jobName of this.ended.keys()) if (!polled.has(jobName)) this.ended.delete(jobName);
    for (const jobName of this.cancelled)
      if (!polled.has(jobName) && !keep(jobName)) this.cancelled.delete(jobName);
  }

  /**
   * The listed objects that no live attempt owns: `listed` by key, `owners` the job names that own
   * one (the polled handles, every live attempt, those being provisioned), `keyOf` a job name's
   * key; `going` objects (being deleted already) are skipped.
   */
  orphans<M>(
    listed: Iterable<readonly [string, M]>,
    owners: Iterable<string>,
    keyOf: (jobName: string) => string,
    going: (m: M) => boolean = () => false,
  ): [string, M][] {
    const owned = new Set([...owners].map(keyOf));
    return [...listed].filter(([key, m]) => !owned.has(key) && !going(m)).map(([k, m]) => [k, m]);
  }
}

/** The job names of a poll's handles. */
export const polledNames = (handles: readonly JobHandle[]): Set<string> =>
  new Set(handles.map((h) => h.jobName));
