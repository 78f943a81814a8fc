/**
 * The controller: a level-triggered reconcile loop, Kubernetes style.
 *
 * Each pass: refresh git (on an interval, a webhook or a watched ref change), load the desired
 * state (only changed blobs are parsed), poll every backend once for its live jobs, plan every due
 * key with the pure planner, write the status changes of the pass as ONE commit and publish it,
 * and only then execute the actions (write-ahead: a submission is on the status branch before the
 * backend is asked). Results of the actions go out as the next commit.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import pLimit from 'p-limit';
import pino, { type Logger } from 'pino';
import { argvFor } from '../runtime/exec.js';
import { BACKEND_FACTORIES, unusableBecause } from './backends/registry.js';
import {
  unobservable,
  type Backend,
  type BackendFactory,
  type Capacity,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
} from './backends/types.js';
import { AdvError, ErrorCode, isAdvError } from './errors.js';
import { readJsonCache, writeJsonCache } from './internal/json-cache.js';
import { SpecsRepo, type SpecsRepoOptions } from './git/specs-repo.js';
import { GitTreeSource, TreeListingCache } from './git/tree-source.js';
import type { Identity } from './git/port.js';
import { WorkQueue } from './reconcile/queue.js';
import { recordSubmitFailed, recordSubmitted } from './reconcile/results.js';
import {
  generationOf,
  isLiveAttempt,
  planRun,
  type BackendInfo,
  type DesiredRun,
  type InvalidRun,
  type PlanContext,
  type RunAction,
} from './reconcile/run-plan.js';
import { formatDiagnostic } from './spec/diagnostic.js';
import { SpecLoader, type CachedFileEntry } from './spec/loader.js';
import { SCHEMAS, type Backend as BackendObject, type Storage, type StorageSpec } from './spec/schema.js';
import { storeTarget, type StoreTarget } from './storage.js';
import { openStore, type ObjectStore } from '../runtime/store/index.js';
import { VERSION } from './version.js';
import { StatusConflict, StatusStore } from './status/store.js';
import { ControllerMetrics, type MetricsSnapshot } from './metrics.js';
import { EndClass } from './reconcile/classify.js';
import { desiredDag, desiredRun, invalidObject, resolveCodeRefs } from './reconcile/desired.js';
import { planDag, type DagPlanContext, type DesiredDag, type InvalidDag } from './reconcile/dag-plan.js';
import { readOutputManifest } from '../runtime/artifacts.js';
import {
  ConditionType,
  Reason,
  setCondition,
  TERMINAL_PHASES,
  type BackendStatusDoc,
  type DagStatusDoc,
  type Heartbeat,
  type RunStatusDoc,
  type StatusDoc,
} from './status/types.js';

/** How long a backend's `capacity()` answer is used before it is asked again. */
const CAPACITY_TTL_MS = 15_000;
/** Failed runs in a row that make a backend degraded, unless its spec says otherwise. */
const DEFAULT_DEGRADE_AFTER = 3;

type FailureStreakEntry = NonNullable<BackendStatusDoc['status']['failureStreak']>[number];

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
  backendFactories?: readonly BackendFactory[];
  identity?: Identity;
  /** Also export the Node process's own metrics (CPU, memory, event loop) on /metrics. */
  processMetrics?: boolean;
  /** Environment secrets are resolved from (names in `spec.secrets`). */
  secretEnv?: NodeJS.ProcessEnv;
}

export interface PassStats {
  /** Milliseconds spent in each step of the pass. */
  ms: { fetch: number; load: number; observe: number; plan: number; write: number; execute: number };
  planned: number;
  commits: number;
  actions: number;
  published: boolean;
  loadedSpecs: boolean;
}

const RUN = (name: string) => `Run/${name}`;
const DAG = (name: string) => `DAG/${name}`;

export class Controller {
  readonly queue: WorkQueue;
  readonly logger: Logger;
  readonly metrics: ControllerMetrics;
  private readonly now: () => number;
  private readonly loader = new SpecLoader();
  private listings!: TreeListingCache;
  private store!: StatusStore;
  private specHead: string | undefined;
  /** Runs from the specs, and the child runs of DAGs: what the Run planner is asked about. */
  private desiredRuns = new Map<string, DesiredRun>();
  private specRuns = new Map<string, DesiredRun>();
  private childRuns = new Map<string, DesiredRun>();
  private invalidRuns = new Map<string, InvalidRun>();
  private desiredDags = new Map<string, DesiredDag>();
  private invalidDags = new Map<string, InvalidDag>();
  private dagFingerprints = new Map<string, string>();
  /** Children of each DAG as last planned. */
  private readonly dagChildNames = new Map<string, Set<string>>();
  /** Runs waiting for a backend to have room (`NoCapacity`). */
  private readonly waitingForCapacity = new Set<string>();
  /** Each DAG's status at the start of the pass (for its commit message). */
  private readonly dagPassBase = new Map<string, DagStatusDoc | undefined>();
  /** Outputs (`run/output`) seen complete: a manifest, once written, stays. */
  private readonly outputsReady = new Set<string>();
  private fingerprints = new Map<string, string>();
  private backendObjects = new Map<string, { obj: BackendObject; gen: string }>();
  /** The object store of the repo's Storage spec, and how jobs reach it. */
  private storeTarget: StoreTarget | undefined;
  private objects: ObjectStore | undefined;
  private readonly heartbeatReadAt = new Map<string, number>();
  /** What each backend's `capacity()` said, and when (for the solver). */
  private readonly capacities = new Map<string, { at: number; capacity?: Capacity }>();
  /** Per backend: runs whose latest attempt there failed, since its last success. */
  private failureStreaks = new Map<string, FailureStreakEntry[]>();
  private streaksDirty = true;
  private readonly backends = new Map<string, { instance?: Backend; info: BackendInfo; gen: string }>();
  private controllerId = '';
  private lastFetchError: string | undefined;
  private warnedNoSpecs = false;
  private statusCacheSavedAt = 0;
  private nextFetchAt = 0;
  private nextResyncAt = 0;
  private nextPollAt = 0;
  private fetchRequested = true;
  private remoteReachable = true;
  private wake: (() => void) | undefined;
  private stopped = false;
  private readonly limit: ReturnType<typeof pLimit>;

  private constructor(
    readonly repo: SpecsRepo,
    private readonly opts: ControllerOptions,
  ) {
    this.now = opts.now ?? Date.now;
    this.logger = opts.logger ?? pino({ level: 'silent' });
    this.queue = new WorkQueue({ now: this.now });
    this.metrics = new ControllerMetrics(() => this.metricsSnapshot(), {
      processMetrics: opts.processMetrics ?? false,
    });
    this.limit = pLimit(opts.concurrency ?? 8);
  }

