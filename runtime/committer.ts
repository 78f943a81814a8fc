/**
 * Process 0's side of a gang commit: the steps whose own part it has written, waiting for the
 * parts of the other processes of this attempt. A step commits (its manifest is written) once
 * all N parts are there, agree, and name files the store holds; a newer step that commits
 * supersedes older ones still waiting. At the end the wait is bounded (`settle`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { commitManifest, type CheckpointManifest } from './checkpoint.js';
import { missingInStore, readParts, unionOfParts, type CheckpointPart } from './gang.js';
import { workerHeartbeatKey, type Heartbeat } from './heartbeat.js';
import type { ObjectStore } from './store/types.js';

/** A step waiting longer than this for another process's part is said in the log, once. */
export const SLOW_PARTS_MS = 60_000;

export interface CommitterOptions {
  store: ObjectStore;
  run: string;
  attempt: number;
  processes: number;
  log: (line: string) => void;
  /** A step committed: it is the attempt's newest checkpoint. */
  committed: (m: CheckpointManifest, ms: number) => void;
}

export class GangCommitter {
  /** Step → when process 0 wrote its own part. */
  private readonly waiting = new Map<number, number>();
  private readonly missing = new Map<number, number[]>();
  private polling: Promise<void> = Promise.resolve();
  private readonly warned = new Set<number>();

  constructor(private readonly o: CommitterOptions) {}

  /** Process 0 has written its part of `step`: commit it once the others have. */
  add(step: number): void {
    this.waiting.set(step, Date.now());
  }

  /** The newest step still waiting, and whose parts it lacks (for the heartbeat). */
  get awaiting(): { step: number; missing: number[] } | undefined {
    const step = Math.max(...this.waiting.keys());
    return Number.isFinite(step) ? { step, missing: this.missing.get(step) ?? [] } : undefined;
  }

  /** Looks once at every waiting step, newest first (serialised: one look at a time). */
  poll(): Promise<void> {
    this.polling = this.polling
      .then(() => this.look())
      .catch((e: Error) => {
        this.o.log(`warning: cannot read the part records: ${e.message}`);
      });
    return this.polling;
  }

  private async look(): Promise<void> {
    for (const step of [...this.waiting.keys()].sort((a, b) => b - a)) {
      if (!this.waiting.has(step)) continue;
      const parts = await readParts(this.o.store, { ...this.o, step });
      const missing = parts.flatMap((p, k) => (p ? [] : [k]));
      this.missing.set(step, missing);
      if (missing.length && Date.now() - this.waiting.get(step)! > SLOW_PARTS_MS && !this.warned.has(step)) {
        this.warned.add(step);
        this.o.log(
          `checkpoint ${step} waits for the parts of process${missing.length > 1 ? 'es' : ''} ${missing.join(', ')}: a step commits once every process has written its part (a process that writes no checkpoint keeps every step from committing)`,
        );
      }
      if (missing.length === 0) await this.commit(step, parts as CheckpointPart[]);
    }
  }

  private async commit(step: number, parts: CheckpointPart[]): Promise<void> {
    const since = this.waiting.get(step)!;
    this.drop(step);
    const union = unionOfParts(parts);
    const problem =
      'conflict' in union
        ? union.conflict
        : await missingInStore(this.o.store, this.o.run, step, union.files);
    if (problem) {
      // Never committed: the step stays garbage for gc, whatever arrives later.
      this.o.log(`checkpoint ${step} aborted: ${problem}`);
      return;
    }
    const files = 'files' in union ? union.files : [];
    const m = await commitManifest(this.o.store, {
      run: this.o.run,
      step,
      attempt: this.o.attempt,
      files,
      processes: this.o.processes,
    });
    for (const older of [...this.waiting.keys()].filter((s) => s < step)) {
      this.drop(older);
      this.o.log(`checkpoint ${older} superseded by ${step} before all its parts arrived; not committed`);
    }
    this.o.committed(m, Date.now() - since);
  }

  private drop(step: number): void {
    this.waiting.delete(step);
    this.missing.delete(step);
  }

  /**
   * At the end: waits until every waiting step has committed or aborted, until `deadline`, or until
   * each process it lacks a part from has said it ended (its last heartbeat); then gives up on
   * what is left, saying which processes' parts were missing.
   */
  async settle(deadline: number, pollMs = 250): Promise<void> {
    for (;;) {
      // Ended first: a process writes its last part before it says it ended, so the parts read
      // after hold every part of the processes read as ended.
      const ended = await this.ended();
      await this.poll();
      if (this.waiting.size === 0) return;
      const hopeless = [...this.waiting.keys()].every((s) =>
        (this.missing.get(s) ?? []).every((k) => ended.has(k)),
      );
      if (hopeless || Date.now() >= deadline) break;
      await sleep(Math.min(pollMs, Math.max(0, deadline - Date.now())));
    }
    for (const step of [...this.waiting.keys()].sort((a, b) => a - b)) {
      const missing = this.missing.get(step) ?? [];
      this.o.log(
        `checkpoint ${step} not committed: no part from process${missing.length > 1 ? 'es' : ''} ${missing.join(', ')} (attempt ${this.o.attempt}; gave up after ${Math.round((Date.now() - this.waiting.get(step)!) / 1000)} s)`,
      );
      this.drop(step);
    }
  }

  /**
   * At the very end: waits until every other process has said it ended (its last heartbeat), or
   * `deadline`. Process 0 ending last makes "process 0 ended" mean "the gang ended" for a backend
   * that judges the attempt by it (and then removes what the others run on).
   */
  async awaitOthersEnded(deadline: number, pollMs = 250): Promise<void> {
    for (let said = false; Date.now() < deadline; said = true) {
      const ended = await this.ended();
      if (ended.size >= this.o.processes - 1) return;
      if (!said) this.o.log(`waiting for the other processes to end: process 0 ends last`);
      await sleep(Math.min(pollMs, Math.max(0, deadline - Date.now())));
    }
    const ended = await this.ended();
    const left = Array.from({ length: this.o.processes - 1 }, (_, i) => i + 1).filter((k) => !ended.has(k));
    if (left.length)
      this.o.log(
        `process${left.length > 1 ? 'es' : ''} ${left.join(', ')} had not ended when process 0's time to finish ran out`,
      );
  }

  /** Processes whose last heartbeat says they ended. */
  private async ended(): Promise<Set<number>> {
    const out = new Set<number>();
    await Promise.all(
      Array.from({ length: this.o.processes - 1 }, async (_, i) => {
        const raw = await this.o.store
          .get(workerHeartbeatKey(this.o.run, this.o.attempt, i + 1))
          .catch(() => undefined);
        try {
          if (raw && (JSON.parse(new TextDecoder().decode(raw)) as Heartbeat).finishedAt) out.add(i + 1);
        } catch {
          // a torn or foreign heartbeat says nothing
        }
      }),
    );
    return out;
  }
}
