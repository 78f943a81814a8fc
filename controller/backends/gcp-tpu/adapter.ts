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
 *
 * The bookkeeping and `observe`'s ladder are the shared `MachineLifecycle`'s (remote/); this file
 * says only what Cloud TPU says differently: zones, node states, workers.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { Backend as BackendObject } from '../../spec/schema.js';
import { RemoteHost } from '../remote/host.js';
import {
  CANCEL_GRACE_MS,
  MachineBackend,
  pause,
  type JobSeen,
  type Look,
  type MachineCloud,
  type Standing,
} from '../remote/machine-lifecycle.js';
import { expandHome, sshTargetOf } from '../../transport/ssh.js';
import {
  JobState,
  isEnded,
  type BackendContext,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
} from '../types.js';
import { GcloudTpu, TpuCapacityError, TpuQuotaError, tpuNodeName, type TpuNode } from './gcloud.js';
import {
  MANAGED_BY_LABEL,
  labelValue,
  nodeLabels,
  nodeNameOf,
  workerCheckpointEnv,
  workerJob,
} from './names.js';
import {
  DEFAULT_COORDINATOR_PORT,
  DEFAULT_READY_TIMEOUT_SEC,
  DEFAULT_RUNTIME_VERSION,
  zonesOf,
  type TpuSettings,
} from './settings.js';

/** A listed node and the zone it is in (a node's place is its zone). */
interface ZonedNode {
  zone: string;
  node: TpuNode;
}

const ENDED_STATES = new Set(['PREEMPTED', 'TERMINATED']);
/**
 * How long a running job's workers go without a look over SSH. In between, a poll is the zone's
 * `list` (a preempted node shows there at once) and worker 0's exit record in the object store (a
 * job that ended is looked at at once); a worker that vanished with its node READY is seen within
 * this.
 */
const WORKER_CHECK_MS = 15_000;

export class TpuBackend extends MachineBackend<ZonedNode, string, TpuCloud> {
  readonly type = 'gcp-tpu' as const;

  constructor(name: string, spec: BackendObject['spec'], ctx: BackendContext, gcloud?: GcloudTpu) {
    const cloud = new TpuCloud(name, spec, ctx, gcloud ?? new GcloudTpu({ project: spec.gcpTpu!.project }));
    super(name, cloud, ctx, { checkEveryMs: WORKER_CHECK_MS });
  }

  /** Worker `worker`'s output (default 0), from its job dir on the worker while the node is there. */
  async *logs(
    h: JobHandle,
    opts: { follow?: boolean; since?: number; worker?: number } = {},
  ): AsyncIterable<string> {
    const at = await this.cloud.locate(h.jobName);
    const k = opts.worker ?? 0;
    const host = at ? this.cloud.workers(at.node)[k] : undefined;
    if (!host) return;
    yield* host.logs(k === 0 ? h.jobName : `${h.jobName}-w${k}`, opts);
  }
}

/** What Cloud TPU says differently: a node per job, in the first zone with capacity. */
class TpuCloud implements MachineCloud<ZonedNode, string> {
  readonly words = {
    adopting: 'adopting a TPU node asked for before a restart',
    orphan: 'deleting an orphaned TPU node no live attempt owns',
    notProvisioned: 'TPU node could not be provisioned',
    neverLaunched: 'the workers were never started',
    goneReason: 'NodeGone',
  };
  private readonly settings: TpuSettings;
  private readonly zones: string[];
  private readonly hosts = new Map<string, RemoteHost>();
  private readonly logger: Logger;
  readonly keyOf = nodeNameOf;

  constructor(
    private readonly backend: string,
    private readonly spec: BackendObject['spec'],
    private readonly ctx: BackendContext,
    private readonly gcloud: GcloudTpu,
  ) {
    this.settings = spec.gcpTpu!;
    this.zones = zonesOf(this.settings);
    this.logger = ctx.logger;
  }

