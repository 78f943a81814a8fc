import { describe, expect, it } from 'vitest';
import { backendInfoOf } from '../backends/registry.js';
import type { ObservedJob } from '../backends/types.js';
import type { CodeRepoState } from '../git/code-repos.js';
import type { RunSpec } from '../spec/schema.js';
import type { RunStatusDoc } from '../status/types.js';
import { recordSubmitted } from './results.js';
import {
  generationOf,
  planRun,
  SUBMIT_TAKEOVER_MS,
  type BackendInfo,
  type DesiredRun,
  type PlanContext,
} from './run-plan.js';

const T0 = Date.parse('2026-11-22T12:00:00Z');
const backend = (name: string, extra: Partial<BackendInfo> = {}): BackendInfo => ({
  ...backendInfoOf(name, { type: 'local' }),
  ...extra,
});
const ctx = (over: Partial<PlanContext> = {}): PlanContext => ({
  now: T0,
  specCommit: 'c'.repeat(40),
  backends: [
    backend('local'),
    backend('big', { spec: { type: 'local', priority: 5, capabilities: { gpus: 8 } } }),
  ],
  codeRefs: new Map([['main', 'd'.repeat(40)]]),
  controllerId: 'me',
  ...over,
});
const desired = (spec: RunSpec, name = 'r'): DesiredRun => ({
  name,
  spec,
  generation: generationOf(spec),
  file: `runs/${name}.yaml`,
});
const base: RunSpec = { command: ['true'] };

/** Plans a new run and returns the status after the submission was recorded with job id 42. */
function running(spec: RunSpec = base): RunStatusDoc {
  const p = planRun({ name: 'r', desired: desired(spec) }, ctx());
  const submitted = recordSubmitted(p.doc!, 1, '42', false, T0).doc;
  return planRun({ name: 'r', desired: desired(spec), current: submitted, observed: obs('Running') }, ctx())
    .doc!;
}
const obs = (state: ObservedJob['state'], extra: Partial<ObservedJob> = {}): ObservedJob => ({
  jobName: 'adv-r-1',
  jobId: '42',
  state,
  ...extra,
});

