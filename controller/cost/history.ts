/**
 * What the status branch says about money and time, pure: how often each backend preempted per
 * hour an attempt ran there and how long it took to start one, and how fast a run makes steps. The
 * controller and `adv plan` feed it every run's status; the solver reads the result as an argument.
 */
import type { BackendRecord } from '../backends/backend-info.js';
import type { RunSpec } from '../spec/schema.js';

export type { BackendRecord };
import { EndClass, type Attempt, type RunStatusDoc } from '../status/types.js';

/** Preemptions per attempt-hour; 0 until an attempt has run there. */
export const preemptionRate = (r: BackendRecord | undefined): number =>
  r && r.hours > 0 ? r.preemptions / r.hours : 0;

/** Every backend's record from every run's attempts; live attempts do not count until they end. */
export function backendRecords(runs: Iterable<RunStatusDoc>): Map<string, BackendRecord> {
  const acc = new Map<string, BackendRecord & { startups: number; paid: number; gpuHours: number }>();
  for (const doc of runs)
    for (const a of doc.status.attempts) {
      if (!a.finishedAt || !a.startedAt) continue;
      const ran = Date.parse(a.finishedAt) - Date.parse(a.startedAt);
      if (!Number.isFinite(ran) || ran < 0) continue;
      const r = acc.get(a.backend) ?? {
        attempts: 0,
        preemptions: 0,
        hours: 0,
        startupSec: 0,
        startups: 0,
        paid: 0,
        gpuHours: 0,
      };
      const gpus = (doc.appliedSpec?.resources?.gpus ?? 0) * (doc.appliedSpec?.resources?.nodes ?? 1);
      if (a.price && gpus > 0) {
        r.paid += (a.price.perHour * ran) / 3_600_000;
        r.gpuHours += (gpus * ran) / 3_600_000;
      }
      r.attempts++;
      if (a.class === EndClass.Preempted) r.preemptions++;
      r.hours += ran / 3_600_000;
      const wait = a.submittedAt ? Date.parse(a.startedAt) - Date.parse(a.submittedAt) : NaN;
      if (Number.isFinite(wait) && wait >= 0) {
        r.startupSec += wait / 1000;
        r.startups++;
      }
      acc.set(a.backend, r);
    }
  const out = new Map<string, BackendRecord>();
  for (const [name, { startups, paid, gpuHours, ...r }] of acc)
    out.set(name, {
      ...r,
      startupSec: startups ? r.startupSec / startups : 0,
      ...(gpuHours > 0 ? { gpuHourPrice: paid / gpuHours } : {}),
    });
  return out;
}

/**
 * Seconds per step measured from a run's attempts: the steps between the checkpoint an attempt
 * restored (or 0) and the last it committed, over the time from its start to that commit.
 * Undefined when no attempt committed a checkpoint past where it began.
 */
export function secondsPerStep(attempts: readonly Attempt[]): number | undefined {
  let steps = 0;
  let sec = 0;
  for (const a of attempts) {
    if (a.lastStep === undefined || !a.lastStepAt || !a.startedAt) continue;
    const s = a.lastStep - (a.startStep ?? 0);
    const t = (Date.parse(a.lastStepAt) - Date.parse(a.startedAt)) / 1000;
    if (s > 0 && Number.isFinite(t) && t > 0) {
      steps += s;
      sec += t;
    }
  }
  return steps > 0 ? sec / steps : undefined;
}

/** Where a step rate came from: the run's own attempts or a similar run's (named). */
export interface StepRate {
  secondsPerStep: number;
  from: 'own' | 'similar';
  /** The similar run measured, when `from` is `similar`. */
  run?: string;
}

/** A run as a step-rate source: its name, spec, labels and attempts. */
export interface RunRecord {
  name: string;
  spec?: RunSpec | undefined;
  labels?: Readonly<Record<string, string>> | undefined;
  attempts: readonly Attempt[];
}

/**
 * The run's step rate: its own attempts', else the first other run with the same command, else the
 * first with the same labels (all of them, and at least one), that has one. Undefined when none was
 * measured: the caller says "unknown", never a guess.
 */
export function stepRateOf(run: RunRecord, others: Iterable<RunRecord>): StepRate | undefined {
  const mine = secondsPerStep(run.attempts);
  if (mine !== undefined) return { secondsPerStep: mine, from: 'own' };
  const command = JSON.stringify(run.spec?.command);
  const labels = labelKey(run.labels);
  let byLabels: StepRate | undefined;
  for (const o of others) {
    if (o.name === run.name || !o.spec) continue;
    const sameCommand = run.spec !== undefined && JSON.stringify(o.spec.command) === command;
    const sameLabels = !byLabels && labels !== undefined && labelKey(o.labels) === labels;
    if (!sameCommand && !sameLabels) continue;
    const rate = secondsPerStep(o.attempts);
    if (rate === undefined) continue;
    if (sameCommand) return { secondsPerStep: rate, from: 'similar', run: o.name };
    byLabels = { secondsPerStep: rate, from: 'similar', run: o.name };
  }
  return byLabels;
}

/** The labels as one comparable string; undefined when there are none. */
function labelKey(labels: Readonly<Record<string, string>> | undefined): string | undefined {
  if (!labels || !Object.keys(labels).length) return undefined;
  return JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
