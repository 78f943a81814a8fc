/**
 * The money side of `adv plan`: for each run it would start, the backend, its price per hour (a
 * quote the backend gave, else its `capabilities.costPerHour` × nodes, else what it billed per
 * GPU-hour before × the run's GPUs), the expected hours (work
 * left from `totalSteps` and a measured step rate, stretched by the backend's recorded preemptions)
 * and the expected cost; and the total. Unknown stays unknown: nothing is guessed.
 */
import type { BackendInfo } from '../backends/backend-info.js';
import { descriptorFor } from '../backends/registry.js';
import type { Backend as BackendObject, RunSpec } from '../spec/schema.js';
import type { RunStatusDoc } from '../status/types.js';
import { expectedHours, lossPerPreemptionHours, recordedPrice, stretch } from './estimate.js';
import { stepRateOf, type RunRecord } from './history.js';
import { priceOf, type Quote, type QuoteSources } from './price.js';

/** One run the plan would start, with what it is known to cost. */
export interface CostLine {
  run: string;
  backend: string;
  /** Price per hour; absent when the Backend declares none and gave no quote. */
  perHour?: number;
  /** `costPerHour` or `quote`, and the quote's note or why it failed. */
  priceFrom?: 'costPerHour' | 'quote' | 'recorded';
  priceNote?: string;
  /** Expected hours there; absent when unknown (no `totalSteps`, or no measured step rate). */
  hours?: number;
  /** Why the hours are what they are: `own step rate`, `step rate of run x`, or why unknown. */
  hoursFrom: string;
  cost?: number;
}

/** Every line, and the total of the known costs (`unknown`: lines without one). */
export interface PlanCost {
  runs: CostLine[];
  total: { cost: number; unknown: number };
}

/** A run the plan would start: its name, spec and labels (when known) and the backend chosen. */
export interface StartingRun {
  run: string;
  backend: string;
  spec?: RunSpec | undefined;
  labels?: Readonly<Record<string, string>> | undefined;
}

/** `run\0backend`: the key a quote is kept under. */
export const quoteKey = (run: string, backend: string): string => `${run}\0${backend}`;

/**
 * Asks each backend whose type quotes (Vast.ai) what each starting run would cost there, one at a
 * time, once per distinct ask (resources, constraints, preemptible); a failed quote is kept with
 * its reason. The quote reads only those fields of the run (vastai/quote.ts `offerNeedsFor`).
 */
export async function askQuotes(
  starting: readonly StartingRun[],
  backends: ReadonlyMap<string, BackendObject>,
  src: QuoteSources,
): Promise<Map<string, Quote>> {
  const out = new Map<string, Quote>();
  // Runs that ask the same of a backend get one quote: a plan of many alike runs searches once.
  const asked = new Map<string, Quote>();
  for (const s of starting) {
    const obj = backends.get(s.backend);
    const quote = obj && descriptorFor(obj.spec.type)?.quote;
    if (!quote || !s.spec) continue;
    const same = JSON.stringify([
      s.backend,
      s.spec.resources,
      s.spec.backendSelector?.constraints,
      s.spec.policy?.preemptible,
    ]);
    const q = asked.get(same) ?? (await quote(obj, s.spec, src));
    asked.set(same, q);
    out.set(quoteKey(s.run, s.backend), q);
  }
  return out;
}

/** The plan's cost lines from what it would start, the status branch's runs and the quotes. */
export function planCosts(
  starting: readonly StartingRun[],
  ctx: {
    backends: readonly BackendInfo[];
    status: (run: string) => RunStatusDoc | undefined;
    /** Every run on the status branch, for a similar run's step rate. */
    history: readonly RunRecord[];
    quotes?: ReadonlyMap<string, Quote>;
  },
): PlanCost {
  const infos = new Map(ctx.backends.map((b) => [b.name, b]));
  const runs = starting.map((s): CostLine => {
    const info = infos.get(s.backend);
    const quote = ctx.quotes?.get(quoteKey(s.run, s.backend));
    const spec = s.spec ?? { command: [] };
    const recorded = info && recordedPrice(info, spec);
    const price = !info
      ? undefined
      : (priceOf(info, spec, quote) ??
        (recorded !== undefined ? { perHour: recorded, from: 'recorded' as const } : undefined));
    const note = quote && 'error' in quote ? `quote failed: ${quote.error}` : price?.note;
    const doc = ctx.status(s.run);
    const attempts = doc?.status.attempts ?? [];
    const rate = stepRateOf({ name: s.run, spec: s.spec, labels: s.labels, attempts }, ctx.history);
    const work = s.spec ? expectedHours(s.spec, rate, doc?.status.checkpoint?.step ?? 0) : undefined;
    const hours =
      work === undefined || !info ? undefined : work * stretch(info, lossPerPreemptionHours(spec, attempts));
    return {
      run: s.run,
      backend: s.backend,
      ...(price ? { perHour: price.perHour, priceFrom: price.from } : {}),
      ...(note ? { priceNote: note } : {}),
      ...(hours !== undefined ? { hours } : {}),
      hoursFrom: !s.spec?.totalSteps
        ? 'no totalSteps'
        : !rate
          ? 'no measured step rate (its own or a run with the same command or labels)'
          : rate.from === 'own'
            ? 'its own step rate'
            : `step rate of run ${rate.run}`,
      ...(hours !== undefined && price ? { cost: hours * price.perHour } : {}),
    };
  });
  return {
    runs,
    total: {
      cost: runs.reduce((sum, r) => sum + (r.cost ?? 0), 0),
      unknown: runs.filter((r) => r.cost === undefined).length,
    },
  };
}

/** Every run on the status branch as a step-rate source (its applied spec, labels and attempts). */
export function runRecords(docs: Iterable<RunStatusDoc>): RunRecord[] {
  return [...docs].map((d) => ({
    name: d.metadata.name,
    spec: d.appliedSpec,
    labels: d.metadata.labels,
    attempts: d.status.attempts,
  }));
}
