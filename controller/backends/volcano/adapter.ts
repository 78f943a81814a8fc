/**
 * The `volcano` adapter: one Volcano Job per attempt on a Kubernetes cluster, through the user's
 * `kubectl`.
 *
 * - **submit** uploads the code payload to the object store (content-addressed, once), makes sure
 *   the namespace has the runtime ConfigMap (the bundled `adv exec`, named by its hash), then
 *   creates the attempt's Secret and Job in one `kubectl create`. A Job that exists under the name
 *   already (a controller killed during create) is adopted, never created twice: names are
 *   deterministic, and Kubernetes refuses a second object of a name.
 * - **poll** is ONE `kubectl get jobs.batch.volcano.sh,pods,secrets -l <backend label>` per
 *   namespace per pass (Backends sharing a namespace share it), plus process 0's exit record from
 *   the store for a job that finished. See `observe.ts` for the phases. A job that ended is
 *   deleted at once (volcano #1718: a Failed job's pods may run on); a managed Job or Secret that
 *   no live attempt owns is an orphan and is deleted.
 * - **cancel** deletes the Job and its Secret: the pods get SIGTERM and their grace period, and
 *   `adv exec` uploads what the workload checkpointed in it.
 * - **capacity** is the queue's `spec.capability` − `status.allocated` of the GPU resource.
 * - **logs** are `kubectl logs` of the pod of process K (default 0).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { attemptPrefix } from '../../../runtime/checkpoint.js';
import { EXIT_FILE, type ExitRecord } from '../../../runtime/records.js';
import { StallingError } from '../../errors.js';
import { toolEnv } from '../../internal/child-env.js';
import type { Backend as BackendObject } from '../../spec/schema.js';
import { dnsLabelOf, labelValue } from '../names.js';
import { AttemptBook, polledNames } from '../remote/attempt-book.js';
import { execBundlePath } from '../remote/pack.js';
import {
  isEnded,
  oneByOne,
  unobservable,
  type Backend,
  type BackendContext,
  type Capacity,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
  type SubmitResult,
} from '../types.js';
import { Kubectl, KubectlError, KubectlFailure, ListsUnderWay, listsKey, type K8sObject } from './kubectl.js';
import { FINISHED_PHASES, failedPod, observe, phaseOf } from './observe.js';
import {
  ATTEMPT_ANNOTATION,
  BACKEND_LABEL,
  JOB_ANNOTATION,
  RUN_ANNOTATION,
  podName,
  renderAttempt,
  runtimeConfigMap,
  unrenderable,
} from './render.js';
import { DEFAULT_GPU_RESOURCE, type VolcanoSettings } from './settings.js';

/** The Volcano Job resource, fully qualified: `jobs` alone is batch/v1's. */
export const VCJOB = 'jobs.batch.volcano.sh';
/** Longest Job name: its pods `<job>-worker-<index>` are host names (DNS labels of ≤ 63). */
export const NAME_MAX = 50;

/** The Kubernetes name of a job's Volcano Job (and Secret). */
export const vcNameOf = (jobName: string): string => dnsLabelOf(jobName, NAME_MAX);

export class VolcanoBackend implements Backend {
  readonly type = 'volcano' as const;
  readonly sweepsOrphans = true;
  private readonly kubectl: Kubectl;
  private readonly s: VolcanoSettings;
  private readonly ns: string;
  /** This backend's value of BACKEND_LABEL. */
  private readonly label: string;
  private readonly logger: Logger;
  /** How attempts ended here, which were cancelled, and the deletions under way. */
  private readonly book: AttemptBook;
  /** Code payloads known to be in the store. */
  private readonly uploaded = new Set<string>();
  /** The runtime ConfigMap's name, once it is known to exist in the namespace. */
  private runtime?: Promise<string>;

  constructor(
    readonly name: string,
    spec: BackendObject['spec'],
    private readonly ctx: BackendContext,
    kubectl?: Kubectl,
  ) {
    this.s = spec.volcano!;
    this.ns = this.s.namespace;
    this.label = labelValue(name);
    this.logger = ctx.logger;
    this.book = new AttemptBook(ctx.logger);
    this.kubectl = kubectl ?? this.client();
  }

