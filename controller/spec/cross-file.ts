/**
 * The rules that need the whole repo: duplicate names (a DAG's children and a Sweep's points
 * included), references to unknown backends, a second Storage, Backends naming the store's
 * credentials, checkpoint modes no usable Backend offers, Environment references. They read small
 * per-document summaries (`LoadedDocument`), never the YAML; and when an edit keeps every changed
 * document's cross-file facts, the last verdicts are patched rather than recomputed (`patchCross`).
 */
import { storeCredentialNames } from '../storage.js';
import type { BackendList } from '../backends/types.js';
import { checkpointModeDiagnostics } from './checkpoint-rules.js';
import { datasetCrossRules } from './dataset-cross.js';
import type { Diagnostic } from './diagnostic.js';
import type { LoadedDocument } from './document.js';
import { resolveRef, templateProblem, type EnvironmentDoc } from './environment-rules.js';
import { BACKEND_SECRET_HINT } from './rules.js';
import type { Backend, Run, Storage } from './schema.js';
import { sweepPointNameRules } from './sweep-rules.js';
import { closest } from './validate.js';

/** Codes of the rules that need the whole repo (a file checked alone cannot pass or fail them). */
export const CROSS_FILE_CODES: ReadonlySet<string> = new Set([
  'DuplicateName',
  'UnknownBackend',
  'SecondStorage',
  'StoreCredential',
  'CheckpointModeUnavailable',
  'UnknownEnvironment',
  'EnvironmentInvalid',
  'EnvironmentTemplateName',
  'UnknownDataset',
  'DatasetInvalid',
  'UnknownDatasetSource',
]);

type Add = (d: LoadedDocument, diag: Diagnostic) => void;

/** Where a document's name is written, as `file:line`. */
const nameAt = (d: LoadedDocument): string => `${d.file}:${d.namePos?.line ?? d.line}`;

/**
 * Duplicate names (a DAG's child Runs included), references to unknown backends (`declared`: the
 * Backends the operator's rule yields, where they do not come from these documents), more than
 * one Storage, Backends naming the store's credentials.
 */
export function crossFileRules(
  docs: readonly LoadedDocument[],
  declared: ReadonlySet<string> | undefined,
  backends: BackendList,
): CrossVerdicts {
  const out = new Map<LoadedDocument, Diagnostic[]>();
  const add = adder(out);
  const byName = new Map<string, LoadedDocument[]>();
  for (const d of docs) {
    if (!d.kind || !d.name) continue;
    // Environments and Datasets share a name across versions: one of a name and version is unique.
    const version = d.kind === 'Environment' ? d.envVersion : d.kind === 'Dataset' ? d.datasetVersion : 0;
    if (version === undefined) continue;
    const k = version ? `${d.kind}/${d.name}@${version}` : `${d.kind}/${d.name}`;
    const list = byName.get(k);
    if (list) list.push(d);
    else byName.set(k, [d]);
  }
  duplicateNameRules(byName, add);
  childNameRules(docs, byName, add);
  if (docs.some((d) => d.sweepPoints)) sweepPointNameRules(docs, add);
  const defined = declared ?? new Set(docs.filter((d) => d.kind === 'Backend' && d.name).map((d) => d.name!));
  backendRefRules(docs, defined, declared !== undefined, add);
  const storages = docs.filter((d) => d.kind === 'Storage' && d.name);
  secondStorageRules(storages, add);
  storeCredentialRules(docs, storages[0], add);
  modeRules(docs, declared, backends, add);
  environmentRefRules(docs, byName, add);
  datasetCrossRules(docs, byName, add);
  return { byDoc: out, declared, defined };
}

/** What the cross-file rules said, per document, and the backend names they checked against. */
export interface CrossVerdicts {
  byDoc: Map<LoadedDocument, Diagnostic[]>;
  declared: ReadonlySet<string> | undefined;
  defined: ReadonlySet<string>;
}

function adder(out: Map<LoadedDocument, Diagnostic[]>): Add {
  return (d, diag) => {
    const list = out.get(d);
    if (list) list.push(diag);
    else out.set(d, [diag]);
  };
}

/**
 * What the cross-file rules read of a plain document (a Run, or a document of no kind, that names
 * no child, point, secret, checkpoint mode or Environment): its kind, name, where it and its name
 * are, and the backends it names. Two versions with equal facts get the same verdicts from every
 * rule but the backend-reference rule, which locates each reference (recomputed by `patchCross`);
 * and every other document's verdicts stay the same. Undefined: not plain (always recomputed).
 */
