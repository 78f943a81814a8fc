/**
 * The object-store side of `adv exec`: restore before the workload starts, upload every finished
 * checkpoint while it runs (step-finder.ts says which are finished), heartbeats, logs and metrics
 * (metrics-ship.ts) in immutable parts, and the exit record.
 *
 * A multi-host attempt (N processes, one adv exec each) commits as a gang (gang.ts): every process
 * ships its files and a part record, process 0 writes the manifest once all parts are there
 * (committer.ts). Process 0 chooses the step every process restores, before any workload starts
 * (restore-barrier.ts).
 */
import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import chokidar, { type FSWatcher } from 'chokidar';
import {
  attemptPrefix,
  commitManifest,
  logsPrefix,
  stepPrefix,
  uploadFiles,
  type CheckpointManifest,
  type ManifestFile,
  type RestoreResult,
} from './checkpoint.js';
import { bounded } from './bounded.js';
import { GangCommitter } from './committer.js';
import { MetricsShipper } from './metrics-ship.js';
import { hashStoredStep, shareOf, writePart } from './gang.js';
import { workerHeartbeatKey, type Heartbeat } from './heartbeat.js';
import type { ExitRecord } from './records.js';
import { CkptMode, restoreAsPrimary, restoreAsWorker } from './restore-barrier.js';
import { DirStepFinder, StoreStepFinder, type StepFinder } from './step-finder.js';
import type { ObjectStore } from './store/types.js';

export interface WorkerOptions {
  store: ObjectStore;
  run: string;
  attempt: number;
  /** Where finished steps appear: this process's dir, the attempt's shared dir, or (store mode over `file://`) the store's. */
  ckptDir: string;
  heartbeatSec?: number;
  logFlushMs?: number;
  logPartBytes?: number;
  settleMs?: number;
  commitMode?: 'auto' | 'marker';
  log: (line: string) => void;
  /** Progress of long transfers (a TTY renders a bar). */
  progress?: (label: string, bytes: number, total: number) => void;
  /**
   * How long the final writes may take once the workload has ended (its last checkpoint, the
   * other processes' parts, output, the exit record, a last heartbeat): past it adv exec says what
   * it could not write and ends, so a store that stopped answering never keeps a worker, and its
   * allocation, alive. The exit record and the heartbeat get RECORD_MS each (at most this) even
   * when it is spent. Default FINISH_TIMEOUT_MS.
   */
  finishTimeoutMs?: number;
  /**
   * This process's index in a multi-host job (default 0), and how many there are (default 1).
   * Every process ships its checkpoint files and a part record, heartbeats and its output;
   * process 0 also chooses the restore, commits manifests, and writes the exit record.
   */
  process?: number;
  processes?: number;
  /** How the processes see the checkpoint dir (default per-process). */
  ckptMode?: CkptMode;
  /** How long process k > 0 waits for process 0's restore record. Default RESTORE_WAIT_MS. */
  restoreWaitMs?: number;
  /** How often process 0 looks for the other processes' parts. Default 500 ms. */
  partPollMs?: number;
  /**
   * For tests: while this file exists, the part record of a step waits (its files are in the
   * store already), so a test can kill adv exec between the two. Set by `$ADV_EXEC_HOLD_PART`.
   */
  holdPartWhile?: string;
  /** What says which steps are finished, where not the default for `ckptMode` (tests). */
  finder?: StepFinder;
  /**
   * The workload's metrics file (`$ADV_METRICS_FILE`): process 0 ships its lines with the logs
   * (metrics-ship.ts), dropping any line that holds one of `secrets`.
   */
  metricsFile?: string;
  secrets?: readonly string[];
  /** How often the metrics file's size is looked at, to ship a part once it holds `logPartBytes`. Default 250 ms. */
  metricsPollMs?: number;
  /** Told of each step this process committed (process 0): retention.ts's RetentionKeeper. */
  afterCommit?: (m: CheckpointManifest) => void;
}

/** Default of `finishTimeoutMs`: room for a large last checkpoint on a slow link. */
export const FINISH_TIMEOUT_MS = 15 * 60_000;
/** What a small final write (the exit record, a heartbeat) gets at least. */
export const RECORD_MS = 30_000;
/** Default of `restoreWaitMs`: process 0 may be restoring a large checkpoint. */
export const RESTORE_WAIT_MS = 30 * 60_000;

