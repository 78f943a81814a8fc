/**
 * The specs repo as the controller sees it: a watched branch to read and a status branch to write.
 *
 * - **local** (a path): the controller works in that repository itself. The status branch is
 *   written there with `update-ref NEW OLD`, so `git log adventuretime/status` in the repo shows it,
 *   and two controllers on one repo are kept apart by that compare-and-swap.
 * - **remote** (a URL): a bare working clone in the data dir. `fetch` brings the watched branch and
 *   the status branch; status commits are made locally and pushed fast-forward only, which is the
 *   compare-and-swap on the remote: a stale or second controller's push is rejected.
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { AdvError, ErrorCode } from '../errors.js';
import { IsoGit } from './iso.js';
import { git, isUnreachable, NativeGit, redact, runGit } from './native.js';
import type { GitPort, PushResult } from './port.js';

export interface SpecsRepoOptions {
  /** A URL (http(s)://, ssh://, git@…) or a path to a local repository. */
  repo: string;
  branch?: string;
  statusBranch?: string;
  /** Where the remote mode keeps its working clone. */
  dataDir: string;
  /** Token for smart HTTP(S); never taken from a spec. */
  token?: string;
  /** Which implementation reads objects: `native` (default, measured faster) or `isomorphic`. */
  reader?: 'native' | 'isomorphic';
  networkTimeoutMs?: number;
}

export const DEFAULT_STATUS_BRANCH = 'adventuretime/status';

/**
 * The commits `adv submit` made of uncommitted work trees, one ref per run: a Run's `code.ref`
 * pins one by its hash, which resolves only once it is fetched. A glob: no such ref is no error.
 */
const SNAPSHOTS_REFSPEC = '+refs/adventuretime/snapshots/*:refs/adventuretime/snapshots/*';

export const isRemoteUrl = (repo: string): boolean =>
  /^(https?|ssh|git|file):\/\//.test(repo) || /^[\w.-]+@[\w.-]+:/.test(repo);

/** Environment that gives git a bearer token without putting it on a command line. */
export function credentialEnv(token: string | undefined): NodeJS.ProcessEnv {
  if (!token) return {};
  const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
  return {
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: 'http.extraHeader',
    GIT_CONFIG_VALUE_0: `Authorization: Basic ${basic}`,
  };
}

export class SpecsRepo {
  private constructor(
    readonly git: GitPort,
    readonly mode: 'local' | 'remote',
    /** Where the repo lives: the path, or the URL without credentials. */
    readonly location: string,
    readonly branch: string,
    readonly statusBranch: string,
    /** Credentials and timeout for the git commands run here rather than through the port. */
    private readonly net: { env: NodeJS.ProcessEnv; timeoutMs?: number } = { env: {} },
  ) {}

  /** Ref holding the watched branch's tip as last seen. */
  get specRef(): string {
    return this.mode === 'local' ? `refs/heads/${this.branch}` : `refs/remotes/origin/${this.branch}`;
  }

  /** Ref the controller commits status to. */
  get statusRef(): string {
    return `refs/heads/${this.statusBranch}`;
  }

  private get remoteStatusRef(): string {
    return `refs/remotes/origin/${this.statusBranch}`;
  }

