/**
 * Which controller may write the status branch: a lease, kept as one commit on a branch beside it
 * (`adventuretime/status-lease`), moved only by compare-and-swap (`update-ref NEW OLD` locally,
 * `push --force-with-lease` to a remote). As a Kubernetes Lease: a holder, an epoch bumped by every
 * acquisition, a duration; the holder renews it every third of the duration.
 *
 * A controller that does not hold the lease stands by: it reads status (for its dashboard and
 * metrics) but plans, writes and submits nothing. It takes the lease over once the record has not
 * changed for a whole duration *by its own clock* (never by comparing timestamps across machines),
 * at once when the holder released it on a clean stop, and at once when the holder is itself
 * (the same data dir, restarted after a crash: the data dir's lock says no one else has that id).
 *
 * The holder stops acting when it has not renewed for two thirds of the duration, before anyone
 * may take over. The lease only avoids duplicate work; the fence is the status branch's own
 * compare-and-swap: a controller that loses it re-reads and acts on nothing it planned (RepoSync).
 */
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Identity } from '../../git/port.js';
import type { SpecsRepo } from '../../git/specs-repo.js';
import { errText } from '../observe/observer.js';

export interface LeaseRecord {
  holder: string;
  epoch: number;
  durationSec: number;
  renewedAt: string;
  host: string;
  pid: number;
  /** Set by a clean stop: anyone may take the lease at once. */
  released?: boolean;
  /** Records since the last root commit (a remote's lease branch grows by fast-forwards). */
  depth?: number;
}

/**
 * A remote lease branch is a chain of fast-forwards (hosts that deny forced updates still take
 * them); every this many records it starts again from a root commit, when the host allows that,
 * so it does not grow without bound (a renewal every 10 s is 8,640 records a day).
 */
const MAX_CHAIN = 200;

export interface LeaseTick {
  held: boolean;
  /** The lease was acquired in this tick (the status must be re-read before acting). */
  acquired: boolean;
  /** Whom it was taken from, when another controller held it. */
  from?: LeaseRecord;
}

/** Monotonic milliseconds: lease timing must not jump with the wall clock. */
const mono = (): number => performance.now();

export class Lease {
  private mine: { oid: string; record: LeaseRecord; renewedAt: number } | undefined;
  private seen: { oid: string | undefined; since: number } | undefined;
  private nextTryAt = 0;
  private lastStandbyLog = '';
  /** The remote refused a forced update of the lease branch: keep to fast-forwards. */
  private forceDenied = false;

  constructor(
    private readonly repo: SpecsRepo,
    private readonly d: { id: string; durationMs: number; author: Identity; logger: Logger },
  ) {}

  /** Held, and renewed recently enough that no one else can have taken it over. */
  get held(): boolean {
    return this.mine !== undefined && mono() - this.mine.renewedAt < (this.d.durationMs * 2) / 3;
  }

  get epoch(): number | undefined {
    return this.mine?.record.epoch;
  }

  private get retryMs(): number {
    return this.d.durationMs / 3;
  }

  /** When `tick` has something to do next (a renewal, or another try), in monotonic ms from now. */
  dueInMs(): number {
    const at = this.mine ? this.mine.renewedAt + this.retryMs : this.nextTryAt;
    return Math.max(0, at - mono());
  }

  /** Renews the lease when due, or tries to acquire it when due. Never throws. */
  tick(): Promise<LeaseTick> {
    return this.serially(() => this.tickNow());
  }

  /**
   * Renews the lease if it is held and due; nothing else. Called from a timer as well as from the
   * passes, so a long pass (a first pass over 10,000 runs) never lets the lease lapse.
   */
  renewIfDue(): Promise<void> {
    return this.serially(async () => {
      if (this.mine && mono() - this.mine.renewedAt >= this.retryMs) await this.tickNow();
    });
  }