  /**
   * The Backend's kubectl. Its lists under way are shared with every client of its environment
   * (Backends in one namespace polled in one pass make one call): per controller, through
   * `ctx.shared`; an embedding without it shares nothing.
   */
  private client(): Kubectl {
    const env = toolEnv('kubectl', this.ctx.hostEnv);
    const lists = this.ctx.shared?.(listsKey(env), () => new ListsUnderWay());
    return new Kubectl({
      ...(this.s.kubeconfig ? { kubeconfig: this.s.kubeconfig } : {}),
      ...(this.s.context ? { context: this.s.context } : {}),
      env,
      ...(lists ? { lists } : {}),
    });
  }

  /** Find-or-create each Job: one that exists under the name (not being deleted) is adopted. */
  submit(jobs: readonly JobRequest[]): Promise<(SubmitResult | Error)[]> {
    return oneByOne(jobs, async (job) => {
      const found = await this.find(job.jobName);
      return found ? { ...found, adopted: true } : this.create(job);
    });
  }

  private async create(job: JobRequest): Promise<SubmitResult> {
    const name = vcNameOf(job.jobName);
    const handle = { backend: this.name, jobName: job.jobName, jobId: name };
    const why = unrenderable(job, this.s);
    if (why)
      throw new StallingError('BackendMisconfigured', why, `fix Backend ${this.name} or the Storage spec`);
    const codeKey = await this.upload(job);
    try {
      const rendered = renderAttempt(job, {
        backend: this.name,
        namespace: this.ns,
        settings: this.s,
        name,
        codeKey,
        runtimeConfigMap: await this.ensureRuntime(),
      });
      const r = await this.kubectl.create(this.ns, [
        ...(rendered.secret ? [rendered.secret] : []),
        rendered.job,
      ]);
      const adopted = r.existing.some((e) => e.name === name && e.resource.startsWith('jobs'));
      this.logger.info({ job: job.jobName, vcjob: name, namespace: this.ns, adopted }, 'created Volcano Job');
      return adopted ? { ...handle, adopted: true } : handle;
    } catch (e) {
      if (e instanceof KubectlError && e.reason === KubectlFailure.Invalid)
        throw new StallingError(
          'BackendRefused',
          `the cluster refused the Volcano Job: ${e.message}`,
          `fix Backend ${this.name} (queue, image, resources) or the run's resources`,
        );
      throw this.withFix(e);
    }
  }

  /**
   * What a person does about a failure that is the cluster's, not the spec's (retried after the
   * cool-down, so fixing the cluster is enough): a missing namespace, a permission the kubeconfig's
   * user lacks.
   */
  private withFix(e: unknown): unknown {
    if (!(e instanceof KubectlError)) return e;
    if (e.reason === KubectlFailure.NotFound && /namespaces? "[^"]*" not found/.test(e.message))
      return new KubectlError(
        `${e.message}: create it (kubectl create namespace ${this.ns}) or set Backend ${this.name}'s volcano.namespace`,
        e.reason,
      );
    if (e.reason === KubectlFailure.Auth)
      return new KubectlError(
        `${e.message}: the kubeconfig's user needs the Role listed in docs/backends.md (volcano: what the kubeconfig's user needs)`,
        e.reason,
      );
    return e;
  }

  /** Puts the code payload in the store (once per tree); its key. */
  private async upload(job: JobRequest): Promise<string> {
    const store = this.ctx.objects?.();
    if (!store) throw new Error('no object store is configured: the pods fetch the code from it');
    const tree = await this.ctx.code.treeOf(job.code.commit, job.code.path);
    const key = `code/${tree}.tar.gz`;
    if (this.uploaded.has(key)) return key;
    if (!(await store.head(key))) await store.put(key, await this.ctx.code.payload(tree));
    this.uploaded.add(key);
    return key;
  }

  /** The runtime ConfigMap (bundled adv exec) in the namespace, created when missing. */
  private ensureRuntime(): Promise<string> {
    this.runtime ??= (async () => {
      const bundle = readFileSync(execBundlePath(), 'utf8');
      const hash = createHash('sha256').update(bundle).digest('hex').slice(0, 12);
      const cm = `adv-exec-${hash}`;
      await this.kubectl.create(this.ns, [runtimeConfigMap(cm, this.ns, hash, bundle)]);
      return cm;
    })().catch((e: unknown) => {
      this.runtime = undefined;
      throw e;
    });
    return this.runtime;
  }

