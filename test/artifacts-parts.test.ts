/**
 * Outputs in parts, end to end. A rollout writes immutable parts with the Python helper; adv exec
 * (the bundled single file) ships each while it runs, so a SIGKILL loses none that were shipped,
 * over a real S3-protocol server; the next attempt finds them in place and finishes. Then through
 * the controller on the local backend: a DAG node whose run declares the output is preempted, its
 * next attempt finishes the work, and the next node gets every part through its input.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import type { RunStatusDoc } from '../controller/status/types.js';
import {
  downloadOutput,
  listParts,
  readOutputManifest,
  readPartManifest,
  type ArtifactPartManifest,
} from '../runtime/artifacts.js';
import { bundleExec } from '../runtime/bundle.js';
import { openStore, type ObjectStore } from '../runtime/store/index.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { LOCAL_BACKEND, makeWorkTree } from './helpers/git/specs-repo.js';
import { removeTree } from './helpers/io.js';
import { killJobWorkload } from './helpers/processes.js';
import { REPO } from './helpers/paths.js';
import { startS3, type S3Server } from './helpers/servers/s3.js';
import { waitFor } from './helpers/wait.js';

const PY_SRC = join(REPO, 'runtime', 'python', 'src');
/**
 * The rollout: parts `p0`…`p3`, skipping those already there (an earlier attempt's). With
 * `$STOP_AFTER` it stops after that many of its own parts: `kill` sends its parent (adv exec) that
 * signal, then it waits to be stopped. At the end it writes which parts it found at its start.
 */
const ROLLOUT = `
import os, signal, sys, time
from adventuretime import artifact_part, committed_parts

found = committed_parts("rollouts")
mine = 0
for i in range(4):
    name = f"p{i}"
    if name in found:
        continue
    with artifact_part("rollouts", name=name) as d:
        with open(os.path.join(d, "data.jsonl"), "w") as f:
            f.write(f"rollout {i} by attempt {os.environ['ADV_ATTEMPT']}\\n")
    mine += 1
    if os.environ.get("STOP_AFTER") and mine == int(os.environ["STOP_AFTER"]):
        how = os.environ.get("STOP_HOW", "wait")
        if how != "wait":
            os.kill(os.getppid(), getattr(signal, how))
        time.sleep(600)
        sys.exit(9)
with open(os.path.join(os.environ["ADV_ARTIFACT_DIR"], "rollouts", "found.txt"), "w") as f:
    f.write(",".join(found) + "\\n")
`;

/** Ceilings, never windows: one attempt on a loaded machine, and a controller's whole DAG. */
const ATTEMPT_MS = 60_000;

let tmp: string;
let bundle: string;
let s3: S3Server;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-parts-'));
  // The worker runtime as one file, in a folder with no node_modules above it.
  await mkdir(join(tmp, 'worker'));
  bundle = join(tmp, 'worker', 'adv-exec.mjs');
  await bundleExec(bundle);
  s3 = await startS3();
  // The store clients of this test read the credentials from the environment, as adv exec does.
  Object.assign(process.env, s3.env);
}, 120_000);
afterAll(async () => {
  await s3?.stop();
  await removeTree(tmp);
});

/** adv exec processes (and their workloads' groups) still running when a test ends. */
const running = new Set<{ child: ChildProcess; job: string }>();
afterEach(async () => {
  for (const r of running) {
    r.child.kill('SIGKILL');
    await new Promise((res) => r.child.once('close', res));
    killJobWorkload(r.job);
  }
  running.clear();
});

