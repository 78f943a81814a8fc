/**
 * The `gcp-tpu` adapter: one TPU VM node per attempt, created through the user's `gcloud`, the job
 * run on every worker through the shared remote-host module, the node deleted when the attempt
 * ends for any reason.
 *
 * - **submit** finds the node by name in any of the Backend's zones (a controller killed
 *   mid-create adopts it: never a second one), else asks for it `--async` in the first zone and
 *   returns. Provisioning goes on in the background with the request in memory: wait for `READY`
 *   (bounded); a zone without capacity (an async create's node vanishes while `CREATING`; a quota
 *   refusal is immediate) moves to the next zone, like SkyPilot's next-region strategy; then ship
 *   the code and launch `adv exec` on all workers with the multi-host contract. The handle's id is
 *   the node's name: the zone it lands in is whichever lists it.
 * - **poll** is one `list` per zone (a label filter) plus worker 0's exit record in the object
 *   store; the workers are looked at over SSH when the job is new here, when its exit record
 *   appears, and every `WORKER_CHECK_MS`. A `PREEMPTED` or `TERMINATED` node, or a worker that
 *   vanished, ends the attempt as preempted. A node this controller did not start provisioning
 *   (it was restarted) is adopted: the request is rebuilt from the status branch.
 *   A node that ended (any way) is deleted; a managed node no live attempt owns is an orphan and
 *   is deleted too.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { Backend as BackendObject } from '../../spec/schema.js';
import { AdapterClosed, Listings } from '../remote/listings.js';
import { RecentChecks } from '../remote/recent-checks.js';
import { RemoteHost } from '../remote/host.js';
import { expandHome, sshTargetOf } from '../ssh/transport.js';
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
import { GcloudTpu, TpuCapacityError, TpuQuotaError, tpuNodeName, type TpuNode } from './gcloud.js';
import {
  DEFAULT_COORDINATOR_PORT,
  MANAGED_BY_LABEL,
  labelValue,
  nodeLabels,
  nodeNameOf,
  workerCheckpointEnv,
  workerJob,
} from './names.js';

type Settings = NonNullable<BackendObject['spec']['gcpTpu']>;

/** What happens to a job between its submit and its node's first READY poll. */
interface Provisioning {
  /** The zone it is being created in now. */
  zone: string;
  /** The attempt's run and number: where its exit record goes in the object store. */
  record: { run: string; attempt: number };
  /** Set when provisioning failed: the attempt ends with it. */
  failed?: ObservedJob;
  launched: boolean;
}

const ENDED_STATES = new Set(['PREEMPTED', 'TERMINATED']);
/**
 * How long a running job's workers go without a look over SSH. In between, a poll is the zone's
 * `list` (a preempted node shows there at once) and worker 0's exit record in the object store (a
 * job that ended is looked at at once); a worker that vanished with its node READY is seen within
 * this.
 */
const WORKER_CHECK_MS = 15_000;
const DEFAULT_READY_TIMEOUT_SEC = 900;
/** How long a node being provisioned waits for a poll's list before describing it itself. */
const LIST_WAIT_MS = 15_000;
/** How long a cancelled job's workers get to stop before their node is deleted. */
const CANCEL_GRACE_MS = 10_000;

export class TpuBackend implements Backend {
  readonly type = 'gcp-tpu' as const;
  readonly sweepsOrphans = true;
  private readonly gcloud: GcloudTpu;
  private readonly settings: Settings;
  private readonly zones: string[];
  private readonly provisioning = new Map<string, Provisioning>();
  /** Attempts that ended here, so a poll after the node's deletion still says how. */
  private readonly ended = new Map<string, ObservedJob>();
  private readonly cancelled = new Set<string>();
  /** The polls' lists, by node name: what a node being provisioned waits on. */
  private readonly listings = new Listings<{ zone: string; node: TpuNode }>();
  /** The last look at each running job's workers (see `RecentChecks`). */
  private readonly checks: RecentChecks;
  private readonly hosts = new Map<string, RemoteHost>();
  /** Delete requests under way: a controller that stops (`--once`) still makes them. */
  private readonly deleting = new Set<Promise<void>>();
  private readonly logger: Logger;
  /** Set by `close`: background provisioning stops and leaves the node to the next adapter. */
  private closed = false;

