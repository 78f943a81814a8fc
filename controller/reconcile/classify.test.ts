import { describe, expect, it } from 'vitest';
import { ExitReason } from '../../runtime/records.js';
import { mapSlurmState } from '../backends/slurm/index.js';
import { JobState, observedFromExit } from '../backends/types.js';
import { classifyEnd } from './classify.js';
import { EndClass } from '../status/types.js';

describe('classifyEnd over every SLURM state (the 24 of squeue(1) JOB STATE CODES)', () => {
  // [state, slurm reason, exit code, class] — `undefined`: not an end (yet).
  it.each([
    ['PENDING', 'Priority', 0, undefined],
    ['REQUEUED', 'None', 0, undefined],
    ['REQUEUE_HOLD', 'None', 0, undefined],
    ['REQUEUE_FED', 'None', 0, undefined],
    ['SUSPENDED', 'None', 0, undefined],
    ['RESV_DEL_HOLD', 'None', 0, undefined],
    ['CONFIGURING', 'None', 0, undefined],
    ['RUNNING', 'None', 0, undefined],
    ['COMPLETING', 'None', 0, undefined],
    ['RESIZING', 'None', 0, undefined],
    ['SIGNALING', 'None', 0, undefined],
    ['STAGE_OUT', 'None', 0, undefined],
    ['COMPLETED', 'None', 0, EndClass.Succeeded],
    ['COMPLETED', 'None', 1, EndClass.UserError],
    ['FAILED', 'NonZeroExitCode', 3, EndClass.UserError],
    ['FAILED', 'None', 1, EndClass.UserError],
    ['OUT_OF_MEMORY', 'None', 0, EndClass.UserError],
    ['TIMEOUT', 'TimeLimit', 0, EndClass.Timeout],
    ['DEADLINE', 'None', 0, EndClass.Timeout],
    ['CANCELLED', 'None', 0, EndClass.Cancelled],
    ['CANCELLED+', 'None', 0, EndClass.Cancelled],
    ['PREEMPTED', 'None', 0, EndClass.Preempted],
    ['NODE_FAIL', 'None', 0, EndClass.Infrastructure],
    ['BOOT_FAIL', 'None', 0, EndClass.Infrastructure],
    ['SPECIAL_EXIT', 'None', 3, EndClass.UserError],
    ['STOPPED', 'None', 0, undefined],
    ['REVOKED', 'None', 0, EndClass.Cancelled],
  ] as const)('%s (%s, exit %i) → %s', (state, reason, exitCode, expected) => {
    const o = mapSlurmState({ jobId: '1', jobName: 'j', state, reason, exitCode });
    expect(classifyEnd(o)).toBe(expected);
  });
});

describe('classifyEnd over adv exec exit records (local and ssh backends)', () => {
  it.each([
    [ExitReason.Completed, 0, EndClass.Succeeded],
    [ExitReason.Error, 1, EndClass.UserError],
    [ExitReason.Error, 137, EndClass.UserError],
    [ExitReason.Signaled, 137, EndClass.UserError], // the OOM killer
    [ExitReason.StartFailed, 127, EndClass.UserError],
    [ExitReason.SetupFailed, 1, EndClass.SetupFailed], // a setup step failed: the workload never ran
    [ExitReason.InputsFailed, 1, EndClass.Infrastructure], // its datasets could not be fetched
    [ExitReason.Preempted, 143, EndClass.Preempted], // SIGTERM from the backend: spot reclaim
    [ExitReason.Cancelled, 143, EndClass.Cancelled],
  ] as const)('%s, exit %i → %s', (reason, exitCode, expected) => {
    expect(classifyEnd(observedFromExit({ jobName: 'j', jobId: '1' }, { exitCode, reason }))).toBe(expected);
  });

  it.each([
    [JobState.Lost, 'JobDirMissing', EndClass.Infrastructure],
    [JobState.Lost, 'NoExitRecord', EndClass.Infrastructure],
    [JobState.Failed, 'SubmitFailed', EndClass.Infrastructure],
    [JobState.Failed, 'MaxHoursExceeded', EndClass.Timeout],
    [JobState.Unknown, 'Unreachable', undefined],
  ] as const)('%s (%s) → %s', (state, reason, expected) => {
    expect(classifyEnd({ state, reason })).toBe(expected);
  });
});
