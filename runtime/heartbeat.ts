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

/** What `adv exec` writes to `runs/<run>/attempts/<n>/heartbeat.json`. */
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
}

/** The heartbeat's key in the object store. */
export const heartbeatKey = (run: string, attempt: number): string =>
  `${attemptPrefix(run, attempt)}heartbeat.json`;
