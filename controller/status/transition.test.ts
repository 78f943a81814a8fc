import { describe, expect, it } from 'vitest';
import { setOwnerPhase, transition } from './transition.js';
import { ConditionType, Phase, type Condition, type RunStatus } from './types.js';

const T1 = '2026-11-28T01:00:00.000Z';
const T2 = '2026-11-28T02:00:00.000Z';

const cond = (type: string, status: Condition['status'], reason: string, at = T1): Condition => ({
  type,
  status,
  reason,
  message: '',
  lastTransitionTime: at,
});
const run = (phase: Phase, conditions: Condition[] = []): RunStatus => ({
  phase,
  reason: 'Before',
  message: 'before',
  conditions,
  attempts: [],
});
const get = (st: RunStatus, type: string) => st.conditions.find((c) => c.type === type);

describe('transition: a run’s phase and its conditions move together', () => {
  it('Running is Ready=True, and a Ready already True keeps its transition time', () => {
    const st = run(Phase.Queued, [cond(ConditionType.Ready, 'False', 'Preempted')]);
    transition(st, { phase: Phase.Running, reason: 'Running', message: 'attempt 2 running on a' }, T2);
    expect(st).toMatchObject({ phase: 'Running', reason: 'Running', message: 'attempt 2 running on a' });
    expect(get(st, ConditionType.Ready)).toEqual(cond(ConditionType.Ready, 'True', 'Running', T2));
    const again = run(Phase.Running, [cond(ConditionType.Ready, 'True', 'Running')]);
    const before = again.conditions;
    transition(again, { phase: Phase.Running, reason: 'Running', message: 'm' }, T2);
    expect(again.conditions).toBe(before);
  });

  it('keeps the phase and Ready/Scheduled consistent, from any phase to any phase', () => {
    const conditionsBefore: Condition[][] = [
      [],
      [cond(ConditionType.Ready, 'True', 'Running'), cond(ConditionType.Scheduled, 'True', 'BackendChosen')],
      [cond(ConditionType.Ready, 'False', 'Preempted'), cond(ConditionType.Scheduled, 'False', 'NoCapacity')],
    ];
    for (const from of Object.values(Phase))
      for (const to of Object.values(Phase))
        for (const conditions of conditionsBefore) {
          const st = run(from, conditions);
          transition(st, { phase: to, reason: 'Why', message: 'because' }, T2);
          const ready = get(st, ConditionType.Ready)?.status === 'True';
          const scheduled = get(st, ConditionType.Scheduled)?.status === 'True';
          expect([from, to, ready, to === Phase.Pending && scheduled]).toEqual([
            from,
            to,
            to === Phase.Running,
            false,
          ]);
          expect(st.phase).toBe(to);
        }
  });

  it('a run that stops running without a word on Ready is not Ready, for the transition’s reason', () => {
    const st = run(Phase.Running, [cond(ConditionType.Ready, 'True', 'Running')]);
    transition(st, { phase: Phase.Cancelled, reason: 'Suspended', message: 'spec.suspend is true' }, T2);
    expect(get(st, ConditionType.Ready)).toEqual(cond(ConditionType.Ready, 'False', 'Suspended', T2));
  });

  it('a Pending run has no backend chosen: a Scheduled left True goes False with the reason', () => {
    const st = run(Phase.Scheduling, [cond(ConditionType.Scheduled, 'True', 'BackendChosen')]);
    transition(st, { phase: Phase.Pending, reason: 'NoCapacity', message: 'all full' }, T2);
    expect(get(st, ConditionType.Scheduled)).toEqual({
      ...cond(ConditionType.Scheduled, 'False', 'NoCapacity', T2),
      message: 'all full',
    });
  });

  it('sets the given conditions in the order given (the order is written to the status file)', () => {
    const st = run(Phase.Scheduling, [
      cond(ConditionType.Valid, 'True', 'Valid'),
      cond(ConditionType.Scheduled, 'True', 'BackendChosen'),
    ]);
    transition(
      st,
      {
        phase: Phase.Pending,
        reason: 'SecretMissing',
        message: 'no secret',
        conditions: [
          { type: ConditionType.Stalled, status: 'True', reason: 'SecretMissing', message: 'no secret' },
          { type: ConditionType.Scheduled, status: 'False', reason: 'SecretMissing', message: 'no secret' },
        ],
      },
      T2,
    );
    expect(st.conditions.map((c) => c.type)).toEqual(['Valid', 'Stalled', 'Scheduled']);
  });

  it('writes phase, reason and message in that order on a status that had none of them', () => {
    const st = { conditions: [], attempts: [] } as unknown as RunStatus;
    transition(st, { phase: Phase.Scheduling, reason: 'Submitting', message: 'm' }, T2);
    expect(Object.keys(st)).toEqual(['conditions', 'attempts', 'phase', 'reason', 'message']);
  });

  const contradictions: { phase: Phase; c: Omit<Condition, 'lastTransitionTime'> }[] = [
    { phase: Phase.Running, c: { type: ConditionType.Ready, status: 'False', reason: 'x', message: '' } },
    { phase: Phase.Cancelled, c: { type: ConditionType.Ready, status: 'True', reason: 'x', message: '' } },
    { phase: Phase.Pending, c: { type: ConditionType.Scheduled, status: 'True', reason: 'x', message: '' } },
  ];
  for (const { phase, c } of contradictions)
    it(`refuses a ${phase} run with ${c.type}=${c.status}, and changes nothing`, () => {
      const st = run(Phase.Queued);
      expect(() => transition(st, { phase, reason: 'r', message: 'm', conditions: [c] }, T2)).toThrow(
        `a ${phase} run cannot have ${c.type}=${c.status}`,
      );
      expect(st).toEqual(run(Phase.Queued));
    });
});

describe('setOwnerPhase', () => {
  it('sets a DAG’s or Sweep’s phase, reason and message, and no condition', () => {
    const st = { phase: Phase.Running, conditions: [] as Condition[] };
    setOwnerPhase(st, Phase.Succeeded, 'Completed', '3/3 nodes succeeded');
    expect(st).toEqual({
      phase: 'Succeeded',
      reason: 'Completed',
      message: '3/3 nodes succeeded',
      conditions: [],
    });
  });
});
