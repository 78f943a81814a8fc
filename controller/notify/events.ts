/**
 * Notification events, derived from status documents. Level-triggered like everything else: an
 * event is a fact the status holds (attempt 2 was preempted, the run failed), named by a
 * deterministic id `<Kind>/<name>/<attempt>/<Event>`. Deriving again after a restart yields the
 * same ids, so the outbox (outbox.ts) records each once, and a receiver can dedupe on the id.
 */
import type { NotifyEvent } from '../spec/schema.js';
import { TERMINAL_PHASES } from '../status/phases.js';
import {
  AttemptPhase,
  ConditionType,
  Phase,
  Reason,
  type Attempt,
  type DagStatusDoc,
  type OwnerStatusCore,
  type RunStatusDoc,
  type SweepStatusDoc,
} from '../status/types.js';

/** One event of one object. */
export interface ObjectEvent {
  id: string;
  event: NotifyEvent;
  kind: 'Run' | 'DAG' | 'Sweep';
  name: string;
  /** The attempt it is about; 0 for DAGs, sweeps and a run that never had one. */
  attempt: number;
  /** When it happened (an ISO time from the status). */
  at: string;
  phase?: string;
  reason?: string;
  message?: string;
  specCommit?: string;
  labels?: Record<string, string>;
}

export const eventId = (kind: string, name: string, attempt: number, event: string): string =>
  `${kind}/${name}/${attempt}/${event}`;

type Extra = Pick<ObjectEvent, 'phase' | 'reason' | 'message'>;

function runEvent(
  doc: RunStatusDoc,
  event: NotifyEvent,
  attempt: number,
  at: string,
  extra: Extra,
): ObjectEvent {
  const st = doc.status;
  return {
    id: eventId('Run', doc.metadata.name, attempt, event),
    event,
    kind: 'Run',
    name: doc.metadata.name,
    attempt,
    at,
    ...defined(extra),
    ...(st.specCommit ? { specCommit: st.specCommit } : {}),
    ...(doc.metadata.labels ? { labels: doc.metadata.labels } : {}),
  };
}

function defined(extra: Extra): Extra {
  const out: Extra = {};
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) out[k as keyof Extra] = v;
  return out;
}

/** The end of an attempt as an event, if it is one an Alert can ask for. */
function attemptEvent(a: Attempt): NotifyEvent | undefined {
  if (a.phase === AttemptPhase.Preempted) return 'RunPreempted';
  if (a.phase === AttemptPhase.Lost) return 'HeartbeatLost';
  if (a.reason === Reason.QueuedTimeout) return 'ProvisioningStuck';
  return undefined;
}

/** Every event a run's status holds. */
export function runEvents(doc: RunStatusDoc): ObjectEvent[] {
  const st = doc.status;
  const out: ObjectEvent[] = [];
  const created = st.createdAt ?? '';
  for (const a of st.attempts) {
    const event = attemptEvent(a);
    if (event)
      out.push(
        runEvent(doc, event, a.n, a.finishedAt ?? a.startedAt ?? created, {
          phase: a.phase,
          reason: a.reason,
          message: a.message,
        }),
      );
  }
  const last = st.attempts.at(-1);
  const n = last?.n ?? 0;
  for (const c of st.conditions) {
    if (c.status !== 'True') continue;
    const event =
      c.type === ConditionType.Stalled
        ? 'RunStalled'
        : c.type === ConditionType.Lost
          ? 'HeartbeatLost'
          : undefined;
    if (event && !out.some((e) => e.event === event && e.attempt === n))
      out.push(
        runEvent(doc, event, n, c.lastTransitionTime, {
          phase: st.phase,
          reason: c.reason,
          message: c.message,
        }),
      );
  }
  if (st.phase === Phase.Succeeded || st.phase === Phase.Failed) {
    const extra = {
      phase: st.phase,
      reason: st.reason ?? last?.reason,
      message: st.message ?? last?.message,
    };
    const at = last?.finishedAt ?? readyTime(doc) ?? created;
    out.push(runEvent(doc, st.phase === Phase.Succeeded ? 'RunSucceeded' : 'RunFailed', n, at, extra));
  }
  return out;
}

const readyTime = (doc: RunStatusDoc): string | undefined =>
  doc.status.conditions.find((c) => c.type === ConditionType.Ready)?.lastTransitionTime;

/** DagDone once a DAG is Succeeded, Failed or Cancelled. */
export function dagEvents(doc: DagStatusDoc): ObjectEvent[] {
  const ends = Object.values(doc.status.nodes).map((n) => n.finishedAt ?? '');
  return ownerDone('DAG', 'DagDone', doc.metadata, doc.status, ends);
}

/**
 * SweepDone, from the Sweep's own status once its phase is terminal: every point has run (a point
 * waiting for a `maxConcurrent` slot keeps the sweep Running, so the gap between two points never
 * looks done). An edit that adds points makes it run again; its next end keeps the same id.
 */
export function sweepEvents(doc: SweepStatusDoc): ObjectEvent[] {
  const ends = Object.values(doc.status.points).map((p) => p.since ?? '');
  return ownerDone('Sweep', 'SweepDone', doc.metadata, doc.status, ends);
}

/** The one event of an owner of child runs whose phase is terminal, at its children's last end. */
function ownerDone(
  kind: 'DAG' | 'Sweep',
  event: 'DagDone' | 'SweepDone',
  metadata: { name: string; labels?: Record<string, string> },
  st: OwnerStatusCore,
  ends: string[],
): ObjectEvent[] {
  if (!TERMINAL_PHASES.has(st.phase)) return [];
  return [
    {
      id: eventId(kind, metadata.name, 0, event),
      event,
      kind,
      name: metadata.name,
      attempt: 0,
      at: ends.sort().at(-1) || st.createdAt || '',
      phase: st.phase,
      ...defined({ reason: st.reason, message: st.message }),
      ...(st.specCommit ? { specCommit: st.specCommit } : {}),
      ...(metadata.labels ? { labels: metadata.labels } : {}),
    },
  ];
}
