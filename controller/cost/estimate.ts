/**
 * Expected hours and money of a run on a backend, pure. Expected hours: the steps left
 * (`totalSteps` − the run's checkpoint) × its measured seconds per step; unknown without both.
 * Preemptions stretch them: each loses half a checkpoint interval of work (the run's own measured
 * loss when it has been preempted before) plus the backend's restart time, at the backend's rate of
 * preemptions per hour (history.ts). `policy.optimize` ranks backends by what this gives.
 */
import type { BackendInfo } from '../backends/backend-info.js';
import type { RunSpec } from '../spec/schema.js';
import { EndClass, type Attempt } from '../status/types.js';
import { formatMoney } from '../status/cost.js';
import { preemptionRate, type StepRate } from './history.js';
import { declaredPrice } from './price.js';

/**
 * Half the checkpoint interval assumed when the run neither sets `policy.checkpointIntervalSec` nor
 * was preempted before (then its own loss is measured): a workload that checkpoints every 30 min.
 */
export const ASSUMED_LOSS_SEC = 900;

/** Hours of work left: steps to `totalSteps` from the run's checkpoint × seconds per step. */
export function expectedHours(
  spec: Pick<RunSpec, 'totalSteps'>,
  rate: StepRate | undefined,
  doneStep = 0,
): number | undefined {
  if (!spec.totalSteps || !rate) return undefined;
  return (Math.max(0, spec.totalSteps - doneStep) * rate.secondsPerStep) / 3600;
}

/**
 * Hours of work one preemption loses: the mean of the run's own preempted attempts (from their last
 * checkpoint, or start, to their end), else half of `policy.checkpointIntervalSec`, else half of 30 min.
 */
export function lossPerPreemptionHours(spec: RunSpec, attempts: readonly Attempt[]): number {
  const lost = attempts
    .filter((a) => a.class === EndClass.Preempted && a.finishedAt && (a.lastStepAt ?? a.startedAt))
    .map((a) => Date.parse(a.finishedAt!) - Date.parse((a.lastStepAt ?? a.startedAt)!))
    .filter((ms) => Number.isFinite(ms) && ms >= 0);
  if (lost.length) return lost.reduce((s, ms) => s + ms, 0) / lost.length / 3_600_000;
  const interval = spec.policy?.checkpointIntervalSec;
  return (interval !== undefined ? interval / 2 : ASSUMED_LOSS_SEC) / 3600;
}

/** Hours a backend takes for one hour of work: 1 + preemptions per hour × (loss + restart). */
export function stretch(info: Pick<BackendInfo, 'record'>, lossHours: number): number {
  const restart = (info.record?.startupSec ?? 0) / 3600;
  return 1 + preemptionRate(info.record) * (lossHours + restart);
}

/** One backend's expectation for a run: hours (of work, or per hour of work when unknown) and money. */
export interface Expectation {
  name: string;
  /** Wall-clock hours expected there; per hour of work when `perWorkHour`. */
  hours: number;
  /** Money for those hours; undefined when the Backend has no price. */
  cost?: number;
  /** The run's length is unknown: the figures are per hour of work. */
  perWorkHour: boolean;
  /** The price is what the backend billed before (`recordedPrice`), not a declared one. */
  recorded?: boolean;
}

/** What a run is expected to take and cost on each backend (`work`: hours of work, when known). */
export function expectations(
  spec: RunSpec,
  attempts: readonly Attempt[],
  backends: readonly BackendInfo[],
  work: number | undefined,
): Expectation[] {
  const loss = lossPerPreemptionHours(spec, attempts);
  return backends.map((b) => {
    const hours = (work ?? 1) * stretch(b, loss);
    const declared = declaredPrice(b, spec)?.perHour;
    const perHour = declared ?? recordedPrice(b, spec);
    return {
      name: b.name,
      hours,
      ...(perHour !== undefined ? { cost: hours * perHour } : {}),
      ...(declared === undefined && perHour !== undefined ? { recorded: true } : {}),
      perWorkHour: work === undefined,
    };
  });
}

/**
 * A price from what the backend billed before, for one that declares none: its recorded price per
 * GPU-hour × the GPUs the run holds. Undefined for a run without GPUs or a backend never priced.
 */
export function recordedPrice(b: Pick<BackendInfo, 'record'>, spec: RunSpec): number | undefined {
  const gpus = (spec.resources?.gpus ?? 0) * (spec.resources?.nodes ?? 1);
  const rate = b.record?.gpuHourPrice;
  return rate !== undefined && gpus > 0 ? rate * gpus : undefined;
}

/** The `optimize` goals that rank backends (`order` keeps the selector's order). */
export type Goal = 'cost' | 'time';

/** Sort key of an expectation: lower first; a backend without a price goes after every priced one. */
export const goalKey = (e: Expectation, goal: Goal): number =>
  goal === 'time' ? e.hours : (e.cost ?? Number.POSITIVE_INFINITY);

/** `$4.10`, `$0.41/h of work`, `10.2 h`, `1.05 h per hour of work`, or `no price`. */
export function sayExpectation(e: Expectation, goal: Goal): string {
  if (goal === 'time')
    return e.perWorkHour ? `${e.hours.toFixed(2)} h per hour of work` : `${e.hours.toFixed(1)} h`;
  if (e.cost === undefined) return 'no price (capabilities.costPerHour)';
  return `$${formatMoney(e.cost)}${e.perWorkHour ? '/h of work' : ''}${e.recorded ? ' (at its recorded price)' : ''}`;
}

/**
 * The chosen backend's clause: `(optimize: cost) — expected $4.10 vs vast-a $6.20 (vast-a preempted
 * 3.1×/h over 12 attempts)`, comparing it with the other ranked candidates (at most three).
 */
export function explainChoice(
  goal: Goal,
  chosen: Expectation,
  others: readonly Expectation[],
  infos: ReadonlyMap<string, Pick<BackendInfo, 'record'>>,
): string {
  const shown = others.slice(0, 3);
  const vs = shown.length ? ` vs ${shown.map((e) => `${e.name} ${sayExpectation(e, goal)}`).join(', ')}` : '';
  const notes = [chosen, ...shown].flatMap((e) => {
    const r = infos.get(e.name)?.record;
    if (!r?.preemptions) return [];
    return [`${e.name} preempted ${preemptionRate(r).toFixed(1)}×/h over ${r.attempts} attempts`];
  });
  return `(optimize: ${goal}) — expected ${sayExpectation(chosen, goal)}${vs}${notes.length ? ` (${notes.join('; ')})` : ''}`;
}
