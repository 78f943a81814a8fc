/**
 * The checkpoint protocol. A checkpoint is `runs/<run>/ckpt/<step>/…` in the store plus
 * `manifest.json`, written LAST, listing every file with its size and sha256. A checkpoint exists
 * if and only if its manifest exists and verifies; anything else is garbage to collect. So an
 * upload killed at any moment leaves either a committed checkpoint or garbage, never a checkpoint
 * that restores wrong.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import type { CheckpointManifest, ManifestFile } from './manifest-schema.js';
import type { ObjectStore } from './store/types.js';

export const MANIFEST = 'manifest.json';
/** A file the workload writes last into a step dir to say it is complete (optional). */
export const COMMITTED_MARKER = 'COMMITTED';
/** Orbax's own last write into a step it has committed (on object stores, and in the rename path). */
export const ORBAX_COMMIT_MARKER = 'commit_success.txt';
/** Either marker says a step dir is finished. */
export const FINISHED_MARKERS = [COMMITTED_MARKER, ORBAX_COMMIT_MARKER] as const;
/** Where the processes of a multi-host attempt put their part records, inside a step's prefix. */
export const PARTS_DIR = '_parts';

export type { CheckpointManifest, ManifestFile } from './manifest-schema.js';

export const ckptPrefix = (run: string): string => `runs/${run}/ckpt/`;
export const stepPrefix = (run: string, step: number): string => `${ckptPrefix(run)}${step}/`;
export const attemptPrefix = (run: string, attempt: number): string => `runs/${run}/attempts/${attempt}/`;

/**
 * Where process `k` of a multi-host attempt ships its output: process 0 (and every single-host
 * job) under `logs/`, the others under `workers/<k>/logs/`.
 */
export const logsPrefix = (run: string, attempt: number, k = 0): string =>
  `${attemptPrefix(run, attempt)}${k ? `workers/${k}/` : ''}logs/`;

/** A step dir name: digits only. Anything else (`42.orbax-checkpoint-tmp-…`) is in progress. */
export const isStepName = (name: string): boolean => /^\d{1,18}$/.test(name);

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)).split(sep).join('/'))
    .sort();
}

/** Runs `fn` over items, at most `width` at a time. */
export async function inParallel<T, R>(
  items: readonly T[],
  width: number,
  fn: (t: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!);
      }
    }),
  );
  return out;
}

export interface UploadOptions {
  run: string;
  step: number;
  attempt: number;
  dir: string;
  concurrency?: number;
  onProgress?: (bytes: number, total: number) => void;
}

/**
 * Uploads every file under `dir` to `prefix` (in parallel, hashed on the way) and returns them
 * for a manifest. The caller writes the manifest LAST.
 */
export async function uploadFiles(
  store: ObjectStore,
  prefix: string,
  dir: string,
  o: {
    concurrency?: number;
    onProgress?: (bytes: number, total: number) => void;
    /** Only the paths this says yes to (a process's share of a shared dir). */
    only?: (path: string) => boolean;
  } = {},
): Promise<{ files: ManifestFile[]; total: number }> {
  const paths = (await filesUnder(dir)).filter((p) => !o.only || o.only(p));
  const sizes = await Promise.all(paths.map(async (p) => (await stat(join(dir, p))).size));
  const total = sizes.reduce((a, b) => a + b, 0);
  const done = new Map<string, number>();
  const files = await inParallel(paths, o.concurrency ?? 4, async (p) => {
    if (p === MANIFEST || p.startsWith(`${PARTS_DIR}/`))
      throw new Error(`${dir} may not contain its own ${p.startsWith(PARTS_DIR) ? PARTS_DIR : MANIFEST}`);
    const r = await store.putFile(prefix + p, join(dir, p), {
      onProgress: (n) => {
        done.set(p, n);
        o.onProgress?.(
          [...done.values()].reduce((a, b) => a + b, 0),
          total,
        );
      },
    });
    return { path: p, size: r.size, sha256: r.sha256 };
  });
  return { files, total };
}

/**
 * Downloads the files a manifest lists from `prefix` into `dest` (which must not exist yet),
 * verifying each one's size and sha256; throws on the first that is missing or does not match.
 */
