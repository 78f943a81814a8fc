/**
 * The spec loader: a specs repo (a directory, or a git tree through the same `SpecSource` port) →
 * validated objects plus every problem, located. Stages: parse → schema → rules, per file; then the
 * cross-file rules over small per-document summaries.
 *
 * Files are cached by path and change key (a git blob id, or a stat signature), so `sync()` after a
 * change re-reads and re-parses only what changed; one bad document never hides the others.
 */
import { BACKENDS } from '../backends/registry.js';
import type { BackendList } from '../backends/types.js';
import type { Diagnostic } from './diagnostic.js';
import { byLocation } from './diagnostic.js';
import { DEFAULT_LIMITS, fileTooLarge, parseFile, type ParseLimits } from './parse.js';
import { storeCredentialNames } from '../storage.js';
import { checkpointModeDiagnostics, checkpointModeRefsOf, type ModeRef } from './checkpoint-rules.js';
import { BACKEND_SECRET_HINT, documentRules } from './rules.js';
import { backendRefsOf, backendSecretRefsOf, childRefsOf, type BackendRef, type ChildRef } from './refs.js';
import {
  environmentRefsOf,
  resolveRef,
  templateProblem,
  templateRefsOf,
  type EnvironmentDoc,
  type EnvironmentRef,
  type TemplateRef,
} from './environment-rules.js';
import type { Backend, Dag, Environment, Kind, Provider, Run, SpecObject, Storage, Sweep } from './schema.js';
import { providerSecretRefsOf } from '../notify/rules.js';
import { sweepPointNameRules, sweepPointNamesOf, type SweepPointNames } from './sweep-rules.js';
import type { SpecFileRef, SpecSource } from './source.js';
import { closest, dispatchKind, validateSchema } from './validate.js';

/** One YAML document of a specs repo, valid or not. */
export interface LoadedDocument {
  file: string;
  /** 0-based index of the document in its file. */
  index: number;
  /** Where the document starts. */
  line: number;
  column: number;
  kind?: Kind;
  name?: string;
  /** Where `metadata.name` is written. */
  namePos?: { line: number; column: number };
  /** A schema-valid DAG's child Runs (`<dag>.<node>`), each with where its node's id is written. */
  children?: ChildRef[];
  /** A schema-valid Sweep's point run names (`<sweep>-<hash8>`), and where its parameters are. */
  sweepPoints?: SweepPointNames;
  /** The secrets a schema-valid Backend (its `*Secret` fields) or Provider (`secretRef`) names, located. */
  secretRefs?: BackendRef[];
  /** The checkpoint modes a schema-valid Run or DAG declares, located. */
  modeRefs?: ModeRef[];
  /** An Environment's `spec.version`, when it is a whole number (even if the document is invalid). */
  envVersion?: number;
  /** The templates a schema-valid Environment holds, located. */
  templateRefs?: TemplateRef[];
  /** The Environments a schema-valid Run or DAG names, located. */
  environmentRefs?: EnvironmentRef[];
  /** Present when the per-file stages passed. */
  object?: SpecObject;
  backendRefs: BackendRef[];
  /** Problems found by the per-file stages. */
  diagnostics: Diagnostic[];
}

/** A valid object and where it came from. */
export interface LoadedObject<T extends SpecObject = SpecObject> {
  kind: Kind;
  name: string;
  file: string;
  line: number;
  object: T;
}

/** A document that cannot be acted on, with the reasons. */
export interface InvalidDocument {
  file: string;
  line: number;
  kind?: Kind;
  name?: string;
  diagnostics: Diagnostic[];
}

export interface LoadResult {
  objects: LoadedObject[];
  invalid: InvalidDocument[];
  /** Every diagnostic, sorted by file and position. */
  diagnostics: Diagnostic[];
  fileCount: number;
}

interface CachedFile {
  key: string;
  docs: LoadedDocument[];
  /** Problems of the file as a whole (syntax, size, encoding) that belong to no document. */
  fileDiagnostics: Diagnostic[];
}

/** One persisted cache entry: path, change key, documents, file-level diagnostics. */
export type CachedFileEntry = [string, string, LoadedDocument[], Diagnostic[]];

export interface LoaderOptions {
  limits?: Partial<ParseLimits>;
  /** The backend types Backend documents are validated against. Default: this build's `BACKENDS`. */
  backends?: BackendList;
  /**
   * The Backend names Runs may refer to when Backends come from elsewhere than this source (the
   * controller's infra dir, an admin-signed commit: loop/infra-source.ts). Default: the source's own
   * Backend documents.
   */
  backendNames?: () => ReadonlySet<string> | undefined;
}

export class SpecLoader {
  private readonly files = new Map<string, CachedFile>();
  private readonly limits: ParseLimits;
  private readonly backends: BackendList;
  private readonly backendNames: (() => ReadonlySet<string> | undefined) | undefined;
  /** What the last synced source met and did not hand over as a file (see `SpecSource.notices`). */
  private sourceNotices: Diagnostic[] = [];
  /** Files parsed since construction; tests and benchmarks read it to prove caching. */
  parsedFiles = 0;

