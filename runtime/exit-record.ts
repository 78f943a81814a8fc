/** The exit record of an attempt: how it ended, from how the workload exited and who stopped it. */
import { existsSync } from 'node:fs';
import { ExitReason, type ExitRecord } from './records.js';
import { redactText } from './redact.js';
import type { StopForwarder, WorkloadEnd } from './supervise.js';

/** How the attempt ended, from how the workload exited and who stopped it. */
export async function exitRecord(
  result: WorkloadEnd,
  fwd: StopForwarder,
  o: {
    cmd: string;
    cwd: string;
    cancelled: boolean;
    /** Publishes the declared outputs of a node that finished its work; what went wrong, if anything. */
    publish: () => Promise<string | undefined>;
    startedAt: string;
    secrets: string[];
  },
): Promise<ExitRecord> {
  const { stopSignal, killedByUs } = fwd;
  let reason: ExitReason;
  let exitCode: number;
  let message: string | undefined;
  if (result.error) {
    reason = ExitReason.StartFailed;
    exitCode = 127;
    // Node says ENOENT of the command when it is the working dir that is missing.
    message = existsSync(o.cwd)
      ? `cannot start ${JSON.stringify(o.cmd)}: ${result.error.message}`
      : `cannot start ${JSON.stringify(o.cmd)}: its working dir ${o.cwd} does not exist (was it removed?)`;
  } else if (o.cancelled) {
    reason = ExitReason.Cancelled;
    exitCode = result.code ?? 128 + signalNumber(result.signal);
  } else if (stopSignal) {
    // Stopped from outside (preemption notice, time limit, scancel): however it exited, the
    // attempt did not finish its work.
    reason = result.code === 0 ? ExitReason.Completed : ExitReason.Preempted;
    exitCode = result.code ?? 128 + signalNumber(result.signal);
    message = `stopped by ${stopSignal}${killedByUs ? ' and killed after the grace period' : ''}`;
  } else if (result.signal) {
    reason = ExitReason.Signaled;
    exitCode = 128 + signalNumber(result.signal);
    message = `workload killed by ${result.signal}`;
  } else {
    exitCode = result.code ?? 1;
    reason = exitCode === 0 ? ExitReason.Completed : ExitReason.Error;
  }
  // A node that finished its work publishes its declared outputs, each complete or not at all.
  if (reason === ExitReason.Completed && !stopSignal) {
    const problem = await o.publish();
    if (problem) {
      reason = ExitReason.Error;
      exitCode = 1;
      message = problem;
    }
  }
  return {
    exitCode,
    ...(result.signal ? { signal: result.signal } : {}),
    reason,
    ...(message ? { message: redactText(message, o.secrets) } : {}),
    startedAt: o.startedAt,
    finishedAt: new Date().toISOString(),
  };
}

const SIGNALS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGSEGV: 11,
  SIGUSR2: 12,
  SIGTERM: 15,
};
export function signalNumber(sig: NodeJS.Signals | null): number {
  return sig ? (SIGNALS[sig] ?? 1) : 0;
}
