/**
 * Actions → results. Executes a pass's actions after their write-ahead record is published:
 * cancels one by one, submissions as one find-or-submit batch per backend that can batch, every
 * other submission as find-then-submit (adopt by name, never a second job). Each backend's results
 * are staged and committed as soon as they are in, so a slow backend never holds back a fast one.
 * Returns each run's outcome; the controller turns outcomes into queue decisions (`requeue`).
 */
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import type { Backend, JobRequest } from '../../backends/types.js';
import { asStallingIfDeterministic, isAdvError, type StallingError } from '../../errors.js';
import type { ControllerMetrics } from '../../metrics.js';
import { recordSubmitFailed, recordSubmitStalled, recordSubmitted } from '../../reconcile/results.js';
import type { RunAction } from '../../reconcile/run-plan.js';
import type { StatusWriter } from '../../status/writer.js';
import type { RunStatusDoc } from '../../status/types.js';
import type { BackendAdapters } from '../observe/adapters.js';
import { ownerKey, runKey } from '../desired/desired-state.js';
import { errText } from '../observe/observer.js';
import type { ReconcileOutcome } from '../plan/requeue.js';

export interface ExecutorDeps {
  adapters: BackendAdapters;
  status: StatusWriter;
  /** The request for an action's attempt; throws (StallingError for what a person must fix). */
  jobRequest(a: RunAction): JobRequest;
  /**
   * Readies what an attempt needs in the store before its job exists (a fork's checkpoint copy);
   * throws like `jobRequest`. One by one, a job found by name is not readied again (it was before
   * its submit); a batch readies every job first, so this must be harmless for a job that exists.
   */
  prepare?(a: RunAction): Promise<void>;
  /** Commits what is staged (called once per backend, as its results arrive). */
  commit(): Promise<number>;
  /** Says a key should be looked at again (an owning DAG whose child moved). */
  hint(key: string): void;
  metrics: ControllerMetrics;
  logger: Logger;
  now: () => number;
  concurrency: number;
}

/** A run key and what its action came to. */
export type ActionOutcome = [key: string, outcome: ReconcileOutcome];

export class Executor {
  private readonly limit: ReturnType<typeof pLimit>;

  constructor(private readonly d: ExecutorDeps) {
    this.limit = pLimit(d.concurrency);
  }

  /** Executes the actions; resolves when every backend's results are committed. */
  async executeAll(actions: readonly RunAction[]): Promise<ActionOutcome[]> {
    const outcomes: ActionOutcome[] = [];
    const batches = new Map<string, RunAction[]>();
    const singles = new Map<string, RunAction[]>();
    for (const a of actions) {
      // Submits go to their backend as one batch; it finds or submits each (`Backend.submit`).
      const into = a.type === 'submit' && this.d.adapters.instance(a.backend) ? batches : singles;
      into.set(a.backend, [...(into.get(a.backend) ?? []), a]);
    }
    await Promise.all([
      ...[...singles.values()].map(async (group) => {
        await Promise.all(
          group.map((a) => this.limit(async () => outcomes.push([runKey(a.run), await this.execute(a)]))),
        );
        await this.d.commit();
      }),
      ...[...batches].map(async ([name, group]) => {
        outcomes.push(...(await this.limit(() => this.submitBatch(name, group))));
        await this.d.commit();
      }),
    ]);
    return outcomes;
  }

  private async execute(a: RunAction): Promise<ReconcileOutcome> {
    const backend = this.d.adapters.instance(a.backend);
    if (!this.d.status.get<RunStatusDoc>('Run', a.run)) return {};
    if (a.type === 'cancel') return backend ? this.cancel(backend, a) : {};
    return this.submitFailed(a, new Error(`backend ${a.backend} is not available`));
  }

  private async cancel(backend: Backend, a: RunAction & { type: 'cancel' }): Promise<ReconcileOutcome> {
    try {
      const handle =
        (a.jobId ? { backend: a.backend, jobName: a.jobName, jobId: a.jobId } : undefined) ??
        (await backend.find(a.jobName));
      if (handle) await backend.cancel(handle);
      this.d.logger.info({ run: a.run, job: a.jobName }, 'cancelled');
      return {};
    } catch (e) {
      this.d.logger.warn({ run: a.run, err: errText(e) }, 'cancel failed; will retry');
      return asError(e);
    }
  }