describe('planRun', () => {
  it('submits a new run to the first backend of its order, write-ahead first', () => {
    const p = planRun(
      { name: 'r', desired: desired({ ...base, backendSelector: { order: ['local'] } }) },
      ctx(),
    );
    expect(p.actions).toEqual([
      { type: 'submit', run: 'r', attempt: 1, backend: 'local', jobName: 'adv-r-1' },
    ]);
    expect(p.doc!.status.phase).toBe('Scheduling');
    expect(p.doc!.status.attempts[0]).toMatchObject({
      n: 1,
      phase: 'Submitting',
      backend: 'local',
      controller: 'me',
      codeCommit: 'c'.repeat(40),
    });
    expect(p.summary).toBe('run/r: Submitting attempt 1 to local');
  });

  it("records the chosen backend's price on the attempt: per node, billed from when its type bills (billsFrom)", () => {
    const priced = ctx({
      backends: [
        backend('tpu', {
          spec: { type: 'gcp-tpu', capabilities: { costPerHour: 2.5 } },
          // Queueing is placement, not billing: a type may queue and still bill from the submit.
          traits: { ...backend('x').traits, queuesWhenFull: true, billsFrom: 'submitted' },
        }),
        backend('hpc', {
          spec: { type: 'slurm', capabilities: { costPerHour: 1.5 } },
          traits: { ...backend('x').traits, queuesWhenFull: false, billsFrom: 'started', multiNode: true },
        }),
      ],
    });
    const onto = (order: string[], spec: RunSpec = base) =>
      planRun({ name: 'r', desired: desired({ ...spec, backendSelector: { order } }) }, priced).doc!.status
        .attempts[0];
    expect(onto(['tpu'])?.price).toEqual({ perHour: 2.5, from: 'submitted' });
    expect(onto(['hpc'], { ...base, resources: { nodes: 4 } })?.price).toEqual({
      perHour: 6,
      from: 'started',
    });
    // No price on the Backend: none on the attempt.
    expect(
      planRun({ name: 'r', desired: desired(base) }, ctx()).doc!.status.attempts[0]?.price,
    ).toBeUndefined();
  });

  it.each([
    ['priority decides without an order', base, 'big'],
    [
      'a backend without enough GPUs is skipped',
      { ...base, resources: { gpus: 16 }, backendSelector: { order: ['big', 'local'] } },
      'local',
    ],
    ['forbidden backends are skipped', { ...base, backendSelector: { forbidden: ['big'] } }, 'local'],
    ['allowed restricts', { ...base, backendSelector: { allowed: ['local'] } }, 'local'],
  ] as const)('%s', (_n, spec, expected) => {
    expect(planRun({ name: 'r', desired: desired(spec as RunSpec) }, ctx()).actions[0]).toMatchObject({
      backend: expected,
    });
  });

  it('waits with a condition when no backend fits', () => {
    const p = planRun(
      { name: 'r', desired: desired({ ...base, backendSelector: { order: ['local'] } }) },
      ctx({ backends: [backend('local', { usable: false, why: 'suspended' })] }),
    );
    expect(p.actions).toEqual([]);
    expect(p.doc!.status).toMatchObject({
      phase: 'Pending',
      reason: 'NoBackend',
      message: 'local: suspended',
    });
    expect(p.requeueAfterMs).toBe(30_000);
  });

  it('pins code.ref to a commit, and says so when the ref does not exist', () => {
    expect(
      planRun({ name: 'r', desired: desired({ ...base, code: { ref: 'main' } }) }, ctx()).doc!.status
        .codeCommit,
    ).toBe('d'.repeat(40));
    const p = planRun({ name: 'r', desired: desired({ ...base, code: { ref: 'nope' } }) }, ctx());
    expect(p.doc!.status).toMatchObject({ phase: 'Pending', reason: 'CodeRefNotFound' });
    expect(p.actions).toEqual([]);
  });

  it('does nothing, and writes nothing, when nothing changed', () => {
    const cur = running();
    const p = planRun({ name: 'r', desired: desired(base), current: cur, observed: obs('Running') }, ctx());
    expect(p.doc).toBe(cur);
    expect(p.summary).toBeUndefined();
    expect(p.actions).toEqual([]);
  });

  it.each([
    ['Succeeded', obs('Succeeded', { exitCode: 0 }), 'Succeeded', 'Completed', 0],
    [
      'Preempted starts a new attempt at once',
      obs('Preempted', { reason: 'PREEMPTED' }),
      'Scheduling',
      'Submitting',
      1,
    ],
    [
      'Lost starts a new attempt at once',
      obs('Lost', { reason: 'ProcessVanished' }),
      'Scheduling',
      'Submitting',
      1,
    ],
    [
      'a user failure waits for its backoff',
      obs('Failed', { exitCode: 3 }),
      'Scheduling',
      'BackoffWaiting',
      0,
    ],
    ['cancelled on the backend is final', obs('Cancelled'), 'Cancelled', 'CancelledOnBackend', 0],
  ] as const)('observed %s', (_n, o, phase, reason, submits) => {
    const p = planRun({ name: 'r', desired: desired(base), current: running(), observed: o }, ctx());
    expect(p.doc!.status).toMatchObject({ phase, reason });
    expect(p.actions.filter((a) => a.type === 'submit')).toHaveLength(submits);
  });

  it('retries a user failure after exponential backoff until maxAttempts', () => {
    const spec: RunSpec = { ...base, policy: { maxAttempts: 2, backoff: { initialSec: 10, factor: 3 } } };
    let doc = planRun(
      { name: 'r', desired: desired(spec), current: running(spec), observed: obs('Failed', { exitCode: 1 }) },
      ctx(),
    ).doc!;
    expect(doc.status.nextAttemptAfter).toBe(new Date(T0 + 10_000).toISOString());
    expect(
      planRun({ name: 'r', desired: desired(spec), current: doc }, ctx({ now: T0 + 5000 })).actions,
    ).toEqual([]);
    const retry = planRun({ name: 'r', desired: desired(spec), current: doc }, ctx({ now: T0 + 10_000 }));
    expect(retry.actions[0]).toMatchObject({ type: 'submit', attempt: 2, jobName: 'adv-r-2' });
    doc = structuredClone(retry.doc!);
    Object.assign(doc.status.attempts[1]!, { jobId: '43', phase: 'Running' });
    const final = planRun(
      {
        name: 'r',
        desired: desired(spec),
        current: doc,
        observed: { jobName: 'adv-r-2', jobId: '43', state: 'Failed', exitCode: 1 },
      },
      ctx(),
    );
    expect(final.doc!.status).toMatchObject({ phase: 'Failed', reason: 'AttemptsExhausted' });
    expect(final.actions).toEqual([]);
  });

  describe('policy.retryOn.exitCodes', () => {
    const spec: RunSpec = { ...base, policy: { maxAttempts: 3, retryOn: { exitCodes: [75, 137] } } };
    const end = (o: ObservedJob) =>
      planRun({ name: 'r', desired: desired(spec), current: running(spec), observed: o }, ctx());

    it('retries an exit code it lists, with backoff, within maxAttempts', () => {
      const p = end(obs('Failed', { exitCode: 75 }));
      expect(p.doc!.status).toMatchObject({ phase: 'Scheduling', reason: 'BackoffWaiting' });
      expect(p.doc!.status.conditions.find((c) => c.type === 'Retryable')).toBeUndefined();
    });

    it.each([1, undefined])(
      'fails the run at once on exit code %s, saying why in a condition',
      (exitCode) => {
        const p = end(obs('Failed', exitCode === undefined ? {} : { exitCode }));
        expect(p.doc!.status).toMatchObject({ phase: 'Failed', reason: 'ExitCodeNotRetryable' });
        expect(p.doc!.status.nextAttemptAfter).toBeUndefined();
        expect(p.doc!.status.message).toContain('policy.retryOn.exitCodes (75, 137) does not list');
        expect(p.doc!.status.conditions.find((c) => c.type === 'Retryable')).toMatchObject({
          status: 'False',
          reason: 'ExitCodeNotRetryable',
        });
        expect(p.actions).toEqual([]);
      },
    );

    it('leaves preemption alone: it is always retried', () => {
      const p = end(obs('Preempted', { exitCode: 1 }));
      expect(p.doc!.status.phase).toBe('Scheduling');
      expect(p.doc!.status.reason).not.toBe('ExitCodeNotRetryable');
    });
  });

  it('a failed setup step: the step in the status, the next attempt at once on another backend, counted', () => {
    const spec: RunSpec = { ...base, policy: { maxAttempts: 2 } };
    const said =
      'setup step 2 of 3 (Environment cuda12@2): module load cuda/12 exited 1\n--- last lines ---\nLmod has detected the following error: The following module(s) are unknown: "cuda/12"';
    const setupFailed = (jobName: string, jobId: string) =>
      obs('Failed', { jobName, jobId, reason: 'SetupFailed', exitCode: 1, message: said });
    const first = running(spec);
    expect(first.status.attempts[0]?.backend).toBe('big');
    const p = planRun(
      { name: 'r', desired: desired(spec), current: first, observed: setupFailed('adv-r-1', '42') },
      ctx(),
    );
    expect(p.doc!.status.attempts[0]).toMatchObject({
      phase: 'Failed',
      class: 'SetupFailed',
      reason: 'SetupFailed',
      exitCode: 1,
      message: said,
    });
    expect(p.summary).toContain(
      'attempt 1 on big: setup step 2 of 3 (Environment cuda12@2): module load cuda/12 exited 1; a new attempt starts on another backend where one fits (1 of 2)',
    );
    // No backoff, and not back to `big` (the higher priority) where the step fails.
    expect(p.actions).toEqual([
      { type: 'submit', run: 'r', attempt: 2, backend: 'local', jobName: 'adv-r-2' },
    ]);
    const doc = structuredClone(recordSubmitted(p.doc!, 2, '43', false, T0).doc);
    // It fails on `local` too: the second counted failure ends the run.
    const last = planRun(
      { name: 'r', desired: desired(spec), current: doc, observed: setupFailed('adv-r-2', '43') },
      ctx({ now: T0 + 60_000 }),
    );
    expect(last.doc!.status).toMatchObject({ phase: 'Failed', reason: 'AttemptsExhausted' });
    expect(last.doc!.status.message).toMatch(
      /^attempt 2 on local: setup step 2 of 3 .*; 2 of 2 attempts failed$/,
    );
    expect(last.actions).toEqual([]);
  });

  it('keeps a live attempt and marks Stale when the backend cannot be observed', () => {
    const p = planRun(
      {
        name: 'r',
        desired: desired(base),
        current: running(),
        observed: obs('Unknown', { reason: 'PollFailed', message: 'ssh: timeout' }),
      },
      ctx(),
    );
    expect(p.doc!.status.phase).toBe('Running');
    expect(p.doc!.status.conditions.find((c) => c.type === 'Stale')).toMatchObject({
      status: 'True',
      reason: 'PollFailed',
      message: 'ssh: timeout',
    });
  });

  it('suspend cancels the live attempt; unsuspend starts a new one', () => {
    const sus = planRun(
      { name: 'r', desired: desired({ ...base, suspend: true }), current: running() },
      ctx(),
    );
    expect(sus.actions).toEqual([
      { type: 'cancel', run: 'r', attempt: 1, backend: 'big', jobName: 'adv-r-1', jobId: '42' },
    ]);
    expect(sus.doc!.status).toMatchObject({ phase: 'Cancelled', reason: 'Suspended' });
    const back = planRun({ name: 'r', desired: desired(base), current: sus.doc! }, ctx());
    expect(back.actions[0]).toMatchObject({ type: 'submit', attempt: 2 });
  });

  it('cancels when the spec is deleted and keeps the status', () => {
    const p = planRun({ name: 'r', current: running() }, ctx());
    expect(p.actions.map((a) => a.type)).toEqual(['cancel']);
    expect(p.doc!.status).toMatchObject({ phase: 'Cancelled', reason: 'SpecDeleted' });
    expect(planRun({ name: 'r', current: p.doc! }, ctx()).doc).toBe(p.doc);
  });

  it('a run stopped while it ran is no longer Ready: suspended, deleted, restarted, or queued again', () => {
    const readyOf = (doc: RunStatusDoc | undefined) => {
      const c = doc?.status.conditions.find((x) => x.type === 'Ready');
      return c && [doc!.status.phase, c.status, c.reason];
    };
    expect(readyOf(running())).toEqual(['Running', 'True', 'Running']);
    const restart: RunSpec = { ...base, policy: { onSpecChange: 'Restart' } };
    const stopped = [
      planRun({ name: 'r', desired: desired({ ...base, suspend: true }), current: running() }, ctx()),
      planRun({ name: 'r', current: running() }, ctx()),
      planRun(
        { name: 'r', desired: desired({ ...restart, command: ['false'] }), current: running(restart) },
        ctx(),
      ),
      planRun({ name: 'r', desired: desired(base), current: running(), observed: obs('Pending') }, ctx()),
    ];
    expect(stopped.map((p) => readyOf(p.doc))).toEqual([
      ['Cancelled', 'False', 'Suspended'],
      ['Cancelled', 'False', 'SpecDeleted'],
      ['Scheduling', 'False', 'RestartOnSpecChange'],
      ['Queued', 'False', 'Queued'],
    ]);
  });

  it('refuses an immutable change to a started run, naming the fields, and applies the mutable part', () => {
    const cur = running();
    const changed: RunSpec = { command: ['false'], resources: { gpus: 1 }, policy: { maxAttempts: 9 } };
    const p = planRun(
      { name: 'r', desired: desired(changed), current: cur, observed: obs('Running') },
      ctx(),
    );
    const c = p.doc!.status.conditions.find((x) => x.type === 'SpecChangeRejected')!;
    expect(c.message).toBe(
      'cannot change /command/0, /resources of a started run; revert the change, or set policy.onSpecChange: Restart to restart from the last checkpoint',
    );
    expect(p.doc!.appliedSpec).toEqual({ command: ['true'], policy: { maxAttempts: 9 } });
    expect(p.actions).toEqual([]);
  });

  it('restarts on an immutable change when the run opted in, after a grace period', () => {
    const spec: RunSpec = { ...base, policy: { onSpecChange: 'Restart' } };
    const p = planRun(
      { name: 'r', desired: desired({ ...spec, command: ['false'] }), current: running(spec) },
      ctx(),
    );
    expect(p.actions.map((a) => a.type)).toEqual(['cancel']);
    expect(p.doc!.status).toMatchObject({ phase: 'Scheduling', reason: 'RestartOnSpecChange' });
    expect(p.requeueAfterMs).toBe(15_000);
    const later = planRun(
      { name: 'r', desired: desired({ ...spec, command: ['false'] }), current: p.doc! },
      ctx({ now: T0 + 15_000 }),
    );
    expect(later.actions[0]).toMatchObject({ type: 'submit', attempt: 2 });
  });

  it('reports an invalid spec without touching a live attempt', () => {
    const invalid = {
      name: 'r',
      file: 'runs/r.yaml',
      line: 7,
      column: 5,
      message: 'spec.resources.gpus: expected a whole number',
    };
    const p = planRun({ name: 'r', invalid, current: running() }, ctx());
    expect(p.actions).toEqual([]);
    expect(p.doc!.status.phase).toBe('Running');
    expect(p.doc!.status.conditions.find((c) => c.type === 'Valid')).toMatchObject({
      status: 'False',
      message: 'runs/r.yaml:7:5: spec.resources.gpus: expected a whole number',
    });
  });

  it('a settled run is returned as it is, and agrees with the full planner', () => {
    const done = planRun(
      { name: 'r', desired: desired(base), current: running(), observed: obs('Succeeded', { exitCode: 0 }) },
      ctx(),
    ).doc!;
    const again = planRun({ name: 'r', desired: desired(base), current: done }, ctx());
    expect(again.doc).toBe(done);
    // Anything that matters still gets through: a label, a resumed suspension.
    const relabelled = planRun(
      { name: 'r', desired: { ...desired(base), labels: { team: 'x' } }, current: done },
      ctx(),
    );
    expect(relabelled.doc!.metadata.labels).toEqual({ team: 'x' });
    const sus = planRun(
      { name: 'r', desired: desired({ ...base, suspend: true }), current: running() },
      ctx(),
    ).doc!;
    expect(
      planRun({ name: 'r', desired: desired({ ...base, suspend: true }), current: sus }, ctx()).doc,
    ).toBe(sus);
    expect(planRun({ name: 'r', desired: desired(base), current: sus }, ctx()).actions).toHaveLength(1);
  });

  it('records the heartbeat’s checkpoint, and marks Lost when the heartbeat is too old', () => {
    const hb = {
      time: new Date(T0).toISOString(),
      run: 'r',
      attempt: 1,
      host: 'node-1',
      pid: 4242,
      restoredFrom: 40,
      lastCheckpoint: { step: 60, createdAt: 'c', uri: 'file:///s/runs/r/ckpt/60/' },
    };
    const withHb = planRun(
      { name: 'r', desired: desired(base), current: running(), heartbeat: hb },
      ctx(),
    ).doc!;
    expect(withHb.status.checkpoint).toEqual(hb.lastCheckpoint);
    expect(withHb.status.attempts[0]).toMatchObject({ startStep: 40, lastStep: 60 });
    expect(withHb.status.conditions.find((c) => c.type === 'Checkpointed')?.status).toBe('True');
    const later = planRun(
      { name: 'r', desired: desired(base), current: withHb },
      ctx({ now: T0 + 601_000 }),
    ).doc!;
    expect(later.status.conditions.find((c) => c.type === 'Lost')).toMatchObject({
      status: 'True',
      reason: 'HeartbeatMissing',
      message: 'no heartbeat for 601s (limit 600s)',
    });
    const fresh = planRun(
      {
        name: 'r',
        desired: desired(base),
        current: later,
        heartbeat: { ...hb, time: new Date(T0 + 600_500).toISOString() },
      },
      ctx({ now: T0 + 601_000 }),
    ).doc!;
    expect(fresh.status.conditions.find((c) => c.type === 'Lost')).toBeUndefined();
  });

  it('a multi-host attempt: a process still restoring shows as Restoring, a hung one makes the run Lost', () => {
    const beat = (process: number | undefined, at: number, more: object = {}) => ({
      time: new Date(at).toISOString(),
      run: 'r',
      attempt: 1,
      host: `node-${process ?? 0}`,
      pid: 4242,
      processes: 2,
      ...(process ? { process } : {}),
      ...more,
    });
    const cond = (d: RunStatusDoc, type: string) => d.status.conditions.find((c) => c.type === type);
    const waiting = planRun(
      {
        name: 'r',
        desired: desired(base),
        current: running(),
        heartbeat: { ...beat(undefined, T0), workers: [beat(1, T0, { waitingForRestore: true })] },
      },
      ctx(),
    ).doc!;
    expect(cond(waiting, 'Restoring')).toMatchObject({
      status: 'True',
      message: expect.stringContaining('process 1 of 2 not restored yet'),
    });
    // Process 0 beats on; process 1 went silent after its restore.
    const now = T0 + 700_000;
    const hung = planRun(
      {
        name: 'r',
        desired: desired(base),
        current: waiting,
        heartbeat: { ...beat(undefined, now - 1000), workers: [beat(1, T0)] },
      },
      ctx({ now }),
    ).doc!;
    expect(cond(hung, 'Restoring')).toBeUndefined();
    expect(cond(hung, 'Lost')).toMatchObject({
      status: 'True',
      reason: 'WorkerHeartbeatMissing',
      message: 'process 1: no heartbeat for 700s (limit 600s)',
    });
    // A pass that read no heartbeat keeps it; process 1 heard from again clears it.
    expect(
      cond(planRun({ name: 'r', desired: desired(base), current: hung }, ctx({ now })).doc!, 'Lost'),
    ).toBeDefined();
    const back = planRun(
      {
        name: 'r',
        desired: desired(base),
        current: hung,
        heartbeat: { ...beat(undefined, now), workers: [beat(1, now)] },
      },
      ctx({ now }),
    ).doc!;
    expect(cond(back, 'Lost')).toBeUndefined();
  });

  it('completes its own write-ahead record, waits on another controller’s until it is stale', () => {
    const p = planRun({ name: 'r', desired: desired(base) }, ctx());
    const mine = planRun({ name: 'r', desired: desired(base), current: p.doc! }, ctx());
    expect(mine.actions).toEqual([
      { type: 'submit', run: 'r', attempt: 1, backend: 'big', jobName: 'adv-r-1' },
    ]);
    const theirs = planRun(
      { name: 'r', desired: desired(base), current: p.doc! },
      ctx({ controllerId: 'other' }),
    );
    expect(theirs.actions).toEqual([]);
    expect(theirs.doc!.status.message).toBe(
      `attempt 1 is being submitted to big by controller ${p.doc!.status.attempts[0]!.controller}; if that controller is gone, this one finds the job by name or submits it at ${new Date(T0 + SUBMIT_TAKEOVER_MS).toISOString()}`,
    );
    const stale = planRun(
      { name: 'r', desired: desired(base), current: p.doc! },
      ctx({ controllerId: 'other', now: T0 + SUBMIT_TAKEOVER_MS }),
    );
    expect(stale.actions).toHaveLength(1);
  });
});

