/**
 * What a pass reports to /metrics: the step durations as they happen, and the gauges (runs and DAGs
 * by phase, queue depth, checkpoint age) counted from memory only when /metrics is scraped.
 */
import type { ControllerMetrics, MetricsSnapshot } from '../../metrics.js';
import type { StatusWriter } from '../../status/writer.js';
import {
  SPECS_SOURCE,
  type DagStatusDoc,
  type RunStatusDoc,
  type SourceStatusDoc,
} from '../../status/types.js';
import type { LiveAttempt } from '../observe/observer.js';
import { runCost } from '../../status/cost.js';

/** Milliseconds spent in each step of a pass. */
export type PassSteps = {
  fetch: number;
  load: number;
  observe: number;
  plan: number;
  write: number;
  execute: number;
};

export function observePass(metrics: ControllerMetrics, ms: PassSteps): void {
  let total = 0;
  for (const [step, v] of Object.entries(ms)) {
    metrics.passDuration.observe({ step }, v / 1000);
    total += v;
  }
  metrics.passDuration.observe({ step: 'total' }, total / 1000);
}

export function metricsSnapshot(
  status: StatusWriter,
  live: readonly LiveAttempt[],
  queueDepth: number,
  nowMs: number,
): MetricsSnapshot {
  const byPhase = (kind: 'Run' | 'DAG') => {
    const out = new Map<string, number>();
    for (const n of status.names(kind)) {
      const p = status.get<RunStatusDoc | DagStatusDoc>(kind, n)!.status.phase;
      out.set(p, (out.get(p) ?? 0) + 1);
    }
    return out;
  };
  const checkpointAge = new Map<string, number>();
  const runCosts = new Map<string, number>();
  for (const { run } of live) {
    const st = status.get<RunStatusDoc>('Run', run)!.status;
    const ck = st.checkpoint;
    if (ck) checkpointAge.set(run, Math.max(0, (nowMs - Date.parse(ck.createdAt)) / 1000));
    const cost = runCost(st.attempts, nowMs);
    if (cost !== undefined) runCosts.set(run, cost);
  }
  const specLoadErrors = status.get<SourceStatusDoc>('Source', SPECS_SOURCE)?.status.errorCount ?? 0;
  return {
    queueDepth,
    runs: byPhase('Run'),
    dags: byPhase('DAG'),
    checkpointAge,
    runCost: runCosts,
    specLoadErrors,
  };
}
