/**
 * The Run planner's steps, each on its own: a working state built as `planRun` builds it, one
 * step run on it, and what that step alone did to the status, the actions and the requeue.
 */
import { describe, expect, it } from 'vitest';
import { backendInfoOf, descriptorFor } from '../backends/registry.js';
import type { ObservedJob } from '../backends/types.js';
import type { RunSpec } from '../spec/schema.js';
import type { Attempt, Condition, Heartbeat, RunStatus, RunStatusDoc } from '../status/types.js';
import { generationOf, RECONCILE_ANNOTATION, RETRY_ANNOTATION, type BackendInfo } from './run-plan.js';
import type { DesiredRun, PlanContext } from './run-plan-model.js';
import {
  adoptSpec,
  diffSpec,
  enforceGuardrails,
  finishWork,
  finishWriteAhead,
  invalidSpec,
  isSettled,
  lostCondition,
  observe,
  reconcileAnnotation,
  recordHeartbeat,
  resume,
  retryAnnotation,
  RUN_STEPS,
  specDeleted,
  startWork,
  suspend,
} from './run-plan-steps.js';
import { schedule } from './run-plan-schedule.js';
import { STOP, type RunWork, type StepResult } from './run-plan-model.js';

const T0 = Date.parse('2026-11-22T12:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
const backend = (name: string, extra: Partial<BackendInfo> = {}): BackendInfo => ({
  ...backendInfoOf(name, { type: 'local' }),
  ...extra,
});
const ctx = (over: Partial<PlanContext> = {}): PlanContext => ({
  now: T0,
  specCommit: 'c'.repeat(40),
  backends: [backend('local')],
  codeRefs: new Map([['main', 'd'.repeat(40)]]),
  controllerId: 'me',
  ...over,
});
const base: RunSpec = { command: ['true'] };
const desired = (spec: RunSpec = base, over: Partial<DesiredRun> = {}): DesiredRun => ({
  name: 'r',
  spec,
  generation: generationOf(spec),
  file: 'runs/r.yaml',
  ...over,
});
const valid: Condition = {
  type: 'Valid',
  status: 'True',
  reason: 'Valid',
  message: '',
  lastTransitionTime: iso(T0),
};
const attempt = (n: number, phase: Attempt['phase'], over: Partial<Attempt> = {}): Attempt => ({
  n,
  backend: 'local',
  jobName: `adv-r-${n}`,
  jobId: String(40 + n),
  phase,
  specCommit: 'c'.repeat(40),
  submittedAt: iso(T0 - 60_000),
  ...over,
});
/** A run acted on `spec`, by default running its first attempt. */
const doc = (spec: RunSpec = base, status: Partial<RunStatus> = {}): RunStatusDoc => ({
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'RunStatus',
  metadata: { name: 'r' },
  appliedSpec: spec,
  status: {
    phase: 'Running',
    observedGeneration: generationOf(spec),
    specFile: 'runs/r.yaml',
    codeCommit: 'c'.repeat(40),
    conditions: [valid],
    attempts: [attempt(1, 'Running', { startedAt: iso(T0 - 60_000) })],
    ...status,
  },
});
/** The working state of a pass over `current`, as planRun starts it. */
const work = (
  current: RunStatusDoc | undefined,
  d: DesiredRun = desired(),
  c: PlanContext = ctx(),
  extra: { observed?: ObservedJob; heartbeat?: Heartbeat } = {},
): RunWork => startWork({ name: 'r', ...(current ? { current } : {}), ...extra }, d, c);
const condition = (w: RunWork, type: string) => w.doc.status.conditions.find((c) => c.type === type);

describe('the pipeline', () => {
  it('takes the steps in the documented order', () => {
    expect(RUN_STEPS.map((s) => s.name)).toEqual([
      'adoptSpec',
      'diffSpec',
      'reconcileAnnotation',
      'retryAnnotation',
      'suspend',
      'resume',
      'recordHeartbeat',
      'observe',
      'enforceGuardrails',
      'lostCondition',
      'schedule',
      'finishWriteAhead',
    ]);
  });

  it('never edits the status it was given', () => {
    const cur = doc();
    const before = structuredClone(cur);
    const w = work(cur, desired({ ...base, suspend: true }));
    for (const step of RUN_STEPS) if (step(w) === STOP) break;
    expect(w.doc.status.phase).toBe('Cancelled');
    expect(cur).toEqual(before);
  });
});

describe('before the pipeline', () => {
  const invalid = { name: 'r', file: 'runs/r.yaml', line: 2, column: 3, message: 'bad' };

  it('invalidSpec: a run never valid says so in its reason; a known one keeps its phase', () => {
    expect(invalidSpec('r', invalid, undefined, ctx()).doc!.status).toMatchObject({
      phase: 'Pending',
      reason: 'SpecInvalid',
      specFile: 'runs/r.yaml',
    });
    const p = invalidSpec('r', invalid, doc(), ctx());
    expect(p.doc!.status).toMatchObject({ phase: 'Running' });
    expect(p.summary).toBe('run/r: spec invalid (runs/r.yaml:2)');
    expect(p.actions).toEqual([]);
  });

  it.each([
    ['no status: nothing to do', undefined, 'same', []],
    ['finished: left as it is', doc(base, { phase: 'Succeeded' }), 'same', []],
    ['live: cancelled', doc(), 'Cancelled', ['cancel']],
  ] as const)('specDeleted, %s', (_t, cur, phase, actions) => {
    const p = specDeleted('r', cur, ctx());
    if (phase === 'same') expect(p.doc).toBe(cur);
    else expect(p.doc!.status).toMatchObject({ phase, reason: 'SpecDeleted' });
    expect(p.actions.map((a) => a.type)).toEqual(actions);
  });

  it.each([
    ['a finished run acted on this spec', {}, desired(), undefined, true],
    ['not finished', { phase: 'Running' as const }, desired(), undefined, false],
    [
      'observed this pass',
      {},
      desired(),
      { jobName: 'adv-r-1', jobId: '41', state: 'Succeeded' as const },
      false,
    ],
    ['another generation', {}, desired({ command: ['false'] }), undefined, false],
    [
      'suspended, no longer',
      { phase: 'Cancelled' as const, reason: 'Suspended' },
      desired(),
      undefined,
      false,
    ],
    ['moved to another file', {}, desired(base, { file: 'runs/x.yaml' }), undefined, false],
    ['relabelled', {}, desired(base, { labels: { a: '1' } }), undefined, false],
    [
      'reconcile requested',
      {},
      desired(base, { annotations: { [RECONCILE_ANNOTATION]: 't' } }),
      undefined,
      false,
    ],
    ['retry requested', {}, desired(base, { annotations: { [RETRY_ANNOTATION]: 't' } }), undefined, false],
    ['last seen invalid', { conditions: [] }, desired(), undefined, false],
  ] satisfies [string, Partial<RunStatus>, DesiredRun, ObservedJob | undefined, boolean][])(
    'isSettled: %s',
    (_t, status, d, observed, settled) => {
      expect(isSettled(doc(base, { phase: 'Succeeded', ...status }), d, observed)).toBe(settled);
    },
  );
});

describe('adoptSpec', () => {
  it('takes the file, owner and labels of the desired run, and marks it valid', () => {
    const w = work(
      doc(base, { conditions: [] }),
      desired(base, { file: 'runs/x.yaml', owner: 'd', labels: { team: 'x' } }),
    );
    adoptSpec(w);
    expect(w.doc.status).toMatchObject({ specFile: 'runs/x.yaml', owner: 'd' });
    expect(w.doc.metadata.labels).toEqual({ team: 'x' });
    expect(condition(w, 'Valid')).toMatchObject({ status: 'True' });
  });

  it.each([
    ['never started: the SpecInvalid reason goes', [], undefined],
    ['started: the reason stays until the run moves', [attempt(1, 'Failed')], 'SpecInvalid'],
  ])('%s', (_t, attempts, reason) => {
    const w = work(doc(base, { reason: 'SpecInvalid', message: 'm', attempts }));
    w.doc.metadata.labels = { old: '1' };
    adoptSpec(w);
    expect(w.doc.status.reason).toBe(reason);
    expect(w.doc.metadata.labels).toBeUndefined();
  });
});

describe('diffSpec', () => {
  const changed: RunSpec = { command: ['false'] };
  it.each([
    // [title, current, desired spec, applied spec after, events, SpecChangeRejected]
    ['a new run takes the spec as it is', undefined, base, base, [], false],
    [
      'a mutable change applies',
      doc(),
      { ...base, policy: { maxAttempts: 5 } },
      { ...base, policy: { maxAttempts: 5 } },
      ['spec updated (/policy)'],
      false,
    ],
    [
      'an immutable change applies to a run not started',
      doc(base, { phase: 'Pending', attempts: [] }),
      changed,
      changed,
      ['spec updated (/command/0)'],
      false,
    ],
    [
      'an immutable change to a started run is refused; the mutable part applies',
      doc(),
      { ...changed, policy: { maxAttempts: 5 } },
      { ...base, policy: { maxAttempts: 5 } },
      ['spec change rejected (/command/0)'],
      true,
    ],
  ] satisfies [string, RunStatusDoc | undefined, RunSpec, RunSpec, string[], boolean][])(
    '%s',
    (_t, cur, spec, applied, events, rejected) => {
      const w = work(cur, desired(spec));
      diffSpec(w);
      expect(w.spec).toEqual(applied);
      expect(w.doc.appliedSpec).toEqual(applied);
      expect(w.events).toEqual(events);
      expect(Boolean(condition(w, 'SpecChangeRejected'))).toBe(rejected);
      expect(w.doc.status.observedGeneration === generationOf(spec)).toBe(!rejected);
    },
  );

  it('restarts a started run that opted in: cancels the live attempt, waits for its checkpoint', () => {
    const spec: RunSpec = { ...base, policy: { onSpecChange: 'Restart' } };
    const w = work(doc(spec), desired({ ...spec, command: ['false'] }));
    diffSpec(w);
    expect(w.doc.status).toMatchObject({
      phase: 'Scheduling',
      reason: 'RestartOnSpecChange',
      nextAttemptAfter: iso(T0 + 15_000),
    });
    expect(w.doc.status.codeCommit).toBeUndefined();
    expect(w.doc.status.attempts[0]).toMatchObject({ phase: 'Cancelled', reason: 'RestartOnSpecChange' });
    expect(w.actions.map((a) => a.type)).toEqual(['cancel']);
  });

  it('a later change that is accepted clears an earlier refusal', () => {
    const w = work(doc(), desired({ ...base, command: ['false'] }));
    diffSpec(w);
    expect(condition(w, 'SpecChangeRejected')).toBeDefined();
    const again = work(w.doc, desired({ ...base, policy: { maxAttempts: 2 } }));
    diffSpec(again);
    expect(condition(again, 'SpecChangeRejected')).toBeUndefined();
  });
});

describe('annotations', () => {
  it('reconcileAnnotation records the request it saw', () => {
    const w = work(doc(), desired(base, { annotations: { [RECONCILE_ANNOTATION]: 't1' } }));
    reconcileAnnotation(w);
    expect(w.doc.status.lastHandledReconcileAt).toBe('t1');
  });

  it.each([
    // [title, status, spec, annotation, phase after, budget from, events]
    [
      'a failed run gets a new attempt',
      { phase: 'Failed' as const },
      base,
      't1',
      'Scheduling',
      2,
      ['retry requested'],
    ],
    ['a running run only records it', {}, base, 't1', 'Running', undefined, []],
    [
      'a request seen before is not redone',
      { phase: 'Failed' as const, lastHandledRetryAt: 't1' },
      base,
      't1',
      'Failed',
      undefined,
      [],
    ],
    [
      'a suspended run is not retried',
      { phase: 'Cancelled' as const },
      { ...base, suspend: true },
      't1',
      'Cancelled',
      undefined,
      [],
    ],
  ] satisfies [string, Partial<RunStatus>, RunSpec, string, string, number | undefined, string[]][])(
    'retryAnnotation: %s',
    (_t, status, spec, value, phase, budget, events) => {
      const w = work(
        doc(spec, { ...status, nextAttemptAfter: iso(T0 + 1000) }),
        desired(spec, { annotations: { [RETRY_ANNOTATION]: value } }),
      );
      w.spec = spec;
      retryAnnotation(w);
      expect(w.doc.status.phase).toBe(phase);
      expect(w.doc.status.budgetFromAttempt).toBe(budget);
      expect(w.doc.status.lastHandledRetryAt).toBe('t1');
      expect(w.events).toEqual(events);
      expect(w.doc.status.nextAttemptAfter === undefined).toBe(budget !== undefined);
    },
  );
});

describe('suspend and resume', () => {
  it.each([
    ['a running run: cancelled, its job too', {}, 'Cancelled', 'run/r: Cancelled (suspended)', ['cancel']],
    [
      'a finished run keeps its phase',
      { phase: 'Succeeded' as const, attempts: [] },
      'Succeeded',
      'run/r: Succeeded',
      [],
    ],
  ] satisfies [string, Partial<RunStatus>, string, string, string[]][])(
    'suspend: %s, and the pipeline ends',
    (_t, status, phase, headline, actions) => {
      const spec = { ...base, suspend: true };
      const w = work(doc(spec, status), desired(spec));
      w.spec = spec;
      expect(suspend(w)).toBe(STOP);
      expect(w.doc.status.phase).toBe(phase);
      expect(w.headline).toBe(headline);
      expect(w.actions.map((a) => a.type)).toEqual(actions);
    },
  );

  it('suspend: not suspended, nothing happens', () => {
    const w = work(doc());
    expect(suspend(w)).toBeUndefined();
    expect(w.doc.status.phase).toBe('Running');
  });

  it('suspend: a stalled run is no longer stalled', () => {
    const stalled: Condition = { ...valid, type: 'Stalled', reason: 'SecretMissing' };
    const spec = { ...base, suspend: true };
    const w = work(
      doc(spec, { phase: 'Pending', attempts: [], conditions: [valid, stalled] }),
      desired(spec),
    );
    w.spec = spec;
    suspend(w);
    expect(condition(w, 'Stalled')).toBeUndefined();
  });

  it.each([
    ['suspended', 'Suspended', 'Scheduling'],
    ['its spec deleted', 'SpecDeleted', 'Scheduling'],
    ['cancelled on the backend (final)', 'CancelledOnBackend', 'Cancelled'],
  ])('resume: a run cancelled as %s', (_t, reason, phase) => {
    const w = work(doc(base, { phase: 'Cancelled', reason, attempts: [attempt(1, 'Cancelled')] }));
    resume(w);
    expect(w.doc.status.phase).toBe(phase);
  });
});

describe('what the attempt says', () => {
  const hb = (n: number): Heartbeat => ({
    time: iso(T0 - 1000),
    run: 'r',
    attempt: n,
    host: 'node-1',
    pid: 4242,
    lastCheckpoint: { step: 60, createdAt: 'c', uri: 'file:///c/60' },
  });
  it.each([
    ['the current attempt’s heartbeat is recorded', 1, iso(T0 - 1000)],
    ['another attempt’s is not', 7, undefined],
  ])('recordHeartbeat: %s', (_t, n, lastHeartbeat) => {
    const w = work(doc(), desired(), ctx(), { heartbeat: hb(n) });
    recordHeartbeat(w);
    expect(w.doc.status.lastHeartbeat).toBe(lastHeartbeat);
    expect(w.doc.status.checkpoint?.step).toBe(lastHeartbeat ? 60 : undefined);
  });

  it.each([
    ['queued', 'adv-r-1', 'Pending', {}, 'Queued', []],
    [
      'a failure, said in the summary',
      'adv-r-1',
      'Failed',
      { exitCode: 2 },
      'Scheduling',
      ['attempt 1 on local exited 2; retrying in 30s from the start (no checkpoint yet) (1 of 3)'],
    ],
    ['another job’s news is not this attempt’s', 'adv-r-9', 'Succeeded', {}, 'Running', []],
  ] as const)('observe: %s', (_t, jobName, state, extra, phase, events) => {
    const w = work(doc(), desired(), ctx(), { observed: { jobName, jobId: '41', state, ...extra } });
    observe(w);
    expect(w.doc.status.phase).toBe(phase);
    expect(w.events).toEqual(events);
  });

  it.each([
    ['a running attempt past maxHours is stopped', 'Running', ['cancel']],
    ['a write-ahead record is not (it has no job yet)', 'Submitting', []],
  ] as const)('enforceGuardrails: %s', (_t, phase, actions) => {
    const spec: RunSpec = { ...base, policy: { maxHours: 0.5 } };
    const w = work(
      doc(spec, { attempts: [attempt(1, phase, { startedAt: iso(T0 - 3_600_000) })] }),
      desired(spec),
    );
    diffSpec(w);
    enforceGuardrails(w);
    expect(w.actions.map((a) => a.type)).toEqual(actions);
  });

  it.each([
    ['running, heartbeat too old', 'Running', T0 - 601_000, [], 'True'],
    ['running, heartbeat fresh', 'Running', T0 - 1000, [{ ...valid, type: 'Lost' }], undefined],
    ['ended', 'Failed', T0 - 601_000, [{ ...valid, type: 'Lost' }], undefined],
  ] as const)('lostCondition: %s', (_t, phase, beat, conditions, lost) => {
    const w = work(
      doc(base, {
        lastHeartbeat: iso(beat),
        attempts: [attempt(1, phase)],
        conditions: [valid, ...conditions],
      }),
    );
    lostCondition(w);
    expect(condition(w, 'Lost')?.status).toBe(lost);
  });
});

describe('schedule', () => {
  const pending = () => doc(base, { phase: 'Pending', attempts: [], codeCommit: undefined });
  interface Row {
    title: string;
    status?: Partial<RunStatus>;
    spec?: RunSpec;
    ctx?: PlanContext;
    result: StepResult;
    phase: string;
    reason?: string;
    requeueAfterMs?: number;
    submits?: number;
  }
  const rows: Row[] = [
    {
      title: 'a live attempt: not its turn',
      status: { phase: 'Running', attempts: [attempt(1, 'Running')] },
      result: undefined,
      phase: 'Running',
    },
    {
      title: 'a finished run: not its turn',
      status: { phase: 'Succeeded' },
      result: undefined,
      phase: 'Succeeded',
    },
    {
      title: 'backoff not over: look again when it is',
      status: { nextAttemptAfter: iso(T0 + 5000) },
      result: STOP,
      phase: 'Pending',
      requeueAfterMs: 5000,
    },
    {
      title: 'maxTotalHours spent: fails',
      status: { attempts: [attempt(1, 'Failed', { startedAt: iso(T0 - 7_200_000), finishedAt: iso(T0) })] },
      spec: { ...base, policy: { maxTotalHours: 1 } },
      result: STOP,
      phase: 'Failed',
      reason: 'TotalTimeExceeded',
    },
    {
      title: 'no backend: waits, and looks again',
      ctx: ctx({ backends: [backend('local', { usable: false })] }),
      result: STOP,
      phase: 'Pending',
      reason: 'NoBackend',
      requeueAfterMs: 30_000,
    },
    {
      title: 'a backend: the write-ahead record, and the submission',
      result: STOP,
      phase: 'Scheduling',
      reason: 'Submitting',
      submits: 1,
    },
    {
      title: 'a code ref that does not exist: stalled, no requeue',
      spec: { ...base, code: { ref: 'nope' } },
      result: STOP,
      phase: 'Pending',
      reason: 'CodeRefNotFound',
    },
    {
      title: 'a secret not set: stalled, no requeue',
      spec: { ...base, secrets: ['WANDB_API_KEY'] },
      ctx: ctx({ missingSecrets: () => 'secret WANDB_API_KEY is not set' }),
      result: STOP,
      phase: 'Pending',
      reason: 'SecretMissing',
    },
    {
      title: 'secrets are not checked for a run without any',
      ctx: ctx({ missingSecrets: () => 'never asked' }),
      result: STOP,
      phase: 'Scheduling',
      reason: 'Submitting',
      submits: 1,
    },
  ];
  it.each(rows)('$title', (row) => {
    const spec = row.spec ?? base;
    const w = work(
      doc(base, { phase: 'Pending', attempts: [], codeCommit: undefined, ...row.status }),
      desired(spec),
      row.ctx ?? ctx(),
    );
    w.spec = spec;
    const before = w.doc.status.attempts.length;
    expect(schedule(w)).toBe(row.result);
    expect([w.doc.status.phase, w.doc.status.reason]).toEqual([row.phase, row.reason]);
    expect(w.requeueAfterMs).toBe(row.requeueAfterMs);
    expect(w.actions.filter((a) => a.type === 'submit')).toHaveLength(row.submits ?? 0);
    expect(w.doc.status.attempts.length - before).toBe(row.submits ?? 0);
  });

  it('names the job within the chosen backend’s limit', () => {
    const long = 'a-run-name-long-enough-to-pass-a-short-limit';
    const short = backend('short', { traits: { ...descriptorFor('local')!.traits, jobNameMax: 32 } });
    const w = startWork({ name: long }, desired(base, { name: long }), ctx({ backends: [short] }));
    schedule(w);
    expect(w.doc.status.attempts[0]!.jobName.length).toBeLessThanOrEqual(32);
    const roomy = startWork({ name: long }, desired(base, { name: long }), ctx());
    schedule(roomy);
    expect(roomy.doc.status.attempts[0]!.jobName).toBe(`adv-${long}-1`);
  });

  it('a stall on several secrets says to set them', () => {
    const spec = { ...base, secrets: ['A', 'B', 'C'] };
    const unset = (names: readonly string[]) => names.filter((n) => n !== 'C');
    const c = ctx({
      missingSecrets: (names) => (unset(names).length ? `not set: ${unset(names).join(', ')}` : undefined),
    });
    const w = work(pending(), desired(spec), c);
    w.spec = spec;
    schedule(w);
    expect(w.doc.status.message).toBe(
      "not set: A, B; set them in the controller's environment, then adv reconcile run r",
    );
  });

  it('a stall says what to do, and goes once the cause does', () => {
    const spec = { ...base, secrets: ['WANDB_API_KEY'] };
    const w = work(
      pending(),
      desired(spec),
      ctx({ missingSecrets: () => 'secret WANDB_API_KEY is not set' }),
    );
    w.spec = spec;
    schedule(w);
    expect(w.doc.status.message).toBe(
      "secret WANDB_API_KEY is not set; set it in the controller's environment, then adv reconcile run r",
    );
    expect(condition(w, 'Stalled')).toMatchObject({ status: 'True', reason: 'SecretMissing' });
    const fixed = work(w.doc, desired(spec), ctx({ missingSecrets: () => undefined }));
    fixed.spec = spec;
    schedule(fixed);
    expect(condition(fixed, 'Stalled')).toBeUndefined();
    expect(condition(fixed, 'Scheduled')).toMatchObject({ status: 'True' });
  });
});

describe('finishWriteAhead', () => {
  const record = (controller: string, age: number, jobId?: string) =>
    doc(base, {
      phase: 'Scheduling',
      attempts: [
        attempt(1, 'Submitting', {
          controller,
          submittedAt: iso(T0 - age),
          ...(jobId ? {} : { jobId: undefined }),
        }),
      ],
    });
  it.each([
    ['its own record: submit (finding the job by name first)', record('me', 0), 1, undefined],
    ['another controller’s: wait for it', record('other', 60_000), 0, 240_000],
    ['another controller’s, stale: take it over', record('other', 300_000), 1, undefined],
    ['a record with a job id: nothing to finish', record('me', 0, '41'), 0, undefined],
  ])('%s', (_t, cur, submits, requeueAfterMs) => {
    const w = work(cur);
    finishWriteAhead(w);
    expect(w.actions).toHaveLength(submits);
    expect(w.requeueAfterMs).toBe(requeueAfterMs);
  });
});

describe('finishWork', () => {
  it('hands back the status it was given when nothing changed, with no summary', () => {
    const cur = doc();
    const plan = finishWork(work(cur));
    expect(plan.doc).toBe(cur);
    expect(plan.summary).toBeUndefined();
  });

  it('puts the headline before the events, and passes the requeue on', () => {
    const w = work(doc());
    w.doc.status.phase = 'Queued';
    w.events.push('one', 'two');
    w.requeueAfterMs = 5;
    expect(finishWork(w)).toMatchObject({
      summary: 'run/r: Queued (attempt 1 on local, job 41); one; two',
      requeueAfterMs: 5,
    });
  });
});

describe('diffSpec: the lineage of a fork (spec.forkFrom → status.forkedFrom)', () => {
  const fork: RunSpec = { ...base, forkFrom: { run: 'parent', step: 20 } };
  it('a new fork records its parent and step', () => {
    const w = work(undefined, desired(fork));
    diffSpec(w);
    expect(w.doc.status.forkedFrom).toEqual({ run: 'parent', step: 20 });
  });

  it('a started fork cannot move to another checkpoint: the change is refused, the lineage stays', () => {
    const started = doc(fork, { forkedFrom: { run: 'parent', step: 20 } });
    const w = work(started, desired({ ...base, forkFrom: { run: 'parent', step: 10 } }));
    diffSpec(w);
    expect(condition(w, 'SpecChangeRejected')?.message).toContain('/forkFrom/step');
    expect(w.doc.status.forkedFrom).toEqual({ run: 'parent', step: 20 });
  });

  it('a fork stalled on a missing source takes the fix to its step: nothing ran', () => {
    const stalled = doc(fork, {
      phase: 'Pending',
      forkedFrom: { run: 'parent', step: 20 },
      attempts: [attempt(1, 'Failed', { class: 'Stalled', reason: 'ForkSourceMissing', jobId: undefined })],
    });
    const w = work(stalled, desired({ ...base, forkFrom: { run: 'parent', step: 10 } }));
    diffSpec(w);
    expect(condition(w, 'SpecChangeRejected')).toBeUndefined();
    expect(w.doc.appliedSpec?.forkFrom).toEqual({ run: 'parent', step: 10 });
    expect(w.doc.status.forkedFrom).toEqual({ run: 'parent', step: 10 });
  });

  it('forkFrom dropped before any attempt: no lineage', () => {
    const pending = doc(fork, { phase: 'Pending', attempts: [], forkedFrom: { run: 'parent', step: 20 } });
    const w = work(pending, desired(base));
    diffSpec(w);
    expect(w.doc.status.forkedFrom).toBeUndefined();
  });
});