export class Worker {
  private watcher: FSWatcher | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private scanTimer: NodeJS.Timeout | undefined;
  private partTimer: NodeJS.Timeout | undefined;
  private logTimer: NodeJS.Timeout | undefined;
  private metricsTimer: NodeJS.Timeout | undefined;
  private readonly metrics: MetricsShipper | undefined;
  private readonly pending = new Set<number>();
  private uploading: Promise<void> = Promise.resolve();
  private current: number | undefined;
  private last: CheckpointManifest | undefined;
  private restored: RestoreResult | undefined;
  private waitingForRestore = false;
  private fetchingDataset: Heartbeat['fetchingDataset'];
  private finishedAt: string | undefined;
  private started = false;
  private logBuf: Buffer[] = [];
  private logBytes = 0;
  private logPart = 0;
  private logFlushing: Promise<void> = Promise.resolve();
  /** The scan under way: scans run one at a time (see `scan`). */
  private scanning: Promise<void> | undefined;
  private heartbeating: Promise<void> = Promise.resolve();
  private readonly settleMs: number;
  private readonly finder: StepFinder;
  private readonly committer: GangCommitter | undefined;

  constructor(private readonly o: WorkerOptions) {
    this.settleMs = o.settleMs ?? 200;
    const overS3 = this.mode === CkptMode.Store && !o.store.url.startsWith('file:');
    this.finder =
      o.finder ??
      (overS3
        ? new StoreStepFinder(o.store, o.run)
        : new DirStepFinder(o.ckptDir, {
            settleMs: this.settleMs,
            // In the store a step is written in place: only the framework's marker says it is done.
            ...(this.mode === CkptMode.Store
              ? { commitMode: 'marker' as const }
              : o.commitMode
                ? { commitMode: o.commitMode }
                : {}),
          }));
    this.committer =
      this.primary && this.n > 1
        ? new GangCommitter({
            store: o.store,
            run: o.run,
            attempt: o.attempt,
            processes: this.n,
            log: o.log,
            committed: (m, ms) => this.committed(m, ms),
          })
        : undefined;
    this.metrics =
      this.primary && o.metricsFile
        ? new MetricsShipper({
            store: o.store,
            run: o.run,
            attempt: o.attempt,
            file: o.metricsFile,
            log: o.log,
            ...(o.secrets ? { secrets: o.secrets } : {}),
            ...(o.logPartBytes ? { partBytes: o.logPartBytes } : {}),
          })
        : undefined;
  }

  get lastCommitted(): CheckpointManifest | undefined {
    return this.last;
  }

  /** Process 0 of the attempt (or its only one): it chooses the restore, commits, writes the exit record. */
  get primary(): boolean {
    return !this.o.process;
  }

  private get k(): number {
    return this.o.process ?? 0;
  }
  private get n(): number {
    return this.o.processes ?? 1;
  }
  private get mode(): CkptMode {
    return this.o.ckptMode ?? CkptMode.PerProcess;
  }