  constructor(
    readonly name: string,
    private readonly spec: BackendObject['spec'],
    private readonly ctx: BackendContext,
    gcloud?: GcloudTpu,
  ) {
    this.settings = spec.gcpTpu!;
    this.zones = [this.settings.zone, ...(this.settings.zones ?? [])].filter(
      (z, i, all) => all.indexOf(z) === i,
    );
    this.gcloud = gcloud ?? new GcloudTpu({ project: this.settings.project });
    this.logger = ctx.logger;
    this.checks = new RecentChecks(ctx, WORKER_CHECK_MS);
  }

  async submit(job: JobRequest): Promise<SubmitResult> {
    // A mode this Backend cannot give the job fails the submit, before a node is asked for.
    workerCheckpointEnv(job, this.spec);
    const handle = { backend: this.name, jobName: job.jobName, jobId: nodeNameOf(job.jobName) };
    const found = await this.find(job.jobName);
    if (found) {
      // Adopted (a controller killed mid-create): carry on provisioning what exists.
      if (!this.provisioning.has(job.jobName)) this.provision(job, this.zones.indexOf(found.zone));
      return { ...handle, adopted: true };
    }
    const first = await this.createIn(job, 0);
    this.provision(job, first);
    return handle;
  }

  /** Asks for the node in the first zone from `from` that does not refuse at once; its index. */
  private async createIn(job: JobRequest, from: number): Promise<number> {
    const refused: string[] = [];
    for (let i = from; i < this.zones.length; i++) {
      const zone = this.zones[i]!;
      try {
        await this.gcloud.create({
          name: nodeNameOf(job.jobName),
          zone,
          acceleratorType: this.settings.acceleratorType,
          runtimeVersion: this.settings.runtimeVersion ?? 'tpu-ubuntu2204-base',
          ...(this.settings.spot ? { spot: true } : {}),
          ...(this.settings.preemptible ? { preemptible: true } : {}),
          labels: nodeLabels(this.name, job),
          metadata: this.sshKeysMetadata(),
          async: true,
        });
        this.logger.info({ job: job.jobName, zone, node: nodeNameOf(job.jobName) }, 'creating TPU node');
        return i;
      } catch (e) {
        if (!(e instanceof TpuCapacityError || e instanceof TpuQuotaError)) throw e;
        refused.push(`${zone}: ${e.message}`);
        this.logger.warn(
          { job: job.jobName, zone, err: e.message },
          'TPU refused in this zone; trying the next',
        );
      }
    }
    throw new TpuCapacityError(
      `no ${this.settings.acceleratorType} capacity in ${this.zones.slice(from).join(', ')}: ${refused.join('; ')}`,
    );
  }

  /** `ssh-keys` metadata: the controller's public key for the login user, so workers accept it. */
  private sshKeysMetadata(): Record<string, string> {
    const c = this.spec.connection;
    const pub = c?.identityFile ? readPublicKey(c.identityFile) : undefined;
    return pub ? { 'ssh-keys': `${c?.user ?? 'root'}:${pub}` } : {};
  }

  /**
   * In the background: waits for READY (bounded) in zone `i`, moving to the next zone when this one
   * has no capacity, then launches the job on every worker. Never throws: a failure is recorded
   * for `poll` to report.
   */
  private provision(job: JobRequest, i: number): void {
    const node = nodeNameOf(job.jobName);
    const record = { run: job.run, attempt: job.attempt };
    const p: Provisioning = { launched: false, zone: this.zones[i]!, record };
    void (async () => {
      const refused: string[] = [];
      try {
        for (let zone = i; ;) {
          p.zone = this.zones[zone]!;
          const ready = await this.waitReady(p.zone, node);
          if (this.closed) throw new AdapterClosed();
          if (ready) {
            await this.launchAll(job, ready);
            p.launched = true;
            return;
          }
          // The node vanished while CREATING: the zone had no capacity for it.
          refused.push(`${p.zone}: no capacity`);
          this.logger.warn(
            { job: job.jobName, zone: p.zone },
            'no TPU capacity in this zone; trying the next',
          );
          if (zone + 1 >= this.zones.length)
            throw new TpuCapacityError(
              `no ${this.settings.acceleratorType} capacity (${refused.join('; ')})`,
            );
          zone = await this.createIn(job, zone + 1);
        }
      } catch (e) {
        // Closed (its Backend spec changed): the adapter that replaces it adopts the node.
        if (e instanceof AdapterClosed) return;
        const message = (e as Error).message;
        this.logger.warn(
          { job: job.jobName, zone: p.zone, err: message },
          'TPU node could not be provisioned',
        );
        p.failed = {
          jobName: job.jobName,
          jobId: node,
          state: JobState.Lost,
          reason: e instanceof TpuCapacityError ? 'NoCapacity' : 'ProvisioningFailed',
          message,
        };
      }
    })();
    this.provisioning.set(job.jobName, p);
  }

