/**
 * The DAG planner's steps, each on its own, and the caches it keeps between passes.
 */
import { describe, expect, it } from 'vitest';
import type { DagNode, DagSpec } from '../spec/schema.js';
import type { DagNodeStatus, DagStatusDoc, Phase, RunStatusDoc } from '../status/types.js';
import { DagPlanCaches, planDag, type DagPlanContext, type DesiredDag } from './dag-plan.js';
import {
  adoptSpec,
  childNode,
  copyStatus,
  DAG_STEPS,
  dagDeleted,
  dagPhase,
  finishWork,
  keepLastValid,
  neverValid,
  planNodes,
  startWork,
  unstartedNode,
  type DagWork,
} from './dag-plan-steps.js';
import { generationOf } from './run-plan.js';

const T0 = Date.parse('2026-11-22T12:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
const CTX: DagPlanContext = { now: T0, specCommit: 'c'.repeat(40), storeUrl: 'file:///store' };
const node = (id: string, over: Partial<DagNode> = {}): DagNode => ({ id, run: { command: [id] }, ...over });
const dag = (nodes: DagNode[], over: Partial<DagSpec> = {}): DesiredDag => {
  const spec: DagSpec = { nodes, ...over };
  return { name: 'p', spec, generation: generationOf(spec), file: 'dags/p.yaml' };
};
const runDoc = (
  name: string,
  phase: Phase,
  attempts: RunStatusDoc['status']['attempts'] = [],
): RunStatusDoc => ({
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'RunStatus',
  metadata: { name },
  status: { phase, conditions: [], attempts },
});
const invalid = { name: 'p', file: 'dags/p.yaml', line: 4, column: 2, message: 'needs form a cycle' };

/** The working state of a pass, as planDag starts it. */
function work(
  d: DesiredDag,
  opts: {
    current?: DagStatusDoc;
    children?: Record<string, RunStatusDoc>;
    ready?: (key: string) => boolean | undefined;
    ctx?: DagPlanContext;
    caches?: DagPlanCaches;
  } = {},
): DagWork {
  const input = {
    name: 'p',
    desired: d,
    ...(opts.current ? { current: opts.current } : {}),
    child: (n: string) => opts.children?.[n],
    outputReady: opts.ready ?? (() => true),
  };
  const doc = copyStatus(opts.current, 'p', iso(T0));
  return startWork(input, opts.ctx ?? CTX, opts.caches ?? new DagPlanCaches(), doc, d);
}
/** The state after a whole pass: the next pass's `current`. */
const planned = (d: DesiredDag, children: Record<string, RunStatusDoc> = {}) => {
  const w = work(d, { children });
  for (const step of DAG_STEPS) step(w);
  return w.doc;
};

describe('the pipeline', () => {
  it('takes the steps in the documented order', () => {
    expect(DAG_STEPS.map((s) => s.name)).toEqual(['adoptSpec', 'planNodes', 'dagPhase']);
  });
});

describe('before the pipeline', () => {
  it.each([
    ['never valid: nothing to act on', undefined, undefined, undefined],
    ['valid before: the last valid spec goes on', planned(dag([node('a')])), undefined, 'dags/p.yaml'],
    ['both given: the desired one', undefined, dag([node('b')]), 'dags/p.yaml'],
  ])('keepLastValid, %s', (_t, current, desired, file) => {
    const doc = copyStatus(current, 'p', iso(T0));
    const acted = keepLastValid('p', doc, invalid, desired, iso(T0));
    expect(acted?.file).toBe(file);
    if (current)
      expect(acted).toMatchObject({
        spec: current.appliedSpec,
        generation: current.status.observedGeneration,
      });
    expect(doc.status.conditions.find((c) => c.type === 'Valid')).toMatchObject({
      status: 'False',
      message: 'dags/p.yaml:4:2: needs form a cycle',
    });
  });

  it('neverValid: says the spec is invalid, creates nothing', () => {
    const p = neverValid('p', undefined, copyStatus(undefined, 'p', iso(T0)), invalid);
    expect(p).toMatchObject({
      summary: 'dag/p: spec invalid (dags/p.yaml:4)',
      children: [],
      unknownOutputs: [],
    });
    expect(p.doc!.status.reason).toBe('SpecInvalid');
  });

  it.each([
    ['a live DAG is cancelled', 'Running', 'Cancelled', false],
    ['a finished DAG stays as it is: nothing to write', 'Succeeded', 'Succeeded', true],
  ] as const)('dagDeleted: %s', (_t, phase, after, same) => {
    const current = planned(dag([node('a')]));
    current.status.phase = phase;
    const p = dagDeleted('p', current, copyStatus(current, 'p', iso(T0)));
    expect(p.doc!.status.phase).toBe(after);
    expect(p.doc === current).toBe(same);
    expect(p.children).toEqual([]);
  });
});

describe('adoptSpec', () => {
  it('a valid spec is the one acted on; labels follow it', () => {
    const d = { ...dag([node('a')]), labels: { team: 'x' } };
    const w = work(d);
    adoptSpec(w);
    expect(w.doc.status).toMatchObject({
      observedGeneration: d.generation,
      specCommit: 'c'.repeat(40),
      specFile: 'dags/p.yaml',
    });
    expect(w.doc.appliedSpec).toBe(d.spec);
    expect(w.doc.status.conditions.find((c) => c.type === 'Valid')?.status).toBe('True');
    expect(w.doc.metadata.labels).toEqual({ team: 'x' });
  });

  it('while the desired spec is invalid, the last valid one is not re-adopted', () => {
    const current = planned(dag([node('a')]));
    const last = keepLastValid('p', copyStatus(current, 'p', iso(T0)), invalid, undefined, iso(T0))!;
    const w = startWork(
      { name: 'p', invalid, current, child: () => undefined, outputReady: () => true },
      { ...CTX, specCommit: 'e'.repeat(40) },
      new DagPlanCaches(),
      copyStatus(current, 'p', iso(T0)),
      last,
    );
    adoptSpec(w);
    expect(w.doc.status.specCommit).toBe('c'.repeat(40));
  });
});

describe('unstartedNode', () => {
  const a = node('a', { outputs: { o: {} } });
  const b = (over: Partial<DagNode> = {}) => node('b', { needs: ['a'], ...over });
  const reads = { inputs: { IN: 'a.outputs.o' } };
  interface Row {
    title: string;
    a: DagNodeStatus['phase'];
    b?: Partial<DagNode>;
    spec?: Partial<DagSpec>;
    failedSoFar?: boolean;
    ready?: boolean;
    storeUrl?: string;
    expected: Partial<DagNodeStatus>;
    create?: boolean;
    unknown?: string[];
  }
  const rows: Row[] = [
    {
      title: 'a need failed: skipped',
      a: 'Failed',
      expected: { phase: 'Skipped', reason: 'UpstreamFailed', message: 'a Failed' },
    },
    {
      title: 'a need was skipped: skipped too',
      a: 'Skipped',
      expected: { phase: 'Skipped', reason: 'UpstreamFailed', message: 'a Skipped' },
    },
    {
      title: 'failFast, after a failure elsewhere: skipped',
      a: 'Succeeded',
      spec: { failFast: true },
      failedSoFar: true,
      expected: { phase: 'Skipped', reason: 'FailFast' },
    },
    {
      title: 'a need still running: waits, saying for what',
      a: 'Running',
      expected: { phase: 'Waiting', reason: 'WaitingForNeeds', message: 'waiting for a (Running)' },
    },
    {
      title: 'the DAG is suspended: waits',
      a: 'Succeeded',
      spec: { suspend: true },
      expected: { phase: 'Waiting', reason: 'Suspended' },
    },
    {
      title: 'its inputs are complete: created',
      a: 'Succeeded',
      b: reads,
      ready: true,
      expected: { phase: 'Pending', reason: 'Created' },
      create: true,
    },
    {
      title: 'an input not known yet: waits, and asks',
      a: 'Succeeded',
      b: reads,
      expected: {
        phase: 'Waiting',
        reason: 'WaitingForOutputs',
        message: 'waiting for a.outputs.o (no manifest yet)',
      },
      unknown: ['p.a/o'],
    },
    {
      title: 'an input without a manifest: waits',
      a: 'Succeeded',
      b: reads,
      ready: false,
      expected: { phase: 'Waiting', reason: 'WaitingForOutputs' },
    },
    {
      title: 'inputs, but no Storage to pass them through',
      a: 'Succeeded',
      b: reads,
      ready: true,
      storeUrl: '',
      expected: {
        phase: 'Waiting',
        reason: 'NoStorage',
        message: 'a.outputs.o cannot be passed on: the specs repo has no Storage',
      },
    },
  ];
  it.each(rows)('$title', (row) => {
    const d = dag([a, b(row.b)], row.spec);
    const { storeUrl: _, ...noStore } = CTX;
    const w = work(d, { ready: () => row.ready, ctx: row.storeUrl === '' ? noStore : CTX });
    w.nodes.a = { phase: row.a, run: 'p.a' };
    w.failedSoFar = row.failedSoFar ?? false;
    const { ns, create } = unstartedNode(w, d.spec.nodes[1]!, 'p.b');
    expect(ns).toMatchObject({ run: 'p.b', ...row.expected });
    expect(create).toBe(row.create ?? false);
    expect(w.unknownOutputs).toEqual(row.unknown ?? []);
  });
});

describe('childNode', () => {
  it.each([
    ['running: when it started, no end yet', 'Running', undefined],
    ['finished: its end too', 'Succeeded', iso(T0)],
  ] as const)('%s', (_t, phase, finishedAt) => {
    const attempts = [
      {
        n: 1,
        backend: 'l',
        jobName: 'j1',
        phase,
        specCommit: 'c',
        startedAt: iso(T0 - 2000),
        finishedAt: iso(T0 - 1000),
      },
      {
        n: 2,
        backend: 'l',
        jobName: 'j2',
        phase,
        specCommit: 'c',
        startedAt: iso(T0 - 500),
        finishedAt: iso(T0),
      },
    ];
    expect(childNode('p.a', runDoc('p.a', phase, attempts))).toEqual({
      phase,
      run: 'p.a',
      attempts: 2,
      startedAt: iso(T0 - 2000),
      ...(finishedAt ? { finishedAt } : {}),
    });
  });
});

describe('planNodes', () => {
  it('keeps a node that did not move as the same object, with its `since`', () => {
    const d = dag([node('a'), node('b', { needs: ['a'] })]);
    const current = planned(d);
    const w = work(d, { current, ctx: { ...CTX, now: T0 + 60_000 } });
    planNodes(w);
    expect(w.doc.status.nodes.a).toBe(current.status.nodes.a);
    expect(w.nodesChanged).toBe(false);
    expect(w.children.map((c) => c.name)).toEqual(['p.a']);
  });

  it('a node that moved gets a new `since`; a node removed counts as a change', () => {
    const d = dag([node('a'), node('b', { needs: ['a'] })]);
    const current = planned(d);
    const later = { ...CTX, now: T0 + 60_000 };
    const moved = work(d, { current, children: { 'p.a': runDoc('p.a', 'Running') }, ctx: later });
    planNodes(moved);
    expect(moved.doc.status.nodes.a!.since).toBe(iso(T0 + 60_000));
    expect(moved.nodesChanged).toBe(true);
    const fewer = work(dag([node('a')]), { current, ctx: later });
    planNodes(fewer);
    expect(fewer.nodesChanged).toBe(true);
  });

  it('failFast: a live child is suspended once another node failed', () => {
    const d = dag([node('a'), node('b')], { failFast: true });
    const w = work(d, { children: { 'p.a': runDoc('p.a', 'Failed'), 'p.b': runDoc('p.b', 'Running') } });
    planNodes(w);
    expect(w.children.map((c) => [c.name, c.spec.suspend])).toEqual([
      ['p.a', undefined],
      ['p.b', true],
    ]);
  });
});

describe('dagPhase', () => {
  const n = (phase: DagNodeStatus['phase'], reason?: string): DagNodeStatus => ({
    phase,
    run: 'p.x',
    ...(reason ? { reason } : {}),
  });
  it.each([
    [
      'every node succeeded',
      [n('Succeeded'), n('Succeeded')],
      {},
      'Succeeded',
      'Completed',
      '2/2 nodes succeeded',
    ],
    [
      'suspended',
      [n('Running')],
      { suspend: true },
      'Cancelled',
      'Suspended',
      'spec.suspend is true; 0/1 nodes succeeded',
    ],
    [
      'failed, and nothing left to run',
      [n('Failed'), n('Skipped'), n('Succeeded')],
      {},
      'Failed',
      'NodesFailed',
      '1 failed or cancelled; 1/3 nodes succeeded',
    ],
    [
      'failed, the rest waiting on storage that is not there',
      [n('Cancelled'), n('Waiting', 'NoStorage')],
      {},
      'Failed',
      'NodesFailed',
      '1 failed or cancelled; 0/2 nodes succeeded',
    ],
    [
      'failed, another still running',
      [n('Failed'), n('Running')],
      {},
      'Running',
      'Running',
      '0/2 nodes succeeded',
    ],
    [
      'some succeeded, the rest waiting',
      [n('Succeeded'), n('Waiting')],
      {},
      'Running',
      'Running',
      '1/2 nodes succeeded',
    ],
    ['nothing started', [n('Waiting')], {}, 'Pending', 'Pending', '0/1 nodes succeeded'],
  ] as const)('%s → %s', (_t, nodes, spec, phase, reason, message) => {
    const w = work(dag([node('x')], spec));
    w.doc.status.nodes = Object.fromEntries(nodes.map((x, i) => [`n${i}`, x]));
    dagPhase(w);
    expect(w.doc.status).toMatchObject({ phase, reason, message });
    expect(Object.values(w.doc.status.counts!).reduce((s, c) => s + c, 0)).toBe(nodes.length);
  });
});

describe('finishWork', () => {
  it('hands back the status it was given when nothing moved', () => {
    const d = dag([node('a')]);
    const current = planned(d);
    const w = work(d, { current, ctx: { ...CTX, now: T0 + 1000 } });
    for (const step of DAG_STEPS) step(w);
    expect(finishWork(w).doc).toBe(current);
  });

  it('names the nodes that moved, ten at most', () => {
    const d = dag(Array.from({ length: 12 }, (_, i) => node(`n${i}`)));
    const w = work(d);
    for (const step of DAG_STEPS) step(w);
    expect(finishWork(w).summary).toBe(
      'dag/p: Running (0/12 nodes succeeded); n0 Pending, n1 Pending, n2 Pending, n3 Pending, n4 Pending, n5 Pending, n6 Pending, n7 Pending, n8 Pending, n9 Pending, and 2 more',
    );
  });
});

describe('DagPlanCaches', () => {
  const d = dag([node('b', { needs: ['a'] }), node('a')]);

  it('orders nodes after what they need', () => {
    expect(new DagPlanCaches().topoOrder(d.generation, d.spec.nodes)).toEqual(['a', 'b']);
  });

  it('builds a child once; the stop flag makes another, suspended', () => {
    const caches = new DagPlanCaches();
    const a = d.spec.nodes[1]!;
    const first = caches.childRun(d, a, 'file:///store', false);
    expect(caches.childRun(d, a, 'file:///store', false)).toBe(first);
    const stopped = caches.childRun(d, a, 'file:///store', true);
    expect(stopped).not.toBe(first);
    expect(stopped.spec.suspend).toBe(true);
  });

  it('is bounded: the least recently used entries go first', () => {
    const caches = new DagPlanCaches({ maxChildRuns: 2, maxTopoOrders: 1 });
    const [b, a] = d.spec.nodes as [DagNode, DagNode];
    const ca = caches.childRun(d, a, undefined, false);
    const cb = caches.childRun(d, b, undefined, false);
    caches.childRun(d, a, undefined, false); // a is now the most recent
    caches.childRun(d, a, undefined, true); // over the bound: b goes
    expect(caches.size.childRuns).toBe(2);
    expect(caches.childRun(d, a, undefined, false)).toBe(ca);
    expect(caches.childRun(d, b, undefined, false)).not.toBe(cb);
    const other = dag([node('z')]);
    const order = caches.topoOrder(d.generation, d.spec.nodes);
    caches.topoOrder(other.generation, other.spec.nodes);
    expect(caches.size.topoOrders).toBe(1);
    expect(caches.topoOrder(d.generation, d.spec.nodes)).not.toBe(order);
  });

  it('passed in the context, planDag hands back the same child for an unchanged node', () => {
    const input = { name: 'p', desired: d, child: () => undefined, outputReady: () => true };
    const caches = new DagPlanCaches();
    const once = planDag(input, { ...CTX, caches }).children[0];
    expect(planDag(input, { ...CTX, caches }).children[0]).toBe(once);
    // Without one, a fresh cache per call: the same child, rebuilt.
    const fresh = planDag(input, CTX).children[0];
    expect(fresh).toEqual(once);
    expect(fresh).not.toBe(planDag(input, CTX).children[0]);
  });
});
