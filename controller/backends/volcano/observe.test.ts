import { describe, expect, it } from 'vitest';
import type { ExitRecord } from '../../../runtime/records.js';
import type { K8sObject } from './kubectl.js';
import { observe, type Seen } from './observe.js';

const job = (phase: string, status: Record<string, unknown> = {}): K8sObject => ({
  kind: 'Job',
  metadata: { name: 'adv-r-1' },
  spec: { minAvailable: 2 },
  status: { state: { phase }, ...status },
});
const pod = (k: number, status: Record<string, unknown>): K8sObject => ({
  kind: 'Pod',
  metadata: { name: `adv-r-1-worker-${k}`, labels: { 'volcano.sh/job-name': 'adv-r-1' } },
  status,
});
const running = (k: number) => pod(k, { phase: 'Running', startTime: `2026-11-24T10:0${k}:00Z` });
const exit = (reason: ExitRecord['reason'], exitCode = 0): ExitRecord => ({
  reason,
  exitCode,
  startedAt: '2026-11-24T10:00:00Z',
  finishedAt: '2026-11-24T10:10:00Z',
});
const seen = (over: Partial<Seen>): Seen => ({
  jobName: 'adv-r-1',
  name: 'adv-r-1',
  namespace: 'ml',
  queue: 'research',
  job: undefined,
  pods: [],
  cancelled: false,
  ...over,
});