  static async open(opts: SpecsRepoOptions): Promise<SpecsRepo> {
    const branch = opts.branch ?? 'main';
    const statusBranch = opts.statusBranch ?? DEFAULT_STATUS_BRANCH;
    if (statusBranch === branch) {
      throw new AdvError(
        ErrorCode.UsageError,
        `the status branch must differ from the watched branch "${branch}"`,
        {
          hint: 'the controller never writes the watched branch; leave --status-branch at its default',
        },
      );
    }
    const make = (gitdir: string): GitPort => {
      const o = {
        env: credentialEnv(opts.token),
        ...(opts.networkTimeoutMs ? { networkTimeoutMs: opts.networkTimeoutMs } : {}),
      };
      return opts.reader === 'isomorphic' ? new IsoGit(gitdir, o) : new NativeGit(gitdir, o);
    };
    if (isRemoteUrl(opts.repo)) {
      const gitdir = join(resolve(opts.dataDir), 'specs.git');
      if (!existsSync(join(gitdir, 'HEAD'))) {
        await mkdir(gitdir, { recursive: true });
        await git(['init', '--quiet', '--bare', gitdir]);
        await git(['remote', 'add', 'origin', opts.repo], { gitdir });
      } else {
        await git(['remote', 'set-url', 'origin', opts.repo], { gitdir });
      }
      const net = {
        env: credentialEnv(opts.token),
        ...(opts.networkTimeoutMs ? { timeoutMs: opts.networkTimeoutMs } : {}),
      };
      return new SpecsRepo(make(gitdir), 'remote', redact(opts.repo), branch, statusBranch, net);
    }
    const path = resolve(opts.repo);
    if (!existsSync(path)) {
      throw new AdvError(ErrorCode.NotFound, `specs repo ${path} does not exist`, {
        hint: `create one with "adv init ${opts.repo}"`,
      });
    }
    let gitdir: string;
    try {
      gitdir = (await git(['rev-parse', '--absolute-git-dir'], { cwd: path })).toString('utf8').trim();
    } catch {
      throw new AdvError(ErrorCode.NotFound, `${path} is not a git repository`, {
        hint: `run "git init" there, or "adv init ${opts.repo}"`,
      });
    }
    return new SpecsRepo(make(gitdir), 'local', path, branch, statusBranch);
  }

  /** Brings the refs up to date: fetches in remote mode; a no-op locally (the refs are live). */
  async refresh(): Promise<void> {
    if (this.mode === 'local') return;
    try {
      await this.fetchRefs();
    } catch (e) {
      const err = e as AdvError;
      throw new AdvError(
        ErrorCode.GitError,
        err.message.replace('from origin', `from ${this.location}`),
        err.data,
      );
    }
    // First start against a repo that already has status (a restart with a new data dir).
    const local = await this.git.resolveRef(this.statusRef);
    const remote = await this.git.resolveRef(this.remoteStatusRef);
    if (!local && remote) await this.git.updateRef(this.statusRef, remote, undefined);
  }

  private async fetchRefs(): Promise<void> {
    await this.git
      .fetch('origin', [
        `+refs/heads/${this.branch}:${this.specRef}`,
        `+refs/heads/${this.statusBranch}:${this.remoteStatusRef}`,
        SNAPSHOTS_REFSPEC,
      ])
      .catch(async (e: AdvError) => {
        // A repo without a status branch yet: fetch the watched branch alone.
        if (
          /couldn't find remote ref .*status|couldn't find remote ref/i.test(e.message) &&
          !e.data.unreachable
        ) {
          await this.git.fetch('origin', [`+refs/heads/${this.branch}:${this.specRef}`, SNAPSHOTS_REFSPEC]);
          // The remote has no status branch (new, or deleted there): ours is published again.
          const tracking = await this.git.resolveRef(this.remoteStatusRef);
          if (tracking) await runGit(['update-ref', '-d', this.remoteStatusRef], { gitdir: this.git.gitdir });
          return;
        }
        throw e;
      });
  }

  async specHead(): Promise<string | undefined> {
    return this.git.resolveRef(this.specRef);
  }

  /**
   * Makes the local status commits visible where users read them. Locally they already are.
   * Remotely: a fast-forward push; `rejected` means another writer moved the branch.
   */
  async publish(): Promise<PushResult> {
    if (this.mode === 'local') return 'ok';
    const local = await this.git.resolveRef(this.statusRef);
    if (!local) return 'ok';
    const remote = await this.git.resolveRef(this.remoteStatusRef);
    if (remote === local) return 'ok';
    const r = await this.git.push('origin', local, this.statusRef);
    if (r === 'ok') await this.git.updateRef(this.remoteStatusRef, local, remote);
    return r;
  }

  /** Whether status commits exist that the remote has not accepted yet. */
  async unpublished(): Promise<boolean> {
    if (this.mode === 'local') return false;
    const local = await this.git.resolveRef(this.statusRef);
    return Boolean(local) && local !== (await this.git.resolveRef(this.remoteStatusRef));
  }

