/**
 * The slurm backend on a real SLURM (Debian slurm-wlm: slurmctld + two slurmd + munge on this
 * machine), driven over a real sshd: a multi-node run with the JAX multi-host contract, a real
 * preemption by a higher-priority job, and sbatch's own refusal as a clear condition.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import pino from 'pino';
import { gitCodeExporter } from '../controller/backends/code.js';
import { BACKENDS } from '../controller/backends/registry.js';
import { SlurmBackend } from '../controller/backends/slurm/adapter.js';
import { mapSlurmState, slurmBackend } from '../controller/backends/slurm/index.js';
import { SshBackend } from '../controller/backends/ssh/adapter.js';
import { defaultSshTransport } from '../controller/transport/ssh.js';
import { NativeGit } from '../controller/git/native.js';
import { slurmAvailable, SLURM_INFRA, slurmBackendYaml, useSlurmCluster } from './helpers/backends/kinds.js';
import { sshConnection, startSshd } from './helpers/servers/sshd.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const INFRA = SLURM_INFRA;
const available = slurmAvailable('the SLURM tests');

describe.runIf(available)('slurm backend on a real SLURM', () => {
  const cluster = useSlurmCluster('adv-slurm-');
  let wt: WorkTree;
  let c: Controller;
  cluster.defer(async () => {
    await c?.stop();
    await wt?.cleanup();
  });

  const settle = async (names: string[], done: (n: string) => boolean, ms = 90_000) => {
    try {
      await waitFor(
        `${names.join(', ')} settled`,
        async () => {
          await c.pass();
          return names.every(done);
        },
        ms,
        300,
      );
    } catch (e) {
      const states = names.map((n) => `${n}: ${JSON.stringify(c.runStatus(n)?.status ?? 'no status')}`);
      throw new Error(`${(e as Error).message}\n${states.join('\n')}`);
    }
  };

  it('runs a two-node job with the multi-host contract, preempts one for real, and reports sbatch refusals', async () => {
    const probe = `sh -c 'echo "$JAX_PROCESS_ID $JAX_NUM_PROCESSES $JAX_COORDINATOR_ADDRESS $ADV_LOCAL_DEVICE_COUNT $SLURMD_NODENAME" > "${cluster.tmp}/proc-$JAX_PROCESS_ID"'`;
    wt = await makeWorkTree({
      'backends/slurm-local.yaml': slurmBackendYaml(cluster.sshd, join(cluster.tmp, 'root'), 'debug'),
      'backends/slurm-bad.yaml': slurmBackendYaml(
        cluster.sshd,
        join(cluster.tmp, 'root'),
        'nope',
        'slurm-bad',
      ),
      'runs/multi.yaml': `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: multi}
spec:
  command: ${JSON.stringify(['sh', '-c', probe.slice(7, -1)])}
  resources: {gpus: 1, nodes: 2}
  backendSelector: {order: [slurm-local]}
`,
      'runs/bad-partition.yaml': `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: bad-partition}
spec:
  command: ['true']
  backendSelector: {order: [slurm-bad]}
`,
    });
    c = await Controller.create({ repo: wt.dir, dataDir: join(cluster.tmp, 'data'), pollIntervalMs: 300 });
    await c.init();
    await settle(['multi', 'bad-partition'], (n) =>
      n === 'multi'
        ? c.runStatus(n)?.status.phase === 'Succeeded'
        : c.runStatus(n)?.status.reason === 'SubmitFailed',
    );
    const lines = (
      await Promise.all([0, 1].map((i) => readFile(join(cluster.tmp, `proc-${i}`), 'utf8')))
    ).map((l) => l.trim().split(' '));
    expect(lines.map((l) => l.slice(0, 2))).toEqual([
      ['0', '2'],
      ['1', '2'],
    ]);
    // The first node's NodeAddr (n1 is 127.0.0.1 here, and its name resolves nowhere).
    expect(lines[0]![2]).toBe('127.0.0.1:29500');
    expect(lines.map((l) => l[3])).toEqual(['1', '1']);
    expect(lines.map((l) => l[4]).sort()).toEqual(['n1', 'n2']);
    // Capacity from one sinfo: the idle cluster has 2 nodes × 2 GPUs in each partition.
    const git = new NativeGit(join(wt.dir, '.git'));
    const ctx = {
      dataDir: cluster.tmp,
      logger: pino({ level: 'silent' }),
      now: Date.now,
      code: gitCodeExporter(git),
      ssh: defaultSshTransport,
    };
    const backend = new SlurmBackend(
      'cap',
      { type: 'slurm', connection: sshConnection(cluster.sshd), slurm: { partitions: [{ name: 'debug' }] } },
      ctx,
    );
    expect(await backend.capacity()).toEqual({
      freeGpus: 4,
      partitions: [{ partition: 'debug', gpuType: 'any', totalGpus: 4, freeGpus: 4 }],
    });
    // …and no GPUs on the ssh side of this machine, with the reason.
    const host = new SshBackend('h', { type: 'ssh', connection: sshConnection(cluster.sshd) }, ctx);
    expect(await host.capacity()).toMatchObject({
      freeGpus: 0,
      gpus: [],
      note: expect.stringMatching(/^nvidia-smi is not available on /),
    });
    await backend.close();
    await host.close();
    await git.close();
    expect(c.runStatus('bad-partition')!.status.message).toMatch(
      /sbatch on .* refused the job: sbatch: error: .*(invalid partition|Invalid partition)/i,
    );

    // A long run on the preemptible partition, then a higher-priority job that needs its nodes.
    await wt.write(
      'runs/victim.yaml',
      `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: victim}
spec:
  command: [sleep, '300']
  resources: {nodes: 2}
  policy: {maxInfraAttempts: 1}
  backendSelector: {order: [slurm-local]}
`,
    );
    await wt.commit('add victim');
    c.requestFetch('test');
    await settle(['victim'], (n) => c.runStatus(n)?.status.phase === 'Running', 60_000);
    execFileSync('sbatch', ['--parsable', '-p', 'high', '-N2', '-o', '/dev/null', '--wrap', 'sleep 2']);
    await settle(['victim'], (n) => c.runStatus(n)?.status.attempts[0]?.phase === 'Preempted', 60_000);
    const a = c.runStatus('victim')!.status.attempts[0]!;
    expect(a).toMatchObject({
      phase: 'Preempted',
      reason: 'PREEMPTED',
      message: 'preempted by a higher-priority job',
    });
    expect(c.runStatus('victim')!.status.phase).toBe('Failed'); // maxInfraAttempts: 1
  }, 240_000);
});

describe.runIf(available)('a submit whose answer is lost', () => {
  it('is found by name on the next pass: one job in SLURM, adopted, never a second attempt', async () => {
    execFileSync(join(INFRA, 'slurm-start.sh'), { stdio: 'ignore' });
    const sshd = await startSshd();
    const tmp = await mkdtemp(join(tmpdir(), 'adv-slurm-drop-'));
    const wt = await makeWorkTree({
      'backends/slurm-local.yaml': slurmBackendYaml(sshd, join(tmp, 'root'), 'debug'),
      'runs/once.yaml': `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: once}
spec:
  command: [sleep, '1']
  backendSelector: {order: [slurm-local]}
`,
    });
    // The first submit reaches sbatch, then the connection "drops" before the answer arrives.
    let dropped = false;
    const { AdvError, ErrorCode } = await import('../controller/errors.js');
    const flaky: typeof slurmBackend = {
      ...slurmBackend,
      create: async (spec, ctx) => {
        const real = (await slurmBackend.create(spec, ctx)) as SlurmBackend;
        const submit = real.submit.bind(real);
        real.submit = async (jobs) => {
          const r = await submit(jobs);
          if (dropped) return r;
          dropped = true;
          throw new AdvError(
            ErrorCode.BackendError,
            'ssh: the connection dropped during sh; its outcome is unknown',
            { unreachable: true, unknownOutcome: true },
          );
        };
        return real;
      },
    };
    const c = await Controller.create({
      repo: wt.dir,
      dataDir: join(tmp, 'data'),
      pollIntervalMs: 200,
      backends: BACKENDS.map((d) => (d.type === 'slurm' ? flaky : d)),
    });
    c.queue.addRateLimited = () => 0; // retry at once rather than after a backoff
    try {
      await c.init();
      await waitFor(
        'once Succeeded',
        async () => {
          await c.pass();
          c.queue.add('Run/once');
          return c.runStatus('once')?.status.phase === 'Succeeded';
        },
        60_000,
        200,
      );
      expect(dropped).toBe(true);
      expect(c.runStatus('once')!.status.attempts).toHaveLength(1);
      const jobs = execFileSync('scontrol', ['-o', 'show', 'job'])
        .toString()
        .split('\n')
        .filter((l) => l.includes('JobName=adv-once-1 '));
      expect(jobs).toHaveLength(1);
    } finally {
      await c.stop();
      await wt.cleanup();
      await sshd.stop();
      await rm(tmp, { recursive: true, force: true });
      execFileSync(join(INFRA, 'slurm-stop.sh'));
    }
  }, 120_000);
});

describe('SLURM state mapping', () => {
  it.each([
    ['PENDING', 'Priority', 0, 'Pending'],
    ['RUNNING', 'None', 0, 'Running'],
    ['COMPLETING', 'None', 0, 'Running'],
    ['COMPLETED', 'None', 0, 'Succeeded'],
    ['FAILED', 'NonZeroExitCode', 3, 'Failed'],
    ['CANCELLED', 'None', 0, 'Cancelled'],
    ['TIMEOUT', 'TimeLimit', 0, 'Failed'],
    ['PREEMPTED', 'None', 0, 'Preempted'],
    ['NODE_FAIL', 'None', 0, 'Lost'],
    ['BOOT_FAIL', 'None', 0, 'Lost'],
    ['OUT_OF_MEMORY', 'None', 0, 'Failed'],
    ['DEADLINE', 'None', 0, 'Failed'],
    ['REQUEUED', 'None', 0, 'Pending'],
  ] as const)('%s → %s', (state, reason, exitCode, expected) => {
    expect(mapSlurmState({ jobId: '1', jobName: 'j', state, reason, exitCode }).state).toBe(expected);
  });
});
