/**
 * The desired state: what the watched branch asks for at its head. Loads the specs (only blobs
 * whose id changed are parsed; the parse cache survives restarts in the data dir), keeps the Runs
 * of the specs and the child Runs of the DAGs, and says which keys changed since the last load by
 * comparing fingerprints (generation, labels, annotations, file, or the validation error).
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { BackendDescriptor } from '../../backends/types.js';
import type { GitPort } from '../../git/port.js';
import { GitTreeSource, TreeListingCache } from '../../git/tree-source.js';
import { listOf, readJsonCache, writeJsonCache } from '../../internal/json-cache.js';
import type { DesiredDag, InvalidDag } from '../../reconcile/dag-plan.js';
import { desiredDag, desiredRun, desiredSweep, invalidObject } from '../../reconcile/desired.js';
import { SWEEP_LABEL, type DesiredSweep, type InvalidSweep } from '../../reconcile/sweep-plan.js';
import { generationOf, type DesiredRun, type InvalidRun } from '../../reconcile/run-plan.js';
import type { Diagnostic } from '../../spec/diagnostic.js';
import {
  SpecLoader,
  type CachedFileEntry,
  type LoadedDocument,
  type LoadedObject,
  type LoadResult,
} from '../../spec/loader.js';
import { DatasetIndex } from '../../spec/datasets.js';
import { EnvironmentIndex } from '../../spec/environments.js';
import { isObjectName, SCHEMAS, type Run, type StorageSpec } from '../../spec/schema.js';
import type { LoadError } from '../../status/types.js';
import { VERSION } from '../../../runtime/version.js';
import type { LoadedBackend } from '../observe/adapters.js';
import { infraOptionFor, infraSourceFor, type InfraOption, type InfraSource } from './infra-source.js';
import { errText } from '../observe/observer.js';
import { NO_NOTIFY, type NotifyObjects } from '../../notify/objects.js';

/** Work-queue keys: `Run/<name>`, `DAG/<name>`. */
export const runKey = (name: string): string => `Run/${name}`;
export const dagKey = (name: string): string => `DAG/${name}`;
export const sweepKey = (name: string): string => `Sweep/${name}`;

/** The key of the DAG or Sweep that owns a child run (a Sweep's children carry its label). */
export function ownerKey(doc: {
  metadata: { labels?: Record<string, string> };
  status: { owner?: string };
}): string | undefined {
  const owner = doc.status.owner;
  if (!owner) return undefined;
  return doc.metadata.labels?.[SWEEP_LABEL] === owner ? sweepKey(owner) : dagKey(owner);
}

/** `Run/foo` → ['Run', 'foo']. */
export function splitKey(key: string): [string, string] {
  const i = key.indexOf('/');
  return [key.slice(0, i), key.slice(i + 1)];
}

/** Every Run and DAG key that is desired or has a status: what a resync looks at. */
export function everyKey(
  desired: DesiredState,
  status: { names(kind: string): readonly string[] },
): string[] {
  const keys = new Set<string>();
  for (const n of [...desired.names('Run'), ...status.names('Run')]) keys.add(runKey(n));
  for (const n of [...desired.names('DAG'), ...status.names('DAG')]) keys.add(dagKey(n));
  for (const n of [...desired.names('Sweep'), ...status.names('Sweep')]) keys.add(sweepKey(n));
  return [...keys];
}

export class DesiredState {
  private readonly loader: SpecLoader;
  private readonly infra: InfraSource;
  private readonly listings: TreeListingCache;
  /** The watched branch's commit these specs are from (undefined until the first load). */
  head: string | undefined;
  /** Runs of the specs, and child runs of DAGs: what the Run planner is asked about. */
  readonly runs = new Map<string, DesiredRun>();
  private specRuns = new Map<string, DesiredRun>();
  private readonly childRuns = new Map<string, DesiredRun>();
  /** Children of each DAG as last planned. */
  private readonly dagChildren = new Map<string, Set<string>>();
  invalidRuns = new Map<string, InvalidRun>();
  dags = new Map<string, DesiredDag>();
  invalidDags = new Map<string, InvalidDag>();
  sweeps = new Map<string, DesiredSweep>();
  invalidSweeps = new Map<string, InvalidSweep>();
  /** Problems not reported on a Run's or DAG's status: whole files, bad names, Backends, Storage. */
  loadErrors: LoadError[] = [];
  backends = new Map<string, LoadedBackend>();
  /** The repo's Environments, by name and version. */
  environments = new EnvironmentIndex();
  /** The repo's Datasets, by name and version. */
  datasets = new DatasetIndex();
  storage: StorageSpec | undefined;
  /** Where the Backends and Storage acted on came from (infra-source.ts), for the log. */
  infraSource = '';
  /** Providers and Alerts (controller/notify/), from the same rule as the Backends. */
  notify: NotifyObjects = NO_NOTIFY;
  private runPrints = new Map<string, string>();
  private dagPrints = new Map<string, string>();
  private sweepPrints = new Map<string, string>();

