/**
 * The status branch, in memory and in git. Changes of one reconcile pass are staged and go out as
 * one commit (`commitBatch`) whose message says what changed, with trailers. The ref moves only by
 * compare-and-swap; nothing here pushes (see `SpecsRepo.publish`).
 */
import { createHash } from 'node:crypto';
import { parse, stringify } from 'yaml';
import type { GitPort, Identity } from '../git/port.js';
import { printable } from './printable.js';
import { STATUS_DIRS, type DagStatusDoc, type StatusDoc, type StatusKind } from './types.js';
import type { SweepStatusDoc } from './types.js';

export interface StagedChange {
  kind: StatusKind;
  name: string;
  /** One line for the commit message: `run/foo: Running (attempt 2 on slurm-a, job 81234)`. */
  summary: string;
  trailers: [string, string][];
}

interface Entry {
  /** Blob id of the serialised document: equal ids, equal files. */
  oid: string;
  doc: StatusDoc;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

export const statusPath = (kind: StatusKind, name: string): string => `${STATUS_DIRS[kind]}/${name}.yaml`;

/** Status kinds whose map of items (a DAG's nodes, a Sweep's points) is written one item a line. */
const ITEM_MAPS: Readonly<Record<string, 'nodes' | 'points'>> = { DAGStatus: 'nodes', SweepStatus: 'points' };

/**
 * Serialises a status document the same way every time (stable diffs in `git log -p`). A DAG's
 * nodes (a Sweep's points) go one per line as flow mappings (JSON, which is YAML) and its applied
 * spec on one line: a 1,000-node DAG is rewritten on every pass where a node moves, and block YAML
 * of that size costs ~100 ms to emit where this costs ~2, while `git log -p` still shows one line
 * per node.
 */
export function serializeStatus(doc: StatusDoc): string {
  const key = ITEM_MAPS[doc.kind];
  if (!key) return stringify(doc, { lineWidth: 0, aliasDuplicateObjects: false });
  const d = doc as DagStatusDoc | SweepStatusDoc;
  const { [key]: items, ...status } = d.status as unknown as Record<string, unknown>;
  const nodes = items as Record<string, unknown>;
  const head = stringify(
    { apiVersion: d.apiVersion, kind: d.kind, metadata: d.metadata, status },
    { lineWidth: 0, aliasDuplicateObjects: false },
  );
  const lines = [head.trimEnd(), `  ${key}:`];
  for (const [id, n] of Object.entries(nodes)) lines.push(`    ${JSON.stringify(id)}: ${JSON.stringify(n)}`);
  if (!Object.keys(nodes).length) lines[lines.length - 1] += ' {}';
  if (d.appliedSpec) lines.push(`appliedSpec: ${JSON.stringify(d.appliedSpec)}`);
  return lines.join('\n') + '\n';
}

/** The id git gives a blob with this content. */
export function blobOid(content: Uint8Array): string {
  return createHash('sha1').update(`blob ${content.byteLength}\0`).update(content).digest('hex');
}

type Staged = { entry: (Entry & { bytes: Uint8Array }) | null; change: StagedChange };

export class StatusWriter {
  /** Committed documents, by kind and name (a pass looks up 10,000 runs: no path strings built). */
  private readonly docs = new Map<StatusKind, Map<string, Entry>>();
  private readonly staged = new Map<StatusKind, Map<string, Staged>>();
  private stagedTotal = 0;
  /** `names(kind)`, sorted, until the set of names of that kind changes. */
  private readonly sortedNames = new Map<StatusKind, readonly string[]>();
  private headOid: string | undefined;
  private readonly indexes: { kind: StatusKind; test: (doc: StatusDoc) => boolean; names: Set<string> }[] =
    [];

  constructor(
    private readonly git: GitPort,
    /** The local ref the status commits go to. */
    readonly ref: string,
    private readonly author: Identity,
    private readonly now: () => number = Date.now,
  ) {}

  get head(): string | undefined {
    return this.headOid;
  }

  private docsOf(kind: StatusKind): Map<string, Entry> {
    let m = this.docs.get(kind);
    if (!m) this.docs.set(kind, (m = new Map()));
    return m;
  }

  private stagedOf(kind: StatusKind): Map<string, Staged> {
    let m = this.staged.get(kind);
    if (!m) this.staged.set(kind, (m = new Map()));
    return m;
  }

