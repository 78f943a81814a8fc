/**
 * What the backends and the workers say, once per pass: one `poll` per backend for all its live
 * attempts, the heartbeats of live attempts from the object store (each at most every 5 s, and once
 * more when its attempt has just ended), and free capacity for the solver (each backend at most
 * every 15 s, bounded in time). The result is one observation the planners read.
 */
import type { Logger } from 'pino';
import { heartbeatKey, workerHeartbeatKey } from '../../../runtime/heartbeat.js';
import type { ObjectStore } from '../../../runtime/store/index.js';
import { unobservable, type Capacity, type JobHandle, type ObservedJob } from '../../backends/types.js';
import { isLiveAttempt } from '../../reconcile/run-plan.js';
import type { StatusWriter } from '../../status/writer.js';
import type { Attempt, Heartbeat, RunStatusDoc } from '../../status/types.js';
import type { BackendAdapters } from './adapters.js';

/** How long a backend's `capacity()` answer is used before it is asked again. */
export const CAPACITY_TTL_MS = 15_000;
/** How long one `capacity()` call may take before the backend is taken as "cannot tell". */
export const CAPACITY_TIMEOUT_MS = 10_000;
/** How often a backend that sweeps its orphans is polled while nothing runs there. */
const IDLE_SWEEP_MS = 60_000;
/** A live attempt's heartbeat is read at most this often. */
export const HEARTBEAT_READ_MS = 5000;

/** A live attempt: the run it belongs to and its latest attempt record. */
export interface LiveAttempt {
  run: string;
  attempt: Attempt;
}

/** One pass's view of the backends: job states by job name, heartbeats by run. */
export interface Observation {
  jobs: Map<string, ObservedJob>;
  heartbeats: Map<string, Heartbeat>;
}

const JUST_ENDED = (o: ObservedJob | undefined) =>
  o !== undefined && o.state !== 'Running' && o.state !== 'Pending' && o.state !== 'Unknown';

export class Observer {
  private readonly heartbeatReadAt = new Map<string, number>();
  private readonly capacities = new Map<string, { at: number; capacity?: Capacity }>();
  /** When each orphan-sweeping backend was last polled. */
  private readonly sweptAt = new Map<string, number>();

  /** When the next poll is due: the loop sleeps no longer than that. */
  nextPollAt = 0;

  constructor(
    private readonly adapters: BackendAdapters,
    private readonly logger: Logger,
    private readonly now: () => number,
    private readonly pollIntervalMs = 2000,
  ) {}

  /**
   * A pass's observation: one poll per backend for all its live jobs, at most every poll interval
   * (`due` is told each run so polled), then heartbeats.
   */
  async observe(
    live: readonly LiveAttempt[],
    objects: ObjectStore | undefined,
    due: (run: string) => void,
  ): Promise<Observation> {
    let jobs = new Map<string, ObservedJob>();
    const now = this.now();
    if (now >= this.nextPollAt) {
      this.nextPollAt = now + this.pollIntervalMs;
      jobs = await this.poll(live);
      for (const { run } of live) due(run);
    }
    return { jobs, heartbeats: await this.heartbeats(live, jobs, objects) };
  }

  /**
   * Polls each backend once for every live attempt it holds, and every backend that sweeps its
   * orphans (with no handles when nothing runs there), telling each which job names are owned.
   */
  async poll(live: readonly LiveAttempt[]): Promise<Map<string, ObservedJob>> {
    const byBackend = new Map<string, JobHandle[]>();
    const owned = new Map<string, Set<string>>();
    // A backend with nothing running is swept at start-up, then every IDLE_SWEEP_MS.
    const now = this.now();
    for (const [name, b] of this.adapters.all()) {
      if (!b.sweepsOrphans || now - (this.sweptAt.get(name) ?? -Infinity) < IDLE_SWEEP_MS) continue;
      byBackend.set(name, []);
    }
    for (const { attempt: a } of live) {
      owned.set(a.backend, (owned.get(a.backend) ?? new Set()).add(a.jobName));
      if (!a.jobId) continue;
      const list = byBackend.get(a.backend) ?? [];
      list.push({ backend: a.backend, jobName: a.jobName, jobId: a.jobId });
      byBackend.set(a.backend, list);
    }
    const out = new Map<string, ObservedJob>();
    const record = (jobs: readonly ObservedJob[]) => jobs.forEach((o) => out.set(o.jobName, o));
    await Promise.all(
      [...byBackend].map(async ([backend, handles]) => {
        const b = this.adapters.instance(backend);
        if (!b) return record(unobservable(handles, 'NoAdapter', `backend ${backend} is not loaded`));
        try {
          this.sweptAt.set(backend, now);
          record(await b.poll(handles, owned.get(backend) ?? new Set()));
        } catch (e) {
          record(unobservable(handles, 'PollFailed', errText(e)));
        }
      }),
    );
    return out;
  }

