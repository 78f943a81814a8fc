import { describe, expect, it } from 'vitest';
import { backendInfoOf } from '../backends/registry.js';
import { SpecLoader } from '../spec/loader.js';
import type { RunStatusDoc } from '../status/types.js';
import { desiredRun } from './desired.js';
import { planChanges } from './plan-changes.js';
import { recordSubmitted } from './results.js';
import { planRun, type PlanContext } from './run-plan.js';
import { EnvironmentIndex } from '../spec/environments.js';
import { DatasetIndex } from '../spec/datasets.js';

const T0 = Date.parse('2026-11-22T12:00:00Z');
const ctx: Omit<PlanContext, 'specCommit'> = {
  now: T0,
  backends: [backendInfoOf('local', { type: 'local' })],
  codeRefs: new Map(),
  controllerId: 'me',
};
const header = (kind: string, name: string) =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: ${kind}\nmetadata:\n  name: ${name}\nspec:\n`;
const env = (version: number, setup = 'echo hi') =>
  `${header('Environment', 'cuda12')}  version: ${version}\n  setup: ["${setup}"]\n`;
const run = (name: string, environment: string, policy = 'Restart') =>
  `${header('Run', name)}  command: [python, train.py]\n  environment: ${environment}\n  policy: {onSpecChange: ${policy}}\n`;

function objects(files: Record<string, string>) {
  const loader = new SpecLoader();
  for (const [f, text] of Object.entries(files)) loader.loadFile(f, new TextEncoder().encode(text), text);
  const r = loader.result();
  expect(r.diagnostics).toEqual([]);
  return r.objects;
}

/** Each run of `base` running as its first attempt, planned on `base`'s specs. */
function runningOn(base: ReturnType<typeof objects>): Map<string, RunStatusDoc> {
  const envs = new EnvironmentIndex(base);
  const datasets = new DatasetIndex(base);
  const out = new Map<string, RunStatusDoc>();
  for (const o of base.filter((x) => x.kind === 'Run')) {
    const desired = desiredRun(o, envs, datasets);
    const planned = planRun({ name: o.name, desired }, { ...ctx, specCommit: 'a'.repeat(40) });
    out.set(o.name, recordSubmitted(planned.doc!, 1, '42', false, ctx.now).doc);
  }
  return out;
}

function plan(baseFiles: Record<string, string>, headFiles: Record<string, string>) {
  const base = objects(baseFiles);
  const status = runningOn(base);
  return planChanges({
    base: { commit: 'a'.repeat(40), objects: base },
    head: { commit: 'b'.repeat(40), objects: objects(headFiles), errors: [] },
    runStatus: (n) => status.get(n),
    dagStatus: () => undefined,
    ctx,
  }).runs.map((r) => ({ run: r.run, change: r.change, why: r.why?.split(';')[0] }));
}

describe('adv plan: a changed Environment is a change of the runs that use it', () => {
  const runs = {
    'runs/newest.yaml': run('newest', 'cuda12'),
    'runs/pinned.yaml': run('pinned', 'cuda12@1'),
    'runs/refuses.yaml': run('refuses', 'cuda12', 'Reject'),
  };

  it('a new version restarts the runs that take the newest, not those pinned to the old one', () => {
    const base = { 'envs/1.yaml': env(1), ...runs };
    expect(plan(base, { ...base, 'envs/2.yaml': env(2) })).toEqual([
      { run: 'newest', change: 'restart', why: 'Environment cuda12 changed: cuda12@1 → cuda12@2' },
      { run: 'refuses', change: 'reject', why: 'Environment cuda12 changed: cuda12@1 → cuda12@2' },
    ]);
  });

  it('an edit of the version in use restarts its runs, pinned or not', () => {
    const base = { 'envs/1.yaml': env(1), ...runs };
    expect(plan(base, { ...base, 'envs/1.yaml': env(1, 'module load cuda/12.4') })).toEqual([
      { run: 'newest', change: 'restart', why: 'Environment cuda12@1 changed' },
      { run: 'pinned', change: 'restart', why: 'Environment cuda12@1 changed' },
      { run: 'refuses', change: 'reject', why: 'Environment cuda12@1 changed' },
    ]);
  });
});

describe('adv plan: a new version of a dataset is a change of the runs that read it', () => {
  const dataset = (version: number, prefix = `d/v${version}/`) =>
    `${header('Dataset', 'tokens')}  version: ${version}\n  source: {store: {prefix: ${prefix}}}\n`;
  const reader = (name: string, ref: string) =>
    `${header('Run', name)}  command: [python, train.py]\n  inputs: [{dataset: ${ref}, as: train}]\n  policy: {onSpecChange: Restart}\n`;
  const runs = {
    'runs/newest.yaml': reader('newest', 'tokens'),
    'runs/pinned.yaml': reader('pinned', 'tokens@1'),
  };

  it('restarts the runs that take the newest, says which versions, and leaves pinned ones', () => {
    const base = { 'datasets/1.yaml': dataset(1), ...runs };
    expect(plan(base, base)).toEqual([]);
    expect(plan(base, { ...base, 'datasets/2.yaml': dataset(2) })).toEqual([
      { run: 'newest', change: 'restart', why: 'Dataset tokens: tokens@1 → tokens@2' },
    ]);
    expect(plan(base, { ...base, 'datasets/1.yaml': dataset(1, 'd/moved/') })).toEqual([
      { run: 'newest', change: 'restart', why: 'Dataset tokens@1 changed' },
      { run: 'pinned', change: 'restart', why: 'Dataset tokens@1 changed' },
    ]);
  });
});
