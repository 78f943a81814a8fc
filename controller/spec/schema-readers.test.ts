/**
 * No field that is accepted and then ignored: every property name of every kind's schema (every
 * backend type's settings included) is read somewhere in controller/, cli/ or runtime/, outside
 * the schema declarations and the tests — as `.name`, `?.name`, `['name']` or in a destructuring.
 * A name only read generically (walked, copied, hashed) is allowed below, with the reason.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { KINDS, SCHEMAS } from './schema.js';

const ROOT = join(import.meta.dirname, '..', '..');

/** Names read without a property access of their own, and why that is enough. */
const READ_GENERICALLY: Record<string, string> = {
  description: 'for people reading the spec (an Environment, a DAG output): documentation only',
  accumulateSteps: 'the parallelism plan reaches the workload whole, as ADV_PARALLELISM (JSON)',
  syncMetrics: 'the parallelism plan reaches the workload whole, as ADV_PARALLELISM (JSON)',
  preferReduceScatter: 'the parallelism plan reaches the workload whole, as ADV_PARALLELISM (JSON)',
  microbatchSize: 'the parallelism plan reaches the workload whole, as ADV_PARALLELISM (JSON)',
  checkpointRatio: 'the parallelism plan reaches the workload whole, as ADV_PARALLELISM (JSON)',
  effect: 'volcano.tolerations are copied whole into the pod spec',
  tolerationSeconds: 'volcano.tolerations are copied whole into the pod spec',
};

/**
 * Fields accepted and not read yet, each to be made real or removed: the list only shrinks.
 * (issue 29: `tpuType` is the solver's to read; the others are backend settings to wire or drop.)
 */
const NOT_READ_YET: Record<string, string> = {
  gpusPerNode: 'slurm partitions[]: documented capacity the solver does not use yet',
  maxTime: 'slurm partitions[]: the partition limit is not checked against policy.maxHours yet',
  accounting: 'slurm: sacct is not used yet (scontrol is)',
};

interface SchemaNode {
  properties?: Record<string, SchemaNode>;
  patternProperties?: Record<string, SchemaNode>;
  items?: SchemaNode;
  anyOf?: SchemaNode[];
}

/** Every property name of a schema, with one path where it is declared. */
function propertyNames(node: SchemaNode, path: string, out: Map<string, string>): void {
  for (const [k, child] of Object.entries(node.properties ?? {})) {
    if (!out.has(k)) out.set(k, `${path}.${k}`);
    propertyNames(child, `${path}.${k}`, out);
  }
  for (const child of Object.values(node.patternProperties ?? {})) propertyNames(child, `${path}.<key>`, out);
  if (node.items) propertyNames(node.items, `${path}[]`, out);
  for (const child of node.anyOf ?? []) propertyNames(child, path, out);
}

/** The source files that may read a field: not tests, not the schema declarations. */
function sources(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) sources(p, out);
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !/spec\/schema(-kit)?\.ts$/.test(p))
      out.push(p);
  }
  return out;
}

const isRead = (name: string, text: string): boolean =>
  new RegExp(`\\.${name}\\b|\\[['"]${name}['"]\\]|\\{[^{}=;]*\\b${name}\\b[^{}=;]*\\}\\s*=[^=>]`).test(text);

describe('schema fields have readers', () => {
  const text = ['controller', 'cli', 'runtime']
    .flatMap((d) => sources(join(ROOT, d)))
    .map((f) => readFileSync(f, 'utf8'))
    .join('\n');

  it('reads every field of every kind somewhere outside the schema (or says why it need not)', () => {
    const names = new Map<string, string>();
    for (const kind of KINDS) propertyNames(SCHEMAS[kind] as SchemaNode, kind, names);
    const unread = [...names]
      .filter(([name]) => !(name in READ_GENERICALLY) && !(name in NOT_READ_YET) && !isRead(name, text))
      .map(([, path]) => path);
    expect(unread).toEqual([]);
  });

  it('lists as not read yet only fields that nothing reads (a field read since leaves the list)', () => {
    expect(Object.keys(NOT_READ_YET).filter((name) => isRead(name, text))).toEqual([]);
  });

  it('tells a read from a mention', () => {
    expect(isRead('hotCache', 'const x = spec.hotCache?.path;')).toBe(true);
    expect(isRead('hotCache', "spec['hotCache']")).toBe(true);
    expect(isRead('hotCache', 'const { hotCache, s3 } = spec;')).toBe(true);
    expect(isRead('hotCache', 'hotCache: optional(strict({ path }))')).toBe(false);
    expect(isRead('hotCache', '// hotCache is not read')).toBe(false);
  });
});
