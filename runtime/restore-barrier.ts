/**
 * The restore barrier of a multi-host attempt: process 0 chooses the step every process starts
 * from, and records it in `runs/<run>/attempts/<n>/restore.json` before any workload starts; the
 * others wait for that record (bounded), then restore the same step. So the ranks never disagree
 * on where they resume, and none lists an empty dir while process 0 is still restoring.
 */
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  attemptPrefix,
  ckptPrefix,
  isStepName,
  latestCommitted,
  MANIFEST,
  parseManifest,
  restoreLatest,
  stepPrefix,
  type CheckpointManifest,
  type RestoreResult,
} from './checkpoint.js';
import type { ObjectStore } from './store/types.js';

/** How the processes of an attempt see their checkpoint dir (docs: `adv exec --ckpt-mode`). */
export const CkptMode = { PerProcess: 'per-process', Shared: 'shared', Store: 'store' } as const;
export type CkptMode = (typeof CkptMode)[keyof typeof CkptMode];

/** Process 0's choice, as every other process reads it. */
export interface RestoreRecord {
  /** The step every process starts from; null: from scratch. */
  step: number | null;
  processes: number;
  mode: CkptMode;
  /** Shared mode: what process 0 wrote into SHARED_PROBE of the dir, for the others to find there. */
  sharedToken?: string;
  time: string;
}

/**
 * A file process 0 writes into a shared checkpoint dir: a process that does not find it in its
 * `--ckpt-dir` does not share the dir (a mount missing on its host), and says so instead of
 * checkpointing into a private dir nobody else sees.
 */
export const SHARED_PROBE = '.adv-shared';

export const restoreKey = (run: string, attempt: number): string =>
  `${attemptPrefix(run, attempt)}restore.json`;

export async function recordRestore(
  store: ObjectStore,
  run: string,
  attempt: number,
  r: Omit<RestoreRecord, 'time'>,
): Promise<void> {
  const body: RestoreRecord = { ...r, time: new Date().toISOString() };
  await store.put(restoreKey(run, attempt), JSON.stringify(body, null, 2) + '\n');
}

/**
 * Waits for process 0's restore record, polling every `pollMs`. Throws when `timeoutMs` passes
 * or `signal` aborts (a stop notice).
 */
export async function awaitRestore(
  store: ObjectStore,
  run: string,
  attempt: number,
  o: { timeoutMs: number; pollMs?: number; signal?: AbortSignal },
): Promise<RestoreRecord> {
  const deadline = Date.now() + o.timeoutMs;
  const key = restoreKey(run, attempt);
  for (;;) {
    o.signal?.throwIfAborted();
    const raw = await store.get(key).catch(() => undefined);
    const rec = raw ? parseRecord(raw) : undefined;
    if (rec) return rec;
    if (Date.now() >= deadline)
      throw new Error(
        `process 0 did not record which checkpoint to restore within ${Math.round(o.timeoutMs / 1000)} s (no ${store.url}${key}): is process 0 running? (--restore-wait SECONDS)`,
      );
    await sleep(Math.min(o.pollMs ?? 200, Math.max(0, deadline - Date.now())), undefined, {
      ...(o.signal ? { signal: o.signal } : {}),
    });
  }
}

