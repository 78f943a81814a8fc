import { describe, expect, it } from 'vitest';
import type { Attempt, DagStatusDoc, RunStatusDoc, SweepStatusDoc } from '../status/types.js';
import { dagEvents, runEvents, sweepEvents } from './events.js';

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-01T01:00:00.000Z';

function attempt(n: number, over: Partial<Attempt> = {}): Attempt {
  return { n, backend: 'local', jobName: `adv-r-${n}`, phase: 'Running', specCommit: 'abc', ...over };
}

function run(
  over: Partial<RunStatusDoc['status']> = {},
  labels?: Record<string, string>,
  name = 'r',
): RunStatusDoc {
  return {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'RunStatus',
    metadata: { name, ...(labels ? { labels } : {}) },
    status: { phase: 'Running', createdAt: T0, specCommit: 'c0ffee', conditions: [], attempts: [], ...over },
  };
}

const ids = (doc: RunStatusDoc) => runEvents(doc).map((e) => e.id);

describe('runEvents', () => {
  it.each<[string, Partial<RunStatusDoc['status']>, string[]]>([
    ['a running run: none', { attempts: [attempt(1)] }, []],
    [
      'succeeded after a preemption',
      {
        phase: 'Succeeded',
        attempts: [
          attempt(1, { phase: 'Preempted', finishedAt: T0, reason: 'Preempted' }),
          attempt(2, { phase: 'Succeeded', finishedAt: T1 }),
        ],
      },
      ['Run/r/1/RunPreempted', 'Run/r/2/RunSucceeded'],
    ],
    [
      'failed',
      {
        phase: 'Failed',
        reason: 'AttemptsExhausted',
        attempts: [attempt(1, { phase: 'Failed', exitCode: 3 })],
      },
      ['Run/r/1/RunFailed'],
    ],
    [
      'lost, then queued too long',
      {
        attempts: [
          attempt(1, { phase: 'Lost', reason: 'Unreachable' }),
          attempt(2, { phase: 'Cancelled', reason: 'QueuedTimeout' }),
          attempt(3, { phase: 'Queued' }),
        ],
      },
      ['Run/r/1/HeartbeatLost', 'Run/r/2/ProvisioningStuck'],
    ],
    [
      'stalled before any attempt, and a heartbeat missing on the running one',
      {
        conditions: [
          { type: 'Stalled', status: 'True', reason: 'SecretMissing', message: 'x', lastTransitionTime: T0 },
          { type: 'Lost', status: 'True', reason: 'HeartbeatMissing', message: 'y', lastTransitionTime: T1 },
          { type: 'Ready', status: 'False', reason: 'r', message: '', lastTransitionTime: T1 },
        ],
      },
      ['Run/r/0/RunStalled', 'Run/r/0/HeartbeatLost'],
    ],
  ])('%s', (_, status, want) => {
    expect(ids(run(status))).toEqual(want);
  });

  it('gives the same ids when derived again (a restart records nothing twice)', () => {
    const doc = run(
      { phase: 'Failed', attempts: [attempt(1, { phase: 'Failed', finishedAt: T1 })] },
      { team: 'ml' },
    );
    expect(runEvents(structuredClone(doc))).toEqual(runEvents(doc));
    expect(runEvents(doc)[0]).toMatchObject({
      at: T1,
      specCommit: 'c0ffee',
      labels: { team: 'ml' },
      phase: 'Failed',
    });
  });
});

describe('dagEvents and sweepEvents', () => {
  const dag = (phase: DagStatusDoc['status']['phase']): DagStatusDoc => ({
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'DAGStatus',
    metadata: { name: 'd' },
    status: { phase, conditions: [], nodes: { a: { phase: 'Succeeded', run: 'd.a', finishedAt: T1 } } },
  });

  it('DagDone once the DAG is terminal', () => {
    expect(dagEvents(dag('Running'))).toEqual([]);
    expect(dagEvents(dag('Failed'))).toMatchObject([{ id: 'DAG/d/0/DagDone', at: T1, phase: 'Failed' }]);
  });

  it('SweepDone once the Sweep is terminal, not while a point waits for a slot', () => {
    const sweep = (phase: SweepStatusDoc['status']['phase'], waiting: boolean): SweepStatusDoc => ({
      apiVersion: 'adventuretime.dev/v1alpha1',
      kind: 'SweepStatus',
      metadata: { name: 's' },
      status: {
        phase,
        conditions: [],
        points: {
          's-1': { phase: 'Succeeded', params: { lr: 1 }, since: T1 },
          's-2': waiting
            ? { phase: 'Waiting', params: { lr: 2 } }
            : { phase: 'Failed', params: { lr: 2 }, since: T0 },
        },
      },
    });
    // Every child run there is has ended, but a point waits for its maxConcurrent slot: not done.
    expect(sweepEvents(sweep('Running', true))).toEqual([]);
    expect(sweepEvents(sweep('Failed', false))).toMatchObject([
      { id: 'Sweep/s/0/SweepDone', phase: 'Failed', at: T1 },
    ]);
  });
});