  constructor(
    private readonly git: GitPort,
    private readonly opts: {
      dataDir: string;
      specsPath?: string;
      descriptors: readonly BackendDescriptor[];
      logger: Logger;
      /** Where Backends and Storage come from (infra-source.ts); the default depends on `mode`. */
      infra?: InfraOption;
      mode: 'local' | 'remote';
    },
  ) {
    const infra = infraOptionFor(opts.infra, opts.mode);
    this.infra = infraSourceFor(infra, { git, specsPath: opts.specsPath, descriptors: opts.descriptors });
    this.loader = new SpecLoader({
      backends: opts.descriptors,
      backendNames: () => this.infra.backendNames(),
    });
    this.listings = new TreeListingCache(git);
  }

  private get cacheFile(): string {
    return join(this.opts.dataDir, 'spec-cache.json');
  }

  /** Keyed by the schemas, the backend types and the version: a new validator never trusts an old verdict. */
  cacheStamp(): string {
    return generationOf({
      version: VERSION,
      schemas: SCHEMAS,
      backends: this.opts.descriptors.map((d) => d.type),
    });
  }

  /** Seeds the parse cache from the data dir (a restart parses only what changed meanwhile). */
  async restoreCache(): Promise<void> {
    const entries = await readJsonCache(
      this.cacheFile,
      this.cacheStamp(),
      listOf<CachedFileEntry>(isCachedFile),
    );
    if (entries) this.loader.importCache(entries);
  }

  private cacheDirty = false;
  private cacheSavedAt = -Infinity;

  /** Persists the parse cache if it changed since it was last written. */
  async saveCache(): Promise<void> {
    if (!this.cacheDirty) return;
    this.cacheDirty = false;
    this.cacheSavedAt = performance.now();
    await writeJsonCache(this.cacheFile, this.cacheStamp(), this.loader.exportCache()).catch((e: unknown) =>
      this.opts.logger.warn({ err: errText(e) }, 'cannot save the spec cache'),
    );
  }

  /** Loads the specs at `head`; returns the keys whose desired state changed. */
  async load(head: string): Promise<string[]> {
    const commit = await this.git.readCommit(head);
    await this.infra.prepare(head);
    const parsedBefore = this.loader.parsedFiles;
    const result = await this.loader.sync(
      new GitTreeSource(this.git, commit.tree, this.listings, this.opts.specsPath ?? ''),
    );
    if (this.loader.parsedFiles !== parsedBefore) this.cacheDirty = true;
    // Writing 10,000 files' verdicts costs ~150 ms: at most once a minute (and on stop). A cache a
    // crash left older only means the files changed since are parsed again.
    if (this.cacheDirty && performance.now() - this.cacheSavedAt > 60_000) await this.saveCache();
    this.head = head;
    const changed = this.take(result);
    this.opts.logger.info(
      {
        commit: head.slice(0, 12),
        runs: this.specRuns.size,
        dags: this.dags.size,
        sweeps: this.sweeps.size,
        invalid: this.invalidRuns.size + this.invalidDags.size + this.invalidSweeps.size,
        backends: this.backends.size,
        infra: this.infraSource,
      },
      'loaded specs',
    );
    return changed;
  }

  /**
   * What a document asks for, made once per parsed document: the loader hands back the same object
   * for a file whose blob did not change, so a commit that changes one file of 10,000 hashes one
   * spec (its generation), not 10,000.
   */
  private readonly desiredOf = new WeakMap<object, DesiredRun | DesiredDag | DesiredSweep>();

  private memo<T extends DesiredRun | DesiredDag | DesiredSweep>(
    o: LoadedObject,
    make: (o: LoadedObject) => T,
  ): T {
    const known = this.desiredOf.get(o.object) as T | undefined;
    if (known && known.file === o.file && known.name === o.name) return known;
    const made = make(o);
    this.desiredOf.set(o.object, made);
    return made;
  }