export async function downloadFiles(
  store: ObjectStore,
  prefix: string,
  files: readonly ManifestFile[],
  dest: string,
  o: { concurrency?: number; totalBytes?: number; onProgress?: (bytes: number, total: number) => void } = {},
): Promise<void> {
  const done = new Map<string, number>();
  await inParallel(files, o.concurrency ?? 4, async (f) => {
    const r = await store.getToFile(prefix + f.path, join(dest, ...f.path.split('/')), {
      onProgress: (n) => {
        done.set(f.path, n);
        o.onProgress?.(
          [...done.values()].reduce((a, b) => a + b, 0),
          o.totalBytes ?? 0,
        );
      },
    });
    if (!r) throw new Error(`${f.path} is missing`);
    if (r.size !== f.size || r.sha256 !== f.sha256)
      throw new Error(
        `${f.path} does not match its manifest (sha256 ${r.sha256.slice(0, 12)}…, expected ${f.sha256.slice(0, 12)}…)`,
      );
  });
}

/** Uploads a finished step dir: every file (in parallel, hashed on the way), then the manifest. */
export async function uploadCheckpoint(store: ObjectStore, o: UploadOptions): Promise<CheckpointManifest> {
  const prefix = stepPrefix(o.run, o.step);
  const { files } = await uploadFiles(store, prefix, o.dir, {
    ...(o.concurrency ? { concurrency: o.concurrency } : {}),
    ...(o.onProgress ? { onProgress: o.onProgress } : {}),
  });
  return commitManifest(store, { run: o.run, step: o.step, attempt: o.attempt, files });
}

/**
 * Writes a step's manifest over files already in the store, with `adv-metadata.json` (when one
 * of them) as its metadata. The caller has made sure every file is there: from this write on, the
 * checkpoint exists.
 */