  /**
   * Before the workload starts. Process 0: the newest checkpoint that verifies, into its dir (in
   * store mode, nothing to download: newer uncommitted steps are removed instead), then, with
   * several processes, the record of that choice. Process k > 0: waits for the record (until
   * `signal` aborts), then restores the same step (per-process mode: into its own dir).
   */
  async restore(signal?: AbortSignal): Promise<RestoreResult | undefined> {
    const c = {
      store: this.o.store,
      run: this.o.run,
      attempt: this.o.attempt,
      ckptDir: this.o.ckptDir,
      process: this.k,
      processes: this.n,
      mode: this.mode,
      log: this.o.log,
      ...(this.o.progress ? { progress: (b: number, t: number) => this.o.progress!('restore', b, t) } : {}),
    };
    // A gang heartbeats from the start: a rank still restoring, or waiting for another, is seen.
    this.waitingForRestore = this.n > 1;
    if (this.n > 1) this.beginHeartbeats();
    try {
      this.restored = this.primary
        ? await restoreAsPrimary(c)
        : await restoreAsWorker(c, {
            timeoutMs: this.o.restoreWaitMs ?? RESTORE_WAIT_MS,
            ...(signal ? { signal } : {}),
          });
    } finally {
      this.waitingForRestore = false;
    }
    if (this.n > 1) void this.heartbeat();
    const r = this.restored;
    if (r) {
      this.last = r.manifest;
      this.o.log(
        this.mode === CkptMode.Store
          ? `checkpoint ${r.step} is the newest committed: the workload restores it from ${this.o.store.url}${stepPrefix(this.o.run, r.step)}`
          : this.mode === CkptMode.PerProcess || this.primary
            ? `restored checkpoint ${r.step} (${r.manifest.files.length} files) into ${this.o.ckptDir}`
            : `process ${this.k}: starting from checkpoint ${r.step}, which process 0 restored into ${this.o.ckptDir}`,
      );
    } else this.o.log('no committed checkpoint: starting from scratch');
    // Steps already there (restored, or left by an earlier attempt) are not shipped again. A
    // dir others write to may already hold a new step of this attempt past the restored one.
    const own = this.primary || this.mode === CkptMode.PerProcess;
    for (const s of await this.finder.present()) if (own || s <= (r?.step ?? -1)) this.finder.ignore(s);
    return r;
  }

  /**
   * The dataset being fetched before the workload starts (undefined: done). Heartbeats begin with
   * the first report, so a long fetch is seen as progress, not as a worker that never started.
   */
  datasetProgress(p: Heartbeat['fetchingDataset']): void {
    const first = !this.fetchingDataset && p;
    this.fetchingDataset = p;
    if (first) this.beginHeartbeats();
  }

  /** While the workload runs: watch for finished steps, heartbeat, ship logs. */
  async start(): Promise<void> {
    this.started = true;
    this.logTimer = setInterval(() => {
      void this.flushLogs();
      void this.metrics?.flush();
    }, this.o.logFlushMs ?? 2000);
    this.logTimer.unref();
    if (this.metrics) {
      this.metricsTimer = setInterval(() => void this.metrics!.poll(), this.o.metricsPollMs ?? 250);
      this.metricsTimer.unref();
    }
    if (this.finder instanceof DirStepFinder) {
      this.watcher = chokidar.watch(this.o.ckptDir, { depth: 1, ignoreInitial: true });
      this.watcher.on('all', () => this.scheduleScan(100));
      await new Promise<void>((r) => this.watcher!.once('ready', () => r()));
    }
    // Events can be missed or coalesced; a periodic scan backs them up (the only one over S3).
    const every = this.finder instanceof DirStepFinder ? Math.max(100, this.settleMs / 2) : 2000;
    this.scanTimer = setInterval(() => this.scheduleScan(0), every);
    this.scanTimer.unref();
    if (this.committer) {
      this.partTimer = setInterval(() => void this.committer!.poll(), this.o.partPollMs ?? 500);
      this.partTimer.unref();
    }
    this.beginHeartbeats();
  }

