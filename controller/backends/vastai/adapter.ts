/**
 * The `vastai` adapter: one rented instance per attempt, found by its label, run through the
 * shared remote-host module over SSH, destroyed when the attempt ends for any reason.
 *
 * - **submit** looks for an instance labelled for the job (a controller killed mid-rental adopts
 *   it: never a second one), else searches offers that fit the run (GPUs, type alternatives, VRAM,
 *   reliability, disk, CUDA, price cap; cheapest first) and rents the first that is still there
 *   (`no_such_ask` moves on). Interruptible (bid) instances only for runs with
 *   `policy.preemptible`, at `min_bid` × (1 + `bidMarginPct`/100). The handle's id is the
 *   instance id. Provisioning goes on in the background: wait (bounded) for `running` and an SSH
 *   endpoint, read from the polls' list (no call per rental); an instance still loading past `loadingTimeoutSec` is destroyed, its machine
 *   excluded, and the next offer rented; then ship the code and launch `adv exec`.
 * - **poll** is one paginated list of the account's instances per pass, plus each running job's
 *   exit record in the object store; the instance is asked over SSH when the job is new here,
 *   when its exit record appears, and every `HOST_CHECK_MS`. An instance meant to run that is not
 *   (stopped, exited, frozen: outbid or paused) ends the attempt as preempted. Each observation
 *   carries the instance's own `dph_total`, which becomes the attempt's price.
 * - **Nothing leaks**: the instance is destroyed when its attempt ends (success, failure,
 *   preemption, cancel, guardrails); one labelled for this backend that no live attempt owns is
 *   destroyed at the next poll; `close` waits for destroy requests in flight.
 *
 * The bookkeeping and `observe`'s ladder are the shared `MachineLifecycle`'s (remote/); this file
 * says only what Vast.ai says differently: offers, rentals, instance statuses, prices.
 */
import type { Logger } from 'pino';
import type { Backend as BackendObject } from '../../spec/schema.js';
import { RemoteHost } from '../remote/host.js';
import {
  CANCEL_GRACE_MS,
  MachineBackend,
  pause,
  type Base,
  type JobSeen,
  type Look,
  type MachineCloud,
  type Standing,
} from '../remote/machine-lifecycle.js';
import { sshTargetOf } from '../../transport/ssh.js';
import type { BackendContext, JobHandle, JobRequest, ObservedJob } from '../types.js';
import {
  OfferTakenError,
  VastActualStatus,
  VastClient,
  vastSshEndpoint,
  type VastInstance,
  type VastOffer,
} from './client.js';
import { offerQuery } from './query.js';
import { offerNeedsFor, rentsInterruptible } from './quote.js';
import {
  DEFAULT_BID_MARGIN_PCT,
  DEFAULT_DISK_GB,
  DEFAULT_IMAGE,
  DEFAULT_LOADING_TIMEOUT_SEC,
  DEFAULT_READY_TIMEOUT_SEC,
  type VastSettings,
} from './settings.js';

export { DEFAULT_IMAGE };

/** How long a running job's instance goes without a look over SSH (see `poll`). */
const HOST_CHECK_MS = 15_000;
/** Statuses of an instance that is meant to run and does not: outbid, paused, its container gone. */
const STOPPED = new Set<string>([VastActualStatus.Stopped, VastActualStatus.Exited, VastActualStatus.Frozen]);

/** The label of a job's instance: the backend's prefix, then the job name. */
export const labelPrefix = (backend: string): string => `adventuretime:${backend}:`;

export class VastBackend extends MachineBackend<VastInstance, number, VastCloud> {
  readonly type = 'vastai' as const;

  constructor(name: string, spec: BackendObject['spec'], ctx: BackendContext, injected?: VastClient) {
    super(name, new VastCloud(name, spec, ctx, injected), ctx, { checkEveryMs: HOST_CHECK_MS });
  }

  async *logs(h: JobHandle, opts: { follow?: boolean; since?: number } = {}): AsyncIterable<string> {
    const inst = await this.cloud.locate(h.jobName);
    if (!inst || !endpointOf(inst)) return;
    yield* this.cloud.hostOf(inst, h.jobName).logs(h.jobName, opts);
  }
}