export async function commitManifest(
  store: ObjectStore,
  o: { run: string; step: number; attempt: number; files: ManifestFile[]; processes?: number },
): Promise<CheckpointManifest> {
  const prefix = stepPrefix(o.run, o.step);
  let metadata: Record<string, unknown> = {};
  if (o.files.some((f) => f.path === METADATA_FILE)) {
    const raw = await store.get(prefix + METADATA_FILE);
    if (raw) metadata = JSON.parse(new TextDecoder().decode(raw)) as Record<string, unknown>;
  }
  const files = [...o.files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const manifest: CheckpointManifest = {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'CheckpointManifest',
    run: o.run,
    step: o.step,
    attempt: o.attempt,
    createdAt: new Date().toISOString(),
    totalBytes: files.reduce((a, f) => a + f.size, 0),
    files,
    metadata,
    ...(o.processes && o.processes > 1 ? { processes: o.processes } : {}),
  };
  // LAST: from this write on, the checkpoint exists.
  await store.put(prefix + MANIFEST, JSON.stringify(manifest, null, 2) + '\n');
  return manifest;
}

/** A file in a step dir whose JSON becomes the manifest's `metadata` (mesh, versions). */
export const METADATA_FILE = 'adv-metadata.json';

/** Whether a manifest or part entry is unusable: a path that could escape, a bad hash or size. */
export function malformedFile(f: ManifestFile): boolean {
  return (
    typeof f?.path !== 'string' ||
    f.path.split('/').includes('..') ||
    f.path.startsWith('/') ||
    typeof f.sha256 !== 'string' ||
    !/^[0-9a-f]{64}$/.test(f.sha256) ||
    !Number.isInteger(f.size)
  );
}

/** Parses and checks a manifest's shape; returns a reason when it is not usable. */
export function parseManifest(bytes: Uint8Array, run: string, step: number): CheckpointManifest | string {
  let m: CheckpointManifest;
  try {
    m = JSON.parse(new TextDecoder().decode(bytes)) as CheckpointManifest;
  } catch {
    return 'manifest is not JSON';
  }
  if (m?.kind !== 'CheckpointManifest' || m.run !== run || m.step !== step || !Array.isArray(m.files)) {
    return 'manifest does not describe this checkpoint';
  }
  for (const f of m.files)
    if (malformedFile(f)) return `manifest entry ${JSON.stringify(f?.path)} is malformed`;
  return m;
}

export interface CheckpointInfo {
  step: number;
  manifest?: CheckpointManifest;
  /** Why it does not count (no manifest, a size mismatch, …). */
  problem?: string;
}

/**
 * Every step in the store, newest first, each checked against its manifest by size (one LIST per
 * step, no download). The sha256 check happens on restore.
 */
export async function listCheckpoints(store: ObjectStore, run: string): Promise<CheckpointInfo[]> {
  const out: CheckpointInfo[] = [];
  for (const step of await stepsNewestFirst(store, run)) out.push(await checkStep(store, run, step));
  return out;
}

/** Step numbers that have a folder in the store, newest first. */
async function stepsNewestFirst(store: ObjectStore, run: string): Promise<number[]> {
  const prefix = ckptPrefix(run);
  return (await store.listFolders(prefix))
    .map((f) => f.slice(prefix.length, -1))
    .filter(isStepName)
    .map(Number)
    .sort((a, b) => b - a);
}

/** One step checked against its manifest by size (one GET and one LIST). */
export async function checkStep(store: ObjectStore, run: string, step: number): Promise<CheckpointInfo> {
  const prefix = stepPrefix(run, step);
  const raw = await store.get(prefix + MANIFEST);
  if (!raw) return { step, problem: 'no manifest (an upload that did not finish)' };
  const m = parseManifest(raw, run, step);
  if (typeof m === 'string') return { step, problem: m };
  const sizes = new Map<string, number>();
  for await (const o of store.list(prefix)) sizes.set(o.key.slice(prefix.length), o.size);
  for (const f of m.files) {
    const have = sizes.get(f.path);
    if (have === undefined) return { step, manifest: m, problem: `${f.path} is missing` };
    if (have !== f.size)
      return { step, manifest: m, problem: `${f.path} is ${have} bytes, manifest says ${f.size}` };
  }
  return { step, manifest: m };
}

/** The highest step whose manifest exists and whose files are all there with the right sizes. */
export async function latestCommitted(
  store: ObjectStore,
  run: string,
): Promise<CheckpointManifest | undefined> {
  for (const step of await stepsNewestFirst(store, run)) {
    const info = await checkStep(store, run, step);
    if (info.manifest && !info.problem) return info.manifest;
  }
  return undefined;
}

export interface RestoreResult {
  step: number;
  manifest: CheckpointManifest;
  /** Steps skipped on the way down, with why. */
  skipped: { step: number; problem: string }[];
}

/**
 * Restores the newest checkpoint that verifies completely (sizes and sha256 of every byte) into
 * `<destRoot>/<step>/`, falling back step by step. Downloads go to a temporary dir renamed into
 * place, so the workload never sees a half-restored step.
 */
export async function restoreLatest(
  store: ObjectStore,
  run: string,
  destRoot: string,
  opts: {
    concurrency?: number;
    onProgress?: (bytes: number, total: number) => void;
    warn?: (msg: string) => void;
    /** Only this step (no fallback). */
    step?: number;
  } = {},
): Promise<RestoreResult | undefined> {
  const skipped: { step: number; problem: string }[] = [];
  const all = await listCheckpoints(store, run);
  for (const info of all.filter((i) => opts.step === undefined || i.step === opts.step)) {
    const skip = (problem: string) => {
      skipped.push({ step: info.step, problem });
      opts.warn?.(`checkpoint ${info.step} skipped: ${problem}`);
    };
    if (!info.manifest || info.problem) {
      skip(info.problem ?? 'unreadable');
      continue;
    }
    const m = info.manifest;
    const tmp = join(destRoot, `.adv-restore-${info.step}-${process.pid}`);
    await rm(tmp, { recursive: true, force: true });
    try {
      await downloadFiles(store, stepPrefix(run, info.step), m.files, tmp, {
        totalBytes: m.totalBytes,
        ...(opts.concurrency ? { concurrency: opts.concurrency } : {}),
        ...(opts.onProgress ? { onProgress: opts.onProgress } : {}),
      });
      const dest = join(destRoot, String(info.step));
      await rm(dest, { recursive: true, force: true });
      await rename(tmp, dest);
      return { step: info.step, manifest: m, skipped };
    } catch (e) {
      await rm(tmp, { recursive: true, force: true });
      skip((e as Error).message);
    }
  }
  return undefined;
}

/** sha256 of a local file (for tests and tools). */
export async function sha256File(path: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
}
