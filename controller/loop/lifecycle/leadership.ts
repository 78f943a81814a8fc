/**
 * The controller's side of the status branch lease: one `Lease`, renewed by the passes and by a
 * timer (a long pass never lets it lapse), and what acquiring it means — the status the previous
 * holder wrote is re-read, and a takeover from another controller is marked by a commit that fences
 * off that controller's later writes. Released on a clean stop.
 */
import type { Logger } from 'pino';
import type { Identity } from '../../git/port.js';
import type { SpecsRepo } from '../../git/specs-repo.js';
import { Lease } from './lease.js';
import type { RepoSync } from '../status/repo-sync.js';

export class Leadership {
  private lease: Lease | undefined;
  private timer: NodeJS.Timeout | undefined;
  private id = '';
  private wasHeld = false;

  constructor(
    private readonly repo: SpecsRepo,
    private readonly sync: RepoSync,
    private readonly d: { durationMs: number; author: Identity; logger: Logger },
  ) {}

  /** Starts competing for the lease as controller `id` (the data dir's id). */
  start(id: string): void {
    if (this.lease) return;
    this.id = id;
    this.lease = new Lease(this.repo, { id, ...this.d });
    this.timer = setInterval(() => void this.lease?.renewIfDue(), this.d.durationMs / 3).unref();
  }

  /** Whether this controller may act now. */
  get held(): boolean {
    return this.lease?.held ?? false;
  }

  /** Milliseconds until the lease wants renewing, or another try at acquiring it. */
  dueInMs(): number {
    return this.lease?.dueInMs() ?? 0;
  }

  get branch(): string {
    return this.repo.leaseBranch;
  }

  /** Renews or acquires the lease; on acquiring it, re-reads the status before anything is planned. */
  async lead(): Promise<{ held: boolean; acquired: boolean }> {
    const lease = this.lease!;
    const t = await lease.tick();
    // One line for the step-down, whatever caused it (a rejected renewal, a pause past the lease).
    if (this.wasHeld && !t.held)
      this.d.logger.warn(
        { epoch: lease.epoch ?? null },
        'stepped down: this controller no longer holds the status branch lease; it acts on nothing and stands by',
      );
    this.wasHeld = t.held;
    if (t.acquired)
      await this.sync.takeOver({ id: this.id, epoch: lease.epoch!, ...(t.from ? { from: t.from } : {}) });
    return { held: t.held, acquired: t.acquired };
  }

  /** A clean stop: gives the lease up so a standby takes over at once. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.lease?.release();
  }
}
