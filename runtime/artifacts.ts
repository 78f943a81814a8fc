/**
 * Run outputs: the same protocol as checkpoints. An output is `runs/<run>/outputs/<name>/…` in the
 * store plus `manifest.json`, written LAST: a dependent (and the controller) takes an output as
 * complete if and only if its manifest exists, and verifies every file on download.
 *
 * While the run goes on, an output grows by immutable parts: `parts/<part>/…` plus the part's own
 * `manifest.json` (kind `ArtifactPart`), written LAST, so a part exists iff its manifest does. The
 * completion manifest lists every committed part's files as `parts/<part>/<file>` beside the loose
 * files, so a reader of a complete output needs to know nothing of parts.
 */
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  downloadFiles,
  inParallel,
  MANIFEST,
  sha256File,
  uploadFiles,
  type ManifestFile,
} from './checkpoint.js';
import type { ObjectStore } from './store/types.js';

export const outputPrefix = (run: string, output: string): string => `runs/${run}/outputs/${output}/`;
/** The folder of an output (locally and in the store) that holds its parts. */
export const PARTS = 'parts';
export const partPrefix = (run: string, output: string, part: string): string =>
  `${outputPrefix(run, output)}${PARTS}/${part}/`;
/**
 * A part's name: a safe key segment. Names starting with `.` are the workload's own work in
 * progress (it renames the finished dir into place), never a part.
 */
export const PART_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.=-]{0,127}$/;

/** `parts/<part>/manifest.json`: one committed, immutable part of an output. */
export interface ArtifactPartManifest {
  apiVersion: 'adventuretime.dev/v1alpha1';
  kind: 'ArtifactPart';
  run: string;
  output: string;
  part: string;
  attempt: number;
  createdAt: string;
  totalBytes: number;
  files: ManifestFile[];
}

export interface ArtifactManifest {
  apiVersion: 'adventuretime.dev/v1alpha1';
  kind: 'ArtifactManifest';
  run: string;
  output: string;
  attempt: number;
  createdAt: string;
  totalBytes: number;
  files: ManifestFile[];
}

/**
 * Uploads `$ADV_ARTIFACT_DIR/<output>/`: its loose files (everything outside `parts/`) first, then
 * the completion manifest, LAST, listing them and every part committed in the store (`parts/` of
 * the dir is shipped part by part before this, by PartShipper).
 */
export async function uploadOutput(
  store: ObjectStore,
  o: { run: string; output: string; attempt: number; dir: string },
): Promise<ArtifactManifest> {
  const prefix = outputPrefix(o.run, o.output);
  const loose = await uploadFiles(store, prefix, o.dir, { only: (p) => !p.startsWith(`${PARTS}/`) });
  const files = [...loose.files];
  const stored = await listParts(store, o.run, o.output);
  // Every part the workload committed is in the store, or the output is not complete.
  const local = await readdir(join(o.dir, PARTS), { withFileTypes: true }).catch(() => []);
  const missing = local.filter(
    (e) => e.isDirectory() && PART_NAME.test(e.name) && !stored.some((p) => p.name === e.name),
  );
  if (missing.length)
    throw new Error(
      `part ${missing.map((e) => e.name).join(', ')} did not reach the store (see the warnings above): the output is not complete without it`,
    );
  for (const part of stored) {
    // A complete output that silently lacks a part would be worse than none.
    if (typeof part.manifest === 'string')
      throw new Error(
        `part ${part.name}: ${part.manifest} (${store.url}${partPrefix(o.run, o.output, part.name)}${MANIFEST}; delete that part's prefix to publish without it)`,
      );
    for (const f of part.manifest.files) files.push({ ...f, path: `${PARTS}/${part.name}/${f.path}` });
  }
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const total = files.reduce((a, f) => a + f.size, 0);
  const manifest: ArtifactManifest = {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'ArtifactManifest',
    run: o.run,
    output: o.output,
    attempt: o.attempt,
    createdAt: new Date().toISOString(),
    totalBytes: total,
    files,
  };
  await store.put(prefix + MANIFEST, JSON.stringify(manifest, null, 2) + '\n');
  return manifest;
}

