/**
 * Failure classification: every observed end of an attempt gets one class, and the class alone
 * decides what happens next (run-plan.ts):
 *
 * | class            | examples                                                      | next                          |
 * | ---------------- | ------------------------------------------------------------- | ----------------------------- |
 * | `Succeeded`      | exit 0                                                        | run Succeeded                 |
 * | `Preempted`      | SLURM PREEMPTED, spot reclaim, SIGTERM from the backend        | new attempt, infra budget     |
 * | `Infrastructure` | NODE_FAIL, BOOT_FAIL, job gone without an end record, host     | new attempt, infra budget     |
 * |                  | unreachable past the threshold, the submission itself failed  |                               |
 * |                  | adv exec's `InputsFailed` (the run's datasets not fetched)    |                               |
 * | `UserError`      | non-zero exit, OOM, killed by a signal, command not found      | backoff, counts to maxAttempts |
 * | `Timeout`        | SLURM TIMEOUT/DEADLINE, `policy.maxHours`                      | new attempt; counts to        |
 * |                  |                                                               | maxAttempts only without progress |
 * | `SetupFailed`    | a setup step failed on the host (adv exec's `SetupFailed`):   | new attempt at once, another  |
 * |                  | the workload never started                                    | backend first; counts to      |
 * |                  |                                                               | maxAttempts                   |
 * | `Cancelled`      | scancel by hand, `adv cancel`, spec deleted                   | never restarts                |
 * | `Stalled`        | never started: a secret or store credential is missing         | none until a person fixes it; |
 * |                  |                                                               | counts against nothing        |
 */
import { ExitReason } from '../../runtime/records.js';
import { JobState, type ObservedJob } from '../backends/types.js';
import { EndClass } from '../status/types.js';

/** Backend words for an end caused by the machine, not the code. */
const INFRA_REASONS = new Set([
  'NODE_FAIL',
  'BOOT_FAIL',
  'LAUNCH_FAILED',
  'SubmitFailed',
  'Unreachable',
  'JobDirMissing',
  'SpotReclaimed',
  'HostLost',
  ExitReason.InputsFailed,
]);
const TIMEOUT_REASONS = new Set(['TIMEOUT', 'DEADLINE', 'MaxHoursExceeded', 'TimeLimit']);

/** The class of an observed end; undefined while the job is not over (or cannot be observed). */
export function classifyEnd(o: Pick<ObservedJob, 'state' | 'reason' | 'exitCode'>): EndClass | undefined {
  switch (o.state) {
    case JobState.Pending:
    case JobState.Running:
    case JobState.Unknown:
      return undefined;
    case JobState.Succeeded:
      return EndClass.Succeeded;
    case JobState.Cancelled:
      return EndClass.Cancelled;
    case JobState.Preempted:
      return EndClass.Preempted;
    case JobState.Lost:
      return EndClass.Infrastructure;
    case JobState.Failed:
      if (o.reason === ExitReason.SetupFailed) return EndClass.SetupFailed;
      if (o.reason && TIMEOUT_REASONS.has(o.reason)) return EndClass.Timeout;
      if (o.reason && INFRA_REASONS.has(o.reason)) return EndClass.Infrastructure;
      return EndClass.UserError;
  }
}
