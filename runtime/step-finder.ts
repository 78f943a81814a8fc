/**
 * When is a step "finished"? The workload needs no SDK, only this contract (docs/checkpointing.md):
 *   - write the step to a temporary name and rename it to `<step>` (Orbax does this), or
 *   - write a `COMMITTED` file into `<step>/` last, or Orbax's own `commit_success.txt`.
 * A digit-named dir counts as finished when it holds a marker, or when it was already non-empty
 * the first time we saw it and has not changed for a settle period (the rename pattern). With
 * `commitMode: 'marker'` only a marker counts. Nothing else is ever taken as a checkpoint.
 */
import { existsSync } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { FINISHED_MARKERS, isStepName, stepPrefix, ckptPrefix } from './checkpoint.js';
import type { ObjectStore } from './store/types.js';

/** Finds finished steps; each is reported once. */
export interface StepFinder {
  /** Never report this step (restored, or on disk before the attempt started). */
  ignore(step: number): void;
  /**
   * The steps finished since the last call, oldest first. `final`: the workload has ended;
   * `exitedOnItsOwn`: it ended by itself, so whatever it left is finished.
   */
  finished(final: boolean, exitedOnItsOwn: boolean): Promise<number[]>;
  /** Every step-named dir there now (to ignore what an attempt starts with). */
  present(): Promise<number[]>;
}

interface Seen {
  nonEmptyAtFirstSight: boolean;
  snapshot: string;
  stableSince: number;
}

/** A local dir: the process's own, a shared one, or a `file://` store's ckpt prefix. */
export class DirStepFinder implements StepFinder {
  private readonly seen = new Map<number, Seen>();
  private readonly reported = new Set<number>();

  constructor(
    private readonly dir: string,
    private readonly o: { settleMs: number; commitMode?: 'auto' | 'marker' },
  ) {}

  ignore(step: number): void {
    this.reported.add(step);
  }

  async present(): Promise<number[]> {
    return (await readdir(this.dir).catch(() => [])).filter(isStepName).map(Number);
  }

  async finished(final: boolean, exitedOnItsOwn: boolean): Promise<number[]> {
    const names = (await readdir(this.dir, { withFileTypes: true }).catch(() => [])).filter(
      (e) => e.isDirectory() && isStepName(e.name),
    );
    const out: number[] = [];
    for (const e of names) {
      const step = Number(e.name);
      if (this.reported.has(step)) continue;
      if (await this.isFinished(step, join(this.dir, e.name), final && exitedOnItsOwn)) {
        this.reported.add(step);
        out.push(step);
      }
    }
    return out.sort((a, b) => a - b);
  }

  private async isFinished(step: number, dir: string, exitedOnItsOwn: boolean): Promise<boolean> {
    if (FINISHED_MARKERS.some((m) => existsSync(join(dir, m)))) return true;
    if (this.o.commitMode === 'marker') return false;
    const snap = await snapshot(dir);
    const prev = this.seen.get(step);
    const now = Date.now();
    if (!prev) {
      this.seen.set(step, { nonEmptyAtFirstSight: snap !== '', snapshot: snap, stableSince: now });
      // At exit, a workload that ended by itself has finished writing.
      return exitedOnItsOwn && snap !== '';
    }
    if (prev.snapshot !== snap) {
      prev.snapshot = snap;
      prev.stableSince = now;
      return false;
    }
    const settled = now - prev.stableSince >= this.o.settleMs;
    return (prev.nonEmptyAtFirstSight && settled) || (exitedOnItsOwn && snap !== '');
  }
}

/**
 * An object store the workload writes to itself (store mode over S3): a step is finished when
 * one of its markers is there (Orbax's `commit_success.txt` on object stores).
 */
export class StoreStepFinder implements StepFinder {
  private readonly reported = new Set<number>();

  constructor(
    private readonly store: ObjectStore,
    private readonly run: string,
  ) {}

  ignore(step: number): void {
    this.reported.add(step);
  }

  async present(): Promise<number[]> {
    const prefix = ckptPrefix(this.run);
    return (await this.store.listFolders(prefix))
      .map((f) => f.slice(prefix.length, -1))
      .filter(isStepName)
      .map(Number);
  }

  async finished(): Promise<number[]> {
    const out: number[] = [];
    for (const step of await this.present()) {
      if (this.reported.has(step)) continue;
      const heads = await Promise.all(
        FINISHED_MARKERS.map((m) => this.store.head(stepPrefix(this.run, step) + m)),
      );
      if (heads.some(Boolean)) {
        this.reported.add(step);
        out.push(step);
      }
    }
    return out.sort((a, b) => a - b);
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