/** The output's manifest, a reason it is not usable, or undefined when it was never written. */
export async function readOutputManifest(
  store: ObjectStore,
  run: string,
  output: string,
): Promise<ArtifactManifest | string | undefined> {
  const raw = await store.get(outputPrefix(run, output) + MANIFEST);
  if (!raw) return undefined;
  try {
    const m = JSON.parse(new TextDecoder().decode(raw)) as ArtifactManifest;
    if (m.kind !== 'ArtifactManifest' || m.run !== run || m.output !== output || !Array.isArray(m.files))
      return 'manifest does not describe this output';
    if (m.files.some((f) => f.path.split('/').includes('..') || f.path.startsWith('/')))
      return 'manifest lists a path outside the output';
    return m;
  } catch {
    return 'manifest is not JSON';
  }
}

/** Downloads a complete output into `dest` (replaced), every file verified against the manifest. */
export async function downloadOutput(
  store: ObjectStore,
  run: string,
  output: string,
  dest: string,
): Promise<ArtifactManifest> {
  const m = await readOutputManifest(store, run, output);
  if (m === undefined)
    throw new Error(`output ${output} of ${run} is not complete (no manifest in ${store.url})`);
  if (typeof m === 'string') throw new Error(`output ${output} of ${run}: ${m}`);
  const tmp = `${dest}.adv-tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  try {
    await downloadFiles(store, outputPrefix(run, output), m.files, tmp, { totalBytes: m.totalBytes });
    await rm(dest, { recursive: true, force: true });
    await rename(tmp, dest);
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    throw e;
  }
  return m;
}

/** One part of an output in the store: its manifest, or why it is not a committed part. */
export interface StoredPart {
  name: string;
  manifest: ArtifactPartManifest | string;
}

/** The part's manifest, a reason it is not usable, or undefined when it was never committed. */
export async function readPartManifest(
  store: ObjectStore,
  run: string,
  output: string,
  part: string,
): Promise<ArtifactPartManifest | string | undefined> {
  const raw = await store.get(partPrefix(run, output, part) + MANIFEST);
  if (!raw) return undefined;
  try {
    const m = JSON.parse(new TextDecoder().decode(raw)) as ArtifactPartManifest;
    if (m.kind !== 'ArtifactPart' || m.run !== run || m.output !== output || m.part !== part)
      return 'manifest does not describe this part';
    if (!Array.isArray(m.files) || m.files.some((f) => unsafePath(f.path)))
      return 'manifest lists a path outside the part';
    return m;
  } catch {
    return 'manifest is not JSON';
  }
}

const unsafePath = (p: unknown): boolean =>
  typeof p !== 'string' || !p || p.startsWith('/') || p.split('/').some((s) => s === '..' || s === '');

/**
 * The parts of an output in the store, sorted by name: committed ones (with a manifest) and ones
 * whose manifest is unusable (a reason). Folders without a manifest are uploads that never
 * finished: not parts, left out.
 */
export async function listParts(store: ObjectStore, run: string, output: string): Promise<StoredPart[]> {
  const base = `${outputPrefix(run, output)}${PARTS}/`;
  const names = (await store.listFolders(base))
    .map((f) => f.slice(base.length, -1))
    .filter((n) => PART_NAME.test(n));
  const found = await inParallel(names, 8, async (name) => ({
    name,
    manifest: await readPartManifest(store, run, output, name),
  }));
  return found.filter((p): p is StoredPart => p.manifest !== undefined);
}

/** Thrown when a part name is committed already with other content: parts are never overwritten. */
export class PartExistsError extends Error {
  readonly code = 'PartExists';
}

/**
 * Commits one part: its files, then its manifest LAST. A part already committed with the same
 * files is left as it is (`uploaded: false`); with other files, PartExistsError.
 */
export async function uploadPart(
  store: ObjectStore,
  o: { run: string; output: string; part: string; attempt: number; dir: string },
): Promise<{ manifest: ArtifactPartManifest; uploaded: boolean }> {
  if (!PART_NAME.test(o.part)) throw new Error(`"${o.part}" is not a part name (${PART_NAME.source})`);
  const prefix = partPrefix(o.run, o.output, o.part);
  const there = await readPartManifest(store, o.run, o.output, o.part);
  if (there !== undefined) {
    const same = typeof there !== 'string' && (await sameFiles(o.dir, there.files));
    if (!same)
      throw new PartExistsError(
        `part ${o.part} of output ${o.output} is committed already with other content: a committed part is never overwritten; write new work under a new part name`,
      );
    return { manifest: there, uploaded: false };
  }
  const { files, total } = await uploadFiles(store, prefix, o.dir);
  const manifest: ArtifactPartManifest = {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'ArtifactPart',
    run: o.run,
    output: o.output,
    part: o.part,
    attempt: o.attempt,
    createdAt: new Date().toISOString(),
    totalBytes: total,
    files,
  };
  await store.put(prefix + MANIFEST, JSON.stringify(manifest, null, 2) + '\n');
  return { manifest, uploaded: true };
}

/** True when `dir` holds exactly `files`, byte for byte (by size and sha256). */
async function sameFiles(dir: string, files: readonly ManifestFile[]): Promise<boolean> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  if (entries.filter((e) => e.isFile()).length !== files.length) return false;
  for (const f of files) {
    const hash = await sha256File(join(dir, ...f.path.split('/'))).catch(() => undefined);
    if (hash !== f.sha256) return false;
  }
  return true;
}

/**
 * Downloads committed parts into `<partsDir>/<part>/`, each verified into a hidden dir first and
 * renamed into place, so the workload only ever sees whole parts. A part already there is kept
 * when its files are the committed ones, else replaced by them (`replaced`): what the workload
 * sees under a committed name is what was committed.
 */
export async function downloadParts(
  store: ObjectStore,
  run: string,
  output: string,
  partsDir: string,
): Promise<{ parts: string[]; replaced: string[] }> {
  const parts = await listParts(store, run, output);
  // No parts, no dir: an output dir holding only an empty parts/ is an output never written.
  if (parts.length) await mkdir(partsDir, { recursive: true });
  const have = new Set(await readdir(partsDir).catch(() => []));
  const replaced: string[] = [];
  for (const p of parts) {
    const where = `part ${p.name} of output ${output} of ${run}`;
    if (typeof p.manifest === 'string')
      throw new Error(
        `${where}: ${p.manifest} (${store.url}${partPrefix(run, output, p.name)}${MANIFEST}; delete that part's prefix to go on without it)`,
      );
    const dest = join(partsDir, p.name);
    if (have.has(p.name)) {
      if (await sameFiles(dest, p.manifest.files)) continue;
      replaced.push(p.name);
    }
    const tmp = join(partsDir, `.adv-download-${p.name}-${process.pid}`);
    await rm(tmp, { recursive: true, force: true });
    await mkdir(tmp, { recursive: true });
    try {
      await downloadFiles(store, partPrefix(run, output, p.name), p.manifest.files, tmp, {
        totalBytes: p.manifest.totalBytes,
      });
      await rm(dest, { recursive: true, force: true });
      await rename(tmp, dest);
    } catch (e) {
      await rm(tmp, { recursive: true, force: true });
      throw new Error(`${where}: ${(e as Error).message}`);
    }
  }
  return { parts: parts.map((p) => p.name), replaced };
}

/** True when the dir exists and holds at least one entry. */
export async function hasContent(dir: string): Promise<boolean> {
  return (await readdir(dir).catch(() => [])).length > 0;
}

/** `ADV_INPUTS`: input name → the run and output it comes from, as the controller passes it. */
export type InputRefs = Record<string, { run: string; output: string }>;
