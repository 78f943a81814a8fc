/**
 * Sweeps end to end on the embedded default (local backend, file store): a 3 × 2 grid runs 6
 * points, an edit to 3 × 3 adds exactly 3 (the 6 keep their names and are not restarted) and
 * `adv plan` says so first; a removed value cancels its points; `maxConcurrent` holds points back;
 * the CLI lists sweeps and ranks points by a metric; a bad Sweep says file:line and blocks nothing.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { DirectorySource, loadSpecs, type Sweep } from '../controller/index.js';
import { overviewView } from '../controller/dashboard/pages.js';
import { expandPoints } from '../controller/spec/sweep-params.js';
import type { RunStatusDoc, SweepStatusDoc } from '../controller/status/types.js';
import { metricsPrefix } from '../runtime/metrics.js';
import { openStore } from '../runtime/store/index.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { captureIo, removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

/** Ceilings per operation, never windows: a handful of local attempts; one controller state. */
const ATTEMPTS_MS = 90_000;
const WAIT_MS = 60_000;

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-sweep-'));
});
afterAll(() => removeTree(tmp));

async function adv(wt: WorkTree, args: string[]) {
  const io = captureIo({ ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache') }, wt.dir);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

const sweepYaml = (
  name: string,
  grid: string,
  extra = '',
  command = `[sh, -c, 'echo "point $ADV_PARAMS lr=$ADV_PARAM_lr opt={{params.opt}}"']`,
) =>
  `apiVersion: adventuretime.dev/v1alpha1
kind: Sweep
metadata:
  name: ${name}
  labels: {team: vision}
spec:
${extra}  template:
    command: ${command}
    backendSelector: {order: [local]}
  parameters:
    grid: ${grid}
`;

const statusOf = async <T>(wt: WorkTree, path: string) =>
  parse(await wt.git('show', `adventuretime/status:${path}`)) as T;

describe('a grid sweep', { timeout: 4 * ATTEMPTS_MS }, () => {
  it('runs 3 × 2 points; an edit to 3 × 3 adds exactly 3, and adv plan says so first', async () => {
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'storage.yaml': FILE_STORAGE,
      'sweeps/grid.yaml': sweepYaml('grid', '{lr: [0.1, 0.01, 0.001], opt: [sgd, adam]}'),
    });
    const dataDir = join(tmp, 'data-grid');
    let c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
    try {
      await c.runUntilIdle({ timeoutMs: ATTEMPTS_MS });
      await c.stop();
      const s = await statusOf<SweepStatusDoc>(wt, 'sweeps/grid.yaml');
      expect(s.status, JSON.stringify(s.status, null, 1)).toMatchObject({
        phase: 'Succeeded',
        counts: { Succeeded: 6 },
      });
      const first = Object.keys(s.status.points);
      expect(first).toHaveLength(6);
      const before = new Map<string, RunStatusDoc>();
      for (const run of first) {
        expect(run).toMatch(/^grid-[0-9a-f]{8}$/);
        const r = await statusOf<RunStatusDoc>(wt, `runs/${run}.yaml`);
        expect(r.status).toMatchObject({ phase: 'Succeeded', owner: 'grid' });
        expect(r.metadata.labels).toEqual({ team: 'vision', 'adventuretime.dev/sweep': 'grid' });
        before.set(run, r);
      }
      // The params reached the workload: as ADV_PARAMS, ADV_PARAM_<name> and {{params.NAME}}.
      const [one, p] = Object.entries(s.status.points).find(
        ([, x]) => x.params.lr === 0.01 && x.params.opt === 'adam',
      )!;
      expect(p.phase).toBe('Succeeded');
      const logs = await adv(wt, ['logs', one, '--data-dir', dataDir]);
      expect(logs.out, logs.err).toContain('point {"lr":0.01,"opt":"adam"} lr=0.01 opt=adam');

      // The edit, on a branch first: adv plan says 3 points added, none cancelled, 3 runs to start.
      await wt.git('checkout', '-q', '-b', 'wider');
      await wt.write(
        'sweeps/grid.yaml',
        sweepYaml('grid', '{lr: [0.1, 0.01, 0.001], opt: [sgd, adam, lion]}'),
      );
      await wt.commit('a third optimizer');
      const plan = await adv(wt, ['plan', '--base', 'main']);
      expect(plan.code, plan.err).toBe(0);
      expect(plan.out).toMatch(/^ {2}changed grid: 3 points added, 0 cancelled; sweep\/grid: /m);
      expect(
        plan.out.match(/^ {2}\+ start {3}grid-[0-9a-f]{8}\s.*\(sweeps\/grid\.yaml, sweep\/grid\)$/gm),
      ).toHaveLength(3);
      expect(plan.out).toMatch(/^Plan: 3 to start, 0 to update, 0 to restart, 0 to cancel\.$/m);
      const planJson = JSON.parse((await adv(wt, ['plan', '--base', 'main', '-o', 'json'])).out) as {
        sweeps: { sweep: string; added: string[]; cancelled: string[] }[];
      };
      expect(planJson.sweeps).toHaveLength(1);
      expect(planJson.sweeps[0]!.added).toHaveLength(3);
      expect(planJson.sweeps[0]!.added.some((r) => first.includes(r))).toBe(false);

      await wt.git('checkout', '-q', 'main');
      await wt.git('merge', '-q', '--ff-only', 'wider');
      c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
      await c.runUntilIdle({ timeoutMs: ATTEMPTS_MS });
      const after = await statusOf<SweepStatusDoc>(wt, 'sweeps/grid.yaml');
      expect(after.status).toMatchObject({ phase: 'Succeeded', counts: { Succeeded: 9 } });
      const added = Object.keys(after.status.points).filter((r) => !first.includes(r));
      expect(added).toHaveLength(3);
      expect(added.map((r) => after.status.points[r]!.params.opt)).toEqual(['lion', 'lion', 'lion']);
      // The 6 are the same runs: the same generation, one attempt, not submitted again.
      for (const [run, r] of before) {
        const now = await statusOf<RunStatusDoc>(wt, `runs/${run}.yaml`);
        expect(now.status.observedGeneration).toBe(r.status.observedGeneration);
        expect(now.status.attempts).toEqual(r.status.attempts);
      }
      const log = await wt.git('log', '--format=%B', 'adventuretime/status', '--', 'sweeps/grid.yaml');
      expect(log).toMatch(/^- sweep\/grid: Running \(6\/9 points succeeded\); 3 points added$/m);
      // A point's moves wake its Sweep, never a DAG of the same name.
      expect(await wt.git('ls-tree', '--name-only', 'adventuretime/status', 'dags/')).toBe('');

      // The CLI: the sweep's row, its points with their params, the owner of each point.
      const get = await adv(wt, ['get', 'sweeps']);
      expect(get.out, get.err).toMatch(/^grid\s+Succeeded\s+9\/9\s+0\s+0\s+0\s/m);
      expect((await adv(wt, ['get', 'sweeps', '-l', 'team=nlp'])).out).toBe('No sweeps found.\n');
      expect(
        (await adv(wt, ['get', 'runs', '-l', 'adventuretime.dev/sweep=grid', '-o', 'name'])).out
          .trim()
          .split('\n'),
      ).toHaveLength(9);
      expect((await adv(wt, ['get', 'runs'])).out).toMatch(
        new RegExp(`^${added[0]}\\s+sweep/grid\\s+Succeeded`, 'm'),
      );

      const plain = await adv(wt, ['describe', 'sweep', 'grid']);
      expect(plain.out, plain.err).toMatch(/^Concurrency: {2}no limit$/m);
      expect(plain.out).toMatch(/^Points: {7}9 Succeeded$/m);
      expect(plain.out).toMatch(/^LR\s+OPT\s+RUN\s+PHASE\s+ATTEMPTS\s+REASON$/m);
      const noMetric = await adv(wt, ['describe', 'sweep', 'grid', '--mode', 'max']);
      expect([noMetric.code, noMetric.err]).toEqual([2, expect.stringContaining('--mode ranks by a metric')]);

      // Ranked by the last value of a metric the points logged (parts as adv exec ships them).
      const store = await openStore(`file://${join(dataDir, 'store')}`);
      const losses = new Map<string, number>();
      Object.keys(after.status.points).forEach((run, i) => losses.set(run, ((i * 7) % 9) / 10));
      for (const [run, loss] of losses)
        await store.put(
          `${metricsPrefix(run, 1)}part-000000`,
          `{"step":1,"metrics":{"loss":9}}\n{"step":2,"metrics":{"loss":${loss}}}\n`,
        );
      const described = await adv(wt, [
        'describe',
        'sweep',
        'grid',
        '--metric',
        'loss',
        '--data-dir',
        dataDir,
      ]);
      expect(described.code, described.err).toBe(0);
      expect(described.out).toMatch(/^Phase: {8}Succeeded \(Completed\)$/m);
      expect(described.out).toContain('Points (by loss, lowest first):');
      const table = described.out.slice(
        described.out.indexOf('Points (by loss'),
        described.out.indexOf('History'),
      );
      const rows = table.split('\n').filter((l) => /\sgrid-[0-9a-f]{8}\s/.test(l));
      const ranked = [...losses].sort((a, b) => a[1] - b[1]).map(([r]) => r);
      expect(rows.map((l) => /grid-[0-9a-f]{8}/.exec(l)![0])).toEqual(ranked);
      expect(table).toMatch(/^LR\s+OPT\s+RUN\s+PHASE\s+ATTEMPTS\s+LOSS\s+REASON$/m);
      expect(rows[0]).toMatch(/^\S+\s+\S+\s+grid-[0-9a-f]{8}\s+Succeeded\s+1\s+0\s/);
      const best = await adv(wt, [
        'describe',
        'sweep',
        'grid',
        '--metric',
        'loss',
        '--mode',
        'max',
        '-o',
        'json',
        '--data-dir',
        dataDir,
      ]);
      expect(
        (JSON.parse(best.out) as { metric: { last: Record<string, number> } }).metric.last[ranked.at(-1)!],
      ).toBe(0.8);
    } finally {
      await c.stop();
      await wt.cleanup();
    }
  });
});

describe('changing a running sweep', { timeout: 4 * WAIT_MS }, () => {
  it('maxConcurrent holds points back; a removed value cancels its point and frees a slot; suspend cancels all', async () => {
    // Points that run until cancelled: the test never races their end.
    const sleeping = `[sleep, '3600']`;
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'sweeps/s.yaml': sweepYaml('s', '{lr: [1, 2, 3], opt: [sgd]}', '  maxConcurrent: 2\n', sleeping),
    });
    const c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data-live'), pollIntervalMs: 100 });
    const sweep = () => c.view.sweepStatus('s');
    const points = () => Object.entries(sweep()?.status.points ?? {});
    const live = () =>
      points().filter(([r]) =>
        ['Pending', 'Scheduling', 'Queued', 'Running'].includes(c.runStatus(r)?.status.phase ?? ''),
      );
    let most = 0;
    const passUntil = (what: string, done: () => boolean) =>
      waitFor(
        async () => {
          await c.pass();
          most = Math.max(most, live().length);
          return done();
        },
        { what, timeoutMs: WAIT_MS, detail: () => sweep()?.status },
      );
    const phaseOf = (lr: number) => {
      const p = points().find(([, x]) => x.params.lr === lr);
      return p && (c.runStatus(p[0])?.status.phase ?? p[1].phase);
    };
    try {
      await c.init();
      await passUntil(
        'two points running',
        () => live().length === 2 && points().filter(([, p]) => p.phase === 'Running').length === 2,
      );
      expect(phaseOf(3)).toBe('Waiting');
      expect(points().find(([, x]) => x.params.lr === 3)![1]).toMatchObject({ reason: 'MaxConcurrent' });
      const removed = points().find(([, x]) => x.params.lr === 1)![0];

      await wt.write(
        'sweeps/s.yaml',
        sweepYaml('s', '{lr: [2, 3], opt: [sgd]}', '  maxConcurrent: 2\n', sleeping),
      );
      await wt.commit('drop lr=1');
      c.requestFetch('test');
      await passUntil(
        'lr=1 cancelled, lr=3 running',
        () => c.runStatus(removed)?.status.phase === 'Cancelled' && phaseOf(3) === 'Running',
      );
      expect(c.runStatus(removed)!.status.reason).toBe('SpecDeleted');
      expect(points().map(([, x]) => x.params.lr)).toEqual([2, 3]);
      expect(most).toBe(2);

      const cancel = await adv(wt, ['cancel', 'sweep', 's']);
      expect(cancel.code, cancel.err).toBe(0);
      expect(cancel.out).toMatch(/^cancel sweep\/s \(sweeps\/s\.yaml, commit [0-9a-f]{10}\)/);
      c.requestFetch('test');
      await passUntil('all cancelled', () => phaseOf(2) === 'Cancelled' && phaseOf(3) === 'Cancelled');
      await c.pass();
      expect(sweep()!.status).toMatchObject({ phase: 'Cancelled', reason: 'Suspended' });
    } finally {
      await c.stop();
      await wt.cleanup();
    }
  });
});

