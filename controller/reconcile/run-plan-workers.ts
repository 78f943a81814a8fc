/**
 * The other processes of a multi-host attempt, from their heartbeats (`workers/<k>/heartbeat.json`,
 * which the observer hangs on process 0's as `workers`): a process whose heartbeat is older than
 * the limit is a hung rank, and makes the run `Lost`; a process that has not finished its restore
 * (waiting for process 0's choice, or still downloading the step) shows as `Restoring`.
 */
import type { Heartbeat } from '../../runtime/heartbeat.js';
import { ConditionType, removeCondition, setCondition, type Condition } from '../status/types.js';

/** The reason of a `Lost` that a process other than 0 caused. */
export const WORKER_HEARTBEAT_MISSING = 'WorkerHeartbeatMissing';

/**
 * The conditions after this pass's heartbeats of attempt `attempt`: `Lost` (unless process 0's own
 * heartbeat already made it so) and `Restoring`.
 */
export function workerConditions(
  conditions: Condition[],
  hb: Heartbeat,
  o: { attempt: number; limitMs: number; nowMs: number; now: string },
): Condition[] {
  const beats = [hb, ...(hb.workers ?? [])].filter((b) => b.attempt === o.attempt);
  const stale = beats.filter((b) => b.process && o.nowMs - Date.parse(b.time) > o.limitMs);
  const restoring = beats.filter((b) => b.waitingForRestore).map((b) => b.process ?? 0);
  let out = conditions;
  const lost = out.find((c) => c.type === ConditionType.Lost);
  if (stale.length)
    out = setCondition(
      out,
      {
        type: ConditionType.Lost,
        status: 'True',
        reason: WORKER_HEARTBEAT_MISSING,
        message: `${stale
          .map(
            (b) =>
              `process ${b.process}: no heartbeat for ${Math.round((o.nowMs - Date.parse(b.time)) / 1000)}s`,
          )
          .join(', ')} (limit ${o.limitMs / 1000}s)`,
      },
      o.now,
    );
  else if (lost?.reason === WORKER_HEARTBEAT_MISSING) out = removeCondition(out, ConditionType.Lost);
  out = fetchingCondition(out, hb.fetchingDataset, o.now);
  return restoring.length
    ? setCondition(
        out,
        {
          type: ConditionType.Restoring,
          status: 'True',
          reason: 'WaitingForRestore',
          message: `process${restoring.length > 1 ? 'es' : ''} ${restoring.join(', ')} of ${hb.processes ?? beats.length} not restored yet: waiting for process 0's choice, or downloading the step; no workload runs there`,
        },
        o.now,
      )
    : removeCondition(out, ConditionType.Restoring);
}

/**
 * `FetchingData` while process 0 fetches the run's datasets, its progress in tenths: the message
 * (and so the status) changes a few times per dataset, not on every heartbeat.
 */
function fetchingCondition(
  conditions: Condition[],
  f: Heartbeat['fetchingDataset'],
  now: string,
): Condition[] {
  if (!f) return removeCondition(conditions, ConditionType.FetchingData);
  const tenth = f.total > 0 ? Math.min(10, Math.floor((10 * f.bytes) / f.total)) : 0;
  const gib = (f.total / 2 ** 30).toFixed(f.total >= 2 ** 30 ? 1 : 3);
  return setCondition(
    conditions,
    {
      type: ConditionType.FetchingData,
      status: 'True',
      reason: 'FetchingDataset',
      message: `dataset ${f.dataset}: ${tenth * 10}% of ${gib} GiB in place (cached or fetched); the workload starts after it`,
    },
    now,
  );
}