describe('observe: every Volcano phase', () => {
  it('Pending waits in the queue for the gang', () => {
    const o = observe(seen({ job: job('Pending') }));
    expect(o).toMatchObject({ state: 'Pending', reason: 'Queued' });
    expect(o.message).toMatch(/queue research .* gang of 2 pods/);
  });
  it('Running with the whole gang running is Running, started when the first pod did', () => {
    expect(observe(seen({ job: job('Running'), pods: [running(0), running(1)] }))).toMatchObject({
      state: 'Running',
      startedAt: '2026-11-24T10:00:00Z',
    });
  });
  it('Running while a pod is Pending is still pending (volcano #2684)', () => {
    const o = observe(
      seen({
        job: job('Running', { pending: 1, running: 1 }),
        pods: [running(0), pod(1, { phase: 'Pending' })],
      }),
    );
    expect(o).toMatchObject({ state: 'Pending', reason: 'PodsPending' });
    expect(o.message).toMatch(/1 of 2 pods started \(1 pending\)/);
  });
  it('Running from the counts alone when the pods are not listed', () => {
    expect(observe(seen({ job: job('Running', { running: 0, pending: 2 }) })).state).toBe('Pending');
    expect(observe(seen({ job: job('Running', { running: 2 }) })).state).toBe('Running');
  });
  it('process 0 completed while another pod still runs: the attempt succeeded (its record is the attempt’s)', () => {
    const done = pod(0, { phase: 'Succeeded' });
    expect(
      observe(seen({ job: job('Running'), pods: [done, running(1)], exit: exit('Completed') })),
    ).toMatchObject({
      state: 'Succeeded',
    });
    // Without its record yet, a finished pod 0 still counts as started.
    expect(observe(seen({ job: job('Running'), pods: [done, running(1)] })).state).toBe('Running');
  });
  it('Restarting is pending again', () => {
    expect(observe(seen({ job: job('Restarting') }))).toMatchObject({
      state: 'Pending',
      reason: 'Restarting',
    });
  });
  it.each(['Completing', 'Aborting', 'Terminating'])(
    '%s is not ended yet: its pods are being stopped',
    (phase) => {
      expect(observe(seen({ job: job(phase), exit: exit('Preempted', 143) }))).toMatchObject({
        state: 'Running',
        reason: phase,
      });
    },
  );
  it('Completed takes process 0’s exit record, else Succeeded', () => {
    expect(observe(seen({ job: job('Completed'), exit: exit('Completed') }))).toMatchObject({
      state: 'Succeeded',
      reason: 'Completed',
      exitCode: 0,
    });
    expect(observe(seen({ job: job('Completed') }))).toMatchObject({ state: 'Succeeded' });
  });
  it('Aborted (an eviction or a lost node, by our policies) is a preemption', () => {
    const evicted = pod(1, {
      phase: 'Failed',
      reason: 'Evicted',
      message: 'The node was low on resource: memory.',
    });
    const o = observe(seen({ job: job('Aborted'), pods: [evicted], exit: exit('Preempted', 143) }));
    expect(o).toMatchObject({ state: 'Preempted', reason: 'Evicted' });
    expect(o.message).toContain('adv-r-1-worker-1 was evicted: The node was low on resource: memory.');
    expect(observe(seen({ job: job('Aborted') }))).toMatchObject({ state: 'Preempted', reason: 'Aborted' });
  });
  it('a DisruptionTarget condition or an Unknown pod is a disruption too', () => {
    const dt = pod(0, {
      phase: 'Failed',
      conditions: [{ type: 'DisruptionTarget', status: 'True', reason: 'PreemptionByScheduler' }],
    });
    expect(observe(seen({ job: job('Aborted'), pods: [dt] })).message).toContain('PreemptionByScheduler');
    expect(observe(seen({ job: job('Aborted'), pods: [pod(0, { phase: 'Unknown' })] })).reason).toBe(
      'Evicted',
    );
  });
  it('Aborted after the workload completed is a success', () => {
    expect(observe(seen({ job: job('Aborted'), exit: exit('Completed') })).state).toBe('Succeeded');
  });
  it('Terminated by another pod’s failure is Failed with that pod’s exit code, not process 0’s SIGTERM', () => {
    const failed = pod(1, {
      phase: 'Failed',
      containerStatuses: [{ state: { terminated: { exitCode: 3, reason: 'Error' } } }],
    });
    const o = observe(seen({ job: job('Terminated'), pods: [failed], exit: exit('Preempted', 143) }));
    expect(o).toMatchObject({ state: 'Failed', reason: 'PodFailed', exitCode: 3 });
    expect(o.message).toContain('pod adv-r-1-worker-1 failed (exit 3, Error)');
  });
  it('Terminated with no failed pod while process 0 got SIGTERM: taken away from outside, a preemption', () => {
    expect(observe(seen({ job: job('Terminated'), exit: exit('Preempted', 143) }))).toMatchObject({
      state: 'Preempted',
      reason: 'Terminated',
    });
  });
  it('Terminated by a kubelet eviction (it raises PodFailed, the evicted pod retained) is a preemption', () => {
    const evicted = pod(0, {
      phase: 'Failed',
      reason: 'Evicted',
      message: 'The node was low on resource: memory.',
    });
    expect(
      observe(seen({ job: job('Terminated'), pods: [evicted], exit: exit('Preempted', 143) })),
    ).toMatchObject({
      state: 'Preempted',
      reason: 'Evicted',
    });
  });
  it('Terminated when process 0 itself failed takes its record', () => {
    expect(observe(seen({ job: job('Terminated'), exit: exit('Error', 2) }))).toMatchObject({
      state: 'Failed',
      reason: 'Error',
      exitCode: 2,
    });
  });
  it('Failed (Volcano’s own retries) is Failed — unless a pod was evicted (volcano #2560)', () => {
    expect(
      observe(seen({ job: job('Failed', { state: { phase: 'Failed', message: 'max retry reached' } }) })),
    ).toMatchObject({ state: 'Failed' });
    const evicted = pod(0, { phase: 'Failed', reason: 'Evicted' });
    expect(observe(seen({ job: job('Failed'), pods: [evicted] }))).toMatchObject({
      state: 'Preempted',
      reason: 'Evicted',
    });
  });
  it('no Job: its exit record, else Cancelled when we deleted it, else Lost', () => {
    expect(observe(seen({ exit: exit('Completed') })).state).toBe('Succeeded');
    expect(observe(seen({ cancelled: true })).state).toBe('Cancelled');
    expect(observe(seen({}))).toMatchObject({ state: 'Lost', reason: 'JobGone' });
  });
});