  /** One find-or-submit call for every submission of the pass to one backend. */
  private async submitBatch(backendName: string, group: RunAction[]): Promise<ActionOutcome[]> {
    const backend = this.d.adapters.instance(backendName)!;
    const out: ActionOutcome[] = [];
    const ready: { a: RunAction; req: JobRequest }[] = [];
    // Readied even if the batch then adopts the job: a fork's copy is made only while it has none.
    const prepared = await Promise.all(
      group.map((a) =>
        (this.d.prepare?.(a) ?? Promise.resolve()).then(
          () => undefined,
          (e: unknown) => e,
        ),
      ),
    );
    group.forEach((a, i) => {
      try {
        if (prepared[i] !== undefined) throw prepared[i];
        ready.push({ a, req: this.d.jobRequest(a) });
      } catch (e) {
        out.push([runKey(a.run), this.submitFailed(a, e)]);
      }
    });
    if (!ready.length) return out;
    let results: Awaited<ReturnType<Backend['submit']>>;
    try {
      results = await backend.submit(ready.map((r) => r.req));
    } catch (e) {
      return [...out, ...ready.map(({ a }): ActionOutcome => [runKey(a.run), this.submitFailed(a, e)])];
    }
    ready.forEach(({ a }, i) => {
      const r = results[i] ?? new Error(`${backendName} returned no result for ${a.jobName}`);
      out.push([
        runKey(a.run),
        r instanceof Error ? this.submitFailed(a, r) : this.submitted(a, r.jobId, Boolean(r.adopted)),
      ]);
    });
    return out;
  }

  private submitted(a: RunAction, jobId: string, adopted: boolean): ReconcileOutcome {
    this.d.metrics.submissions.inc({ backend: a.backend });
    const current = this.d.status.get<RunStatusDoc>('Run', a.run);
    if (!current) return {};
    if (adopted) this.d.logger.info({ run: a.run, job: a.jobName, jobId }, 'adopted existing job');
    this.stage(a, recordSubmitted(current, a.attempt, jobId, adopted, this.d.now()));
    return { resetBackoff: true };
  }

  /**
   * A submission that did not go through. An unknown outcome keeps the write-ahead record (the
   * job is found by name next time, never submitted twice); what a person must fix stalls the run;
   * anything else ends the attempt as an infrastructure failure, retried after a backoff.
   */
  private submitFailed(a: RunAction, e: unknown): ReconcileOutcome {
    const current = this.d.status.get<RunStatusDoc>('Run', a.run);
    const err = asError(e);
    if (!current) return err;
    const where = { run: a.run, attempt: a.attempt, backend: a.backend, err: errText(e) };
    if (isAdvError(e) && e.data.unknownOutcome) {
      this.d.logger.warn(where, 'submit outcome unknown; will find or submit again');
      return err;
    }
    const stalled = asStallingIfDeterministic(e);
    if (stalled) {
      this.d.logger.warn(where, 'run stalled: a person must fix its inputs');
      this.stage(a, recordSubmitStalled(current, a.attempt, stallOf(stalled), this.d.now()));
      return stalled;
    }
    this.d.metrics.submitFailures.inc({ backend: a.backend });
    this.d.logger.warn(where, 'submit failed');
    this.stage(a, recordSubmitFailed(current, a.attempt, errText(e), this.d.now()));
    return err;
  }

  private stage(a: RunAction, r: { doc: RunStatusDoc; summary: string }): void {
    const owner = ownerKey(r.doc);
    if (owner) this.d.hint(owner);
    this.d.status.stage('Run', a.run, r.doc, {
      summary: r.summary,
      trailers: [
        ['Run', a.run],
        ['Attempt', String(a.attempt)],
      ],
    });
  }
}

function stallOf(e: StallingError): { reason: string; message: string; hint?: string } {
  return { reason: e.data.reason, message: e.message, ...(e.data.hint ? { hint: e.data.hint } : {}) };
}

function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
