/**
 * The object-store side of `adv exec`: restore before the workload starts, upload every finished
 * checkpoint while it runs, heartbeats, logs in immutable parts, and the exit record.
 *
 * When is a step dir "finished"? The workload needs no SDK, only this contract (docs/checkpointing.md):
 *   - write the step to a temporary name and rename it to `<step>` (Orbax does this), or
 *   - write a `COMMITTED` file into `<step>/` last.
 * A digit-named dir counts as finished when it holds `COMMITTED`, or when it was already non-empty
 * the first time we saw it and has not changed for a settle period (the rename pattern). With
 * `commitMode: 'marker'` only the marker counts. Nothing else is ever uploaded as a checkpoint.
 */
import { existsSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import chokidar, { type FSWatcher } from 'chokidar';
import {
  attemptPrefix,
  COMMITTED_MARKER,
  isStepName,
  logsPrefix,
  restoreLatest,
  stepPrefix,
  uploadCheckpoint,
  type CheckpointManifest,
  type RestoreResult,
} from './checkpoint.js';
import { heartbeatKey, type Heartbeat } from './heartbeat.js';
import type { ExitRecord } from './records.js';
import type { ObjectStore } from './store/types.js';

export interface WorkerOptions {
  store: ObjectStore;
  run: string;
  attempt: number;
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
   * How long the final writes may take once the workload has ended (its last checkpoint, output,
   * the exit record, a last heartbeat): past it adv exec says what it could not write and ends,
   * so a store that stopped answering never keeps a worker, and its allocation, alive. The exit
   * record and the heartbeat get RECORD_MS each (at most this) even when it is spent. Default
   * FINISH_TIMEOUT_MS.
   */
  finishTimeoutMs?: number;
  /**
   * This process's index in a multi-host job (default 0). Only process 0 restores and uploads
   * checkpoints, heartbeats and the exit record; the others ship their output only, to their own
   * logs prefix (`logsPrefix`).
   */
  process?: number;
}

/** Default of `finishTimeoutMs`: room for a large last checkpoint on a slow link. */
export const FINISH_TIMEOUT_MS = 15 * 60_000;
/** What a small final write (the exit record, a heartbeat) gets at least. */
export const RECORD_MS = 30_000;

interface Seen {
  nonEmptyAtFirstSight: boolean;
  snapshot: string;
  stableSince: number;
}

export class Worker {
  private watcher: FSWatcher | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private scanTimer: NodeJS.Timeout | undefined;
  private logTimer: NodeJS.Timeout | undefined;
  private readonly seen = new Map<number, Seen>();
  private readonly uploaded = new Set<number>();
  private readonly pending = new Set<number>();
  private uploading: Promise<void> = Promise.resolve();
  private current: number | undefined;
  private last: CheckpointManifest | undefined;
  private restored: RestoreResult | undefined;
  private logBuf: Buffer[] = [];
  private logBytes = 0;
  private logPart = 0;
  private logFlushing: Promise<void> = Promise.resolve();
  private scanning = false;
  private readonly settleMs: number;

  constructor(private readonly o: WorkerOptions) {
    this.settleMs = o.settleMs ?? 200;
  }

  get lastCommitted(): CheckpointManifest | undefined {
    return this.last;
  }

  /** Process 0 of the attempt (or its only one): it owns checkpoints, heartbeats, the exit record. */
  get primary(): boolean {
    return !this.o.process;
  }

  /** Before the workload starts: the newest checkpoint that verifies, into ADV_CKPT_DIR. */
  async restore(): Promise<RestoreResult | undefined> {
    if (!this.primary) {
      this.o.log(`process ${this.o.process}: process 0 restores and uploads the checkpoints`);
      return undefined;
    }
    this.restored = await restoreLatest(this.o.store, this.o.run, this.o.ckptDir, {
      warn: (m) => this.o.log(`warning: ${m}`),
      onProgress: (b, t) => this.o.progress?.('restore', b, t),
    });
    if (this.restored) {
      this.uploaded.add(this.restored.step);
      this.last = this.restored.manifest;
      this.o.log(
        `restored checkpoint ${this.restored.step} (${this.restored.manifest.files.length} files) into ${this.o.ckptDir}`,
      );
    } else {
      this.o.log('no committed checkpoint: starting from scratch');
    }
    // Steps already on disk (restored, or left by an earlier attempt here) are not uploaded again.
    for (const name of await readdir(this.o.ckptDir).catch(() => []))
      if (isStepName(name)) this.uploaded.add(Number(name));
    return this.restored;
  }

  /** While the workload runs: watch for finished steps, heartbeat, ship logs. */
  async start(): Promise<void> {
    this.logTimer = setInterval(() => void this.flushLogs(), this.o.logFlushMs ?? 2000);
    this.logTimer.unref();
    if (!this.primary) return;
    this.watcher = chokidar.watch(this.o.ckptDir, { depth: 1, ignoreInitial: true });
    this.watcher.on('all', () => this.scheduleScan(100));
    await new Promise<void>((r) => this.watcher!.once('ready', () => r()));
    // Events can be missed or coalesced; a slow periodic scan backs them up.
    this.scanTimer = setInterval(() => this.scheduleScan(0), Math.max(100, this.settleMs / 2));
    // Not awaited: a store that does not answer must not keep adv exec from supervising the workload.
    void this.heartbeat();
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), (this.o.heartbeatSec ?? 15) * 1000);
    for (const t of [this.scanTimer, this.heartbeatTimer]) t.unref();
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

  private async heartbeat(): Promise<void> {
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
    };
    await this.o.store
      .put(heartbeatKey(this.o.run, this.o.attempt), JSON.stringify(body, null, 2) + '\n')
      .catch((e: Error) => this.o.log(`warning: heartbeat failed: ${e.message}`));
  }

  private scheduleScan(delayMs: number): void {
    setTimeout(() => void this.scan(false), delayMs).unref();
  }

  /** Finds finished step dirs and queues their upload. */
  private async scan(final: boolean, workloadExitedOnItsOwn = false): Promise<void> {
    if (this.scanning && !final) return;
    this.scanning = true;
    try {
      const names = (await readdir(this.o.ckptDir, { withFileTypes: true }).catch(() => [])).filter(
        (e) => e.isDirectory() && isStepName(e.name),
      );
      for (const e of names) {
        const step = Number(e.name);
        if (this.uploaded.has(step) || this.pending.has(step) || step === this.current) continue;
        const dir = join(this.o.ckptDir, e.name);
        if (existsSync(join(dir, COMMITTED_MARKER))) {
          this.queue(step);
          continue;
        }
        if (this.o.commitMode === 'marker') continue;
        const snap = await snapshot(dir);
        const prev = this.seen.get(step);
        const now = Date.now();
        if (!prev) {
          this.seen.set(step, { nonEmptyAtFirstSight: snap !== '', snapshot: snap, stableSince: now });
          // At exit, a workload that ended by itself has finished writing.
          if (final && workloadExitedOnItsOwn && snap !== '') this.queue(step);
          continue;
        }
        if (prev.snapshot !== snap) {
          prev.snapshot = snap;
          prev.stableSince = now;
          continue;
        }
        const settled = now - prev.stableSince >= this.settleMs;
        if ((prev.nonEmptyAtFirstSight && settled) || (final && workloadExitedOnItsOwn && snap !== ''))
          this.queue(step);
      }
    } finally {
      this.scanning = false;
    }
  }

  private queue(step: number): void {
    this.pending.add(step);
    this.uploading = this.uploading.then(() => this.uploadNewest());
  }

  /** Uploads the newest pending step; older pending ones are superseded and skipped. */
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
      const m = await uploadCheckpoint(this.o.store, {
        run: this.o.run,
        step,
        attempt: this.o.attempt,
        dir: join(this.o.ckptDir, String(step)),
        onProgress: (b, t) => this.o.progress?.(`upload ${step}`, b, t),
      });
      this.uploaded.add(step);
      this.last = m;
      this.o.log(
        `committed checkpoint ${step} (${m.files.length} files, ${m.totalBytes} bytes, ${Date.now() - t0} ms)`,
      );
      void this.heartbeat();
    } catch (e) {
      this.o.log(`warning: upload of checkpoint ${step} failed: ${(e as Error).message}; it does not count`);
    } finally {
      this.current = undefined;
    }
  }

  /**
   * After the workload: last checkpoints, logs, the exit record, a last heartbeat — each step
   * bounded by what is left of `finishTimeoutMs`, and a step that runs out is logged and left
   * behind (a transfer still under way ends with the process).
   */
  async finish(record: ExitRecord, opts: { workloadExitedOnItsOwn: boolean }): Promise<void> {
    for (const t of [this.scanTimer, this.heartbeatTimer, this.logTimer]) if (t) clearInterval(t);
    const budgetMs = this.o.finishTimeoutMs ?? FINISH_TIMEOUT_MS;
    const deadline = Date.now() + budgetMs;
    // The exit record and the heartbeat are small: each gets a try even when the budget is spent.
    const small = () => Math.max(deadline, Date.now() + Math.min(RECORD_MS, budgetMs));
    const step = (what: string, work: Promise<unknown>, until = deadline) => this.bounded(what, work, until);
    const url = this.o.store.url;
    if (!this.primary) return void (await step(`shipping its output to ${url}`, this.flushLogs()));
    await step('closing the checkpoint dir watch', this.watcher?.close() ?? Promise.resolve());
    await step(
      `the upload of its last checkpoint to ${url}`,
      this.scan(true, opts.workloadExitedOnItsOwn).then(() => this.uploading),
    );
    await step(`shipping its output to ${url}`, this.flushLogs());
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

  /** Waits for `work` until `deadline`; past it, says what was left undone and moves on. */
  private async bounded(what: string, work: Promise<unknown>, deadline: number): Promise<void> {
    const ms = Math.max(0, deadline - Date.now());
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<true>((r) => {
      timer = setTimeout(() => r(true), ms);
    });
    const done = work.then(
      () => false,
      (e: Error) => (this.o.log(`warning: ${what} failed: ${e.message}`), false),
    );
    const late = await Promise.race([done, timedOut]);
    clearTimeout(timer);
    if (late)
      this.o.log(
        `warning: gave up on ${what} after ${Math.round(ms / 1000)} s (adv exec bounds its final writes: --finish-timeout); ending without it`,
      );
  }
}

/** A cheap fingerprint of a dir: names, sizes and mtimes of its files ('' when empty). */
async function snapshot(dir: string): Promise<string> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  const parts: string[] = [];
  for (const e of entries) {
    if (!e.isFile()) continue;
    const p = join(e.parentPath, e.name);
    const s = await stat(p).catch(() => undefined);
    if (s) parts.push(`${p}:${s.size}:${s.mtimeMs}`);
  }
  return parts.sort().join('|');
}
