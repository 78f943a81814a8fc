/**
 * For adapters whose jobs run on machines they create (TPU nodes, rented instances): the last
 * look at each running job over SSH, reused while it is recent and the job's exit record has not
 * appeared in the object store — so a poll costs the cloud's list plus one `HEAD` per job, and a
 * host is asked only when a job is new here, when it ended, or every `everyMs`.
 */
import { attemptPrefix } from '../../../runtime/checkpoint.js';
import { EXIT_FILE } from '../../../runtime/records.js';
import { JobState, type BackendContext, type JobHandle, type ObservedJob } from '../types.js';

/** Where a job's exit record goes: its run and attempt. */
export interface AttemptRecord {
  run: string;
  attempt: number;
}

export class RecentChecks {
  private readonly checked = new Map<string, { at: number; seen: ObservedJob; record?: AttemptRecord }>();

  constructor(
    private readonly ctx: Pick<BackendContext, 'now' | 'objects' | 'requestFor'>,
    private readonly everyMs: number,
  ) {}

  /**
   * The last observation of a running job, while it is recent and no exit record is in the store;
   * undefined when the job's host should be asked.
   */
  async recent(h: JobHandle): Promise<ObservedJob | undefined> {
    const last = this.checked.get(h.jobName);
    if (!last || this.ctx.now() - last.at > this.everyMs) return undefined;
    const store = this.ctx.objects?.();
    if (!store || !last.record) return undefined;
    const key = `${attemptPrefix(last.record.run, last.record.attempt)}${EXIT_FILE}`;
    return (await store.head(key).catch(() => true)) ? undefined : last.seen;
  }

  /**
   * What the host said: kept while the job runs. `known` is where its exit record goes when the
   * adapter has the request; otherwise it is rebuilt once (a restarted controller).
   */
  saw(h: JobHandle, seen: ObservedJob, known?: AttemptRecord): void {
    if (seen.state !== JobState.Running) return void this.checked.delete(h.jobName);
    const record = known ?? this.checked.get(h.jobName)?.record ?? this.rebuilt(h.jobName);
    this.checked.set(h.jobName, { at: this.ctx.now(), seen, ...(record ? { record } : {}) });
  }

  forget(jobName: string): void {
    this.checked.delete(jobName);
  }

  /** Drops what is kept of jobs no longer polled. */
  keepOnly(polled: ReadonlySet<string>): void {
    for (const jobName of this.checked.keys()) if (!polled.has(jobName)) this.checked.delete(jobName);
  }

  private rebuilt(jobName: string): AttemptRecord | undefined {
    const job = this.ctx.requestFor?.(jobName);
    return job && { run: job.run, attempt: job.attempt };
  }
}
