/**
 * The Datasets of a loaded specs repo, by name and version, and how a Run's `inputs` resolve. As
 * with Environments (`environments.ts`), a resolved reference is written `name@version#digest` in
 * the desired state of a Run, so a new version of a dataset the run names without `@N`, or an edit
 * of the version it uses, is a change of the run; and each input becomes the `DatasetInput` that
 * `adv exec` reads from `ADV_DATASETS` (`runtime/datasets/contract.ts`).
 */
import type { DatasetInput, DatasetSource } from '../../runtime/datasets/contract.js';
import { childName } from '../reconcile/dag-plan-children.js';
import { urlFilePath } from './dataset-rules.js';
import { resolvedRef, shortRef, VersionIndex, type ResolvedVersion } from './environments.js';
import type { LoadedObject } from './loader.js';
import type { DatasetSpec, RunSpec } from './schema.js';

export type ResolvedDataset = ResolvedVersion<DatasetSpec>;

/** `tokens@2#1a2b3c4d5e6f`: what a Run's desired state holds for each input's dataset. */
export const resolvedDatasetRef: (d: ResolvedDataset) => string = resolvedRef;

/** The Datasets of a load; `all()` lists every name's versions, oldest first (`adv dataset ls`). */
export class DatasetIndex extends VersionIndex<DatasetSpec> {
  constructor(objects: Iterable<LoadedObject> = []) {
    super('Dataset', objects);
  }
}

/** The spec with each input's dataset resolved; the same object when nothing resolves differently. */
export function withResolvedInputs(spec: RunSpec, datasets: DatasetIndex | undefined): RunSpec {
  if (!spec.inputs?.length || !datasets) return spec;
  let changed = false;
  const inputs = spec.inputs.map((input) => {
    const resolved = datasets.resolve(input.dataset);
    if (!resolved) return input;
    const dataset = resolvedDatasetRef(resolved);
    if (dataset !== input.dataset) changed = true;
    return { ...input, dataset };
  });
  return changed ? { ...spec, inputs } : spec;
}

/** The source as the worker reads it: URL paths filled in, a DAG node's output named by its run. */
export function datasetSource(spec: DatasetSpec): DatasetSource {
  const { store, urls, output } = spec.source;
  if (store) return { store: { prefix: store.prefix } };
  if (urls)
    return {
      urls: urls.map((u) => ({
        url: u.url,
        sha256: u.sha256,
        path: urlFilePath(u),
        ...(u.size !== undefined ? { size: u.size } : {}),
      })),
    };
  const run = output!.run ?? childName(output!.dag!, output!.node!);
  return { output: { run, output: output!.output } };
}

/**
 * `ADV_DATASETS` of a run: each input resolved against `datasets`. `missing` names the inputs whose
 * dataset (or version) is not in the specs any more: the run cannot start until it is.
 */
export function datasetInputs(
  spec: RunSpec,
  datasets: DatasetIndex,
): { inputs: DatasetInput[]; missing: string[] } {
  const inputs: DatasetInput[] = [];
  const missing: string[] = [];
  for (const input of spec.inputs ?? []) {
    const d = datasets.resolve(input.dataset);
    if (!d) {
      missing.push(shortRef(input.dataset));
      continue;
    }
    inputs.push({
      as: input.as,
      dataset: `${d.name}@${d.version}`,
      ...(d.spec.digest ? { digest: d.spec.digest } : {}),
      source: datasetSource(d.spec),
    });
  }
  return { inputs, missing };
}

/**
 * What changed of a run's inputs, in words, for `adv plan`: another version of a dataset
 * (`Dataset tokens: tokens@1 → tokens@2`), the version in use edited in place, an input added or
 * removed. Undefined when the inputs are the same.
 */
export function inputsChange(from: RunSpec | undefined, to: RunSpec | undefined): string | undefined {
  if (!to) return undefined;
  const before = new Map((from?.inputs ?? []).map((i) => [i.as, i.dataset]));
  const after = new Map((to.inputs ?? []).map((i) => [i.as, i.dataset]));
  const said: string[] = [];
  for (const [as, b] of after) {
    const a = before.get(as);
    if (a === b) continue;
    const [sa, sb] = [a && shortRef(a), shortRef(b)];
    if (!sa) said.push(`input ${as} added: Dataset ${sb}`);
    else if (sa === sb) said.push(`Dataset ${sb} changed`);
    else if (sa.split('@')[0] === sb.split('@')[0]) said.push(`Dataset ${sb.split('@')[0]}: ${sa} → ${sb}`);
    else said.push(`input ${as}: Dataset ${sa} → ${sb}`);
  }
  for (const [as, a] of before) if (!after.has(as)) said.push(`input ${as} removed: Dataset ${shortRef(a)}`);
  return said.length ? said.join('; ') : undefined;
}