  /** Sorts a load result into the maps; returns the keys whose fingerprint changed. */
  private take(result: LoadResult): string[] {
    const runs = new Map<string, DesiredRun>();
    const dags = new Map<string, DesiredDag>();
    const sweeps = new Map<string, DesiredSweep>();
    const infra = this.infra.take(result);
    this.backends = infra.backends;
    this.storage = infra.storage;
    this.infraSource = infra.source;
    this.notify = infra.notify ?? NO_NOTIFY;
    this.environments = new EnvironmentIndex(result.objects);
    const envs = this.environments;
    this.datasets = new DatasetIndex(result.objects);
    const datasets = this.datasets;
    for (const o of result.objects) {
      const spec = o.kind === 'Run' ? (o.object as Run).spec : undefined;
      // A Run with an Environment or inputs is made again: its desired state changes with theirs.
      if (spec && (spec.environment || spec.inputs?.length)) runs.set(o.name, desiredRun(o, envs, datasets));
      else if (o.kind === 'Run') runs.set(o.name, this.memo(o, desiredRun));
      else if (o.kind === 'DAG') dags.set(o.name, this.memo(o, desiredDag));
      else if (o.kind === 'Sweep') sweeps.set(o.name, this.memo(o, desiredSweep));
    }
    const invalidRuns = new Map<string, InvalidRun>();
    const invalidDags = new Map<string, InvalidDag>();
    const invalidSweeps = new Map<string, InvalidSweep>();
    const loadErrors: LoadError[] = [...infra.errors];
    for (const d of result.invalid) {
      // Only a name that is a name keys a status file; any other is reported by its file.
      const named = isObjectName(d.name) ? { ...d, name: d.name } : undefined;
      // The first invalid document of a name is reported on that name's status; others by file.
      if (d.kind === 'DAG' && named && !dags.has(named.name) && !invalidDags.has(named.name)) {
        invalidDags.set(named.name, invalidObject(named));
        continue;
      }
      if (d.kind === 'Sweep' && named && !sweeps.has(named.name) && !invalidSweeps.has(named.name)) {
        invalidSweeps.set(named.name, invalidObject(named));
        continue;
      }
      if (d.kind === 'Run' && named && !runs.has(named.name) && !invalidRuns.has(named.name)) {
        invalidRuns.set(named.name, invalidObject(named));
        // A DAG's child holds the name: the status under it is the child's, so it is said here.
        if (!this.childRuns.has(named.name)) continue;
      }
      for (const x of d.diagnostics) if (x.severity === 'error') loadErrors.push(loadErrorOf(x, d.kind));
    }
    this.loadErrors = loadErrors.sort((a, b) =>
      a.file < b.file ? -1 : a.file > b.file ? 1 : a.line - b.line || a.column - b.column,
    );
    if (loadErrors.length)
      this.opts.logger.warn(
        { errors: loadErrors.length, first: `${loadErrors[0]!.file}:${loadErrors[0]!.line}` },
        'some spec files cannot be loaded (recorded in sources/specs.yaml on the status branch)',
      );
    this.specRuns = runs;
    this.runs.clear();
    for (const [n, r] of [...runs, ...this.childRuns]) this.runs.set(n, r);
    this.invalidRuns = invalidRuns;
    this.dags = dags;
    this.invalidDags = invalidDags;
    this.sweeps = sweeps;
    this.invalidSweeps = invalidSweeps;
    return [...this.changedRuns(), ...this.changedDags(), ...this.changedSweeps()];
  }

  private changedRuns(): string[] {
    const prints = new Map<string, string>();
    for (const [n, r] of this.specRuns) prints.set(n, printOf(r));
    for (const [n, i] of this.invalidRuns) prints.set(n, `invalid|${i.file}:${i.line}:${i.message}`);
    const changed = diffPrints(prints, this.runPrints).map(runKey);
    this.runPrints = prints;
    return changed;
  }

  private changedDags(): string[] {
    const prints = new Map<string, string>();
    for (const [n, d] of this.dags) prints.set(n, printOf(d));
    for (const [n, i] of this.invalidDags) prints.set(n, `invalid|${i.file}:${i.line}:${i.message}`);
    const changed = diffPrints(prints, this.dagPrints).map(dagKey);
    this.dagPrints = prints;
    return changed;
  }

