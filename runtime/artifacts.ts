/**
 * DAG outputs: the same protocol as checkpoints. An output is `runs/<run>/outputs/<name>/…` in the
 * store plus `manifest.json`, written LAST: a dependent (and the controller) takes an output as
 * complete if and only if its manifest exists, and verifies every file on download.
 */
import { mkdir, readdir, rename, rm } from 'node:fs/promises';
import { downloadFiles, MANIFEST, uploadFiles, type ManifestFile } from './checkpoint.js';
import type { ObjectStore } from './store/types.js';

export const outputPrefix = (run: string, output: string): string => `runs/${run}/outputs/${output}/`;

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

/** Uploads `$ADV_ARTIFACT_DIR/<output>/`: files first, manifest last. */
export async function uploadOutput(
  store: ObjectStore,
  o: { run: string; output: string; attempt: number; dir: string },
): Promise<ArtifactManifest> {
  const prefix = outputPrefix(o.run, o.output);
  const { files, total } = await uploadFiles(store, prefix, o.dir);
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

/** True when the dir exists and holds at least one entry. */
export async function hasContent(dir: string): Promise<boolean> {
  return (await readdir(dir).catch(() => [])).length > 0;
}

/** `ADV_INPUTS`: input name → the run and output it comes from, as the controller passes it. */
export type InputRefs = Record<string, { run: string; output: string }>;
