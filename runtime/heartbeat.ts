/**
 * The heartbeat record, declared once for its writer and its reader: `adv exec` (worker.ts) puts
 * it in the object store when the workload starts, every heartbeat interval and once at the end;
 * the controller reads it for the attempt's latest checkpoint and to tell a lost worker from one
 * that is merely unobservable. Old workers' heartbeats must stay readable: add fields, never
 * rename or remove one.
 */
import { attemptPrefix } from './checkpoint.js';

/** A checkpoint the attempt has committed (files uploaded, manifest last). */
export interface HeartbeatCheckpoint {
  step: number;
  /** When its manifest was written (ISO 8601). */
  createdAt: string;
  /** The step's prefix in the store, as a URL (`file:///…/runs/r/ckpt/60/`, `s3://…`). */
  uri: string;
}

/**
 * What `adv exec` writes to `runs/<run>/attempts/<n>/heartbeat.json` (process 0) and
 * `runs/<run>/attempts/<n>/workers/<k>/heartbeat.json` (process k > 0).
 */
export interface Heartbeat {
  /** When it was written (ISO 8601): the run's `lastHeartbeat`. */
  time: string;
  run: string;
  /** The attempt the worker runs; the controller ignores a heartbeat of another attempt. */
  attempt: number;
  /** Where the worker runs, for a person looking for it. */
  host: string;
  pid: number;
  /** The step restored before the workload started, if any. */
  restoredFrom?: number;
  /** The newest checkpoint committed so far (the restored one until a new one is). */
  lastCheckpoint?: HeartbeatCheckpoint;
  /** The step being uploaded now. */
  uploading?: number;
  /** Process k of a multi-host attempt (absent: process 0 of it, or a single-process job). */
  process?: number;
  /** How many processes the attempt has (absent: one). */
  processes?: number;
  /**
   * This process has not finished its restore (process 0: choosing and downloading; process
   * k > 0: waiting for that choice, then downloading it): its workload has not started.
   */
  waitingForRestore?: boolean;
  /**
   * A dataset of the run's `inputs` being fetched into the host cache before the workload starts:
   * bytes of it present so far (cached or fetched) out of its total.
   */
  fetchingDataset?: { dataset: string; bytes: number; total: number };
  /** (Process 0) A finished step whose manifest waits for the part records of these processes. */
  awaitingParts?: { step: number; missing: number[] };
  /** (Process k > 0) Written once at its end, after its last part record: it will write no more. */
  finishedAt?: string;
  /**
   * Never written by adv exec: the controller's observer hangs the heartbeats of processes
   * 1..N-1 (`workers/<k>/heartbeat.json`) on process 0's, so one read shows the whole gang.
   */
  workers?: Heartbeat[];
}

/** The heartbeat's key in the object store: process 0's (and a single process's). */
export const heartbeatKey = (run: string, attempt: number): string =>
  `${attemptPrefix(run, attempt)}heartbeat.json`;

/** Where process k > 0 of a multi-host attempt heartbeats (`workers/<k>/`, beside its logs). */
export const workerHeartbeatKey = (run: string, attempt: number, k: number): string =>
  k ? `${workersPrefix(run, attempt)}${k}/heartbeat.json` : heartbeatKey(run, attempt);

export const workersPrefix = (run: string, attempt: number): string =>
  `${attemptPrefix(run, attempt)}workers/`;