  /** Heartbeats of live attempts that are due a read (see HEARTBEAT_READ_MS), from the store. */
  async heartbeats(
    live: readonly LiveAttempt[],
    jobs: ReadonlyMap<string, ObservedJob>,
    objects: ObjectStore | undefined,
  ): Promise<Map<string, Heartbeat>> {
    const out = new Map<string, Heartbeat>();
    if (!objects) return out;
    const now = this.now();
    await Promise.all(
      live.map(async ({ run, attempt: a }) => {
        const ended = JUST_ENDED(jobs.get(a.jobName));
        if (!ended && now - (this.heartbeatReadAt.get(run) ?? 0) < HEARTBEAT_READ_MS) return;
        this.heartbeatReadAt.set(run, now);
        try {
          const raw = await objects.get(heartbeatKey(run, a.n));
          if (raw)
            out.set(
              run,
              await withWorkers(objects, run, JSON.parse(new TextDecoder().decode(raw)) as Heartbeat),
            );
        } catch (e) {
          this.logger.debug({ run, err: errText(e) }, 'cannot read heartbeat');
        }
      }),
    );
    return out;
  }

  /**
   * Asks `capacity()` of the backends that can tell, each at most every CAPACITY_TTL_MS and
   * bounded by CAPACITY_TIMEOUT_MS. A backend that cannot answer is "cannot tell": its declared
   * capabilities still apply.
   */
  async refreshCapacity(): Promise<void> {
    const now = this.now();
    await Promise.all(
      this.adapters.usable().map(async ([name, b]) => {
        if (!b.capacity) return;
        if (now - (this.capacities.get(name)?.at ?? -Infinity) < CAPACITY_TTL_MS) return;
        try {
          this.capacities.set(name, { at: now, capacity: await bounded(b.capacity(), CAPACITY_TIMEOUT_MS) });
        } catch (e) {
          this.capacities.set(name, { at: now });
          this.logger.warn(
            { backend: name, err: errText(e) },
            'cannot read free capacity; using declared capabilities',
          );
        }
      }),
    );
  }

  /** What a backend's `capacity()` said lately, if it can tell. */
  capacity(backend: string): Capacity | undefined {
    return this.capacities.get(backend)?.capacity;
  }
}

/**
 * A multi-host attempt's process 0 heartbeat with those of processes 1..N-1 hung on it (`workers`):
 * one small read each, so a hung or still-restoring rank shows in the run's conditions.
 */
async function withWorkers(objects: ObjectStore, run: string, hb: Heartbeat): Promise<Heartbeat> {
  const n = hb.processes ?? 1;
  if (n <= 1 || !Number.isInteger(n)) return hb;
  const workers = await Promise.all(
    Array.from({ length: Math.min(n, 4096) - 1 }, async (_, i) => {
      const raw = await objects.get(workerHeartbeatKey(run, hb.attempt, i + 1)).catch(() => undefined);
      try {
        return raw && (JSON.parse(new TextDecoder().decode(raw)) as Heartbeat);
      } catch {
        return undefined;
      }
    }),
  );
  return { ...hb, workers: workers.filter((w): w is Heartbeat => Boolean(w)) };
}

function bounded<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, rej) => {
      timer = setTimeout(() => rej(new Error(`capacity() took longer than ${ms / 1000}s`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Every run whose latest attempt is live, in name order, from a status index kept up to date as
 * status documents change: a pass over 10,000 runs does not look at each of them to find these.
 */
export function liveAttemptsOf(status: StatusWriter): () => LiveAttempt[] {
  const live = status.index<RunStatusDoc>('Run', (d) => isLiveAttempt(d.status.attempts.at(-1)));
  // In name order, as a scan of every run gave them (the order polls and plans see).
  return () =>
    [...live]
      .sort()
      .map((run) => ({ run, attempt: status.get<RunStatusDoc>('Run', run)!.status.attempts.at(-1)! }));
}
