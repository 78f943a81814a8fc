/**
 * What the slurm backend launches for a two-node job, run for real in `sh`: its batch script, with
 * stand-ins for `srun` (two tasks, each a process group, as SLURM tracks a step's processes),
 * `scancel` (signals every process of the step) and `scontrol`, and the bootstrap in each task
 * starting a stand-in `adv exec` that records its arguments, environment and the signals it gets.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/helpers/wait.js';
import { bootstrapScript, envFile, remoteJobEnv } from '../remote/bootstrap.js';
import type { BackendContext, JobRequest } from '../types.js';
import { SlurmBackend } from './adapter.js';
import type { Backend as BackendObject } from '../../spec/schema.js';

/** Records argv and the contract it was given, then the signals it gets; ends at the first. */
const FAKE_EXEC = `import { appendFileSync, writeFileSync } from 'node:fs';
const k = process.env.ADV_PROCESS_ID ?? '0';
const out = process.env.FAKE_OUT;
const keep = Object.fromEntries(Object.entries(process.env).filter(([n]) => n.startsWith('ADV_') || n.startsWith('JAX_')));
for (const s of ['SIGTERM', 'SIGINT', 'SIGUSR1', 'SIGUSR2'])
  process.on(s, () => { appendFileSync(out + '/signals-' + k, s + '\\n'); process.exit(k === '0' ? 143 : 3); });
writeFileSync(out + '/exec-' + k + '.json', JSON.stringify({ argv: process.argv.slice(2), env: keep }));
setInterval(() => {}, 1000);
`;

/**
 * srun: one task per "node", each its own process group, with default signal dispositions (a
 * shell's `&` would start them with SIGINT ignored); exits with the highest task code.
 */
const FAKE_SRUN = `#!/usr/bin/env node
const { spawn } = require('node:child_process');
const { appendFileSync, writeFileSync } = require('node:fs');
const { constants } = require('node:os');
const [cmd, ...args] = process.argv.slice(3);
const out = process.env.FAKE_OUT;
const codes = [];
let left = 2;
for (const k of [0, 1]) {
  const env = { ...process.env, SLURM_PROCID: String(k), SLURM_LOCALID: '0', SLURM_NTASKS_PER_NODE: '1' };
  const p = spawn(cmd, args, { detached: true, stdio: 'inherit', env });
  appendFileSync(out + '/tasks', p.pid + '\\n');
  p.on('exit', (code, sig) => {
    codes[k] = code ?? 128 + constants.signals[sig];
    if (--left === 0) {
      writeFileSync(out + '/task-codes', codes.join('\\n') + '\\n');
      process.exit(Math.max(...codes));
    }
  });
}
`;

/** scancel --signal=SIG JOB: every process of the step (each task's group), never the batch shell. */
const FAKE_SCANCEL = `#!/bin/sh
echo "$@" >> "$FAKE_OUT/scancel"
sig=\${1#--signal=}
for p in $(cat "$FAKE_OUT/tasks"); do kill -s "$sig" -- -"$p"; done
`;

const FAKE_SCONTROL = `#!/bin/sh
case "$2" in
hostnames) printf 'n1\\nn2\\n' ;;
node) echo "NodeName=$3 Arch=x86_64 CoresPerSocket=1"; echo "   NodeAddr=10.1.0.\${3#n} NodeHostName=$3 Version=22.05.8" ;;
esac
`;

const ctx = {
  dataDir: '/nonexistent',
  logger: pino({ level: 'silent' }),
  now: Date.now,
  code: {} as BackendContext['code'],
  ssh: () => ({ where: 'x', exec: () => Promise.reject(new Error('no ssh here')), close() {} }),
} as unknown as BackendContext;

const spec: BackendObject['spec'] = {
  type: 'slurm',
  connection: { host: 'login' },
  slurm: { coordinatorPort: 29500 },
};

const job = (over: Partial<JobRequest['spec']> = {}): JobRequest => ({
  jobName: 'adv-pair-1',
  run: 'pair',
  attempt: 1,
  spec: { resources: { nodes: 2 }, ...over },
  argv: ['python3', 'train.py'],
  code: { commit: 'c0ffee' },
  env: { LR: '0.1' },
});

