/**
 * The rules of Datasets and of a Run's `inputs`: a Dataset names exactly one source, its URL files
 * land on distinct safe paths; a run's `as` names are unique and are not the names of its DAG
 * node's inputs. Across files (`datasetCrossRules`): every dataset a run names resolves to one
 * valid version, and an output source names a DAG node and output that exist. A bad Dataset is
 * reported on itself and on the runs that name it, never on anything else.
 */
import { posix } from 'node:path';
import type { Diagnostic } from './diagnostic.js';
import { formatPath } from './diagnostic.js';
import type { LoadedDocument } from './document.js';
import { parseEnvironmentRef } from './environment-rules.js';
import type { Locator } from './parse.js';
import type { Collector, Path } from './rule-kit.js';
import type { Dag, Dataset, DatasetSpec, RunSpec } from './schema.js';
import { closest } from './validate.js';

/** `tokens` → `{name}`, `tokens@2` → `{name, version: 2}` (the same grammar as an Environment's). */
export const parseDatasetRef = parseEnvironmentRef;

/** A file's path in a URL-sourced dataset: `path`, else the URL's last path segment. */
export function urlFilePath(u: { url: string; path?: string }): string {
  if (u.path !== undefined) return u.path;
  const pathname = u.url.replace(/^[a-z0-9]+:\/\/[^/]*/, '').replace(/[?#].*$/, '');
  return decodeURIComponent(pathname.split('/').filter(Boolean).at(-1) ?? '');
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
export interface DatasetRef {
  ref: string;
  name: string;
  version?: number;
  path: string;
  line: number;
  column: number;
}

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

type Add = (d: LoadedDocument, diag: Diagnostic) => void;

/** A Dataset document as the cross-file rules see it. */
interface DatasetDoc {
  file: string;
  name: string;
  version: number;
  line: number;
  usable: boolean;
}

/**
 * Every dataset a run names resolves to one valid version; every output source names a DAG node
 * and one of its declared outputs (or a Run of the repo; its outputs are checked when it runs).
 */
export function datasetCrossRules(
  docs: readonly LoadedDocument[],
  byName: ReadonlyMap<string, LoadedDocument[]>,
  add: Add,
): void {
  const sets: DatasetDoc[] = docs
    .filter((d) => d.kind === 'Dataset' && d.name && d.datasetVersion !== undefined)
    .map((d) => ({
      file: d.file,
      name: d.name!,
      version: d.datasetVersion!,
      line: d.namePos?.line ?? d.line,
      usable:
        d.object !== undefined &&
        !d.diagnostics.some((x) => x.severity === 'error') &&
        byName.get(`Dataset/${d.name}@${d.datasetVersion}`)?.length === 1,
    }));
  for (const d of docs)
    for (const ref of d.datasetRefs ?? []) {
      const problem = datasetRefProblem(ref, sets);
      if (problem)
        add(d, {
          severity: 'error',
          file: d.file,
          line: ref.line,
          column: ref.column,
          path: ref.path,
          ...problem,
        });
    }
  for (const d of docs)
    for (const ref of d.datasetOutputs ?? []) {
      const problem = outputRefProblem(ref, docs);
      if (problem)
        add(d, {
          severity: 'error',
          file: d.file,
          line: ref.line,
          column: ref.column,
          path: ref.path,
          ...problem,
        });
    }
}

type Problem = Pick<Diagnostic, 'code' | 'message' | 'hint'>;

const PUSH_HINT = (name: string) =>
  `add datasets/${name}.yaml (kind: Dataset), or run \`adv dataset push DIR ${name}\``;

function datasetRefProblem(r: DatasetRef, sets: readonly DatasetDoc[]): Problem | undefined {
  const sameName = sets.filter((s) => s.name === r.name);
  if (!sameName.length) {
    const guess = closest(r.name, [...new Set(sets.map((s) => s.name))]);
    return {
      code: 'UnknownDataset',
      message: `Dataset "${r.name}" is not defined in this repo`,
      hint: guess ? `did you mean "${guess}"? else ${PUSH_HINT(r.name)}` : PUSH_HINT(r.name),
    };
  }
  const versions = [...new Set(sameName.map((s) => s.version))].sort((a, b) => a - b);
  const version = r.version ?? versions.at(-1)!;
  const chosen = sameName.filter((s) => s.version === version);
  if (!chosen.length)
    return {
      code: 'UnknownDataset',
      message: `Dataset "${r.name}" has no version ${version} (versions: ${versions.join(', ')})`,
      hint: `use "${r.name}@${versions.at(-1)!}", or "${r.name}" for the newest`,
    };
  if (chosen.filter((s) => s.usable).length !== 1)
    return {
      code: 'DatasetInvalid',
      message: `Dataset ${r.name}@${version} at ${chosen.map((s) => `${s.file}:${s.line}`).join(', ')} is invalid, so this run cannot start`,
      hint: 'fix the Dataset (adv validate shows its errors)',
    };
  return undefined;
}

function outputRefProblem(r: DatasetOutputRef, docs: readonly LoadedDocument[]): Problem | undefined {
  if (r.run !== undefined) {
    const runs = docs.filter((d) => d.kind === 'Run' && d.name).map((d) => d.name!);
    const children = docs.flatMap((d) => d.children ?? []).map((c) => c.name);
    if (runs.includes(r.run) || children.includes(r.run)) return undefined;
    const guess = closest(r.run, [...runs, ...children]);
    return {
      code: 'UnknownDatasetSource',
      message: `output names Run "${r.run}", which is not defined in this repo`,
      hint: guess ? `did you mean "${guess}"?` : 'name a Run of this repo, or a DAG node with dag: and node:',
    };
  }
  const dagDocs = docs.filter((d) => d.kind === 'DAG' && d.name === r.dag && d.object);
  if (!dagDocs.length) {
    const names = docs.filter((d) => d.kind === 'DAG' && d.name).map((d) => d.name!);
    const guess = closest(r.dag!, names);
    return {
      code: 'UnknownDatasetSource',
      message: `output names DAG "${r.dag}", which is not defined in this repo (or is invalid)`,
      hint: guess ? `did you mean "${guess}"?` : 'name a DAG of this repo',
    };
  }
  const nodes = (dagDocs[0]!.object as Dag).spec.nodes;
  const node = nodes.find((n) => n.id === r.node);
  if (!node) {
    const guess = closest(
      r.node!,
      nodes.map((n) => n.id),
    );
    return {
      code: 'UnknownDatasetSource',
      message: `DAG "${r.dag}" has no node "${r.node}"`,
      hint: guess ? `did you mean "${guess}"?` : `use one of: ${nodes.map((n) => n.id).join(', ')}`,
    };
  }
  const outputs = Object.keys(node.outputs ?? {});
  if (outputs.includes(r.output)) return undefined;
  return {
    code: 'UnknownDatasetSource',
    message: `node "${r.node}" of DAG "${r.dag}" declares no output "${r.output}"`,
    hint: outputs.length
      ? `use one of: ${outputs.join(', ')}`
      : `declare it in the node's outputs (outputs: {${r.output}: {}})`,
  };
}
