/**
 * One machine per attempt: the lifecycle the `gcp-tpu` and `vastai` adapters share (SkyPilot's
 * provisioner shape: one lifecycle, each cloud supplying its verbs through `MachineCloud`).
 *
 * - **submit** is idempotent by job name: a machine the cloud already has for the job (a controller
 *   killed mid-create) is adopted, never a second one; else one is asked for and provisioning goes
 *   on in the background with the request in memory: wait (the cloud's bound) until it is usable,
 *   or try another (the cloud's next zone, next offer), then launch the job on it.
 * - **poll** is the cloud's one list per pass, published for the provisioning tasks (they read it
 *   instead of asking per machine), then `observe`'s ladder per handle (see `observe`), then the
 *   sweep: a listed machine no live attempt owns is an orphan and is deleted.
 * - A machine whose attempt ended (any way) is deleted in the background; `close` waits for the
 *   delete requests under way and leaves provisioning to the adapter that replaces this one.
 */
import type { Logger } from 'pino';
import {
  JobState,
  isEnded,
  oneByOne,
  unobservable,
  type Backend,
  type BackendContext,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
  type SubmitResult,
} from '../types.js';
import { AttemptBook, polledNames } from './attempt-book.js';
import { AdapterClosed, Listings } from './listings.js';
import { RecentChecks, type AttemptRecord } from './recent-checks.js';

/** How long a machine being provisioned waits for a poll's list before asking for it itself. */
export const LIST_WAIT_MS = 15_000;
/** How long a cancelled job gets to stop before its machine is deleted. */
export const CANCEL_GRACE_MS = 10_000;

/** How a machine stands, in the lifecycle's words (the cloud maps its own states onto these). */
export type Standing =
  /** Being made: not usable yet. One this controller did not start is adopted. */
  | { kind: 'creating' }
  | { kind: 'usable' }
  /** It stopped under the job (preempted, outbid): the attempt ends Preempted with the cloud's reason. */
  | { kind: 'ended'; reason: string; message: string }
  /** Being deleted: not an orphan to delete again. */
  | { kind: 'going' }
  /** Any other state that is not usable now (starting, repairing). */
  | { kind: 'unready' };

/** What the job on a usable machine is doing, as the cloud's hosts said. */
export interface JobSeen {
  seen: ObservedJob;
  /**
   * The job was not launched on every host (`some`) or on none (`all`): a controller restarted
   * while launching. The lifecycle carries on launching when it can rebuild the request.
   */
  unlaunched?: 'some' | 'all';
}

/** One look at a machine being provisioned, for `MachineCloud.waitUsable`. */
export interface Look<M> {
  /** The machine, from the poll's list or asked for; undefined when the cloud has none. */
  machine: M | undefined;
  /** A poll's list came in time (the cloud was asked only when the machine was not in it). */
  listed: boolean;
  /** The machine was in that list (nothing was asked). */
  seen: boolean;
}

/** The words a cloud's messages and logs use for its machines. */
export interface CloudWords {
  adopting: string;
  orphan: string;
  notProvisioned: string;
  /** The message of an attempt whose job was never started on its machine. */
  neverLaunched: string;
  /** The reason of an attempt whose machine is gone without an end record. */
  goneReason: string;
}

/**
 * What a cloud says differently. `M` is its machine as listed, `P` where a machine is (a zone, an
 * instance id): what provisioning follows as it moves, and what a delete needs.
 */
