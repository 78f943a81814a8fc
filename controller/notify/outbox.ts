/**
 * An Alert's outbox on the status branch (`alerts/<name>.yaml`), planned without I/O: which
 * derived events it records (pending), what a delivery's outcome makes of a record (delivered,
 * retried with backoff, failed for good), and how it stays bounded.
 *
 * An event is recorded once per id and never again, whatever is derived later; an Alert sends
 * only events that happened since it was first seen (`since`), not the history before it.
 */
import type { Alert } from '../spec/schema.js';
import { selectorMatches, type Requirement } from '../selector.js';
import type { AlertDelivery, AlertStatusDoc } from '../status/types.js';
import type { ObjectEvent } from './events.js';

/** How deliveries are retried. */
export interface RetryPolicy {
  /** Tries before a delivery is marked failed. */
  maxTries: number;
  /** The wait after the first failure; doubled after each, up to `maxDelayMs`. */
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxTries: 8, baseDelayMs: 2_000, maxDelayMs: 5 * 60_000 };

/** Delivered and failed records kept per Alert (pending ones are always kept). */
export const KEEP_RECORDS = 500;

/** The wait before try `tries + 1`, after `tries` failures (exponential, bounded). */
export function backoffMs(tries: number, policy: RetryPolicy = DEFAULT_RETRY): number {
  return Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, tries - 1));
}

const ms = (iso: string): number => {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? -Infinity : t;
};

/** Whether an Alert asks for this event of an object with these labels. */
export function alertWants(alert: Alert, selector: readonly Requirement[], e: ObjectEvent): boolean {
  return (alert.spec.events as readonly string[]).includes(e.event) && selectorMatches(e.labels, selector);
}

export function emptyOutbox(name: string, provider: string, now: string): AlertStatusDoc {
  return {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'AlertStatus',
    metadata: { name },
    status: {
      since: now,
      provider,
      conditions: [],
      counts: { pending: 0, delivered: 0, failed: 0 },
      deliveries: {},
    },
  };
}

function recordOf(e: ObjectEvent): AlertDelivery {
  const r: AlertDelivery = {
    event: e.event,
    object: `${e.kind.toLowerCase()}/${e.name}`,
    attempt: e.attempt,
    at: e.at,
    state: 'pending',
    tries: 0,
  };
  for (const k of ['phase', 'reason', 'message', 'specCommit', 'labels'] as const)
    if (e[k] !== undefined) (r as unknown as Record<string, unknown>)[k] = e[k];
  return r;
}

/**
 * The outbox with every wanted event not yet recorded added as pending (none while suspended),
 * bounded, counted. Returns a new document; `doc` is not changed.
 */
export function recordEvents(
  doc: AlertStatusDoc,
  alert: Alert,
  selector: readonly Requirement[],
  events: readonly ObjectEvent[],
): AlertStatusDoc {
  const deliveries = { ...doc.status.deliveries };
  const since = ms(doc.status.since);
  if (!alert.spec.suspend)
    for (const e of events)
      if (!deliveries[e.id] && ms(e.at) >= since && alertWants(alert, selector, e))
        deliveries[e.id] = recordOf(e);
  return bounded({
    ...doc,
    status: { ...doc.status, provider: alert.spec.providerRef.name, deliveries },
  });
}

/** Drops the oldest finished records past `KEEP_RECORDS`, moving `since` past them (never resent). */
function bounded(doc: AlertStatusDoc): AlertStatusDoc {
  const st = doc.status;
  const finished = Object.entries(st.deliveries)
    .filter(([, d]) => d.state !== 'pending')
    .sort(([, a], [, b]) => ms(a.at) - ms(b.at));
  let since = st.since;
  const deliveries = { ...st.deliveries };
  for (const [id, d] of finished.slice(0, Math.max(0, finished.length - KEEP_RECORDS))) {
    delete deliveries[id];
    if (ms(d.at) >= ms(since)) since = new Date(ms(d.at) + 1).toISOString();
  }
  const counts = { pending: 0, delivered: 0, failed: 0 };
  for (const d of Object.values(deliveries)) counts[d.state]++;
  return { ...doc, status: { ...st, since, deliveries, counts } };
}

/** What one try of a delivery came to. */
export type TryOutcome = { ok: true; at: number } | { ok: false; at: number; error: string; final?: boolean };

/** The record after a try: delivered; or failed for good after `maxTries`; or pending with backoff. */
export function afterTry(
  d: AlertDelivery,
  outcome: TryOutcome,
  policy: RetryPolicy = DEFAULT_RETRY,
): AlertDelivery {
  const tries = d.tries + 1;
  const { nextTryAt: _next, lastError: _err, ...rest } = d;
  if (outcome.ok)
    return { ...rest, state: 'delivered', tries, deliveredAt: new Date(outcome.at).toISOString() };
  if (outcome.final || tries >= policy.maxTries)
    return { ...rest, state: 'failed', tries, lastError: outcome.error };
  return {
    ...rest,
    state: 'pending',
    tries,
    lastError: outcome.error,
    nextTryAt: new Date(outcome.at + backoffMs(tries, policy)).toISOString(),
  };
}

/** Applies outcomes to an outbox (ids it no longer holds are ignored). */
export function applyOutcomes(
  doc: AlertStatusDoc,
  outcomes: ReadonlyMap<string, TryOutcome>,
  policy: RetryPolicy = DEFAULT_RETRY,
): AlertStatusDoc {
  const deliveries = { ...doc.status.deliveries };
  for (const [id, o] of outcomes) {
    const d = deliveries[id];
    if (d?.state === 'pending') deliveries[id] = afterTry(d, o, policy);
  }
  return bounded({ ...doc, status: { ...doc.status, deliveries } });
}