describe('slurm: what a two-node job launches', () => {
  let tmp: string;
  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-slurm-launch-'));
  });
  /** What a test started, stopped whatever happened to it (its tasks are process groups). */
  const started_: { batch: ChildProcess; out: string }[] = [];
  afterAll(async () => {
    for (const { batch, out } of started_) {
      const tasks = await readFile(join(out, 'tasks'), 'utf8').catch(() => '');
      for (const pid of tasks.split('\n').filter(Boolean)) {
        try {
          process.kill(-Number(pid), 'SIGKILL');
        } catch {
          // already gone
        }
      }
      batch.kill('SIGKILL');
    }
    await rm(tmp, { recursive: true, force: true });
  });

  /** Runs the batch script as slurmd would, in the job dir. */
  const sbatch = (dir: string, out: string, env: NodeJS.ProcessEnv): ChildProcess => {
    const batch = spawn('sh', [join(dir, 'job.sbatch')], { cwd: dir, env, stdio: 'ignore' });
    started_.push({ batch, out });
    return batch;
  };

  /** The job dir as `submit` writes it, plus the stand-ins; returns the batch shell's env. */
  async function prepare(
    name: string,
    request: JobRequest,
  ): Promise<{ dir: string; out: string; env: NodeJS.ProcessEnv }> {
    const dir = join(tmp, name);
    const out = join(tmp, `${name}-out`);
    const bin = join(tmp, `${name}-bin`);
    await Promise.all([mkdir(dir), mkdir(out), mkdir(bin)]);
    const backend = new SlurmBackend('slurm-a', spec, ctx);
    const j = backend.withCheckpointMode(request, dir);
    const at = {
      dir,
      codePath: join(tmp, 'code.tar.gz'),
      bundlePath: join(tmp, 'fake-exec.mjs'),
      cacheDir: join(tmp, 'cache'),
    };
    await writeFile(at.codePath, gzipSync(Buffer.alloc(1024)));
    await writeFile(at.bundlePath, FAKE_EXEC);
    await writeFile(join(dir, 'env'), envFile(remoteJobEnv(j, at)));
    await writeFile(join(dir, 'run.sh'), bootstrapScript(j));
    await writeFile(join(dir, 'job.sbatch'), backend.batchScript(j, dir));
    for (const [tool, body] of [
      ['srun', FAKE_SRUN],
      ['scancel', FAKE_SCANCEL],
      ['scontrol', FAKE_SCONTROL],
    ] as const) {
      await writeFile(join(bin, tool), body);
      await chmod(join(bin, tool), 0o755);
    }
    const env = {
      PATH: `${bin}:${process.env.PATH}`,
      HOME: tmp,
      FAKE_OUT: out,
      SLURM_JOB_ID: '4242',
      SLURM_JOB_NODELIST: 'n[1-2]',
      SLURM_NTASKS: '2',
    };
    return { dir, out, env };
  }

  const started = (out: string) => [0, 1].every((k) => existsSync(join(out, `exec-${k}.json`)));
  const exited = (p: ChildProcess) =>
    new Promise<number | null>((res) => (p.exitCode !== null ? res(p.exitCode) : p.on('exit', res)));

  it('gives every process one shared checkpoint dir, its id and the local facts, and no JAX_* of its own', async () => {
    const { dir, out, env } = await prepare('shared', job());
    const batch = sbatch(dir, out, env);
    await waitFor('both processes started', () => started(out), 30_000);
    batch.kill('SIGUSR1');
    await exited(batch);
    const seen = await Promise.all(
      [0, 1].map(async (k) => JSON.parse(await readFile(join(out, `exec-${k}.json`), 'utf8'))),
    );
    for (const [k, s] of seen.entries()) {
      const flags = s.argv.slice(0, s.argv.indexOf('--'));
      const flag = (f: string) => flags[flags.indexOf(f) + 1];
      expect(flag('--process')).toBe(String(k));
      expect(flag('--processes')).toBe('2');
      expect(flag('--ckpt-mode')).toBe('shared');
      expect(flag('--ckpt-dir')).toBe(join(dir, 'ckpt'));
      expect(flag('--stop-signal')).toBe('SIGTERM');
      expect(flag('--job-dir')).toBe(k === 0 ? dir : join(dir, `proc-${k}`));
      expect(s.argv.slice(s.argv.indexOf('--') + 1)).toEqual(['python3', 'train.py']);
      expect(s.env).toMatchObject({
        ADV_PROCESS_ID: String(k),
        ADV_NUM_PROCESSES: '2',
        ADV_COORDINATOR_ADDRESS: '10.1.0.1:29500', // n1's NodeAddr
        ADV_LOCAL_PROCESS_ID: '0',
        ADV_LOCAL_PROCESS_COUNT: '1',
        ADV_LOCAL_DEVICE_COUNT: '0',
      });
      // adv exec derives the JAX and torch variables from these: none comes from the backend.
      expect(Object.keys(s.env).filter((n) => n.startsWith('JAX_'))).toEqual([]);
    }
  }, 60_000);

  it("turns SLURM's USR1 into the run's stop signal for every process, never USR1; process 1 ends cleanly after it", async () => {
    const { dir, out, env } = await prepare('signal', job({ policy: { stopSignal: 'SIGINT' } }));
    const batch = sbatch(dir, out, env);
    await waitFor('both processes started', () => started(out), 30_000);
    // --signal=B:USR1@grace: SLURM signals the batch shell alone.
    batch.kill('SIGUSR1');
    const code = await exited(batch);
    expect(await readFile(join(out, 'scancel'), 'utf8')).toBe('--signal=INT 4242\n');
    for (const k of [0, 1]) expect(await readFile(join(out, `signals-${k}`), 'utf8')).toBe('SIGINT\n');
    const flags = JSON.parse(await readFile(join(out, 'exec-1.json'), 'utf8')).argv as string[];
    expect(flags[flags.indexOf('--stop-signal') + 1]).toBe('SIGINT');
    // Process 1's adv exec exited 3 after the notice: its task says 0, so srun's --kill-on-bad-exit
    // leaves process 0 to commit; process 0's code is the job's.
    expect((await readFile(join(out, 'task-codes'), 'utf8')).split('\n').filter(Boolean)).toEqual([
      '143',
      '0',
    ]);
    expect(code).toBe(143);
  }, 60_000);

  it('launches per-process dirs when the run asks for them', async () => {
    const { dir, out, env } = await prepare('per', job({ checkpoint: { mode: 'per-process' } }));
    const batch = sbatch(dir, out, env);
    await waitFor('both processes started', () => started(out), 30_000);
    batch.kill('SIGUSR1');
    await exited(batch);
    const argv = JSON.parse(await readFile(join(out, 'exec-1.json'), 'utf8')).argv as string[];
    expect(argv[argv.indexOf('--ckpt-mode') + 1]).toBe('per-process');
    expect(argv).not.toContain('--ckpt-dir');
  }, 60_000);

  it('refuses a mode it does not offer, saying which', () => {
    const backend = new SlurmBackend('slurm-a', spec, ctx);
    expect(() => backend.withCheckpointMode(job({ checkpoint: { mode: 'store' } }), '/x')).toThrow(
      /offers no checkpoints written straight to the object store \(checkpoint.mode: store\)/,
    );
  });
});
