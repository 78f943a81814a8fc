import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { serializeStatus } from '../status/writer.js';
import type { SweepSpec } from '../spec/schema.js';
import { expandPoints, pointRunName, pointRunSpec } from '../spec/sweep-params.js';
import type { Phase, RunStatusDoc, SweepStatusDoc } from '../status/types.js';
import { generationOf } from './run-plan.js';
import { planSweep, SWEEP_LABEL, SweepPlanCaches, type DesiredSweep } from './sweep-plan.js';

const T0 = Date.parse('2026-11-27T12:00:00Z');
const ctx = (caches = new SweepPlanCaches()) => ({ now: T0, specCommit: 'c'.repeat(40), caches });
const TEMPLATE = {
  command: 'python train.py --lr {{params.lr}} --opt {{ params.opt }}',
  env: { TAG: 'lr={{params.lr}}' },
};
const spec = (
  grid: Record<string, (string | number | boolean)[]>,
  more: Partial<SweepSpec> = {},
): SweepSpec => ({
  template: TEMPLATE,
  parameters: { grid },
  ...more,
});
const sweep = (s: SweepSpec, labels?: Record<string, string>): DesiredSweep => ({
  name: 's',
  spec: s,
  generation: generationOf(s),
  file: 'sweeps/s.yaml',
  ...(labels ? { labels } : {}),
});
const run = (name: string, phase: Phase): RunStatusDoc => ({
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'RunStatus',
  metadata: { name },
  status: {
    phase,
    conditions: [],
    attempts: [{ n: 1, backend: 'local', jobName: `adv-${name}-1`, phase, specCommit: 'c' }],
  },
});
const GRID_3x2 = { lr: [0.1, 0.01, 0.001], opt: ['sgd', 'adam'] };

describe('expandPoints', () => {
  it('a grid is its cartesian product, the last name varying fastest', () => {
    expect(expandPoints(spec({ a: [1, 2], b: ['x', 'y'] }))).toEqual([
      { a: 1, b: 'x' },
      { a: 1, b: 'y' },
      { a: 2, b: 'x' },
      { a: 2, b: 'y' },
    ]);
  });
  it('a list alone is its points; with a grid each listed point meets every combination', () => {
    const points = [
      { model: 'small', batch: 64 },
      { model: 'large', batch: 8 },
    ];
    expect(expandPoints({ template: TEMPLATE, parameters: { points } })).toEqual(points);
    expect(expandPoints({ template: TEMPLATE, parameters: { points, grid: { lr: [1, 2] } } })).toEqual([
      { model: 'small', batch: 64, lr: 1 },
      { model: 'small', batch: 64, lr: 2 },
      { model: 'large', batch: 8, lr: 1 },
      { model: 'large', batch: 8, lr: 2 },
    ]);
  });
});

describe('pointRunName', () => {
  it('is stable, independent of key order and of the other points, DNS-1123 and short', () => {
    const a = pointRunName('s', { lr: 0.1, opt: 'sgd' });
    expect(a).toBe(pointRunName('s', { opt: 'sgd', lr: 0.1 }));
    expect(a).toMatch(/^s-[0-9a-f]{8}$/);
    expect(pointRunName('s', { lr: 0.1, opt: 'adam' })).not.toBe(a);
    // A string and a number are different values, so different points.
    expect(pointRunName('s', { lr: '0.1', opt: 'sgd' })).not.toBe(a);
    expect(pointRunName('x'.repeat(54), { lr: 1 }).length).toBe(63);
  });
});

describe('pointRunSpec', () => {
  it('substitutes params (shell-quoted in a string command), and adds ADV_PARAMS and ADV_PARAM_<name>', () => {
    const s = pointRunSpec(TEMPLATE, { lr: 0.001, opt: "it's" });
    expect(s.command).toBe(`python train.py --lr 0.001 --opt 'it'\\''s'`);
    expect(s.env).toEqual({
      TAG: 'lr=0.001',
      ADV_PARAMS: `{"lr":0.001,"opt":"it's"}`,
      ADV_PARAM_lr: '0.001',
      ADV_PARAM_opt: "it's",
    });
    expect(
      pointRunSpec({ command: 'x', setup: ['pip install opt=={{params.opt}}'] }, { opt: 'a b' }).setup,
    ).toEqual(["pip install opt=='a b'"]);
    expect(pointRunSpec({ command: ['echo', '{{params.opt}}'] }, { opt: 'a b' }).command).toEqual([
      'echo',
      'a b',
    ]);
  });
});