  constructor(opts: LoaderOptions = {}) {
    this.limits = { ...DEFAULT_LIMITS, ...opts.limits };
    this.backends = opts.backends ?? BACKENDS;
    this.backendNames = opts.backendNames;
  }

  /** Loads (or replaces) one file. Cheap when `key` is unchanged. */
  loadFile(file: string, bytes: Uint8Array, key: string): void {
    const cached = this.files.get(file);
    if (cached && cached.key === key) return;
    this.parsedFiles++;
    this.files.set(file, { key, ...loadOneFile(file, bytes, this.limits, this.backends) });
  }

  /** The per-file cache as plain data, to persist across restarts (see `importCache`). */
  exportCache(): CachedFileEntry[] {
    return [...this.files].map(([file, c]) => [file, c.key, c.docs, c.fileDiagnostics]);
  }

  /**
   * Seeds the cache from `exportCache` output; files whose key still matches are not parsed again.
   * An entry an older loader wrote without the summaries this one keeps (a DAG's child names, a
   * Backend's secrets) is left out, so its file is parsed again: otherwise the cross-file rules
   * would not see them until the file changed.
   */
  importCache(entries: readonly CachedFileEntry[]): void {
    for (const [file, key, docs, fileDiagnostics] of entries) {
      if (!docs.every(hasSummaries)) continue;
      this.files.set(file, { key, docs, fileDiagnostics });
    }
  }

  /** Whether `file` is cached with this change key. */
  isCurrent(file: string, key: string): boolean {
    return this.files.get(file)?.key === key;
  }

  removeFile(file: string): void {
    this.files.delete(file);
  }

  /** Brings the cache in line with a source: reads changed files only, forgets vanished ones. */
  async sync(source: SpecSource): Promise<LoadResult> {
    const refs = await source.list();
    this.sourceNotices = source.notices?.() ?? [];
    const present = new Set(refs.map((r) => r.path));
    for (const file of [...this.files.keys()]) if (!present.has(file)) this.files.delete(file);
    const stale: SpecFileRef[] = [];
    for (const r of refs) {
      if (this.isCurrent(r.path, r.key)) continue;
      // Over the size limit by the size the source knows: refused unread (a 50 MB blob is never read).
      if (r.size !== undefined && r.size > this.limits.maxFileBytes) {
        const fileDiagnostics = [fileTooLarge(r.path, r.size, this.limits)];
        this.files.set(r.path, { key: r.key, docs: [], fileDiagnostics });
      } else stale.push(r);
    }
    const contents = await source.readMany(stale.map((r) => r.path));
    stale.forEach((r, i) => this.loadFile(r.path, contents[i]!, r.key));
    return this.result();
  }

  /** Current objects and diagnostics, with the cross-file rules applied. */
  result(): LoadResult {
    const docs: LoadedDocument[] = [];
    const fileDiagnostics: Diagnostic[] = [];
    for (const f of [...this.files.keys()].sort()) {
      const cached = this.files.get(f)!;
      docs.push(...cached.docs);
      fileDiagnostics.push(...cached.fileDiagnostics);
    }
    const extra = crossFileRules(docs, this.backendNames?.(), this.backends);
    const objects: LoadedObject[] = [];
    const invalid: InvalidDocument[] = [];
    const diagnostics: Diagnostic[] = [...fileDiagnostics];
    for (const d of docs) {
      const more = extra.get(d) ?? [];
      const all = more.length > 0 ? [...d.diagnostics, ...more] : d.diagnostics;
      diagnostics.push(...all);
      const errors = all.some((x) => x.severity === 'error');
      if (d.object && !errors) {
        objects.push({ kind: d.kind!, name: d.name!, file: d.file, line: d.line, object: d.object });
      } else {
        invalid.push({
          file: d.file,
          line: d.line,
          ...(d.kind ? { kind: d.kind } : {}),
          ...(d.name ? { name: d.name } : {}),
          diagnostics: all,
        });
      }
    }
    for (const fd of fileDiagnostics) invalid.push({ file: fd.file, line: fd.line, diagnostics: [fd] });
    for (const n of this.sourceNotices) {
      diagnostics.push(n);
      if (n.severity === 'error') invalid.push({ file: n.file, line: n.line, diagnostics: [n] });
    }
    diagnostics.sort(byLocation);
    return { objects, invalid, diagnostics, fileCount: this.files.size };
  }
}

/** Convenience: load a whole source once. */
export async function loadSpecs(source: SpecSource, opts: LoaderOptions = {}): Promise<LoadResult> {
  return new SpecLoader(opts).sync(source);
}

