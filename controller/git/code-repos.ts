/**
 * Code from other git repositories (`code.repo`): one bare mirror per URL under the controller's
 * data dir, fetched in the background so a slow or failing repository holds up only the runs that
 * name it, never a pass. Branches, tags, `refs/adventuretime/snapshots/*` (what `adv submit`
 * pushes) and the default branch are fetched.
 *
 * A run's code is its commit with every submodule in it: gitlinks are resolved through the
 * commit's `.gitmodules` (relative URLs against the superproject's), fetched into mirrors of their
 * own, recursively, and the commit is "flattened" into one git tree in which each gitlink is the
 * submodule commit's tree. That tree is written to `flat.git` (which sees every mirror's objects
 * through alternates), so its id is the content address of exactly what ships: the payload, its
 * name and the local backend's extraction come from it like a specs-repo tree.
 *
 * A pusher of specs chooses the URL, so nothing fetched is trusted: http(s) only
 * (`GIT_ALLOW_PROTOCOL`, submodules too), no redirects, no hooks, no system or global git config
 * (no credential helper, no `insteadOf`), objects checked by fsck, `.gitmodules` read for `path`
 * and `url` alone (`git config --blob`, no includes), a fetch bounded in time and in the bytes it
 * may write (`prlimit --fsize`), the shipped tree bounded in files and bytes however it repeats
 * subtrees, and submodules bounded in number and depth. The token goes only to the repo's own
 * scheme, host and port: `code.tokenSecret`, or the controller's own token where the operator
 * allows it (the specs repo's host, or `tokenOrigins`).
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pLimit from 'p-limit';
import type { Logger } from 'pino';
import { AdvError, ErrorCode } from '../errors.js';
import type { SecretSource } from '../secrets.js';
import { codeRepoUrlProblem, normalizeRepoUrl, originOf } from './code-repo-url.js';
import { isUnreachable, NativeGit, redact, runGit, type RunResult } from './native.js';
import type { GitPort } from './port.js';
import { credentialEnv } from './specs-repo.js';
import { CodeProblem, FlatWalk, HARDENED_ENV, MissingCommit, type CodeRepoReason } from './code-flatten.js';

/** What a run asks for: `spec.code` with a repo. */
export interface CodeSource {
  repo: string;
  ref?: string | undefined;
  tokenSecret?: string | undefined;
}

/** Where a run's code stands: ready (pinned commit), being fetched, or failed with what to fix. */
export type CodeRepoState =
  | { state: 'ready'; commit: string; repo: string }
  | { state: 'pending'; message: string }
  | { state: 'failed'; reason: CodeRepoReason; message: string; retryInMs?: number };

export interface CodeReposOptions {
  /** Where the mirrors live (`<data dir>/code-repos`). */
  dir: string;
  /** The controller's own token (`ADV_GIT_TOKEN`): sent only to `tokenOrigins`. */
  token?: string | undefined;
  /** `scheme://host[:port]` the controller's token may be sent to (the specs repo's, the operator's). */
  tokenOrigins?: readonly string[];
  /** Where `code.tokenSecret` resolves. */
  secrets?: SecretSource | undefined;
  logger: Logger;
  now: () => number;
  /** One fetch's time limit. Default 300 s. */
  fetchTimeoutMs?: number;
  /** The most one fetch may write (its pack), and the most a shipped tree may hold. Default 2 GiB. */
  maxBytes?: number;
  /** The most files a shipped tree may hold. Default 200,000. */
  maxFiles?: number;
  /** Called for each run whose code moved on (fetched, failed): look at it again. */
  onChange?: (run: string) => void;
}

const REFSPECS = [
  '+refs/heads/*:refs/heads/*',
  '+refs/tags/*:refs/tags/*',
  '+refs/adventuretime/snapshots/*:refs/adventuretime/snapshots/*',
];
const HEAD_REF = 'refs/adventuretime/head';
/** Every fetch: nothing of the fetched repo or of the host's git config is acted on. */
const HARDENING = [
  ...['-c', 'gc.auto=0', '-c', 'core.hooksPath=/dev/null', '-c', 'credential.helper='],
  ...['-c', 'transfer.fsckObjects=true', '-c', 'transfer.unpackLimit=1', '-c', 'fetch.unpackLimit=1'],
  ...['-c', 'http.followRedirects=false', '-c', 'protocol.allow=never'],
  ...['-c', 'protocol.https.allow=always', '-c', 'protocol.http.allow=always'],
];

