/**
 * The `gcp-tpu` backend end to end, with the real `gcloud` against a fake of the Cloud TPU v2 API
 * on loopback (test/helpers/cloud/fake-tpu-api.ts: no Google service can run here) and the slice's
 * workers served by a real sshd listening on one loopback address per worker (127.0.0.2, …).
 * A two-worker v4-16 slice runs a job on both workers with process ids 0 and 1; a spot preemption
 * mid-run (the fake stops the workers' processes as a VM shutdown does) ends the attempt, deletes
 * the node, and the next attempt resumes from the committed step; a zone without capacity lands
 * the run in the next zone; cancelling deletes the node; an orphaned node is swept; a controller
 * process killed with SIGKILL while its node is being created leaves exactly one node, which the
 * restarted controller adopts and runs on.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import type { RunStatusDoc } from '../controller/status/types.js';
import { FILE_STORAGE, gcloudAvailable, gcpTpuBackendYaml, TRAIN } from './helpers/backends/kinds.js';
import { startFakeTpuApi, type FakeNode, type FakeTpuApi } from './helpers/cloud/fake-tpu-api.js';
import { killTree } from './helpers/processes.js';
import { captureIo } from './helpers/io.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { startSshd, type Sshd } from './helpers/servers/sshd.js';
import { jobPids } from './helpers/backends/job-pids.js';
import { passUntil as passesUntil, waitFor } from './helpers/wait.js';

const available = gcloudAvailable('the gcp-tpu test');
const PROJECT = 'adv-test-project';
const ZONE_A = 'us-central2-b';
const ZONE_B = 'us-central1-a';
/** One sshd serves them all (OpenSSH listens on at most 16 sockets). */
const WORKERS = Array.from({ length: 12 }, (_, i) => `127.0.0.${i + 2}`);
/** The compiled CLI (built by the integration suite's global setup). */
const ADV = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');

