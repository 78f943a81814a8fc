/**
 * DAGs end to end on the embedded default (local backend, file store): the example pipeline with
 * a node that fails once and is retried alone, outputs passed as verified artifacts, cancelling
 * and editing a running DAG, and a bad DAG next to a good run.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import type { DagStatusDoc, RunStatusDoc } from '../controller/status/types.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { captureIo, removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const SPECS = join(import.meta.dirname, '..', 'specs');
const pipelineFiles = async () => ({
  'pipeline/tokenize.py': await readFile(join(SPECS, 'pipeline', 'tokenize.py'), 'utf8'),
  'pipeline/train.py': await readFile(join(SPECS, 'pipeline', 'train.py'), 'utf8'),
  'pipeline/rollouts.py': await readFile(join(SPECS, 'pipeline', 'rollouts.py'), 'utf8'),
});

/**
 * Ceilings sized per operation, never windows: one attempt of a node (submit, run, observe, commit)
 * on a loaded machine, and one wait for the controller to reach a state.
 */
const ATTEMPT_MS = 45_000;
const WAIT_MS = 60_000;

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-dag-'));
});
afterAll(() => removeTree(tmp));

async function adv(wt: WorkTree, args: string[]) {
  const io = captureIo({ ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache') }, wt.dir);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

describe('the example DAG', { timeout: 5 * ATTEMPT_MS }, () => {
  it('runs tokenize → train → rollouts; a node that fails once is retried alone; outputs flow as artifacts', async () => {
    const dag = readFileSync(join(SPECS, 'dags', 'pipeline.yaml'), 'utf8').replace(
      'command: [python3, pipeline/train.py]',
      `command: [sh, -c, '[ "$ADV_ATTEMPT" -ge 2 ] || { echo "flaky: failing attempt $ADV_ATTEMPT"; exit 3; }; exec python3 pipeline/train.py']\n        policy: {backoff: {initialSec: 0.2}}`,
    );
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'storage.yaml': FILE_STORAGE,
      'dags/pipeline.yaml': dag,
      ...(await pipelineFiles()),
    });
    const dataDir = join(tmp, 'data-1');
    const c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
    try {
      await c.runUntilIdle({ timeoutMs: 4 * ATTEMPT_MS }); // tokenize, train twice, rollouts
      const status = (kind: 'runs' | 'dags', name: string) =>
        wt.git('show', `adventuretime/status:${kind}/${name}.yaml`).then((t) => parse(t) as unknown);
      const d = (await status('dags', 'pipeline')) as DagStatusDoc;
      expect(d.status.phase, JSON.stringify(d.status, null, 1)).toBe('Succeeded');
      const attempts = async (node: string) =>
        ((await status('runs', `pipeline.${node}`)) as RunStatusDoc).status.attempts.map((a) => [
          a.phase,
          a.class,
        ]);
      expect(await attempts('tokenize')).toEqual([['Succeeded', 'Succeeded']]);
      expect(await attempts('train')).toEqual([
        ['Failed', 'UserError'],
        ['Succeeded', 'Succeeded'],
      ]);
      expect(await attempts('rollouts')).toEqual([['Succeeded', 'Succeeded']]);
      expect(d.status.nodes.train).toMatchObject({ phase: 'Succeeded', attempts: 2, run: 'pipeline.train' });

      // Each output is in the store, manifest last; the last node's output is the samples.
      const store = join(dataDir, 'store', 'runs');
      for (const [run, out] of [
        ['pipeline.tokenize', 'shards'],
        ['pipeline.train', 'params'],
        ['pipeline.rollouts', 'samples'],
      ])
        expect(existsSync(join(store, run!, 'outputs', out!, 'manifest.json')), `${run}/${out}`).toBe(true);
      const samples = JSON.parse(
        readFileSync(join(store, 'pipeline.rollouts', 'outputs', 'samples', 'samples.json'), 'utf8'),
      ) as string[];
      expect(samples).toHaveLength(2);
      expect(samples[0]).toMatch(/^the /);

      // Each node's history is on the status branch; the DAG's commits say which nodes moved.
      const trainLog = await wt.git(
        'log',
        '--format=%B',
        'adventuretime/status',
        '--',
        'runs/pipeline.train.yaml',
      );
      expect(trainLog).toMatch(/attempt 1 on local exited 3; retrying in 0.2s/);
      expect(trainLog).toMatch(/run\/pipeline\.train: Succeeded \(attempt 2 on local/);
      const dagLog = await wt.git('log', '--format=%B', 'adventuretime/status', '--', 'dags/pipeline.yaml');
      expect(dagLog).toMatch(
        /dag\/pipeline: Running \(1\/3 nodes succeeded\); tokenize Succeeded, train (Pending|Scheduling)/,
      );
      expect(dagLog).toMatch(/dag\/pipeline: Succeeded \(3\/3 nodes succeeded\); rollouts Succeeded/);

      // The CLI: children with their owner, the DAG tree, the graph.
      const runs = await adv(wt, ['get', 'runs']);
      expect(runs.out).toMatch(/^pipeline\.train\s+dag\/pipeline\s+Succeeded\s+2\s+local/m);
      expect((await adv(wt, ['get', 'dags'])).out).toMatch(/^pipeline\s+Succeeded\s+3\/3\s+0\s+0\s/m);
      const described = await adv(wt, ['describe', 'dag', 'pipeline']);
      expect(described.out).toMatch(/^ {2}└ train\s+Succeeded\s+pipeline\.train\s+2\s+tokenize\s/m);
      expect(described.out).toMatch(/^ {4}└ rollouts\s+Succeeded\s+pipeline\.rollouts\s+1\s+train\s/m);
      const mermaid = await adv(wt, ['dag', 'graph', 'pipeline']);
      expect(mermaid.out).toContain('n_tokenize -->|TOKENS| n_train');
      expect(mermaid.out).toContain('n_train["train<br/><small>Succeeded</small>"]:::succeeded');
      const dot = await adv(wt, ['dag', 'graph', 'pipeline', '-o', 'dot']);
      expect(dot.out).toContain('"train" -> "rollouts" [label="PARAMS"];');
    } finally {
      await c.stop();
      await wt.cleanup();
    }
  });
});

describe('changing a running DAG', { timeout: 4 * WAIT_MS }, () => {
  // Nodes that run until cancelled: the test never races their end.
  const slow = (id: string, needs = '') => `    - id: ${id}\n${needs}      run: {command: [sleep, '3600']}\n`;
  const dagYaml = (nodes: string, extra = '') =>
    `apiVersion: adventuretime.dev/v1alpha1\nkind: DAG\nmetadata: {name: d}\nspec:\n${extra}  defaults: {backendSelector: {order: [local]}}\n  nodes:\n${nodes}`;

  it('removing a node cancels it; suspending the DAG cancels its live nodes', async () => {
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'dags/d.yaml': dagYaml(slow('a') + slow('b') + slow('c')),
    });
    const c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data-2'), pollIntervalMs: 100 });
    const phase = (run: string) => c.runStatus(run)?.status.phase;
    const passUntil = (what: string, done: () => boolean) =>
      waitFor(async () => (await c.pass(), done()), { what, timeoutMs: WAIT_MS });
    try {
      await c.init();
      await passUntil('all running', () => ['d.a', 'd.b', 'd.c'].every((r) => phase(r) === 'Running'));
      await wt.write('dags/d.yaml', dagYaml(slow('a') + slow('b')));
      await wt.commit('drop c');
      c.requestFetch('test');
      await passUntil('c cancelled', () => phase('d.c') === 'Cancelled');
      expect(c.runStatus('d.c')!.status.reason).toBe('SpecDeleted');
      expect(phase('d.a')).toBe('Running');
      const cancel = await adv(wt, ['cancel', 'dag', 'd']);
      expect(cancel.code, cancel.err).toBe(0);
      expect(cancel.out).toMatch(/^cancel dag\/d \(dags\/d\.yaml, commit [0-9a-f]{10}\)/);
      c.requestFetch('test');
      await passUntil(
        'a and b cancelled',
        () => phase('d.a') === 'Cancelled' && phase('d.b') === 'Cancelled',
      );
      await c.pass();
      const d = (await wt.git('show', 'adventuretime/status:dags/d.yaml').then(parse)) as DagStatusDoc;
      expect(d.status).toMatchObject({ phase: 'Cancelled', reason: 'Suspended' });
      expect(Object.keys(d.status.nodes)).toEqual(['a', 'b']);
    } finally {
      await c.stop();
      await wt.cleanup();
    }
  });
});

describe('a bad DAG', () => {
  it('is reported with file and line, and the rest of the repo keeps working', async () => {
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/ok.yaml': runYaml('ok', ['true']),
      'dags/loop.yaml': `apiVersion: adventuretime.dev/v1alpha1
kind: DAG
metadata: {name: loop}
spec:
  nodes:
    - {id: a, needs: [b], run: {command: x}}
    - {id: b, needs: [a], run: {command: x}}
`,
    });
    const c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data-3'), pollIntervalMs: 100 });
    try {
      await c.runUntilIdle({ timeoutMs: ATTEMPT_MS });
      expect(c.runStatus('ok')!.status.phase).toBe('Succeeded');
      const d = (await wt.git('show', 'adventuretime/status:dags/loop.yaml').then(parse)) as DagStatusDoc;
      expect(d.status.conditions.find((x) => x.type === 'Valid')).toMatchObject({
        status: 'False',
        message: expect.stringMatching(
          /^dags\/loop\.yaml:6:\d+: spec\.nodes\[0\]\.needs: needs form a cycle: a → b → a/,
        ),
      });
      expect(c.runStatus('loop.a')).toBeUndefined();
    } finally {
      await c.stop();
      await wt.cleanup();
    }
  });
});