describe('planSweep', () => {
  it('creates one child per grid point, labelled, owned and annotated', () => {
    const p = planSweep(
      { name: 's', desired: sweep(spec(GRID_3x2), { team: 'a' }), child: () => undefined },
      ctx(),
    );
    expect(p.children).toHaveLength(6);
    expect(new Set(p.children.map((c) => c.name)).size).toBe(6);
    const c = p.children[0]!;
    expect(c.owner).toBe('s');
    expect(c.labels).toEqual({ team: 'a', [SWEEP_LABEL]: 's' });
    expect(c.annotations).toEqual({
      'adventuretime.dev/param.lr': '0.1',
      'adventuretime.dev/param.opt': 'sgd',
    });
    expect(c.spec.command).toBe('python train.py --lr 0.1 --opt sgd');
    expect(p.doc!.status.phase).toBe('Pending');
    expect(p.doc!.status.counts).toEqual({ Pending: 6 });
    expect(Object.keys(p.doc!.status.points)).toEqual(p.children.map((x) => x.name));
    expect(p.summary).toBe('sweep/s: Pending (0/6 points succeeded)');
  });

  it('an edit adds only the new points; the others keep their name and generation', () => {
    const first = planSweep({ name: 's', desired: sweep(spec(GRID_3x2)), child: () => undefined }, ctx());
    const children = Object.fromEntries(first.children.map((c) => [c.name, run(c.name, 'Succeeded')]));
    const grid3x3 = { ...GRID_3x2, opt: ['sgd', 'adam', 'lion'] };
    const second = planSweep(
      { name: 's', desired: sweep(spec(grid3x3)), current: first.doc!, child: (n) => children[n] },
      ctx(),
    );
    expect(second.children).toHaveLength(9);
    const before = new Map(first.children.map((c) => [c.name, c.generation]));
    const kept = second.children.filter((c) => before.has(c.name));
    expect(kept).toHaveLength(6);
    for (const c of kept) expect(c.generation).toBe(before.get(c.name));
    const added = second.children.filter((c) => !before.has(c.name));
    expect(added.map((c) => c.annotations!['adventuretime.dev/param.opt'])).toEqual(['lion', 'lion', 'lion']);
    expect(second.summary).toMatch(/^sweep\/s: Running \(6\/9 points succeeded\); 3 points added; /);
  });

  it('a removed value drops its points (the Run planner cancels them) and says so', () => {
    const first = planSweep({ name: 's', desired: sweep(spec(GRID_3x2)), child: () => undefined }, ctx());
    const children = Object.fromEntries(first.children.map((c) => [c.name, run(c.name, 'Running')]));
    const second = planSweep(
      {
        name: 's',
        desired: sweep(spec({ ...GRID_3x2, lr: [0.1, 0.01] })),
        current: first.doc!,
        child: (n) => children[n],
      },
      ctx(),
    );
    expect(second.children).toHaveLength(4);
    expect(second.children.every((c) => c.annotations!['adventuretime.dev/param.lr'] !== '0.001')).toBe(true);
    expect(Object.keys(second.doc!.status.points)).toHaveLength(4);
    expect(second.summary).toContain('2 points removed');
  });

  it('maxConcurrent: at most N unfinished children; the next is created, in order, when one finishes', () => {
    const s = sweep(spec(GRID_3x2, { maxConcurrent: 2 }));
    const caches = new SweepPlanCaches();
    const kids: Record<string, RunStatusDoc> = {};
    const p1 = planSweep({ name: 's', desired: s, child: (n) => kids[n] }, ctx(caches));
    expect(p1.children).toHaveLength(2);
    const waiting = Object.values(p1.doc!.status.points).filter((x) => x.phase === 'Waiting');
    expect(waiting).toHaveLength(4);
    expect(waiting[0]!.reason).toBe('MaxConcurrent');
    for (const c of p1.children) kids[c.name] = run(c.name, 'Running');
    // Nothing finished: the same two, and nothing changed.
    const p2 = planSweep({ name: 's', desired: s, current: p1.doc!, child: (n) => kids[n] }, ctx(caches));
    expect(p2.children.map((c) => c.name)).toEqual(p1.children.map((c) => c.name));
    expect(p2.doc!.status.counts).toEqual({ Running: 2, Waiting: 4 });
    // One finishes (even by failing): exactly one more, the next in order.
    kids[p1.children[0]!.name] = run(p1.children[0]!.name, 'Failed');
    const p3 = planSweep({ name: 's', desired: s, current: p2.doc!, child: (n) => kids[n] }, ctx(caches));
    expect(p3.children).toHaveLength(3);
    const order = Object.keys(p3.doc!.status.points);
    expect(p3.children.map((c) => c.name)).toEqual(order.slice(0, 3));
    // A child whose status is not written yet still counts.
    const p4 = planSweep({ name: 's', desired: s, current: p3.doc!, child: (n) => kids[n] }, ctx(caches));
    expect(p4.children).toHaveLength(3);
  });

  it('the same child objects come back while nothing changes (the controller compares by identity)', () => {
    const caches = new SweepPlanCaches();
    const s = sweep(spec(GRID_3x2));
    const a = planSweep({ name: 's', desired: s, child: () => undefined }, ctx(caches));
    const b = planSweep({ name: 's', desired: s, current: a.doc!, child: () => undefined }, ctx(caches));
    expect(b.doc).toBe(a.doc);
    expect(b.children.every((c, i) => c === a.children[i])).toBe(true);
  });

  it('phases: all succeeded; one failed and the rest finished; suspended', () => {
    const s = sweep(spec({ lr: [1, 2] }));
    const names = expandPoints(s.spec).map((p) => pointRunName('s', p));
    const with_ = (a: Phase, b: Phase) => {
      const kids = { [names[0]!]: run(names[0]!, a), [names[1]!]: run(names[1]!, b) };
      const current = planSweep({ name: 's', desired: s, child: () => undefined }, ctx()).doc!;
      return planSweep({ name: 's', desired: s, current, child: (n) => kids[n] }, ctx()).doc!.status;
    };
    expect(with_('Succeeded', 'Succeeded').phase).toBe('Succeeded');
    expect(with_('Failed', 'Succeeded')).toMatchObject({ phase: 'Failed', reason: 'PointsFailed' });
    expect(with_('Failed', 'Running').phase).toBe('Running');
    const held = sweep(spec({ lr: [1, 2] }, { suspend: true }));
    const p = planSweep({ name: 's', desired: held, child: () => undefined }, ctx());
    expect(p.children).toHaveLength(0);
    expect(p.doc!.status).toMatchObject({ phase: 'Cancelled', reason: 'Suspended' });
  });

  it('an invalid edit keeps the last valid spec going and says where the error is', () => {
    const first = planSweep({ name: 's', desired: sweep(spec(GRID_3x2)), child: () => undefined }, ctx());
    const invalid = { name: 's', file: 'sweeps/s.yaml', line: 9, column: 5, message: 'bad' };
    const p = planSweep({ name: 's', invalid, current: first.doc!, child: () => undefined }, ctx());
    expect(p.children.map((c) => c.name)).toEqual(first.children.map((c) => c.name));
    const valid = p.doc!.status.conditions.find((c) => c.type === 'Valid')!;
    expect(valid).toMatchObject({ status: 'False', message: 'sweeps/s.yaml:9:5: bad' });
    const never = planSweep({ name: 'n', invalid: { ...invalid, name: 'n' }, child: () => undefined }, ctx());
    expect(never.children).toEqual([]);
    expect(never.summary).toBe('sweep/n: spec invalid (sweeps/s.yaml:9)');
  });

  it('a removed sweep has no children and is Cancelled if it was not finished', () => {
    const first = planSweep({ name: 's', desired: sweep(spec(GRID_3x2)), child: () => undefined }, ctx());
    const p = planSweep({ name: 's', current: first.doc as SweepStatusDoc, child: () => undefined }, ctx());
    expect(p.children).toEqual([]);
    expect(p.doc!.status).toMatchObject({ phase: 'Cancelled', reason: 'SpecDeleted' });
    // A sweep nobody asks for and nobody recorded gets no status file.
    expect(planSweep({ name: 'x', child: () => undefined }, ctx())).toEqual({ doc: undefined, children: [] });
  });
});

describe('a sweep status file', () => {
  it('has one point a line (a 10,000-point sweep is rewritten whenever a point moves) and reads back equal', () => {
    const p = planSweep({ name: 's', desired: sweep(spec(GRID_3x2)), child: () => undefined }, ctx());
    const text = serializeStatus(p.doc!);
    const lines = text.split('\n').filter((l) => /^ {4}"s-[0-9a-f]{8}": \{.*\}$/.test(l));
    expect(lines).toHaveLength(6);
    expect(parse(text)).toEqual(JSON.parse(JSON.stringify(p.doc)));
  });
});
