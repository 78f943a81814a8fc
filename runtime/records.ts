/** The files `adv exec` leaves in a job dir: who runs, and how it ended. Written atomically. */
import { renameSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ExecRecord {
  pid: number;
  startTicks?: number;
  childPid?: number;
  childStartTicks?: number;
  run: string;
  attempt: number;
  startedAt: string;
}

export const ExitReason = {
  Completed: 'Completed',
  Error: 'Error',
  /** Ended after a SIGTERM/SIGUSR1 that was not a cancel: the backend took the node back. */
  Preempted: 'Preempted',
  Cancelled: 'Cancelled',
  /** The workload died of a signal nobody sent through adv exec (OOM killer, segfault). */
  Signaled: 'Signaled',
  /** The command could not be started (not found, not executable). */
  StartFailed: 'StartFailed',
  /** A setup step (Backend, Environment, Run, or the uv sync) failed; the workload never started. */
  SetupFailed: 'SetupFailed',
  /** The run's datasets could not be fetched (store, network, cache disk): an infrastructure failure. */
  InputsFailed: 'InputsFailed',
} as const;
export type ExitReason = (typeof ExitReason)[keyof typeof ExitReason];

export interface ExitRecord {
  exitCode: number;
  signal?: string;
  reason: ExitReason;
  message?: string;
  /** With `SetupFailed`: which step failed and how, for the controller. */
  setup?: SetupFailure;
  startedAt: string;
  finishedAt: string;
}

/** The setup step that kept the workload from starting. Secrets are masked. */
export interface SetupFailure {
  /** 1-based, in the order of `ADV_SETUP`; the uv sync, when there is one, is the last. */
  step: number;
  of: number;
  /** "Backend slurm-a", "Environment cuda12@2", "Run", or "uv". */
  from: string;
  /** The step as written (templates unexpanded). */
  command: string;
  exitCode: number;
  /** The last lines the session printed (at most TAIL_LINES). */
  tail: string[];
}

export const EXEC_FILE = 'exec.json';
export const EXIT_FILE = 'exit.json';
export const CANCEL_FILE = 'cancel-requested';

export function writeJsonAtomic(path: string, value: unknown): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, JSON.stringify(value, null, 2) + '\n');
  renameSync(tmp, path);
}

export function readJson<T>(dir: string, file: string): T | undefined {
  try {
    return JSON.parse(readFileSync(join(dir, file), 'utf8')) as T;
  } catch {
    return undefined;
  }
}
