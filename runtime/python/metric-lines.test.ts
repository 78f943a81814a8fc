/**
 * The metric line as both sides see it: runtime/python/tests/metric-lines.json holds the exact
 * lines the Python package's `log()` writes (its test_metrics.py checks it still does) and the
 * event each one must read as here.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseMetricLine, parseMetricLines } from '../metrics.js';

interface Case {
  what: string;
  line: string | null;
  event: { step: number; time: number; metrics: Record<string, number> } | null;
}

const cases = JSON.parse(
  readFileSync(new URL('./tests/metric-lines.json', import.meta.url), 'utf8'),
) as Case[];

describe("the Python package's metric lines", () => {
  it('the fixture has the cases', () => {
    expect(cases.length).toBeGreaterThanOrEqual(8);
    expect(cases.filter((c) => c.line === null).map((c) => c.what)).toEqual(['nothing finite: no line']);
  });

  it.each(cases.filter((c) => c.line !== null).map((c) => [c.what, c] as const))('%s', (_what, c) => {
    expect(parseMetricLine(c.line!)).toEqual(c.event);
  });

  it('the whole file of them reads as every event, in order', () => {
    const text = cases.flatMap((c) => (c.line ? [c.line] : [])).join('\n') + '\n';
    expect(parseMetricLines(text)).toEqual(cases.flatMap((c) => (c.event ? [c.event] : [])));
  });
});
