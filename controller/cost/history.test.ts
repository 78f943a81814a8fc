import { describe, expect, it } from 'vitest';
import { AttemptPhase, EndClass, Phase, type Attempt, type RunStatusDoc } from '../status/types.js';
import { backendRecords, preemptionRate, secondsPerStep, stepRateOf } from './history.js';
import { expectedHours, lossPerPreemptionHours, stretch } from './estimate.js';

const T0 = Date.parse('2026-11-01T00:00:00Z');
const at = (sec: number) => new Date(T0 + sec * 1000).toISOString();

/** An attempt submitted at `from`, started 60 s later, ended `ranSec` after that. */
const att = (
  n: number,
  backend: string,
  fromSec: number,
  ranSec: number,
  cls?: EndClass,
  more: Partial<Attempt> = {},
): Attempt => ({
  n,
  backend,
  jobName: `adv-r-${n}`,
  phase: AttemptPhase.Succeeded,
  specCommit: 'c',
  submittedAt: at(fromSec),
  startedAt: at(fromSec + 60),
  ...(cls ? { finishedAt: at(fromSec + 60 + ranSec), class: cls } : {}),
  ...more,
});

const doc = (name: string, attempts: Attempt[]): RunStatusDoc =>
  ({
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'RunStatus',
    metadata: { name },
    status: { phase: Phase.Running, conditions: [], attempts },
  }) as unknown as RunStatusDoc;

describe('backendRecords', () => {
  it('counts preemptions per attempt-hour over every run, and the mean time to start', () => {
    const records = backendRecords([
      doc('a', [att(1, 'spot', 0, 1800, EndClass.Preempted), att(2, 'spot', 4000, 1800, EndClass.Succeeded)]),
      doc('b', [att(1, 'spot', 0, 3600, EndClass.Preempted), att(2, 'box', 0, 7200, EndClass.Succeeded)]),
      // Live: not counted until it ends.
      doc('c', [att(1, 'spot', 0, 0)]),
    ]);
    expect(records.get('spot')).toEqual({ attempts: 3, preemptions: 2, hours: 2, startupSec: 60 });
    expect(preemptionRate(records.get('spot'))).toBe(1);
    expect(records.get('box')).toEqual({ attempts: 1, preemptions: 0, hours: 2, startupSec: 60 });
    expect(preemptionRate(records.get('nowhere'))).toBe(0);
  });

  it('learns what a backend billed per GPU-hour from its priced attempts of runs with GPUs', () => {
    const priced = (n: number, perHour: number) =>
      att(n, 'vast', 0, 3600, EndClass.Succeeded, { price: { perHour, from: 'started' } });
    const withGpus = (d: RunStatusDoc, gpus: number): RunStatusDoc => ({
      ...d,
      appliedSpec: { command: ['x'], resources: { gpus } },
    });
    const records = backendRecords([
      withGpus(doc('a', [priced(1, 2)]), 1),
      withGpus(doc('b', [priced(1, 8)]), 2),
      doc('cpu', [priced(1, 100)]),
    ]);
    // $2 for 1 GPU-hour, $8 for 2: $10 over 3 GPU-hours; the CPU run's price is not per GPU.
    expect(records.get('vast')!.gpuHourPrice).toBeCloseTo(10 / 3);
    expect(backendRecords([doc('cpu', [priced(1, 100)])]).get('vast')!.gpuHourPrice).toBeUndefined();
  });

  it('skips attempts that never started (nothing ran there)', () => {
    const never: Attempt = { ...att(1, 'spot', 0, 0), finishedAt: at(10), class: EndClass.Infrastructure };
    delete never.startedAt;
    expect(backendRecords([doc('a', [never])]).size).toBe(0);
  });
});

describe('step rate', () => {
  const measured = att(1, 'box', 0, 2000, EndClass.Preempted, {
    startStep: 100,
    lastStep: 300,
    lastStepAt: at(60 + 1000),
  });

  it('is the steps between restore and last commit over the time to it', () => {
    expect(secondsPerStep([measured])).toBe(5);
    expect(secondsPerStep([att(1, 'box', 0, 100, EndClass.Succeeded)])).toBeUndefined();
  });

  it("comes from the run's own attempts, else the same command, else the same labels, else unknown", () => {
    const spec = { command: ['python', 'train.py'] };
    const other = { command: ['python', 'eval.py'] };
    const labelled = { name: 'x', spec: other, labels: { team: 'nlp' }, attempts: [measured] };
    const sameCmd = { name: 'y', spec, attempts: [{ ...measured, lastStep: 500 }] };
    expect(stepRateOf({ name: 'r', spec, attempts: [measured] }, [sameCmd])).toEqual({
      secondsPerStep: 5,
      from: 'own',
    });
    expect(
      stepRateOf({ name: 'r', spec, labels: { team: 'nlp' }, attempts: [] }, [labelled, sameCmd]),
    ).toEqual({
      secondsPerStep: 2.5,
      from: 'similar',
      run: 'y',
    });
    expect(stepRateOf({ name: 'r', spec, labels: { team: 'nlp' }, attempts: [] }, [labelled])).toEqual({
      secondsPerStep: 5,
      from: 'similar',
      run: 'x',
    });
    expect(stepRateOf({ name: 'r', spec, labels: { team: 'cv' }, attempts: [] }, [labelled])).toBeUndefined();
    expect(stepRateOf({ name: 'r', spec, attempts: [] }, [labelled])).toBeUndefined();
  });
});

describe('estimate', () => {
  it('expected hours need both totalSteps and a rate; the checkpoint already reached counts', () => {
    const rate = { secondsPerStep: 36, from: 'own' as const };
    expect(expectedHours({ totalSteps: 1000 }, rate)).toBe(10);
    expect(expectedHours({ totalSteps: 1000 }, rate, 500)).toBe(5);
    expect(expectedHours({}, rate)).toBeUndefined();
    expect(expectedHours({ totalSteps: 1000 }, undefined)).toBeUndefined();
  });

  it("a preemption loses the run's measured loss, else half its checkpoint interval, else 15 min", () => {
    const lost = att(1, 'spot', 0, 3600, EndClass.Preempted, { lastStepAt: at(60 + 3600 - 1800) });
    expect(lossPerPreemptionHours({ command: ['x'] }, [lost])).toBe(0.5);
    expect(lossPerPreemptionHours({ command: ['x'], policy: { checkpointIntervalSec: 3600 } }, [])).toBe(0.5);
    expect(lossPerPreemptionHours({ command: ['x'] }, [])).toBe(0.25);
  });

  it('stretches an hour of work by preemptions × (loss + restart)', () => {
    expect(stretch({}, 0.5)).toBe(1);
    expect(stretch({ record: { attempts: 4, preemptions: 2, hours: 1, startupSec: 1800 } }, 0.5)).toBe(3);
  });
});