interface Job {
  running?: Promise<void>;
  /** The spec head the last success started under (fetches); the flat tree (prepares). */
  done?: string;
  failure?: { reason: CodeRepoReason; message: string; head: string; retryAt: number; count: number };
}

const key = (...parts: string[]): string => parts.join('\0');

/** The code repositories of one controller: mirrors, their fetches, and flattened trees. */
export class CodeRepos {
  private readonly fetches = new Map<string, Job>();
  private readonly prepares = new Map<string, Job>();
  private readonly refs = new Map<string, string | null>();
  /** Commit → the repo it was prepared from, and flat trees this process made or returned. */
  private readonly holders = new Map<string, string>();
  private readonly flatTrees = new Set<string>();
  private readonly interest = new Map<string, Set<string>>();
  private readonly limit = pLimit(4);
  private readonly abort = new AbortController();
  private readonly flatDir: string;
  /** One git writing to a mirror (and to the alternates file) at a time. */
  private readonly serials = new Map<string, Promise<unknown>>();
  /** Bare repos being made now, by git dir (see `createOnce`). */
  private readonly creating = new Map<string, Promise<void>>();

  constructor(private readonly o: CodeReposOptions) {
    this.flatDir = join(o.dir, 'flat.git');
  }

  /**
   * Where `run`'s code stands, at spec head `head`; `pinned`: the commit its first attempt took.
   * Never waits on the network: what is missing is fetched in the background, and `onChange`
   * names the run when it is there (or failed).
   */
  async state(run: string, code: CodeSource, head: string, pinned?: string): Promise<CodeRepoState> {
    const problem = codeRepoUrlProblem(code.repo);
    if (problem) return { state: 'failed', reason: 'CodeRepoInvalid', message: problem.message };
    const url = normalizeRepoUrl(code.repo);
    this.watch(url, run);
    const token = this.tokenFor(url, code.tokenSecret);
    if ('failed' in token) return token.failed;
    let commit = pinned;
    if (!commit) {
      const fetched = this.fetchState(url, token, head);
      if (fetched) return fetched;
      const found = await this.resolveRef(url, code.ref);
      if (!found)
        return {
          state: 'failed',
          reason: 'CodeRefNotFound',
          message: `code.ref "${code.ref ?? 'HEAD'}" names no branch, tag, snapshot or commit of ${redact(url)}`,
        };
      commit = found;
    }
    return this.prepareState(url, commit, token, head);
  }

  /** The flat tree of a commit prepared in this process (the attempts the planner pinned). */
  preparedTree(commit: string): string | undefined {
    const url = this.holders.get(commit);
    return url ? this.prepares.get(key(url, commit))?.done : undefined;
  }

  /**
   * The flat tree of `commit` from whichever mirror holds it, from what is on disk alone (after a
   * restart, before the planner prepared it again). Undefined when no mirror has it.
   */
  async flatTreeOf(commit: string): Promise<string | undefined> {
    const known = this.preparedTree(commit);
    if (known) return known;
    for (const url of await this.mirrorUrls()) {
      const r = await runGit(['cat-file', '-e', `${commit}^{commit}`], { gitdir: this.gitdirOf(url) });
      if (r.code !== 0) continue;
      try {
        return await this.flatten(url, commit);
      } catch (e) {
        if (e instanceof MissingCommit) throw new AdvError(ErrorCode.GitError, e.message);
        throw e;
      }
    }
    return undefined;
  }

  /** Whether `tree` is one this process flattened (or a subtree of one handed out). */
  isFlatTree(tree: string): boolean {
    return this.flatTrees.has(tree);
  }

