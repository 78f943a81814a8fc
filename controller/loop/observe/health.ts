/**
 * Backend health, pure: which runs failed on a backend in a row (since its last success), when that
 * makes it `Degraded`, and the backend's status document. The controller feeds it the run statuses
 * and stages what it returns; nothing here reads or writes anything.
 */
import type { BackendInfo } from '../../reconcile/solver.js';
import { EndClass } from '../../status/types.js';
import {
  ConditionType,
  setCondition,
  type BackendStatusDoc,
  type Condition,
  type RunStatusDoc,
} from '../../status/types.js';

/** Failed runs in a row that make a backend degraded, unless its spec says otherwise. */
export const DEFAULT_DEGRADE_AFTER = 3;

/** One run whose latest attempt on a backend failed. */
export type FailureStreakEntry = NonNullable<BackendStatusDoc['status']['failureStreak']>[number];

/**
 * Ends that count against a backend's health: the run's code, the infrastructure, or a setup step
 * failed there (runs whose setup fails on one backend in a row: a module or tool missing on it).
 */
const COUNTS_AGAINST_BACKEND: ReadonlySet<string> = new Set([
  EndClass.UserError,
  EndClass.Infrastructure,
  EndClass.SetupFailed,
]);

/**
 * For every backend, the distinct runs whose attempts there failed since its last success, oldest
 * first. Preemptions, time-outs and cancellations neither count nor break a streak; a success ends it.
 */
export function failureStreaks(runs: Iterable<RunStatusDoc>): Map<string, FailureStreakEntry[]> {
  const ends = new Map<string, FailureStreakEntry[]>();
  for (const doc of runs) {
    for (const a of doc.status.attempts) {
      if (!a.finishedAt || !a.class) continue;
      const list = ends.get(a.backend) ?? [];
      list.push({ run: doc.metadata.name, attempt: a.n, class: a.class, finishedAt: a.finishedAt });
      ends.set(a.backend, list);
    }
  }
  const streaks = new Map<string, FailureStreakEntry[]>();
  for (const [backend, list] of ends) {
    list.sort((x, y) => (x.finishedAt < y.finishedAt ? -1 : x.finishedAt > y.finishedAt ? 1 : 0));
    const streak: FailureStreakEntry[] = [];
    for (let i = list.length - 1; i >= 0; i--) {
      const e = list[i]!;
      if (e.class === EndClass.Succeeded) break;
      if (!COUNTS_AGAINST_BACKEND.has(e.class)) continue;
      if (!streak.some((x) => x.run === e.run)) streak.unshift(e);
    }
    if (streak.length) streaks.set(backend, streak);
  }
  return streaks;
}

/** Why a backend is degraded (the last `threshold` failures), or undefined while it is healthy. */
export function degradedWhy(
  streak: readonly FailureStreakEntry[] | undefined,
  threshold = DEFAULT_DEGRADE_AFTER,
): string | undefined {
  if (!streak || streak.length < threshold) return undefined;
  return `${streak.length} runs failed here in a row: ${streak
    .slice(-threshold)
    .map((e) => `${e.run} (${e.class})`)
    .join(', ')}`;
}

/** Keeps a condition's transition time when its status (and, for Ready, its message) did not change. */
function keepTransitionTime(next: Condition, prev: Condition | undefined, sameMessage: boolean): void {
  if (prev && prev.status === next.status && (!sameMessage || prev.message === next.message))
    next.lastTransitionTime = prev.lastTransitionTime;
}

/** The backend's status document (`backends/<name>.yaml`) and its commit-message line. */
export function backendStatusDoc(input: {
  info: BackendInfo;
  prev: BackendStatusDoc | undefined;
  activeAttempts: number;
  streak: readonly FailureStreakEntry[] | undefined;
  nowMs: number;
}): { doc: BackendStatusDoc; summary: string } {
  const { info, prev, activeAttempts, streak } = input;
  const name = info.name;
  const ready = info.usable;
  const now = new Date(input.nowMs).toISOString();
  const readyCond: Condition = {
    type: 'Ready',
    status: ready ? 'True' : 'False',
    reason: ready ? 'AdapterLoaded' : 'Unavailable',
    message: info.why ?? '',
    lastTransitionTime: now,
  };
  keepTransitionTime(
    readyCond,
    prev?.status.conditions.find((c) => c.type === 'Ready'),
    true,
  );
  const degraded = degradedWhy(streak, info.spec.degradeAfterFailures);
  const conditions = setCondition(
    [readyCond],
    {
      type: ConditionType.Degraded,
      status: degraded ? 'True' : 'False',
      reason: degraded ? 'RunsFailing' : 'Healthy',
      message: degraded ? `${degraded}; tried after the other backends until a run succeeds here` : '',
    },
    readyCond.lastTransitionTime,
  );
  keepTransitionTime(
    conditions.find((c) => c.type === ConditionType.Degraded)!,
    prev?.status.conditions.find((c) => c.type === ConditionType.Degraded),
    false,
  );
  const doc: BackendStatusDoc = {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'BackendStatus',
    metadata: { name },
    status: {
      type: info.spec.type,
      conditions,
      activeAttempts,
      ...(streak?.length ? { failureStreak: streak.slice(-10) } : {}),
    },
  };
  const state = !ready ? `NotReady (${info.why})` : degraded ? `Degraded (${degraded})` : 'Ready';
  return { doc, summary: `backend/${name}: ${state}` };
}