function loadOneFile(
  file: string,
  bytes: Uint8Array,
  limits: ParseLimits,
  backends: BackendList,
): Omit<CachedFile, 'key'> {
  const parsed = parseFile(file, bytes, limits);
  const docs: LoadedDocument[] = [];
  for (const pd of parsed.docs) {
    const start = pd.locator.start();
    const doc: LoadedDocument = { file, index: pd.index, ...start, backendRefs: [], diagnostics: [] };
    docs.push(doc);
    const withFile = (d: Omit<Diagnostic, 'file'>): Diagnostic => ({ file, ...d });
    const dispatched = dispatchKind(pd.value, pd.locator);
    if ('error' in dispatched) {
      doc.diagnostics.push(withFile(dispatched.error));
      continue;
    }
    doc.kind = dispatched.kind;
    const value = pd.value as { metadata?: { name?: unknown }; spec?: { version?: unknown } };
    if (typeof value.metadata?.name === 'string') {
      doc.name = value.metadata.name;
      doc.namePos = pd.locator.at(['metadata', 'name']);
    }
    if (doc.kind === 'Environment' && Number.isInteger(value.spec?.version))
      doc.envVersion = value.spec!.version as number;
    const schemaErrors = validateSchema(dispatched.kind, pd.value, pd.locator, backends);
    if (schemaErrors.length > 0) {
      doc.diagnostics.push(...schemaErrors.map(withFile));
      continue;
    }
    const obj = pd.value as SpecObject;
    const ruleErrors = documentRules(obj, pd.locator, backends);
    doc.diagnostics.push(...ruleErrors.map(withFile));
    doc.backendRefs = backendRefsOf(obj, pd.locator);
    if (obj.kind === 'DAG') doc.children = childRefsOf(obj as Dag, pd.locator);
    if (obj.kind === 'Sweep') doc.sweepPoints = sweepPointNamesOf(obj as Sweep, pd.locator);
    if (obj.kind === 'Backend') doc.secretRefs = backendSecretRefsOf(obj as Backend, pd.locator);
    if (obj.kind === 'Provider') doc.secretRefs = providerSecretRefsOf(obj as Provider, pd.locator);
    if (obj.kind === 'Run' || obj.kind === 'DAG') {
      doc.modeRefs = checkpointModeRefsOf(obj, pd.locator);
      doc.environmentRefs = environmentRefsOf(runSpecsOf(obj as Run | Dag), pd.locator);
    }
    if (obj.kind === 'Environment') doc.templateRefs = templateRefsOf((obj as Environment).spec, pd.locator);
    doc.object = obj;
  }
  return { docs, fileDiagnostics: parsed.diagnostics };
}

/** The run specs of a Run or a DAG (its nodes'), each with its path. */
function runSpecsOf(obj: Run | Dag): [(string | number)[], Run['spec']][] {
  return obj.kind === 'Run'
    ? [[['spec'], obj.spec]]
    : obj.spec.nodes.map((n, i) => [['spec', 'nodes', i, 'run'], n.run]);
}

/** Whether a cached document has every summary the cross-file rules read. */
function hasSummaries(d: LoadedDocument): boolean {
  if (!d.object) return true;
  if (d.kind === 'DAG')
    return d.children !== undefined && d.modeRefs !== undefined && d.environmentRefs !== undefined;
  if (d.kind === 'Backend' || d.kind === 'Provider') return d.secretRefs !== undefined;
  if (d.kind === 'Sweep') return d.sweepPoints !== undefined;
  if (d.kind === 'Run') return d.modeRefs !== undefined && d.environmentRefs !== undefined;
  if (d.kind === 'Environment') return d.templateRefs !== undefined;
  return true;
}

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
]);

type Add = (d: LoadedDocument, diag: Diagnostic) => void;

/** Where a document's name is written, as `file:line`. */
const nameAt = (d: LoadedDocument): string => `${d.file}:${d.namePos?.line ?? d.line}`;

/**
 * Duplicate names (a DAG's child Runs included), references to unknown backends (`declared`: the
 * Backends the operator's rule yields, where they do not come from these documents), more than
 * one Storage, Backends naming the store's credentials.
 */
function crossFileRules(
  docs: readonly LoadedDocument[],
  declared: ReadonlySet<string> | undefined,
  backends: BackendList,
): Map<LoadedDocument, Diagnostic[]> {
  const out = new Map<LoadedDocument, Diagnostic[]>();
  const add: Add = (d, diag) => {
    const list = out.get(d);
    if (list) list.push(diag);
    else out.set(d, [diag]);
  };
  const byName = new Map<string, LoadedDocument[]>();
  for (const d of docs) {
    if (!d.kind || !d.name) continue;
    // Environments share a name across versions: one of a name and version is unique.
    if (d.kind === 'Environment' && d.envVersion === undefined) continue;
    const k = d.kind === 'Environment' ? `Environment/${d.name}@${d.envVersion}` : `${d.kind}/${d.name}`;
    const list = byName.get(k);
    if (list) list.push(d);
    else byName.set(k, [d]);
  }
  duplicateNameRules(byName, add);
  childNameRules(docs, byName, add);
  sweepPointNameRules(docs, add);
  backendRefRules(docs, declared, add);
  const storages = docs.filter((d) => d.kind === 'Storage' && d.name);
  secondStorageRules(storages, add);
  storeCredentialRules(docs, storages[0], add);
  modeRules(docs, declared, backends, add);
  environmentRefRules(docs, byName, add);
  return out;
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
          d.kind === 'Environment'
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
  declared: ReadonlySet<string> | undefined,
  add: Add,
): void {
  const defined = declared ?? new Set(docs.filter((d) => d.kind === 'Backend' && d.name).map((d) => d.name!));
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
