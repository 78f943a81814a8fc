/**
 * A run's committed checkpoint copied into another run's, inside the store (`adv fork`): every file
 * the source manifest lists is copied object to object (S3 CopyObject, a file copy), never through
 * this process, then a manifest naming the fork is written LAST. So the copy, like an upload, is
 * either a committed checkpoint of the fork or garbage, and the fork's first attempt restores it
 * (sha256 of every byte checked then) as it would one of its own.
 */
import {
  MANIFEST,
  checkStep,
  inParallel,
  listCheckpoints,
  stepPrefix,
  type CheckpointManifest,
} from './checkpoint.js';
import type { ObjectStore } from './store/types.js';

/** The checkpoint to copy is not committed in the store; `committed` lists the steps that are. */
export class CheckpointNotFound extends Error {
  readonly code = 'CheckpointNotFound';

  constructor(
    readonly run: string,
    readonly step: number,
    readonly committed: number[],
    why: string,
  ) {
    super(`run ${run} has no committed checkpoint at step ${step} (${why}); ${stepsText(committed)}`);
  }
}

/** "its committed steps: 30, 20, 10" or "it has no committed checkpoint". */
export function stepsText(steps: readonly number[]): string {
  return steps.length ? `its committed steps: ${steps.join(', ')}` : 'it has no committed checkpoint';
}

/** The steps of `run` whose manifest exists and verifies by size, newest first. */
export async function committedSteps(store: ObjectStore, run: string): Promise<number[]> {
  return (await listCheckpoints(store, run)).filter((i) => i.manifest && !i.problem).map((i) => i.step);
}

/** Why `step` of `run` is not a committed checkpoint (`why`, else what the store shows there), with the steps that are. */
export async function notCommitted(
  store: ObjectStore,
  run: string,
  step: number,
  why?: string,
): Promise<CheckpointNotFound> {
  const infos = await listCheckpoints(store, run);
  const committed = infos.filter((i) => i.manifest && !i.problem).map((i) => i.step);
  const there = infos.find((i) => i.step === step)?.problem ?? 'nothing is stored at that step';
  return new CheckpointNotFound(run, step, committed, why ?? there);
}

export interface CopyCheckpointOptions {
  /** The run the checkpoint is copied from. */
  from: string;
  /** The run it becomes a checkpoint of. */
  to: string;
  step: number;
  /** The attempt of `to` it is copied for (the manifest's `attempt`). */
  attempt: number;
  concurrency?: number;
}

/**
 * Copies `runs/<from>/ckpt/<step>/` to `runs/<to>/ckpt/<step>/`: the files the manifest lists,
 * checked by size once there, then the fork's manifest. Throws CheckpointNotFound when the source
 * is not committed (or loses a file half-way, to a garbage collection).
 */
export async function copyCheckpoint(
  store: ObjectStore,
  o: CopyCheckpointOptions,
): Promise<CheckpointManifest> {
  const info = await checkStep(store, o.from, o.step);
  if (!info.manifest || info.problem) throw await notCommitted(store, o.from, o.step);
  const src = info.manifest;
  const from = stepPrefix(o.from, o.step);
  const to = stepPrefix(o.to, o.step);
  const missing = await inParallel(src.files, o.concurrency ?? 8, async (f) =>
    (await store.copy(from + f.path, to + f.path)) ? undefined : f.path,
  );
  const lost = missing.find((p) => p !== undefined);
  if (lost) throw await notCommitted(store, o.from, o.step, `${lost} went missing during the copy`);
  const sizes = new Map<string, number>();
  for await (const x of store.list(to)) sizes.set(x.key.slice(to.length), x.size);
  for (const f of src.files)
    if (sizes.get(f.path) !== f.size)
      throw new Error(
        `copy of ${from}${f.path} to ${to} has ${sizes.get(f.path) ?? 'no'} bytes, not ${f.size}`,
      );
  const manifest: CheckpointManifest = {
    ...src,
    run: o.to,
    attempt: o.attempt,
    createdAt: new Date().toISOString(),
    forkedFrom: { run: o.from, step: o.step, attempt: src.attempt },
  };
  // LAST: from this write on, the fork has the checkpoint.
  await store.put(to + MANIFEST, JSON.stringify(manifest, null, 2) + '\n');
  return manifest;
}