  async find(jobName: string): Promise<JobHandle | undefined> {
    const name = vcNameOf(jobName);
    const job = await this.kubectl.get(this.ns, VCJOB, name);
    return job && !job.metadata.deletionTimestamp ? { backend: this.name, jobName, jobId: name } : undefined;
  }

  async poll(handles: readonly JobHandle[], owned: ReadonlySet<string> = new Set()): Promise<ObservedJob[]> {
    let items: K8sObject[];
    try {
      // Every managed object of the namespace, so Backends sharing it share the call; then ours.
      const all = await this.kubectl.list(this.ns, [VCJOB, 'pods', 'secrets'], BACKEND_LABEL);
      items = all.filter((o) => o.metadata.labels?.[BACKEND_LABEL] === this.label);
    } catch (e) {
      return unobservable(
        handles,
        'Unreachable',
        `kubectl get in namespace ${this.ns}: ${(e as Error).message}`,
      );
    }
    const jobs = new Map<string, K8sObject>();
    const pods = new Map<string, K8sObject[]>();
    const secrets: string[] = [];
    for (const o of items) {
      if (o.kind === 'Job') jobs.set(o.metadata.name, o);
      else if (o.kind === 'Secret') secrets.push(o.metadata.name);
      else if (o.kind === 'Pod') {
        const j = o.metadata.labels?.['volcano.sh/job-name'];
        if (j) pods.set(j, [...(pods.get(j) ?? []), o]);
      }
    }
    const out = await Promise.all(
      handles.map(async (h) => {
        const done = this.book.endedAs(h.jobName);
        if (done) return done;
        const name = vcNameOf(h.jobName);
        const job = jobs.get(name);
        const mine = pods.get(name) ?? [];
        // The exit record is read once something ended: the Job, or process 0's pod.
        const first = mine.find((p) => p.metadata.name === podName(name, 0));
        const firstPhase = (first?.status as { phase?: string } | undefined)?.phase;
        const finished =
          !job || FINISHED_PHASES.has(phaseOf(job)) || firstPhase === 'Succeeded' || firstPhase === 'Failed';
        const o = observe({
          jobName: h.jobName,
          name,
          namespace: this.ns,
          queue: this.s.queue ?? 'default',
          job,
          pods: mine,
          cancelled: this.book.wasCancelled(h.jobName),
          ...(finished ? await this.exitRecord(h.jobName, job) : {}),
        });
        if (o.reason === 'PodFailed') await this.withLastOutput(o, failedPod(mine)?.name);
        if (isEnded(o.state)) this.end(h.jobName, o);
        return o;
      }),
    );
    const polled = polledNames(handles);
    this.book.forgetUnpolled(polled);
    this.sweep([...polled, ...owned], jobs, secrets);
    return out;
  }

  /**
   * A pod that failed before `adv exec` could say why (the image has no Node, the env plugin is
   * off): the last lines it printed go in the message, read while the pod is still there.
   */
  private async withLastOutput(o: ObservedJob, pod: string | undefined): Promise<void> {
    if (!pod) return;
    const tail = await this.kubectl.logs(this.ns, pod, 5).catch(() => '');
    const text = tail.trim().split('\n').slice(-5).join(' | ').slice(-600);
    if (text) o.message = `${o.message ?? ''}; its last output: ${text}`;
  }

  /** Process 0's exit record, from the store (the run and attempt: the request, else the Job's annotations). */
  private async exitRecord(jobName: string, job: K8sObject | undefined): Promise<{ exit?: ExitRecord }> {
    const req = this.ctx.requestFor?.(jobName);
    const run = req?.run ?? job?.metadata.annotations?.[RUN_ANNOTATION];
    const attempt = req?.attempt ?? Number(job?.metadata.annotations?.[ATTEMPT_ANNOTATION]);
    const store = this.ctx.objects?.();
    if (!store || !run || !Number.isInteger(attempt)) return {};
    try {
      const body = await store.get(`${attemptPrefix(run, attempt)}${EXIT_FILE}`);
      return body ? { exit: JSON.parse(Buffer.from(body).toString('utf8')) as ExitRecord } : {};
    } catch (e) {
      this.logger.warn({ job: jobName, err: (e as Error).message }, 'cannot read the exit record');
      return {};
    }
  }