  async list(): Promise<Map<string, ZonedNode>> {
    const listed = new Map<string, ZonedNode>();
    for (const zone of this.zones) {
      let nodes: TpuNode[];
      try {
        nodes = await this.gcloud.list(zone, { [MANAGED_BY_LABEL]: labelValue(this.backend) });
      } catch (e) {
        throw new Error(`gcloud list in ${zone}: ${(e as Error).message}`);
      }
      for (const node of nodes) listed.set(tpuNodeName(node), { zone, node });
    }
    return listed;
  }

  async find(jobName: string): Promise<ZonedNode | undefined> {
    for (const zone of this.zones) {
      const node = await this.gcloud.describe(zone, nodeNameOf(jobName));
      if (node && node.state !== 'DELETING') return { zone, node };
    }
    return undefined;
  }

  /** The job's node and its zone, by one describe per zone. */
  async locate(jobName: string): Promise<ZonedNode | undefined> {
    for (const zone of this.zones) {
      const node = await this.gcloud.describe(zone, nodeNameOf(jobName));
      if (node) return { zone, node };
    }
    return undefined;
  }

  async show(jobName: string, zone: string): Promise<ZonedNode | undefined> {
    const node = await this.gcloud.describe(zone, nodeNameOf(jobName));
    return node && { zone, node };
  }

  placeOf(m: ZonedNode): string {
    return m.zone;
  }

  jobIdOf(jobName: string): string {
    return nodeNameOf(jobName);
  }

  standing({ node, zone }: ZonedNode): Standing {
    if (node.state === 'READY') return { kind: 'usable' };
    if (node.state === 'CREATING') return { kind: 'creating' };
    if (node.state === 'DELETING') return { kind: 'going' };
    if (ENDED_STATES.has(node.state))
      return {
        kind: 'ended',
        reason: node.state,
        message: `TPU node ${tpuNodeName(node)} in ${zone} is ${node.state}`,
      };
    return { kind: 'unready' };
  }

  /** A mode this Backend cannot give the job fails the submit, before a node is asked for. */
  check(job: JobRequest): void {
    workerCheckpointEnv(job, this.spec);
  }

