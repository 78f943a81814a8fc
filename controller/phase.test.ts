import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isEnded, JobState as PortJobState } from './backends/types.js';
import { AttemptPhase, ENDED_STATES, JobState, Phase } from './phase.js';
import { ENDED_ATTEMPT_PHASES } from './status/phases.js';
import { AttemptPhase as StatusAttemptPhase, Phase as StatusPhase } from './status/types.js';

/** The words as they were before they were defined once: status files and callers depend on them. */
const OBSERVED = ['Pending', 'Running', 'Succeeded', 'Failed', 'Cancelled', 'Preempted', 'Lost'];
const ENDED = OBSERVED.slice(2);

describe('one phase vocabulary', () => {
  it('a run’s phases, in the order status and adv get have always shown them', () => {
    expect(Object.values(Phase)).toEqual(['Pending', 'Scheduling', 'Queued', ...OBSERVED.slice(1)]);
  });

  it('a job is observed in every run phase but the controller’s own steps, or Unknown', () => {
    expect(Object.values(JobState)).toEqual([...OBSERVED, 'Unknown']);
  });

  it('an attempt’s phases are the run’s and its write-ahead Submitting', () => {
    expect(Object.values(AttemptPhase)).toEqual(['Submitting', ...Object.values(Phase)]);
  });

  it('the names callers import are the same objects', () => {
    expect(PortJobState).toBe(JobState);
    expect(StatusPhase).toBe(Phase);
    expect(StatusAttemptPhase).toBe(AttemptPhase);
  });

  it('a job has ended in exactly the states an attempt has ended in', () => {
    expect([...ENDED_STATES]).toEqual(ENDED);
    expect([...ENDED_ATTEMPT_PHASES]).toEqual(ENDED);
    expect(Object.values(JobState).filter(isEnded)).toEqual(ENDED);
  });

  it('imports nothing: status/, the port and every adapter import it, so it must sit below them all', () => {
    const text = readFileSync(new URL('./phase.ts', import.meta.url), 'utf8');
    expect(text.match(/^\s*(import|export .* from)\b.*$/gm) ?? []).toEqual([]);
  });
});
