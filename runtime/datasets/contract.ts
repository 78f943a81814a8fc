/**
 * Datasets, the contract between the controller and `adv exec`, declared once for both sides.
 *
 * A dataset's content is its manifest: every file's path, size and sha256, sorted by path. Its
 * content hash is the sha256 of the manifest's canonical lines, so two datasets with the same files
 * have the same hash whatever their names, and a pinned `spec.digest` pins the bytes.
 *
 * The controller resolves each `inputs: [{dataset, as}]` of a Run into a {@link DatasetInput} and
 * passes the list as `ADV_DATASETS` (JSON); `adv exec` materialises each into
 * `<job dir>/inputs/<as>/` through the host's cache and sets `ADV_INPUT_<as>_DIR`.
 *
 * Old workers must keep reading what new controllers write: add fields, never rename one.
 */
import { createHash } from 'node:crypto';

export interface DatasetFile {
  /** `/`-separated, relative to the dataset's root; never `..`, never absolute. */
  path: string;
  size: number;
  /** Hex sha256 of the file's bytes. */
  sha256: string;
}

/** `manifest.json` under a pushed dataset's prefix, written LAST (the dataset exists iff it does). */
export interface DatasetManifest {
  apiVersion: 'adventuretime.dev/v1alpha1';
  kind: 'DatasetManifest';
  /** The name it was pushed under (informative: the content hash ignores it). */
  name: string;
  /** `sha256:<hex>` of {@link canonicalLines} of `files`. */
  digest: string;
  totalBytes: number;
  /** Sorted by path. */
  files: DatasetFile[];
}

/** Where `adv dataset push` puts a dataset: one prefix per content, so a push never overwrites. */
export const pushedPrefix = (name: string, digest: string): string =>
  `datasets/${name}/${digest.replace(/^sha256:/, '')}/`;

export const DATASET_MANIFEST = 'manifest.json';

/** One line per file, `<sha256> <size> <path>\n`, sorted by path (code-unit order). */
export function canonicalLines(files: readonly DatasetFile[]): string {
  return [...files]
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    .map((f) => `${f.sha256} ${f.size} ${f.path}\n`)
    .join('');
}

/** The content hash of a set of files: `sha256:<hex>`. */
export function contentDigest(files: readonly DatasetFile[]): string {
  return 'sha256:' + createHash('sha256').update(canonicalLines(files)).digest('hex');
}

/** Where a dataset's bytes come from, as the controller resolved it from the Dataset spec. */
export type DatasetSource =
  /** A prefix of the repo's Storage that holds a {@link DatasetManifest} and the files under it. */
  | { store: { prefix: string } }
  /** Files fetched by URL (https, or s3:// of the repo's Storage), each with its sha256. */
  | { urls: { url: string; sha256: string; path: string; size?: number }[] }
  /** A Run's output (a DAG node's resolved to its run): its completion manifest lists the files. */
  | { output: { run: string; output: string } };

/** One entry of `ADV_DATASETS`. */
export interface DatasetInput {
  /** The directory name under `<job dir>/inputs/`, and `ADV_INPUT_<as>_DIR`. */
  as: string;
  /** `name@version`, for messages and the heartbeat. */
  dataset: string;
  /** `sha256:<hex>` when the spec pins it: the fetched manifest must have this content hash. */
  digest?: string;
  source: DatasetSource;
}

/** `ADV_DATASETS` as the worker reads it; a clear error for anything else. */
export function parseDatasetInputs(raw: string | undefined): DatasetInput[] {
  if (!raw) return [];
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw new Error(`ADV_DATASETS is not JSON: ${raw.slice(0, 80)}`);
  }
  if (
    !Array.isArray(v) ||
    v.some((d) => !d || typeof d !== 'object' || typeof (d as DatasetInput).as !== 'string')
  )
    throw new Error('ADV_DATASETS must be a JSON list of {as, dataset, source}');
  return v as DatasetInput[];
}
