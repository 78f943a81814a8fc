/**
 * Public barrel of the controller package: `cli/` imports only from here (a lint rule says so).
 * Every name is listed on purpose; nothing from `internal/` is re-exported, and adding a name
 * here widens the public API.
 */

// Errors: typed, with stable codes (the CLI maps them to exit codes in cli/exit.ts).
export { AdvError, ErrorCode, isAdvError } from './errors.js';
export { VERSION } from '../runtime/version.js';

// Specs: the kinds, loading and diagnostics.
export {
  API_VERSION,
  Kind,
  KINDS,
  DEFAULT_LIMITS,
  DirectorySource,
  SpecLoader,
  WorkTreeSource,
  devicesOf,
  findCycle,
  formatDiagnostic,
  formatPath,
  isObjectName,
  isSpecFile,
  loadSpecs,
} from './spec/index.js';
export type {
  Backend,
  BackendSpec,
  Dag,
  DagNode,
  DagSpec,
  Diagnostic,
  InvalidDocument,
  LoadedDocument,
  LoadedObject,
  LoadResult,
  Parallelism,
  ParseLimits,
  Policy,
  Resources,
  Run,
  RunSpec,
  SpecFileRef,
  SpecObject,
  SpecSource,
  Storage,
  StorageSpec,
  Sweep,
  SweepSpec,
} from './spec/index.js';
export { CROSS_FILE_CODES } from './spec/loader.js';
export { schemaJson, writeSchemas } from './spec/gen.js';

// Git: the specs repo, native git, specs read from a commit's tree.
export { git, runGit } from './git/native.js';
export { SpecsRepo, credentialEnv, isRemoteUrl } from './git/specs-repo.js';
export { GitTreeSource, TreeListingCache } from './git/tree-source.js';
export { codeRepoUrlProblem } from './git/code-repo-url.js';
export { CommitVerifier, checkTrustedSigners, verifyHead } from './git/signatures.js';
export type { Verdict } from './git/signatures.js';

// Status: the status branch and what is in it, and how it is shown.
export { StatusWriter } from './status/writer.js';
export type {
  Attempt,
  BackendStatusDoc,
  Condition,
  DagStatusDoc,
  LoadError,
  OwnerStatusCore,
  RunStatusDoc,
  SourceStatusDoc,
  StatusDoc,
} from './status/types.js';
export { SPECS_SOURCE, STATUS_DIRS } from './status/types.js';
export type { SweepPointStatus, SweepStatusDoc } from './status/types.js';
export { PARAM_ANNOTATION_PREFIX, SWEEP_LABEL } from './reconcile/sweep-plan.js';
export { printable } from './status/printable.js';
export { age } from './status/age.js';
export { attemptCost, formatCost, formatMoney, runCost } from './status/cost.js';
export type { Cost } from './status/cost.js';
export {
  addUsage,
  attemptUsage,
  gpusOf,
  runUsage,
  usageReport,
  type Period,
  type Usage,
  type UsageReport,
  type UsageRow,
} from './cost/usage.js';
export { backendRecords, stepRateOf, type BackendRecord, type RunRecord } from './cost/history.js';
export {
  askQuotes,
  planCosts,
  runRecords,
  type CostLine,
  type PlanCost,
  type StartingRun,
} from './cost/plan-cost.js';
export { graphOf } from './status/dag-graph.js';
export type { GraphNode } from './status/dag-graph.js';

// Planning: what merging a branch would do (`adv plan`), and the annotations the CLI commits.
export { planChanges } from './reconcile/plan-changes.js';
export type { PlanReport, RunPlanItem } from './reconcile/plan-changes.js';
export { nodeRunSpec } from './reconcile/dag-plan.js';
export { childName } from './reconcile/dag-plan.js';
export { resolveCodeRefs } from './reconcile/desired.js';
export { planContextOf } from './reconcile/plan-context.js';
export { RECONCILE_ANNOTATION, RETRY_ANNOTATION } from './reconcile/run-plan.js';
export { backendInfoOf } from './backends/registry.js';
export { storeTarget } from './storage.js';

// The running controller, its HTTP server and the dashboard.
export { Controller } from './controller.js';
export { infraOptionFor, infraSourceFor } from './loop/desired/infra-source.js';
export type { InfraOption } from './loop/desired/infra-source.js';
export type { ControllerOptions } from './controller.js';
export { serve } from './serve.js';
export { API_TOKEN_ENV, API_TOKEN_FILE, configuredApiToken } from './api-token.js';
export { dashboardRoute } from './dashboard/index.js';

// `adv run`: one attempt composed as the controller composes it, started as the local backend does.
export { buildJobRequest } from './loop/execute/job-request.js';
export { EnvironmentIndex } from './spec/environments.js';
// Datasets (adv dataset, adv run): the repo's versions and a run's inputs resolved.
export { DatasetIndex, datasetInputs } from './spec/datasets.js';
export type { Dataset, DatasetSpec } from './spec/schema.js';
export { baseJobEnv } from './backends/job-env.js';
export { jobNameFor } from './backends/types.js';
export type { JobRequest } from './backends/types.js';
export { localExecArgs, localExecCommand, localJobEnv } from '../runtime/local-jobs.js';
export { urlStoreTarget } from './storage.js';
// Sessions (adv notebook, adv shell, adv ssh): the ways into a live attempt's worker.
export { SshTransport, sshTargetOf } from './transport/ssh.js';
export type { SshConnection } from './transport/ssh.js';
export { VastClient, vastSshEndpoint } from './backends/vastai/client.js';
export { podName } from './backends/volcano/render.js';
export { vcNameOf } from './backends/volcano/adapter.js';
export { GcloudTpu, tpuWorkerAddresses } from './backends/gcp-tpu/gcloud.js';
export { nodeNameOf } from './backends/gcp-tpu/names.js';
export { TERMINAL_PHASES } from './status/phases.js';
// Label selectors (adv get -l, Alert.spec.selector) and notifications (Alert, Provider).
export { checkSelector, parseSelector, selectorMatches, SELECTOR_HINT } from './selector.js';
export type { Requirement } from './selector.js';
export type { AlertDelivery, AlertStatusDoc } from './status/types.js';
