/**
 * The specs repo's traffic. In: fetching the watched branch (every interval, on a webhook, on a ref
 * change). Out: staged changes become one commit (compare-and-swap on the ref),
 * commits are published to the remote (fast-forward only), and a conflict means another writer
 * exists: its state is taken as the truth and no action planned on the old one is taken. Also keeps
 * the parsed status files across restarts (a cache by blob id in the data dir).
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import { AdvError, ErrorCode } from '../../errors.js';
import type { SpecsRepo } from '../../git/specs-repo.js';
import { listOf, readJsonCache, writeJsonCache } from '../../internal/json-cache.js';
import type { ControllerMetrics } from '../../metrics.js';
import { StatusConflict, type StatusWriter } from '../../status/writer.js';
import type { StatusDoc } from '../../status/types.js';
import { errText } from '../observe/observer.js';

export class RepoSync {
  private chain: Promise<unknown> = Promise.resolve();
  /** Whether the remote answered the last fetch or push (locally: always). */
  private remoteReachable = true;
  private lastFetchError: string | undefined;
  private cacheSavedAt = 0;

  constructor(
    private readonly repo: SpecsRepo,
    readonly status: StatusWriter,
    private readonly d: {
      dataDir: string;
      cacheStamp: () => string;
      metrics: ControllerMetrics;
      logger: Logger;
      now: () => number;
      /** Called after the status was reloaded from the branch (every run must be looked at again). */
      onReload: () => void;
    },
  ) {}

  /** Fetches the watched and status branches (remote mode); a failure is logged, never thrown. */
  async fetch(when: 'start' | 'pass'): Promise<void> {
    const endFetch = this.d.metrics.gitFetch.startTimer();
    try {
      await this.repo.refresh();
      endFetch();
      if (!this.remoteReachable) this.d.logger.info('specs repo reachable again');
      this.remoteReachable = true;
    } catch (e) {
      this.lastFetchError = errText(e);
      if (when === 'pass') this.d.metrics.gitErrors.inc({ op: 'fetch' });
      if (this.remoteReachable || when === 'start')
        this.d.logger.warn(
          { err: errText(e) },
          when === 'start'
            ? 'specs repo unreachable at start; working from the data dir'
            : 'cannot fetch the specs repo; reconciling what is known',
        );
      this.remoteReachable = false;
    }
  }

  /** Why there is nothing to reconcile: the branch cannot be fetched, or does not exist. */
  noSpecsError(): AdvError {
    const where = `branch ${this.repo.branch} of ${this.repo.location}`;
    return this.lastFetchError
      ? new AdvError(ErrorCode.GitError, `cannot read ${where}: ${this.lastFetchError}`, {
          hint: 'check the URL, the network, and ADV_GIT_TOKEN; the controller acts only on what it has fetched',
        })
      : new AdvError(ErrorCode.NotFound, `${where} does not exist`, {
          hint: `commit your specs to ${this.repo.branch}, or pass --branch with the branch you use`,
        });
  }

  private get cacheFile(): string {
    return join(this.d.dataDir, 'status-cache.json');
  }

  /** (Re)loads the status branch, parsing only status files not seen before. */
  async load(): Promise<void> {
    const saved = await readJsonCache(
      this.cacheFile,
      this.d.cacheStamp(),
      listOf<[string, StatusDoc]>(isCachedStatus),
    );
    await this.status.load(new Map<string, StatusDoc>([...(saved ?? []), ...this.status.exportCache()]));
  }

  /** Saves the parsed-status cache (after loading, on stop, and every few minutes). */
  async saveCache(): Promise<void> {
    this.cacheSavedAt = this.d.now();
    await writeJsonCache(this.cacheFile, this.d.cacheStamp(), this.status.exportCache()).catch((e: unknown) =>
      this.d.logger.warn({ err: errText(e) }, 'cannot save the status cache'),
    );
  }

  /** Saves the cache when it is older than `maxAgeMs`. */
  async saveCacheIfOlder(maxAgeMs: number): Promise<void> {
    if (this.d.now() - this.cacheSavedAt > maxAgeMs) await this.saveCache();
  }

  /** Commits what is staged; 1 when a commit was made. A conflict reloads and rethrows. */
  async commit(specCommit: string | undefined): Promise<number> {
    try {
      const c = await this.status.commitBatch(specCommit ? { specCommit } : {});
      return c ? 1 : 0;
    } catch (e) {
      if (e instanceof StatusConflict) {
        this.d.logger.error(
          { err: e.message },
          'status branch moved under us: reloading it; no action is taken this pass',
        );
        await this.recoverFromConflict();
      }
      throw e;
    }
  }

  /** Commits one at a time (results arrive from backends in parallel). */
  commitSerially(specCommit: string | undefined): Promise<number> {
    const next = this.chain.then(() => this.commit(specCommit));
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** Publishes status commits; true when the remote has them all (always, locally). */
  async publish(): Promise<boolean> {
    if (!(await this.repo.unpublished())) return true;
    let r;
    const endPush = this.d.metrics.gitPush.startTimer();
    try {
      r = await this.repo.publish();
      endPush();
    } catch (e) {
      this.d.metrics.gitErrors.inc({ op: 'push' });
      this.d.logger.warn({ err: errText(e) }, 'status push failed');
      return false;
    }
    if (r === 'ok') return true;
    this.d.metrics.gitErrors.inc({ op: 'push' });
    if (r === 'unreachable') {
      if (this.remoteReachable)
        this.d.logger.warn('specs repo unreachable: status commits are queued locally');
      this.remoteReachable = false;
      return false;
    }
    this.d.logger.error(
      'status push rejected: another controller writes this status branch; taking its state and holding actions',
    );
    await this.recoverFromConflict();
    return false;
  }

  /** Takes the remote's status branch as the truth and reloads it. */
  async recoverFromConflict(): Promise<void> {
    try {
      await this.repo.adoptRemoteStatus();
    } catch (e) {
      this.d.logger.warn({ err: errText(e) }, 'cannot fetch the status branch');
    }
    await this.load();
    this.d.onReload();
  }

  /**
   * This controller has just acquired the lease: what the previous holder wrote is the truth, so
   * it is re-read before anything is planned; a takeover is marked by a commit of its own, which
   * fences off any later commit of the previous holder (its compare-and-swap now fails).
   */
  async takeOver(lease: {
    id: string;
    epoch: number;
    from?: { holder: string; host: string };
  }): Promise<void> {
    if (!lease.from) {
      // Its own lease again (a restart): its unpublished commits are still its to publish.
      await this.reloadIfMoved();
      return;
    }
    try {
      await this.repo.adoptRemoteStatus();
    } catch (e) {
      this.d.logger.warn({ err: errText(e) }, 'cannot fetch the status branch');
    }
    await this.reloadIfMoved();
    await this.status.commitMarker(
      `controller ${lease.id} took over the status branch from ${lease.from.holder} on ${lease.from.host} (lease epoch ${lease.epoch})`,
      [
        ['Controller', lease.id],
        ['Lease-Epoch', String(lease.epoch)],
      ],
    );
    await this.publish();
  }

  /** When someone else moved the status ref (a fetch adopted the remote's, a second controller), reload it. */
  async reloadIfMoved(opts: { followRemote?: boolean } = {}): Promise<boolean> {
    // Standing by, the remote's status branch (as last fetched) is the one to show.
    if (opts.followRemote) await this.repo.followRemoteStatus();
    const at = await this.repo.git.resolveRef(this.status.ref);
    if (at === this.status.head) return false;
    if (at === undefined && this.status.head !== undefined) {
      // Deleted under us (a mistaken `git branch -D`): its history is still in the object store.
      // Put it back where it was, rather than start over and forget every attempt.
      await this.repo.git.updateRef(this.status.ref, this.status.head, undefined);
      this.d.logger.warn({ at: this.status.head }, 'the status branch was deleted; restored it where it was');
      return false;
    }
    this.d.logger.warn('status branch changed outside this controller; reloading it');
    await this.load();
    this.d.onReload();
    return true;
  }
}

/** `[blob id, status document]` with the fields every reader of a status document relies on. */
function isCachedStatus(x: unknown): boolean {
  if (!Array.isArray(x) || x.length !== 2 || typeof x[0] !== 'string') return false;
  const doc = x[1] as { kind?: unknown; metadata?: { name?: unknown }; status?: unknown } | null;
  return (
    typeof doc === 'object' &&
    doc !== null &&
    typeof doc.kind === 'string' &&
    typeof doc.metadata?.name === 'string' &&
    (doc.status === undefined || (typeof doc.status === 'object' && doc.status !== null))
  );
}