export interface MachineCloud<M, P extends string | number> {
  readonly words: CloudWords;
  /** The key of a job's machine in `list`: its name in the cloud, or the job name. */
  keyOf(jobName: string): string;
  /** This pass's machines of this backend, by key. Throws with the message of an `Unreachable`. */
  list(): Promise<Map<string, M>>;
  /** The job's machine, unless it is being deleted: what `submit` adopts. */
  find(jobName: string): Promise<M | undefined>;
  /** The job's machine in whatever state (cancel). */
  locate(jobName: string): Promise<M | undefined>;
  /** The machine at `place`, asked for directly (no poll listed it in time). */
  show(jobName: string, place: P): Promise<M | undefined>;
  placeOf(m: M): P;
  jobIdOf(jobName: string, place: P): string;
  standing(m: M): Standing;
  /** Checks a request before anything is asked for (a mode the Backend cannot give fails it). */
  check?(job: JobRequest): void;
  /** Asks for a machine for the job; where it will be. Throws when none can be had. */
  ask(job: JobRequest): Promise<P>;
  /**
   * Waits (the cloud's bound) until the machine at `place` is usable: it, or undefined to try
   * another. `look` throws when the job was cancelled or the adapter closed meanwhile.
   */
  waitUsable(job: JobRequest, place: P, look: (place: P) => Promise<Look<M>>): Promise<M | undefined>;
  /**
   * Another machine after the one at `place` would not become usable; `tried` holds the cloud's
   * notes of what was tried for this attempt (it appends its own); `remove` deletes a machine
   * that is no use (tracked: `close` waits for it). Throws when none is left.
   */
  another(
    job: JobRequest,
    place: P,
    tried: string[],
    remove: (place: P, why: string) => Promise<void>,
  ): Promise<P>;
  /** The reason of an attempt whose provisioning failed with `e` (`NoCapacity`, `ProvisioningFailed`). */
  failureReason(e: unknown): string;
  launch(job: JobRequest, m: M): Promise<void>;
  /** What every observation of the job carries (its id, the machine's own price). */
  base(h: JobHandle, m: M | undefined): Base;
  /** Asks the machine's hosts about the job. */
  observeJob(h: JobHandle, m: M, base: Base): Promise<JobSeen>;
  /** Stops the job on the machine; `ended` settles when it stopped or the grace is over. */
  stop(h: JobHandle, m: M): Promise<{ ended: Promise<unknown> }>;
  /**
   * Asks for the deletion of the machine `key` (at `place`, when known); it logs what happened,
   * a failure included (the next poll's sweep asks again).
   */
  delete(key: string, place: P | undefined, why: string): Promise<void>;
  /** The message of a job whose machine is not usable yet (`m` undefined: not listed yet). */
  provisioningMessage(jobName: string, m: M | undefined, place: P): string;
  goneMessage(base: Base, jobName: string): string;
  /** Log fields naming the machine `key` (with what its listing says, when there is one). */
  fields(key: string, place: P | undefined, m?: M): Record<string, unknown>;
  /** The job's machine is going: what the adapter keeps for it (a transport) may go too. */
  released?(jobName: string): void;
}

/** What every observation of a job carries. */
export type Base = Pick<ObservedJob, 'jobName' | 'jobId' | 'pricePerHour'>;

/** What happens to a job between its submit and its machine's first usable poll. */
interface Provisioning<P> {
  /** Where its machine is now (it changes when one is replaced). */
  place: P;
  /** Where its exit record goes in the object store. */
  record: AttemptRecord;
  launched: boolean;
  /** Set when provisioning failed: the attempt ends with it. */
  failed?: ObservedJob;
}

export interface LifecycleOptions {
  /** How long a running job's hosts go without a look (see `RecentChecks`). */
  checkEveryMs: number;
  /** How long a machine being provisioned waits for a poll's list. Default `LIST_WAIT_MS`. */
  listWaitMs?: number;
}

export class MachineLifecycle<M, P extends string | number> {
  private readonly book: AttemptBook;
  private readonly provisioning = new Map<string, Provisioning<P>>();
  /** The polls' lists, by key: what a machine being provisioned waits on. */
  private readonly listings = new Listings<M>();
  private readonly checks: RecentChecks;
  private readonly logger: Logger;
  private readonly listWaitMs: number;
  /** Set by `close`: background provisioning stops and leaves the machine to the next adapter. */
  private closed = false;

  constructor(
    private readonly backend: string,
    private readonly cloud: MachineCloud<M, P>,
    private readonly ctx: BackendContext,
    opts: LifecycleOptions,
  ) {
    this.logger = ctx.logger;
    this.book = new AttemptBook(ctx.logger);
    this.checks = new RecentChecks(ctx, opts.checkEveryMs);
    this.listWaitMs = opts.listWaitMs ?? LIST_WAIT_MS;
  }

