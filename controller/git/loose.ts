/**
 * What `NativeGit` does without starting git, on the files git itself keeps: reading a ref (a
 * loose ref file or `packed-refs`) and writing a small commit as loose objects. A pass that changes
 * one status file among 10,000 started five git processes (three `rev-parse`, a `fast-import`
 * that rebuilt the 10,000-entry tree and wrote and fsynced a pack, an `update-ref`) and spent most
 * of its time waiting for them (docs/benchmarks.md, issue 32).
 *
 * Both are used only where the repository is plain: SHA-1 objects, files refs, no shared
 * repository permissions, no object directory from the environment, not a linked worktree. Anything
 * else, or anything unexpected on disk, goes to the git CLI as before; so does a large commit,
 * which `fast-import` writes as one pack faster than many loose objects.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { AdvError, ErrorCode } from '../errors.js';
import type { CommitInfo, CommitRequest, TreeEntry } from './port.js';

/** Whether the repository at `gitdir` is one the in-process paths understand (read once). */
export async function isPlainRepo(gitdir: string, env: NodeJS.ProcessEnv): Promise<boolean> {
  for (const v of ['GIT_OBJECT_DIRECTORY', 'GIT_ALTERNATE_OBJECT_DIRECTORIES', 'GIT_COMMON_DIR'])
    if (env[v] ?? process.env[v]) return false;
  const exists = (p: string) =>
    stat(join(gitdir, p)).then(
      () => true,
      () => false,
    );
  if ((await exists('commondir')) || (await exists('reftable')) || !(await exists('objects'))) return false;
  const config = await readFile(join(gitdir, 'config'), 'utf8').catch(() => undefined);
  if (config === undefined) return false;
  return !/^\s*(objectformat|refstorage|sharedrepository)\s*=/im.test(config);
}

const HEX40 = /^[0-9a-f]{40}$/;
/** Ref names read from files: `HEAD` or `refs/…` of plain characters (anything else: the CLI). */
const PLAIN_REF = /^(HEAD|refs\/[A-Za-z0-9._/-]+)$/;

/**
 * The object id a ref points to, read from its loose file or `packed-refs` (symbolic refs
 * followed). `undefined`: no such ref. `null`: not answerable here (ask git).
 */
export async function readRefFile(
  gitdir: string,
  ref: string,
  depth = 0,
): Promise<string | undefined | null> {
  if (!PLAIN_REF.test(ref) || ref.includes('..') || ref.endsWith('.lock') || depth > 5) return null;
  let text: string | undefined;
  try {
    text = (await readFile(join(gitdir, ref), 'utf8')).trim();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') return null; // a directory, unreadable: git
  }
  if (text !== undefined) {
    if (HEX40.test(text)) return text;
    if (text.startsWith('ref: ')) return readRefFile(gitdir, text.slice(5).trim(), depth + 1);
    return null;
  }
  let packed: string;
  try {
    packed = await readFile(join(gitdir, 'packed-refs'), 'utf8');
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT' ? undefined : null;
  }
  for (const line of packed.split('\n')) {
    if (line.length < 42 || line[40] !== ' ') continue;
    if (line.slice(41) === ref) return HEX40.test(line.slice(0, 40)) ? line.slice(0, 40) : null;
  }
  return undefined;
}

/** Loose objects under `<gitdir>/objects`, written as git writes them (zlib, temp file, rename). */
export class LooseObjects {
  constructor(private readonly objectsDir: string) {}

  async write(type: 'blob' | 'tree' | 'commit', body: Uint8Array): Promise<string> {
    const raw = Buffer.concat([Buffer.from(`${type} ${body.byteLength}\0`), body]);
    const oid = createHash('sha1').update(raw).digest('hex');
    const dir = join(this.objectsDir, oid.slice(0, 2));
    const file = join(dir, oid.slice(2));
    if (
      await stat(file).then(
        () => true,
        () => false,
      )
    )
      return oid;
    await mkdir(dir, { recursive: true });
    const tmp = join(dir, `tmp_obj_${process.pid}_${randomBytes(4).toString('hex')}`);
    try {
      // Level 1 is git's own default for loose objects (core.looseCompression).
      await writeFile(tmp, deflateSync(raw, { level: 1 }), { mode: 0o444 });
      await rename(tmp, file);
    } catch (e) {
      await unlink(tmp).catch(() => undefined);
      throw e;
    }
    return oid;
  }
}

/** What the in-process commit reads: trees and commits, through the long-lived `cat-file`. */
export interface TreeReader {
  readTree(oid: string): Promise<TreeEntry[]>;
  readCommit(oid: string): Promise<CommitInfo>;
}

/** A folder's edits: a file's new content, null to delete it, or a subfolder's edits. */
type Edits = Map<string, Uint8Array | null | Edits>;

/**
 * Writes one commit as loose objects: the changed blobs, the trees on their paths, the commit.
 * Trees it wrote or read stay in a small cache by id, so the next commit of a pass that changes
 * a file of the same 10,000-entry folder does not read and parse that folder again.
 */