  /**
   * (Re)reads every status file at the ref's tip; drops anything staged. Files whose blob id is in
   * `cache` are not read or parsed again (a restart with thousands of status files).
   */
  async load(cache?: ReadonlyMap<string, StatusDoc>): Promise<void> {
    this.docs.clear();
    this.staged.clear();
    this.stagedTotal = 0;
    this.sortedNames.clear();
    for (const index of this.indexes) index.names.clear();
    this.headOid = await this.git.resolveRef(this.ref);
    if (!this.headOid) return;
    const commit = await this.git.readCommit(this.headOid);
    const root = await this.git.readTree(commit.tree);
    const files: { kind: StatusKind; name: string; oid: string }[] = [];
    for (const [kind, dir] of Object.entries(STATUS_DIRS) as [StatusKind, string][]) {
      const sub = root.find((e) => e.path === dir && e.type === 'tree');
      if (!sub) continue;
      for (const e of await this.git.readTree(sub.oid))
        if (e.type === 'blob' && e.path.endsWith('.yaml'))
          files.push({ kind, name: e.path.slice(0, -'.yaml'.length), oid: e.oid });
    }
    const missing = files.filter((f) => !cache?.has(f.oid));
    const blobs = await this.git.readBlobs(missing.map((f) => f.oid));
    const parsed = new Map<string, StatusDoc>();
    missing.forEach((f, i) => {
      try {
        parsed.set(f.oid, parse(dec.decode(blobs[i])) as StatusDoc);
      } catch {
        // A status file the controller cannot read is rewritten on the next change of its object.
      }
    });
    for (const f of files) {
      const doc = cache?.get(f.oid) ?? parsed.get(f.oid);
      if (doc) this.docsOf(f.kind).set(f.name, { oid: f.oid, doc });
    }
    for (const index of this.indexes) this.reindexAll(index);
  }

  /** Parsed status by blob id, to persist and hand back to `load` after a restart. */
  exportCache(): [string, StatusDoc][] {
    return [...this.docs.values()].flatMap((m) =>
      [...m.values()].map((e): [string, StatusDoc] => [e.oid, e.doc]),
    );
  }

  get<T extends StatusDoc>(kind: StatusKind, name: string): T | undefined {
    const s = this.stagedTotal ? this.staged.get(kind)?.get(name) : undefined;
    if (s) return (s.entry?.doc as T) ?? undefined;
    return this.docs.get(kind)?.get(name)?.doc as T | undefined;
  }

  /**
   * The names of a kind whose current document (staged changes included) passes `test`, kept up to
   * date as documents are staged, committed and loaded: a pass asks for the few runs with a live
   * attempt without looking at 10,000 documents.
   */
  index<T extends StatusDoc>(kind: StatusKind, test: (doc: T) => boolean): ReadonlySet<string> {
    const index = { kind, test: test as (doc: StatusDoc) => boolean, names: new Set<string>() };
    this.indexes.push(index);
    this.reindexAll(index);
    return index.names;
  }

  private reindexAll(index: (typeof this.indexes)[number]): void {
    index.names.clear();
    for (const name of this.names(index.kind))
      if (index.test(this.get(index.kind, name)!)) index.names.add(name);
  }

  private reindex(kind: StatusKind, name: string): void {
    for (const index of this.indexes) {
      if (index.kind !== kind) continue;
      const doc = this.get(kind, name);
      if (doc && index.test(doc)) index.names.add(name);
      else index.names.delete(name);
    }
  }

  /** Names of every object of a kind with a status file (staged changes included), sorted. */
  names(kind: StatusKind): readonly string[] {
    const known = this.sortedNames.get(kind);
    if (known) return known;
    const set = new Set(this.docs.get(kind)?.keys());
    for (const [name, s] of this.staged.get(kind) ?? []) {
      if (s.entry) set.add(name);
      else set.delete(name);
    }
    const sorted = Object.freeze([...set].sort());
    this.sortedNames.set(kind, sorted);
    return sorted;
  }

  /**
   * Stages a new status document (null deletes the file). A document equal to the current one is
   * not staged: an unchanged object never produces a commit.
   */
  stage(
    kind: StatusKind,
    name: string,
    doc: StatusDoc | null,
    change: Omit<StagedChange, 'kind' | 'name'>,
  ): boolean {
    const bytes = doc ? enc.encode(serializeStatus(doc)) : null;
    const oid = bytes ? blobOid(bytes) : null;
    const current = this.docs.get(kind)?.get(name);
    const staged = this.stagedOf(kind);
    const prevStaged = staged.get(name);
    const existedBefore = prevStaged ? prevStaged.entry !== null : current !== undefined;
    if (existedBefore !== (oid !== null)) this.sortedNames.delete(kind);
    if ((oid === null && !current) || (oid !== null && current?.oid === oid)) {
      if (prevStaged) this.stagedTotal--;
      staged.delete(name);
      this.reindex(kind, name);
      return false;
    }
    if (prevStaged && oid !== null && prevStaged.entry?.oid === oid) return false;
    const merged: StagedChange = {
      kind,
      name,
      summary: change.summary,
      trailers: prevStaged ? mergeTrailers(prevStaged.change.trailers, change.trailers) : change.trailers,
    };
    if (!prevStaged) this.stagedTotal++;
    staged.set(name, { entry: bytes === null ? null : { oid: oid!, doc: doc!, bytes }, change: merged });
    this.reindex(kind, name);
    return true;
  }

