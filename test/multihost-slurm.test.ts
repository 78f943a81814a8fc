/**
 * A 2-process JAX + Orbax job (examples/multihost/train_jax.py: a (256, 256) array sharded over a
 * 2 × 2 device mesh spanning both processes, gloo collectives) on the real two-node SLURM of this
 * machine, with the checkpoint mode the backend chooses (`auto`: one shared dir on the cluster's
 * file system). SLURM's own stop notice — USR1 to the batch shell, what `--signal=B:USR1@grace`
 * sends before the time limit — reaches a workload that handles only SIGTERM: both processes
 * agree on a step, Orbax saves it, the gang commits it, and the next attempt restores it on both
 * processes and ends with parameters bit-identical to an uninterrupted run.
 */
import { execFileSync } from 'node:child_process';
import { writeFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { FILE_STORAGE, slurmAvailable, slurmBackendYaml, useSlurmCluster } from './helpers/backends/kinds.js';
import { captureIo } from './helpers/io.js';
import { finalParams, manifestAt, multihostFiles, referenceParams } from './helpers/python/multihost.js';
import { PYTHON, pythonAvailable } from './helpers/python/python.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { passUntil } from './helpers/wait.js';

const available =
  slurmAvailable('the multi-host SLURM checkpoint test') &&
  pythonAvailable('the multi-host SLURM checkpoint test');
const ARGS = ['--steps', '30', '--ckpt-every', '5'];

describe.runIf(available)('a 2-node JAX + Orbax job on the real SLURM', () => {
  const cluster = useSlurmCluster('adv-mh-slurm-');
  let wt: WorkTree | undefined;
  let c: Controller | undefined;
  cluster.defer(async () => {
    await c?.stop();
    await wt?.cleanup();
  });

  it('stopped by SLURM’s USR1 notice, it commits its last step as a gang and resumes bit-identical', async () => {
    const reference = await referenceParams('train_jax.py', 2, ARGS);
    const hold = join(cluster.tmp, 'hold');
    await writeFile(hold, '');
    const dataDir = join(cluster.tmp, 'data');
    wt = await makeWorkTree({
      'backends/slurm-local.yaml': slurmBackendYaml(cluster.sshd, join(cluster.tmp, 'root'), 'debug'),
      'storage.yaml': FILE_STORAGE,
      ...(await multihostFiles()),
      'runs/orbax.yaml': `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: orbax}
spec:
  command: ${JSON.stringify([PYTHON, 'train_jax.py', ...ARGS, '--hold-file', hold, '--hold-at', '12'])}
  resources: {nodes: 2}
  policy: {maxAttempts: 3}
  backendSelector: {order: [slurm-local]}
`,
    });
    c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 300 });
    await c.init();
    const st = () => c!.runStatus('orbax')?.status;
    /** A failed wait with what the jobs said: the status, SLURM's output files, the workloads' logs. */
    const explain = (e: Error): never => {
      const out = execFileSync('sh', [
        '-c',
        `tail -n 30 ${cluster.tmp}/root/work/*/slurm-*.out; for f in $(find ${dataDir}/store/runs/orbax/attempts -path '*logs/part-*' | sort); do echo "== $f"; tail -n 15 $f; done; true`,
      ]);
      throw new Error(`${e.message}\nstatus: ${JSON.stringify(st())}\n${out.toString()}`);
    };
    // The attempt running now (an earlier one may have been lost to the machine, not to the test).
    const cur = () => st()?.attempts.at(-1);
    await passUntil(
      c,
      'checkpoint 10 committed by both processes',
      () => cur()?.phase === 'Running' && (cur()?.lastStep ?? 0) >= 10,
      Number(process.env.MH_WAIT_MS ?? 300_000),
    ).catch(explain);
    const store = join(dataDir, 'store');
    const ten = await manifestAt(store, 'orbax', 10);
    expect(ten?.processes).toBe(2);
    // Orbax wrote each process's shards into the one shared dir; the manifest has them all.
    expect(ten?.files.map((f) => f.path)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^default\/ocdbt\.process_0\//),
        expect.stringMatching(/^default\/ocdbt\.process_1\//),
        'default/array_metadatas/process_0',
        'default/array_metadatas/process_1',
      ]),
    );

    // What SLURM does `grace` seconds before the time limit: USR1 to the batch shell.
    const stopped = cur()!.n;
    execFileSync('scancel', ['--batch', '--signal=USR1', cur()!.jobId!]);
    const nth = (n: number) => st()?.attempts.find((a) => a.n === n);
    await passUntil(c, `attempt ${stopped} ended`, () => nth(stopped)?.phase !== 'Running', 180_000).catch(
      explain,
    );
    await rm(hold);
    await passUntil(c, 'resumed and finished', () => st()?.phase === 'Succeeded', 300_000).catch(explain);
    const first = nth(stopped)!;
    const second = nth(stopped + 1)!;
    expect(first, JSON.stringify(first)).toMatchObject({ phase: 'Preempted' });
    // The step both processes stopped at (held at 12 until the notice) is the one resumed from.
    expect(first.lastStep).toBeGreaterThanOrEqual(12);
    expect(second).toMatchObject({ phase: 'Succeeded', startStep: first.lastStep, lastStep: 30 });
    expect((await manifestAt(store, 'orbax', first.lastStep!))?.processes).toBe(2);

    const logs = async (...extra: string[]) => {
      const io = captureIo({ ...process.env }, cluster.tmp);
      const code = await runCli(['logs', 'orbax', '--store', `file://${store}`, ...extra], io);
      expect(code, io.err()).toBe(0);
      return io.out();
    };
    const zero = await logs('--attempt', String(second.n));
    const one = await logs('--attempt', String(second.n), '--worker', '1');
    // Both processes restored the same step, and the result is the uninterrupted run's.
    expect(zero).toContain(`process 0/2: restored step ${first.lastStep}`);
    expect(one).toContain(`process 1/2: restored step ${first.lastStep}`);
    expect(finalParams(zero)).toBe(reference);
  }, 900_000);
});