export class LooseCommitter {
  private readonly trees = new Map<string, TreeEntry[]>();
  /** Each entry's bytes in a tree object, made once: a 10,000-entry folder is rewritten per commit. */
  private readonly entryBytes = new WeakMap<TreeEntry, Buffer>();

  constructor(
    private readonly objects: LooseObjects,
    private readonly reader: TreeReader,
  ) {}

  async commit(c: CommitRequest): Promise<string> {
    const edits: Edits = new Map();
    for (const [path, content] of c.files) addEdit(edits, path, content);
    const root = c.parent ? (await this.reader.readCommit(c.parent)).tree : undefined;
    const tree = (await this.editTree(root, edits)) ?? (await this.writeTree([]));
    const who = `${c.author.name} <${c.author.email}> ${c.time ?? Math.floor(Date.now() / 1000)} +0000`;
    const head = `tree ${tree}\n${c.parent ? `parent ${c.parent}\n` : ''}author ${who}\ncommitter ${who}\n\n`;
    return this.objects.write('commit', Buffer.from(head + c.message, 'utf8'));
  }

  /**
   * The edited tree's id; undefined when nothing is left in it (git has no empty folders). Entries
   * stay in git's order (as read, or placed by binary search), so a one-file edit of a 10,000-entry
   * folder sorts nothing.
   */
  private async editTree(oid: string | undefined, edits: Edits): Promise<string | undefined> {
    const entries = oid ? [...(await this.entries(oid))] : [];
    for (const [name, edit] of edits) {
      const at = indexOfName(entries, name);
      const before = at >= 0 ? entries[at] : undefined;
      let next: TreeEntry | undefined;
      if (edit instanceof Uint8Array)
        next = { mode: '100644', path: name, type: 'blob', oid: await this.objects.write('blob', edit) };
      else if (edit !== null) {
        const sub = await this.editTree(before?.type === 'tree' ? before.oid : undefined, edit);
        if (sub) next = { mode: '040000', path: name, type: 'tree', oid: sub };
      }
      if (at >= 0) entries.splice(at, 1);
      if (next) entries.splice(insertionPoint(entries, sortKey(next)), 0, next);
    }
    return entries.length ? this.writeTree(entries) : undefined;
  }

  private async entries(oid: string): Promise<TreeEntry[]> {
    const known = this.trees.get(oid);
    if (known) return known;
    const read = await this.reader.readTree(oid);
    this.remember(oid, read);
    return read;
  }

  private async writeTree(entries: TreeEntry[]): Promise<string> {
    const oid = await this.objects.write('tree', serializeTree(entries, this.entryBytes));
    this.remember(oid, entries);
    return oid;
  }

  private remember(oid: string, entries: TreeEntry[]): void {
    this.trees.delete(oid);
    this.trees.set(oid, entries);
    if (this.trees.size > 32) this.trees.delete(this.trees.keys().next().value!);
  }
}

function addEdit(edits: Edits, path: string, content: Uint8Array | null): void {
  const parts = path.split('/');
  if (/[\n"\0]/.test(path) || parts.some((p) => p === '' || p === '.' || p === '..' || p === '.git'))
    throw new AdvError(ErrorCode.GitError, `refusing to write path ${JSON.stringify(path)}`);
  let at = edits;
  for (const dir of parts.slice(0, -1)) {
    let sub = at.get(dir);
    if (!(sub instanceof Map)) {
      sub = new Map();
      at.set(dir, sub);
    }
    at = sub;
  }
  at.set(parts.at(-1)!, content);
}

/** Git orders a tree's entries by their names' bytes, a folder's name as if it ended in `/`. */
const sortKey = (e: { path: string; type: string }): Buffer =>
  Buffer.from(e.type === 'tree' ? `${e.path}/` : e.path, 'utf8');

/** The first index whose entry sorts at or after `key` (entries in git's order). */
function insertionPoint(entries: readonly TreeEntry[], key: Buffer): number {
  let lo = 0;
  let hi = entries.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (Buffer.compare(sortKey(entries[mid]!), key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Where the entry named `name` is (a file or a folder), or -1. */
function indexOfName(entries: readonly TreeEntry[], name: string): number {
  for (const type of ['blob', 'tree']) {
    const i = insertionPoint(entries, sortKey({ path: name, type }));
    if (entries[i]?.path === name) return i;
  }
  return -1;
}

/**
 * A tree object of entries already in git's order (as `git cat-file` gives them, or placed). With
 * `memo`, each entry's bytes are made once and kept for the next tree that holds the same entry.
 */
export function serializeTree(entries: readonly TreeEntry[], memo?: WeakMap<TreeEntry, Buffer>): Buffer {
  const parts = entries.map((e) => {
    let b = memo?.get(e);
    if (!b) {
      const head = Buffer.from(`${e.mode.replace(/^0+/, '')} ${e.path}\0`, 'utf8');
      b = Buffer.concat([head, Buffer.from(e.oid, 'hex')]);
      memo?.set(e, b);
    }
    return b;
  });
  return Buffer.concat(parts);
}