  /** The node once READY; undefined when it vanished while being created (no capacity). */
  private async waitReady(zone: string, node: string): Promise<TpuNode | undefined> {
    const limitMs = (this.settings.readyTimeoutSec ?? DEFAULT_READY_TIMEOUT_SEC) * 1000;
    const deadline = this.ctx.now() + limitMs;
    for (let delay = 250; ; delay = Math.min(delay * 2, 10_000)) {
      if (this.cancelled.has(node)) throw new Error('cancelled while provisioning');
      if (this.closed) throw new AdapterClosed();
      // The next poll's list says how the node is, without a call of its own; a node not in it
      // (gone, or not listed yet), or no poll in time, is described once.
      const listed = await this.listings.after(this.ctx.now(), node, LIST_WAIT_MS);
      const seen = listed?.item?.zone === zone ? listed.item.node : undefined;
      const n = seen ?? (await this.gcloud.describe(zone, node));
      if (!n) return undefined;
      if (n.state === 'READY') return n;
      if (ENDED_STATES.has(n.state) || n.state === 'DELETING')
        throw new Error(`node ${node} in ${zone} went ${n.state} before it was ready`);
      if (this.ctx.now() > deadline)
        throw new Error(`node ${node} in ${zone} not READY after ${limitMs / 1000}s (state ${n.state})`);
      if (!listed) await new Promise((r) => setTimeout(r, delay));
    }
  }

  /** The worker hosts of a node, in worker order (one transport each, reused). */
  private workers(node: TpuNode): RemoteHost[] {
    return (node.networkEndpoints ?? []).map((ep) => {
      const address = this.settings.externalIp ? (ep.accessConfig?.externalIp ?? ep.ipAddress) : ep.ipAddress;
      let host = this.hosts.get(address);
      if (!host) {
        host = new RemoteHost({
          transport: this.ctx.ssh(sshTargetOf({ ...this.spec.connection, host: address })),
          paths: this.spec.paths,
          code: this.ctx.code,
          logger: this.logger,
        });
        this.hosts.set(address, host);
      }
      return host;
    });
  }

  private async launchAll(job: JobRequest, node: TpuNode): Promise<void> {
    const hosts = this.workers(node);
    if (!hosts.length) throw new Error(`node ${node.name} has no worker endpoints`);
    const port = this.settings.coordinatorPort ?? DEFAULT_COORDINATOR_PORT;
    const coordinator = `${node.networkEndpoints![0]!.ipAddress}:${port}`;
    const checkpoint = workerCheckpointEnv(job, this.spec);
    await Promise.all(
      hosts.map((h, k) => h.launch(workerJob(job, k, hosts.length, coordinator, checkpoint))),
    );
  }

  async find(jobName: string): Promise<(JobHandle & { zone: string }) | undefined> {
    for (const zone of this.zones) {
      const n = await this.gcloud.describe(zone, nodeNameOf(jobName));
      if (n && n.state !== 'DELETING')
        return { backend: this.name, jobName, jobId: nodeNameOf(jobName), zone };
    }
    return undefined;
  }

  async poll(handles: readonly JobHandle[], owned: ReadonlySet<string> = new Set()): Promise<ObservedJob[]> {
    const takenAt = this.ctx.now();
    const byZone = new Map<string, TpuNode[]>();
    for (const zone of this.zones) {
      try {
        byZone.set(zone, await this.gcloud.list(zone, { [MANAGED_BY_LABEL]: labelValue(this.name) }));
      } catch (e) {
        return unobservable(handles, 'Unreachable', `gcloud list in ${zone}: ${(e as Error).message}`);
      }
    }
    const listed = new Map<string, { zone: string; node: TpuNode }>();
    for (const [zone, nodes] of byZone)
      for (const node of nodes) listed.set(tpuNodeName(node), { zone, node });
    this.listings.publish(takenAt, listed);
    const out = await Promise.all(handles.map((h) => this.observe(h, byZone)));
    this.forgetUnpolled(handles);
    await this.sweep(handles, owned, byZone);
    return out;
  }