  /** After a rejected push: drop local status commits and take the remote's branch as truth. */
  async adoptRemoteStatus(): Promise<void> {
    if (this.mode === 'local') return;
    await this.git.fetch('origin', [`+refs/heads/${this.statusBranch}:${this.remoteStatusRef}`]);
    const remote = await this.git.resolveRef(this.remoteStatusRef);
    const local = await this.git.resolveRef(this.statusRef);
    if (remote) await this.git.updateRef(this.statusRef, remote, local);
  }

  /** Standing by: the status branch as the remote has it (last fetched) is the one to show. */
  async followRemoteStatus(): Promise<void> {
    if (this.mode === 'local') return;
    const remote = await this.git.resolveRef(this.remoteStatusRef);
    const local = await this.git.resolveRef(this.statusRef);
    if (remote && remote !== local) await this.git.updateRef(this.statusRef, remote, local);
  }

  /** The branch that says which controller may write the status branch (`loop/lifecycle/lease.ts`). */
  get leaseBranch(): string {
    return `${this.statusBranch}-lease`;
  }

  private get leaseRef(): string {
    return `refs/heads/${this.leaseBranch}`;
  }

  /**
   * The lease record's commit as the repo has it now: fetched from the remote (a lease branch the
   * remote does not have is no lease), or read from the local repo. Throws when unreachable.
   */
  async readLease(): Promise<string | undefined> {
    if (this.mode === 'local') return this.git.resolveRef(this.leaseRef);
    const tracking = `refs/remotes/origin/${this.leaseBranch}`;
    try {
      await this.git.fetch('origin', [`+${this.leaseRef}:${tracking}`]);
    } catch (e) {
      const err = e as AdvError;
      if (!err.data?.unreachable && /couldn't find remote ref/i.test(err.message)) return undefined;
      throw e;
    }
    return this.git.resolveRef(tracking);
  }

  /**
   * Compare-and-swap of the lease: points it at `oid` only if it is still `expected` (undefined:
   * only if there is none). Locally `update-ref NEW OLD`. Remotely a fast-forward push when `oid`
   * is a child of `expected` (the remote refuses it if the branch moved: that is the swap), or
   * `--force-with-lease=<ref>:<expected>` for a new root; a remote that denies forced updates
   * answers `denied`, and the caller keeps to fast-forwards.
   */
  async writeLease(
    oid: string,
    expected: string | undefined,
    force: boolean,
  ): Promise<PushResult | 'denied'> {
    if (this.mode === 'local')
      return (await this.git.updateRef(this.leaseRef, oid, expected)) ? 'ok' : 'rejected';
    const lease = force ? [`--force-with-lease=${this.leaseRef}:${expected ?? ''}`] : [];
    const r = await runGit(
      ['push', '--quiet', '--porcelain', ...lease, 'origin', `${force ? '+' : ''}${oid}:${this.leaseRef}`],
      {
        gitdir: this.git.gitdir,
        env: this.net.env,
        ...(this.net.timeoutMs ? { timeoutMs: this.net.timeoutMs } : {}),
      },
    );
    const tracking = `refs/remotes/origin/${this.leaseBranch}`;
    if (r.code === 0) {
      await this.git.updateRef(tracking, oid, await this.git.resolveRef(tracking));
      return 'ok';
    }
    const text = r.stdout.toString('utf8') + r.stderr;
    if (force && /remote rejected|denying non-fast-forward|protected branch/i.test(text)) return 'denied';
    if (/stale info|\[rejected\]|fetch first|non-fast-forward|remote rejected/i.test(text)) return 'rejected';
    if (isUnreachable(text)) return 'unreachable';
    throw new AdvError(
      ErrorCode.GitError,
      `git push of the lease to ${this.location} failed: ${text.trim()}`,
    );
  }

  /** Files whose change means the watched branch may have moved (local mode). */
  watchPaths(): string[] {
    if (this.mode === 'remote') return [];
    const gitdir = this.git.gitdir;
    return [join(gitdir, 'refs', 'heads', ...this.branch.split('/')), join(gitdir, 'packed-refs')];
  }

  close(): Promise<void> {
    return this.git.close();
  }
}