describe.runIf(available)('gcp-tpu: a TPU VM slice per attempt, through the real gcloud', () => {
  let tmp: string;
  let sshd: Sshd;
  let api: FakeTpuApi;
  let wt: WorkTree | undefined;
  let c: Controller | undefined;
  const savedConfig = process.env.CLOUDSDK_CONFIG;

  /** The pids of a node's worker jobs (every node's: none given), from the job dirs' pid files. */
  const workerPids = (node?: FakeNode) =>
    jobPids(join(tmp, 'tpu-root', 'work'), (d) => !node || d === node.id || d.startsWith(`${node.id}-w`));

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-tpu-'));
    sshd = await startSshd({ addresses: WORKERS });
    api = await startFakeTpuApi({
      addresses: WORKERS,
      onPreempt: async (node) => killTree(await workerPids(node)),
    });
    process.env.CLOUDSDK_CONFIG = await api.configDir(PROJECT);
  }, 60_000);

  afterAll(async () => {
    await c?.stop();
    await wt?.cleanup();
    await api?.stop();
    await sshd?.stop();
    if (savedConfig === undefined) delete process.env.CLOUDSDK_CONFIG;
    else process.env.CLOUDSDK_CONFIG = savedConfig;
    // Whatever a test left running on the "workers".
    await killTree(await workerPids()).catch(() => {});
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  const backendYaml = (zones: string[], more: Record<string, unknown> = {}) =>
    gcpTpuBackendYaml(
      sshd,
      'tpu',
      join(tmp, 'tpu-root'),
      { project: PROJECT, zone: zones[0], zones: zones.slice(1), acceleratorType: 'v4-16', ...more },
      '  capabilities: {costPerHour: 12.88}\n',
    );

  const runYaml = (name: string, command: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command: [sh, -c, ${JSON.stringify(command)}]
  resources: {tpus: 4}
  policy: {preemptible: true, maxAttempts: 4}
  backendSelector: {order: [tpu]}
`;

  let dataDir = '';
  async function start(files: Record<string, string>): Promise<Controller> {
    await c?.stop();
    await wt?.cleanup();
    dataDir = join(tmp, `data-${Date.now()}`);
    wt = await makeWorkTree({
      'backends/tpu.yaml': backendYaml([ZONE_A, ZONE_B]),
      'storage.yaml': FILE_STORAGE,
      'train.py': await readFile(TRAIN, 'utf8'),
      ...files,
    });
    c = await Controller.create({
      repo: wt.dir,
      dataDir,
      pollIntervalMs: 200,
    });
    await c.init();
    return c;
  }

  const passUntil = (what: string, done: () => boolean | Promise<boolean>, ms?: number) =>
    passesUntil(c!, what, done, ms);

  const st = (run: string) => c!.runStatus(run)?.status;
  /** Nodes the controller asked to delete (the fake finishes a delete when it is next read). */
  const deleted = () =>
    api.requests.filter((r) => r.method === 'DELETE').map((r) => r.path.split('/').at(-1)!);
  /** Nodes neither deleted nor being deleted. */
  const live = () => api.nodes().filter((n) => n.resource.state !== 'DELETING' && !deleted().includes(n.id));

  it('runs a job on both workers of a v4-16 slice with the multi-host contract, then deletes the node; sweeps an orphan', async () => {
    const out = join(tmp, 'out');
    await mkdir(out, { recursive: true });
    // A node carrying this backend's label that no attempt owns: swept at the first poll.
    api.seed(PROJECT, ZONE_A, 'orphan-1', {
      acceleratorType: 'v4-8',
      runtimeVersion: 'tpu-ubuntu2204-base',
      labels: { 'adventuretime-backend': 'tpu' },
    });
    expect(api.node(ZONE_A, 'orphan-1')).toBeDefined();
    await start({
      'runs/slice.yaml': runYaml(
        'slice',
        `echo "$ADV_PROCESS_ID $JAX_PROCESS_ID $TPU_WORKER_ID $JAX_NUM_PROCESSES $JAX_COORDINATOR_ADDRESS" > ${out}/worker-$TPU_WORKER_ID; echo "hello from worker $TPU_WORKER_ID"`,
      ),
    });
    await passUntil('the run to succeed', () => st('slice')?.phase === 'Succeeded');
    const attempt = st('slice')!.attempts[0]!;
    expect(attempt.backend).toBe('tpu');
    const node = api.requests.find((r) => r.method === 'POST' && r.query.nodeId?.startsWith('adv-slice-1'));
    expect(node?.body).toMatchObject({
      acceleratorType: 'v4-16',
      schedulingConfig: { spot: true },
      labels: { 'adventuretime-backend': 'tpu', 'adventuretime-run': 'slice', 'adventuretime-attempt': '1' },
    });
    const lines = await Promise.all([0, 1].map((k) => readFile(join(out, `worker-${k}`), 'utf8')));
    // Both workers ran it; each saw its own process id and the same coordinator (worker 0).
    const addresses = lines.map((l) => l.trim().split(' ')[4]);
    expect(addresses[0]).toBe(addresses[1]);
    expect(lines.map((l) => l.trim().split(' ').slice(0, 4).join(' '))).toEqual(['0 0 0 2', '1 1 1 2']);
    expect(addresses[0]).toMatch(/^127\.0\.0\.\d+:8476$/);
    // Each worker's output is in the store: adv logs shows worker 0, --worker 1 the other.
    const adv = async (...args: string[]) => {
      const io = captureIo({ ...process.env }, tmp);
      const code = await runCli(args, io);
      return { code, out: io.out(), err: io.err() };
    };
    const store = `file://${join(dataDir, 'store')}`;
    expect(await adv('logs', 'slice', '--store', store)).toMatchObject({
      code: 0,
      out: 'hello from worker 0\n',
    });
    expect(await adv('logs', 'slice', '--worker', '1', '--store', store)).toMatchObject({
      code: 0,
      out: 'hello from worker 1\n',
    });
    // Its cost: billed from the create, at the Backend's price.
    expect(attempt.price).toEqual({ perHour: 12.88, from: 'submitted' });
    const described = await adv('describe', 'run', 'slice', '--repo', wt!.dir);
    expect(described.code, described.err).toBe(0);
    expect(described.out).toMatch(/Cost: +\d+\.\d+ over 1 priced attempt/);
    expect(described.out).toMatch(/h × 12\.88\/h\)/);
    // Both deleted: the run's node when its attempt ended, the orphan at a poll.
    await passUntil('the node and the orphan deleted', () =>
      ['adv-slice-1', 'orphan-1'].every((n) => deleted().includes(n)),
    );
    expect(live()).toEqual([]);
  }, 240_000);

  it('a spot preemption mid-run deletes the node; the next attempt resumes from the committed step', async () => {
    const hold = join(tmp, 'hold');
    await writeFile(hold, '');
    await start({
      'runs/resume.yaml': runYaml(
        'resume',
        // Every worker trains and checkpoints: a step commits once each has written its part.
        `exec python3 train.py --steps 60 --ckpt-every 10 --step-sleep 0.02 --hold-at 20 --hold-file ${hold}`,
      ),
    });
    await passUntil(
      'checkpoint 20 committed on the TPU',
      () =>
        st('resume')?.attempts[0]?.phase === 'Running' && (st('resume')?.attempts[0]?.lastStep ?? 0) >= 20,
      // Both workers start, restore (worker 1 after worker 0's record) and write their part.
      300_000,
    );
    const id = st('resume')!.attempts[0]!.jobId!;
    const zone = api.nodes().find((n) => n.id === id)!.zone;
    await api.preempt(zone, id);
    await passUntil('attempt 1 preempted', () => st('resume')?.attempts[0]?.phase === 'Preempted');
    await passUntil('the preempted node deleted', () => deleted().includes(id));
    await rm(hold);
    await passUntil('resumed and finished', () => st('resume')?.phase === 'Succeeded', 180_000);
    const [first, second] = st('resume')!.attempts;
    expect(first).toMatchObject({ backend: 'tpu', phase: 'Preempted', reason: 'PREEMPTED' });
    expect(second).toMatchObject({
      backend: 'tpu',
      phase: 'Succeeded',
      startStep: first!.lastStep,
      lastStep: 60,
    });
    expect(first!.lastStep).toBeGreaterThanOrEqual(20);
  }, 360_000);

  it('a zone without capacity lands the run in the next zone', async () => {
    api.failCapacity(ZONE_A, true);
    try {
      await start({ 'runs/full.yaml': runYaml('full', 'true') });
      await passUntil('the run to succeed', () => st('full')?.phase === 'Succeeded');
      expect(st('full')!.attempts).toHaveLength(1);
      // Asked for in the first zone, which had no capacity, then created in the second.
      const creates = api.requests.filter((r) => r.method === 'POST' && r.query.nodeId === 'adv-full-1');
      expect(creates.map((r) => r.path.split('/')[5])).toEqual([ZONE_A, ZONE_B]);
      expect(api.nodes(ZONE_A)).toEqual([]);
    } finally {
      api.failCapacity(ZONE_A, false);
    }
  }, 240_000);

  it('cancelling deletes the node', async () => {
    const hold = join(tmp, 'hold-cancel');
    await writeFile(hold, '');
    await start({ 'runs/stop.yaml': runYaml('stop', `while [ -f ${hold} ]; do sleep 0.2; done`) });
    await passUntil('running', () => st('stop')?.attempts[0]?.phase === 'Running');
    // A live run with a priced backend: its cost so far is a metric.
    expect(await c!.metrics.text()).toMatch(/^adventuretime_run_cost\{run="stop"\} \d/m);
    const id = st('stop')!.attempts[0]!.jobId!;
    const zone = api.nodes().find((n) => n.id === id)!.zone;
    await wt!.write(
      'runs/stop.yaml',
      runYaml('stop', `while [ -f ${hold} ]; do sleep 0.2; done`).replace(
        'spec:\n',
        'spec:\n  suspend: true\n',
      ),
    );
    await wt!.commit('suspend stop');
    c!.requestFetch('test');
    await passUntil('cancelled', () => st('stop')?.attempts[0]?.phase === 'Cancelled');
    await passUntil('its node deleted', () => deleted().includes(id));
    expect(api.node(zone, id)?.resource.state ?? 'gone').not.toBe('READY');
    expect(existsSync(hold)).toBe(true);
  }, 240_000);

  it('a Backend edited while its node is being created: the new adapter adopts the node, no second one', async () => {
    const out = join(tmp, 'out-edit');
    await mkdir(out, { recursive: true });
    api.options.createReads = 1_000_000;
    try {
      await start({
        'runs/edit.yaml': runYaml('edit', `echo "$TPU_WORKER_ID" > ${out}/worker-$TPU_WORKER_ID`),
      });
      await passUntil('being created', () => api.nodes().some((n) => n.id === 'adv-edit-1'));
      // A change to the Backend spec remakes its adapter while the old one waits for READY.
      await wt!.write('backends/tpu.yaml', backendYaml([ZONE_A, ZONE_B], { readyTimeoutSec: 150 }));
      await wt!.commit('edit the backend');
      c!.requestFetch('test');
      await c!.pass(); // fetches, loads the edit, and remakes the adapter
    } finally {
      api.options.createReads = 1;
    }
    const node = api.nodes().find((n) => n.id === 'adv-edit-1')!;
    api.settleAtNextRead(node.zone, node.id);
    await passUntil('the run to succeed', () => st('edit')?.phase === 'Succeeded');
    expect(st('edit')!.attempts).toHaveLength(1);
    expect(api.requests.filter((r) => r.method === 'POST' && r.query.nodeId === 'adv-edit-1')).toHaveLength(
      1,
    );
    const seen = await Promise.all([0, 1].map((k) => readFile(join(out, `worker-${k}`), 'utf8')));
    expect(seen.map((l) => l.trim())).toEqual(['0', '1']);
    await passUntil('its node deleted', () => deleted().includes('adv-edit-1'));
  }, 240_000);

  it('a controller killed with SIGKILL during create leaves exactly one node, which the restarted one adopts', async () => {
    await c?.stop();
    c = undefined;
    await wt?.cleanup();
    const out = join(tmp, 'out-crash');
    await mkdir(out, { recursive: true });
    wt = await makeWorkTree({
      'backends/tpu.yaml': backendYaml([ZONE_A, ZONE_B]),
      'storage.yaml': FILE_STORAGE,
      'runs/crash.yaml': runYaml('crash', `echo "$JAX_PROCESS_ID" > ${out}/worker-$TPU_WORKER_ID`),
    });
    const dataDir = join(tmp, 'data-crash');
    const controller = (...extra: string[]) => {
      const args = ['controller', '--repo', wt!.dir, '--data-dir', dataDir, '--poll-interval', '200ms'];
      const proc = spawn(process.execPath, [ADV, ...args, '--log-level', 'warn', ...extra], {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, CLOUDSDK_CONFIG: process.env.CLOUDSDK_CONFIG },
      });
      let stderr = '';
      proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      const exit = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
      return { proc, exit, stderr: () => stderr };
    };
    const creates = () => api.requests.filter((r) => r.method === 'POST' && r.query.nodeId === 'adv-crash-1');
    // The node stays CREATING until released, so the kill lands while it is being created.
    api.options.createReads = 1_000_000;
    try {
      const first = controller();
      await waitFor(() => creates().length === 1, { what: 'the create request', timeoutMs: 90_000 });
      first.proc.kill('SIGKILL');
      await first.exit;
    } finally {
      api.options.createReads = 1;
    }
    const node = api.nodes().find((n) => n.id === 'adv-crash-1')!;
    expect(node.resource.state).toBe('CREATING');
    api.settleAtNextRead(node.zone, node.id);
    const second = controller('--once', '--timeout', '4m');
    expect(await second.exit, second.stderr()).toBe(0);
    const doc = parse(await wt.git('show', 'adventuretime/status:runs/crash.yaml')) as RunStatusDoc;
    expect(doc.status.phase).toBe('Succeeded');
    expect(doc.status.attempts.map((a) => [a.n, a.backend, a.phase])).toEqual([[1, 'tpu', 'Succeeded']]);
    // Exactly one node was ever asked for; the restarted controller ran the job on both its workers.
    expect(creates()).toHaveLength(1);
    const seen = await Promise.all([0, 1].map((k) => readFile(join(out, `worker-${k}`), 'utf8')));
    expect(seen.map((l) => l.trim())).toEqual(['0', '1']);
    // …and deleted it before it exited.
    expect(deleted()).toContain('adv-crash-1');
  }, 300_000);
});
