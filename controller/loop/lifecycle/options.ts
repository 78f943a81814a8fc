/** How a controller is set up, and what one pass reports. */
import type { Logger } from 'pino';
import type { BackendDescriptor, SshTransportFactory } from '../../backends/types.js';
import type { CodeRepoSettings } from '../../git/code-repos.js';
import type { Identity } from '../../git/port.js';
import type { SecretSourcesOptions } from '../../secrets.js';
import type { SpecsRepoOptions } from '../../git/specs-repo.js';
import type { InfraOption } from '../desired/infra-source.js';
import type { PassSteps } from '../status/pass-metrics.js';

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
  /** The controller's environment: `passEnv`, store credentials and `secrets.env` names come from it. */
  secretEnv?: NodeJS.ProcessEnv;
  /** Where the secrets specs name come from (see secrets.ts); default: nowhere. */
  secrets?: SecretSourcesOptions;
  /**
   * How long the status branch lease lasts without renewal (default 30 s): a controller that
   * stops renewing it is replaced by a standby after this long (see loop/lifecycle/lease.ts).
   */
  leaseDurationMs?: number;
  /** How long to wait for the data dir's lock while a previous controller exits (default 10 s). */
  lockWaitMs?: number;
  /**
   * An OpenSSH allowed_signers file: act only on watched-branch heads signed by its keys that
   * descend from the last verified commit acted on (loop/desired/verified-head.ts). Default: no check.
   */
  trustedSigners?: string;
  /**
   * With `trustedSigners`, where the data dir holds no last verified commit: the commit to trust
   * first (`--trust-from`). Without it such a controller acts on nothing (`Unanchored`).
   */
  trustFrom?: string;
  /**
   * Where Backends and Storage come from (loop/desired/infra-source.ts). Default: the specs repo for a
   * local one; a shared one must say.
   */
  infra?: InfraOption;
  /** Code from other repositories (`code.repo`): where the token may go, and the bounds. */
  codeRepos?: CodeRepoSettings;
}

/** Who status commits are by, unless `identity` says otherwise. */
export const DEFAULT_IDENTITY: Identity = { name: 'AdventureTime', email: 'controller@adventuretime.dev' };

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

/** A pass's stats before it starts: nothing done, no time spent. */
export function emptyPassStats(): PassStats {
  return {
    ms: { fetch: 0, load: 0, observe: 0, plan: 0, write: 0, execute: 0 },
    ...{ planned: 0, commits: 0, actions: 0, published: true, loadedSpecs: false, leader: false },
  };
}
