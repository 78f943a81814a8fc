import { describe, expect, it } from 'vitest';
import type { DagSpec } from '../spec/schema.js';
import type { Phase, RunStatusDoc } from '../status/types.js';
import { nodeRunSpec, planDag, type DagPlanContext, type DesiredDag } from './dag-plan.js';
import { generationOf } from './run-plan.js';

const T0 = Date.parse('2026-11-22T12:00:00Z');
const ctx: DagPlanContext = { now: T0, specCommit: 'c'.repeat(40), storeUrl: 'file:///store' };
const PIPE: DagSpec = {
  defaults: { backendSelector: { order: ['local'] }, policy: { maxInfraAttempts: 5 }, env: { SEED: '1' } },
  nodes: [
    { id: 'tokenize', outputs: { shards: {} }, run: { command: ['tok'] } },
    {
      id: 'train',
      needs: ['tokenize'],
      retries: 2,
      inputs: { TOKENS: 'tokenize.outputs.shards' },
      outputs: { params: {} },
      run: { command: ['train'], env: { LR: '0.1' } },
    },
    {
      id: 'rollouts',
      needs: ['train'],
      inputs: { PARAMS: 'train.outputs.params' },
      run: { command: ['roll'] },
    },
    { id: 'eval', needs: ['tokenize'], run: { command: ['eval'] } },
  ],
};
const dag = (spec: DagSpec = PIPE): DesiredDag => ({
  name: 'p',
  spec,
  generation: generationOf(spec),
  file: 'dags/p.yaml',
});
const run = (name: string, phase: Phase, attempts = 1): RunStatusDoc => ({
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'RunStatus',
  metadata: { name },
  status: {
    phase,
    conditions: [],
    attempts: Array.from({ length: attempts }, (_, i) => ({
      n: i + 1,
      backend: 'local',
      jobName: `adv-${name}-${i + 1}`,
      phase,
      specCommit: 'c',
    })),
  },
});
const plan = (
  children: Record<string, RunStatusDoc>,
  spec: DagSpec = PIPE,
  ready: (k: string) => boolean | undefined = () => true,
) => planDag({ name: 'p', desired: dag(spec), child: (n) => children[n], outputReady: ready }, ctx);