  /** Find-or-ask by job name: a machine the cloud has for the job already is adopted. */
  async submit(job: JobRequest): Promise<SubmitResult> {
    this.cloud.check?.(job);
    const handle = (place: P) => ({
      backend: this.backend,
      jobName: job.jobName,
      jobId: this.cloud.jobIdOf(job.jobName, place),
    });
    const found = await this.cloud.find(job.jobName);
    if (found) {
      const place = this.cloud.placeOf(found);
      if (!this.provisioning.has(job.jobName)) this.provision(job, place);
      return { ...handle(place), adopted: true };
    }
    const place = await this.cloud.ask(job);
    this.provision(job, place);
    return handle(place);
  }

  async find(jobName: string): Promise<JobHandle | undefined> {
    const m = await this.cloud.find(jobName);
    return m && { backend: this.backend, jobName, jobId: this.cloud.jobIdOf(jobName, this.cloud.placeOf(m)) };
  }

  /**
   * In the background: waits until the machine is usable, trying another while the cloud has one,
   * then launches the job. Never throws: a failure is recorded for `poll` to report.
   */
  private provision(job: JobRequest, place: P): void {
    const p: Provisioning<P> = { place, launched: false, record: { run: job.run, attempt: job.attempt } };
    this.provisioning.set(job.jobName, p);
    void (async () => {
      const tried: string[] = [];
      try {
        for (;;) {
          const m = await this.cloud.waitUsable(job, p.place, (at) => this.look(job.jobName, at));
          if (this.closed) throw new AdapterClosed();
          if (m) {
            await this.cloud.launch(job, m);
            p.launched = true;
            return;
          }
          p.place = await this.cloud.another(job, p.place, tried, (at, why) =>
            this.remove(this.cloud.keyOf(job.jobName), at, why),
          );
        }
      } catch (e) {
        // Closed (its Backend spec changed): the adapter that replaces it adopts the machine.
        if (e instanceof AdapterClosed) return;
        const message = (e as Error).message;
        this.logger.warn(
          { job: job.jobName, ...this.cloud.fields(this.cloud.keyOf(job.jobName), p.place), err: message },
          this.cloud.words.notProvisioned,
        );
        p.failed = {
          jobName: job.jobName,
          jobId: this.cloud.jobIdOf(job.jobName, p.place),
          state: JobState.Lost,
          reason: this.cloud.failureReason(e),
          message,
        };
      }
    })();
  }

  /**
   * How the machine at `place` is: from the next poll's list, without a call of its own; one not in
   * it (gone, or not listed yet), or no poll in time, is asked for once.
   */
  private async look(jobName: string, place: P): Promise<Look<M>> {
    if (this.book.wasCancelled(jobName)) throw new Error('cancelled while provisioning');
    if (this.closed) throw new AdapterClosed();
    const listed = await this.listings.after(this.ctx.now(), this.cloud.keyOf(jobName), this.listWaitMs);
    const item = listed?.item;
    const seen = item !== undefined && this.cloud.placeOf(item) === place ? item : undefined;
    const machine = seen ?? (await this.cloud.show(jobName, place));
    return { machine, listed: listed !== undefined, seen: seen !== undefined };
  }

  /** One list for every handle, then each handle's ladder, then the orphan sweep. */
  async poll(handles: readonly JobHandle[], owned: ReadonlySet<string>): Promise<ObservedJob[]> {
    const takenAt = this.ctx.now();
    let listed: Map<string, M>;
    try {
      listed = await this.cloud.list();
    } catch (e) {
      return unobservable(handles, 'Unreachable', (e as Error).message);
    }
    this.listings.publish(takenAt, listed);
    const out = await Promise.all(
      handles.map((h) => this.observe(h, listed.get(this.cloud.keyOf(h.jobName)))),
    );
    const polled = polledNames(handles);
    this.checks.keepOnly(polled);
    this.book.forgetUnpolled(polled, (jobName) => this.provisioning.has(jobName));
    this.sweep([...polled, ...owned, ...this.unlaunched()], listed);
    return out;
  }