/** What Vast.ai says differently: an instance rented per job from the offers that fit. */
class VastCloud implements MachineCloud<VastInstance, number> {
  readonly words = {
    adopting: 'adopting a Vast.ai instance rented before a restart',
    orphan: 'destroying an orphaned Vast.ai instance no live attempt owns',
    notProvisioned: 'Vast.ai instance could not be provisioned',
    neverLaunched: 'the job was never started on the instance',
    goneReason: 'InstanceGone',
  };
  private readonly settings: VastSettings;
  /** One transport per instance endpoint, closed when the instance's attempt ends. */
  private readonly hosts = new Map<string, RemoteHost>();
  /** Which endpoint each job's instance is reached at. */
  private readonly endpointOfJob = new Map<string, string>();
  private readonly logger: Logger;
  private clientFor: { key: string; client: VastClient } | undefined;

  constructor(
    private readonly backend: string,
    private readonly spec: BackendObject['spec'],
    private readonly ctx: BackendContext,
    private readonly injected?: VastClient,
  ) {
    this.settings = spec.vastai!;
    this.logger = ctx.logger;
  }

  /** The client, with the API key as the secrets hold it now (a rotated key is picked up). */
  private get api(): VastClient {
    if (this.injected) return this.injected;
    const name = this.settings.apiKeySecret;
    const key = this.ctx.secrets?.get(name);
    if (!key)
      throw new Error(
        `the Vast.ai API key secret ${name} is not set (looked in ${this.ctx.secrets?.where ?? 'no secret sources'}); add it to the controller's secrets`,
      );
    if (this.clientFor?.key !== key) {
      const env = this.ctx.hostEnv ?? process.env;
      const apiUrl = this.settings.apiUrl ?? env.VAST_URL;
      this.clientFor = {
        key,
        client: new VastClient({ apiKey: key, ...(apiUrl ? { apiUrl } : {}), logger: this.logger }),
      };
    }
    return this.clientFor.client;
  }

  private label(jobName: string): string {
    return `${labelPrefix(this.backend)}${jobName}`;
  }

  /** Instances are keyed by the job name their label carries. */
  keyOf(jobName: string): string {
    return jobName;
  }

  /** One paginated list of the account's instances; those labelled for this backend. */
  async list(): Promise<Map<string, VastInstance>> {
    let all: VastInstance[];
    try {
      all = await this.api.listInstances();
    } catch (e) {
      throw new Error(`Vast.ai list: ${(e as Error).message}`);
    }
    const mine = new Map<string, VastInstance>();
    const prefix = labelPrefix(this.backend);
    for (const inst of all)
      if (inst.label?.startsWith(prefix)) mine.set(inst.label.slice(prefix.length), inst);
    return mine;
  }

  async find(jobName: string): Promise<VastInstance | undefined> {
    const [inst] = await this.api.listInstances({ labels: [this.label(jobName)] });
    return inst;
  }

  locate(jobName: string): Promise<VastInstance | undefined> {
    return this.find(jobName);
  }

  async show(_jobName: string, id: number): Promise<VastInstance | undefined> {
    return this.api.showInstance(id);
  }

  placeOf(inst: VastInstance): number {
    return inst.id;
  }

  jobIdOf(_jobName: string, id: number): string {
    return String(id);
  }

  standing(inst: VastInstance): Standing {
    if (inst.intended_status !== 'stopped' && STOPPED.has(inst.actual_status ?? ''))
      return {
        kind: 'ended',
        reason:
          inst.actual_status === VastActualStatus.Stopped
            ? 'Outbid'
            : `Instance${capitalize(inst.actual_status!)}`,
        message: `Vast.ai instance ${inst.id} is ${inst.actual_status} while meant to run${inst.status_msg ? `: ${inst.status_msg}` : ''}`,
      };
    if (inst.actual_status !== VastActualStatus.Running) return { kind: 'creating' };
    return endpointOf(inst) ? { kind: 'usable' } : { kind: 'unready' };
  }

  ask(job: JobRequest): Promise<number> {
    return this.rent(job, []);
  }

