/**
 * The cross-file rules of Datasets (`cross-file.ts` runs them): every dataset a run names resolves
 * to one valid version, and an output source names a DAG node and output that exist. They read the
 * loader's summaries (`datasetRefs`, `datasetOutputs`, `datasetVersion`) and a DAG's nodes.
 */
import type { Diagnostic } from './diagnostic.js';
import type { DatasetOutputRef, DatasetRef } from './dataset-rules.js';
import type { LoadedDocument } from './document.js';
import type { Dag, Run } from './schema.js';
import { closest } from './validate.js';

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
  if (!docs.some((d) => d.datasetRefs?.length || d.datasetOutputs?.length)) return;
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
  const at = (d: LoadedDocument, ref: Located, problem: Problem | undefined) =>
    problem &&
    add(d, {
      severity: 'error',
      file: d.file,
      line: ref.line,
      column: ref.column,
      path: ref.path,
      ...problem,
    });
  for (const d of docs) {
    for (const ref of d.datasetRefs ?? []) at(d, ref, datasetRefProblem(ref, sets));
    for (const ref of d.datasetOutputs ?? []) at(d, ref, outputRefProblem(ref, docs, byName));
  }
}

type Problem = Pick<Diagnostic, 'code' | 'message' | 'hint'>;
type Located = Pick<Diagnostic, 'line' | 'column' | 'path'>;

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

function outputRefProblem(
  r: DatasetOutputRef,
  docs: readonly LoadedDocument[],
  byName: ReadonlyMap<string, LoadedDocument[]>,
): Problem | undefined {
  if (r.run !== undefined) {
    const run = (byName.get(`Run/${r.run}`) ?? []).find((d) => d.object)?.object as Run | undefined;
    if (run) return declares(Object.keys(run.spec.outputs ?? {}), r.output, `Run "${r.run}"`, "the run's");
    if (byName.has(`Run/${r.run}`)) return undefined; // invalid: its own errors say why
    const children = docs.flatMap((d) => d.children ?? []).map((c) => c.name);
    if (children.includes(r.run)) return undefined;
    const runs = docs.filter((d) => d.kind === 'Run' && d.name).map((d) => d.name!);
    const guess = closest(r.run, [...runs, ...children]);
    return {
      code: 'UnknownDatasetSource',
      message: `output names Run "${r.run}", which is not defined in this repo`,
      hint: guess ? `did you mean "${guess}"?` : 'name a Run of this repo, or a DAG node with dag: and node:',
    };
  }
  const dagDocs = (byName.get(`DAG/${r.dag}`) ?? []).filter((d) => d.object);
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
  const outputs = [...Object.keys(node.outputs ?? {}), ...Object.keys(node.run.outputs ?? {})];
  return declares(outputs, r.output, `node "${r.node}" of DAG "${r.dag}"`, "the node's");
}

/** Undefined when `output` is among `outputs`; else the problem, with the outputs there are. */
function declares(outputs: string[], output: string, who: string, whose: string): Problem | undefined {
  if (outputs.includes(output)) return undefined;
  return {
    code: 'UnknownDatasetSource',
    message: `${who} declares no output "${output}"`,
    hint: outputs.length
      ? `use one of: ${outputs.join(', ')}`
      : `declare it in ${whose} outputs (outputs: {${output}: {}})`,
  };
}
