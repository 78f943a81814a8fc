/**
 * A 2-rank torch DCP job (examples/multihost/train_torch_dcp.py: a row-sharded DTensor over gloo)
 * as a two-replica Volcano gang with no shared disk: the real `kubectl` against the fake Kubernetes
 * API + Volcano, each pod a local process in its own mount namespace with its own `emptyDir`. Every
 * pod's `adv exec` uploads its own rank's file; process 0 commits the step once both parts are in.
 * An eviction of pod 0 mid-run is a preemption: both ranks agree on a step and save it within the
 * grace period, and the next attempt gives each rank the whole step, resuming to parameters
 * bit-identical to an uninterrupted run.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { fileStorageYaml, volcanoBackendYaml } from './helpers/backends/kinds.js';
import { k8sAvailable, podLogs, startFakeK8s, type FakeK8s } from './helpers/k8s/fake-k8s.js';
import { captureIo } from './helpers/io.js';
import { finalParams, manifestAt, multihostFiles, referenceParams } from './helpers/python/multihost.js';
import { PYTHON, pythonAvailable } from './helpers/python/python.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { passUntil } from './helpers/wait.js';

const available =
  k8sAvailable('the multi-host volcano checkpoint test') &&
  pythonAvailable('the multi-host volcano checkpoint test');
const NS = 'default';
const ARGS = ['--steps', '30', '--ckpt-every', '5'];

describe.runIf(available)('a 2-replica torch DCP gang on Volcano, no shared disk', () => {
  let tmp: string;
  let store: string;
  let k8s: FakeK8s;
  let wt: WorkTree | undefined;
  let c: Controller | undefined;

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-mh-volcano-'));
    store = join(tmp, 'store');
    await mkdir(store, { recursive: true });
    process.env.KUBECACHEDIR = join(tmp, 'kube-cache');
    k8s = await startFakeK8s({
      dir: join(tmp, 'k8s'),
      queues: [{ name: 'default', capability: { 'nvidia.com/gpu': '8', cpu: '64', memory: '256Gi' } }],
      pvcs: { [`${NS}/adv-store`]: store },
    });
  }, 60_000);

  afterAll(async () => {
    await c?.stop();
    await wt?.cleanup();
    await k8s?.close();
    delete process.env.KUBECACHEDIR;
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('an eviction mid-run commits both ranks’ files as one step; the next gang resumes bit-identical', async () => {
    const reference = await referenceParams('train_torch_dcp.py', 2, ARGS);
    const hold = join(tmp, 'hold');
    await writeFile(hold, '');
    wt = await makeWorkTree({
      'backends/k8s.yaml': volcanoBackendYaml(k8s, 'k8s', {
        graceSec: 30,
        volumes: [{ claimName: 'adv-store', mountPath: store }],
      }),
      'storage.yaml': fileStorageYaml(store),
      ...(await multihostFiles()),
      'runs/dcp.yaml': `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: dcp}
spec:
  command: ${JSON.stringify([PYTHON, 'train_torch_dcp.py', ...ARGS, '--hold-file', hold, '--hold-at', '12'])}
  resources: {gpus: 1, nodes: 2}
  policy: {maxAttempts: 2}
`,
    });
    c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data'), pollIntervalMs: 200 });
    await c.init();
    const st = () => c!.runStatus('dcp')?.status;
    await passUntil(
      c,
      'checkpoint 10 committed by both ranks',
      () => st()?.attempts[0]?.phase === 'Running' && (st()?.attempts[0]?.lastStep ?? 0) >= 10,
      300_000,
    );
    // Each pod's emptyDir held one rank's file; the committed step has both, and rank 0's .metadata.
    const ten = await manifestAt(store, 'dcp', 10);
    expect(ten?.processes).toBe(2);
    expect(ten?.files.map((f) => f.path).sort()).toEqual(['.metadata', '__0_0.distcp', '__1_0.distcp']);

    const name = st()!.attempts[0]!.jobId!;
    await k8s.evict(NS, `${name}-worker-0`);
    await passUntil(c, 'attempt 1 preempted', () => st()?.attempts[0]?.phase === 'Preempted', 180_000);
    await rm(hold);
    await passUntil(c, 'resumed and finished', () => st()?.phase === 'Succeeded', 300_000);
    const [first, second] = st()!.attempts;
    // Held at 12 until the eviction: the step both ranks saved in the grace period is resumed from.
    expect(first!.lastStep).toBeGreaterThanOrEqual(12);
    expect(
      second,
      `the attempts: ${JSON.stringify(st()!.attempts, null, 1)}\nwhat each pod said:\n${await podLogs(join(tmp, 'k8s'))}`,
    ).toMatchObject({ phase: 'Succeeded', startStep: first!.lastStep, lastStep: 30 });
    const last = await manifestAt(store, 'dcp', first!.lastStep!);
    expect(last?.files.map((f) => f.path).sort()).toEqual(['.metadata', '__0_0.distcp', '__1_0.distcp']);
    const logs = async (worker: number) => {
      const io = captureIo({ ...process.env }, tmp);
      const code = await runCli(
        ['logs', 'dcp', '--store', `file://${store}`, '--attempt', '2', '--worker', String(worker)],
        io,
      );
      expect(code, io.err()).toBe(0);
      return io.out();
    };
    const zero = await logs(0);
    expect(zero).toContain(`rank 0/2: restored step ${first!.lastStep}`);
    expect(await logs(1)).toContain(`rank 1/2: restored step ${first!.lastStep}`);
    expect(finalParams(zero)).toBe(reference);
  }, 900_000);
});
