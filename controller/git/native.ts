/**
 * The default GitPort, over the git CLI. Objects are read through one long-lived
 * `git cat-file --batch` process (measured 100× faster than isomorphic-git on 10,000 packed blobs,
 * see docs/benchmarks.md); commits are written by `git fast-import`; refs change only by
 * `git update-ref NEW OLD`, a compare-and-swap; fetch and push are the git CLI.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { AdvError, ErrorCode } from '../errors.js';
import { toolEnv } from '../internal/child-env.js';
import { isPlainRepo, LooseCommitter, LooseObjects, readRefFile } from './loose.js';
import type { CommitInfo, CommitRequest, GitPort, PushResult, TreeEntry } from './port.js';

export interface GitEnvOptions {
  /** Extra environment for every git call (e.g. credentials through GIT_CONFIG_*). */
  env?: NodeJS.ProcessEnv;
  /** Timeout of network calls (fetch, push), ms. Default 30 s. */
  networkTimeoutMs?: number;
  /**
   * Commits of at most this many files are written in-process as loose objects (loose.ts), larger
   * ones by `git fast-import`. Default 64; 0 sends every commit to fast-import.
   */
  looseCommitMaxFiles?: number;
}

export interface RunResult {
  stdout: Buffer;
  stderr: string;
  code: number;
}

/** Runs git with arguments as a list (never through a shell). */
export function runGit(
  args: readonly string[],
  opts: {
    gitdir?: string;
    cwd?: string;
    input?: Uint8Array | string;
    env?: NodeJS.ProcessEnv;
    timeoutMs?: number;
    /**
     * The most bytes git (and what it starts: index-pack) may write to any one file, enforced by
     * the kernel (`prlimit --fsize`, SIGXFSZ past it): a bound on what a fetch brings.
     */
    maxFileBytes?: number;
    /** Aborting kills git (a controller that stops leaves no fetch behind). */
    signal?: AbortSignal;
  } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = {
      ...toolEnv('git'),
      GIT_TERMINAL_PROMPT: '0',
      GIT_ASKPASS: 'true',
      LC_ALL: 'C',
      ...opts.env,
    };
    if (opts.gitdir) env.GIT_DIR = opts.gitdir;
    const [cmd, argv] = opts.maxFileBytes
      ? ['prlimit', [`--fsize=${opts.maxFileBytes}`, 'git', ...args]]
      : ['git', args as string[]];
    const child = spawn(cmd, argv, {
      cwd: opts.cwd,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(opts.signal ? { signal: opts.signal, killSignal: 'SIGKILL' as const } : {}),
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let timer: NodeJS.Timeout | undefined;
    if (opts.timeoutMs) timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', (e) => {
      if (timer) clearTimeout(timer);
      if (e.name === 'AbortError') return; // 'close' reports it
      reject(
        new AdvError(ErrorCode.GitError, `cannot run ${cmd}: ${e.message}`, {
          hint: `install ${cmd === 'git' ? 'git (apt-get install git)' : 'prlimit (apt-get install util-linux)'}`,
        }),
      );
    });
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      resolve({
        stdout: Buffer.concat(out),
        stderr: Buffer.concat(err).toString('utf8') + (signal ? `\n(killed by ${signal}: timed out)` : ''),
        code: code ?? 128,
      });
    });
    child.stdin.on('error', () => undefined);
    if (opts.input !== undefined) child.stdin.end(opts.input);
    else child.stdin.end();
  });
}

/** Runs git and throws a GitError with git's own message when it fails. */
export async function git(args: readonly string[], opts: Parameters<typeof runGit>[1] = {}): Promise<Buffer> {
  const r = await runGit(args, opts);
  if (r.code !== 0) {
    throw new AdvError(ErrorCode.GitError, `git ${args[0]} failed: ${r.stderr.trim() || `exit ${r.code}`}`, {
      args: [...args],
      stderr: r.stderr,
    });
  }
  return r.stdout;
}

const UNREACHABLE =
  /could not resolve host|connection refused|couldn't connect|failed to connect|unable to access|timed out|does not appear to be a git repository|could not read from remote|the remote end hung up|HTTP 5\d\d|returned error: 5\d\d|Empty reply/i;

