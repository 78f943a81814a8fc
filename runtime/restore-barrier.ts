/**
 * The restore barrier of a multi-host attempt: process 0 chooses the step every process starts
 * from, and records it in `runs/<run>/attempts/<n>/restore.json` before any workload starts; the
 * others wait for that record (bounded), then restore the same step. So the ranks never disagree
 * on where they resume, and none lists an empty dir while process 0 is still restoring.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import {
  attemptPrefix,
  ckptPrefix,
  isStepName,
  latestCommitted,
  stepPrefix,
  type CheckpointManifest,
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
 * Waits for process 0's restore record, polling every `pollMs`; `waiting` is called on each poll
 * (the caller heartbeats). Throws when `timeoutMs` passes or `signal` aborts (a stop notice).
 */
export async function awaitRestore(
  store: ObjectStore,
  run: string,
  attempt: number,
  o: { timeoutMs: number; pollMs?: number; signal?: AbortSignal; waiting?: () => void },
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
    o.waiting?.();
    await sleep(Math.min(o.pollMs ?? 500, Math.max(0, deadline - Date.now())), undefined, {
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
