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
import { checkpointModeRefsOf } from './checkpoint-rules.js';
import { crossFacts, crossFileRules, patchCross, sameNames, type CrossVerdicts } from './cross-file.js';
import type { LoadedDocument } from './document.js';
import { documentRules } from './rules.js';
import { backendRefsOf, backendSecretRefsOf, childRefsOf } from './refs.js';
import { datasetOutputRefOf, datasetRefsOf } from './dataset-rules.js';
import { environmentRefsOf, templateRefsOf } from './environment-rules.js';
import type { Backend, Dag, Dataset, Environment, Kind, Provider, Run, SpecObject, Sweep } from './schema.js';
import { providerSecretRefsOf } from '../notify/rules.js';
import { sweepPointNamesOf } from './sweep-rules.js';
import type { SpecFileRef, SpecSource } from './source.js';
import { dispatchKind, validateSchema } from './validate.js';

export type { LoadedDocument } from './document.js';
export { CROSS_FILE_CODES } from './cross-file.js';

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
   * controller's infra dir, an admin-signed commit: loop/desired/infra-source.ts). Default: the source's own
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
  /** Times the cross-file rules ran over every document (not patched); tests and benchmarks read it. */
  fullCrossChecks = 0;
  /** The files in order, until one is added or removed. */
  private order: string[] | undefined;
  /** The last cross-file verdicts, patched when only plain documents changed (see `crossFacts`). */
  private cross: CrossVerdicts | undefined;
  /** Documents replaced since the last result, old by new, in order; undefined: recompute all. */
  private swaps: [LoadedDocument, LoadedDocument][] | undefined = [];

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
    const loaded = { key, ...loadOneFile(file, bytes, this.limits, this.backends) };
    this.files.set(file, loaded);
    if (!cached) this.order = this.swaps = undefined;
    else this.noteSwaps(cached.docs, loaded.docs);
  }

  /** Records a file's new documents as swaps when each keeps its cross-file facts, else a full recompute. */
  private noteSwaps(before: readonly LoadedDocument[], after: readonly LoadedDocument[]): void {
    if (!this.swaps) return;
    const same =
      before.length === after.length &&
      before.every((d, i) => {
        const facts = crossFacts(d);
        return facts !== undefined && facts === crossFacts(after[i]!);
      });
    if (same) before.forEach((d, i) => this.swaps!.push([d, after[i]!]));
    else this.swaps = undefined;
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
    this.order = this.swaps = undefined;
  }

  /** Whether `file` is cached with this change key. */
  isCurrent(file: string, key: string): boolean {
    return this.files.get(file)?.key === key;
  }

  removeFile(file: string): void {
    if (this.files.delete(file)) this.order = this.swaps = undefined;
  }

  private readonly loadedObjects = new WeakMap<LoadedDocument, LoadedObject>();

  /** The same object for a document every time it is valid: maps downstream keyed by it stay warm. */
  private loadedObjectOf(d: LoadedDocument, object: SpecObject): LoadedObject {
    let o = this.loadedObjects.get(d);
    if (!o)
      this.loadedObjects.set(d, (o = { kind: d.kind!, name: d.name!, file: d.file, line: d.line, object }));
    return o;
  }

  /** Brings the cache in line with a source: reads changed files only, forgets vanished ones. */
  async sync(source: SpecSource): Promise<LoadResult> {
    const refs = await source.list();
    this.sourceNotices = source.notices?.() ?? [];
    const present = new Set(refs.map((r) => r.path));
    for (const file of [...this.files.keys()]) if (!present.has(file)) this.removeFile(file);
    const stale: SpecFileRef[] = [];
    for (const r of refs) {
      if (this.isCurrent(r.path, r.key)) continue;
      // Over the size limit by the size the source knows: refused unread (a 50 MB blob is never read).
      if (r.size !== undefined && r.size > this.limits.maxFileBytes) {
        const fileDiagnostics = [fileTooLarge(r.path, r.size, this.limits)];
        this.files.set(r.path, { key: r.key, docs: [], fileDiagnostics });
        this.order = this.swaps = undefined;
      } else stale.push(r);
    }
    const contents = await source.readMany(stale.map((r) => r.path));
    stale.forEach((r, i) => this.loadFile(r.path, contents[i]!, r.key));
    return this.result();
  }

  /**
   * Current objects and diagnostics, with the cross-file rules applied. The rules need every
   * document; when the files changed since the last result only replaced plain documents (Runs whose
   * name, place and backend names stayed: an edit of a run's command, its resources) the last
   * verdicts are patched instead (`patchCross`), so one changed file among 10,000 does not run them
   * over 10,000 documents again.
   */
  result(): LoadResult {
    const docs: LoadedDocument[] = [];
    const fileDiagnostics: Diagnostic[] = [];
    this.order ??= [...this.files.keys()].sort();
    for (const f of this.order) {
      const cached = this.files.get(f)!;
      for (const d of cached.docs) docs.push(d);
      for (const d of cached.fileDiagnostics) fileDiagnostics.push(d);
    }
    const declared = this.backendNames?.();
    const extra =
      this.cross && this.swaps && sameNames(declared, this.cross.declared)
        ? patchCross(this.cross, this.swaps)
        : (this.fullCrossChecks++, crossFileRules(docs, declared, this.backends));
    this.cross = extra;
    this.swaps = [];
    const objects: LoadedObject[] = [];
    const invalid: InvalidDocument[] = [];
    const diagnostics: Diagnostic[] = [...fileDiagnostics];
    for (const d of docs) {
      const more = extra.byDoc.get(d) ?? [];
      const all = more.length > 0 ? [...d.diagnostics, ...more] : d.diagnostics;
      for (const x of all) diagnostics.push(x);
      const errors = all.some((x) => x.severity === 'error');
      if (d.object && !errors) {
        objects.push(this.loadedObjectOf(d, d.object));
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
    if (doc.kind === 'Dataset' && Number.isInteger(value.spec?.version))
      doc.datasetVersion = value.spec!.version as number;
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
      doc.datasetRefs = datasetRefsOf(runSpecsOf(obj as Run | Dag), pd.locator);
    }
    if (obj.kind === 'Sweep')
      doc.datasetRefs = datasetRefsOf([[['spec', 'template'], (obj as Sweep).spec.template]], pd.locator);
    if (obj.kind === 'Dataset') doc.datasetOutputs = datasetOutputRefOf((obj as Dataset).spec, pd.locator);
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
  // A kind an older loader did not know (a Dataset) may be one this one knows.
  if (!d.object) return !d.diagnostics.some((x) => x.code === 'UnknownKind');
  if ((d.kind === 'DAG' || d.kind === 'Run' || d.kind === 'Sweep') && d.datasetRefs === undefined)
    return false;
  if (d.kind === 'Dataset') return d.datasetOutputs !== undefined;
  if (d.kind === 'DAG')
    return d.children !== undefined && d.modeRefs !== undefined && d.environmentRefs !== undefined;
  if (d.kind === 'Backend' || d.kind === 'Provider') return d.secretRefs !== undefined;
  if (d.kind === 'Sweep') return d.sweepPoints !== undefined;
  if (d.kind === 'Run') return d.modeRefs !== undefined && d.environmentRefs !== undefined;
  if (d.kind === 'Environment') return d.templateRefs !== undefined;
  return true;
}