  /** Records a tree handed out from `flat.git` (a `code.path` subtree). */
  noteFlatTree(tree: string): void {
    this.flatTrees.add(tree);
  }

  /** `fn` with a reader of `flat.git`, which sees every mirror's objects and the flattened trees. */
  async withFlat<T>(fn: (port: GitPort, gitdir: string) => Promise<T>): Promise<T> {
    await this.ensureFlat();
    const port = new NativeGit(this.flatDir);
    try {
      return await fn(port, this.flatDir);
    } finally {
      await port.close();
    }
  }

  /** Stops every fetch under way and waits for the jobs to end. */
  async close(): Promise<void> {
    this.abort.abort();
    const running = [...this.fetches.values(), ...this.prepares.values()].map((j) => j.running);
    await Promise.allSettled(running);
  }

  // ---------------------------------------------------------------------------------------------
  // Tokens

  private tokenFor(
    url: string,
    secret: string | undefined,
  ): { name: string; value?: string } | { failed: CodeRepoState } {
    if (secret) {
      const value = this.o.secrets?.get(secret);
      if (value === undefined)
        return {
          failed: {
            state: 'failed',
            reason: 'SecretMissing',
            message: `secret ${secret} (code.tokenSecret) is not set: looked in ${this.o.secrets?.where ?? 'no source'}`,
          },
        };
      return { name: secret, value };
    }
    const allowed = this.o.token && (this.o.tokenOrigins ?? []).includes(originOf(url));
    return allowed ? { name: 'ADV_GIT_TOKEN', value: this.o.token! } : { name: '' };
  }

  /** The token as git sends it (`credentialEnv`'s header), scoped to the origin it belongs to. */
  private static tokenEnv(origin: string, url: string, token: string | undefined): NodeJS.ProcessEnv {
    if (!token || originOf(url) !== origin) return {};
    return { ...credentialEnv(token), GIT_CONFIG_KEY_0: `http.${origin}/.extraHeader` };
  }

  // ---------------------------------------------------------------------------------------------
  // Fetching

  /** Undefined when the mirror was fetched with this token at this head; else pending or failed. */
  private fetchState(
    url: string,
    token: { name: string; value?: string },
    head: string,
  ): CodeRepoState | undefined {
    const k = key(url, token.name);
    const job = this.fetches.get(k) ?? {};
    this.fetches.set(k, job);
    if (job.done === head) return undefined;
    return this.jobState(job, url, head, `fetching ${redact(url)}`, async () => {
      await this.limit(() => this.fetch(url, token.value, originOf(url)));
      this.forgetRefs(url);
      return head;
    });
  }

  /**
   * A background job that is not done: pending while it runs; its failure until the retry is due
   * (or the spec head moved on); else `work` starts now. `work`'s result is what `done` keeps.
   */
  private jobState(
    job: Job,
    url: string,
    head: string,
    what: string,
    work: () => Promise<string>,
  ): CodeRepoState {
    if (job.running) return { state: 'pending', message: what };
    const f = job.failure;
    if (f && f.head === head && this.o.now() < f.retryAt)
      return { state: 'failed', reason: f.reason, message: f.message, retryInMs: f.retryAt - this.o.now() };
    job.running = work()
      .then((done) => {
        job.done = done;
        delete job.failure;
      })
      .catch((e: unknown) => {
        job.failure = failureOf(e, head, job.failure, this.o.now());
        this.o.logger.warn({ repo: redact(url), err: job.failure?.message }, 'code repo: not ready');
      })
      .finally(() => {
        delete job.running;
        this.changed(url);
      });
    return { state: 'pending', message: what };
  }

  /** One fetch of `url` into its mirror; throws CodeProblem or AdvError with git's words. */
  private fetch(url: string, token: string | undefined, origin: string, extra?: string[]): Promise<void> {
    return this.serial(url, () => this.fetchNow(url, token, origin, extra));
  }