  private chain: Promise<unknown> = Promise.resolve();
  private serially<T>(f: () => Promise<T>): Promise<T> {
    const next = this.chain.then(f);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async tickNow(): Promise<LeaseTick> {
    try {
      if (this.mine) {
        if (mono() - this.mine.renewedAt < this.retryMs) return { held: this.held, acquired: false };
        if (await this.renew()) return { held: this.held, acquired: false };
        if (this.mine) return { held: this.held, acquired: false }; // unreachable: still ours for now
      }
      if (mono() < this.nextTryAt) return { held: false, acquired: false };
      this.nextTryAt = mono() + this.retryMs;
      return await this.tryAcquire();
    } catch (e) {
      this.d.logger.warn({ err: errText(e) }, 'cannot read or write the status branch lease');
      return { held: this.held, acquired: false };
    }
  }

  private async renew(): Promise<boolean> {
    const mine = this.mine!;
    const record = { ...mine.record, renewedAt: new Date().toISOString() };
    const at = mono();
    const r = await this.swap(record, mine.oid);
    if (typeof r === 'object') {
      this.mine = { oid: r.oid, record: r.record, renewedAt: at };
      return true;
    }
    if (r === 'rejected') {
      this.mine = undefined;
      this.nextTryAt = 0;
      this.d.logger.error(
        { epoch: mine.record.epoch },
        'lost the status branch lease to another controller: acting on nothing until it is ours again',
      );
    }
    return false;
  }

  private async tryAcquire(): Promise<LeaseTick> {
    const current = await this.repo.readLease();
    const now = mono();
    if (this.seen?.oid !== current) this.seen = { oid: current, since: now };
    const record = current ? await this.read(current) : undefined;
    const expired = record !== undefined && now - this.seen!.since >= record.durationSec * 1000;
    const free = !record || record.released || record.holder === this.d.id || expired;
    if (!free) {
      this.standingBy(record);
      return { held: false, acquired: false };
    }
    const next: LeaseRecord = {
      holder: this.d.id,
      epoch: (record?.epoch ?? 0) + 1,
      durationSec: Math.round(this.d.durationMs / 100) / 10,
      renewedAt: new Date().toISOString(),
      host: hostname(),
      pid: process.pid,
    };
    const at = mono();
    const r = await this.swap({ ...next, depth: record?.depth ?? 0 }, current);
    if (typeof r !== 'object') return { held: false, acquired: false };
    this.mine = { oid: r.oid, record: r.record, renewedAt: at };
    const from = record && record.holder !== this.d.id ? record : undefined;
    this.d.logger.info(
      { epoch: next.epoch, ...(from ? { from: from.holder, fromHost: from.host } : {}) },
      from
        ? 'took over the status branch lease (its holder stopped renewing it)'
        : 'holding the status branch lease',
    );
    return { held: true, acquired: true, ...(from ? { from } : {}) };
  }

  private standingBy(r: LeaseRecord): void {
    const key = `${r.holder}/${r.epoch}`;
    if (key === this.lastStandbyLog) return;
    this.lastStandbyLog = key;
    this.d.logger.warn(
      { holder: r.holder, host: r.host, pid: r.pid, epoch: r.epoch, leaseDurationSec: r.durationSec },
      `standing by: another controller holds the status branch lease (${this.repo.leaseBranch}); ` +
        'this one takes over if it is not renewed for its duration',
    );
  }

  /** Gives the lease up (a clean stop), so another controller can take over at once. */
  async release(): Promise<void> {
    const mine = this.mine;
    if (!mine) return;
    this.mine = undefined;
    try {
      await this.swap({ ...mine.record, renewedAt: new Date().toISOString(), released: true }, mine.oid);
    } catch (e) {
      this.d.logger.warn(
        { err: errText(e) },
        'cannot release the status branch lease; it expires on its own',
      );
    }
  }

  /**
   * Writes the record as the lease's next commit and swaps it in for `expected`: a child of it on
   * a remote (a fast-forward), a root commit locally and every `MAX_CHAIN` records remotely.
   */
  private async swap(
    r: LeaseRecord,
    expected: string | undefined,
  ): Promise<{ oid: string; record: LeaseRecord } | 'rejected' | 'unreachable'> {
    const chained = this.repo.mode === 'remote' && expected !== undefined;
    const root = !chained || (!this.forceDenied && (r.depth ?? 0) >= MAX_CHAIN);
    const record = { ...r, depth: root ? 0 : (r.depth ?? 0) + 1 };
    const oid = await this.write(record, root ? undefined : expected);
    const result = await this.repo.writeLease(oid, expected, root && expected !== undefined);
    if (result === 'denied') {
      this.forceDenied = true;
      this.d.logger.info('the remote denies forced updates of the lease branch: it grows by fast-forwards');
      return this.swap(r, expected);
    }
    return result === 'ok' ? { oid, record } : result;
  }

  /** A commit whose message is the record: `git log -1 adventuretime/status-lease` shows it. */
  private write(r: LeaseRecord, parent: string | undefined): Promise<string> {
    const subject = r.released
      ? `lease released by controller ${r.holder} (epoch ${r.epoch})`
      : `controller ${r.holder} holds the status branch (epoch ${r.epoch})`;
    return this.repo.git.commitFiles({
      ...(parent ? { parent } : {}),
      files: new Map(),
      message: `${subject}\n\n${JSON.stringify(r, null, 2)}\n`,
      author: this.d.author,
    });
  }

  private async read(oid: string): Promise<LeaseRecord | undefined> {
    const { message } = await this.repo.git.readCommit(oid);
    try {
      const r = JSON.parse(message.slice(message.indexOf('\n\n') + 2)) as LeaseRecord;
      return typeof r.holder === 'string' && typeof r.epoch === 'number' && typeof r.durationSec === 'number'
        ? r
        : undefined;
    } catch {
      return undefined; // not a record this version understands: treated as no lease
    }
  }
}
