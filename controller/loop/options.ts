/** How a controller is set up, and what one pass reports. */
import type { Logger } from 'pino';
import type { BackendDescriptor, SshTransportFactory } from '../backends/types.js';
import type { Identity } from '../git/port.js';
import type { SpecsRepoOptions } from '../git/specs-repo.js';
import type { PassSteps } from './pass-metrics.js';

/** Everything a controller is given: the repo, intervals, and every side effect it may use. */
export interface ControllerOptions extends Omit<SpecsRepoOptions, 'dataDir'> {
  dataDir: string;
  /** Only specs under this folder of the repo. */
  specsPath?: string;
  fetchIntervalMs?: number;
  pollIntervalMs?: number;
  resyncIntervalMs?: number;
  /** Actions executed at once. */
  concurrency?: number;
  logger?: Logger;
  now?: () => number;
  /** The backend types this controller knows (default: the registry). */
  backends?: readonly BackendDescriptor[];
  /** How adapters open SSH connections (default: ssh2). */
  sshTransport?: SshTransportFactory;
  identity?: Identity;
  /** Also export the Node process's own metrics (CPU, memory, event loop) on /metrics. */
  processMetrics?: boolean;
  /** The controller's environment: secrets named by specs, `passEnv` and store credentials come from it. */
  secretEnv?: NodeJS.ProcessEnv;
  /**
   * How long the status branch lease lasts without renewal (default 30 s): a controller that
   * stops renewing it is replaced by a standby after this long (see loop/lease.ts).
   */
  leaseDurationMs?: number;
  /** How long to wait for the data dir's lock while a previous controller exits (default 10 s). */
  lockWaitMs?: number;
}

/** What one pass did, and how long each of its steps took. */
export interface PassStats {
  /** Milliseconds spent in each step of the pass. */
  ms: PassSteps;
  planned: number;
  commits: number;
  actions: number;
  published: boolean;
  loadedSpecs: boolean;
  /** False while another controller holds the status branch lease: the pass only read. */
  leader: boolean;
}