  get stagedCount(): number {
    return this.stagedTotal;
  }

  private stagedEntries(): [string, Staged][] {
    return [...this.staged].flatMap(([kind, m]) =>
      [...m].map(([name, s]): [string, Staged] => [statusPath(kind, name), s]),
    );
  }

  stagedChanges(): StagedChange[] {
    return this.stagedEntries().map(([, s]) => s.change);
  }

  /**
   * A commit that changes no file and only says something in `git log` (a controller taking the
   * branch over). Moved by the same compare-and-swap, so it fences off the previous writer's
   * later commits. Throws `StatusConflict` when the ref moved under us.
   */
  async commitMarker(subject: string, trailers: [string, string][]): Promise<string> {
    const oid = await this.git.commitFiles({
      ...(this.headOid ? { parent: this.headOid } : {}),
      files: new Map(),
      message: commitMessage([{ kind: 'Run', name: '', summary: subject, trailers }]),
      author: this.author,
      time: Math.floor(this.now() / 1000),
    });
    if (!(await this.git.updateRef(this.ref, oid, this.headOid))) throw new StatusConflict(this.ref);
    this.headOid = oid;
    return oid;
  }

  /**
   * Writes everything staged as one commit on top of the current head and moves the ref by
   * compare-and-swap. Returns the new commit, or undefined when nothing was staged. Throws
   * `StatusConflict` when the ref moved under us.
   */
  async commitBatch(
    opts: { specCommit?: string } = {},
  ): Promise<{ oid: string; message: string; changes: StagedChange[] } | undefined> {
    if (this.stagedTotal === 0) return undefined;
    const changes = this.stagedEntries().sort(([a], [b]) => (a < b ? -1 : 1));
    const message = commitMessage(
      changes.map(([, s]) => s.change),
      opts.specCommit,
    );
    const oid = await this.git.commitFiles({
      ...(this.headOid ? { parent: this.headOid } : {}),
      files: new Map(changes.map(([path, s]) => [path, s.entry ? s.entry.bytes : null])),

      message,
      author: this.author,
      time: Math.floor(this.now() / 1000),
    });
    const moved = await this.git.updateRef(this.ref, oid, this.headOid);
    if (!moved) throw new StatusConflict(this.ref);
    this.headOid = oid;
    for (const [, s] of changes) {
      const docs = this.docsOf(s.change.kind);
      if (s.entry) docs.set(s.change.name, { oid: s.entry.oid, doc: s.entry.doc });
      else docs.delete(s.change.name);
    }
    this.staged.clear();
    this.stagedTotal = 0;
    return { oid, message, changes: changes.map(([, s]) => s.change) };
  }
}

/** The status ref moved under the controller: another writer (a second controller) exists. */
export class StatusConflict extends Error {
  readonly code = 'StatusConflict';
  constructor(ref: string) {
    super(
      `${ref} moved while the controller was writing it: another controller is writing the same status branch`,
    );
  }
}

function mergeTrailers(a: [string, string][], b: [string, string][]): [string, string][] {
  const out = [...a];
  for (const t of b) if (!out.some(([k, v]) => k === t[0] && v === t[1])) out.push(t);
  return out;
}

/** `run/foo: Running (attempt 1 on local)`, or a subject plus one line per object, then trailers. */
export function commitMessage(unsafe: readonly StagedChange[], specCommit?: string): string {
  // Summaries and trailers quote spec-controlled text: one line each, no terminal escapes.
  const changes = unsafe.map((c) => ({
    ...c,
    summary: printable(c.summary),
    trailers: c.trailers.map(([k, v]): [string, string] => [k, printable(v)]),
  }));
  const trailers: [string, string][] = [];
  if (specCommit) trailers.push(['Spec-Commit', specCommit]);
  for (const c of changes)
    for (const t of c.trailers) if (!trailers.some(([k, v]) => k === t[0] && v === t[1])) trailers.push(t);
  const trailerText = trailers.map(([k, v]) => `${k}: ${v}`).join('\n');
  if (changes.length === 1) return `${changes[0]!.summary}\n\n${trailerText}\n`;
  // One run among backend updates: the run's line is the subject, so `git log --oneline` says it.
  const runs = changes.filter((c) => c.kind === 'Run');
  let subject: string;
  if (runs.length === 1) {
    subject = `${runs[0]!.summary} (+${changes.length - 1} more)`;
  } else {
    const counts = new Map<string, number>();
    for (const c of changes) counts.set(c.kind, (counts.get(c.kind) ?? 0) + 1);
    subject = `status: ${[...counts].map(([k, n]) => `${n} ${k.toLowerCase()}${n === 1 ? '' : 's'}`).join(', ')} changed`;
  }
  const body = changes.map((c) => `- ${c.summary}`).join('\n');
  return `${subject}\n\n${body}\n\n${trailerText}\n`;
}