  private changedSweeps(): string[] {
    const prints = new Map<string, string>();
    for (const [n, d] of this.sweeps) prints.set(n, printOf(d));
    for (const [n, i] of this.invalidSweeps) prints.set(n, `invalid|${i.file}:${i.line}:${i.message}`);
    const changed = diffPrints(prints, this.sweepPrints).map(sweepKey);
    this.sweepPrints = prints;
    return changed;
  }

  /** Makes the desired state hold exactly these children of a Sweep (as `setDagChildren` does a DAG's). */
  setSweepChildren(sweep: string, children: readonly DesiredRun[]): string[] {
    // Kept apart from the DAG of the same name by the key: a DAG's name has no '/'.
    return this.setDagChildren(sweepKey(sweep), children);
  }

  /**
   * Makes the desired state hold exactly these children of a DAG; returns the run keys that
   * changed (a new, changed or dropped child is planned by the Run planner in the same pass).
   */
  setDagChildren(dag: string, children: readonly DesiredRun[]): string[] {
    const before = this.dagChildren.get(dag) ?? new Set<string>();
    const now = new Set<string>();
    const changed: string[] = [];
    for (const c of children) {
      now.add(c.name);
      const prev = this.childRuns.get(c.name);
      if (prev === c) continue; // the planner hands back the same object for an unchanged child
      if (!prev || !sameChild(prev, c)) {
        this.childRuns.set(c.name, c);
        this.runs.set(c.name, c);
        changed.push(runKey(c.name));
      }
    }
    for (const gone of before) {
      if (now.has(gone)) continue;
      this.childRuns.delete(gone);
      if (!this.specRuns.has(gone)) this.runs.delete(gone);
      changed.push(runKey(gone));
    }
    if (now.size) this.dagChildren.set(dag, now);
    else this.dagChildren.delete(dag);
    return changed;
  }

  /** Every name of a kind the specs know, valid or not (for the periodic resync). */
  names(kind: 'Run' | 'DAG' | 'Sweep'): string[] {
    if (kind === 'Sweep') return [...this.sweeps.keys(), ...this.invalidSweeps.keys()];
    return kind === 'Run'
      ? [...this.runs.keys(), ...this.invalidRuns.keys()]
      : [...this.dags.keys(), ...this.invalidDags.keys()];
  }
}

/** `[path, key, documents, file diagnostics]`, each document with a file, an index and diagnostics. */
function isCachedFile(x: unknown): boolean {
  if (!Array.isArray(x) || x.length !== 4) return false;
  const [path, key, docs, diags] = x as unknown[];
  return (
    typeof path === 'string' &&
    typeof key === 'string' &&
    Array.isArray(diags) &&
    Array.isArray(docs) &&
    docs.every(
      (d) =>
        typeof d === 'object' &&
        d !== null &&
        typeof (d as LoadedDocument).file === 'string' &&
        Array.isArray((d as LoadedDocument).diagnostics) &&
        Array.isArray((d as LoadedDocument).backendRefs),
    )
  );
}

function loadErrorOf(d: Diagnostic, kind: string | undefined): LoadError {
  return {
    file: d.file,
    line: d.line,
    column: d.column,
    code: d.code,
    ...(kind ? { kind } : {}),
    message: d.path ? `${d.path}: ${d.message}` : d.message,
    ...(d.hint ? { fix: d.hint } : {}),
  };
}

const prints = new WeakMap<DesiredRun | DesiredDag | DesiredSweep, string>();

/** What makes a desired object "changed": its generation, labels, annotations and file (memoized). */
function printOf(r: DesiredRun | DesiredDag | DesiredSweep): string {
  let p = prints.get(r);
  if (p === undefined) {
    const annotations = 'annotations' in r ? JSON.stringify(r.annotations ?? {}) : '';
    p = `${r.generation}|${annotations}|${JSON.stringify(r.labels ?? {})}|${r.file}`;
    prints.set(r, p);
  }
  return p;
}

function sameChild(a: DesiredRun, b: DesiredRun): boolean {
  return (
    a.generation === b.generation &&
    JSON.stringify(a.labels) === JSON.stringify(b.labels) &&
    // The retry annotation `adv retry dag` passes to a failed child.
    JSON.stringify(a.annotations) === JSON.stringify(b.annotations) &&
    a.file === b.file
  );
}

/** Names whose fingerprint differs between two maps (added, changed or removed). */
function diffPrints(now: ReadonlyMap<string, string>, before: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  for (const [n, p] of now) if (before.get(n) !== p) out.push(n);
  for (const n of before.keys()) if (!now.has(n)) out.push(n);
  return out;
}