  static async create(opts: ControllerOptions): Promise<Controller> {
    const dataDir = resolve(opts.dataDir);
    await mkdir(dataDir, { recursive: true });
    const repo = await SpecsRepo.open({ ...opts, dataDir });
    const c = new Controller(repo, { ...opts, dataDir });
    c.listings = new TreeListingCache(repo.git);
    c.store = new StatusStore(
      repo.git,
      repo.statusRef,
      opts.identity ?? { name: 'AdventureTime', email: 'controller@adventuretime.dev' },
      c.now,
    );
    return c;
  }

  get dataDir(): string {
    return this.opts.dataDir;
  }

  /** The status as last loaded or written (for tests and the CLI of an embedded controller). */
  runStatus(name: string): RunStatusDoc | undefined {
    return this.store.get<RunStatusDoc>('Run', name);
  }

  /** The pass histogram; the gauges are computed when /metrics is scraped (metricsSnapshot). */
  private observePass(stats: PassStats): void {
    let total = 0;
    for (const [step, ms] of Object.entries(stats.ms)) {
      this.metrics.passDuration.observe({ step }, ms / 1000);
      total += ms;
    }
    this.metrics.passDuration.observe({ step: 'total' }, total / 1000);
  }

  /** What the gauges show, counted from memory when /metrics is scraped (not every pass). */
  private metricsSnapshot(): MetricsSnapshot {
    const byPhase = (kind: 'Run' | 'DAG') => {
      const out = new Map<string, number>();
      for (const n of this.store.names(kind)) {
        const p = this.store.get<RunStatusDoc | DagStatusDoc>(kind, n)!.status.phase;
        out.set(p, (out.get(p) ?? 0) + 1);
      }
      return out;
    };
    const now = this.now();
    const checkpointAge = new Map<string, number>();
    for (const name of this.liveRuns()) {
      const ck = this.runStatus(name)!.status.checkpoint;
      if (ck) checkpointAge.set(name, Math.max(0, (now - Date.parse(ck.createdAt)) / 1000));
    }
    return { queueDepth: this.queue.length, runs: byPhase('Run'), dags: byPhase('DAG'), checkpointAge };
  }

  /** Names of the objects of a kind on the status branch (for the dashboard). */
  statusNames(kind: 'Run' | 'DAG' | 'Backend'): string[] {
    return this.store.names(kind);
  }

  backendStatus(name: string): BackendStatusDoc | undefined {
    return this.store.get<BackendStatusDoc>('Backend', name);
  }

  /** The commits that changed an object's status file, newest first. */
  async statusHistory(
    kind: 'Run' | 'DAG' | 'Backend',
    name: string,
    limit = 50,
  ): Promise<{ oid: string; time: number; message: string }[]> {
    if (!this.store.head) return [];
    const dir = kind === 'Run' ? 'runs' : kind === 'DAG' ? 'dags' : 'backends';
    return (await this.repo.git.log(this.store.ref, { path: `${dir}/${name}.yaml`, limit })).map((c) => ({
      oid: c.oid,
      time: c.time,
      message: c.message,
    }));
  }

  /** The object store of the repo's Storage spec (logs, checkpoints), when one is configured. */
  get objectStore(): ObjectStore | undefined {
    return this.objects;
  }

  /** A DAG's status as last loaded or written. */
  dagStatus(name: string): DagStatusDoc | undefined {
    return this.store.get<DagStatusDoc>('DAG', name);
  }

  /** Ask for a fetch of the specs repo on the next pass (webhook, ref watch). */
  requestFetch(reason: string): void {
    this.logger.debug({ reason }, 'fetch requested');
    this.fetchRequested = true;
    this.wake?.();
  }

  /** Force a reconcile pass for one object (`adv reconcile`). */
  requestReconcile(kind: 'Run', name: string): void {
    this.queue.add(`${kind}/${name}`);
    this.fetchRequested = true;
    this.wake?.();
  }

  /** Loads the status branch; call once before the first pass. */
  async init(): Promise<void> {
    this.controllerId = await loadControllerId(this.opts.dataDir);
    await this.restoreSpecCache();
    try {
      await this.repo.refresh();
    } catch (e) {
      this.remoteReachable = false;
      this.logger.warn({ err: errText(e) }, 'specs repo unreachable at start; working from the data dir');
    }
    await this.loadStatus();
    await this.saveStatusCache();
    for (const name of this.store.names('Run')) this.queue.add(RUN(name));
    for (const name of this.store.names('DAG')) this.queue.add(DAG(name));
  }

