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
 */
import type { Logger } from 'pino';
import type { Backend as BackendObject } from '../../spec/schema.js';
import { AdapterClosed, Listings } from '../remote/listings.js';
import { RecentChecks } from '../remote/recent-checks.js';
import { RemoteHost } from '../remote/host.js';
import { sshTargetOf } from '../ssh/transport.js';
import {
  JobState,
  isEnded,
  unobservable,
  type Backend,
  type BackendContext,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
  type SubmitResult,
} from '../types.js';
import {
  OfferTakenError,
  VastActualStatus,
  VastClient,
  vastSshEndpoint,
  type VastInstance,
  type VastOffer,
} from './client.js';
import { offerQuery } from './query.js';

type Settings = NonNullable<BackendObject['spec']['vastai']>;

/** The image when the Backend names none: Python and Node.js (the bootstrap needs Node ≥ 20). */
export const DEFAULT_IMAGE = 'nikolaik/python-nodejs:python3.12-nodejs22';
const DEFAULT_DISK_GB = 32;
const DEFAULT_LOADING_TIMEOUT_SEC = 600;
const DEFAULT_READY_TIMEOUT_SEC = 1200;
const DEFAULT_BID_MARGIN_PCT = 10;
/** How long a running job's instance goes without a look over SSH (see `poll`). */
const HOST_CHECK_MS = 15_000;
/** How long a rental being provisioned waits for a poll's list before showing it itself. */
const LIST_WAIT_MS = 15_000;
/** How long a cancelled job gets to stop before its instance is destroyed. */
const CANCEL_GRACE_MS = 10_000;
/** Statuses of an instance that is meant to run and does not: outbid, paused, its container gone. */
const STOPPED = new Set<string>([VastActualStatus.Stopped, VastActualStatus.Exited, VastActualStatus.Frozen]);

/** The label of a job's instance: the backend's prefix, then the job name. */
export const labelPrefix = (backend: string): string => `adventuretime:${backend}:`;

interface Provisioning {
  /** The instance rented now (it changes when one is replaced). */
  id: number;
  record: { run: string; attempt: number };
  launched: boolean;
  /** Set when provisioning failed: the attempt ends with it. */
  failed?: ObservedJob;
}

export class VastBackend implements Backend {
  readonly type = 'vastai' as const;
  readonly sweepsOrphans = true;
  private readonly settings: Settings;
  private readonly provisioning = new Map<string, Provisioning>();
  private readonly ended = new Map<string, ObservedJob>();
  private readonly cancelled = new Set<string>();
  /** The polls' lists, by job name: what a rental being provisioned waits on. */
  private readonly listings = new Listings<VastInstance>();
  /** The last look at each running job's instance (see `RecentChecks`). */
  private readonly checks: RecentChecks;
  /** One transport per instance endpoint, closed when the instance's attempt ends. */
  private readonly hosts = new Map<string, RemoteHost>();
  /** Which endpoint each job's instance is reached at. */
  private readonly endpointOfJob = new Map<string, string>();
  private readonly destroying = new Set<Promise<void>>();
  private readonly logger: Logger;
  /** Set by `close`: background provisioning stops and leaves the rental to the next adapter. */
  private closed = false;
  private clientFor: { key: string; client: VastClient } | undefined;

  constructor(
    readonly name: string,
    private readonly spec: BackendObject['spec'],
    private readonly ctx: BackendContext,
    private readonly injected?: VastClient,
  ) {
    this.settings = spec.vastai!;
    this.logger = ctx.logger;
    this.checks = new RecentChecks(ctx, HOST_CHECK_MS);
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
    return `${labelPrefix(this.name)}${jobName}`;
  }

  async submit(job: JobRequest): Promise<SubmitResult> {
    const found = await this.find(job.jobName);
    if (found) {
      if (!this.provisioning.has(job.jobName)) this.provision(job, Number(found.jobId), []);
      return { ...found, adopted: true };
    }
    const id = await this.rent(job, []);
    this.provision(job, id, []);
    return { backend: this.name, jobName: job.jobName, jobId: String(id) };
  }

  async find(jobName: string): Promise<JobHandle | undefined> {
    const [inst] = await this.api.listInstances({ labels: [this.label(jobName)] });
    return inst ? { backend: this.name, jobName, jobId: String(inst.id) } : undefined;
  }

