/**
 * What attempts cost: the price each recorded when it was chosen (`Attempt.price`) times the hours
 * it was billed, to its end or to now. Read by `adv describe` and the dashboard.
 */
import type { Attempt } from './types.js';

export interface Cost {
  /** Money, in the unit `costPerHour` is written in. */
  amount: number;
  hours: number;
  perHour: number;
}

/** When a priced attempt began billing (`price.from`): its submission or its start; undefined before. */
export const billedFrom = (a: Attempt): string | undefined =>
  a.price?.from === 'submitted' ? (a.submittedAt ?? a.startedAt) : a.startedAt;

/** The attempt's cost so far; undefined when its backend has no price or it has not begun billing. */
export function attemptCost(a: Attempt, nowMs: number): Cost | undefined {
  if (!a.price) return undefined;
  const from = billedFrom(a);
  if (!from) return undefined;
  const end = a.finishedAt ? Date.parse(a.finishedAt) : nowMs;
  const hours = Math.max(0, end - Date.parse(from)) / 3_600_000;
  if (!Number.isFinite(hours)) return undefined;
  return { amount: hours * a.price.perHour, hours, perHour: a.price.perHour };
}

/** The run's cost over every priced attempt; undefined when none has a price. */
export function runCost(attempts: readonly Attempt[], nowMs: number): number | undefined {
  const costs = attempts.map((a) => attemptCost(a, nowMs)).filter((c): c is Cost => !!c);
  return costs.length ? costs.reduce((sum, c) => sum + c.amount, 0) : undefined;
}

/** `$1.23` style, two decimals (four below a cent, so a short test attempt is not "0.00"). */
export function formatMoney(amount: number): string {
  return amount > 0 && amount < 0.01 ? amount.toFixed(4) : amount.toFixed(2);
}

/** `0.42 h × 3.20/h = 1.34`: how the figure came about. */
export function formatCost(c: Cost): string {
  return `${formatMoney(c.amount)} (${c.hours.toFixed(2)} h × ${c.perHour}/h)`;
}
