/**
 * The rules of Datasets and of a Run's `inputs`: a Dataset names exactly one source, its URL files
 * land on distinct safe paths; a run's `as` names are unique and are not the names of its DAG
 * node's inputs. Across files (`dataset-cross.ts`): every dataset a run names resolves to one
 * valid version, and an output source names a DAG node and output that exist. A bad Dataset is
 * reported on itself and on the runs that name it, never on anything else.
 */
import { posix } from 'node:path';
import { formatPath } from './diagnostic.js';
import { parseEnvironmentRef, type VersionedRef } from './environment-rules.js';
import type { Locator } from './parse.js';
import type { Collector, Path } from './rule-kit.js';
import type { Dag, Dataset, DatasetSpec, RunSpec } from './schema.js';

/** `tokens` → `{name}`, `tokens@2` → `{name, version: 2}` (the same grammar as an Environment's). */
export const parseDatasetRef = parseEnvironmentRef;

/** A file's path in a URL-sourced dataset: `path`, else the URL's last path segment. */
export function urlFilePath(u: { url: string; path?: string }): string {
  if (u.path !== undefined) return u.path;
  const pathname = u.url.replace(/^[a-z0-9]+:\/\/[^/]*/, '').replace(/[?#].*$/, '');
  const last = pathname.split('/').filter(Boolean).at(-1) ?? '';
  try {
    return decodeURIComponent(last);
  } catch {
    return last; // a malformed escape (`%E0%A4`) is taken as written, never a loader crash
  }
}

/** A relative `/`-separated path that stays inside the dataset (no `..`, not absolute, not empty). */
function safeRelPath(p: string): boolean {
  if (!p || p.startsWith('/') || p.includes('\\') || p.includes('\0')) return false;
  return p.split('/').every((s) => s !== '' && s !== '.' && s !== '..') && posix.normalize(p) === p;
}

/** Per-document rules of a Dataset. */
export function datasetDocRules(c: Collector, ds: Dataset): void {
  const source = ds.spec.source;
  const given = (['store', 'urls', 'output'] as const).filter((k) => source[k] !== undefined);
  if (given.length !== 1)
    c.error(
      'DatasetSource',
      ['spec', 'source'],
      given.length
        ? `spec.source names ${given.join(' and ')}: a Dataset comes from exactly one source`
        : 'spec.source names no source',
      'keep exactly one of store: {prefix}, urls: [{url, sha256}] and output: {run|dag+node, output}',
    );
  const prefix = source.store?.prefix;
  if (prefix !== undefined && !safeRelPath(prefix.slice(0, -1)))
    c.error(
      'DatasetPath',
      ['spec', 'source', 'store', 'prefix'],
      `prefix "${prefix}" is not a path inside the store`,
      'write it relative to the store, without "." or ".." segments or "//", e.g. "datasets/tokens/3f2a…/"',
    );
  const seen = new Map<string, number>();
  (source.urls ?? []).forEach((u, i) => {
    const path = urlFilePath(u);
    const at: Path = ['spec', 'source', 'urls', i, u.path !== undefined ? 'path' : 'url'];
    if (!safeRelPath(path))
      c.error(
        'DatasetPath',
        at,
        `file path "${path}" is not a relative path inside the dataset`,
        'give the file a path such as "train/part-0.bin" (no "..", no leading "/")',
      );
    else if (seen.has(path))
      c.error(
        'DatasetPath',
        at,
        `file path "${path}" is also the path of urls[${seen.get(path)}]`,
        'give one of them another path: each file of a dataset has its own',
      );
    else seen.set(path, i);
  });
  const out = source.output;
  if (out && (out.run !== undefined) === (out.dag !== undefined || out.node !== undefined))
    c.error(
      'DatasetSource',
      ['spec', 'source', 'output'],
      out.run !== undefined
        ? 'output names both a run and a DAG node'
        : 'output names no run and no DAG node',
      'write output: {run: NAME, output: OUT} or output: {dag: NAME, node: ID, output: OUT}',
    );
  else if (out && (out.dag === undefined) !== (out.node === undefined))
    c.error(
      'DatasetSource',
      ['spec', 'source', 'output'],
      'output names a DAG without a node, or a node without its DAG',
      'write output: {dag: NAME, node: ID, output: OUT}',
    );
}

/** Each `as` of a run's `inputs` is unique (it is a directory and a variable name). */
export function runInputRules(c: Collector, spec: RunSpec, base: Path): void {
  const seen = new Map<string, number>();
  (spec.inputs ?? []).forEach((input, i) => {
    const first = seen.get(input.as);
    if (first !== undefined)
      c.error(
        'DuplicateInput',
        [...base, 'inputs', i, 'as'],
        `as "${input.as}" is also the name of inputs[${first}]`,
        'give each input its own "as": it names the directory inputs/<as>/ and ADV_INPUT_<as>_DIR',
      );
    else seen.set(input.as, i);
  });
}

/** A DAG node's dataset `as` is not also the name of one of the node's inputs from other nodes. */
export function dagInputRules(c: Collector, dag: Dag): void {
  dag.spec.nodes.forEach((node, n) => {
    const nodeInputs = Object.keys(node.inputs ?? {});
    (node.run.inputs ?? []).forEach((input, i) => {
      if (nodeInputs.includes(input.as))
        c.error(
          'DuplicateInput',
          ['spec', 'nodes', n, 'run', 'inputs', i, 'as'],
          `as "${input.as}" is also the name of an input of node "${node.id}" (inputs.${input.as})`,
          'rename one of them: both reach the job as ADV_INPUT_<name>…',
        );
    });
  });
}

/** A located reference of a Run (or a DAG node's run) to a Dataset. */
export type DatasetRef = VersionedRef;

/** Every Dataset a Run or DAG names in `inputs`, with where. */
export function datasetRefsOf(specs: readonly [Path, RunSpec][], loc: Locator): DatasetRef[] {
  const refs: DatasetRef[] = [];
  for (const [base, spec] of specs)
    (spec.inputs ?? []).forEach((input, i) => {
      const parsed = parseDatasetRef(input.dataset);
      if (!parsed) return;
      const path = [...base, 'inputs', i, 'dataset'];
      refs.push({ ref: input.dataset, ...parsed, path: formatPath(path), ...loc.at(path) });
    });
  return refs;
}

/** A Dataset's output source, located, for the cross-file check that it exists. */
export interface DatasetOutputRef {
  run?: string;
  dag?: string;
  node?: string;
  output: string;
  path: string;
  line: number;
  column: number;
}

export function datasetOutputRefOf(spec: DatasetSpec, loc: Locator): DatasetOutputRef[] {
  const out = spec.source.output;
  if (!out) return [];
  const path = ['spec', 'source', 'output'];
  return [{ ...out, path: formatPath(path), ...loc.at(path) }];
}