  private async observe(h: JobHandle, byZone: Map<string, TpuNode[]>): Promise<ObservedJob> {
    const ended = this.ended.get(h.jobName);
    if (ended) return ended;
    const base = { jobName: h.jobName, jobId: h.jobId };
    const name = nodeNameOf(h.jobName);
    let zone = this.provisioning.get(h.jobName)?.zone ?? this.zones[0]!;
    let node: TpuNode | undefined;
    for (const [z, nodes] of byZone) {
      node = nodes.find((n) => tpuNodeName(n) === name);
      if (node) {
        zone = z;
        break;
      }
    }
    const p = this.provisioning.get(h.jobName);
    if (p?.failed) return this.end(h, p.failed, zone);
    // A node still being created that this controller did not ask for: a restarted controller
    // carries on from it (never a second node).
    if (!p && node?.state === 'CREATING' && this.adopt(h, zone))
      return this.provisioningObserved(base, name, zone, 'CREATING');
    if (!node && p && !p.launched)
      return {
        ...base,
        state: JobState.Pending,
        reason: 'Provisioning',
        message: `TPU node ${name} is being created in ${zone}`,
      };
    if (!node) {
      if (this.cancelled.has(name))
        return this.end(h, { ...base, state: JobState.Cancelled, reason: 'Cancelled' }, zone);
      return this.end(
        h,
        {
          ...base,
          state: JobState.Lost,
          reason: 'NodeGone',
          message: `TPU node ${name} is gone from ${this.zones.join(', ')}`,
        },
        zone,
      );
    }
    if (ENDED_STATES.has(node.state))
      return this.end(
        h,
        {
          ...base,
          state: JobState.Preempted,
          reason: node.state,
          message: `TPU node ${name} in ${zone} is ${node.state}`,
        },
        zone,
      );
    if (node.state !== 'READY' || (p && !p.launched))
      return this.provisioningObserved(base, name, zone, node.state);
    const recent = await this.checks.recent(h);
    if (recent) return recent;
    const seen = await this.observeWorkers(h, node, zone);
    this.checks.saw(h, seen, p?.record);
    return seen;
  }

  private provisioningObserved(
    base: Pick<ObservedJob, 'jobName' | 'jobId'>,
    name: string,
    zone: string,
    state: string,
  ): ObservedJob {
    return {
      ...base,
      state: JobState.Pending,
      reason: 'Provisioning',
      message: `TPU node ${name} in ${zone} is ${state}${state === 'READY' ? ': starting workers' : ''}`,
    };
  }

  /**
   * Takes over provisioning a node this controller did not start (it was restarted): waits for it
   * and launches on the workers that have no job yet, with the request rebuilt from the status
   * branch. False when there is no such request (the attempt is no longer live).
   */
  private adopt(h: JobHandle, zone: string): boolean {
    const job = this.ctx.requestFor?.(h.jobName);
    if (!job) return false;
    this.logger.info(
      { job: h.jobName, zone, node: nodeNameOf(h.jobName) },
      'adopting a TPU node asked for before a restart',
    );
    this.provision(job, Math.max(0, this.zones.indexOf(zone)));
    return true;
  }

  /** Worker 0's record is the attempt's; a worker that vanished or failed ends it. */
  private async observeWorkers(h: JobHandle, node: TpuNode, zone: string): Promise<ObservedJob> {
    const hosts = this.workers(node);
    const seen = await Promise.all(
      hosts.map(async (host, k) => {
        const name = k === 0 ? h.jobName : `${h.jobName}-w${k}`;
        const [o] = await host.observe([{ backend: this.name, jobName: name, jobId: h.jobId }]);
        return { ...o!, jobName: h.jobName };
      }),
    );
    const first = seen[0]!;
    if (first.state === JobState.Unknown) return first;
    if (seen.some((o) => o.reason === 'JobDirMissing') && !this.provisioning.has(h.jobName)) {
      // Launched on no worker or not on all (a controller restarted while launching): carry on.
      if (this.adopt(h, zone))
        return this.provisioningObserved(
          { jobName: h.jobName, jobId: h.jobId },
          tpuNodeName(node),
          zone,
          'READY',
        );
      if (first.reason === 'JobDirMissing')
        return this.end(
          h,
          { ...first, reason: 'NeverLaunched', message: 'the workers were never started' },
          zone,
        );
    }
    const lost = seen.find((o, k) => k > 0 && o.state === JobState.Lost);
    if (lost && !isEnded(first.state))
      return this.end(
        h,
        { ...lost, state: JobState.Preempted, message: `a worker vanished: ${lost.message}` },
        zone,
      );
    return isEnded(first.state) ? this.end(h, first, zone) : first;
  }

