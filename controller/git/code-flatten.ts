/**
 * Flattening a commit of a code repository (code-repos.ts): every gitlink replaced by its
 * submodule commit's tree, recursively, written to `flat.git`, with the files and bytes of what
 * ships bounded however the tree repeats subtrees, and submodules bounded in number and depth.
 */
import { AdvError, ErrorCode } from '../errors.js';
import { submoduleUrl } from './code-repo-url.js';
import { redact, runGit } from './native.js';
import type { GitPort, TreeEntry } from './port.js';

/** Why a run's code cannot be had (the run's reason while it waits or stalls). */
export type CodeRepoReason = 'CodeFetchFailed' | 'CodeRefNotFound' | 'CodeRepoInvalid' | 'SecretMissing';

/** A submodule's commit is in no mirror yet: fetch `url`, then try again. */
export class MissingCommit extends Error {
  constructor(
    readonly url: string,
    readonly commit: string,
    readonly where: string,
  ) {
    super(`${where}commit ${commit.slice(0, 12)} is not in ${redact(url)}`);
  }
}

/** Something only a person can fix: a bad `.gitmodules`, a tree over the limits, a refused URL. */
export class CodeProblem extends Error {
  constructor(
    readonly reason: CodeRepoReason,
    message: string,
  ) {
    super(message);
  }
}

export const MAX_SUBMODULES = 64;
export const MAX_DEPTH = 8;
/** Git's environment for everything that reads a fetched repo: no system or global config, http(s) only. */
export const HARDENED_ENV = {
  GIT_ALLOW_PROTOCOL: 'http:https',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_PROTOCOL_FROM_USER: '0',
};

export interface Flat {
  id: string;
  files: number;
  bytes: number;
}

/**
 * One flattening: gitlinks replaced by their commits' trees, recursively, with the totals of
 * files and bytes counted per subtree once (a tree that repeats a subtree a billion times is
 * refused after reading it once) and checked against the limits as they grow.
 */
export class FlatWalk {
  private readonly plain = new Map<string, Flat>();
  private submodules = 0;

  constructor(
    private readonly port: GitPort,
    private readonly gitdir: string,
    private readonly maxFiles: number,
    private readonly maxBytes: number,
  ) {}

  async commit(url: string, commit: string, where: string, depth: number): Promise<Flat> {
    let root: string;
    try {
      root = (await this.port.readCommit(commit)).tree;
    } catch {
      throw new MissingCommit(url, commit, where);
    }
    const modules = new Lazy(() => this.gitmodules(root));
    return this.tree(url, root, '', modules, depth);
  }

  private async tree(url: string, tree: string, prefix: string, modules: Lazy, depth: number): Promise<Flat> {
    const memo = this.plain.get(tree);
    if (memo) return memo;
    const entries = await this.port.readTree(tree, { sizes: true });
    const out: Flat = { id: tree, files: 0, bytes: 0 };
    const rewritten: TreeEntry[] = [];
    let links = false;
    for (const e of entries) {
      let sub: Flat | undefined;
      if (e.type === 'blob') this.add(out, { id: e.oid, files: 1, bytes: e.size ?? 0 });
      else if (e.type === 'tree') sub = await this.tree(url, e.oid, `${prefix}${e.path}/`, modules, depth);
      else {
        links = true;
        sub = await this.gitlink(url, `${prefix}${e.path}`, e.oid, modules, depth);
      }
      if (sub) this.add(out, sub);
      rewritten.push(sub && sub.id !== e.oid ? { ...e, mode: '040000', type: 'tree', oid: sub.id } : e);
    }
    if (rewritten.some((e, i) => e !== entries[i])) out.id = await this.mktree(rewritten);
    if (!links && out.id === tree) this.plain.set(tree, out);
    return out;
  }

  private add(into: Flat, sub: Flat): void {
    into.files += sub.files;
    into.bytes += sub.bytes;
    if (into.files > this.maxFiles || into.bytes > this.maxBytes)
      throw new CodeProblem(
        'CodeRepoInvalid',
        `the code (submodules included) holds more than ${into.files > this.maxFiles ? `${this.maxFiles} files` : `${this.maxBytes} bytes`}: it is not shipped`,
      );
  }

  private async gitlink(
    url: string,
    path: string,
    commit: string,
    modules: Lazy,
    depth: number,
  ): Promise<Flat> {
    const where = `submodule ${path} of ${redact(url)}: `;
    if (++this.submodules > MAX_SUBMODULES || depth >= MAX_DEPTH)
      throw new CodeProblem(
        'CodeRepoInvalid',
        `${where}more than ${MAX_SUBMODULES} submodules, or nested over ${MAX_DEPTH} deep`,
      );
    const entry = (await modules.get()).get(path);
    if (!entry) throw new CodeProblem('CodeRepoInvalid', `${where}no entry in .gitmodules gives its URL`);
    const sub = submoduleUrl(url, entry);
    if ('problem' in sub)
      throw new CodeProblem('CodeRepoInvalid', `${where}url "${entry}": ${sub.problem.message}`);
    return this.commit(sub.url, commit, where, depth + 1);
  }

  /** `.gitmodules` of a root tree: path → url, read with git's parser, no includes. */
  private async gitmodules(root: string): Promise<Map<string, string>> {
    const e = (await this.port.readTree(root)).find((x) => x.path === '.gitmodules' && x.type === 'blob');
    const out = new Map<string, string>();
    if (!e) return out;
    const r = await runGit(['config', '--no-includes', '--blob', e.oid, '--null', '--list'], {
      gitdir: this.gitdir,
      env: HARDENED_ENV,
    });
    if (r.code !== 0)
      throw new CodeProblem('CodeRepoInvalid', `.gitmodules cannot be read: ${r.stderr.trim()}`);
    const byName = new Map<string, { path?: string; url?: string }>();
    for (const rec of r.stdout.toString('utf8').split('\0')) {
      const nl = rec.indexOf('\n');
      const m = /^submodule\.(.+)\.(path|url)$/.exec(nl < 0 ? rec : rec.slice(0, nl));
      if (!m || nl < 0) continue;
      const s = byName.get(m[1]!) ?? {};
      s[m[2] as 'path' | 'url'] = rec.slice(nl + 1);
      byName.set(m[1]!, s);
    }
    for (const s of byName.values()) if (s.path && s.url) out.set(s.path.replace(/\/+$/, ''), s.url);
    return out;
  }

  private async mktree(entries: readonly TreeEntry[]): Promise<string> {
    const input = entries.map((e) => `${e.mode} ${e.type} ${e.oid}\t${e.path}\0`).join('');
    const r = await runGit(['mktree', '-z'], { gitdir: this.gitdir, input });
    if (r.code !== 0) throw new AdvError(ErrorCode.GitError, `git mktree failed: ${r.stderr.trim()}`);
    return r.stdout.toString('utf8').trim();
  }
}

/** A value computed on first use. */
export class Lazy {
  private p: Promise<Map<string, string>> | undefined;
  constructor(private readonly make: () => Promise<Map<string, string>>) {}
  get(): Promise<Map<string, string>> {
    return (this.p ??= this.make());
  }
}

/** How an operator bounds and opens code repositories (`ControllerOptions.codeRepos`). */