  /** Not awaited: a store that does not answer must not keep adv exec from supervising the workload. */
  private beginHeartbeats(): void {
    if (this.heartbeatTimer) return;
    void this.heartbeat();
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), (this.o.heartbeatSec ?? 15) * 1000);
    this.heartbeatTimer.unref();
  }

  /** The workload's output: copied to the terminal by the caller, shipped here in parts. */
  output(chunk: Buffer): void {
    this.logBuf.push(chunk);
    this.logBytes += chunk.length;
    if (this.logBytes >= (this.o.logPartBytes ?? 256 * 1024)) void this.flushLogs();
  }

  private flushLogs(): Promise<void> {
    this.logFlushing = this.logFlushing.then(async () => {
      if (this.logBytes === 0) return;
      const body = Buffer.concat(this.logBuf);
      this.logBuf = [];
      this.logBytes = 0;
      const key = `${logsPrefix(this.o.run, this.o.attempt, this.o.process)}part-${String(this.logPart++).padStart(6, '0')}`;
      await this.o.store
        .put(key, body)
        .catch((e: Error) => this.o.log(`warning: cannot ship logs: ${e.message}`));
    });
    return this.logFlushing;
  }

  /**
   * Writes a heartbeat after the one before it: puts of one key that overlap may land in any
   * order, and a stale one landing last would take back what the newer said (a committed step, or
   * `finishedAt`, on which process 0 decides that a process wrote its last part).
   */
  private heartbeat(): Promise<void> {
    this.heartbeating = this.heartbeating.then(() => this.writeHeartbeat());
    return this.heartbeating;
  }

  private async writeHeartbeat(): Promise<void> {
    const awaiting = this.committer?.awaiting;
    const body: Heartbeat = {
      time: new Date().toISOString(),
      run: this.o.run,
      attempt: this.o.attempt,
      host: hostname(),
      pid: process.pid,
      ...(this.restored ? { restoredFrom: this.restored.step } : {}),
      ...(this.last
        ? {
            lastCheckpoint: {
              step: this.last.step,
              createdAt: this.last.createdAt,
              uri: this.o.store.url + stepPrefix(this.o.run, this.last.step),
            },
          }
        : {}),
      ...(this.current !== undefined ? { uploading: this.current } : {}),
      ...(this.n > 1 ? { processes: this.n, ...(this.k ? { process: this.k } : {}) } : {}),
      ...(this.waitingForRestore ? { waitingForRestore: true } : {}),
      ...(this.fetchingDataset ? { fetchingDataset: this.fetchingDataset } : {}),
      ...(awaiting ? { awaitingParts: awaiting } : {}),
      ...(this.finishedAt ? { finishedAt: this.finishedAt } : {}),
    };
    await this.o.store
      .put(workerHeartbeatKey(this.o.run, this.o.attempt, this.k), JSON.stringify(body, null, 2) + '\n')
      .catch((e: Error) => this.o.log(`warning: heartbeat failed: ${e.message}`));
  }

  private scheduleScan(delayMs: number): void {
    setTimeout(() => void this.scan(false), delayMs).unref();
  }

  /**
   * Finds finished step dirs and queues their upload. A periodic scan while one is under way is
   * dropped; the final scan waits for it: a step that scan already took as finished is not in the
   * upload queue until it returns, and a final scan beside it would not see the step (it is
   * reported once), so adv exec could end, and say it ended, before that step's upload.
   */
  private async scan(final: boolean, workloadExitedOnItsOwn = false): Promise<void> {
    if (this.scanning && !final) return;
    while (this.scanning) await this.scanning;
    const run = (async () => {
      try {
        for (const step of await this.finder.finished(final, workloadExitedOnItsOwn)) this.queue(step);
      } catch (e) {
        this.o.log(`warning: cannot look for finished checkpoints: ${(e as Error).message}`);
      }
    })();
    this.scanning = run;
    await run;
    if (this.scanning === run) this.scanning = undefined;
  }

  private queue(step: number): void {
    this.pending.add(step);
    this.uploading = this.uploading.then(() => this.uploadNewest());
  }

  /** Ships the newest pending step; older pending ones are superseded and skipped. */
  private async uploadNewest(): Promise<void> {
    if (this.pending.size === 0) return;
    const step = Math.max(...this.pending);
    for (const s of this.pending)
      if (s < step) this.o.log(`checkpoint ${s} superseded by ${step} before upload; skipped`);
    this.pending.clear();
    if (this.last && step <= this.last.step) return;
    this.current = step;
    const t0 = Date.now();
    try {
      const files = await this.shipFiles(step);
      if (this.n === 1) {
        const m = await commitManifest(this.o.store, {
          run: this.o.run,
          step,
          attempt: this.o.attempt,
          files,
        });
        this.committed(m, Date.now() - t0);
        return;
      }
      await this.holdPart(step);
      await writePart(this.o.store, {
        run: this.o.run,
        step,
        attempt: this.o.attempt,
        process: this.k,
        processes: this.n,
        files,
      });
      this.o.log(`checkpoint ${step}: part ${this.k} of ${this.n} written (${files.length} files)`);
      if (this.committer) {
        this.committer.add(step);
        void this.committer.poll();
      }
    } catch (e) {
      this.o.log(`warning: upload of checkpoint ${step} failed: ${(e as Error).message}; it does not count`);
    } finally {
      this.current = undefined;
    }
  }

  private async holdPart(step: number): Promise<void> {
    const hold = this.o.holdPartWhile;
    if (!hold || !existsSync(hold)) return;
    this.o.log(`checkpoint ${step}: files uploaded; holding the part record while ${hold} exists`);
    while (existsSync(hold)) await sleep(50);
  }

  /**
   * This process's files of a finished step, in the store: all of its own dir (per-process), its
   * share of a dir all processes see (shared: uploaded), or of what the workload wrote to the
   * store itself (store: hashed where it lies).
   */
  private async shipFiles(step: number): Promise<ManifestFile[]> {
    const split = this.mode !== CkptMode.PerProcess && this.n > 1;
    const mine = (p: string) => !split || shareOf(p, this.n) === this.k;
    if (this.mode === CkptMode.Store) return hashStoredStep(this.o.store, this.o.run, step, mine);
    const dir = join(this.o.ckptDir, String(step));
    const { files } = await uploadFiles(this.o.store, stepPrefix(this.o.run, step), dir, {
      only: mine,
      onProgress: (b, t) => this.o.progress?.(`upload ${step}`, b, t),
    });
    return files;
  }

  private committed(m: CheckpointManifest, ms: number): void {
    if (this.last && m.step <= this.last.step) return;
    this.last = m;
    this.o.log(
      `committed checkpoint ${m.step} (${m.files.length} files, ${m.totalBytes} bytes${m.processes ? `, ${m.processes} processes` : ''}, ${ms} ms)`,
    );
    this.o.afterCommit?.(m);
    void this.heartbeat();
  }

  /**
   * After the workload: last checkpoints (and, on process 0, the other processes' parts), logs,
   * the exit record, a last heartbeat — each bounded by what is left of `finishTimeoutMs`, and a
   * step that runs out is logged and left behind (a transfer still under way ends with the process).
   */
  async finish(record: ExitRecord, opts: { workloadExitedOnItsOwn: boolean }): Promise<void> {
    for (const t of [this.scanTimer, this.heartbeatTimer, this.logTimer, this.partTimer, this.metricsTimer])
      if (t) clearInterval(t);
    const budgetMs = this.o.finishTimeoutMs ?? FINISH_TIMEOUT_MS;
    const deadline = Date.now() + budgetMs;
    // The exit record and the heartbeat are small: each gets a try even when the budget is spent.
    const small = () => Math.max(deadline, Date.now() + Math.min(RECORD_MS, budgetMs));
    const step = (what: string, work: Promise<unknown>, until = deadline) =>
      bounded(what, work, until, this.o.log);
    const url = this.o.store.url;
    await step('closing the checkpoint dir watch', this.watcher?.close() ?? Promise.resolve());
    await step(
      `the upload of its last checkpoint to ${url}`,
      this.scan(true, opts.workloadExitedOnItsOwn).then(() => this.uploading),
    );
    await step(`shipping its output to ${url}`, this.flushLogs());
    if (this.metrics) await step(`shipping its metrics to ${url}`, this.metrics.flush(true));
    if (this.committer)
      await step(`the other processes' parts of its last checkpoint`, this.committer.settle(deadline));
    // Process 0 ends last (once the others' workloads ran: not when it failed before they could).
    if (this.committer && this.started)
      await step(`the end of the other processes`, this.committer.awaitOthersEnded(deadline - 1000));
    if (!this.primary) {
      this.finishedAt = new Date().toISOString();
      return void (await step(`a last heartbeat to ${url}`, this.heartbeat(), small()));
    }
    const exit = {
      ...record,
      ...(this.last ? { lastCheckpoint: { step: this.last.step, createdAt: this.last.createdAt } } : {}),
    };
    await step(
      `writing the exit record to ${url}`,
      this.o.store
        .put(`${attemptPrefix(this.o.run, this.o.attempt)}exit.json`, JSON.stringify(exit, null, 2) + '\n')
        .catch((e: Error) => this.o.log(`warning: cannot write exit record: ${e.message}`)),
      small(),
    );
    await step(`a last heartbeat to ${url}`, this.heartbeat(), small());
  }
}