describe('stalled: a human must act', () => {
  const cond = (doc: RunStatusDoc, type: string) => doc.status.conditions.find((c) => c.type === type);
  it.each([
    {
      title: 'a secret that is not set',
      spec: { ...base, secrets: ['WANDB_API_KEY'] },
      broken: ctx({
        missingSecrets: (names) =>
          `secret ${names.join(', ')} is not set: looked in the controller's environment`,
      }),
      fixed: ctx({ missingSecrets: () => undefined }),
      reason: 'SecretMissing',
      message:
        "secret WANDB_API_KEY is not set: looked in the controller's environment; set it in the controller's environment, then adv reconcile run r",
    },
    {
      title: 'a code ref that does not exist',
      spec: { ...base, code: { ref: 'v2' } },
      broken: ctx(),
      fixed: ctx({ codeRefs: new Map([['v2', 'e'.repeat(40)]]) }),
      reason: 'CodeRefNotFound',
      message: 'code.ref "v2" does not name a branch, tag or commit of the repository',
    },
  ])('$title: Pending and Stalled, with no retry; once fixed it schedules', (row) => {
    const p = planRun({ name: 'r', desired: desired(row.spec) }, row.broken);
    expect(p.doc!.status).toMatchObject({ phase: 'Pending', reason: row.reason, message: row.message });
    expect(cond(p.doc!, 'Stalled')).toMatchObject({ status: 'True', reason: row.reason });
    expect(cond(p.doc!, 'Scheduled')).toMatchObject({ status: 'False', reason: row.reason });
    // No attempt (so nothing counts against a backend), no action, no timer.
    expect(p.doc!.status.attempts).toEqual([]);
    expect(p.actions).toEqual([]);
    expect(p.requeueAfterMs).toBeUndefined();
    const again = planRun({ name: 'r', desired: desired(row.spec), current: p.doc! }, row.broken);
    expect(again.doc).toBe(p.doc);
    const fixed = planRun({ name: 'r', desired: desired(row.spec), current: p.doc! }, row.fixed);
    expect(fixed.actions.map((a) => a.type)).toEqual(['submit']);
    expect(cond(fixed.doc!, 'Stalled')).toBeUndefined();
  });
});