function parseRecord(raw: Uint8Array): RestoreRecord | undefined {
  try {
    const r = JSON.parse(new TextDecoder().decode(raw)) as RestoreRecord;
    return r && (r.step === null || Number.isInteger(r.step)) ? r : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Store mode, process 0: the framework reads its steps straight from the store, so a step newer
 * than the newest committed one (no manifest, or one that does not verify) is removed before any
 * workload starts: Orbax's `latest_step()` must not pick a step we never committed. Returns the
 * newest committed step's manifest (sizes checked; the bytes are the framework's to read).
 */
export async function restoreInStore(
  store: ObjectStore,
  run: string,
  log: (line: string) => void,
): Promise<{ manifest: CheckpointManifest | undefined; removed: number[] }> {
  const latest = await latestCommitted(store, run);
  const prefix = ckptPrefix(run);
  const newer = (await store.listFolders(prefix))
    .map((f) => f.slice(prefix.length, -1))
    .filter(isStepName)
    .map(Number)
    .filter((s) => latest === undefined || s > latest.step);
  for (const step of newer) {
    const keys: string[] = [];
    for await (const o of store.list(stepPrefix(run, step))) keys.push(o.key);
    await store.delete(keys);
    log(
      `checkpoint ${step} in the store was never committed (no manifest that verifies): removed, so the framework cannot restore it`,
    );
  }
  return { manifest: latest, removed: newer };
}

/** What a process needs to restore. */
export interface RestoreContext {
  store: ObjectStore;
  run: string;
  attempt: number;
  /** Its checkpoint dir (per-process: its own; shared: everyone's). */
  ckptDir: string;
  process: number;
  processes: number;
  mode: CkptMode;
  log: (line: string) => void;
  progress?: (bytes: number, total: number) => void;
}

/**
 * Process 0: the newest checkpoint that verifies, into its dir (store mode: nothing to download,
 * newer uncommitted steps are removed instead); then, with several processes, the record of that
 * choice, the last thing before any workload of the attempt starts.
 */
export async function restoreAsPrimary(c: RestoreContext): Promise<RestoreResult | undefined> {
  let restored: RestoreResult | undefined;
  if (c.mode === CkptMode.Store) {
    const { manifest } = await restoreInStore(c.store, c.run, c.log);
    restored = manifest && { step: manifest.step, manifest, skipped: [] };
  } else {
    restored = await restoreLatest(c.store, c.run, c.ckptDir, {
      warn: (m) => c.log(`warning: ${m}`),
      ...(c.progress ? { onProgress: c.progress } : {}),
    });
  }
  if (c.processes === 1) return restored;
  const sharedToken = c.mode === CkptMode.Shared ? `${c.run}/${c.attempt}/${randomUUID()}` : undefined;
  if (sharedToken) await writeFile(join(c.ckptDir, SHARED_PROBE), sharedToken);
  await recordRestore(c.store, c.run, c.attempt, {
    step: restored?.step ?? null,
    processes: c.processes,
    mode: c.mode,
    ...(sharedToken ? { sharedToken } : {}),
  });
  return restored;
}

/**
 * Process k > 0: waits for process 0's record, checks that both
 * run the same way, then restores the same step: per-process, the whole verified step (the union
 * of every process's part) into its own dir; shared and store, nothing to download.
 */
export async function restoreAsWorker(
  c: RestoreContext,
  o: { timeoutMs: number; signal?: AbortSignal },
): Promise<RestoreResult | undefined> {
  c.log(`process ${c.process}: waiting for process 0 to choose the checkpoint to restore`);
  const rec = await awaitRestore(c.store, c.run, c.attempt, o);
  if (rec.mode !== c.mode || rec.processes !== c.processes)
    throw new Error(
      `process 0 runs with --ckpt-mode ${rec.mode} --processes ${rec.processes}, this one with --ckpt-mode ${c.mode} --processes ${c.processes}: every process of an attempt needs the same`,
    );
  if (rec.sharedToken) {
    const found = await readFile(join(c.ckptDir, SHARED_PROBE), 'utf8').catch(() => undefined);
    if (found !== rec.sharedToken)
      throw new Error(
        `--ckpt-dir ${c.ckptDir} is not the dir process 0 sees (no ${SHARED_PROBE} of this attempt in it): with --ckpt-mode shared every process needs the same dir, on a filesystem they share`,
      );
  }
  if (rec.step === null) return undefined;
  if (c.mode === CkptMode.PerProcess) {
    const r = await restoreLatest(c.store, c.run, c.ckptDir, {
      step: rec.step,
      warn: (m) => c.log(`warning: ${m}`),
      ...(c.progress ? { onProgress: c.progress } : {}),
    });
    if (!r)
      throw new Error(
        `checkpoint ${rec.step}, which process 0 restored, does not verify here: every process must start from the same step`,
      );
    return r;
  }
  const raw = await c.store.get(stepPrefix(c.run, rec.step) + MANIFEST);
  const m = raw && parseManifest(raw, c.run, rec.step);
  return m && typeof m !== 'string' ? { step: rec.step, manifest: m, skipped: [] } : undefined;
}