  /** One reconcile pass. */
  async pass(): Promise<PassStats> {
    const stats: PassStats = {
      ms: { fetch: 0, load: 0, observe: 0, plan: 0, write: 0, execute: 0 },
      planned: 0,
      commits: 0,
      actions: 0,
      published: true,
      loadedSpecs: false,
    };
    const now = this.now();
    let mark = performance.now();
    const lap = (step: keyof PassStats['ms']) => {
      const t = performance.now();
      stats.ms[step] += t - mark;
      mark = t;
    };

    if (this.fetchRequested || now >= this.nextFetchAt) {
      this.fetchRequested = false;
      this.nextFetchAt = now + (this.opts.fetchIntervalMs ?? 10_000);
      const endFetch = this.metrics.gitFetch.startTimer();
      try {
        await this.repo.refresh();
        endFetch();
        if (!this.remoteReachable) this.logger.info('specs repo reachable again');
        this.remoteReachable = true;
      } catch (e) {
        this.metrics.gitErrors.inc({ op: 'fetch' });
        this.lastFetchError = errText(e);
        if (this.remoteReachable)
          this.logger.warn({ err: errText(e) }, 'cannot fetch the specs repo; reconciling what is known');
        this.remoteReachable = false;
      }
    }
    lap('fetch');
    // Someone else moved the status branch (a fetch adopted the remote's, a second controller):
    // take it as the truth before planning on it.
    if ((await this.repo.git.resolveRef(this.store.ref)) !== this.store.head) {
      this.logger.warn('status branch changed outside this controller; reloading it');
      await this.loadStatus();
      for (const n of this.store.names('Run')) this.queue.add(RUN(n));
    }
    stats.loadedSpecs = await this.syncDesired();
    lap('load');
    if (!this.specHead) return stats;
    if (now >= this.nextResyncAt) {
      this.nextResyncAt = now + (this.opts.resyncIntervalMs ?? 60_000);
      for (const name of new Set([
        ...this.desiredRuns.keys(),
        ...this.invalidRuns.keys(),
        ...this.store.names('Run'),
      ]))
        this.queue.add(RUN(name));
      for (const name of new Set([
        ...this.desiredDags.keys(),
        ...this.invalidDags.keys(),
        ...this.store.names('DAG'),
      ]))
        this.queue.add(DAG(name));
    }

    // Observe: one poll per backend for all its live jobs, at most every pollInterval.
    let observed = new Map<string, ObservedJob>();
    if (now >= this.nextPollAt) {
      this.nextPollAt = now + (this.opts.pollIntervalMs ?? 2000);
      observed = await this.observe();
      for (const name of this.liveRuns()) this.queue.add(RUN(name));
    }
    const heartbeats = await this.readHeartbeats(observed);
    lap('observe');

    // Plan every due key: DAGs first (they decide which child runs exist), then runs; a run that
    // moved makes its DAG due again, and a child the DAG creates is planned in the same pass.
    let due = this.queue.takeDue();
    this.dagPassBase.clear();
    await this.refreshCapacity(due);
    const ctx = await this.planContext();
    const infos = new Map(ctx.backends.map((b) => [b.name, b as BackendInfo]));
    const actions: RunAction[] = [];
    for (let round = 0; round < 4 && due.length; round++) {
      for (const key of due) if (key.startsWith('DAG/')) await this.reconcileDag(splitKey(key)[1]);
      const runs = [...due, ...this.queue.takeDue()].filter((k) => k.startsWith('Run/'));
      for (const key of runs) this.reconcileRun(key, ctx, observed, heartbeats, infos, actions, stats);
      due = this.queue.takeDue();
    }
    for (const key of due) this.queue.add(key);
    this.stageBackendStatus();
    lap('plan');

    // Write-ahead: the pass's status goes out as one commit before any backend is asked.
    stats.commits += await this.commit();
    const published = await this.publish();
    stats.published = published;
    lap('write');
    const runnable = actions.filter((a) => a.type === 'cancel' || published);
    if (runnable.length < actions.length) {
      this.logger.warn(
        { held: actions.length - runnable.length },
        'status not published yet: holding submissions until the remote accepts the write-ahead record',
      );
    }
    stats.actions = runnable.length;
    const before = this.store.head;
    await this.executeAll(runnable);
    lap('execute');
    const more = (await this.commit()) + (this.store.head !== before ? 1 : 0);
    stats.commits += more;
    if (more > 0) await this.publish();
    lap('write');
    this.observePass(stats);
    this.logger.debug({ ...stats }, 'pass done');
    return stats;
  }

  /**
   * Plans one DAG: stages its status, and makes the desired state hold exactly its children
   * (a changed, new or dropped child is planned by the Run planner in this same pass).
   */
  private async reconcileDag(name: string): Promise<void> {
    const current = this.store.get<DagStatusDoc>('DAG', name);
    // Planned more than once in a pass: the commit message still says every node that moved.
    if (!this.dagPassBase.has(name)) this.dagPassBase.set(name, current);
    const since = this.dagPassBase.get(name);
    const ctx: DagPlanContext = {
      now: this.now(),
      specCommit: this.specHead!,
      ...(this.storeTarget && this.objects ? { storeUrl: this.storeTarget.url } : {}),
    };
    const input = {
      name,
      ...(this.desiredDags.has(name) ? { desired: this.desiredDags.get(name)! } : {}),
      ...(this.invalidDags.has(name) ? { invalid: this.invalidDags.get(name)! } : {}),
      ...(current ? { current } : {}),
      ...(since ? { since } : {}),
      child: (run: string) => this.store.get<RunStatusDoc>('Run', run),
      outputReady: (key: string) => (this.outputsReady.has(key) ? true : undefined),
    };
    let plan = planDag(input, ctx);
    if (plan.unknownOutputs.length && this.objects) {
      // Ask the store once for each output not yet seen complete, then plan again.
      const seen = new Map<string, boolean>();
      await Promise.all(
        plan.unknownOutputs.map(async (key) => {
          const [run, output] = key.split('/') as [string, string];
          const m = await readOutputManifest(this.objects!, run, output).catch(() => undefined);
          const ok = m !== undefined && typeof m !== 'string';
          seen.set(key, ok);
          if (ok) this.outputsReady.add(key);
        }),
      );
      plan = planDag({ ...input, outputReady: (key) => seen.get(key) ?? this.outputsReady.has(key) }, ctx);
      if ([...seen.values()].some((ok) => !ok)) this.queue.addAfter(DAG(name), 2000);
    }
    if (plan.doc && plan.doc !== current && plan.summary) {
      this.store.stage('DAG', name, plan.doc, { summary: plan.summary, trailers: [['DAG', name]] });
      this.logger.info({ dag: name, phase: plan.doc.status.phase }, plan.summary);
    }
    // The children now desired, against those before.
    const before = this.dagChildNames.get(name) ?? new Set<string>();
    const now = new Set<string>();
    for (const c of plan.children) {
      now.add(c.name);
      const prev = this.childRuns.get(c.name);
      if (prev === c) continue; // the planner hands back the same object for an unchanged child
      if (
        !prev ||
        prev.generation !== c.generation ||
        JSON.stringify(prev.labels) !== JSON.stringify(c.labels) ||
        prev.file !== c.file
      ) {
        this.childRuns.set(c.name, c);
        this.desiredRuns.set(c.name, c);
        this.queue.add(RUN(c.name));
      }
    }
    for (const gone of before) {
      if (now.has(gone)) continue;
      this.childRuns.delete(gone);
      if (!this.specRuns.has(gone)) this.desiredRuns.delete(gone);
      this.queue.add(RUN(gone));
    }
    if (now.size) this.dagChildNames.set(name, now);
    else this.dagChildNames.delete(name);
  }

