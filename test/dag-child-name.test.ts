/**
 * A DAG node runs as the Run `<dag>.<node>`: a Run committed under that name is the same name twice.
 * `adv validate` and `adv plan` refuse both places (the Run's name, the node's id) and start
 * neither; the controller, like for two Runs of one name, marks both invalid and lets what was
 * already running go on, so no job runs twice and none is started in its place.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import type { DagStatusDoc, SourceStatusDoc } from '../controller/status/types.js';
import { killTree } from './helpers/processes.js';
import { captureIo, removeTree } from './helpers/io.js';
import { jobPids } from './helpers/backends/job-pids.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { passUntil } from './helpers/wait.js';

/** A ceiling for one wait on the controller, on a loaded machine. */
const WAIT_MS = 60_000;

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-child-name-'));
});
afterAll(() => removeTree(tmp));

async function adv(wt: WorkTree, args: string[]) {
  const io = captureIo({ ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache') }, wt.dir);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

/** A DAG whose nodes each run until cancelled (the test never races their end). */
const dagYaml = (name: string, ids: string[], extra = '') =>
  `apiVersion: adventuretime.dev/v1alpha1
kind: DAG
metadata: {name: ${name}}
spec:
${extra}  defaults: {backendSelector: {order: [local]}}
  nodes:
${ids.map((id) => `    - id: ${id}\n      run: {command: [sleep, '3600']}\n`).join('')}`;
const slowRun = (name: string, extra = '') => runYaml(name, ['sleep', '3600'], extra);

describe('a Run named like a DAG node', () => {
  it('adv validate and adv plan name both places and start neither', async () => {
    const wt = await makeWorkTree({ 'backends/local.yaml': LOCAL_BACKEND });
    try {
      await wt.git('checkout', '-q', '-b', 'feature');
      await wt.write('dags/pipe.yaml', dagYaml('pipe', ['prep', 'train']));
      await wt.write('runs/pipe-train.yaml', slowRun('pipe.train'));
      await wt.commit('a run named like a node');

      const v = await adv(wt, ['validate', '.']);
      expect(v.code, v.out).toBe(1);
      expect(v.out).toMatch(
        /^dags\/pipe\.yaml:9:11: error\[DuplicateName\] spec\.nodes\[1\]\.id: node "train" runs as Run\/pipe\.train, which is also defined at runs\/pipe-train\.yaml:4$/m,
      );
      expect(v.out).toMatch(
        /^runs\/pipe-train\.yaml:4:9: error\[DuplicateName\] metadata\.name: Run\/pipe\.train is also the child run of node "train" of DAG\/pipe at dags\/pipe\.yaml:9$/m,
      );
      expect(v.out).toMatch(/^3 files, 1 valid object, 2 errors$/m);

      const plan = await adv(wt, ['plan', '--base', 'main']);
      expect(plan.code, plan.out + plan.err).toBe(1);
      expect(plan.out).toMatch(
        /^ {2}dags\/pipe\.yaml:9:11: spec\.nodes\[1\]\.id: node "train" runs as Run\/pipe\.train/m,
      );
      expect(plan.out).toMatch(/^ {2}runs\/pipe-train\.yaml:4:9: metadata\.name: Run\/pipe\.train is also/m);
      expect(plan.out).not.toMatch(/start\s+pipe\./);
    } finally {
      await wt.cleanup();
    }
  });

  it('in the controller: both are invalid, what was running goes on alone, nothing starts twice', async () => {
    // A Run `a.train` and a DAG `b` (node train: the Run `b.train`), both running; then one commit
    // adds the DAG `a` (node train) and the Run `b.train`.
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/a-train.yaml': slowRun('a.train'),
      'dags/b.yaml': dagYaml('b', ['train']),
    });
    const dataDir = join(tmp, 'data');
    const c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
    let cancelled = false;
    const st = (run: string) => c.runStatus(run)?.status;
    const dag = async (name: string) =>
      ((await wt.git('show', `adventuretime/status:dags/${name}.yaml`).then(parse)) as DagStatusDoc).status;
    const valid = (s: { conditions: { type: string; status: string; message?: string }[] } | undefined) =>
      s?.conditions.find((x) => x.type === 'Valid');
    try {
      await c.init();
      await passUntil(
        c,
        'a.train and b.train running',
        () => ['a.train', 'b.train'].every((r) => st(r)?.phase === 'Running'),
        WAIT_MS,
      );
      const jobs = { a: st('a.train')!.attempts[0]!.jobId, b: st('b.train')!.attempts[0]!.jobId };

      await wt.write('dags/a.yaml', dagYaml('a', ['train']));
      await wt.write('runs/b-train.yaml', slowRun('b.train'));
      await wt.commit('a DAG and a Run whose names clash with what runs');
      c.requestFetch('test');
      await passUntil(c, 'a.train marked invalid', () => valid(st('a.train'))?.status === 'False', WAIT_MS);
      await c.pass();

      // The standalone Run: invalid, still its one attempt, running.
      expect(valid(st('a.train'))!.message).toMatch(
        /^runs\/a-train\.yaml:4:9: metadata\.name: Run\/a\.train is also the child run of node "train" of DAG\/a/,
      );
      expect(st('a.train')).toMatchObject({ phase: 'Running', attempts: [{ jobId: jobs.a }] });
      // The new DAG: never valid, so no child (which would have been the same Run twice).
      const a = await dag('a');
      expect(valid(a)).toMatchObject({
        status: 'False',
        message: expect.stringMatching(
          /^dags\/a\.yaml:7:11: spec\.nodes\[0\]\.id: node "train" runs as Run\/a\.train/,
        ),
      });
      expect(a.nodes ?? {}).toEqual({});
      // The running DAG: invalid now, its last valid spec goes on; its child keeps its one attempt.
      const b = await dag('b');
      expect(valid(b)).toMatchObject({
        status: 'False',
        message: expect.stringMatching(
          /node "train" runs as Run\/b\.train, which is also defined at runs\/b-train\.yaml:4/,
        ),
      });
      expect(st('b.train')).toMatchObject({
        phase: 'Running',
        owner: 'b',
        attempts: [{ jobId: jobs.b }],
      });
      // The Run file that clashes with it has no status of its own (the name is the child's): its
      // error is on the specs repo's status.
      const source = parse(
        await wt.git('show', 'adventuretime/status:sources/specs.yaml'),
      ) as SourceStatusDoc;
      expect(source.status.errors).toContainEqual(
        expect.objectContaining({ file: 'runs/b-train.yaml', line: 4, code: 'DuplicateName' }),
      );

      // The clash undone and both cancelled: each had one attempt throughout, none restarted.
      await wt.remove('dags/a.yaml');
      await wt.remove('runs/b-train.yaml');
      await wt.write('runs/a-train.yaml', slowRun('a.train', '  suspend: true\n'));
      await wt.write('dags/b.yaml', dagYaml('b', ['train'], '  suspend: true\n'));
      await wt.commit('undo, and cancel both');
      c.requestFetch('test');
      await passUntil(
        c,
        'both cancelled',
        () => ['a.train', 'b.train'].every((r) => st(r)?.phase === 'Cancelled'),
        WAIT_MS,
      );
      expect(st('a.train')!.attempts).toHaveLength(1);
      expect(st('b.train')!.attempts).toHaveLength(1);
      cancelled = true;
    } finally {
      await c.stop();
      // A failed test leaves its sleeps running: end them (after a cancel their pids may be reused).
      if (!cancelled) await killTree(await jobPids(join(dataDir, 'local', 'local', 'jobs')));
      await wt.cleanup();
    }
  });
});