export function crossFacts(d: LoadedDocument): string | undefined {
  if ((d.kind !== undefined && d.kind !== 'Run') || d.children || d.sweepPoints || d.templateRefs?.length)
    return undefined;
  if (d.secretRefs?.length || d.modeRefs?.length || d.environmentRefs?.length) return undefined;
  if (d.datasetRefs?.length) return undefined;
  return JSON.stringify([
    d.kind ?? null,
    d.name ?? null,
    d.line,
    d.column,
    d.namePos ?? null,
    d.object ? 1 : 0,
    d.backendRefs.map((r) => r.name),
    // A Dataset's output source checks the outputs a Run declares.
    Object.keys((d.object as Run | undefined)?.spec.outputs ?? {}),
  ]);
}

/** The last verdicts with each swapped document's carried over and its backend references checked again. */
export function patchCross(
  last: CrossVerdicts,
  swaps: readonly [LoadedDocument, LoadedDocument][],
): CrossVerdicts {
  const byDoc = last.byDoc;
  for (const [before, after] of swaps) {
    const kept = (byDoc.get(before) ?? []).filter((x) => x.code !== 'UnknownBackend');
    byDoc.delete(before);
    const fresh = new Map<LoadedDocument, Diagnostic[]>();
    backendRefRules([after], last.defined, last.declared !== undefined, adder(fresh));
    const all = [...kept, ...(fresh.get(after) ?? [])];
    if (all.length) byDoc.set(after, all);
  }
  return last;
}

export function sameNames(a: ReadonlySet<string> | undefined, b: ReadonlySet<string> | undefined): boolean {
  if (a === b) return true;
  if (!a || !b || a.size !== b.size) return false;
  for (const n of a) if (!b.has(n)) return false;
  return true;
}

/**
 * Every Environment a run names resolves (its newest version, or the pinned one) to one valid
 * document, and every template of that Environment names a variable or secret the run has.
 */
function environmentRefRules(
  docs: readonly LoadedDocument[],
  byName: ReadonlyMap<string, LoadedDocument[]>,
  add: Add,
): void {
  if (!docs.some((d) => d.environmentRefs?.length)) return;
  const envDocs: EnvironmentDoc[] = docs
    .filter((d) => d.kind === 'Environment' && d.name && d.envVersion !== undefined)
    .map((d) => ({
      file: d.file,
      name: d.name!,
      version: d.envVersion!,
      line: d.namePos?.line ?? d.line,
      usable:
        d.object !== undefined &&
        !d.diagnostics.some((x) => x.severity === 'error') &&
        byName.get(`Environment/${d.name}@${d.envVersion}`)?.length === 1,
      templates: d.templateRefs ?? [],
    }));
  for (const d of docs)
    for (const ref of d.environmentRefs ?? []) {
      const at = {
        severity: 'error' as const,
        file: d.file,
        line: ref.line,
        column: ref.column,
        path: ref.path,
      };
      const r = resolveRef(ref, envDocs);
      if ('problem' in r) {
        add(d, { ...at, ...r.problem });
        continue;
      }
      for (const t of r.doc.templates) {
        const problem = templateProblem(t, ref.scope);
        if (problem)
          add(d, {
            ...at,
            code: 'EnvironmentTemplateName',
            message: `Environment ${r.doc.name}@${r.doc.version} (${r.doc.file}:${t.line}, ${t.path}): ${problem.message}`,
            hint: problem.hint,
          });
      }
    }
}

/** Declared checkpoint modes no Backend the run may use offers (`checkpoint-rules.ts`). */
function modeRules(
  docs: readonly LoadedDocument[],
  declared: ReadonlySet<string> | undefined,
  backends: BackendList,
  add: Add,
): void {
  if (!docs.some((d) => d.modeRefs?.length)) return;
  const defined = declared
    ? undefined
    : new Map(
        docs
          .filter((d) => d.kind === 'Backend' && d.name && d.object)
          .map((d) => [d.name!, d.object as Backend]),
      );
  for (const d of docs)
    if (d.object && d.modeRefs?.length)
      for (const diag of checkpointModeDiagnostics(d.file, d.object, d.modeRefs, defined, backends))
        add(d, diag);
}

