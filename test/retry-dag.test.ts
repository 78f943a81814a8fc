/**
 * `adv retry dag NAME --failed` end to end on the local backend: a DAG whose middle node fails
 * (until a file exists) and skips what needs it; once the cause is fixed, the retry re-runs only
 * that node and the one skipped after it; the nodes that succeeded keep their single attempt.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import type { DagStatusDoc } from '../controller/status/types.js';
import { captureIo, removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree } from './helpers/git/specs-repo.js';

/** One attempt of a node (submit, run, observe, commit) on a loaded machine: a ceiling, not a window. */
const ATTEMPT_MS = 45_000;

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-retry-dag-'));
});
afterAll(() => removeTree(tmp));

async function adv(cwd: string, args: string[]) {
  const io = captureIo({ ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache') }, cwd);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

/** prep → train (fails until $FIXED exists) → evaluate, and report (needs prep only). */
const dagYaml = (fixed: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: DAG
metadata: {name: pipe}
spec:
  defaults: {backendSelector: {order: [local]}}
  nodes:
    - id: prep
      run: {command: [sh, -c, 'echo prepared']}
    - id: train
      needs: [prep]
      retries: 0
      run: {command: [sh, -c, '[ -f "$FIXED" ] || { echo "no $FIXED"; exit 4; }'], env: {FIXED: ${JSON.stringify(fixed)}}}
    - id: evaluate
      needs: [train]
      run: {command: [sh, -c, 'echo evaluated']}
    - id: report
      needs: [prep]
      run: {command: [sh, -c, 'echo reported']}
`;

describe('adv retry dag --failed', { timeout: 8 * ATTEMPT_MS }, () => {
  it('re-runs only the failed node and the node skipped after it', async () => {
    const fixed = join(tmp, 'fixed');
    const wt = await makeWorkTree({ 'backends/local.yaml': LOCAL_BACKEND, 'dags/pipe.yaml': dagYaml(fixed) });
    const c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data'), pollIntervalMs: 100 });
    const dag = async () =>
      parse(await wt.git('show', 'adventuretime/status:dags/pipe.yaml')) as DagStatusDoc;
    const attempts = (node: string) => c.runStatus(`pipe.${node}`)?.status.attempts.length;
    try {
      await c.runUntilIdle({ timeoutMs: 4 * ATTEMPT_MS });
      let d = await dag();
      expect(d.status.phase, JSON.stringify(d.status, null, 1)).toBe('Failed');
      expect(d.status.nodes.train).toMatchObject({ phase: 'Failed' });
      expect(d.status.nodes.evaluate).toMatchObject({ phase: 'Skipped', reason: 'UpstreamFailed' });
      expect(d.status.nodes.report).toMatchObject({ phase: 'Succeeded' });

      await writeFile(fixed, 'the fix');
      const r = await adv(wt.dir, ['retry', 'dag', 'pipe', '--failed']);
      expect(r.code, r.err).toBe(0);
      expect(r.err).toContain('retrying train of dag/pipe');
      expect(await wt.git('log', '-1', '--format=%s')).toBe('retry dag/pipe: its failed nodes');

      await c.runUntilIdle({ timeoutMs: 4 * ATTEMPT_MS });
      d = await dag();
      expect(d.status.phase, JSON.stringify(d.status, null, 1)).toBe('Succeeded');
      expect({
        prep: attempts('prep'),
        train: attempts('train'),
        evaluate: attempts('evaluate'),
        report: attempts('report'),
      }).toEqual({ prep: 1, train: 2, evaluate: 1, report: 1 });
      expect(c.runStatus('pipe.train')!.status.attempts.map((a) => a.exitCode)).toEqual([4, 0]);

      // Nothing failed any more: a second retry says so and commits nothing.
      const head = await wt.git('rev-parse', 'HEAD');
      const none = await adv(wt.dir, ['retry', 'dag', 'pipe']);
      expect(none.code).not.toBe(0);
      expect(none.err).toMatch(/dag\/pipe has no failed node to retry \(it is Succeeded\)/);
      expect(await wt.git('rev-parse', 'HEAD')).toBe(head);
    } finally {
      await c.stop();
      await wt.cleanup();
    }
  });

  it('refuses --failed for a run, saying how a run is retried', async () => {
    const r = await adv(tmp, ['retry', 'some-run', '--failed']);
    expect(r.code).not.toBe(0);
    expect(r.err).toMatch(/--failed goes with a DAG/);
  });
});