  /**
   * The ladder: ended here → provisioning failed → a machine this controller did not start is
   * adopted → not listed yet while provisioning → gone (cancelled, else lost) → preempted → still
   * provisioning → a recent look → the hosts asked (never launched: adopt, else end) → ended.
   */
  private async observe(h: JobHandle, m: M | undefined): Promise<ObservedJob> {
    const ended = this.book.endedAs(h.jobName);
    if (ended) return ended;
    const base = this.cloud.base(h, m);
    const p = this.provisioning.get(h.jobName);
    const place = m !== undefined ? this.cloud.placeOf(m) : p?.place;
    if (p?.failed) return this.end(h, p.failed, place);
    const standing = m !== undefined ? this.cloud.standing(m) : undefined;
    // A machine still being created that this controller did not ask for: a restarted controller
    // carries on from it (never a second one).
    if (!p && m !== undefined && standing?.kind === 'creating' && this.adopt(h, m))
      return this.pending(base, h.jobName, m, place!);
    if (m === undefined) return this.missing(h, base, p);
    if (standing?.kind === 'ended')
      return this.end(
        h,
        { ...base, state: JobState.Preempted, reason: standing.reason, message: standing.message },
        place,
      );
    if (standing?.kind !== 'usable' || (p && !p.launched)) return this.pending(base, h.jobName, m, place!);
    const recent = await this.checks.recent(h);
    if (recent) return { ...recent, ...base };
    const { seen, unlaunched } = await this.cloud.observeJob(h, m, base);
    this.checks.saw(h, seen, p?.record);
    if (seen.state === JobState.Unknown) return seen;
    if (unlaunched && !this.provisioning.has(h.jobName)) {
      // Launched on no host or not on all (a controller restarted while launching): carry on.
      if (this.adopt(h, m)) return this.pending(base, h.jobName, m, place!);
      if (unlaunched === 'all')
        return this.end(
          h,
          { ...seen, reason: 'NeverLaunched', message: this.cloud.words.neverLaunched },
          place,
        );
    }
    return isEnded(seen.state) ? this.end(h, seen, place) : seen;
  }

  /** A job whose machine is not in this pass's list: not listed yet, cancelled, or lost. */
  private missing(h: JobHandle, base: Base, p: Provisioning<P> | undefined): ObservedJob {
    if (p && !p.launched) return this.pending(base, h.jobName, undefined, p.place);
    if (this.book.wasCancelled(h.jobName))
      return this.end(h, { ...base, state: JobState.Cancelled, reason: 'Cancelled' }, p?.place);
    return this.end(
      h,
      {
        ...base,
        state: JobState.Lost,
        reason: this.cloud.words.goneReason,
        message: this.cloud.goneMessage(base, h.jobName),
      },
      p?.place,
    );
  }

  private pending(base: Base, jobName: string, m: M | undefined, place: P): ObservedJob {
    return {
      ...base,
      state: JobState.Pending,
      reason: 'Provisioning',
      message: this.cloud.provisioningMessage(jobName, m, place),
    };
  }

  /**
   * Takes over provisioning a machine this controller did not start (it was restarted), with the
   * request rebuilt from the status branch; false when the attempt is no longer live.
   */
  private adopt(h: JobHandle, m: M): boolean {
    const job = this.ctx.requestFor?.(h.jobName);
    if (!job) return false;
    const place = this.cloud.placeOf(m);
    this.logger.info(
      { job: h.jobName, ...this.cloud.fields(this.cloud.keyOf(h.jobName), place) },
      this.cloud.words.adopting,
    );
    this.provision(job, place);
    return true;
  }

  /** Records how the attempt ended and deletes its machine (in the background). */
  private end(h: JobHandle, o: ObservedJob, place: P | undefined): ObservedJob {
    this.book.recordEnd(h.jobName, o);
    this.checks.forget(h.jobName);
    const p = this.provisioning.get(h.jobName);
    this.provisioning.delete(h.jobName);
    void this.remove(this.cloud.keyOf(h.jobName), place ?? p?.place, `attempt ${o.state}`);
    this.cloud.released?.(h.jobName);
    return o;
  }

  /** Asks for a machine's deletion in the background; `close` waits for the request to be made. */
  remove(key: string, place: P | undefined, why: string): Promise<void> {
    return this.book.deleteOnce(
      deleting(key, place),
      () => this.cloud.delete(key, place, why),
      'cannot delete the machine',
      {
        ...this.cloud.fields(key, place),
        why,
      },
    );
  }