describe('planRun: code from another repository (code.repo)', () => {
  const repo = 'https://git.example.com/lab/mono.git';
  const spec: RunSpec = { ...base, code: { repo, ref: 'main' } };
  const withCode = (state: CodeRepoState) => ctx({ codeRepos: new Map([['r', state]]) });

  it('waits while the code is fetched, and is looked at again', () => {
    const p = planRun(
      { name: 'r', desired: desired(spec) },
      withCode({ state: 'pending', message: `fetching ${repo}` }),
    );
    expect(p.actions).toEqual([]);
    expect(p.doc!.status).toMatchObject({
      phase: 'Pending',
      reason: 'FetchingCode',
      message: `fetching ${repo}`,
    });
    expect(p.requeueAfterMs).toBeGreaterThan(0);
  });

  it('waits when the caller found nothing yet (adv plan, the first pass)', () => {
    const p = planRun({ name: 'r', desired: desired(spec) }, ctx());
    expect(p.actions).toEqual([]);
    expect(p.doc!.status.reason).toBe('FetchingCode');
  });

  it('stalls on a failure with what to fix, and looks again when the fetch is retried', () => {
    const p = planRun(
      { name: 'r', desired: desired(spec) },
      withCode({
        state: 'failed',
        reason: 'CodeFetchFailed',
        message: `${repo} refused the token`,
        retryInMs: 30_000,
      }),
    );
    expect(p.actions).toEqual([]);
    expect(p.doc!.status.conditions.find((c) => c.type === 'Stalled')).toMatchObject({
      status: 'True',
      reason: 'CodeFetchFailed',
      message: expect.stringMatching(/refused the token \(fix: /),
    });
    expect(p.requeueAfterMs).toBe(30_000);
  });

  it("submits the repo's commit, never the specs commit, and records the repo", () => {
    const commit = 'e'.repeat(40);
    const p = planRun({ name: 'r', desired: desired(spec) }, withCode({ state: 'ready', commit, repo }));
    expect(p.actions).toMatchObject([{ type: 'submit', attempt: 1 }]);
    expect(p.doc!.status).toMatchObject({ codeCommit: commit, codeRepo: repo });
    expect(p.doc!.status.attempts[0]!.codeCommit).toBe(commit);
  });
});