/** Two documents of one kind and name: both are refused (acting on either would be a guess). */
function duplicateNameRules(byName: ReadonlyMap<string, LoadedDocument[]>, add: Add): void {
  for (const [k, list] of byName) {
    if (list.length < 2) continue;
    for (const d of list) {
      const others = list.filter((o) => o !== d).map(nameAt);
      add(d, {
        severity: 'error',
        code: 'DuplicateName',
        file: d.file,
        line: d.namePos?.line ?? d.line,
        column: d.namePos?.column ?? d.column,
        path: 'metadata.name',
        message: `${k} is also defined at ${others.join(', ')}`,
        hint:
          d.kind === 'Environment' || d.kind === 'Dataset'
            ? 'give one of them another spec.version: a name and version are unique across the repo'
            : 'rename one of them: names are unique per kind across the repo',
      });
    }
  }
}

/**
 * A DAG node's child Run is named `<dag>.<node>`: a Run of that name would be the same run twice.
 * Both are refused, as two Runs of one name are: the Run at its name, the DAG at the node's id.
 */
function childNameRules(
  docs: readonly LoadedDocument[],
  byName: ReadonlyMap<string, LoadedDocument[]>,
  add: Add,
): void {
  const hint =
    'rename the Run or the node: a DAG node runs as the Run "<dag>.<node id>", and Run names are unique across the repo';
  for (const dag of docs) {
    for (const child of dag.children ?? []) {
      for (const run of byName.get(`Run/${child.name}`) ?? []) {
        const nodeAt = `${dag.file}:${child.line}`;
        add(run, {
          severity: 'error',
          code: 'DuplicateName',
          file: run.file,
          line: run.namePos?.line ?? run.line,
          column: run.namePos?.column ?? run.column,
          path: 'metadata.name',
          message: `Run/${child.name} is also the child run of node "${child.node}" of DAG/${dag.name} at ${nodeAt}`,
          hint,
        });
        add(dag, {
          severity: 'error',
          code: 'DuplicateName',
          file: dag.file,
          line: child.line,
          column: child.column,
          path: child.path,
          message: `node "${child.node}" runs as Run/${child.name}, which is also defined at ${nameAt(run)}`,
          hint,
        });
      }
    }
  }
}

/** Every backend a Run or DAG names is defined in the repo (or declared by the operator). */
function backendRefRules(
  docs: readonly LoadedDocument[],
  defined: ReadonlySet<string>,
  declared: boolean,
  add: Add,
): void {
  const known = [...defined];
  for (const d of docs) {
    if (!d.object) continue;
    for (const ref of d.backendRefs) {
      if (defined.has(ref.name)) continue;
      const guess = closest(ref.name, known);
      add(d, {
        severity: 'error',
        code: 'UnknownBackend',
        file: d.file,
        line: ref.line,
        column: ref.column,
        path: ref.path,
        message: declared
          ? `backend "${ref.name}" is not one of the Backends this controller's operator declared`
          : `backend "${ref.name}" is not defined in this repo`,
        hint: guess
          ? `did you mean "${guess}"?`
          : known.length > 0
            ? `use one of: ${known.sort().join(', ')}`
            : declared
              ? 'ask the operator for a Backend, or name one they declared'
              : 'add a Backend spec (e.g. backends/local.yaml)',
      });
    }
  }
}

function secondStorageRules(storages: readonly LoadedDocument[], add: Add): void {
  for (const extra of storages.slice(1)) {
    add(extra, {
      severity: 'error',
      code: 'SecondStorage',
      file: extra.file,
      line: extra.namePos?.line ?? extra.line,
      column: extra.namePos?.column ?? extra.column,
      path: 'metadata.name',
      message: `a repo has one Storage; another is defined at ${nameAt(storages[0]!)}`,
      hint: 'remove one of them',
    });
  }
}

/**
 * A Backend's secret is resolved from the controller's secrets and sent where the spec says (an
 * API key to `apiUrl`): naming the store's credential variables would hand the store's keys to it.
 */
function storeCredentialRules(
  docs: readonly LoadedDocument[],
  storage: LoadedDocument | undefined,
  add: Add,
): void {
  if (!storage?.object) return;
  const reserved = new Set(storeCredentialNames((storage.object as Storage).spec));
  if (!reserved.size) return;
  for (const d of docs) {
    for (const ref of d.secretRefs ?? []) {
      if (!reserved.has(ref.name)) continue;
      add(d, {
        severity: 'error',
        code: 'StoreCredential',
        file: d.file,
        line: ref.line,
        column: ref.column,
        path: ref.path,
        message: `"${ref.name}" is a credential of the object store (Storage at ${nameAt(storage)}), which only the controller hands out: no spec may name it`,
        hint: BACKEND_SECRET_HINT,
      });
    }
  }
}