function advExec(url: string, attempt: number, job: string, env: NodeJS.ProcessEnv = {}) {
  const child = spawn(
    process.execPath,
    [
      bundle,
      '--store',
      url,
      '--run',
      'roll',
      '--attempt',
      String(attempt),
      '--job-dir',
      job,
      '--heartbeat',
      '0.2',
    ].concat(['--', 'python3', '-c', ROLLOUT]),
    {
      env: { ...process.env, ...s3.env, PYTHONPATH: PY_SRC, ADV_OUTPUTS: 'rollouts', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const entry = { child, job };
  running.add(entry);
  let out = '';
  let exited = false;
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const done = new Promise<number | null>((r) =>
    child.on('close', (code) => {
      exited = true;
      running.delete(entry);
      r(code);
    }),
  );
  return { child, done, out: () => out, gone: () => exited && `adv exec exited early:\n${out}` };
}

const partAttempts = async (store: ObjectStore, run: string) =>
  Object.fromEntries(
    (await listParts(store, run, 'rollouts')).map((p) => [
      p.name,
      (p.manifest as ArtifactPartManifest).attempt,
    ]),
  );

describe('a rollout SIGKILLed with parts committed (bundled adv exec, S3)', () => {
  it('keeps every part shipped before the kill; the next attempt sees them and finishes the rest', async () => {
    const url = s3.url(`parts-${Math.random().toString(36).slice(2, 8)}`);
    const store = await openStore(url, { ...process.env, ...s3.env });
    const first = join(tmp, 'kill-1');
    const e1 = advExec(url, 1, first, { STOP_AFTER: '2' });
    // Shipped while it runs: both parts' manifests are in the store before anything ends.
    await waitFor(async () => (await listParts(store, 'roll', 'rollouts')).length === 2 || undefined, {
      what: 'two committed parts in the store',
      timeoutMs: ATTEMPT_MS,
      everyMs: 50,
      giveUpIf: e1.gone,
    });
    e1.child.kill('SIGKILL');
    await e1.done;
    killJobWorkload(first);
    expect(await partAttempts(store, 'roll')).toEqual({ p0: 1, p1: 1 });
    expect(await readOutputManifest(store, 'roll', 'rollouts')).toBeUndefined();

    const e2 = advExec(url, 2, join(tmp, 'kill-2'));
    expect(await e2.done, e2.out()).toBe(0);
    expect(e2.out()).toMatch(/output rollouts: 2 committed part\(s\) of earlier attempts/);
    expect(e2.out()).not.toMatch(/part p[01] committed/);
    expect(await partAttempts(store, 'roll')).toEqual({ p0: 1, p1: 1, p2: 2, p3: 2 });
    const m = await readOutputManifest(store, 'roll', 'rollouts');
    expect(typeof m === 'object' && m.files.map((f) => f.path)).toEqual([
      'found.txt',
      'parts/p0/data.jsonl',
      'parts/p1/data.jsonl',
      'parts/p2/data.jsonl',
      'parts/p3/data.jsonl',
    ]);
    const dest = join(tmp, 'kill-pulled');
    await downloadOutput(store, 'roll', 'rollouts', dest);
    expect(await readFile(join(dest, 'found.txt'), 'utf8')).toBe('p0,p1\n');
    expect(await readFile(join(dest, 'parts', 'p1', 'data.jsonl'), 'utf8')).toBe('rollout 1 by attempt 1\n');
    expect(await readFile(join(dest, 'parts', 'p3', 'data.jsonl'), 'utf8')).toBe('rollout 3 by attempt 2\n');
  });
});

describe(
  'a preempted DAG node with run outputs, through the controller (local backend)',
  { timeout: 4 * ATTEMPT_MS },
  () => {
    it('its committed parts are there for its next attempt and for the next node', async () => {
      const dag = `apiVersion: adventuretime.dev/v1alpha1
kind: DAG
metadata: {name: d}
spec:
  defaults:
    backendSelector: {order: [local]}
    policy: {backoff: {initialSec: 0.2}}
    env: {PYTHONPATH: ${JSON.stringify(PY_SRC)}}
  nodes:
    - id: roll
      retries: 1
      run:
        command: [sh, -c, 'if [ "$ADV_ATTEMPT" = 1 ]; then export STOP_AFTER=2 STOP_HOW=SIGTERM; fi; exec python3 rollout.py']
        outputs: {rollouts: {description: one part per rollout}}
    - id: eat
      needs: [roll]
      inputs: {R: roll.outputs.rollouts}
      outputs: {seen: {}}
      run:
        command: [sh, -c, 'mkdir -p "$ADV_ARTIFACT_DIR/seen" && ls "$ADV_INPUT_R_DIR/parts" | tr "\\n" " " > "$ADV_ARTIFACT_DIR/seen/parts" && cat "$ADV_INPUT_R_DIR"/parts/*/data.jsonl "$ADV_INPUT_R_DIR/found.txt" > "$ADV_ARTIFACT_DIR/seen/all"']
`;
      const wt = await makeWorkTree({
        'backends/local.yaml': LOCAL_BACKEND,
        'storage.yaml': FILE_STORAGE,
        'dags/d.yaml': dag,
        'rollout.py': ROLLOUT,
      });
      const dataDir = join(tmp, 'data');
      const c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
      try {
        await c.runUntilIdle({ timeoutMs: 3 * ATTEMPT_MS });
        const status = (name: string) =>
          wt.git('show', `adventuretime/status:runs/${name}.yaml`).then((t) => parse(t) as RunStatusDoc);
        const roll = await status('d.roll');
        expect(
          roll.status.attempts.map((a) => a.class),
          JSON.stringify(roll.status, null, 1),
        ).toEqual(['Preempted', 'Succeeded']);
        expect((await status('d.eat')).status.phase).toBe('Succeeded');
        const store = await openStore(`file://${join(dataDir, 'store')}`);
        expect(await partAttempts(store, 'd.roll')).toEqual({ p0: 1, p1: 1, p2: 2, p3: 2 });
        expect(await readPartManifest(store, 'd.roll', 'rollouts', 'p0')).toMatchObject({
          kind: 'ArtifactPart',
        });
        const seen = join(dataDir, 'store', 'runs', 'd.eat', 'outputs', 'seen');
        expect(await readFile(join(seen, 'parts'), 'utf8')).toBe('p0 p1 p2 p3 ');
        expect(await readFile(join(seen, 'all'), 'utf8')).toBe(
          'rollout 0 by attempt 1\nrollout 1 by attempt 1\nrollout 2 by attempt 2\nrollout 3 by attempt 2\np0,p1\n',
        );
      } finally {
        await c.stop();
        await wt.cleanup();
      }
    });
  },
);
