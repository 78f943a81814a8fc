import { describe, expect, it } from 'vitest';
import type { BackendInfo } from '../../reconcile/solver.js';
import type { Attempt, BackendStatusDoc, RunStatusDoc } from '../../status/types.js';
import { backendStatusDoc, degradedWhy, failureStreaks } from './health.js';

const ends = (run: string, list: [backend: string, cls: string, at: string][]): RunStatusDoc => ({
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'RunStatus',
  metadata: { name: run },
  status: {
    phase: 'Failed',
    conditions: [],
    attempts: list.map(([backend, cls, at], i): Attempt => ({
      n: i + 1,
      backend,
      jobName: `adv-${run}-${i + 1}`,
      phase: 'Failed',
      specCommit: 'c',
      class: cls as Attempt['class'],
      finishedAt: `2026-01-01T00:00:0${at}Z`,
    })),
  } as unknown as RunStatusDoc['status'],
});

describe('failureStreaks', () => {
  const table: { name: string; runs: RunStatusDoc[]; want: Record<string, string[]> }[] = [
    {
      name: 'distinct failing runs since the last success, oldest first',
      runs: [
        ends('a', [['b1', 'Succeeded', '1']]),
        ends('x', [['b1', 'UserError', '2']]),
        ends('y', [['b1', 'Infrastructure', '3']]),
      ],
      want: { b1: ['x', 'y'] },
    },
    {
      name: 'a failed setup step counts against the backend: something its hosts lack',
      runs: [ends('x', [['b1', 'SetupFailed', '1']]), ends('y', [['b1', 'SetupFailed', '2']])],
      want: { b1: ['x', 'y'] },
    },
    {
      name: 'a success ends the streak',
      runs: [ends('x', [['b1', 'UserError', '1']]), ends('a', [['b1', 'Succeeded', '2']])],
      want: {},
    },
    {
      name: 'preemptions, time-outs, cancels and stalls neither count nor break it',
      runs: [
        ends('x', [['b1', 'UserError', '1']]),
        ends('p', [['b1', 'Preempted', '2']]),
        ends('t', [['b1', 'Timeout', '3']]),
        ends('c', [['b1', 'Cancelled', '4']]),
        ends('s', [['b1', 'Stalled', '5']]),
      ],
      want: { b1: ['x'] },
    },
    {
      name: 'one run failing twice counts once; backends are apart',
      runs: [
        ends('x', [
          ['b1', 'UserError', '1'],
          ['b1', 'UserError', '2'],
          ['b2', 'Infrastructure', '3'],
        ]),
      ],
      want: { b1: ['x'], b2: ['x'] },
    },
  ];
  for (const t of table)
    it(t.name, () => {
      const got = Object.fromEntries([...failureStreaks(t.runs)].map(([b, s]) => [b, s.map((e) => e.run)]));
      expect(got).toEqual(t.want);
    });
});

describe('degradedWhy', () => {
  const streak = ['a', 'b', 'c', 'd'].map((run, i) => ({
    run,
    attempt: 1,
    class: 'UserError',
    finishedAt: `2026-01-01T00:00:0${i}Z`,
  }));
  it('is healthy below the threshold and names the last N runs at it', () => {
    expect(degradedWhy(streak.slice(0, 2))).toBeUndefined();
    expect(degradedWhy(streak)).toBe(
      '4 runs failed here in a row: b (UserError), c (UserError), d (UserError)',
    );
    expect(degradedWhy(streak, 5)).toBeUndefined();
    expect(degradedWhy(undefined)).toBeUndefined();
  });
});

describe('backendStatusDoc', () => {
  const info = (usable: boolean, why?: string): BackendInfo =>
    ({
      name: 'b1',
      spec: { type: 'local' },
      usable,
      ...(why ? { why } : {}),
      traits: {
        queuesWhenFull: false,
        multiNode: false,
        tpus: false,
        billsFrom: 'submitted',
        jobNameMax: 63,
      },
    }) as BackendInfo;

  it('says Ready, keeps transition times while nothing changes, and moves them when it does', () => {
    const first = backendStatusDoc({
      info: info(true),
      prev: undefined,
      activeAttempts: 2,
      streak: undefined,
      nowMs: 0,
    });
    expect(first.summary).toBe('backend/b1: Ready');
    expect(first.doc.status).toMatchObject({ type: 'local', activeAttempts: 2 });
    const same = backendStatusDoc({
      info: info(true),
      prev: first.doc,
      activeAttempts: 2,
      streak: undefined,
      nowMs: 60_000,
    });
    expect(same.doc).toEqual(first.doc);
    const down = backendStatusDoc({
      info: info(false, 'suspended'),
      prev: first.doc,
      activeAttempts: 0,
      streak: undefined,
      nowMs: 60_000,
    });
    expect(down.summary).toBe('backend/b1: NotReady (suspended)');
    const ready = down.doc.status.conditions.find((c) => c.type === 'Ready')!;
    expect(ready).toMatchObject({ status: 'False', reason: 'Unavailable', message: 'suspended' });
    expect(ready.lastTransitionTime).toBe(new Date(60_000).toISOString());
  });

  it('is Degraded with the failing runs listed, and the streak kept in the file', () => {
    const streak = ['a', 'b', 'c'].map((run) => ({ run, attempt: 1, class: 'UserError', finishedAt: 't' }));
    const { doc, summary } = backendStatusDoc({
      info: info(true),
      prev: undefined as BackendStatusDoc | undefined,
      activeAttempts: 0,
      streak,
      nowMs: 0,
    });
    expect(summary).toMatch(/^backend\/b1: Degraded \(3 runs failed here in a row/);
    expect(doc.status.conditions.find((c) => c.type === 'Degraded')).toMatchObject({
      status: 'True',
      reason: 'RunsFailing',
    });
    expect(doc.status.failureStreak?.map((e) => e.run)).toEqual(['a', 'b', 'c']);
  });
});