/** Whether git's stderr says the remote could not be reached (as opposed to a refusal). */
export const isUnreachable = (stderr: string): boolean => UNREACHABLE.test(stderr);

/** One object as `git cat-file --batch` gives it; `--batch-check` gives no body. */
export interface BatchObject {
  type: string;
  size: number;
  body?: Buffer;
}

interface BatchRequest {
  oid: string;
  resolve: (o: BatchObject) => void;
  reject: (e: Error) => void;
}

/**
 * Splits the output of `git cat-file --batch` (or `--batch-check`) into objects, in the order they
 * were asked for, in linear time: a body is allocated once from the size in its header and filled
 * as chunks arrive, so a 50 MB blob costs one 50 MB copy, not one per chunk.
 */
export class BatchParser {
  private readonly waiting: BatchRequest[] = [];
  /** Bytes of a header line not yet ended. */
  private partial: Buffer | undefined;
  /** The object whose body is arriving: its buffer holds the body and git's trailing newline. */
  private reading: { req: BatchRequest; type: string; size: number; buf: Buffer; filled: number } | undefined;

  /** `bodies`: `--batch` output (header, body, newline); otherwise `--batch-check` (headers only). */
  constructor(private readonly bodies: boolean) {}

  /** Registers the next request; its answer is the next object in the output. */
  expect(oid: string, resolve: (o: BatchObject) => void, reject: (e: Error) => void): void {
    this.waiting.push({ oid, resolve, reject });
  }

  push(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length) {
      const r = this.reading;
      if (r) {
        const n = Math.min(r.buf.length - r.filled, chunk.length - off);
        chunk.copy(r.buf, r.filled, off, off + n);
        r.filled += n;
        off += n;
        if (r.filled === r.buf.length) {
          this.reading = undefined;
          r.req.resolve({ type: r.type, size: r.size, body: r.buf.subarray(0, r.size) });
        }
        continue;
      }
      const nl = chunk.indexOf(0x0a, off);
      if (nl < 0) {
        // A header cut by the chunk's end: at most a line, kept until its newline arrives.
        const rest = chunk.subarray(off);
        this.partial = this.partial ? Buffer.concat([this.partial, rest]) : Buffer.from(rest);
        return;
      }
      let line = chunk.subarray(off, nl);
      if (this.partial) {
        line = Buffer.concat([this.partial, line]);
        this.partial = undefined;
      }
      off = nl + 1;
      this.header(line.toString('utf8'));
    }
  }

  private header(line: string): void {
    const req = this.waiting.shift();
    if (!req) return;
    const [, type = '', size] = line.split(' ');
    if (size === undefined) {
      // `<name> missing` (or `ambiguous`)
      req.reject(new AdvError(ErrorCode.NotFound, `git object ${req.oid} is ${type || 'unreadable'}`));
      return;
    }
    const n = Number(size);
    if (!this.bodies) req.resolve({ type, size: n });
    else this.reading = { req, type, size: n, buf: Buffer.allocUnsafe(n + 1), filled: 0 };
  }

  /** Rejects the object being read and every waiting one, and starts over. */
  fail(err: Error): void {
    const pending = [...(this.reading ? [this.reading.req] : []), ...this.waiting.splice(0)];
    this.reading = undefined;
    this.partial = undefined;
    for (const r of pending) r.reject(err);
  }
}

/**
 * A long-lived `git cat-file --batch` (objects) or `--batch-check` (type and size only): one
 * process, requests pipelined.
 */
class CatFileBatch {
  /** The running process and the parser of its output (each process has its own). */
  private proc: { child: ChildProcessWithoutNullStreams; parser: BatchParser } | undefined;

  constructor(
    private readonly gitdir: string,
    private readonly env: NodeJS.ProcessEnv,
    private readonly mode: '--batch' | '--batch-check' = '--batch',
  ) {}