  /**
   * Jobs still being provisioned: owned by this adapter until launched, since the controller may
   * not list them yet. A launched job is owned only while the controller says so (its `owned`).
   */
  private unlaunched(): string[] {
    return [...this.provisioning].filter(([, p]) => !p.launched).map(([jobName]) => jobName);
  }

  /**
   * Listed machines that no live attempt owns (and that are not being provisioned) are deleted,
   * once: a machine whose delete is under way is not asked for again.
   */
  private sweep(owners: readonly string[], listed: Map<string, M>): void {
    const going = (m: M) => this.cloud.standing(m).kind === 'going';
    for (const [key, m] of this.book.orphans(listed, owners, (j) => this.cloud.keyOf(j), going)) {
      const place = this.cloud.placeOf(m);
      if (this.book.isDeleting(deleting(key, place))) continue;
      this.logger.warn(this.cloud.fields(key, place, m), this.cloud.words.orphan);
      for (const [jobName] of this.provisioning)
        if (this.cloud.keyOf(jobName) === key) this.provisioning.delete(jobName);
      void this.remove(key, place, 'orphan');
    }
  }

  /**
   * Stops the job on its machine (adv exec records it cancelled, the workload gets SIGTERM), then
   * deletes the machine once the job stopped, or after the grace: a cancelled attempt is not polled
   * again, so its machine is deleted here, in the background.
   */
  async cancel(h: JobHandle): Promise<void> {
    this.book.markCancelled(h.jobName);
    const m = await this.cloud.locate(h.jobName);
    if (m === undefined) return;
    const place = this.cloud.placeOf(m);
    const key = this.cloud.keyOf(h.jobName);
    if (this.cloud.standing(m).kind !== 'usable') return void this.remove(key, place, 'cancelled');
    const { ended } = await this.cloud.stop(h, m);
    void ended.then(() => {
      void this.remove(key, place, 'cancelled');
      this.cloud.released?.(h.jobName);
    });
  }

  /** Stops provisioning (the next adapter adopts) and waits for the delete requests under way. */
  async close(): Promise<void> {
    this.closed = true;
    await this.book.drain();
  }
}

/**
 * The port face of a machine-per-attempt adapter: submit, find, poll, cancel and close go to the
 * lifecycle; an adapter adds its type, its logs, and its cloud (which it may read for the logs).
 */
export abstract class MachineBackend<
  M,
  P extends string | number,
  C extends MachineCloud<M, P> & { close(): void },
> implements Backend {
  abstract readonly type: string;
  /** It creates what it runs on and deletes what no live attempt owns (the lifecycle's sweep). */
  readonly sweepsOrphans = true;
  protected readonly life: MachineLifecycle<M, P>;

  constructor(
    readonly name: string,
    protected readonly cloud: C,
    ctx: BackendContext,
    opts: LifecycleOptions,
  ) {
    this.life = new MachineLifecycle(name, cloud, ctx, opts);
  }

  /** Each job's find-or-ask (the lifecycle's submit): never a second machine for a name. */
  submit(jobs: readonly JobRequest[]): Promise<(SubmitResult | Error)[]> {
    return oneByOne(jobs, (job) => this.life.submit(job));
  }

  find(jobName: string): Promise<JobHandle | undefined> {
    return this.life.find(jobName);
  }

  poll(handles: readonly JobHandle[], owned: ReadonlySet<string> = new Set()): Promise<ObservedJob[]> {
    return this.life.poll(handles, owned);
  }

  cancel(h: JobHandle): Promise<void> {
    return this.life.cancel(h);
  }

  abstract logs(h: JobHandle, opts?: { follow?: boolean; since?: number }): AsyncIterable<string>;

  /** Stops provisioning, waits for the deletes under way, then closes what the cloud holds. */
  async close(): Promise<void> {
    await this.life.close();
    this.cloud.close();
  }
}

/**
 * What a delete is deduplicated by: the job's key AND the machine's place. One job may have two
 * machines going at once (a stuck rental deleted while its replacement is asked for, then ended).
 */
const deleting = (key: string, place: unknown): string => `${key}@${JSON.stringify(place ?? null)}`;

/** Waits `ms` (a provisioning task's pause between two looks of its own). */
export const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