  /** Rents the cheapest offer that fits and is still there, avoiding `excluded` machines; its id. */
  private async rent(job: JobRequest, excluded: readonly number[]): Promise<number> {
    const interruptible = this.settings.interruptible === true && job.spec.policy?.preemptible === true;
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
          if (found) return Number(found.jobId);
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
    const r = job.spec.resources ?? {};
    const cons = job.spec.backendSelector?.constraints ?? {};
    const query = offerQuery({
      gpus: r.gpus || this.settings.numGpus || 0,
      ...(r.gpuType
        ? { gpuType: r.gpuType }
        : this.settings.gpuName
          ? { gpuType: this.settings.gpuName }
          : {}),
      ...(cons.minVramGiB !== undefined ? { minVramGiB: cons.minVramGiB } : {}),
      ...(cons.minRamGiB !== undefined ? { minRamGiB: cons.minRamGiB } : {}),
      ...(this.settings.minReliability !== undefined ? { minReliability: this.settings.minReliability } : {}),
      diskGB: this.settings.diskGiB ?? DEFAULT_DISK_GB,
      ...(this.settings.minCuda !== undefined ? { minCuda: this.settings.minCuda } : {}),
      ...(this.settings.maxDollarsPerHour !== undefined
        ? { maxDollarsPerHour: this.settings.maxDollarsPerHour }
        : {}),
      verifiedOnly: this.settings.verifiedOnly ?? true,
      interruptible,
    });
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

  /**
   * In the background: waits for the instance to run with an SSH endpoint; one stuck loading is
   * destroyed and replaced (its machine excluded); then launches the job. Never throws: a failure
   * is recorded for `poll` to report.
   */
  private provision(job: JobRequest, id: number, excluded: number[]): void {
    const p: Provisioning = { id, launched: false, record: { run: job.run, attempt: job.attempt } };
    this.provisioning.set(job.jobName, p);
    void (async () => {
      try {
        for (;;) {
          const inst = await this.waitRunning(job.jobName, p.id);
          if (this.closed) throw new AdapterClosed();
          if (inst) {
            await this.hostOf(inst, job.jobName).launch(job);
            p.launched = true;
            return;
          }
          // Stuck loading: this machine is not starting it. Another one.
          const stuck = await this.api.showInstance(p.id);
          if (stuck?.machine_id !== undefined) excluded.push(stuck.machine_id);
          // Gone before the next rental (its offer is back in searches: the exclusion keeps it out).
          this.destroy(p.id, 'stuck loading');
          await Promise.all(this.destroying);
          p.id = await this.rent(job, excluded);
        }
      } catch (e) {
        // Closed (its Backend spec changed): the adapter that replaces it adopts the rental.
        if (e instanceof AdapterClosed) return;
        const message = (e as Error).message;
        this.logger.warn(
          { job: job.jobName, instance: p.id, err: message },
          'Vast.ai instance could not be provisioned',
        );
        p.failed = {
          jobName: job.jobName,
          jobId: String(p.id),
          state: JobState.Lost,
          reason: e instanceof NoOfferError ? 'NoCapacity' : 'ProvisioningFailed',
          message,
        };
      }
    })();
  }

  /** The instance once running with an SSH endpoint; undefined when it is stuck loading. */
  private async waitRunning(jobName: string, id: number): Promise<VastInstance | undefined> {
    const start = this.ctx.now();
    const loadingMs = (this.settings.loadingTimeoutSec ?? DEFAULT_LOADING_TIMEOUT_SEC) * 1000;
    const readyMs = (this.settings.readyTimeoutSec ?? DEFAULT_READY_TIMEOUT_SEC) * 1000;
    for (;;) {
      if (this.cancelled.has(jobName)) throw new Error('cancelled while provisioning');
      if (this.closed) throw new AdapterClosed();
      // The next poll's list says how the rental is, without a call of its own; one not in it,
      // or no poll in time, is shown once — at most every 2 s (Vast's interval for `show`) for
      // the first minute, every 5 s after.
      const listed = await this.listings.after(this.ctx.now(), jobName, LIST_WAIT_MS);
      const seen = listed?.item?.id === id ? listed.item : undefined;
      const inst = seen ?? (await this.api.showInstance(id));
      if (!inst) throw new Error(`Vast.ai instance ${id} is gone before it ran`);
      if (inst.actual_status === VastActualStatus.Running && endpointOf(inst)) return inst;
      if (STOPPED.has(inst.actual_status ?? ''))
        throw new Error(
          `Vast.ai instance ${id} went ${inst.actual_status} before it ran: ${inst.status_msg ?? ''}`,
        );
      const waited = this.ctx.now() - start;
      if (waited > loadingMs && inst.actual_status !== VastActualStatus.Running) {
        this.logger.warn(
          { job: jobName, instance: id, status: inst.actual_status },
          'Vast.ai instance stuck loading; replacing it',
        );
        return undefined;
      }
      if (waited > readyMs)
        throw new Error(`Vast.ai instance ${id} has no SSH endpoint after ${readyMs / 1000}s`);
      if (!seen) await new Promise((r) => setTimeout(r, waited < 60_000 ? 2000 : 5000));
    }
  }

  /** The instance's host (one transport each, reused): its mapped 22/tcp, else the SSH gateway. */
  private hostOf(inst: VastInstance, jobName: string): RemoteHost {
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

  async poll(handles: readonly JobHandle[], owned: ReadonlySet<string> = new Set()): Promise<ObservedJob[]> {
    const takenAt = this.ctx.now();
    let all: VastInstance[];
    try {
      all = await this.api.listInstances();
    } catch (e) {
      return unobservable(handles, 'Unreachable', `Vast.ai list: ${(e as Error).message}`);
    }
    const mine = new Map<string, VastInstance>();
    const prefix = labelPrefix(this.name);
    for (const inst of all)
      if (inst.label?.startsWith(prefix)) mine.set(inst.label.slice(prefix.length), inst);
    this.listings.publish(takenAt, mine);
    const out = await Promise.all(handles.map((h) => this.observe(h, mine.get(h.jobName))));
    this.forgetUnpolled(handles);
    this.sweep(handles, owned, mine);
    return out;
  }

  private async observe(h: JobHandle, inst: VastInstance | undefined): Promise<ObservedJob> {
    const ended = this.ended.get(h.jobName);
    if (ended) return ended;
    const id = inst?.id ?? Number(h.jobId);
    const base = { jobName: h.jobName, jobId: String(id), ...priceOf(inst) };
    const p = this.provisioning.get(h.jobName);
    if (p?.failed) return this.end(h, p.failed, inst?.id);
    // An instance this controller did not rent (it was restarted) and that is not running yet.
    if (!p && inst && inst.actual_status !== VastActualStatus.Running && this.adopt(h, inst))
      return provisioningSeen(base, inst);
    if (!inst) {
      if (p && !p.launched)
        return {
          ...base,
          state: JobState.Pending,
          reason: 'Provisioning',
          message: 'renting a Vast.ai instance',
        };
      if (this.cancelled.has(h.jobName))
        return this.end(h, { ...base, state: JobState.Cancelled, reason: 'Cancelled' }, undefined);
      return this.end(
        h,
        { ...base, state: JobState.Lost, reason: 'InstanceGone', message: `Vast.ai instance ${id} is gone` },
        undefined,
      );
    }
    if (inst.intended_status !== 'stopped' && STOPPED.has(inst.actual_status ?? ''))
      return this.end(
        h,
        {
          ...base,
          state: JobState.Preempted,
          reason:
            inst.actual_status === VastActualStatus.Stopped
              ? 'Outbid'
              : `Instance${capitalize(inst.actual_status!)}`,
          message: `Vast.ai instance ${inst.id} is ${inst.actual_status} while meant to run${inst.status_msg ? `: ${inst.status_msg}` : ''}`,
        },
        inst.id,
      );
    if (inst.actual_status !== VastActualStatus.Running || !endpointOf(inst) || (p && !p.launched))
      return provisioningSeen(base, inst);
    const recent = await this.checks.recent(h);
    if (recent) return { ...recent, ...priceOf(inst) };
    const [seen] = await this.hostOf(inst, h.jobName).observe([h]);
    const o: ObservedJob = { ...seen!, ...base };
    this.checks.saw(h, o, p?.record);
    if (o.reason === 'JobDirMissing' && !this.provisioning.has(h.jobName)) {
      if (this.adopt(h, inst)) return provisioningSeen(base, inst);
      return this.end(
        h,
        { ...o, reason: 'NeverLaunched', message: 'the job was never started on the instance' },
        inst.id,
      );
    }
    return isEnded(o.state) ? this.end(h, o, inst.id) : o;
  }

  /**
   * Takes over provisioning an instance this controller did not rent (it was restarted), with the
   * request rebuilt from the status branch; false when the attempt is no longer live.
   */
  private adopt(h: JobHandle, inst: VastInstance): boolean {
    const job = this.ctx.requestFor?.(h.jobName);
    if (!job) return false;
    this.logger.info(
      { job: h.jobName, instance: inst.id },
      'adopting a Vast.ai instance rented before a restart',
    );
    this.provision(job, inst.id, []);
    return true;
  }

  private forgetUnpolled(handles: readonly JobHandle[]): void {
    const polled = new Set(handles.map((h) => h.jobName));
    for (const k of this.ended.keys()) if (!polled.has(k)) this.ended.delete(k);
    this.checks.keepOnly(polled);
    for (const k of this.cancelled) if (!polled.has(k) && !this.provisioning.has(k)) this.cancelled.delete(k);
  }

  /** Records how the attempt ended and destroys its instance (in the background). */
  private end(h: JobHandle, o: ObservedJob, id: number | undefined): ObservedJob {
    this.ended.set(h.jobName, o);
    this.checks.forget(h.jobName);
    const p = this.provisioning.get(h.jobName);
    this.provisioning.delete(h.jobName);
    const target = id ?? p?.id;
    if (target !== undefined) this.destroy(target, `attempt ${o.state}`);
    this.dropHost(h.jobName);
    return o;
  }

  /** The instance is going: its SSH connection too (each rental has an endpoint of its own). */
  private dropHost(jobName: string): void {
    const key = this.endpointOfJob.get(jobName);
    this.endpointOfJob.delete(jobName);
    if (!key || [...this.endpointOfJob.values()].includes(key)) return;
    this.hosts.get(key)?.close();
    this.hosts.delete(key);
  }

  private destroy(id: number, why: string): void {
    const asked = this.api
      .destroyInstance(id)
      .then(() => this.logger.info({ instance: id, why }, 'destroyed Vast.ai instance'))
      .catch((e: unknown) =>
        this.logger.warn({ instance: id, err: (e as Error).message }, 'cannot destroy Vast.ai instance'),
      )
      .finally(() => this.destroying.delete(asked));
    this.destroying.add(asked);
  }

  /** Instances labelled for this backend that no live attempt owns are destroyed. */
  private sweep(
    handles: readonly JobHandle[],
    live: ReadonlySet<string>,
    mine: Map<string, VastInstance>,
  ): void {
    const owned = new Set([...handles.map((h) => h.jobName), ...live, ...this.provisioning.keys()]);
    for (const [jobName, inst] of mine) {
      if (owned.has(jobName)) continue;
      this.logger.warn(
        { instance: inst.id, label: inst.label },
        'destroying an orphaned Vast.ai instance no live attempt owns',
      );
      this.destroy(inst.id, 'orphan');
    }
  }

  /** Stops the job (adv exec records it cancelled), then destroys the instance after the grace. */
  async cancel(h: JobHandle): Promise<void> {
    this.cancelled.add(h.jobName);
    const [inst] = await this.api.listInstances({ labels: [this.label(h.jobName)] });
    if (!inst) return;
    if (inst.actual_status !== VastActualStatus.Running || !endpointOf(inst))
      return this.destroy(inst.id, 'cancelled');
    const host = this.hostOf(inst, h.jobName);
    await host
      .cancel(h.jobName)
      .catch((e: unknown) =>
        this.logger.warn(
          { job: h.jobName, err: (e as Error).message },
          'cannot stop the job; destroying its instance',
        ),
      );
    void host.ended(h, CANCEL_GRACE_MS).then(() => {
      this.destroy(inst.id, 'cancelled');
      this.dropHost(h.jobName);
    });
  }

  async *logs(h: JobHandle, opts: { follow?: boolean; since?: number } = {}): AsyncIterable<string> {
    const [inst] = await this.api.listInstances({ labels: [this.label(h.jobName)] });
    if (!inst || !endpointOf(inst)) return;
    yield* this.hostOf(inst, h.jobName).logs(h.jobName, opts);
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.destroying);
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

function provisioningSeen(base: Pick<ObservedJob, 'jobName' | 'jobId'>, inst: VastInstance): ObservedJob {
  return {
    ...base,
    state: JobState.Pending,
    reason: 'Provisioning',
    message: `Vast.ai instance ${inst.id} is ${inst.actual_status ?? 'being created'}${inst.status_msg ? `: ${inst.status_msg}` : ''}`,
  };
}

const capitalize = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);