  /** Plans one run and stages what changed; its actions join the pass's. */
  private reconcileRun(
    key: string,
    ctx: PlanContext,
    observed: ReadonlyMap<string, ObservedJob>,
    heartbeats: ReadonlyMap<string, Heartbeat>,
    infos: ReadonlyMap<string, BackendInfo>,
    actions: RunAction[],
    stats: PassStats,
  ): void {
    const name = splitKey(key)[1];
    stats.planned++;
    const current = this.store.get<RunStatusDoc>('Run', name);
    const last = current?.status.attempts.at(-1);
    const plan = planRun(
      {
        name,
        ...(this.desiredRuns.has(name) ? { desired: this.desiredRuns.get(name)! } : {}),
        ...(this.invalidRuns.has(name) ? { invalid: this.invalidRuns.get(name)! } : {}),
        ...(current ? { current } : {}),
        ...(last && observed.has(last.jobName) ? { observed: observed.get(last.jobName)! } : {}),
        ...(heartbeats.has(name) ? { heartbeat: heartbeats.get(name)! } : {}),
      },
      ctx,
    );
    // What this pass hands out counts against the backend for the next run planned.
    for (const act of plan.actions) {
      const info = infos.get(act.backend);
      const a = plan.doc?.status.attempts.find((x) => x.n === act.attempt);
      if (
        act.type !== 'submit' ||
        !info ||
        a?.jobId ||
        current?.status.attempts.some((x) => x.n === act.attempt)
      )
        continue;
      info.active = (info.active ?? 0) + 1;
      const spec = plan.doc?.appliedSpec;
      info.reservedGpus =
        (info.reservedGpus ?? 0) + (spec?.resources?.gpus ?? 0) * (spec?.resources?.nodes ?? 1);
    }
    if (plan.doc && plan.doc !== current && plan.summary) {
      const a = plan.doc.status.attempts.at(-1);
      this.store.stage('Run', name, plan.doc, {
        summary: plan.summary,
        trailers: [['Run', name], ...(a ? ([['Attempt', String(a.n)]] as [string, string][]) : [])],
      });
      this.logger.info(
        { run: name, attempt: a?.n, backend: a?.backend, phase: plan.doc.status.phase },
        plan.summary,
      );
    }
    actions.push(...plan.actions);
    if (plan.requeueAfterMs !== undefined) this.queue.addAfter(key, plan.requeueAfterMs);
    if (plan.doc && plan.doc !== current && plan.doc.status.owner) this.queue.add(DAG(plan.doc.status.owner));
    // An attempt that ended frees its place: the runs waiting for one are looked at again now,
    // not at their next timed retry.
    const ended =
      last && isLiveAttempt(last) && !isLiveAttempt(plan.doc?.status.attempts.find((x) => x.n === last.n));
    if (ended) {
      this.streaksDirty = true;
      const cls = plan.doc?.status.attempts.find((x) => x.n === last.n)?.class ?? 'Unknown';
      this.metrics.attemptEnds.inc({ backend: last.backend, class: cls });
      if (cls === EndClass.Preempted) this.metrics.preemptions.inc({ backend: last.backend });
      const info = infos.get(last.backend);
      if (info) info.active = Math.max(0, (info.active ?? 0) - 1);
      for (const waiting of this.waitingForCapacity) this.queue.add(RUN(waiting));
    }
    if (plan.doc?.status.reason === Reason.NoCapacity) this.waitingForCapacity.add(name);
    else this.waitingForCapacity.delete(name);
  }

  /** Runs passes until no run is in flight (every run terminal or stalled), or the timeout. */
  async runUntilIdle(opts: { timeoutMs?: number } = {}): Promise<void> {
    await this.init();
    const deadline = this.now() + (opts.timeoutMs ?? 10 * 60_000);
    for (;;) {
      await this.pass();
      // Nothing known to reconcile: say why instead of finishing "successfully" having done nothing.
      if (!this.specHead) throw this.noSpecsError();
      if (this.idle()) return;
      if (this.now() > deadline) {
        throw new AdvError(
          ErrorCode.Waiting,
          `timed out after ${Math.round((opts.timeoutMs ?? 600_000) / 1000)}s with runs still in flight`,
          {
            hint: 'adv get runs shows which; raise --timeout, or run the controller without --once',
          },
        );
      }
      await this.sleep(Math.min(this.opts.pollIntervalMs ?? 2000, 250));
    }
  }

  private noSpecsError(): AdvError {
    const where = `branch ${this.repo.branch} of ${this.repo.location}`;
    return this.lastFetchError
      ? new AdvError(ErrorCode.GitError, `cannot read ${where}: ${this.lastFetchError}`, {
          hint: 'check the URL, the network, and ADV_GIT_TOKEN; the controller acts only on what it has fetched',
        })
      : new AdvError(ErrorCode.NotFound, `${where} does not exist`, {
          hint: `commit your specs to ${this.repo.branch}, or pass --branch with the branch you use`,
        });
  }

