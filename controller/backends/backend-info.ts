/**
 * What the solver knows of one Backend: its spec, its type's traits, whether it can take work, and
 * what the controller learned of it this pass. The registry builds it (`backendInfoOf`), the loop
 * adds capacity and health, the solver (reconcile/solver.ts) reads it.
 */
import type { Backend as BackendObject } from '../spec/schema.js';
import type { BackendTraits, Capacity } from './types.js';

/** One Backend as the solver sees it. */
export interface BackendInfo {
  name: string;
  spec: BackendObject['spec'];
  /** What its type can do (from its descriptor in the registry). */
  traits: BackendTraits;
  /** An adapter exists for its type and it is not suspended. */
  usable: boolean;
  /** Why not, when not usable. */
  why?: string;
  /** What `capacity()` said lately, where the backend can tell. */
  capacity?: Capacity;
  /** Live attempts on it (for `maxConcurrent`); the controller counts this pass's picks in. */
  active?: number;
  /** GPUs this pass already handed to runs planned before (not yet in `capacity`). */
  reservedGpus?: number;
  /** Set while the backend has failed several runs in a row (its status file says which). */
  degraded?: string;
  /** Its preemptions and restart time over every run's attempts (status branch), for `policy.optimize`. */
  record?: BackendRecord;
}

/** One backend's record over every run's finished attempts there. */
export interface BackendRecord {
  /** Finished attempts that started running there. */
  attempts: number;
  /** Of those, the ones that ended preempted. */
  preemptions: number;
  /** Hours those attempts ran (start to end). */
  hours: number;
  /** Mean seconds from submission to start (what a restart costs before work goes on); 0 unknown. */
  startupSec: number;
  /**
   * What its priced attempts were billed per GPU-hour (runs with GPUs), for a Backend that declares
   * no `costPerHour` (a Vast.ai instance reports its own rate); absent when none was priced.
   */
  gpuHourPrice?: number;
}