describe('maxConcurrent to the end', { timeout: 2 * ATTEMPTS_MS }, () => {
  it('with maxConcurrent: 1, the controller runs every point, one after the other, until idle', async () => {
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'sweeps/one.yaml': sweepYaml(
        'one',
        '{lr: [1, 2, 3], opt: [sgd]}',
        '  maxConcurrent: 1\n',
        '[sh, -c, "exit 0"]',
      ),
    });
    const c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data-one'), pollIntervalMs: 100 });
    try {
      await c.runUntilIdle({ timeoutMs: ATTEMPTS_MS });
      const s = c.view.sweepStatus('one')!;
      expect(s.status).toMatchObject({ phase: 'Succeeded', counts: { Succeeded: 3 } });
      // In expansion order, each submitted only once the one before had finished.
      const attempts = Object.keys(s.status.points).map((r) => c.runStatus(r)!.status.attempts);
      expect(attempts.map((a) => a.length)).toEqual([1, 1, 1]);
      for (let i = 1; i < attempts.length; i++)
        expect(attempts[i]![0]!.submittedAt! >= attempts[i - 1]![0]!.finishedAt!).toBe(true);
      // The dashboard names a point's owner as the sweep it is, not as a DAG (whose page is not there).
      const overview = overviewView(c, Date.now())
        .sections.map((x) => x.body.toString())
        .join('');
      expect(overview).toContain('sweep/one');
      expect(overview).not.toContain('dag/one');
    } finally {
      await c.stop();
      await wt.cleanup();
    }
  });
});

