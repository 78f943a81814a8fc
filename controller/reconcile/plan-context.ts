/**
 * The Run planner's context, built one way for the controller's pass (loop/plan/reconcilers.ts) and
 * for `adv plan`, so that a pull request's plan decides as the controller will: the same code
 * refs resolved against the same branches, the same backends, the same clock.
 */
import type { GitPort } from '../git/port.js';
import type { RunSpec } from '../spec/schema.js';
import type { RunStatus } from '../status/types.js';
import { resolveCodeRefs, resolveCodeRepos, type CodeRepoStates } from './desired.js';
import type { PlanContext } from './run-plan.js';
import type { BackendInfo } from './solver.js';

/** What the context is made from; what a caller cannot know (adv plan: secrets, other repos) it leaves out. */
export interface PlanContextSources {
  now: number;
  /** The watched branch's commit the specs are read at. */
  specCommit: string;
  /** Every Backend as the solver should see it (`backendInfoOf`, with health where known). */
  backends: BackendInfo[];
  git: GitPort;
  /** Code refs resolve against the remote's branches first (a clone, a CI checkout), else the local ones. */
  remote: boolean;
  /** The spec of every run about to be planned: their `code.ref`s are resolved once, here. */
  specs: Iterable<RunSpec>;
  /**
   * Code from other repositories: where each `code.repo` run's stands (fetched in the background).
   * Absent (adv plan), such a run is planned as waiting for its code.
   */
  codeRepos?: {
    states: CodeRepoStates;
    runs: Iterable<{ name: string; spec: RunSpec; status?: RunStatus | undefined }>;
  };
  controllerId?: string;
  /** Absent (adv plan), secrets are not checked before a submission is planned. */
  missingSecrets?: (names: readonly string[]) => string | undefined;
}

/** The planner's context from its sources: code refs and code repositories resolved. */
export async function planContextOf(s: PlanContextSources): Promise<PlanContext> {
  return {
    now: s.now,
    specCommit: s.specCommit,
    backends: s.backends,
    codeRefs: await resolveCodeRefs(s.git, s.specs, s.remote),
    ...(s.codeRepos
      ? { codeRepos: await resolveCodeRepos(s.codeRepos.states, s.codeRepos.runs, s.specCommit) }
      : {}),
    ...(s.controllerId !== undefined ? { controllerId: s.controllerId } : {}),
    ...(s.missingSecrets ? { missingSecrets: s.missingSecrets } : {}),
  };
}
