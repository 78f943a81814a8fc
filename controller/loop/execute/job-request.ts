/**
 * What a backend is handed for one attempt, and the only way anything of the controller's own
 * environment reaches a job. A job's environment is the backend's small base (see
 * `backends/job-env.ts`), the contract variables `adv exec` sets, and what is built here: the
 * variables a Backend names in `passEnv`, the spec's `env`, and the spec's resolved `secrets`.
 */
import type { DatasetInput } from '../../../runtime/datasets/contract.js';
import { argvFor } from '../../../runtime/exec.js';
import { REDACT_VAR } from '../../../runtime/redact.js';
import { RETENTION_ENV } from '../../../runtime/retention.js';
import { SESSION_VAR } from '../../../runtime/session.js';
import { passedEnv, setupVariables, trackingVariables } from '../../backends/job-env.js';
import type { JobRequest } from '../../backends/types.js';
import { StallingError } from '../../errors.js';
import { Reason, type Attempt } from '../../status/types.js';
import type { ResolvedEnvironment } from '../../spec/environments.js';
import { MAX_ARG_BYTES } from '../../spec/rules.js';
import type { BackendSpec, RunSpec } from '../../spec/schema.js';
import type { SecretSource } from '../../secrets.js';
import type { StoreTarget } from '../../storage.js';
import { composeSetup } from './setup-env.js';

export type { SecretSource } from '../../secrets.js';

/** Secrets from an environment, every name allowed (for tests and tools). */
export function envSecrets(env: NodeJS.ProcessEnv): SecretSource {
  return { get: (name) => env[name], where: "the controller's environment" };
}

/** The message naming the secrets that do not resolve, or undefined when all do. */
export function missingSecretsMessage(source: SecretSource, names: readonly string[]): string | undefined {
  const missing = names.filter((n) => source.get(n) === undefined);
  if (!missing.length) return undefined;
  const what = missing.length === 1 ? `secret ${missing[0]} is` : `secrets ${missing.join(', ')} are`;
  return `${what} not set: looked in ${source.where}`;
}

export interface JobRequestInputs {
  secrets: SecretSource;
  /** The controller's environment, read only for the names a Backend lists in `passEnv`. */
  controllerEnv: NodeJS.ProcessEnv;
  /** `passEnv` of the Backend the attempt goes to. */
  passEnv: readonly string[];
  store: StoreTarget | undefined;
  /** The Backend the attempt goes to: its `setup` steps and `uv` pin. */
  backend?: { name: string; spec: Pick<BackendSpec, 'setup' | 'uv' | 'datasetCache'> };
  /** The run's Environment, resolved (`spec.environment`). */
  environment?: ResolvedEnvironment;
  /** The run's `inputs`, resolved (`spec/datasets.ts` datasetInputs): `ADV_DATASETS` when any. */
  datasets?: DatasetInput[];
  /**
   * What the run's tracking id is made from besides its name (`trackingId`: the controller's first
   * sight of the run) and the group it belongs to (its DAG or sweep). Default: the store's URL.
   */
  tracking?: { anchor: string; group?: string };
}

/**
 * The request for attempt `attempt` of `run`. Throws `StallingError` when something only a person
 * can fix is missing (a secret, a store credential): that is never a backend's failure.
 */
