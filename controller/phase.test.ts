import { describe, expect, it } from 'vitest';
import { isEnded, JobState as PortJobState } from './backends/types.js';
import { AttemptPhase, ENDED_STATES, JobState, Phase } from './phase.js';
import { ENDED_ATTEMPT_PHASES } from './status/phases.js';
import { AttemptPhase as StatusAttemptPhase, Phase as StatusPhase } from './status/types.js';

describe('one phase vocabulary', () => {
  it('a job is observed in every run phase but the controller’s own steps, or Unknown', () => {
    expect(Object.values(JobState)).toEqual([
      'Pending',
      'Running',
      'Succeeded',
      'Failed',
      'Cancelled',
      'Preempted',
      'Lost',
      'Unknown',
    ]);
    const notObserved = Object.values(Phase).filter(
      (p) => !(Object.values(JobState) as string[]).includes(p),
    );
    expect(notObserved).toEqual([Phase.Scheduling, Phase.Queued]);
  });

  it('an attempt’s phases are the run’s and its write-ahead Submitting, in the order status shows', () => {
    expect(Object.values(AttemptPhase)).toEqual(['Submitting', ...Object.values(Phase)]);
    expect(Object.values(Phase)).toEqual([
      'Pending',
      'Scheduling',
      'Queued',
      'Running',
      'Succeeded',
      'Failed',
      'Cancelled',
      'Preempted',
      'Lost',
    ]);
  });

  it('the names callers import are the same objects', () => {
    expect(PortJobState).toBe(JobState);
    expect(StatusPhase).toBe(Phase);
    expect(StatusAttemptPhase).toBe(AttemptPhase);
  });

  it('a job has ended in exactly the states an attempt has ended in', () => {
    expect([...ENDED_ATTEMPT_PHASES]).toEqual([...ENDED_STATES]);
    for (const s of Object.values(JobState))
      expect([s, isEnded(s)]).toEqual([s, (ENDED_ATTEMPT_PHASES as ReadonlySet<string>).has(s)]);
    expect(Object.values(JobState).filter(isEnded)).toEqual([
      'Succeeded',
      'Failed',
      'Cancelled',
      'Preempted',
      'Lost',
    ]);
  });
});
