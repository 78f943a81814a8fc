/**
 * The executor readies an attempt (`prepare`: a fork's checkpoint copy) before its job is
 * submitted, on both submission paths, and a prepare that needs a person stalls that run alone.
 */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { Backend, JobRequest } from '../../backends/types.js';
import { StallingError } from '../../errors.js';
import type { ControllerMetrics } from '../../metrics.js';
import type { RunAction } from '../../reconcile/run-plan.js';
import type { StatusWriter } from '../../status/writer.js';
import { Reason, type RunStatusDoc } from '../../status/types.js';
import type { BackendAdapters } from '../observe/adapters.js';
import { Executor } from './executor.js';

const submitting = (run: string): RunStatusDoc => ({
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'RunStatus',
  metadata: { name: run },
  appliedSpec: { command: ['true'] },
  status: {
    phase: 'Scheduling',
    conditions: [],
    attempts: [
      { n: 1, backend: 'b', jobName: `adv-${run}-1`, phase: 'Submitting', specCommit: 'c'.repeat(40) },
    ],
  },
});
const action = (run: string): RunAction => ({
  type: 'submit',
  run,
  attempt: 1,
  backend: 'b',
  jobName: `adv-${run}-1`,
});

/** An executor over `backend`, with the statuses of `runs` in memory; `calls` says what happened, in order. */
function executor(
  backend: Partial<Backend>,
  runs: string[],
  prepare: (a: RunAction) => Promise<void>,
  calls: string[] = [],
) {
  const docs = new Map(runs.map((r) => [r, submitting(r)]));
  const count = { inc: () => undefined };
  const ex = new Executor({
    adapters: { instance: () => ({ name: 'b', type: 'test', ...backend }) } as unknown as BackendAdapters,
    status: {
      get: (_k: string, name: string) => docs.get(name),
      stage: (_k: string, name: string, doc: RunStatusDoc) => docs.set(name, doc),
    } as unknown as StatusWriter,
    jobRequest: (a) => {
      calls.push(`request ${a.run}`);
      return { jobName: a.jobName, run: a.run, attempt: a.attempt } as JobRequest;
    },
    prepare: async (a) => {
      calls.push(`prepare ${a.run}`);
      await prepare(a);
    },
    commit: async () => 0,
    hint: () => undefined,
    metrics: { submissions: count, submitFailures: count } as unknown as ControllerMetrics,
    logger: pino({ level: 'silent' }),
    now: () => Date.parse('2026-11-27T12:00:00Z'),
    concurrency: 4,
  });
  return { ex, docs, calls };
}

const missing = async (a: RunAction) => {
  if (a.run === 'fork')
    throw new StallingError(Reason.ForkSourceMissing, 'run parent has no committed checkpoint at step 5');
};

describe('Executor.prepare', () => {
  it('prepare, then one submit call for the batch; what the adapter adopts is recorded as adopted (the executor never looks first)', async () => {
    const calls: string[] = [];
    const backend: Partial<Backend> = {
      find: async (name) => {
        calls.push(`find ${name}`);
        return undefined;
      },
      submit: async (jobs) => {
        calls.push(`submit ${jobs.map((j) => j.run).join(',')}`);
        return jobs.map((j) =>
          j.run === 'old'
            ? { backend: 'b', jobName: j.jobName, jobId: '7', adopted: true }
            : { backend: 'b', jobName: j.jobName, jobId: '8' },
        );
      },
    };
    const { ex, docs } = executor(backend, ['new', 'old'], async () => undefined, calls);
    await ex.executeAll([action('new'), action('old')]);
    expect(calls).toEqual(['prepare new', 'prepare old', 'request new', 'request old', 'submit new,old']);
    expect(docs.get('old')!.status.attempts[0]!.jobId).toBe('7');
    expect(docs.get('new')!.status.attempts[0]!.jobId).toBe('8');
  });

  it('one job’s error is that job’s alone: the others of the batch are submitted', async () => {
    const backend: Partial<Backend> = {
      submit: async (jobs) =>
        jobs.map((j) =>
          j.run === 'bad'
            ? new Error('no such partition')
            : { backend: 'b', jobName: j.jobName, jobId: j.run },
        ),
    };
    const { ex, docs } = executor(backend, ['bad', 'good'], async () => undefined);
    await ex.executeAll([action('bad'), action('good')]);
    expect(docs.get('good')!.status.attempts[0]!.jobId).toBe('good');
    expect(docs.get('bad')!.status.attempts[0]!.jobId).toBeUndefined();
  });

  it('a prepare that needs a person stalls that run; the others are submitted', async () => {
    const submitted: string[] = [];
    const backend: Partial<Backend> = {
      submit: async (jobs) => {
        submitted.push(...jobs.map((j) => j.run));
        return jobs.map((j) => ({ backend: 'b', jobName: j.jobName, jobId: j.run }));
      },
    };
    const { ex, docs, calls } = executor(backend, ['fork', 'plain'], missing);
    await ex.executeAll([action('fork'), action('plain')]);
    expect(submitted).toEqual(['plain']);
    expect(calls).not.toContain('request fork');
    const fork = docs.get('fork')!.status;
    expect(fork.phase).toBe('Pending');
    expect(fork.conditions.find((c) => c.type === 'Stalled')).toMatchObject({
      status: 'True',
      reason: 'ForkSourceMissing',
      message: 'run parent has no committed checkpoint at step 5',
    });
    expect(docs.get('plain')!.status.phase).toBe('Queued');
  });
});
