/**
 * What a backend charges per hour for a run: its Backend's `capabilities.costPerHour` (per node) ×
 * the nodes the run spans, as the attempt's recorded price is (run-plan-schedule.ts), or a quote the
 * caller asked the backend for (Vast.ai's cheapest fitting offer).
 */
import type { BackendInfo } from '../backends/backend-info.js';
import type { Quote, QuoteSources } from '../backends/types.js';
import type { RunSpec } from '../spec/schema.js';

export type { Quote, QuoteSources };

/** A price per hour and where it came from, for the plan's columns. */
export interface HourlyPrice {
  perHour: number;
  /** `costPerHour` from the Backend spec, a `quote` from the backend itself, or what it `recorded`ly billed. */
  from: 'costPerHour' | 'quote' | 'recorded';
  /** What the quote was for (`cheapest of 3 offers: RTX 4090 ×1`). */
  note?: string;
}

/** The declared price of the run on `info`, or undefined when the Backend declares none. */
export function declaredPrice(info: Pick<BackendInfo, 'spec'>, spec: RunSpec): HourlyPrice | undefined {
  const perNode = info.spec.capabilities?.costPerHour;
  if (perNode === undefined) return undefined;
  return { perHour: perNode * (spec.resources?.nodes ?? 1), from: 'costPerHour' };
}

/** The quote when there is one (it is what the backend would bill), else the declared price. */
export function priceOf(
  info: Pick<BackendInfo, 'spec'>,
  spec: RunSpec,
  quote?: Quote,
): HourlyPrice | undefined {
  if (quote && 'perHour' in quote) return { perHour: quote.perHour, from: 'quote', note: quote.note };
  return declaredPrice(info, spec);
}