  private start(): { child: ChildProcessWithoutNullStreams; parser: BatchParser } {
    const child = spawn('git', ['cat-file', this.mode], {
      env: { ...toolEnv('git'), ...this.env, GIT_DIR: this.gitdir },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const proc = { child, parser: new BatchParser(this.mode === '--batch') };
    const gone = (why: string) => {
      if (this.proc === proc) this.proc = undefined;
      proc.parser.fail(new AdvError(ErrorCode.GitError, why));
    };
    child.stdout.on('data', (b: Buffer) => proc.parser.push(b));
    child.on('error', (e) => gone(`cannot run git cat-file: ${e.message}`));
    child.on('close', () => gone(`git cat-file ${this.mode} exited`));
    child.stdin.on('error', () => undefined);
    child.stderr.resume();
    this.proc = proc;
    return proc;
  }

  /** The objects, in order; one write for all of them. */
  readMany(oids: readonly string[]): Promise<BatchObject>[] {
    if (oids.length === 0) return [];
    const { child, parser } = this.proc ?? this.start();
    const out = oids.map(
      (oid) => new Promise<BatchObject>((resolve, reject) => parser.expect(oid, resolve, reject)),
    );
    child.stdin.write(oids.join('\n') + '\n');
    return out;
  }

  async read(oid: string): Promise<Buffer> {
    return (await this.readMany([oid])[0]!).body!;
  }

  /** Ends the process once it has answered what it was asked. */
  close(): void {
    this.proc?.child.stdin.end();
    this.proc = undefined;
  }
}

/**
 * Where fast-import writes commits before the status ref is moved by compare-and-swap: one ref per
 * instance, so two controllers on one repository never collide on it; removed on close.
 */
const scratchRef = (): string =>
  `refs/adventuretime/scratch/${process.pid}-${randomBytes(4).toString('hex')}`;

export class NativeGit implements GitPort {
  private readonly batch: CatFileBatch;
  /** Sizes of blobs, asked for only by `readTree(…, { sizes: true })`. */
  private readonly check: CatFileBatch;
  private commitsSinceGc = 0;
  private readonly scratch = scratchRef();
  private scratchUsed = false;
  private readonly env: NodeJS.ProcessEnv;
  private readonly networkTimeoutMs: number;
  /** Whether refs are read and small commits written in-process (loose.ts); asked once. */
  private plainRepo: Promise<boolean> | undefined;
  private readonly committer: LooseCommitter;
  private readonly looseMax: number;

  constructor(
    readonly gitdir: string,
    opts: GitEnvOptions = {},
  ) {
    this.env = opts.env ?? {};
    this.networkTimeoutMs = opts.networkTimeoutMs ?? 30_000;
    this.looseMax = opts.looseCommitMaxFiles ?? 64;
    this.batch = new CatFileBatch(gitdir, this.env);
    this.check = new CatFileBatch(gitdir, this.env, '--batch-check');
    this.committer = new LooseCommitter(new LooseObjects(join(gitdir, 'objects')), this);
  }

  /** Blob sizes by id, for `readTree(…, { sizes: true })`; bounded, oldest dropped first. */
  private readonly sizes = new Map<string, number>();

  private rememberSize(oid: string, size: number): void {
    this.sizes.set(oid, size);
    if (this.sizes.size > 200_000) this.sizes.delete(this.sizes.keys().next().value!);
  }

  private plain(): Promise<boolean> {
    return (this.plainRepo ??= isPlainRepo(this.gitdir, this.env).catch(() => false));
  }

  private git(args: readonly string[], input?: Uint8Array | string): Promise<Buffer> {
    return git(args, { gitdir: this.gitdir, env: this.env, ...(input !== undefined ? { input } : {}) });
  }

  /** A plain ref of a plain repository is read from its file, the rest by `git rev-parse`. */
  async resolveRef(ref: string): Promise<string | undefined> {
    if (await this.plain()) {
      const oid = await readRefFile(this.gitdir, ref).catch(() => null);
      if (oid === undefined) return undefined;
      // `^{commit}`: a ref to a commit is answered here; a tag (to peel) or a missing object by git.
      if (oid !== null && (await this.check.readMany([oid])[0]!.catch(() => undefined))?.type === 'commit')
        return oid;
    }
    const r = await runGit(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], {
      gitdir: this.gitdir,
      env: this.env,
    });
    return r.code === 0 ? r.stdout.toString('utf8').trim() : undefined;
  }

  async readCommit(oid: string): Promise<CommitInfo> {
    return parseCommit(oid, (await this.batch.read(oid)).toString('utf8'));
  }

  /**
   * With `sizes`, the blobs' sizes come from one pipelined `git cat-file --batch-check` (object
   * headers only, no blob is read): a few microseconds a blob.
   */
  async readTree(oid: string, opts: { sizes?: boolean } = {}): Promise<TreeEntry[]> {
    const entries = parseTree(await this.batch.read(oid));
    if (!opts.sizes) return entries;
    // A blob's size never changes: a folder of 10,000 files where one changed asks for one size.
    const unknown = entries.filter((e) => e.type === 'blob' && !this.sizes.has(e.oid));
    const info = await Promise.all(this.check.readMany(unknown.map((e) => e.oid)));
    unknown.forEach((e, i) => this.rememberSize(e.oid, info[i]!.size));
    for (const e of entries) if (e.type === 'blob') e.size = this.sizes.get(e.oid);
    return entries;
  }

  async readBlobs(oids: readonly string[]): Promise<Uint8Array[]> {
    return (await Promise.all(this.batch.readMany(oids))).map((o) => o.body!);
  }

  /**
   * One `git fast-import` per commit: git builds the trees and writes everything as one pack,
   * whether the commit changes one status file or ten thousand (in-process loose-object writes
   * cost about 1.3 ms a file here, see docs/benchmarks.md). The commit is written to a scratch ref
   * and its id read back with `get-mark`; the caller moves the real ref by compare-and-swap. A
   * small commit (what most passes write) is written in-process as loose objects instead
   * (loose.ts): one changed file no longer starts git and rewrites a pack.
   */
  async commitFiles(c: CommitRequest): Promise<string> {
    if (c.files.size <= this.looseMax && (await this.plain())) {
      const oid = await this.committer.commit(c);
      this.gcNowAndThen();
      return oid;
    }
    this.scratchUsed = true;
    const enc = new TextEncoder();
    const parts: Uint8Array[] = [];
    const text = (s: string) => parts.push(enc.encode(s));
    const data = (b: Uint8Array) => {
      text(`data ${b.byteLength}\n`);
      parts.push(b);
      text('\n');
    };
    const who = `${c.author.name} <${c.author.email}> ${c.time ?? Math.floor(Date.now() / 1000)} +0000`;
    text(`commit ${this.scratch}\nmark :1\nauthor ${who}\ncommitter ${who}\n`);
    data(enc.encode(c.message));
    text(c.parent ? `from ${c.parent}\n` : `from ${'0'.repeat(40)}\n`);
    for (const [path, content] of c.files) {
      if (/[\n"]/.test(path) || path.startsWith('/'))
        throw new AdvError(ErrorCode.GitError, `refusing to write path ${JSON.stringify(path)}`);
      if (content === null) text(`D ${path}\n`);
      else {
        text(`M 100644 inline ${path}\n`);
        data(content);
      }
    }
    text('\nget-mark :1\n');
    const out = await git(['fast-import', '--quiet', '--force', '--done'], {
      gitdir: this.gitdir,
      env: this.env,
      input: Buffer.concat([...parts, enc.encode('done\n')]),
    });
    const oid = out.toString('utf8').trim().split('\n').pop() ?? '';
    if (!/^[0-9a-f]{40}$/.test(oid))
      throw new AdvError(ErrorCode.GitError, `git fast-import returned no commit id (${oid})`);
    this.gcNowAndThen();
    return oid;
  }

  private gcNowAndThen(): void {
    if (++this.commitsSinceGc < 200) return;
    this.commitsSinceGc = 0;
    // Each fast-import leaves a small pack, each small commit a few loose objects: let git
    // consolidate them now and then.
    void runGit(['gc', '--auto', '--quiet'], { gitdir: this.gitdir, env: this.env });
  }

  async updateRef(ref: string, newOid: string, expectedOld: string | undefined): Promise<boolean> {
    const r = await runGit(['update-ref', ref, newOid, expectedOld ?? ''.padEnd(40, '0')], {
      gitdir: this.gitdir,
      env: this.env,
    });
    if (r.code === 0) return true;
    if (/cannot lock ref|is at .* but expected|reference already exists/i.test(r.stderr)) return false;
    throw new AdvError(ErrorCode.GitError, `git update-ref failed: ${r.stderr.trim()}`);
  }

  async fetch(remote: string, refspecs: readonly string[]): Promise<void> {
    const r = await runGit(['fetch', '--quiet', '--no-tags', '--no-write-fetch-head', remote, ...refspecs], {
      gitdir: this.gitdir,
      env: this.env,
      timeoutMs: this.networkTimeoutMs,
    });
    if (r.code !== 0) {
      throw new AdvError(ErrorCode.GitError, `git fetch from ${redact(remote)} failed: ${r.stderr.trim()}`, {
        unreachable: isUnreachable(r.stderr),
        hint: 'check that the repository URL is right and reachable, and that the token can read it',
      });
    }
  }

  async push(remote: string, oid: string, remoteRef: string): Promise<PushResult> {
    const r = await runGit(['push', '--quiet', '--porcelain', remote, `${oid}:${remoteRef}`], {
      gitdir: this.gitdir,
      env: this.env,
      timeoutMs: this.networkTimeoutMs,
    });
    if (r.code === 0) return 'ok';
    const text = r.stdout.toString('utf8') + r.stderr;
    if (
      /\[rejected\]|non-fast-forward|fetch first|\(stale info\)|failed to update ref|\[remote rejected\]/i.test(
        text,
      )
    ) {
      return 'rejected';
    }
    if (isUnreachable(text)) return 'unreachable';
    throw new AdvError(ErrorCode.GitError, `git push to ${redact(remote)} failed: ${text.trim()}`);
  }

  async log(ref: string, opts: { path?: string; limit?: number } = {}): Promise<CommitInfo[]> {
    const args = ['log', '--format=%H%x00%T%x00%P%x00%at%x00%B%x1e'];
    if (opts.limit) args.push(`-n${opts.limit}`);
    args.push(ref);
    if (opts.path) args.push('--', opts.path);
    const r = await runGit(args, { gitdir: this.gitdir, env: this.env });
    if (r.code !== 0) return [];
    return r.stdout
      .toString('utf8')
      .split('\x1e')
      .map((s) => s.replace(/^\n/, ''))
      .filter((s) => s.length > 0)
      .map((rec) => {
        const [oid, tree, parents, time, ...msg] = rec.split('\x00');
        return {
          oid: oid!,
          tree: tree!,
          parents: parents ? parents.split(' ').filter(Boolean) : [],
          time: Number(time),
          message: msg.join('\x00').replace(/\n$/, ''),
        };
      });
  }

  async close(): Promise<void> {
    this.batch.close();
    this.check.close();
    if (this.scratchUsed)
      await runGit(['update-ref', '-d', this.scratch], { gitdir: this.gitdir, env: this.env });
  }
}

/** Hides credentials in a URL before it appears in a message. */
export function redact(url: string): string {
  return url.replace(/\/\/[^/@]*@/, '//***@');
}

export function parseCommit(oid: string, text: string): CommitInfo {
  const end = text.indexOf('\n\n');
  const head = end >= 0 ? text.slice(0, end) : text;
  const message = end >= 0 ? text.slice(end + 2) : '';
  let tree = '';
  const parents: string[] = [];
  let time = 0;
  for (const line of head.split('\n')) {
    if (line.startsWith('tree ')) tree = line.slice(5);
    else if (line.startsWith('parent ')) parents.push(line.slice(7));
    else if (line.startsWith('author ')) time = Number(line.split(' ').at(-2));
  }
  return { oid, tree, parents, message, time };
}

/** Parses a raw tree object (`<mode> <name>\0<20-byte oid>` records). */
export function parseTree(buf: Buffer): TreeEntry[] {
  const out: TreeEntry[] = [];
  let i = 0;
  while (i < buf.length) {
    const sp = buf.indexOf(0x20, i);
    const nul = buf.indexOf(0, sp);
    const mode = buf.subarray(i, sp).toString('ascii');
    const path = buf.subarray(sp + 1, nul).toString('utf8');
    const oid = buf.subarray(nul + 1, nul + 21).toString('hex');
    const padded = mode.padStart(6, '0');
    out.push({
      mode: padded,
      path,
      oid,
      type: padded === '040000' ? 'tree' : padded === '160000' ? 'commit' : 'blob',
    });
    i = nul + 21;
  }
  return out;
}
