/**
 * Recovery, table by table: what each class of end does next, the guardrails, and observation
 * loss. All through the pure planner, as the controller calls it.
 */
import { describe, expect, it } from 'vitest';
import { descriptorFor } from '../backends/registry.js';
import type { ObservedJob } from '../backends/types.js';
import type { RunSpec } from '../spec/schema.js';
import type { Attempt, RunStatusDoc } from '../status/types.js';
import { generationOf, planRun, type DesiredRun, type PlanContext } from './run-plan.js';
import type { BackendInfo } from './solver.js';

const T0 = Date.parse('2026-11-22T12:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
const backends: BackendInfo[] = [
  { name: 'slurm-local', spec: { type: 'slurm' }, traits: descriptorFor('slurm')!.traits, usable: true },
  { name: 'ssh-local', spec: { type: 'ssh' }, traits: descriptorFor('ssh')!.traits, usable: true },
];
const ctx = (now = T0, over: Partial<PlanContext> = {}): PlanContext => ({
  now,
  specCommit: 'c'.repeat(40),
  backends,
  codeRefs: new Map(),
  controllerId: 'me',
  ...over,
});
const spec = (policy: RunSpec['policy'] = {}): RunSpec => ({
  command: ['python3', 'train.py'],
  policy,
  backendSelector: { order: ['slurm-local', 'ssh-local'] },
});
const desired = (s: RunSpec): DesiredRun => ({
  name: 'r',
  spec: s,
  generation: generationOf(s),
  file: 'runs/r.yaml',
});

/** A run whose attempt `n` is live on `backend` (the attempts before it ended as given). */
function live(
  s: RunSpec,
  phase: 'Queued' | 'Running',
  before: Partial<Attempt>[] = [],
  over: Partial<Attempt> = {},
): RunStatusDoc {
  const attempts: Attempt[] = before.map((a, i) => ({
    n: i + 1,
    backend: 'slurm-local',
    jobName: `adv-r-${i + 1}`,
    jobId: String(100 + i),
    phase: 'Preempted',
    specCommit: 'c'.repeat(40),
    startedAt: iso(T0 - 7_200_000),
    finishedAt: iso(T0 - 3_600_000),
    ...a,
  }));
  const n = attempts.length + 1;
  attempts.push({
    n,
    backend: 'slurm-local',
    jobName: `adv-r-${n}`,
    jobId: String(100 + n),
    phase,
    specCommit: 'c'.repeat(40),
    submittedAt: iso(T0 - 60_000),
    ...(phase === 'Running' ? { startedAt: iso(T0 - 60_000) } : {}),
    ...over,
  });
  return {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'RunStatus',
    metadata: { name: 'r' },
    appliedSpec: s,
    status: {
      phase,
      observedGeneration: generationOf(s),
      specCommit: 'c'.repeat(40),
      specFile: 'runs/r.yaml',
      codeCommit: 'c'.repeat(40),
      conditions: [
        { type: 'Valid', status: 'True', reason: 'Valid', message: '', lastTransitionTime: iso(T0) },
      ],
      attempts,
      checkpoint: { step: 40, createdAt: iso(T0 - 30_000), uri: 'file:///ckpt/40' },
    },
  };
}
const seen = (
  doc: RunStatusDoc,
  state: ObservedJob['state'],
  extra: Partial<ObservedJob> = {},
): ObservedJob => {
  const a = doc.status.attempts.at(-1)!;
  return { jobName: a.jobName, jobId: a.jobId!, state, finishedAt: iso(T0), ...extra };
};

describe('what each class of end does next', () => {
  it.each([
    // [title, observed, policy, phase, reason, attempt class, next attempt due in (s) | null]
    [
      'preemption: a new attempt at once, elsewhere',
      'Preempted',
      { reason: 'PREEMPTED' },
      {},
      'Scheduling',
      'Submitting',
      'Preempted',
      0,
    ],
    [
      'node failure: a new attempt at once',
      'Lost',
      { reason: 'NODE_FAIL' },
      {},
      'Scheduling',
      'Submitting',
      'Infrastructure',
      0,
    ],
    [
      'user error: backoff',
      'Failed',
      { reason: 'NonZeroExitCode', exitCode: 1 },
      {},
      'Scheduling',
      'BackoffWaiting',
      'UserError',
      30,
    ],
    [
      'OOM is the user’s',
      'Failed',
      { reason: 'OUT_OF_MEMORY' },
      { maxAttempts: 1 },
      'Failed',
      'AttemptsExhausted',
      'UserError',
      null,
    ],
    [
      'time limit after progress: go on at once',
      'Failed',
      { reason: 'TIMEOUT' },
      {},
      'Scheduling',
      'Submitting',
      'Timeout',
      0,
    ],
    [
      'cancelled on the cluster: never restarts',
      'Cancelled',
      { reason: 'CANCELLED' },
      {},
      'Cancelled',
      'CancelledOnBackend',
      'Cancelled',
      null,
    ],
    ['success', 'Succeeded', { exitCode: 0 }, {}, 'Succeeded', 'Completed', 'Succeeded', null],
  ] as const)('%s', (_t, state, extra, policy, phase, reason, cls, dueSec) => {
    const s = spec(policy);
    const cur = live(s, 'Running', [], { startStep: 0, lastStep: 40 });
    const p = planRun(
      { name: 'r', desired: desired(s), current: cur, observed: seen(cur, state, extra) },
      ctx(),
    );
    const st = p.doc!.status;
    expect([st.phase, st.reason, st.attempts[0]!.class]).toEqual([phase, reason, cls]);
    if (dueSec === null) return expect(p.doc!.status.attempts).toHaveLength(1);
    if (dueSec > 0) {
      expect(Date.parse(st.nextAttemptAfter!) - T0).toBe(dueSec * 1000);
      expect(p.actions).toEqual([]);
    } else {
      // At once, on the other backend (the one that ended it cools down), from step 40.
      expect(p.summary).toMatch(
        /; attempt 1 on slurm-local ended: .*; a new attempt starts from step 40$|after committing step 40; a new attempt starts from step 40$/,
      );
      expect(p.actions).toEqual([
        { type: 'submit', run: 'r', attempt: 2, backend: 'ssh-local', jobName: 'adv-r-2' },
      ]);
      expect(st.attempts[1]!.why).toMatch(
        /^slurm-local: tried after the others: cooling down: attempt 1 (was preempted|ended \(\w+\)) 0s ago; ssh-local: chosen$/,
      );
    }
  });

  it('preemptions do not count against maxAttempts, only against maxInfraAttempts', () => {
    const s = spec({ maxAttempts: 1, maxInfraAttempts: 4 });
    const three = [
      { class: 'Preempted' as const },
      { class: 'Preempted' as const },
      { class: 'Preempted' as const },
    ];
    const cur = live(s, 'Running', three);
    let p = planRun(
      {
        name: 'r',
        desired: desired(s),
        current: live(s, 'Running', three.slice(1)),
        observed: seen(live(s, 'Running', three.slice(1)), 'Preempted'),
      },
      ctx(),
    );
    expect(p.doc!.status.phase).toBe('Scheduling');
    p = planRun({ name: 'r', desired: desired(s), current: cur, observed: seen(cur, 'Preempted') }, ctx());
    expect(p.doc!.status).toMatchObject({ phase: 'Failed', reason: 'AttemptsExhausted' });
    expect(p.doc!.status.message).toBe('4 attempts ended by preemption or infrastructure failure');
  });

  it('a time-out without a new checkpoint counts as a failure, with backoff', () => {
    const s = spec({ maxAttempts: 2 });
    const cur = live(s, 'Running', [], { startStep: 40, lastStep: 40 });
    const p = planRun(
      { name: 'r', desired: desired(s), current: cur, observed: seen(cur, 'Failed', { reason: 'TIMEOUT' }) },
      ctx(),
    );
    expect(p.doc!.status).toMatchObject({ phase: 'Scheduling', reason: 'BackoffWaiting' });
    expect(p.doc!.status.message).toMatch(
      /reached its time limit \(TIMEOUT\) without a new checkpoint; retrying in 30s from step 40 \(1 of 2\)/,
    );
  });
});

describe('guardrails', () => {
  it('maxHours stops the attempt, and the next one starts after the grace period', () => {
    const s = spec({ maxHours: 0.5 });
    const cur = live(s, 'Running', [], { startedAt: iso(T0 - 3_600_000), startStep: 0, lastStep: 40 });
    const p = planRun(
      { name: 'r', desired: desired(s), current: cur, observed: seen(cur, 'Running') },
      ctx(),
    );
    const a = p.doc!.status.attempts[0]!;
    expect(a).toMatchObject({
      phase: 'Failed',
      class: 'Timeout',
      reason: 'MaxHoursExceeded',
      message: 'ran 1.00h, past policy.maxHours (0.5h)',
    });
    expect(p.actions).toEqual([
      { type: 'cancel', run: 'r', attempt: 1, backend: 'slurm-local', jobName: 'adv-r-1', jobId: '101' },
    ]);
    expect(Date.parse(p.doc!.status.nextAttemptAfter!) - T0).toBe(15_000);
  });

  it('maxTotalHours fails the run, counting every attempt', () => {
    const s = spec({ maxTotalHours: 1.5 });
    const cur = live(s, 'Running', [{}], { startedAt: iso(T0 - 1_900_000) }); // 1h + 0.53h
    const p = planRun(
      { name: 'r', desired: desired(s), current: cur, observed: seen(cur, 'Running') },
      ctx(),
    );
    expect(p.doc!.status).toMatchObject({ phase: 'Failed', reason: 'TotalTimeExceeded' });
    expect(p.actions.map((x) => x.type)).toEqual(['cancel']);
  });

  it('maxCost stops the live attempt once the attempts together cost more, and fails the run', () => {
    const s = spec({ maxCost: 10 });
    const priced = { price: { perHour: 4, from: 'started' as const } };
    // 1 h at 4/h before, then 0.5 h at 4/h: 6, under 10; the rented instance then reports 16/h.
    const cur = live(s, 'Running', [priced], { ...priced, startedAt: iso(T0 - 1_800_000) });
    const under = planRun(
      { name: 'r', desired: desired(s), current: cur, observed: seen(cur, 'Running') },
      ctx(),
    );
    expect(under.doc!.status.phase).toBe('Running');
    const p = planRun(
      {
        name: 'r',
        desired: desired(s),
        current: cur,
        observed: { ...seen(cur, 'Running'), pricePerHour: 16 },
      },
      ctx(),
    );
    expect(p.doc!.status.attempts[1]!.price).toEqual({ perHour: 16, from: 'started' });
    expect(p.doc!.status).toMatchObject({ phase: 'Failed', reason: 'CostLimitExceeded' });
    expect(p.doc!.status.message).toContain('cost 12.00 in total, past policy.maxCost (10)');
    expect(p.actions.map((x) => x.type)).toEqual(['cancel']);
    // Between attempts, a run already past its budget starts no new one.
    const ended = live(s, 'Running', [{ ...priced, startedAt: iso(T0 - 4 * 3_600_000) }], priced);
    ended.status.attempts.pop();
    ended.status.phase = 'Scheduling';
    const next = planRun({ name: 'r', desired: desired(s), current: ended }, ctx());
    expect(next.doc!.status).toMatchObject({ phase: 'Failed', reason: 'CostLimitExceeded' });
    expect(next.actions).toEqual([]);
  });

  it('a run queued past queuedTimeoutSec is withdrawn and sent to the next backend', () => {
    const s = spec({ queuedTimeoutSec: 600 });
    const cur = live(s, 'Queued', [], { submittedAt: iso(T0 - 700_000) });
    const p = planRun(
      { name: 'r', desired: desired(s), current: cur, observed: seen(cur, 'Pending') },
      ctx(),
    );
    expect(p.doc!.status.attempts[0]).toMatchObject({
      phase: 'Cancelled',
      class: 'Infrastructure',
      reason: 'QueuedTimeout',
    });
    expect(p.actions).toEqual([
      { type: 'cancel', run: 'r', attempt: 1, backend: 'slurm-local', jobName: 'adv-r-1', jobId: '101' },
      { type: 'submit', run: 'r', attempt: 2, backend: 'ssh-local', jobName: 'adv-r-2' },
    ]);
  });

  it('…but keeps its place in the queue when there is nowhere else to go', () => {
    const s = { ...spec({ queuedTimeoutSec: 600 }), backendSelector: { order: ['slurm-local'] } };
    const cur = live(s, 'Queued', [], { submittedAt: iso(T0 - 700_000) });
    const p = planRun(
      { name: 'r', desired: desired(s), current: cur, observed: seen(cur, 'Pending') },
      ctx(),
    );
    expect(p.actions).toEqual([]);
    expect(p.doc!.status.attempts[0]!.phase).toBe('Queued');
  });
});

describe('cannot observe the job', () => {
  const s = spec({ heartbeatTimeoutSec: 600 });
  const unknown = (doc: RunStatusDoc): ObservedJob => ({
    ...seen(doc, 'Unknown', { reason: 'Unreachable', message: 'connect ECONNREFUSED 127.0.0.1:22' }),
    finishedAt: undefined as never,
  });

  it('is not a failure: the attempt stays, with a Stale condition', () => {
    const cur = live(s, 'Running');
    const p = planRun({ name: 'r', desired: desired(s), current: cur, observed: unknown(cur) }, ctx());
    expect(p.doc!.status.attempts[0]!.phase).toBe('Running');
    expect(p.doc!.status.conditions.find((c) => c.type === 'Stale')).toMatchObject({
      status: 'True',
      reason: 'Unreachable',
    });
    expect(p.actions).toEqual([]);
  });

  it('sustained, with a fresh heartbeat: still running (the worker is fine, the path to it is not)', () => {
    const cur = live(s, 'Running');
    const first = planRun(
      { name: 'r', desired: desired(s), current: cur, observed: unknown(cur) },
      ctx(),
    ).doc!;
    first.status.lastHeartbeat = iso(T0 + 650_000);
    const p = planRun(
      { name: 'r', desired: desired(s), current: first, observed: unknown(first) },
      ctx(T0 + 700_000),
    );
    expect(p.doc!.status.attempts[0]!.phase).toBe('Running');
  });

  it('sustained, and no heartbeat either: Lost, a new attempt elsewhere, the old job cancelled', () => {
    const cur = live(s, 'Running');
    const first = planRun(
      { name: 'r', desired: desired(s), current: cur, observed: unknown(cur) },
      ctx(),
    ).doc!;
    first.status.lastHeartbeat = iso(T0 - 5_000);
    const p = planRun(
      { name: 'r', desired: desired(s), current: first, observed: unknown(first) },
      ctx(T0 + 700_000),
    );
    expect(p.doc!.status.attempts[0]).toMatchObject({
      phase: 'Lost',
      class: 'Infrastructure',
      reason: 'Unreachable',
    });
    expect(p.doc!.status.attempts[0]!.message).toMatch(
      /^slurm-local could not be observed for 700s and the job sent no heartbeat \(connect ECONNREFUSED/,
    );
    expect(p.actions.map((a) => `${a.type}:${a.backend}`)).toEqual([
      'cancel:slurm-local',
      'submit:ssh-local',
    ]);
    expect(p.doc!.status.conditions.some((c) => c.type === 'Stale')).toBe(false);
  });
});