describe('planDag', () => {
  it('creates only the roots first; the rest wait, saying for what', () => {
    const p = plan({});
    expect(p.children.map((c) => c.name)).toEqual(['p.tokenize']);
    expect(p.doc!.status.nodes.train).toMatchObject({
      phase: 'Waiting',
      reason: 'WaitingForNeeds',
      message: 'waiting for tokenize (Pending)',
    });
    expect(p.doc!.status.phase).toBe('Running');
    expect(p.summary).toBe(
      'dag/p: Running (0/4 nodes succeeded); tokenize Pending, train Waiting, rollouts Waiting, eval Waiting',
    );
    expect(p.children[0]).toMatchObject({
      owner: 'p',
      labels: { 'adventuretime.dev/dag': 'p', 'adventuretime.dev/node': 'tokenize' },
    });
  });

  it('starts dependents when their needs succeeded and the outputs they read are complete', () => {
    const kids = { 'p.tokenize': run('p.tokenize', 'Succeeded') };
    const unknown = plan(kids, PIPE, () => undefined);
    expect(unknown.unknownOutputs).toEqual(['p.tokenize/shards']);
    expect(unknown.children.map((c) => c.name)).toEqual(['p.tokenize', 'p.eval']);
    expect(unknown.doc!.status.nodes.train!.message).toBe(
      'waiting for tokenize.outputs.shards (no manifest yet)',
    );
    const p = plan(kids);
    expect(p.children.map((c) => c.name)).toEqual(['p.tokenize', 'p.train', 'p.eval']);
    expect(p.doc!.status.phase).toBe('Running');
  });

  it('builds each child from the defaults, the node, its inputs and outputs', () => {
    const train = nodeRunSpec('p', PIPE, PIPE.nodes[1]!, 'file:///store/');
    expect(train).toEqual({
      command: ['train'],
      backendSelector: { order: ['local'] },
      policy: { maxInfraAttempts: 5, maxAttempts: 3 },
      env: {
        SEED: '1',
        LR: '0.1',
        ADV_INPUT_TOKENS: 'file:///store/runs/p.tokenize/outputs/shards/',
        ADV_INPUTS: '{"TOKENS":{"output":"shards","run":"p.tokenize"}}',
        ADV_OUTPUTS: 'params',
      },
    });
  });

  it('a failed node skips what needs it; an independent branch finishes; then the DAG fails', () => {
    const kids = {
      'p.tokenize': run('p.tokenize', 'Succeeded'),
      'p.train': run('p.train', 'Failed', 3),
      'p.eval': run('p.eval', 'Running'),
    };
    let p = plan(kids);
    expect(p.doc!.status.nodes.rollouts).toMatchObject({
      phase: 'Skipped',
      reason: 'UpstreamFailed',
      message: 'train Failed',
    });
    expect(p.doc!.status.phase).toBe('Running');
    expect(p.children.map((c) => c.name)).toEqual(['p.tokenize', 'p.train', 'p.eval']);
    p = plan({ ...kids, 'p.eval': run('p.eval', 'Succeeded') });
    expect(p.doc!.status).toMatchObject({ phase: 'Failed', reason: 'NodesFailed' });
    expect(p.doc!.status.counts).toEqual({ Failed: 1, Skipped: 1, Succeeded: 2 });
  });

  it('adv retry dag: the retry annotation reaches only the failed child, until it has handled it', () => {
    const AT = '2026-11-22T13:00:00.000Z';
    const kids = {
      'p.tokenize': run('p.tokenize', 'Succeeded'),
      'p.train': run('p.train', 'Failed', 3),
      'p.eval': run('p.eval', 'Succeeded'),
    };
    const retried = (children: Record<string, RunStatusDoc>) =>
      planDag(
        {
          name: 'p',
          desired: { ...dag(), annotations: { 'adventuretime.dev/retry-requested-at': AT } },
          child: (n) => children[n],
          outputReady: () => true,
        },
        ctx,
      );
    const asked = retried(kids);
    const annotations = Object.fromEntries(asked.children.map((c) => [c.name, c.annotations]));
    expect(annotations).toEqual({
      'p.tokenize': undefined,
      'p.train': { 'adventuretime.dev/retry-requested-at': AT },
      'p.eval': undefined,
    });
    // The child took it (a new attempt): the skipped node waits for it again; no second retry.
    const again = {
      ...kids['p.train'],
      status: { ...kids['p.train'].status, phase: 'Scheduling' as const, lastHandledRetryAt: AT },
    };
    const next = retried({ ...kids, 'p.train': again });
    expect(next.children.find((c) => c.name === 'p.train')!.annotations).toBeUndefined();
    expect(next.doc!.status.nodes.rollouts).toMatchObject({ phase: 'Waiting', reason: 'WaitingForNeeds' });
    expect(next.doc!.status.phase).toBe('Running');
    const failedAgain = { ...again, status: { ...again.status, phase: 'Failed' as const } };
    expect(
      retried({ ...kids, 'p.train': failedAgain }).children.find((c) => c.name === 'p.train')!.annotations,
    ).toBeUndefined();
  });

  it('failFast: what has not started is skipped, what runs is cancelled', () => {
    const spec = {
      ...PIPE,
      failFast: true,
      nodes: [...PIPE.nodes, { id: 'lint', run: { command: ['lint'] } }],
    };
    const p = plan({ 'p.tokenize': run('p.tokenize', 'Failed'), 'p.lint': run('p.lint', 'Running') }, spec);
    expect(p.children.find((c) => c.name === 'p.lint')!.spec.suspend).toBe(true);
    expect(p.doc!.status.nodes.eval!.phase).toBe('Skipped');
  });

  it('suspend suspends every child and creates no new one; removing a node drops its child', () => {
    const kids = { 'p.tokenize': run('p.tokenize', 'Running') };
    const s = plan(kids, { ...PIPE, suspend: true });
    expect(s.children.map((c) => [c.name, c.spec.suspend])).toEqual([['p.tokenize', true]]);
    expect(s.doc!.status.phase).toBe('Cancelled');
    const removed = plan(kids, {
      ...PIPE,
      nodes: PIPE.nodes.filter((n) => n.id !== 'tokenize').map((n) => ({ ...n, needs: [], inputs: {} })),
    });
    expect(removed.children.map((c) => c.name)).not.toContain('p.tokenize');
  });

  it('an invalid spec keeps the last valid one going, and says where it is wrong', () => {
    const first = plan({});
    const p = planDag(
      {
        name: 'p',
        invalid: { name: 'p', file: 'dags/p.yaml', line: 9, column: 7, message: 'needs form a cycle' },
        current: first.doc!,
        child: (n) => (n === 'p.tokenize' ? run('p.tokenize', 'Running') : undefined),
        outputReady: () => true,
      },
      ctx,
    );
    expect(p.children.map((c) => c.name)).toEqual(['p.tokenize']);
    expect(p.doc!.status.conditions.find((c) => c.type === 'Valid')).toMatchObject({
      status: 'False',
      message: 'dags/p.yaml:9:7: needs form a cycle',
    });
  });

  it('a DAG removed from the branch drops all its children', () => {
    const first = plan({});
    const p = planDag(
      { name: 'p', current: first.doc!, child: () => undefined, outputReady: () => true },
      ctx,
    );
    expect(p.children).toEqual([]);
    expect(p.doc!.status).toMatchObject({ phase: 'Cancelled', reason: 'SpecDeleted' });
  });

  it('writes nothing when nothing moved', () => {
    const first = plan({});
    const again = planDag(
      { name: 'p', desired: dag(), current: first.doc!, child: () => undefined, outputReady: () => true },
      { ...ctx, now: T0 + 5000 },
    );
    expect(again.doc).toBe(first.doc);
    expect(again.summary).toBeUndefined();
  });
});
