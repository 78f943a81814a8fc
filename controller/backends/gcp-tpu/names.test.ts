import { describe, expect, it } from 'vitest';
import type { Backend as BackendObject } from '../../spec/schema.js';
import type { JobRequest } from '../types.js';
import { labelValue, nodeLabels, nodeNameOf, workerCheckpointEnv, workerJob } from './names.js';

const GCP_NAME = /^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/;

describe('nodeNameOf', () => {
  it('keeps a job name that already fits GCP’s rules', () => {
    expect(nodeNameOf('adv-train-3')).toBe('adv-train-3');
  });
  it('replaces dots, and keeps names that differ only there apart', () => {
    const a = nodeNameOf('adv-a.b-1');
    const b = nodeNameOf('adv-a-b-1');
    expect(a).toMatch(GCP_NAME);
    expect(a).not.toBe(b);
    expect(nodeNameOf('adv-a.b-1')).toBe(a);
  });
  it('stays within 63 characters', () => {
    const n = nodeNameOf(`adv-${'x.'.repeat(40)}y-1`);
    expect(n.length).toBeLessThanOrEqual(63);
    expect(n).toMatch(GCP_NAME);
  });
});

describe('labels', () => {
  it('are valid label values, the run’s dots replaced and long ones hashed', () => {
    expect(nodeLabels('tpu-east', { run: 'sweep.lr-3', attempt: 2 })).toEqual({
      'adventuretime-backend': 'tpu-east',
      'adventuretime-run': 'sweep-lr-3',
      'adventuretime-attempt': '2',
    });
    const long = labelValue('r'.repeat(100));
    expect(long.length).toBeLessThanOrEqual(63);
    expect(long).toMatch(/^[a-z0-9_-]+$/);
  });
});

describe('workerJob', () => {
  const job: JobRequest = {
    jobName: 'adv-r-1',
    run: 'r',
    attempt: 3,
    spec: {},
    argv: ['python3', 'train.py'],
    code: { commit: 'c' },
    env: { LR: '0.1' },
    store: { url: 's3://bucket/p' },
  };
  const tpu = (over: Record<string, unknown> = {}): BackendObject['spec'] => ({
    type: 'gcp-tpu',
    gcpTpu: { project: 'p-12345', zone: 'us-central2-b', acceleratorType: 'v4-16', ...over },
  });

  it('gives each worker the multi-host facts and TPU_WORKER_ID, no JAX_* of its own; worker 0 keeps the job name', () => {
    const w0 = workerJob(job, 0, 2, '10.0.0.2:8476');
    const w1 = workerJob(job, 1, 2, '10.0.0.2:8476', workerCheckpointEnv(job, tpu()));
    expect(w0.jobName).toBe('adv-r-1');
    expect(w1.jobName).toBe('adv-r-1-w1');
    expect(w1.env).toEqual({
      LR: '0.1',
      ADV_PROCESS_ID: '1',
      TPU_WORKER_ID: '1',
      ADV_NUM_PROCESSES: '2',
      ADV_COORDINATOR_ADDRESS: '10.0.0.2:8476',
      ADV_LOCAL_PROCESS_ID: '0',
      ADV_LOCAL_PROCESS_COUNT: '1',
      ADV_CKPT_MODE: 'per-process', // auto never takes the store (a plain-dir workload would never commit)
      ADV_STOP_SIGNAL: 'SIGTERM',
      ADV_OWN_JOB_DIR: '1',
    });
    expect(job.env).toEqual({ LR: '0.1' });
  });

  it('gives every worker one dir under a declared shared mount, per run and attempt', () => {
    const env = workerCheckpointEnv(
      { ...job, spec: { policy: { stopSignal: 'SIGUSR2' } } },
      tpu({ sharedMount: '/mnt/ckpt/' }),
    );
    expect(env).toEqual({
      ADV_CKPT_MODE: 'shared',
      ADV_SHARED_CKPT_DIR: '/mnt/ckpt/r/3',
      ADV_STOP_SIGNAL: 'SIGUSR2',
    });
  });

  it('auto: per process when the job has no store; a declared mode the Backend lacks is refused with the fix', () => {
    const { store: _none, ...noStore } = job;
    expect(workerCheckpointEnv(noStore, tpu()).ADV_CKPT_MODE).toBe('per-process');
    expect(workerCheckpointEnv({ ...job, spec: { checkpoint: { mode: 'per-process' } } }, tpu())).toEqual({
      ADV_CKPT_MODE: 'per-process',
      ADV_STOP_SIGNAL: 'SIGTERM',
    });
    expect(() => workerCheckpointEnv({ ...job, spec: { checkpoint: { mode: 'shared' } } }, tpu())).toThrow(
      'offers no shared checkpoint dir (checkpoint.mode: shared): declare gcpTpu.sharedMount',
    );
  });
});
