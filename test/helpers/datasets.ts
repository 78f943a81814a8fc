/**
 * Pushing a small dataset into a store as `adv dataset push` lays it out (each file under the
 * content's prefix, `manifest.json` last), for tests of the worker side that must not depend on
 * the CLI.
 */
import { createHash } from 'node:crypto';
import {
  contentDigest,
  DATASET_MANIFEST,
  pushedPrefix,
  type DatasetFile,
  type DatasetInput,
  type DatasetManifest,
} from '../../runtime/datasets/contract.js';
import type { ObjectStore } from '../../runtime/store/types.js';

export const sha256Hex = (b: string | Buffer): string => createHash('sha256').update(b).digest('hex');

/** Pushes `files` (path → content) as dataset `name`; the `ADV_DATASETS` entry (as `data`) that names it. */
export async function pushDataset(
  store: ObjectStore,
  name: string,
  files: Record<string, string | Buffer>,
): Promise<DatasetInput & { digest: string; prefix: string }> {
  const list: DatasetFile[] = Object.entries(files).map(([path, body]) => ({
    path,
    size: Buffer.byteLength(body),
    sha256: sha256Hex(body),
  }));
  const digest = contentDigest(list);
  const prefix = pushedPrefix(name, digest);
  for (const [path, body] of Object.entries(files)) await store.put(prefix + path, body);
  const manifest: DatasetManifest = {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'DatasetManifest',
    name,
    digest,
    totalBytes: list.reduce((n, f) => n + f.size, 0),
    files: list,
  };
  await store.put(prefix + DATASET_MANIFEST, JSON.stringify(manifest));
  return { as: 'data', dataset: `${name}@1`, digest, prefix, source: { store: { prefix } } };
}
