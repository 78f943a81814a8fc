/**
 * What jobs are given besides their spec: the object store of the repo's Storage spec (and the
 * credentials a job needs to reach it), the secrets specs name, and the variables a Backend passes
 * on. Owns the controller's environment: nothing else reads it for a job.
 */
import type { Logger } from 'pino';
import { openStore, type ObjectStore } from '../../../runtime/store/index.js';
import type { JobRequest } from '../../backends/types.js';
import type { RunAction } from '../../reconcile/run-plan.js';
import { SWEEP_LABEL } from '../../reconcile/sweep-plan.js';
import type { StorageSpec } from '../../spec/schema.js';
import type { StatusWriter } from '../../status/writer.js';
import type { RunStatusDoc } from '../../status/types.js';
import { storeTarget, type StoreTarget } from '../../storage.js';
import type { DesiredState } from '../desired/desired-state.js';
import type { SecretSource } from '../../secrets.js';
import { prepareFork } from './fork.js';
import { buildJobRequest, missingSecretsMessage } from './job-request.js';
import { errText } from '../observe/observer.js';
import { StallingError } from '../../errors.js';
import { datasetInputs } from '../../spec/datasets.js';
import { shortRef } from '../../spec/environments.js';
import { Reason } from '../../status/types.js';

export class JobInputs {
  private store: { target: StoreTarget; objects?: ObjectStore } | undefined;

  constructor(
    /** The controller's environment: `passEnv` and the store's credentials come from it. */
    private readonly env: NodeJS.ProcessEnv,
    /** Where the secrets specs name come from (`secrets.ts`). */
    private readonly secrets: SecretSource,
    private readonly dataDir: string,
    private readonly logger: Logger,
  ) {}

  /** The object store heartbeats, checkpoints and outputs are read from, when one is configured. */
  get objects(): ObjectStore | undefined {
    return this.store?.objects;
  }

  get storeUrl(): string | undefined {
    return this.store?.target.url;
  }

  /** Opens the store of the repo's Storage spec (again only when its URL changed). */
  async useStorage(spec: StorageSpec | undefined): Promise<void> {
    if (!spec) return void (this.store = undefined);
    const target = storeTarget(spec, this.dataDir, this.env);
    if (target.url === this.store?.target.url && this.store.objects) return;
    try {
      this.store = { target, objects: await openStore(target.url, { ...this.env, ...target.env }) };
    } catch (e) {
      this.store = { target };
      this.logger.warn(
        { err: errText(e), store: target.url },
        'cannot open the object store; heartbeats and checkpoints will not be shown',
      );
    }
  }

  /** For the planner: which of these secrets do not resolve, as a message (undefined: all do). */
  missingSecrets(names: readonly string[]): string | undefined {
    return missingSecretsMessage(this.secrets, names);
  }

  /**
   * The request of the live attempt `jobName` on `backend`, for an adapter that launches after
   * submit returned (`BackendContext.requestFor`); undefined when no live attempt has that name.
   */
  requestForJob(
    backend: string,
    jobName: string,
    status: StatusWriter,
    desired: DesiredState,
  ): JobRequest | undefined {
    for (const run of status.names('Run')) {
      const doc = status.get<RunStatusDoc>('Run', run);
      const a = doc?.status.attempts.find((x) => x.jobName === jobName && x.backend === backend);
      if (!a || a.finishedAt) continue;
      try {
        return this.jobRequest({ type: 'submit', run, attempt: a.n, backend, jobName }, status, desired);
      } catch (e) {
        this.logger.warn({ run, job: jobName, err: errText(e) }, 'cannot rebuild the job request');
        return undefined;
      }
    }
    return undefined;
  }

  /** A fork's checkpoint, copied in the store before its attempt is submitted (fork.ts). */
  prepareFork(a: RunAction, status: StatusWriter, desired: DesiredState): Promise<void> {
    const spec = status.get<RunStatusDoc>('Run', a.run)?.appliedSpec ?? desired.runs.get(a.run)?.spec;
    return prepareFork(a.run, a.attempt, spec, this.store?.objects, this.logger);
  }

  /** The request for an action's attempt, on the spec it was planned on. */
  jobRequest(a: RunAction, status: StatusWriter, desired: DesiredState): JobRequest {
    const current = status.get<RunStatusDoc>('Run', a.run);
    const spec = current?.appliedSpec ?? desired.runs.get(a.run)?.spec;
    const attempt = current?.status.attempts.find((x) => x.n === a.attempt);
    if (!spec || !attempt) throw new Error('no spec to submit');
    const labels = desired.runs.get(a.run)?.labels;
    const backend = desired.backends.get(a.backend)?.obj;
    const environment = spec.environment ? desired.environments.resolve(spec.environment) : undefined;
    if (spec.environment && !environment)
      throw new StallingError(
        Reason.SpecInvalid,
        `Environment ${shortRef(spec.environment)} is not in the specs any more`,
        `restore it (old versions stay in the repo for the runs that use them), or change the run's spec.environment`,
      );
    const datasets = datasetInputs(spec, desired.datasets);
    if (datasets.missing.length)
      throw new StallingError(
        Reason.SpecInvalid,
        `Dataset ${datasets.missing.join(', ')} is not in the specs any more`,
        `restore it (old versions stay in the repo for the runs that use them), or change the run's spec.inputs`,
      );
    const request = buildJobRequest(a.run, attempt, spec, {
      secrets: this.secrets,
      controllerEnv: this.env,
      passEnv: backend?.spec.passEnv ?? [],
      store: this.store?.target,
      ...(backend ? { backend: { name: a.backend, spec: backend.spec } } : {}),
      ...(environment ? { environment } : {}),
      ...(datasets.inputs.length ? { datasets: datasets.inputs } : {}),
      tracking: trackingOf(a.run, current, labels),
    });
    return labels ? { ...request, labels } : request;
  }
}

/** A run's tracking anchor (when the controller first saw it) and group (its DAG or sweep). */
function trackingOf(
  run: string,
  current: RunStatusDoc | undefined,
  labels: Record<string, string> | undefined,
): { anchor: string; group?: string } {
  const group = current?.status.owner ?? labels?.[SWEEP_LABEL];
  return { anchor: current?.status.createdAt ?? run, ...(group ? { group } : {}) };
}