describe('a bad Sweep', () => {
  it('is reported with file and line on its status, and the rest of the repo keeps working', async () => {
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/ok.yaml': runYaml('ok', ['true']),
      'sweeps/bad.yaml': sweepYaml('bad', '{lr: [1]}', '', `'train --seed {{params.seed}}'`),
    });
    const c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data-bad'), pollIntervalMs: 100 });
    try {
      await c.runUntilIdle({ timeoutMs: WAIT_MS });
      expect(c.runStatus('ok')!.status.phase).toBe('Succeeded');
      const s = await statusOf<SweepStatusDoc>(wt, 'sweeps/bad.yaml');
      expect(s.status.reason).toBe('SpecInvalid');
      expect(s.status.conditions.find((x) => x.type === 'Valid')).toMatchObject({
        status: 'False',
        message: expect.stringMatching(
          /^sweeps\/bad\.yaml:8:\d+: spec\.template\.command: \{\{params\.seed\}\} names no parameter/,
        ),
      });
      expect(s.status.points).toEqual({});
      const validate = await adv(wt, ['validate', '.']);
      expect(validate.code).toBe(1);
      expect(validate.out + validate.err).toMatch(/sweeps\/bad\.yaml:8:\d+/);
    } finally {
      await c.stop();
      await wt.cleanup();
    }
  });
});

describe('the example sweep in specs/', () => {
  it('validates with the rest of the example repo and has 3 × 2 points', async () => {
    const specs = join(import.meta.dirname, '..', 'specs');
    const r = await loadSpecs(new DirectorySource(specs));
    expect(r.diagnostics.filter((d) => d.severity === 'error')).toEqual([]);
    const o = r.objects.find((x) => x.kind === 'Sweep' && x.name === 'lr-search');
    expect(o).toBeDefined();
    expect(expandPoints((o!.object as Sweep).spec)).toHaveLength(6);
  });
});