  /**
   * What was kept for attempts the controller no longer polls (it recorded their end): an ended
   * observation, a cancel mark; kept while a provisioning task may still read the mark.
   */
  private forgetUnpolled(handles: readonly JobHandle[]): void {
    const polled = new Set(handles.map((h) => h.jobName));
    for (const jobName of this.ended.keys()) if (!polled.has(jobName)) this.ended.delete(jobName);
    this.checks.keepOnly(polled);
    const keep = new Set([...polled, ...this.provisioning.keys()].map(nodeNameOf));
    for (const node of this.cancelled) if (!keep.has(node)) this.cancelled.delete(node);
  }

  /** Records how the attempt ended and deletes its node (in the background). */
  private end(h: JobHandle, o: ObservedJob, zone: string): ObservedJob {
    this.ended.set(h.jobName, o);
    this.checks.forget(h.jobName);
    this.provisioning.delete(h.jobName);
    this.deleteNode(zone, nodeNameOf(h.jobName));
    return o;
  }

  /** Asks for the node's deletion in the background; `close` waits for the request to be made. */
  private deleteNode(zone: string, node: string): void {
    const asked = this.gcloud
      .delete(zone, node, { async: true })
      .then(() => this.logger.info({ zone, node }, 'deleted TPU node'))
      .catch((e: unknown) =>
        this.logger.warn({ zone, node, err: (e as Error).message }, 'cannot delete TPU node'),
      )
      .finally(() => this.deleting.delete(asked));
    this.deleting.add(asked);
  }

  /** Managed nodes that no live attempt owns (and that are not being provisioned) are deleted. */
  private async sweep(
    handles: readonly JobHandle[],
    live: ReadonlySet<string>,
    byZone: Map<string, TpuNode[]>,
  ): Promise<void> {
    const owned = new Set(
      [...handles.map((h) => h.jobName), ...live, ...this.provisioning.keys()].map(nodeNameOf),
    );
    for (const [zone, nodes] of byZone)
      for (const n of nodes) {
        const name = tpuNodeName(n);
        if (owned.has(name) || n.state === 'DELETING') continue;
        this.logger.warn(
          { zone, node: name, labels: n.labels },
          'deleting an orphaned TPU node no live attempt owns',
        );
        this.deleteNode(zone, name);
      }
  }

  /**
   * Stops the job on every worker (adv exec records it cancelled, the workload gets SIGTERM), then
   * deletes the node once worker 0 has its exit record, or after the grace: a cancelled attempt is
   * not polled again, so its node is deleted here, in the background.
   */
  async cancel(h: JobHandle): Promise<void> {
    const node = nodeNameOf(h.jobName);
    this.cancelled.add(node);
    const at = await this.locate(h.jobName);
    if (!at) return;
    if (at.node.state !== 'READY') return this.deleteNode(at.zone, node);
    const hosts = this.workers(at.node);
    await Promise.all(hosts.map((w, k) => w.cancel(k === 0 ? h.jobName : `${h.jobName}-w${k}`)));
    void hosts[0]!.ended(h, CANCEL_GRACE_MS).then(() => this.deleteNode(at.zone, node));
  }

  /** The job's node and its zone, by one describe per zone. */
  private async locate(jobName: string): Promise<{ zone: string; node: TpuNode } | undefined> {
    for (const zone of this.zones) {
      const node = await this.gcloud.describe(zone, nodeNameOf(jobName));
      if (node) return { zone, node };
    }
    return undefined;
  }

  /** Worker `worker`'s output (default 0), from its job dir on the worker while the node is there. */
  async *logs(
    h: JobHandle,
    opts: { follow?: boolean; since?: number; worker?: number } = {},
  ): AsyncIterable<string> {
    const at = await this.locate(h.jobName);
    const k = opts.worker ?? 0;
    const host = at ? this.workers(at.node)[k] : undefined;
    if (!host) return;
    yield* host.logs(k === 0 ? h.jobName : `${h.jobName}-w${k}`, opts);
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.deleting);
    for (const h of this.hosts.values()) h.close();
  }
}

/** The public half of an identity file (`<file>.pub`), or undefined. */
function readPublicKey(identityFile: string): string | undefined {
  try {
    return readFileSync(`${expandHome(identityFile)}.pub`, 'utf8').trim();
  } catch {
    return undefined;
  }
}