export function buildJobRequest(
  run: string,
  attempt: Pick<Attempt, 'n' | 'jobName' | 'codeCommit'>,
  spec: RunSpec,
  inputs: JobRequestInputs,
): JobRequest {
  if (!attempt.codeCommit) throw new Error(`attempt ${attempt.n} of ${run} has no code commit`);
  const storeVars = Object.keys(inputs.store?.env ?? {}).concat(inputs.store?.missing ?? []);
  const taken = (spec.secrets ?? []).filter((s) => storeVars.includes(s));
  if (taken.length)
    throw new StallingError(
      Reason.SecretMissing,
      `secret ${taken.join(', ')} is the object store's credential, which only the controller hands out`,
      `rename the secret (or give the Storage spec a credentialsSecret), then run adv reconcile run ${run}`,
    );
  const missing = missingSecretsMessage(inputs.secrets, spec.secrets ?? []);
  if (missing)
    throw new StallingError(
      Reason.SecretMissing,
      missing,
      `set it where the controller reads secrets, then run adv reconcile run ${run}`,
    );
  if (inputs.store?.missing.length)
    throw new StallingError(
      Reason.SecretMissing,
      `store credential(s) ${inputs.store.missing.join(', ')} are not set in the controller's environment`,
      "set them in the controller's environment (see the Storage spec's credentialsSecret)",
    );
  // The run's own env (and a Backend's passEnv) replaces the WANDB_* defaults.
  const env: Record<string, string> = {
    ...trackingVariables(run, inputs.tracking?.anchor ?? inputs.store?.url ?? '', inputs.tracking?.group),
    ...passedEnv(inputs.passEnv, inputs.controllerEnv).env,
    ...spec.env,
    ...(spec.policy?.checkpoints ? { [RETENTION_ENV]: JSON.stringify(spec.policy.checkpoints) } : {}),
  };
  const outputs = declaredOutputs(spec);
  if (outputs) env.ADV_OUTPUTS = outputs;
  if (inputs.datasets?.length) env.ADV_DATASETS = datasetsVariable(run, inputs.datasets);
  const cache = inputs.backend?.spec.datasetCache;
  if (inputs.datasets?.length && cache?.maxGiB)
    env.ADV_CACHE_MAX_BYTES = String(Math.round(cache.maxGiB * 2 ** 30));
  if (inputs.datasets?.length && cache?.verify) env.ADV_DATASET_VERIFY = cache.verify;
  // Secrets and store credentials travel apart from the env, and adv exec masks their values.
  const secretEnv: Record<string, string> = { ...inputs.store?.env };
  for (const s of spec.secrets ?? []) {
    secretEnv[s] = inputs.secrets.get(s)!;
    delete env[s];
  }
  if (Object.keys(secretEnv).length) env[REDACT_VAR] = Object.keys(secretEnv).join(',');
  // An interactive session: adv exec runs Jupyter or holds for shells instead of a command.
  if (spec.session) env[SESSION_VAR] = JSON.stringify(spec.session);
  const composed = composeSetup(inputs.backend, inputs.environment, spec);
  setupFits(run, composed);
  return {
    jobName: attempt.jobName,
    run,
    attempt: attempt.n,
    spec,
    argv: argvFor(spec),
    code: { commit: attempt.codeCommit, ...(spec.code?.path ? { path: spec.code.path } : {}) },
    env,
    secretEnv,
    ...(inputs.store ? { store: { url: inputs.store.url } } : {}),
    ...composed,
  };
}

/** `ADV_DATASETS` as JSON; a list too long for one variable (many URLs) stalls with a fix. */
function datasetsVariable(run: string, datasets: readonly DatasetInput[]): string {
  const value = JSON.stringify(datasets);
  const bytes = Buffer.byteLength(`ADV_DATASETS=${value}`);
  if (bytes > MAX_ARG_BYTES)
    throw new StallingError(
      Reason.SpecInvalid,
      `ADV_DATASETS (the run's inputs as JSON) takes ${bytes} bytes; Linux refuses a variable over ${MAX_ARG_BYTES} (E2BIG)`,
      `push the files with adv dataset push (a store source lists them in its manifest), then run adv reconcile run ${run}`,
    );
  return value;
}

/**
 * The Backend's, the Environment's and the run's steps each fit `ADV_SETUP` (checked at load);
 * together they may not: no process could be started with them, on any backend.
 */
function setupFits(run: string, composed: Parameters<typeof setupVariables>[0]): void {
  for (const [name, value] of Object.entries(setupVariables(composed))) {
    const bytes = Buffer.byteLength(`${name}=${value}`);
    if (bytes > MAX_ARG_BYTES)
      throw new StallingError(
        Reason.SpecInvalid,
        `${name} (the Backend's, the Environment's and the run's setup as JSON) takes ${bytes} bytes; Linux refuses a variable over ${MAX_ARG_BYTES} (E2BIG)`,
        `move long steps into a script in the code tree and run that, then run adv reconcile run ${run}`,
      );
  }
}

/**
 * `ADV_OUTPUTS` for adv exec: the run's declared `outputs`, after those a DAG node declares (which
 * reach its child's env as `ADV_OUTPUTS` already); undefined when there are none.
 */
export function declaredOutputs(spec: RunSpec): string | undefined {
  const names = new Set((spec.env?.ADV_OUTPUTS ?? '').split(',').filter(Boolean));
  for (const name of Object.keys(spec.outputs ?? {})) names.add(name);
  return names.size ? [...names].join(',') : undefined;
}