  async ask(job: JobRequest): Promise<string> {
    return this.zones[await this.createIn(job, 0)]!;
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
          runtimeVersion: this.settings.runtimeVersion ?? DEFAULT_RUNTIME_VERSION,
          ...(this.settings.spot ? { spot: true } : {}),
          ...(this.settings.preemptible ? { preemptible: true } : {}),
          labels: nodeLabels(this.backend, job),
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

  /** The node once READY; undefined when it vanished while being created (no capacity). */
  async waitUsable(
    job: JobRequest,
    zone: string,
    look: (zone: string) => Promise<Look<ZonedNode>>,
  ): Promise<ZonedNode | undefined> {
    const node = nodeNameOf(job.jobName);
    const limitMs = (this.settings.readyTimeoutSec ?? DEFAULT_READY_TIMEOUT_SEC) * 1000;
    const deadline = this.ctx.now() + limitMs;
    for (let delay = 250; ; delay = Math.min(delay * 2, 10_000)) {
      const { machine, listed } = await look(zone);
      const n = machine?.node;
      if (!n) return undefined;
      if (n.state === 'READY') return machine;
      if (ENDED_STATES.has(n.state) || n.state === 'DELETING')
        throw new Error(`node ${node} in ${zone} went ${n.state} before it was ready`);
      if (this.ctx.now() > deadline)
        throw new Error(`node ${node} in ${zone} not READY after ${limitMs / 1000}s (state ${n.state})`);
      if (!listed) await pause(delay);
    }
  }

  /** The node vanished while CREATING: the zone had no capacity for it. The next zone. */
  async another(job: JobRequest, zone: string, tried: string[]): Promise<string> {
    tried.push(`${zone}: no capacity`);
    this.logger.warn({ job: job.jobName, zone }, 'no TPU capacity in this zone; trying the next');
    const i = this.zones.indexOf(zone);
    if (i + 1 >= this.zones.length)
      throw new TpuCapacityError(`no ${this.settings.acceleratorType} capacity (${tried.join('; ')})`);
    return this.zones[await this.createIn(job, i + 1)]!;
  }

  failureReason(e: unknown): string {
    return e instanceof TpuCapacityError ? 'NoCapacity' : 'ProvisioningFailed';
  }

  /** The worker hosts of a node, in worker order (one transport each, reused). */
  workers(node: TpuNode): RemoteHost[] {
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

  /** Launches the job on every worker with the multi-host contract (worker 0 coordinates). */
  async launch(job: JobRequest, { node }: ZonedNode): Promise<void> {
    const hosts = this.workers(node);
    if (!hosts.length) throw new Error(`node ${node.name} has no worker endpoints`);
    const port = this.settings.coordinatorPort ?? DEFAULT_COORDINATOR_PORT;
    const coordinator = `${node.networkEndpoints![0]!.ipAddress}:${port}`;
    const checkpoint = workerCheckpointEnv(job, this.spec);
    await Promise.all(
      hosts.map((h, k) => h.launch(workerJob(job, k, hosts.length, coordinator, checkpoint))),
    );
  }

  base(h: JobHandle): Pick<ObservedJob, 'jobName' | 'jobId'> {
    return { jobName: h.jobName, jobId: h.jobId };
  }

  /** Worker 0's record is the attempt's; a worker that vanished while it runs ends it as preempted. */
  async observeJob(h: JobHandle, { node }: ZonedNode): Promise<JobSeen> {
    const seen = await Promise.all(
      this.workers(node).map(async (host, k) => {
        const name = k === 0 ? h.jobName : `${h.jobName}-w${k}`;
        const [o] = await host.observe([{ backend: this.backend, jobName: name, jobId: h.jobId }]);
        return { ...o!, jobName: h.jobName };
      }),
    );
    const first = seen[0]!;
    if (first.state === JobState.Unknown) return { seen: first };
    const unlaunched = seen.some((o) => o.reason === 'JobDirMissing')
      ? first.reason === 'JobDirMissing'
        ? 'all'
        : 'some'
      : undefined;
    const lost = seen.find((o, k) => k > 0 && o.state === JobState.Lost);
    const o =
      lost && !isEnded(first.state)
        ? { ...lost, state: JobState.Preempted, message: `a worker vanished: ${lost.message}` }
        : first;
    return { seen: o, ...(unlaunched ? { unlaunched } : {}) };
  }

  async stop(h: JobHandle, { node }: ZonedNode): Promise<{ ended: Promise<unknown> }> {
    const hosts = this.workers(node);
    await Promise.all(hosts.map((w, k) => w.cancel(k === 0 ? h.jobName : `${h.jobName}-w${k}`)));
    return { ended: hosts[0]!.ended(h, CANCEL_GRACE_MS) };
  }

  async delete(node: string, zone: string | undefined): Promise<void> {
    const z = zone ?? this.zones[0]!;
    try {
      await this.gcloud.delete(z, node, { async: true });
      this.logger.info({ zone: z, node }, 'deleted TPU node');
    } catch (e) {
      this.logger.warn({ zone: z, node, err: (e as Error).message }, 'cannot delete TPU node');
    }
  }

  provisioningMessage(jobName: string, m: ZonedNode | undefined, zone: string): string {
    const name = nodeNameOf(jobName);
    if (!m) return `TPU node ${name} is being created in ${zone}`;
    const state = m.node.state;
    return `TPU node ${name} in ${m.zone} is ${state}${state === 'READY' ? ': starting workers' : ''}`;
  }

  goneMessage(_base: unknown, jobName: string): string {
    return `TPU node ${nodeNameOf(jobName)} is gone from ${this.zones.join(', ')}`;
  }

  fields(node: string, zone: string | undefined, m?: ZonedNode): Record<string, unknown> {
    return { zone, node, ...(m?.node.labels ? { labels: m.node.labels } : {}) };
  }

  close(): void {
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