  /** Records how the attempt ended and deletes its Job and Secret (in the background). */
  private end(jobName: string, o: ObservedJob): void {
    this.book.recordEnd(jobName, o);
    this.remove(vcNameOf(jobName), `ended ${o.state}`);
  }

  private remove(name: string, why: string): void {
    const ask = () =>
      this.kubectl
        .delete(this.ns, [`${VCJOB}/${name}`, `secret/${name}`])
        .then(() => this.logger.info({ vcjob: name, namespace: this.ns, why }, 'deleted Volcano Job'));
    void this.book.deleteOnce(name, ask, 'cannot delete Volcano Job; the next poll retries', { vcjob: name });
  }

  /**
   * Managed Jobs and Secrets that no live attempt (`owners`: job names) owns are deleted; a Secret
   * waits for its Job's create.
   */
  private sweep(owners: readonly string[], jobs: Map<string, K8sObject>, secrets: readonly string[]): void {
    const going = (job: K8sObject) => Boolean(job.metadata.deletionTimestamp);
    for (const [name, job] of this.book.orphans(jobs, owners, vcNameOf, going)) {
      this.logger.warn(
        { vcjob: name, job: job.metadata.annotations?.[JOB_ANNOTATION], phase: phaseOf(job) },
        'deleting a Volcano Job no live attempt owns',
      );
      this.remove(name, 'orphan');
    }
    const bare = secrets.filter((name) => !jobs.has(name)).map((name) => [name, name] as const);
    for (const [name] of this.book.orphans(bare, owners, vcNameOf)) this.remove(name, 'orphaned Secret');
  }

  async cancel(h: JobHandle): Promise<void> {
    const name = vcNameOf(h.jobName);
    this.book.markCancelled(h.jobName);
    await this.kubectl.delete(this.ns, [`${VCJOB}/${name}`, `secret/${name}`]);
    this.logger.info({ vcjob: name, namespace: this.ns }, 'cancelled: deleted Volcano Job');
  }

  /** Process `worker`'s output (default 0), from its pod while it is there. */
  async *logs(
    h: JobHandle,
    opts: { follow?: boolean; since?: number; worker?: number } = {},
  ): AsyncIterable<string> {
    const pod = podName(vcNameOf(h.jobName), opts.worker ?? 0);
    if (opts.follow) {
      yield* this.kubectl.follow(this.ns, pod);
      return;
    }
    try {
      yield await this.kubectl.logs(this.ns, pod, 1000);
    } catch (e) {
      if (!(e instanceof KubectlError && e.reason === KubectlFailure.NotFound)) throw e;
    }
  }

  /** The queue's capability − allocated of the GPU resource (what the gang scheduler will admit). */
  async capacity(): Promise<Capacity> {
    const queue = this.s.queue ?? 'default';
    const gpu = this.s.gpuResourceName ?? DEFAULT_GPU_RESOURCE;
    const q = await this.kubectl.get(undefined, 'queues.scheduling.volcano.sh', queue);
    if (!q) return { freeGpus: 0, note: `queue ${queue} does not exist` };
    const state = (q.status as { state?: string } | undefined)?.state;
    if (state && state !== 'Open') return { freeGpus: 0 };
    const cap = (q.spec as { capability?: Record<string, string> } | undefined)?.capability?.[gpu];
    if (cap === undefined) return { freeGpus: 0, note: `queue ${queue} sets no ${gpu} capability` };
    const used = (q.status as { allocated?: Record<string, string> } | undefined)?.allocated?.[gpu];
    return { freeGpus: Math.max(0, Math.floor(quantity(cap) - quantity(used ?? '0'))) };
  }

  async close(): Promise<void> {
    await this.book.drain();
  }
}

/** A Kubernetes quantity as a number (`4`, `500m`, `2k`, `1Gi`). */
export function quantity(q: string): number {
  const m = /^([0-9.]+)([a-zA-Z]*)$/.exec(q.trim());
  if (!m) return NaN;
  const n = Number(m[1]);
  const mult: Record<string, number> = {
    '': 1,
    m: 1e-3,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
    Ki: 1024,
    Mi: 1024 ** 2,
    Gi: 1024 ** 3,
    Ti: 1024 ** 4,
  };
  return n * (mult[m[2]!] ?? NaN);
}
