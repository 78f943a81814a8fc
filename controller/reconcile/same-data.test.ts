import { describe, expect, it } from 'vitest';
import { canonicalJson, clone, sameData } from './run-plan-model.js';

/** A small seeded generator, so a failure can be replayed. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

/** Random status-like data: nested objects and arrays, strings, numbers, booleans, null, undefined members. */
function value(rand: () => number, depth: number): unknown {
  const r = rand();
  if (depth > 3 || r < 0.35) return [1, 'a', 'b', true, false, null, 0, 2.5][Math.floor(rand() * 8)];
  if (r < 0.55) return Array.from({ length: Math.floor(rand() * 3) }, () => value(rand, depth + 1));
  const o: Record<string, unknown> = {};
  for (const k of ['phase', 'attempts', 'reason', 'n', 'x'].slice(0, 1 + Math.floor(rand() * 5)))
    o[k] = rand() < 0.15 ? undefined : value(rand, depth + 1);
  return o;
}

/** The same data with keys in another order, undefined members dropped or added, or one leaf changed. */
function variant(v: unknown, rand: () => number): unknown {
  if (v === null || typeof v !== 'object') return rand() < 0.05 ? (v === 1 ? 2 : 1) : v;
  if (Array.isArray(v)) return v.map((x) => variant(x, rand));
  const keys = Object.keys(v).reverse();
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    const x = (v as Record<string, unknown>)[k];
    if (x === undefined && rand() < 0.5) continue;
    out[k] = variant(x, rand);
  }
  if (rand() < 0.1) out.extra = undefined;
  return out;
}

describe('sameData and clone', () => {
  it('sameData agrees with comparing canonicalJson, on 3,000 random pairs', () => {
    const rand = rng(7);
    let equal = 0;
    for (let i = 0; i < 3000; i++) {
      const a = value(rand, 0);
      const b = variant(a, rand);
      const expected = canonicalJson(a) === canonicalJson(b);
      if (expected) equal++;
      expect(sameData(a, b), `${canonicalJson(a)} vs ${canonicalJson(b)}`).toBe(expected);
    }
    // Both answers were exercised.
    expect(equal).toBeGreaterThan(300);
    expect(equal).toBeLessThan(2900);
  });

  it('clone copies plain data deeply and equal, and leaves other objects to structuredClone', () => {
    const rand = rng(11);
    for (let i = 0; i < 500; i++) {
      const a = value(rand, 0);
      const c = clone(a);
      expect(canonicalJson(c)).toBe(canonicalJson(a));
      if (a !== null && typeof a === 'object') expect(c).not.toBe(a);
    }
    const doc = { status: { attempts: [{ n: 1, phase: 'Running' }] }, at: new Date(0) };
    const copy = clone(doc);
    copy.status.attempts[0]!.phase = 'Failed';
    expect(doc.status.attempts[0]!.phase).toBe('Running');
    expect(copy.at).toBeInstanceOf(Date);
    expect(copy.at).not.toBe(doc.at);
  });
});