  /** Runs until `stop()`. */
  async run(): Promise<void> {
    await this.init();
    while (!this.stopped) {
      try {
        await this.pass();
        if (!this.specHead && !this.warnedNoSpecs) {
          this.warnedNoSpecs = true;
          this.logger.error({ err: this.noSpecsError().message }, 'nothing to reconcile yet');
        }
      } catch (e) {
        this.logger.error({ err: errText(e) }, 'reconcile pass failed; retrying');
        if (e instanceof StatusConflict) await this.recoverFromConflict();
      }
      if (this.stopped) break;
      if (this.now() - this.statusCacheSavedAt > 5 * 60_000) await this.saveStatusCache();

      // A hint that arrived during the pass (webhook, ref change) is acted on now, not after the sleep.
      if (this.fetchRequested) continue;
      const next = Math.min(
        this.nextFetchAt,
        this.nextPollAt,
        this.queue.nextDueAt() ?? Infinity,
        this.nextResyncAt,
      );
      await this.sleep(Math.max(20, next - this.now()));
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.wake?.();
    if (this.controllerId) await this.saveStatusCache();
    for (const b of this.backends.values()) await b.instance?.close?.();
    await this.repo.close();
  }

  /** True when nothing can change without an outside event. */
  idle(): boolean {
    for (const name of this.store.names('Run')) {
      const st = this.store.get<RunStatusDoc>('Run', name)!.status;
      if (TERMINAL_PHASES.has(st.phase)) continue;
      if (isLiveAttempt(st.attempts.at(-1))) return false;
      if (
        st.reason === 'BackoffWaiting' ||
        st.reason === 'SubmitFailed' ||
        st.reason === 'Preempted' ||
        st.reason === 'Lost'
      )
        return false;
      if (st.phase === 'Scheduling') return false;
    }
    for (const name of this.desiredRuns.keys()) if (!this.store.get('Run', name)) return false;
    for (const name of this.desiredDags.keys()) {
      const d = this.store.get<DagStatusDoc>('DAG', name);
      if (!d) return false;
      // A node waiting for an output manifest to show up in the store: it will.
      if (
        !TERMINAL_PHASES.has(d.status.phase) &&
        Object.values(d.status.nodes).some(
          (n) =>
            n.phase === 'Waiting' && (n.reason === 'WaitingForNeeds' || n.reason === 'WaitingForOutputs'),
        )
      )
        return false;
    }
    return this.store.stagedCount === 0;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((res) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        res();
      }
      this.wake = done;
    });
  }

  private liveRuns(): string[] {
    return this.store
      .names('Run')
      .filter((n) => isLiveAttempt(this.store.get<RunStatusDoc>('Run', n)!.status.attempts.at(-1)));
  }

  /**
   * The parse cache (blob id → validated objects) survives restarts in the data dir, so a restart
   * parses only what changed while the controller was down. Keyed by the schemas and the version,
   * so a new validator never trusts an old verdict.
   */
  private specCacheFile(): string {
    return join(this.opts.dataDir, 'spec-cache.json');
  }

  private specCacheStamp(): string {
    return generationOf({ version: VERSION, schemas: SCHEMAS });
  }

  private async restoreSpecCache(): Promise<void> {
    const entries = await readJsonCache<CachedFileEntry[]>(this.specCacheFile(), this.specCacheStamp());
    if (entries) this.loader.importCache(entries);
  }

  private async saveSpecCache(): Promise<void> {
    await writeJsonCache(this.specCacheFile(), this.specCacheStamp(), this.loader.exportCache());
  }

  /** Status files parsed by blob id, kept across restarts like the spec cache. */
  private statusCacheFile(): string {
    return join(this.opts.dataDir, 'status-cache.json');
  }

  /** (Re)loads the status branch, parsing only status files not seen before. */
  private async loadStatus(): Promise<void> {
    const saved = await readJsonCache<[string, StatusDoc][]>(this.statusCacheFile(), this.specCacheStamp());
    await this.store.load(new Map<string, StatusDoc>([...(saved ?? []), ...this.store.exportCache()]));
  }

  /** Saves the status cache (after loading, on stop, and now and then). */
  async saveStatusCache(): Promise<void> {
    this.statusCacheSavedAt = this.now();
    await writeJsonCache(this.statusCacheFile(), this.specCacheStamp(), this.store.exportCache()).catch(
      (e: unknown) => this.logger.warn({ err: errText(e) }, 'cannot save the status cache'),
    );
  }

  /** Reads the desired state at the watched branch's head if it moved; true when it did. */
  async syncDesired(): Promise<boolean> {
    const head = await this.repo.specHead();
    if (!head || head === this.specHead) return false;
    await this.loadDesired(head);
    return true;
  }

  /** Reads the desired state at `head`; only blobs whose id changed are parsed. */
  private async loadDesired(head: string): Promise<void> {
    const commit = await this.repo.git.readCommit(head);
    const parsedBefore = this.loader.parsedFiles;
    const result = await this.loader.sync(
      new GitTreeSource(this.repo.git, commit.tree, this.listings, this.opts.specsPath ?? ''),
    );
    if (this.loader.parsedFiles !== parsedBefore) {
      await this.saveSpecCache().catch((e: unknown) =>
        this.logger.warn({ err: errText(e) }, 'cannot save the spec cache'),
      );
    }
    this.specHead = head;
    const runs = new Map<string, DesiredRun>();
    const invalid = new Map<string, InvalidRun>();
    const backends = new Map<string, { obj: BackendObject; gen: string }>();
    const dags = new Map<string, DesiredDag>();
    const invalidDags = new Map<string, InvalidDag>();
    for (const o of result.objects) {
      if (o.kind === 'Run') runs.set(o.name, desiredRun(o));
      else if (o.kind === 'DAG') dags.set(o.name, desiredDag(o));
      else if (o.kind === 'Backend') {
        backends.set(o.name, { obj: o.object as BackendObject, gen: generationOf(o.object) });
      } else if (o.kind === 'Storage') {
        await this.useStorage((o.object as Storage).spec);
      }
    }
    if (!result.objects.some((o) => o.kind === 'Storage')) {
      this.storeTarget = undefined;
      this.objects = undefined;
    }
    for (const d of result.invalid) {
      const named = d.name ? { ...d, name: d.name } : undefined;
      if (d.kind === 'DAG' && named && !dags.has(named.name))
        invalidDags.set(named.name, invalidObject(named));
      if (d.kind !== 'Run' || !named || runs.has(named.name)) {
        if (d.diagnostics.length) this.logger.warn({ file: d.file }, formatDiagnostic(d.diagnostics[0]!));
        continue;
      }
      invalid.set(named.name, invalidObject(named));
    }
    // Enqueue what changed.
    const fp = new Map<string, string>();
    for (const [n, r] of runs)
      fp.set(
        n,
        `${r.generation}|${JSON.stringify(r.annotations ?? {})}|${JSON.stringify(r.labels ?? {})}|${r.file}`,
      );
    for (const [n, i] of invalid) fp.set(n, `invalid|${i.file}:${i.line}:${i.message}`);
    for (const n of new Set([...fp.keys(), ...this.fingerprints.keys()]))
      if (fp.get(n) !== this.fingerprints.get(n)) this.queue.add(RUN(n));
    this.fingerprints = fp;
    this.specRuns = runs;
    this.desiredRuns = new Map([...runs, ...this.childRuns]);
    this.invalidRuns = invalid;
    const dfp = new Map<string, string>();
    for (const [n, d] of dags) dfp.set(n, `${d.generation}|${JSON.stringify(d.labels ?? {})}|${d.file}`);
    for (const [n, i] of invalidDags) dfp.set(n, `invalid|${i.file}:${i.line}:${i.message}`);
    for (const n of new Set([...dfp.keys(), ...this.dagFingerprints.keys()]))
      if (dfp.get(n) !== this.dagFingerprints.get(n)) this.queue.add(DAG(n));
    this.dagFingerprints = dfp;
    this.desiredDags = dags;
    this.invalidDags = invalidDags;
    this.backendObjects = backends;
    await this.syncBackends();
    this.logger.info(
      {
        commit: head.slice(0, 12),
        runs: runs.size,
        dags: dags.size,
        invalid: invalid.size + invalidDags.size,
        backends: backends.size,
      },
      'loaded specs',
    );
  }

  private async syncBackends(): Promise<void> {
    const factories = this.opts.backendFactories ?? BACKEND_FACTORIES;
    for (const [name, { obj, gen }] of this.backendObjects) {
      const cur = this.backends.get(name);
      if (cur && cur.gen === gen) continue;
      await cur?.instance?.close?.();
      const factory = factories.find((f) => f.type === obj.spec.type);
      let instance: Backend | undefined;
      let why = unusableBecause(obj.spec, factories);
      if (factory && !why) {
        try {
          instance = factory.create(obj, {
            dataDir: this.opts.dataDir,
            logger: this.logger.child({ backend: name }),
            gitdir: this.repo.git.gitdir,
            now: this.now,
          });
        } catch (e) {
          why = `cannot start adapter: ${errText(e)}`;
        }
      }
      // A suspended backend still polls its live jobs; it only takes no new ones.
      if (!instance && factory && obj.spec.suspend) {
        instance = factory.create(obj, {
          dataDir: this.opts.dataDir,
          logger: this.logger.child({ backend: name }),
          gitdir: this.repo.git.gitdir,
          now: this.now,
        });
      }
      this.backends.set(name, {
        ...(instance ? { instance } : {}),
        gen,
        info: { name, spec: obj.spec, usable: !why, ...(why ? { why } : {}) },
      });
    }
    for (const name of [...this.backends.keys()]) {
      if (!this.backendObjects.has(name)) {
        // Keep the adapter so live jobs can still be observed; it takes no new work.
        const b = this.backends.get(name)!;
        b.info = { ...b.info, usable: false, why: 'the Backend spec was removed' };
      }
    }
  }

  private async planContext(): Promise<PlanContext> {
    const codeRefs = await resolveCodeRefs(
      this.repo.git,
      [...this.desiredRuns.values()].map((r) => r.spec),
      this.repo.mode === 'remote',
    );
    const active = new Map<string, number>();
    for (const name of this.liveRuns()) {
      const b = this.store.get<RunStatusDoc>('Run', name)!.status.attempts.at(-1)!.backend;
      active.set(b, (active.get(b) ?? 0) + 1);
    }
    this.computeFailureStreaks();
    return {
      now: this.now(),
      specCommit: this.specHead!,
      // Fresh copies each pass: the pass counts its own submissions into them.
      backends: [...this.backends.values()]
        .filter((b) => this.backendObjects.has(b.info.name))
        .map((b) => {
          const cap = this.capacities.get(b.info.name)?.capacity;
          const degraded = this.degradedWhy(b.info.name, b.info.spec.degradeAfterFailures);
          return {
            ...b.info,
            active: active.get(b.info.name) ?? 0,
            ...(cap ? { capacity: cap } : {}),
            ...(degraded ? { degraded } : {}),
          };
        }),
      codeRefs,
      controllerId: this.controllerId,
    };
  }

  /**
   * Asks `capacity()` of the backends that can tell, when a due run may be scheduled and asks for
   * GPUs, at most every CAPACITY_TTL_MS per backend, each answer bounded in time. A backend that
   * cannot answer is treated as "cannot tell" (its declared capabilities still apply).
   */
  private async refreshCapacity(due: readonly string[]): Promise<void> {
    const wantsGpus = due.some((key) => {
      const [kind, name] = splitKey(key);
      if (kind !== 'Run') return false;
      const desired = this.desiredRuns.get(name);
      if (!desired || !(desired.spec.resources?.gpus ?? 0)) return false;
      const st = this.store.get<RunStatusDoc>('Run', name)?.status;
      return !st || (!TERMINAL_PHASES.has(st.phase) && !isLiveAttempt(st.attempts.at(-1)));
    });
    if (!wantsGpus) return;
    const now = this.now();
    await Promise.all(
      [...this.backends].map(async ([name, b]) => {
        if (!b.instance?.capacity || !b.info.usable) return;
        if (now - (this.capacities.get(name)?.at ?? -Infinity) < CAPACITY_TTL_MS) return;
        let timer: NodeJS.Timeout | undefined;
        try {
          const capacity = await Promise.race([
            b.instance.capacity(),
            new Promise<never>((_, rej) => {
              timer = setTimeout(() => rej(new Error('capacity() took longer than 10s')), 10_000);
            }),
          ]);
          this.capacities.set(name, { at: now, capacity });
        } catch (e) {
          this.capacities.set(name, { at: now });
          this.logger.warn(
            { backend: name, err: errText(e) },
            'cannot read free capacity; using declared capabilities',
          );
        } finally {
          clearTimeout(timer);
        }
      }),
    );
  }

  /**
   * For every backend, the runs whose latest attempt there failed (user error or infrastructure;
   * not preemption), since its last success: N distinct runs in a row make it degraded.
   * Recomputed only when a run's status changed.
   */
  private computeFailureStreaks(): void {
    if (!this.streaksDirty) return;
    this.streaksDirty = false;
    const ends = new Map<string, FailureStreakEntry[]>();
    for (const name of this.store.names('Run')) {
      for (const a of this.store.get<RunStatusDoc>('Run', name)!.status.attempts) {
        if (!a.finishedAt || !a.class) continue;
        const list = ends.get(a.backend) ?? [];
        list.push({ run: name, attempt: a.n, class: a.class, finishedAt: a.finishedAt });
        ends.set(a.backend, list);
      }
    }
    const streaks = new Map<string, FailureStreakEntry[]>();
    for (const [backend, list] of ends) {
      list.sort((x, y) => (x.finishedAt < y.finishedAt ? -1 : x.finishedAt > y.finishedAt ? 1 : 0));
      const streak: FailureStreakEntry[] = [];
      for (let i = list.length - 1; i >= 0; i--) {
        const e = list[i]!;
        if (e.class === EndClass.Succeeded) break;
        if (e.class !== EndClass.UserError && e.class !== EndClass.Infrastructure) continue;
        if (!streak.some((x) => x.run === e.run)) streak.unshift(e);
      }
      if (streak.length) streaks.set(backend, streak);
    }
    this.failureStreaks = streaks;
  }

  private degradedWhy(backend: string, threshold = DEFAULT_DEGRADE_AFTER): string | undefined {
    const streak = this.failureStreaks.get(backend) ?? [];
    if (streak.length < threshold) return undefined;
    return `${streak.length} runs failed here in a row: ${streak
      .slice(-threshold)
      .map((e) => `${e.run} (${e.class})`)
      .join(', ')}`;
  }

  private async useStorage(spec: StorageSpec): Promise<void> {
    const env = this.opts.secretEnv ?? process.env;
    const target = storeTarget(spec, this.opts.dataDir, env);
    if (target.url === this.storeTarget?.url && this.objects) return;
    this.storeTarget = target;
    try {
      this.objects = await openStore(target.url, { ...env, ...target.env });
    } catch (e) {
      this.objects = undefined;
      this.logger.warn(
        { err: errText(e), store: target.url },
        'cannot open the object store; heartbeats and checkpoints will not be shown',
      );
    }
  }

  /**
   * Heartbeats of current attempts, from the store: for live attempts at most every 5 s each,
   * and once more when an attempt has just ended (its last checkpoint is in the last heartbeat).
   */
  private async readHeartbeats(observed: ReadonlyMap<string, ObservedJob>): Promise<Map<string, Heartbeat>> {
    const out = new Map<string, Heartbeat>();
    const objects = this.objects;
    if (!objects) return out;
    const now = this.now();
    await Promise.all(
      this.liveRuns().map(async (name) => {
        const a = this.runStatus(name)!.status.attempts.at(-1)!;
        const o = observed.get(a.jobName);
        const ended =
          o !== undefined && o.state !== 'Running' && o.state !== 'Pending' && o.state !== 'Unknown';
        if (!ended && now - (this.heartbeatReadAt.get(name) ?? 0) < 5000) return;
        this.heartbeatReadAt.set(name, now);
        try {
          const raw = await objects.get(`runs/${name}/attempts/${a.n}/heartbeat.json`);
          if (raw) out.set(name, JSON.parse(new TextDecoder().decode(raw)) as Heartbeat);
        } catch (e) {
          this.logger.debug({ run: name, err: errText(e) }, 'cannot read heartbeat');
        }
      }),
    );
    return out;
  }

  /** Polls each backend once for every live attempt it holds. */

  private async observe(): Promise<Map<string, ObservedJob>> {
    const byBackend = new Map<string, JobHandle[]>();
    for (const name of this.liveRuns()) {
      const a = this.store.get<RunStatusDoc>('Run', name)!.status.attempts.at(-1)!;
      if (!a.jobId) continue;
      const list = byBackend.get(a.backend) ?? [];
      list.push({ backend: a.backend, jobName: a.jobName, jobId: a.jobId });
      byBackend.set(a.backend, list);
    }
    const out = new Map<string, ObservedJob>();
    const unknown = (handles: JobHandle[], reason: string, message: string) => {
      for (const o of unobservable(handles, reason, message)) out.set(o.jobName, o);
    };
    await Promise.all(
      [...byBackend].map(async ([backend, handles]) => {
        const b = this.backends.get(backend)?.instance;
        if (!b) return unknown(handles, 'NoAdapter', `backend ${backend} is not loaded`);
        try {
          for (const o of await b.poll(handles)) out.set(o.jobName, o);
        } catch (e) {
          unknown(handles, 'PollFailed', errText(e));
        }
      }),
    );
    return out;
  }

  /** Executes a pass's actions: cancels one by one, submits in one batch per backend that can. */
  private async executeAll(actions: readonly RunAction[]): Promise<void> {
    const batches = new Map<string, RunAction[]>();
    const single: RunAction[] = [];
    for (const a of actions) {
      const b = this.backends.get(a.backend)?.instance;
      if (a.type === 'submit' && b?.submitMany)
        batches.set(a.backend, [...(batches.get(a.backend) ?? []), a]);
      else single.push(a);
    }
    // Each backend's results are committed as soon as they are in: a slow backend (an ssh host
    // shipping code for the first time) does not hold back what a fast one has already done, and
    // a controller that dies meanwhile loses less.
    const singles = new Map<string, RunAction[]>();
    for (const a of single) singles.set(a.backend, [...(singles.get(a.backend) ?? []), a]);
    await Promise.all([
      ...[...singles.values()].map(async (group) => {
        await Promise.all(group.map((a) => this.limit(() => this.execute(a))));
        await this.commitSerially();
      }),
      ...[...batches].map(async ([name, group]) => {
        await this.limit(() => this.submitBatch(name, group));
        await this.commitSerially();
      }),
    ]);
  }

  private commitChain: Promise<unknown> = Promise.resolve();

  /** Commits what is staged, one commit at a time (results arrive from backends in parallel). */
  private commitSerially(): Promise<number> {
    const next = this.commitChain.then(() => this.commit());
    this.commitChain = next.catch(() => undefined);
    return next;
  }

  private stageResult(a: RunAction, r: { doc: RunStatusDoc; summary: string }): void {
    if (r.doc.status.owner) this.queue.add(DAG(r.doc.status.owner));
    this.store.stage('Run', a.run, r.doc, {
      summary: r.summary,
      trailers: [
        ['Run', a.run],
        ['Attempt', String(a.attempt)],
      ],
    });
  }

  private submitFailed(a: RunAction, e: unknown): void {
    const current = this.store.get<RunStatusDoc>('Run', a.run);
    if (!current) return;
    if (isAdvError(e) && e.data.unknownOutcome) {
      // The backend may or may not have the job: keep the write-ahead record and ask again
      // (find by name first) once it answers. Never a second attempt for an unknown outcome.
      this.logger.warn(
        { run: a.run, attempt: a.attempt, backend: a.backend, err: errText(e) },
        'submit outcome unknown; will find or submit again',
      );
      this.queue.addRateLimited(RUN(a.run));
      return;
    }
    this.metrics.submitFailures.inc({ backend: a.backend });
    this.logger.warn(
      { run: a.run, attempt: a.attempt, backend: a.backend, err: errText(e) },
      'submit failed',
    );
    this.stageResult(a, recordSubmitFailed(current, a.attempt, errText(e), this.now()));
    this.streaksDirty = true;
    this.queue.addRateLimited(RUN(a.run));
  }

  private submitted(a: RunAction, jobId: string, adopted: boolean): void {
    this.metrics.submissions.inc({ backend: a.backend });
    const current = this.store.get<RunStatusDoc>('Run', a.run);
    if (!current) return;
    if (adopted) this.logger.info({ run: a.run, job: a.jobName, jobId }, 'adopted existing job');
    this.stageResult(a, recordSubmitted(current, a.attempt, jobId, adopted));
    this.queue.forget(RUN(a.run));
  }

  /** What the backend needs to run attempt `a`: spec, argv, code, env with secrets, the store. */
  private jobRequest(a: RunAction): JobRequest {
    const current = this.store.get<RunStatusDoc>('Run', a.run);
    const spec = current?.appliedSpec ?? this.desiredRuns.get(a.run)?.spec;
    const attempt = current?.status.attempts.find((x) => x.n === a.attempt);
    if (!spec || !attempt?.codeCommit) throw new Error('no spec to submit');
    const env: Record<string, string> = { ...(spec.env ?? {}) };
    const missing: string[] = [];
    for (const s of spec.secrets ?? []) {
      const v = (this.opts.secretEnv ?? process.env)[s];
      if (v === undefined) missing.push(s);
      else env[s] = v;
    }
    if (missing.length)
      throw new Error(`secret(s) ${missing.join(', ')} are not set in the controller's environment`);
    if (this.storeTarget?.missing.length) {
      throw new Error(
        `store credential(s) ${this.storeTarget.missing.join(', ')} are not set in the controller's environment`,
      );
    }
    return {
      jobName: a.jobName,
      run: a.run,
      attempt: a.attempt,
      spec,
      argv: argvFor(spec),
      code: { commit: attempt.codeCommit, ...(spec.code?.path ? { path: spec.code.path } : {}) },
      env,
      ...(this.storeTarget ? { store: { url: this.storeTarget.url, env: this.storeTarget.env } } : {}),
    };
  }

  /** One find-or-submit call for every submission of the pass to one backend. */
  private async submitBatch(backendName: string, group: RunAction[]): Promise<void> {
    const backend = this.backends.get(backendName)!.instance!;
    const ready: { a: RunAction; req: JobRequest }[] = [];
    for (const a of group) {
      try {
        ready.push({ a, req: this.jobRequest(a) });
      } catch (e) {
        this.submitFailed(a, e);
      }
    }
    if (!ready.length) return;
    let results: Awaited<ReturnType<NonNullable<Backend['submitMany']>>>;
    try {
      results = await backend.submitMany!(ready.map((r) => r.req));
    } catch (e) {
      for (const { a } of ready) this.submitFailed(a, e);
      return;
    }
    ready.forEach(({ a }, i) => {
      const r = results[i]!;
      if (r instanceof Error) this.submitFailed(a, r);
      else this.submitted(a, r.jobId, Boolean(r.adopted));
    });
  }

  private async execute(a: RunAction): Promise<void> {
    const backend = this.backends.get(a.backend)?.instance;
    if (!this.store.get<RunStatusDoc>('Run', a.run)) return;
    if (a.type === 'cancel') {
      if (!backend) return;
      try {
        const handle =
          (a.jobId ? { backend: a.backend, jobName: a.jobName, jobId: a.jobId } : undefined) ??
          (await backend.find(a.jobName));
        if (handle) await backend.cancel(handle);
        this.logger.info({ run: a.run, job: a.jobName }, 'cancelled');
      } catch (e) {
        this.logger.warn({ run: a.run, err: errText(e) }, 'cancel failed; will retry');
        this.queue.addRateLimited(RUN(a.run));
      }
      return;
    }
    if (!backend) return this.submitFailed(a, new Error(`backend ${a.backend} is not available`));
    try {
      const found = await backend.find(a.jobName);
      if (found) return this.submitted(a, found.jobId, true);
      const handle = await backend.submit(this.jobRequest(a));
      this.submitted(a, handle.jobId, false);
    } catch (e) {
      this.submitFailed(a, e);
    }
  }

  private stageBackendStatus(): void {
    const active = new Map<string, number>();
    for (const name of this.liveRuns()) {
      const b = this.store.get<RunStatusDoc>('Run', name)!.status.attempts.at(-1)!.backend;
      active.set(b, (active.get(b) ?? 0) + 1);
    }
    for (const [name, b] of this.backends) {
      if (!this.backendObjects.has(name)) continue;
      const prev = this.store.get<BackendStatusDoc>('Backend', name);
      const ready = b.info.usable;
      const cond = {
        type: 'Ready',
        status: (ready ? 'True' : 'False') as 'True' | 'False',
        reason: ready ? 'AdapterLoaded' : 'Unavailable',
        message: b.info.why ?? '',
        lastTransitionTime: new Date(this.now()).toISOString(),
      };
      const prevCond = prev?.status.conditions.find((c) => c.type === 'Ready');
      if (prevCond && prevCond.status === cond.status && prevCond.message === cond.message)
        cond.lastTransitionTime = prevCond.lastTransitionTime;
      this.computeFailureStreaks();
      const degraded = this.degradedWhy(name, b.info.spec.degradeAfterFailures);
      const conditions = setCondition(
        [cond],
        {
          type: ConditionType.Degraded,
          status: degraded ? 'True' : 'False',
          reason: degraded ? 'RunsFailing' : 'Healthy',
          message: degraded ? `${degraded}; tried after the other backends until a run succeeds here` : '',
        },
        cond.lastTransitionTime,
      );
      const prevDeg = prev?.status.conditions.find((c) => c.type === ConditionType.Degraded);
      const deg = conditions.find((c) => c.type === ConditionType.Degraded)!;
      if (prevDeg && prevDeg.status === deg.status) deg.lastTransitionTime = prevDeg.lastTransitionTime;
      const streak = this.failureStreaks.get(name);
      const doc: BackendStatusDoc = {
        apiVersion: 'adventuretime.dev/v1alpha1',
        kind: 'BackendStatus',
        metadata: { name },
        status: {
          type: b.info.spec.type,
          conditions,
          activeAttempts: active.get(name) ?? 0,
          ...(streak ? { failureStreak: streak.slice(-10) } : {}),
        },
      };
      const state = !ready ? `NotReady (${b.info.why})` : degraded ? `Degraded (${degraded})` : 'Ready';
      this.store.stage('Backend', name, doc, {
        summary: `backend/${name}: ${state}`,
        trailers: [['Backend', name]],
      });
    }
  }

  private async commit(): Promise<number> {
    try {
      const c = await this.store.commitBatch({ ...(this.specHead ? { specCommit: this.specHead } : {}) });
      return c ? 1 : 0;
    } catch (e) {
      if (e instanceof StatusConflict) {
        this.logger.error(
          { err: e.message },
          'status branch moved under us: reloading it; no action is taken this pass',
        );
        await this.recoverFromConflict();
        throw e;
      }
      throw e;
    }
  }

  /** Publishes status commits; true when the remote has them all (always, locally). */
  private async publish(): Promise<boolean> {
    if (!(await this.repo.unpublished())) return true;
    let r;
    const endPush = this.metrics.gitPush.startTimer();
    try {
      r = await this.repo.publish();
      endPush();
    } catch (e) {
      this.metrics.gitErrors.inc({ op: 'push' });
      this.logger.warn({ err: errText(e) }, 'status push failed');
      return false;
    }
    if (r !== 'ok') this.metrics.gitErrors.inc({ op: 'push' });
    if (r === 'ok') return true;
    if (r === 'unreachable') {
      if (this.remoteReachable) this.logger.warn('specs repo unreachable: status commits are queued locally');
      this.remoteReachable = false;
      return false;
    }
    this.logger.error(
      'status push rejected: another controller writes this status branch; taking its state and holding actions',
    );
    await this.recoverFromConflict();
    return false;
  }

  private async recoverFromConflict(): Promise<void> {
    try {
      await this.repo.adoptRemoteStatus();
    } catch (e) {
      this.logger.warn({ err: errText(e) }, 'cannot fetch the status branch');
    }
    await this.loadStatus();
    for (const n of this.store.names('Run')) this.queue.add(RUN(n));
  }

  /** Records where a running controller can be reached, for `adv reconcile`. */
  async writeRuntimeInfo(info: Record<string, unknown>): Promise<void> {
    await writeFile(
      join(this.opts.dataDir, 'controller.json'),
      JSON.stringify({ pid: process.pid, ...info }, null, 2),
    );
  }
}

/** A stable id for this controller's data dir, made once. */
async function loadControllerId(dataDir: string): Promise<string> {
  const file = join(dataDir, 'controller-id');
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    const id = randomUUID();
    await writeFile(file, id + '\n', { flag: 'wx' }).catch(() => undefined);
    return (await readFile(file, 'utf8')).trim();
  }
}

function splitKey(key: string): [string, string] {
  const i = key.indexOf('/');
  return [key.slice(0, i), key.slice(i + 1)];
}

function errText(e: unknown): string {
  if (isAdvError(e)) return e.message;
  return e instanceof Error ? e.message : String(e);
}