  /** Rents the cheapest offer that fits and is still there, avoiding `excluded` machines; its id. */
  private async rent(job: JobRequest, excluded: readonly number[]): Promise<number> {
    const interruptible = rentsInterruptible(this.settings, job.spec);
    const offers = await this.offers(job, interruptible, excluded);
    const tried: string[] = [];
    for (const offer of offers) {
      try {
        const { id } = await this.api.createInstance(offer.id, {
          image: this.settings.image ?? DEFAULT_IMAGE,
          label: this.label(job.jobName),
          disk: this.settings.diskGiB ?? DEFAULT_DISK_GB,
          price: interruptible ? bidFor(offer, this.settings.bidMarginPct) : null,
        });
        this.logger.info(
          {
            job: job.jobName,
            instance: id,
            offer: offer.id,
            machine: offer.machine_id,
            dph: offer.dph_total,
          },
          interruptible ? 'rented an interruptible Vast.ai instance' : 'rented a Vast.ai instance',
        );
        return id;
      } catch (e) {
        if (!(e instanceof OfferTakenError)) {
          // The API may have acted on a create it did not answer: look before renting again.
          const found = await this.find(job.jobName).catch(() => undefined);
          if (found) return found.id;
          throw e;
        }
        tried.push(String(offer.id));
        this.logger.info(
          { job: job.jobName, offer: offer.id },
          'Vast.ai offer taken meanwhile; trying the next',
        );
      }
    }
    throw new NoOfferError(
      offers.length
        ? `every fitting Vast.ai offer was taken before it could be rented (${tried.join(', ')})`
        : `no Vast.ai offer fits the run (${this.describeNeeds(job, interruptible)})`,
    );
  }

  private async offers(
    job: JobRequest,
    interruptible: boolean,
    excluded: readonly number[],
  ): Promise<VastOffer[]> {
    const query = offerQuery(offerNeedsFor(this.settings, job.spec, interruptible));
    const offers = await this.api.searchOffers(query);
    return offers.filter((o) => !excluded.includes(o.machine_id));
  }

  private describeNeeds(job: JobRequest, interruptible: boolean): string {
    const r = job.spec.resources ?? {};
    return [
      `${r.gpus || this.settings.numGpus || 'any number of'} GPU(s)`,
      r.gpuType ?? this.settings.gpuName,
      this.settings.maxDollarsPerHour !== undefined
        ? `at most $${this.settings.maxDollarsPerHour}/h`
        : undefined,
      interruptible ? 'interruptible' : 'on demand',
      (this.settings.verifiedOnly ?? true) ? 'verified hosts' : undefined,
    ]
      .filter(Boolean)
      .join(', ');
  }

  /** The instance once running with an SSH endpoint; undefined when it is stuck loading. */
  async waitUsable(
    job: JobRequest,
    id: number,
    look: (id: number) => Promise<Look<VastInstance>>,
  ): Promise<VastInstance | undefined> {
    const start = this.ctx.now();
    const loadingMs = (this.settings.loadingTimeoutSec ?? DEFAULT_LOADING_TIMEOUT_SEC) * 1000;
    const readyMs = (this.settings.readyTimeoutSec ?? DEFAULT_READY_TIMEOUT_SEC) * 1000;
    for (;;) {
      const { machine: inst, seen } = await look(id);
      if (!inst) throw new Error(`Vast.ai instance ${id} is gone before it ran`);
      if (inst.actual_status === VastActualStatus.Running && endpointOf(inst)) return inst;
      if (STOPPED.has(inst.actual_status ?? ''))
        throw new Error(
          `Vast.ai instance ${id} went ${inst.actual_status} before it ran: ${inst.status_msg ?? ''}`,
        );
      const waited = this.ctx.now() - start;
      if (waited > loadingMs && inst.actual_status !== VastActualStatus.Running) {
        this.logger.warn(
          { job: job.jobName, instance: id, status: inst.actual_status },
          'Vast.ai instance stuck loading; replacing it',
        );
        return undefined;
      }
      if (waited > readyMs)
        throw new Error(`Vast.ai instance ${id} has no SSH endpoint after ${readyMs / 1000}s`);
      // Shown at most every 2 s (Vast's interval for `show`) for the first minute, every 5 s after.
      if (!seen) await pause(waited < 60_000 ? 2000 : 5000);
    }
  }

  /**
   * Stuck loading: this machine is not starting it. It is destroyed before the next rental (its
   * offer is back in searches: the exclusion, kept in `tried`, keeps it out), then another rented.
   */
  async another(
    job: JobRequest,
    id: number,
    tried: string[],
    remove: (id: number, why: string) => Promise<void>,
  ): Promise<number> {
    const stuck = await this.api.showInstance(id);
    if (stuck?.machine_id !== undefined) tried.push(String(stuck.machine_id));
    await remove(id, 'stuck loading');
    return this.rent(job, tried.map(Number));
  }

  failureReason(e: unknown): string {
    return e instanceof NoOfferError ? 'NoCapacity' : 'ProvisioningFailed';
  }

