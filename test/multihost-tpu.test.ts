/**
 * Multi-host jobs on a two-worker TPU slice (v4-16) whose workers have separate disks: the real
 * `gcloud` against the fake Cloud TPU API, the workers served by the real sshd on two loopback
 * addresses, each worker's job dir its own. A spot preemption mid-run stops both workers' processes
 * as a VM shutdown does (SIGTERM to everything, SIGKILL 30 s later: the spot notice); the next
 * attempt, on a new node, resumes, and both jobs end with parameters bit-identical to an
 * uninterrupted run:
 * - JAX + Orbax through a shared mount the Backend declares (`gcpTpu.sharedMount`, as a Filestore
 *   volume mounted on every worker): Orbax's finalize sees every process's shards;
 * - torch DCP with no shared disk at all (`checkpoint.mode: per-process`): each worker uploads its
 *   own rank's file, process 0 commits the union, and each rank gets the whole step back.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { FILE_STORAGE, gcloudAvailable, gcpTpuBackendYaml } from './helpers/backends/kinds.js';
import { startFakeTpuApi, type FakeTpuApi } from './helpers/cloud/fake-tpu-api.js';
import { killTree } from './helpers/processes.js';
import { captureIo } from './helpers/io.js';
import { jobOutputs, jobPids } from './helpers/backends/job-pids.js';
import {
  finalParams,
  manifestAt,
  multihostFiles,
  referenceParams,
  type Job,
} from './helpers/python/multihost.js';
import { PYTHON, pythonAvailable } from './helpers/python/python.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { startSshd, type Sshd } from './helpers/servers/sshd.js';
import { passUntil as passesUntil } from './helpers/wait.js';

const available =
  gcloudAvailable('the multi-host TPU checkpoint tests') &&
  pythonAvailable('the multi-host TPU checkpoint tests');
const PROJECT = 'adv-test-project';
const ZONE = 'us-central2-b';
const WORKERS = Array.from({ length: 6 }, (_, i) => `127.0.0.${i + 20}`);
const ARGS = ['--steps', '30', '--ckpt-every', '5'];

describe.runIf(available)('multi-host checkpoints on a TPU slice with one disk per worker', () => {
  let tmp: string;
  let sshd: Sshd;
  let api: FakeTpuApi;
  let wt: WorkTree | undefined;
  let c: Controller | undefined;
  const savedConfig = process.env.CLOUDSDK_CONFIG;
  const workerPids = () => jobPids(join(tmp, 'tpu-root', 'work'));

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-mh-tpu-'));
    // The "Filestore volume" every worker has mounted.
    await mkdir(join(tmp, 'filestore'));
    sshd = await startSshd({ addresses: WORKERS });
    api = await startFakeTpuApi({
      addresses: WORKERS,
      // A spot VM gets 30 s between the shutdown notice and the power-off.
      onPreempt: async (node) =>
        killTree(
          await jobPids(join(tmp, 'tpu-root', 'work'), (d) => d === node.id || d.startsWith(`${node.id}-w`)),
          {
            graceMs: 30_000,
          },
        ),
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
    await killTree(await workerPids()).catch(() => {});
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  const backendYaml = (name: string, more: Record<string, unknown>) =>
    gcpTpuBackendYaml(sshd, name, join(tmp, 'tpu-root'), {
      project: PROJECT,
      zone: ZONE,
      acceleratorType: 'v4-16',
      ...more,
    });

  /** Runs `job` on `backend` held at step 12, preempts the node, resumes; returns the logs and attempts. */
  async function preemptAndResume(run: string, job: Job, backend: string, mode: string) {
    const hold = join(tmp, `hold-${run}`);
    await writeFile(hold, '');
    await c?.stop();
    await wt?.cleanup();
    const dataDir = join(tmp, `data-${run}`);
    wt = await makeWorkTree({
      'backends/tpu-shared.yaml': backendYaml('tpu-shared', { sharedMount: join(tmp, 'filestore') }),
      'backends/tpu.yaml': backendYaml('tpu', {}),
      'storage.yaml': FILE_STORAGE,
      ...(await multihostFiles()),
      [`runs/${run}.yaml`]: `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${run}}
spec:
  command: ${JSON.stringify([PYTHON, job, ...ARGS, '--hold-file', hold, '--hold-at', '12'])}
  resources: {tpus: 4}
  checkpoint: {mode: ${mode}}
  policy: {preemptible: true, maxAttempts: 4}
  backendSelector: {order: [${backend}]}
`,
    });
    c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 200 });
    await c.init();
    const st = () => c!.runStatus(run)?.status;
    const passUntil = (what: string, done: () => boolean, ms = 300_000) => passesUntil(c!, what, done, ms);
    await passUntil(
      'checkpoint 10 committed by both workers',
      () => st()?.attempts[0]?.phase === 'Running' && (st()?.attempts[0]?.lastStep ?? 0) >= 10,
    );
    const store = join(dataDir, 'store');
    expect((await manifestAt(store, run, 10))?.processes).toBe(2);
    const id = st()!.attempts[0]!.jobId!;
    await api.preempt(ZONE, id);
    await passUntil('attempt 1 preempted', () => st()?.attempts[0]?.phase === 'Preempted');
    await rm(hold);
    await passUntil('resumed and finished', () => st()?.phase === 'Succeeded');
    const [first, second] = st()!.attempts;
    const logs = async (worker: number) => {
      const io = captureIo({ ...process.env }, tmp);
      const code = await runCli(
        ['logs', run, '--store', `file://${store}`, '--attempt', '2', '--worker', String(worker)],
        io,
      );
      expect(code, io.err()).toBe(0);
      return io.out();
    };
    const [zero, one] = [await logs(0), await logs(1)];
    const said = await jobOutputs(join(tmp, 'tpu-root', 'work'), (d) => d.includes(run));
    expect(second, `attempt 2's status; what adv exec said on each worker:\n${said}`).toMatchObject({
      phase: 'Succeeded',
      startStep: first!.lastStep,
      lastStep: 30,
    });
    return { first: first!, store, zero, one };
  }

  it('JAX + Orbax through the declared shared mount: preempted, resumed on a new node, bit-identical', async () => {
    const reference = await referenceParams('train_jax.py', 2, ARGS);
    const { first, store, zero, one } = await preemptAndResume(
      'orbax',
      'train_jax.py',
      'tpu-shared',
      'shared',
    );
    const manifest = await manifestAt(store, 'orbax', first.lastStep!);
    expect(manifest?.processes).toBe(2);
    expect(manifest?.files.map((f) => f.path)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^default\/ocdbt\.process_1\//),
        'default/array_metadatas/process_1',
      ]),
    );
    expect(zero).toContain(`process 0/2: restored step ${first.lastStep}`);
    expect(one).toContain(`process 1/2: restored step ${first.lastStep}`);
    expect(finalParams(zero)).toBe(reference);
  }, 900_000);

  it('torch DCP with no shared disk: each rank’s file is committed as one step, and restored to both', async () => {
    const reference = await referenceParams('train_torch_dcp.py', 2, ARGS);
    const { first, store, zero, one } = await preemptAndResume(
      'dcp',
      'train_torch_dcp.py',
      'tpu',
      'per-process',
    );
    const manifest = await manifestAt(store, 'dcp', first.lastStep!);
    expect(manifest?.processes).toBe(2);
    expect(manifest?.files.map((f) => f.path).sort()).toEqual(['.metadata', '__0_0.distcp', '__1_0.distcp']);
    expect(zero).toContain(`rank 0/2: restored step ${first.lastStep}`);
    expect(one).toContain(`rank 1/2: restored step ${first.lastStep}`);
    expect(finalParams(zero)).toBe(reference);
  }, 900_000);
});