  private async fetchNow(
    url: string,
    token: string | undefined,
    origin: string,
    extra?: string[],
  ): Promise<void> {
    const gitdir = await this.ensureMirror(url);
    const refspecs = extra ?? [...REFSPECS, `+HEAD:${HEAD_REF}`];
    let r = await this.runFetch(gitdir, url, token, origin, refspecs);
    if (r.code !== 0 && !extra && /couldn't find remote ref HEAD/i.test(r.stderr))
      r = await this.runFetch(gitdir, url, token, origin, REFSPECS); // an empty default branch
    if (r.code === 0) return;
    if (this.abort.signal.aborted) throw new AdvError(ErrorCode.GitError, 'the controller is stopping');
    throw fetchError(url, r, this.o.fetchTimeoutMs ?? 300_000, this.o.maxBytes ?? 2 ** 31);
  }

  private runFetch(
    gitdir: string,
    url: string,
    token: string | undefined,
    origin: string,
    refspecs: readonly string[],
  ): Promise<RunResult> {
    const args = [
      'fetch',
      '--quiet',
      '--prune',
      '--no-tags',
      '--no-write-fetch-head',
      '--no-recurse-submodules',
    ];
    return runGit([...HARDENING, ...args, '--', url, ...refspecs], {
      gitdir,
      env: { ...HARDENED_ENV, ...CodeRepos.tokenEnv(origin, url, token) },
      timeoutMs: this.o.fetchTimeoutMs ?? 300_000,
      maxFileBytes: this.o.maxBytes ?? 2 ** 31,
      signal: this.abort.signal,
    });
  }

  /** `ref` (default: the remote's default branch) in the mirror: branch, tag, snapshot, commit id. */
  private async resolveRef(url: string, ref: string | undefined): Promise<string | undefined> {
    const k = key(url, ref ?? '');
    if (this.refs.has(k)) return this.refs.get(k) ?? undefined;
    const candidates = ref
      ? ref.startsWith('-')
        ? []
        : [`refs/heads/${ref}`, `refs/tags/${ref}`, `refs/adventuretime/snapshots/${ref}`]
      : [HEAD_REF];
    if (ref && /^[0-9a-f]{7,40}$/.test(ref)) candidates.push(ref);
    let found: string | undefined;
    for (const c of candidates) {
      const r = await runGit(['rev-parse', '--verify', '--quiet', `${c}^{commit}`], {
        gitdir: this.gitdirOf(url),
      });
      if (r.code === 0) {
        found = r.stdout.toString('utf8').trim();
        break;
      }
    }
    this.refs.set(k, found ?? null);
    return found;
  }

  private forgetRefs(url: string): void {
    for (const k of this.refs.keys()) if (k.startsWith(key(url, ''))) this.refs.delete(k);
  }

  // ---------------------------------------------------------------------------------------------
  // Preparing a commit: it and its submodules fetched, and flattened

  private prepareState(
    url: string,
    commit: string,
    token: { name: string; value?: string },
    head: string,
  ): CodeRepoState {
    const k = key(url, commit);
    const job = this.prepares.get(k) ?? {};
    this.prepares.set(k, job);
    if (job.done) {
      this.holders.set(commit, url);
      return { state: 'ready', commit, repo: url };
    }
    const what = `fetching the submodules of ${commit.slice(0, 12)} of ${redact(url)}`;
    return this.jobState(job, url, head, what, async () => {
      const tree = await this.prepare(url, commit, token.value);
      this.holders.set(commit, url);
      return tree;
    });
  }

  /**
   * Flattens `commit`, fetching what is missing: a mirror without the commit, then each
   * submodule's repo (all its refs, then the commit by id, which servers allow for reachable ones).
   */
  private async prepare(url: string, commit: string, token: string | undefined): Promise<string> {
    const origin = originOf(url);
    const whole = new Set<string>();
    const byId = new Set<string>();
    for (;;) {
      try {
        return await this.flatten(url, commit);
      } catch (e) {
        if (!(e instanceof MissingCommit)) throw e;
        if (!whole.has(e.url)) {
          whole.add(e.url);
          await this.limit(() => this.fetch(e.url, token, origin)).catch((err: Error) => {
            throw err instanceof CodeProblem ? new CodeProblem(err.reason, e.where + err.message) : err;
          });
        } else if (!byId.has(key(e.url, e.commit))) {
          byId.add(key(e.url, e.commit));
          // Not on a ref: servers hand out a reachable commit by its id (protocol v2).
          await this.limit(() => this.fetch(e.url, token, origin, [e.commit])).catch(() => undefined);
        } else {
          const fix =
            e.url === url
              ? `it is on no branch, tag or snapshot of ${redact(url)} now (force-pushed away?)`
              : 'push it to a branch of that repository, or point the gitlink at a commit that is on one';
          throw new CodeProblem('CodeFetchFailed', `${e.message}: ${fix}`);
        }
      }
    }
  }

  /** The flat tree of `commit` of `url`, from the mirrors as they are (no network). */
  private async flatten(url: string, commit: string): Promise<string> {
    return this.withFlat(async (port) => {
      const walk = new FlatWalk(port, this.flatDir, this.o.maxFiles ?? 200_000, this.o.maxBytes ?? 2 ** 31);
      const { id } = await walk.commit(url, commit, '', 0);
      this.flatTrees.add(id);
      return id;
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Mirrors on disk

  private gitdirOf(url: string): string {
    return join(this.o.dir, 'mirrors', `${createHash('sha256').update(url).digest('hex').slice(0, 32)}.git`);
  }

  private async ensureMirror(url: string): Promise<string> {
    const gitdir = this.gitdirOf(url);
    await this.createOnce(gitdir, async () => {
      await mkdir(join(this.o.dir, 'mirrors'), { recursive: true });
      const r = await runGit(['init', '--quiet', '--bare', '--template=', gitdir]);
      if (r.code !== 0) throw new AdvError(ErrorCode.GitError, `cannot create a mirror: ${r.stderr.trim()}`);
      await writeFile(join(gitdir, 'adv-url'), `${url}\n`);
      await this.serial('', () => this.writeAlternates());
    });
    return gitdir;
  }

  /**
   * Makes a bare repo once: callers that come while it is being made wait for that one (two
   * `git init` of one dir at once fight over its config lock), and one that finds it made goes on.
   */
  private createOnce(gitdir: string, make: () => Promise<void>): Promise<void> {
    const making = this.creating.get(gitdir);
    if (making) return making;
    if (existsSync(join(gitdir, 'HEAD'))) return Promise.resolve();
    const p = make().finally(() => this.creating.delete(gitdir));
    this.creating.set(gitdir, p);
    return p;
  }

  private async mirrorUrls(): Promise<string[]> {
    const dir = join(this.o.dir, 'mirrors');
    const names = await readdir(dir).catch(() => [] as string[]);
    const urls = await Promise.all(
      names.map((n) => readFile(join(dir, n, 'adv-url'), 'utf8').catch(() => '')),
    );
    return urls.map((u) => u.trim()).filter(Boolean);
  }

  private ensureFlat(): Promise<void> {
    return this.createOnce(this.flatDir, async () => {
      await mkdir(this.o.dir, { recursive: true });
      const r = await runGit(['init', '--quiet', '--bare', '--template=', this.flatDir]);
      if (r.code !== 0) throw new AdvError(ErrorCode.GitError, `cannot create flat.git: ${r.stderr.trim()}`);
      await this.serial('', () => this.writeAlternates());
    });
  }

  /** Runs `fn` after every earlier `fn` of the same key has ended. */
  private serial<T>(k: string, fn: () => Promise<T>): Promise<T> {
    const p = (this.serials.get(k) ?? Promise.resolve()).then(fn, fn);
    this.serials.set(
      k,
      p.catch(() => undefined),
    );
    return p;
  }

  /** `flat.git` borrows every mirror's objects (rewritten whole, atomically, when one is added). */
  private async writeAlternates(): Promise<void> {
    const dirs = (await this.mirrorUrls()).map((u) => join(this.gitdirOf(u), 'objects'));
    const file = join(this.flatDir, 'objects', 'info', 'alternates');
    await mkdir(join(this.flatDir, 'objects', 'info'), { recursive: true });
    await writeFile(`${file}.tmp`, dirs.map((d) => `${d}\n`).join(''));
    await rename(`${file}.tmp`, file);
  }

  // ---------------------------------------------------------------------------------------------
  // Who to tell

  private watch(url: string, run: string): void {
    const runs = this.interest.get(url) ?? new Set<string>();
    runs.add(run);
    this.interest.set(url, runs);
  }

  private changed(url: string): void {
    const runs = this.interest.get(url);
    if (!this.abort.signal.aborted) for (const run of runs ?? []) this.o.onChange?.(run);
  }
}

/** The failure a job ends with, retried after a backoff (or at once under a new spec head). */
function failureOf(e: unknown, head: string, before: Job['failure'], now: number): Job['failure'] {
  const count = before && before.head === head ? before.count + 1 : 1;
  const reason = e instanceof CodeProblem ? e.reason : 'CodeFetchFailed';
  const message = e instanceof Error ? e.message : String(e);
  return { reason, message, head, count, retryAt: now + Math.min(30_000 * 2 ** (count - 1), 600_000) };
}

/** Git's refusal, in words that say what to fix. */
function fetchError(url: string, r: RunResult, timeoutMs: number, maxBytes: number): Error {
  const said = r.stderr.trim().split('\n').filter(Boolean).at(-1) ?? `exit ${r.code}`;
  const where = redact(url);
  if (/killed by SIGKILL/.test(r.stderr))
    return new CodeProblem('CodeFetchFailed', `fetching ${where} took longer than ${timeoutMs / 1000}s`);
  // index-pack killed by SIGXFSZ says nothing itself: fetch-pack reports its output as invalid.
  if (/signal 25|file size limit|SIGXFSZ|invalid index-pack output/i.test(r.stderr))
    return new CodeProblem(
      'CodeRepoInvalid',
      `${where} sends more than ${maxBytes} bytes in one fetch (${said}): it is not fetched`,
    );
  if (/\b(401|403)\b|authentication failed|could not read (username|password)/i.test(r.stderr))
    return new CodeProblem(
      'CodeFetchFailed',
      `${where} refused the token (${said}): check code.tokenSecret, or the controller's ADV_GIT_TOKEN for that host`,
    );
  if (/\b30[1278]\b|redirect/i.test(r.stderr))
    return new CodeProblem(
      'CodeFetchFailed',
      `${where} redirects elsewhere (${said}): the controller follows no redirect (a token stays on its host); write the URL it redirects to`,
    );
  if (/\b404\b|not found|does not appear to be a git repository/i.test(r.stderr) && !isUnreachable(said))
    return new CodeProblem('CodeFetchFailed', `no repository at ${where} (${said})`);
  return new AdvError(ErrorCode.GitError, `cannot fetch ${where}: ${said}`, {
    unreachable: isUnreachable(r.stderr),
  });
}

export interface CodeRepoSettings {
  /** More `scheme://host[:port]` the controller's `ADV_GIT_TOKEN` may be sent to. */
  tokenOrigins?: readonly string[];
  fetchTimeoutMs?: number;
  maxBytes?: number;
  maxFiles?: number;
}

/**
 * A controller's code repositories under `<dataDir>/code-repos`: its own token goes to the specs
 * repo's origin (when that is an http(s) URL) and to the origins the operator lists, nowhere else.
 */
export function codeReposFor(o: {
  dataDir: string;
  repo: string;
  token?: string | undefined;
  codeRepos?: CodeRepoSettings | undefined;
  secrets: SecretSource;
  logger: Logger;
  now: () => number;
  onChange: (run: string) => void;
}): CodeRepos {
  const specsOrigin = /^https?:\/\//.test(o.repo) ? [originOf(o.repo)] : [];
  const { tokenOrigins = [], ...limits } = o.codeRepos ?? {};
  return new CodeRepos({
    ...limits,
    dir: join(o.dataDir, 'code-repos'),
    token: o.token,
    tokenOrigins: [...specsOrigin, ...tokenOrigins.map((t) => originOf(t))],
    secrets: o.secrets,
    logger: o.logger,
    now: o.now,
    onChange: o.onChange,
  });
}
