import { describe, expect, it } from 'vitest';
import type { Alert } from '../spec/schema.js';
import { parseSelector } from '../selector.js';
import type { ObjectEvent } from './events.js';
import { afterTry, applyOutcomes, backoffMs, emptyOutbox, KEEP_RECORDS, recordEvents } from './outbox.js';

const alert = (over: Partial<Alert['spec']> = {}): Alert => ({
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'Alert',
  metadata: { name: 'a' },
  spec: { providerRef: { name: 'p' }, events: ['RunFailed', 'RunSucceeded'], ...over },
});

const at = (min: number) => new Date(Date.UTC(2026, 0, 1, 0, min)).toISOString();
const ev = (
  name: string,
  event: ObjectEvent['event'],
  min: number,
  labels?: Record<string, string>,
): ObjectEvent => ({
  id: `Run/${name}/1/${event}`,
  event,
  kind: 'Run',
  name,
  attempt: 1,
  at: at(min),
  ...(labels ? { labels } : {}),
});

describe('recordEvents', () => {
  it('records wanted events since the alert was first seen, once, as pending', () => {
    const doc = emptyOutbox('a', 'p', at(10));
    const events = [ev('old', 'RunFailed', 5), ev('x', 'RunFailed', 11), ev('y', 'RunPreempted', 12)];
    const once = recordEvents(doc, alert(), [], events);
    expect(Object.keys(once.status.deliveries)).toEqual(['Run/x/1/RunFailed']);
    expect(once.status.deliveries['Run/x/1/RunFailed']).toMatchObject({
      state: 'pending',
      tries: 0,
      object: 'run/x',
    });
    expect(once.status.counts).toEqual({ pending: 1, delivered: 0, failed: 0 });
    const delivered = applyOutcomes(once, new Map([['Run/x/1/RunFailed', { ok: true, at: 0 }]]));
    // Derived again (every pass, and after a restart): the delivered record stays delivered.
    expect(recordEvents(delivered, alert(), [], events).status.deliveries['Run/x/1/RunFailed']!.state).toBe(
      'delivered',
    );
  });

  it('selects by labels, and records nothing while suspended', () => {
    const doc = emptyOutbox('a', 'p', at(0));
    const events = [ev('ml', 'RunFailed', 1, { team: 'ml' }), ev('other', 'RunFailed', 1, { team: 'cv' })];
    const sel = parseSelector('team=ml');
    expect(Object.keys(recordEvents(doc, alert(), sel, events).status.deliveries)).toEqual([
      'Run/ml/1/RunFailed',
    ]);
    expect(recordEvents(doc, alert({ suspend: true }), sel, events).status.deliveries).toEqual({});
  });

  it('keeps at most KEEP_RECORDS finished records and never records the dropped ones again', () => {
    const events = Array.from({ length: KEEP_RECORDS + 10 }, (_, i) => ev(`r${i}`, 'RunSucceeded', i + 1));
    let doc = recordEvents(emptyOutbox('a', 'p', at(0)), alert(), [], events);
    doc = applyOutcomes(doc, new Map(events.map((e) => [e.id, { ok: true as const, at: 0 }])));
    expect(Object.keys(doc.status.deliveries)).toHaveLength(KEEP_RECORDS);
    expect(doc.status.deliveries['Run/r0/1/RunSucceeded']).toBeUndefined();
    expect(recordEvents(doc, alert(), [], events).status.deliveries['Run/r0/1/RunSucceeded']).toBeUndefined();
  });
});

describe('retries', () => {
  const policy = { maxTries: 3, baseDelayMs: 1000, maxDelayMs: 3000 };

  it('backs off exponentially, bounded', () => {
    expect([1, 2, 3, 4, 10].map((n) => backoffMs(n, policy))).toEqual([1000, 2000, 3000, 3000, 3000]);
  });

  it('is pending with the next try time after a failure, failed after maxTries, delivered on success', () => {
    const d0 = {
      event: 'RunFailed',
      object: 'run/x',
      attempt: 1,
      at: at(0),
      state: 'pending' as const,
      tries: 0,
    };
    const d1 = afterTry(d0, { ok: false, at: 0, error: 'HTTP 500' }, policy);
    expect(d1).toMatchObject({
      state: 'pending',
      tries: 1,
      lastError: 'HTTP 500',
      nextTryAt: new Date(1000).toISOString(),
    });
    const d2 = afterTry(d1, { ok: false, at: 5000, error: 'HTTP 502' }, policy);
    expect(d2.nextTryAt).toBe(new Date(7000).toISOString());
    expect(afterTry(d2, { ok: false, at: 9000, error: 'HTTP 503' }, policy)).toMatchObject({
      state: 'failed',
      tries: 3,
      lastError: 'HTTP 503',
    });
    expect(afterTry(d0, { ok: false, at: 0, error: 'HTTP 404', final: true }, policy).state).toBe('failed');
    const ok = afterTry(d1, { ok: true, at: 2000 }, policy);
    expect(ok).toMatchObject({ state: 'delivered', tries: 2, deliveredAt: new Date(2000).toISOString() });
    expect(ok.nextTryAt).toBeUndefined();
    expect(ok.lastError).toBeUndefined();
  });
});
