/**
 * The backends as the planners see them in a pass: each adapter's traits and usability, its live
 * attempts, what `capacity()` said lately, and whether it is degraded; and, after planning, each
 * backend's status document. Failure streaks and preemption records are recomputed only after an
 * attempt ended.
 */
import { backendRecords, type BackendRecord } from '../../cost/history.js';
import type { BackendInfo } from '../../reconcile/solver.js';
import type { StatusWriter } from '../../status/writer.js';
import type { BackendStatusDoc, RunStatusDoc } from '../../status/types.js';
import type { BackendAdapters } from './adapters.js';
import { backendStatusDoc, degradedWhy, failureStreaks, type FailureStreakEntry } from './health.js';
import type { LiveAttempt, Observer } from './observer.js';

export class BackendView {
  private streaks: Map<string, FailureStreakEntry[]> | undefined;
  private records: Map<string, BackendRecord> | undefined;

  constructor(
    private readonly adapters: BackendAdapters,
    private readonly observer: Observer,
    private readonly status: StatusWriter,
  ) {}

  /** An attempt ended or a submission failed: streaks are recomputed when next asked. */
  attemptsChanged(): void {
    this.streaks = undefined;
    this.records = undefined;
  }

  /** Each backend's preemptions per attempt-hour and restart time, over every run's attempts. */
  private backendRecords(): Map<string, BackendRecord> {
    this.records ??= backendRecords(
      this.status.names('Run').map((n) => this.status.get<RunStatusDoc>('Run', n)!),
    );
    return this.records;
  }

  private failureStreaks(): Map<string, FailureStreakEntry[]> {
    this.streaks ??= failureStreaks(
      this.status.names('Run').map((n) => this.status.get<RunStatusDoc>('Run', n)!),
    );
    return this.streaks;
  }

  /** Fresh copies each pass: the pass counts its own submissions into them. */
  infos(live: readonly LiveAttempt[]): BackendInfo[] {
    const active = countByBackend(live);
    const streaks = this.failureStreaks();
    // Walked only when a run asks for policy.optimize (the solver's one reader), then kept until
    // an attempt ends: a pass of runs that never ask does no more work than before.
    const records = () => this.backendRecords();
    return this.adapters.infos().map((info) => {
      const capacity = this.observer.capacity(info.name);
      const degraded = degradedWhy(streaks.get(info.name), info.spec.degradeAfterFailures);
      return {
        ...info,
        active: active.get(info.name) ?? 0,
        ...(capacity ? { capacity } : {}),
        ...(degraded ? { degraded } : {}),
        get record() {
          return records().get(info.name);
        },
      };
    });
  }

  /** Stages every backend's status document (`backends/<name>.yaml`); unchanged ones add nothing. */
  stageStatus(live: readonly LiveAttempt[], nowMs: number): void {
    const active = countByBackend(live);
    const streaks = this.failureStreaks();
    for (const info of this.adapters.infos()) {
      const { doc, summary } = backendStatusDoc({
        info,
        prev: this.status.get<BackendStatusDoc>('Backend', info.name),
        activeAttempts: active.get(info.name) ?? 0,
        streak: streaks.get(info.name),
        nowMs,
      });
      this.status.stage('Backend', info.name, doc, { summary, trailers: [['Backend', info.name]] });
    }
  }
}

/** Live attempts per backend. */
function countByBackend(live: readonly LiveAttempt[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const { attempt } of live) out.set(attempt.backend, (out.get(attempt.backend) ?? 0) + 1);
  return out;
}
