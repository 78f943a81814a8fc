import { describe, expect, it } from 'vitest';
import { backendInfoOf } from '../backends/registry.js';
import { SpecLoader } from '../spec/loader.js';
import type { RunStatusDoc, SweepStatusDoc } from '../status/types.js';
import { planChanges } from './plan-changes.js';
import { recordSubmitted } from './results.js';
import { planRun, type PlanContext } from './run-plan.js';
import { desiredSweep } from './desired.js';
import { planSweep } from './sweep-plan.js';

const T0 = Date.parse('2026-11-27T12:00:00Z');
const ctx: Omit<PlanContext, 'specCommit'> = {
  now: T0,
  backends: [backendInfoOf('local', { type: 'local' })],
  codeRefs: new Map(),
  controllerId: 'me',
};
const LOCAL = `apiVersion: adventuretime.dev/v1alpha1\nkind: Backend\nmetadata:\n  name: local\nspec:\n  type: local\n`;
const sweep = (grid: string) =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: Sweep\nmetadata:\n  name: s\nspec:\n  template:\n    command: [train, '{{params.lr}}']\n    backendSelector: {order: [local]}\n  parameters:\n    grid: ${grid}\n`;

function objects(files: Record<string, string>) {
  const loader = new SpecLoader();
  for (const [f, text] of Object.entries(files)) loader.loadFile(f, new TextEncoder().encode(text), text);
  const r = loader.result();
  expect(r.diagnostics).toEqual([]);
  return r.objects;
}

describe('planChanges for a Sweep', () => {
  it('says which points are added and cancelled, and which runs start and stop', () => {
    const base = objects({ 'b.yaml': LOCAL, 's.yaml': sweep('{lr: [1, 2, 3]}') });
    const head = objects({ 'b.yaml': LOCAL, 's.yaml': sweep('{lr: [2, 3, 4, 5]}') });
    // BASE as the controller has it: every point's run is running its first attempt.
    const planned = planSweep(
      { name: 's', desired: desiredSweep(base.find((o) => o.kind === 'Sweep')!), child: () => undefined },
      { now: T0, specCommit: 'a'.repeat(40) },
    );
    const runs = new Map<string, RunStatusDoc>();
    for (const child of planned.children) {
      const p = planRun({ name: child.name, desired: child }, { ...ctx, specCommit: 'a'.repeat(40) });
      runs.set(child.name, recordSubmitted(p.doc!, 1, '42', false, T0).doc);
    }
    const status = new Map<string, SweepStatusDoc>([['s', planned.doc!]]);
    const report = planChanges({
      base: { commit: 'a'.repeat(40), objects: base },
      head: { commit: 'b'.repeat(40), objects: head, errors: [] },
      runStatus: (n) => runs.get(n),
      dagStatus: () => undefined,
      sweepStatus: (n) => status.get(n),
      ctx,
    });
    expect(report.sweeps).toHaveLength(1);
    const [s] = report.sweeps!;
    const [one] = planned.children.filter((c) => c.spec.command![1] === '1').map((c) => c.name);
    expect(s).toMatchObject({ sweep: 's', change: 'changed', cancelled: [one] });
    expect(s!.added).toHaveLength(2);
    const byRun = new Map(report.runs.map((r) => [r.run, r]));
    expect(byRun.get(one!)).toMatchObject({ change: 'cancel', sweep: 's' });
    for (const r of s!.added)
      expect(byRun.get(r)).toMatchObject({ change: 'start', sweep: 's', backend: 'local' });
    // The points in both are the same runs, unchanged: nothing to say about them.
    expect(report.runs).toHaveLength(3);
  });
});