  launch(job: JobRequest, inst: VastInstance): Promise<void> {
    return this.hostOf(inst, job.jobName)
      .launch(job)
      .then(() => undefined);
  }

  /** The instance's host (one transport each, reused): its mapped 22/tcp, else the SSH gateway. */
  hostOf(inst: VastInstance, jobName: string): RemoteHost {
    const ep = endpointOf(inst)!;
    const key = `${ep.host}:${ep.port}`;
    this.endpointOfJob.set(jobName, key);
    let host = this.hosts.get(key);
    if (!host) {
      host = new RemoteHost({
        transport: this.ctx.ssh(
          sshTargetOf({ user: 'root', ...this.spec.connection, host: ep.host, port: ep.port }),
        ),
        paths: this.spec.paths,
        code: this.ctx.code,
        logger: this.logger,
      });
      this.hosts.set(key, host);
    }
    return host;
  }

  /** Every observation carries the instance's own `dph_total`: it becomes the attempt's price. */
  base(h: JobHandle, inst: VastInstance | undefined): Base {
    return { jobName: h.jobName, jobId: inst ? String(inst.id) : h.jobId, ...priceOf(inst) };
  }

  async observeJob(h: JobHandle, inst: VastInstance, base: Base): Promise<JobSeen> {
    const [seen] = await this.hostOf(inst, h.jobName).observe([h]);
    const o: ObservedJob = { ...seen!, ...base };
    return o.reason === 'JobDirMissing' ? { seen: o, unlaunched: 'all' } : { seen: o };
  }

  async stop(h: JobHandle, inst: VastInstance): Promise<{ ended: Promise<unknown> }> {
    const host = this.hostOf(inst, h.jobName);
    await host
      .cancel(h.jobName)
      .catch((e: unknown) =>
        this.logger.warn(
          { job: h.jobName, err: (e as Error).message },
          'cannot stop the job; destroying its instance',
        ),
      );
    return { ended: host.ended(h, CANCEL_GRACE_MS) };
  }

  async delete(_key: string, id: number | undefined, why: string): Promise<void> {
    if (id === undefined) return;
    try {
      await this.api.destroyInstance(id);
      this.logger.info({ instance: id, why }, 'destroyed Vast.ai instance');
    } catch (e) {
      this.logger.warn({ instance: id, err: (e as Error).message }, 'cannot destroy Vast.ai instance');
    }
  }

  /** The instance is going: its SSH connection too (each rental has an endpoint of its own). */
  released(jobName: string): void {
    const key = this.endpointOfJob.get(jobName);
    this.endpointOfJob.delete(jobName);
    if (!key || [...this.endpointOfJob.values()].includes(key)) return;
    this.hosts.get(key)?.close();
    this.hosts.delete(key);
  }

  provisioningMessage(_jobName: string, inst: VastInstance | undefined): string {
    if (!inst) return 'renting a Vast.ai instance';
    return `Vast.ai instance ${inst.id} is ${inst.actual_status ?? 'being created'}${inst.status_msg ? `: ${inst.status_msg}` : ''}`;
  }

  goneMessage(base: Base): string {
    return `Vast.ai instance ${base.jobId} is gone`;
  }

  fields(_key: string, id: number | undefined, inst?: VastInstance): Record<string, unknown> {
    return { instance: id, ...(inst?.label ? { label: inst.label } : {}) };
  }

  close(): void {
    for (const h of this.hosts.values()) h.close();
  }
}

/** No offer fits, or every fitting one was taken: not the user's failure (the next backend). */
export class NoOfferError extends Error {}

/** The mapped 22/tcp on the machine's public address, else the SSH gateway (SkyPilot's choice). */
function endpointOf(inst: VastInstance): { host: string; port: number } | undefined {
  return vastSshEndpoint(inst, 'direct') ?? vastSshEndpoint(inst, 'proxy');
}

/** A bid above the offer's minimum by the margin, so a small rise does not outbid it at once. */
export function bidFor(offer: VastOffer, marginPct = DEFAULT_BID_MARGIN_PCT): number {
  const min = offer.min_bid ?? offer.dph_total;
  return Math.round(min * (1 + marginPct / 100) * 10_000) / 10_000;
}

function priceOf(inst: VastInstance | undefined): Pick<ObservedJob, 'pricePerHour'> {
  return inst?.dph_total !== undefined ? { pricePerHour: inst.dph_total } : {};
}

const capitalize = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);
