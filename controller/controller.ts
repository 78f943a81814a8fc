/**
 * The controller: a level-triggered reconcile loop, Kubernetes style. It composes parts that each
 * own one kind of state, in `loop/` by the pass's steps (see docs/architecture.md): `desired/` what
 * the watched branch asks for (`DesiredState`, `VerifiedHead` with trusted signers); `observe/` what
 * the backends and workers say (`Observer`, `BackendAdapters`, `BackendView` and backend health);
 * `plan/` the pure planners via `reconcileRun` / `reconcileOwner`; `execute/` actions → results after
 * the write-ahead commit (`Executor`); `status/` the status branch, its publication and what is read
 * of it (`RepoSync`, `StatusWriter`); `lifecycle/` the lease, the data dir lock, options.
 *
 * One pass reads top to bottom in `pass()`: fetch, load, observe, plan, write-ahead, execute, write.
 */
import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import pino, { type Logger } from 'pino';
import { defaultSshTransport, gitCodeExporter } from './backends/code.js';
import { BACKENDS } from './backends/registry.js';
import { codeReposFor, type CodeRepos } from './git/code-repos.js';
import { SpecsRepo } from './git/specs-repo.js';
import { BackendAdapters, contextsOf } from './loop/observe/adapters.js';
import { AdapterPorts } from './loop/observe/ports.js';
import { DesiredState, dagKey, everyKey, runKey, splitKey } from './loop/desired/desired-state.js';
import { Executor } from './loop/execute/executor.js';
import { BackendView } from './loop/observe/backend-view.js';
import { loadControllerId, writeRuntimeInfo } from './loop/lifecycle/controller-id.js';
import { JobInputs } from './loop/execute/job-inputs.js';
import { SecretSources, type SecretSource } from './secrets.js';
import { errText, liveAttemptsOf, Observer } from './loop/observe/observer.js';
import type { LiveAttempt, Observation } from './loop/observe/observer.js';
import { metricsSnapshot, observePass } from './loop/status/pass-metrics.js';
import { PassScopes, isOwnerKey, reconcileOwner } from './loop/plan/reconcilers.js';
import { reconcileRun, wantsCapacity } from './loop/plan/reconcilers.js';
import { requeue } from './loop/plan/requeue.js';
import { Sleeper } from './loop/lifecycle/sleeper.js';
import { RepoSync } from './loop/status/repo-sync.js';
import { StatusView } from './loop/status/status-view.js';
import { withDataDirLock, type DataDirLock } from './loop/lifecycle/data-dir-lock.js';
import { Leadership } from './loop/lifecycle/leadership.js';
import { stageSourceStatus } from './loop/desired/source-status.js';
import { VerifiedHead } from './loop/desired/verified-head.js';
import { DEFAULT_IDENTITY, emptyPassStats } from './loop/lifecycle/options.js';
import type { ControllerOptions, PassStats } from './loop/lifecycle/options.js';
import { ControllerMetrics } from './metrics.js';
import { WorkQueue } from './reconcile/queue.js';
import type { RunAction } from './reconcile/run-plan.js';
import { StatusWriter } from './status/writer.js';
import { isIdle, onceTimedOut } from './loop/lifecycle/idle.js';
import { Notifications } from './loop/status/notifications.js';
import type { RunStatusDoc } from './status/types.js';

export type { ControllerOptions, PassStats } from './loop/lifecycle/options.js';

/** How long `stop()` lets the pass under way finish. */
const STOP_PASS_WAIT_MS = 5_000;

export class Controller {
  readonly queue: WorkQueue;
  readonly dataDir: string;
  readonly logger: Logger;
  readonly metrics: ControllerMetrics;
  /** Read-only status for the dashboard. */
  readonly view: StatusView;
  /** Routes and shared objects lent to adapters (the pull agent's API is mounted here). */
  readonly ports = new AdapterPorts();
  private readonly now: () => number;
  private readonly inputs: JobInputs;
  private readonly desired: DesiredState;
  private readonly status: StatusWriter;
  private readonly live: () => LiveAttempt[];
  private readonly sync: RepoSync;
  private readonly gate: VerifiedHead;
  readonly adapters: BackendAdapters;
  private readonly observer: Observer;
  private readonly executor: Executor;
  private readonly backendView: BackendView;
  private readonly scopes: PassScopes;
  private controllerId = '';
  private warnedNoSpecs = false;
  private nextFetchAt = 0;
  private nextResyncAt = 0;
  private fetchRequested = true;
  private readonly sleeper = new Sleeper();
  private stopped = false;
  private stopping: Promise<void> | undefined;
  /** The loop's current pass and sleep (what `stop()` lets finish). */
  private busy: Promise<void> = Promise.resolve();
  /** Whether this controller may write the status branch (the lease), or stands by. */
  private readonly leadership: Leadership;
  private readonly codeRepos: CodeRepos;

  private constructor(
    readonly repo: SpecsRepo,
    private readonly opts: ControllerOptions,
    private readonly lock: DataDirLock,
    secrets: SecretSource,
  ) {
    this.dataDir = opts.dataDir;
    this.now = opts.now ?? Date.now;
    this.logger = opts.logger ?? pino({ level: 'silent' });
    this.inputs = new JobInputs(opts.secretEnv ?? process.env, secrets, opts.dataDir, this.logger);
    this.queue = new WorkQueue({ now: this.now });
    // The gauges are counted when /metrics is scraped, not every pass.
    const gauges = () => metricsSnapshot(this.status, this.live(), this.queue.length, this.now());
    this.metrics = new ControllerMetrics(gauges, { processMetrics: opts.processMetrics ?? false });
    const descriptors = opts.backends ?? BACKENDS;
    this.desired = new DesiredState(repo.git, { ...opts, descriptors, logger: this.logger, mode: repo.mode });
    this.status = new StatusWriter(repo.git, repo.statusRef, opts.identity ?? DEFAULT_IDENTITY, this.now);
    this.live = liveAttemptsOf(this.status);
    const { logger, metrics, now } = this;
    const onReload = () => this.status.names('Run').forEach((n) => this.queue.add(runKey(n)));
    this.sync = new RepoSync(repo, this.status, {
      dataDir: opts.dataDir,
      cacheStamp: () => this.desired.cacheStamp(),
      metrics,
      logger,
      now,
      onReload,
    });
    this.gate = new VerifiedHead(repo, this.sync, { ...opts, logger, now });
    const ssh = opts.sshTransport ?? defaultSshTransport;
    const onChange = (run: string) => this.queue.add(runKey(run));
    this.codeRepos = codeReposFor({ ...opts, secrets, logger, now, onChange });
    const code = gitCodeExporter(repo.git, this.codeRepos);
    const shared = { dataDir: opts.dataDir, logger, now, code, secrets, ssh };
    const reqFor = (b: string, job: string) => this.inputs.requestForJob(b, job, this.status, this.desired);
    const contexts = contextsOf({ ...shared, ...this.ports.lent(() => this.inputs.objects) }, reqFor);
    this.adapters = new BackendAdapters(descriptors, contexts, logger);
    this.observer = new Observer(this.adapters, logger, now, opts.pollIntervalMs ?? 2000);
    this.leadership = new Leadership(repo, this.sync, {
      durationMs: opts.leaseDurationMs ?? 30_000,
      author: opts.identity ?? DEFAULT_IDENTITY,
      logger,
    });
    this.view = new StatusView(this.status, repo.git, () => this.inputs.objects);
    this.backendView = new BackendView(this.adapters, this.observer, this.status);
    this.executor = new Executor({
      adapters: this.adapters,
      status: this.status,
      jobRequest: (a) => this.inputs.jobRequest(a, this.status, this.desired),
      prepare: (a) => this.inputs.prepareFork(a, this.status, this.desired),
      commit: () => this.sync.commitSerially(this.desired.head),
      hint: (key) => this.queue.add(key),
      ...{ metrics, logger, now, concurrency: opts.concurrency ?? 8 },
    });
    this.scopes = new PassScopes({
      ...{ desired: this.desired, status: this.status, git: repo.git, remote: repo.mode === 'remote' },
      codeRepos: this.codeRepos,
      backends: () => this.backendView.infos(this.live()),
      ...{
        inputs: this.inputs,
        controllerId: () => this.controllerId,
        hint: (key: string) => this.queue.add(key),
      },
      ...{ metrics, logger, now },
    });
  }

  static async create(opts: ControllerOptions): Promise<Controller> {
    // Bad secret sources are refused before anything is created.
    const secrets = new SecretSources(opts.secrets ?? {}, opts.secretEnv ?? process.env);
    const dataDir = resolve(opts.dataDir);
    await mkdir(dataDir, { recursive: true });
    // One controller per data dir (its id, its local job dirs): the second refuses to start.
    return withDataDirLock(dataDir, opts.lockWaitMs, async (lock) => {
      const repo = await SpecsRepo.open({ ...opts, dataDir });
      return new Controller(repo, { ...opts, dataDir }, lock, secrets);
    });
  }

  /** Loads the status branch; call once before the first pass. */
  async init(): Promise<void> {
    this.controllerId = await loadControllerId(this.opts.dataDir);
    this.leadership.start(this.controllerId);
    await this.desired.restoreCache();
    await this.fetch('start');
    await this.sync.load();
    await this.sync.saveCache();
    for (const name of this.status.names('Run')) this.queue.add(runKey(name));
    for (const name of this.status.names('DAG')) this.queue.add(dagKey(name));
  }

  /** One reconcile pass: fetch, load, observe, plan, write-ahead, execute, write. */
  async pass(): Promise<PassStats> {
    const stats = emptyPassStats();
    let mark = performance.now();
    const lap = (step: keyof PassStats['ms']) => {
      stats.ms[step] += performance.now() - mark;
      mark = performance.now();
    };
    const now = this.now();
    if (this.fetchRequested || now >= this.nextFetchAt) await this.fetch('pass');
    lap('fetch');
    const lead = await this.leadership.lead();
    if (lead.acquired) this.nextResyncAt = 0; // a new holder looks at everything again
    stats.leader = lead.held;
    await this.sync.reloadIfMoved({ followRemote: !stats.leader });
    // Standing by: status is read (dashboard, metrics), nothing is planned, written or submitted.
    if (!stats.leader) return stats;
    stats.loadedSpecs = await this.syncDesired();
    lap('load');
    if (!this.desired.head) return stats;
    stageSourceStatus(this.status, this.desired.loadErrors, this.desired.head, now);
    this.resyncIfDue(now);
    const live = this.live();
    const observation = await this.observer.observe(live, this.inputs.objects, (run) =>
      this.queue.add(runKey(run)),
    );
    lap('observe');
    const actions = await this.plan(observation, stats);
    lap('plan');
    Notifications.of(this, this.status, this.desired, this.opts).stage();
    // Write-ahead: the pass's status goes out as one commit before any backend is asked.
    stats.commits += await this.sync.commit(this.desired.head);
    stats.published = await this.sync.publish();
    lap('write');
    // The lease may have lapsed while planning (a long pause): then act on nothing planned.
    const runnable = this.leadership.held
      ? actions.filter((a) => a.type === 'cancel' || stats.published)
      : [];
    if (runnable.length < actions.length)
      this.logger.warn(
        { held: actions.length - runnable.length },
        'status not published yet: holding submissions until the remote accepts the write-ahead record',
      );
    stats.actions = runnable.length;
    const before = this.status.head;
    for (const [key, outcome] of await this.executor.executeAll(runnable)) {
      if (outcome instanceof Error) this.backendView.attemptsChanged();
      requeue(this.queue, key, outcome);
    }
    lap('execute');
    const more = (await this.sync.commit(this.desired.head)) + (this.status.head !== before ? 1 : 0);
    stats.commits += more;
    if (more > 0) await this.sync.publish();
    lap('write');
    observePass(this.metrics, stats.ms);
    this.logger.debug({ ...stats }, 'pass done');
    return stats;
  }

  private async fetch(when: 'start' | 'pass'): Promise<void> {
    this.fetchRequested = false;
    this.nextFetchAt = this.now() + (this.opts.fetchIntervalMs ?? 10_000);
    await this.sync.fetch(when);
  }

  /** Reads the desired state at the watched branch's head if it moved; true when it did. */
  async syncDesired(): Promise<boolean> {
    const head = await this.gate.select(await this.repo.specHead());
    if (!head || head === this.desired.head) return false;
    for (const key of await this.desired.load(head)) this.queue.add(key);
    await this.inputs.useStorage(this.desired.storage);
    await this.adapters.sync(this.desired.backends);
    return true;
  }

  /** Every known key, every resync interval: a missed event is never missed for long. */
  private resyncIfDue(now: number): void {
    if (now < this.nextResyncAt) return;
    this.nextResyncAt = now + (this.opts.resyncIntervalMs ?? 60_000);
    for (const key of everyKey(this.desired, this.status)) this.queue.add(key);
  }

  /**
   * Plans every due key: DAGs first (they decide which child runs exist), then runs; a run that
   * moved makes its DAG due again, and a child the DAG creates is planned in the same pass.
   */
  private async plan(observation: Observation, stats: PassStats): Promise<RunAction[]> {
    let due = this.queue.takeDue();
    if (due.some((key) => wantsCapacity(key, this.desired, this.status)))
      await this.observer.refreshCapacity();
    const scope = await this.scopes.next(observation);
    const actions: RunAction[] = [];
    for (let round = 0; round < 4 && due.length; round++) {
      for (const key of due.filter(isOwnerKey)) requeue(this.queue, key, await reconcileOwner(scope, key));
      for (const key of [...due, ...this.queue.takeDue()].filter((k) => k.startsWith('Run/'))) {
        stats.planned++;
        const r = reconcileRun(scope, splitKey(key)[1]);
        if (r.attemptEnded) this.backendView.attemptsChanged();
        actions.push(...r.actions);
        requeue(this.queue, key, r.result);
      }
      due = this.queue.takeDue();
    }
    for (const key of due) this.queue.add(key);
    this.backendView.stageStatus(this.live(), this.now());
    return actions;
  }

  /** Runs passes until no run is in flight (every run terminal or stalled), or the timeout. */
  async runUntilIdle(opts: { timeoutMs?: number } = {}): Promise<void> {
    await this.init();
    const timeoutMs = opts.timeoutMs ?? 10 * 60_000;
    const deadline = this.now() + timeoutMs;
    for (;;) {
      const { leader } = await this.pass();
      // Nothing known to reconcile: say why instead of finishing "successfully" having done nothing.
      if (leader && !this.desired.head) throw this.gate.noSpecsError();
      if (leader && this.idle()) return;
      if (this.now() > deadline) throw onceTimedOut(timeoutMs, leader, this.leadership.branch);
      const wait = leader ? 250 : this.leadership.dueInMs();
      await this.sleeper.sleep(Math.max(20, Math.min(this.opts.pollIntervalMs ?? 2000, wait)));
    }
  }

  /** Runs until `stop()`. */
  async run(): Promise<void> {
    await this.init();
    while (!this.stopped) {
      this.busy = this.loopOnce();
      await this.busy;
    }
  }

  /** One pass of `run()`, then its sleep until the next thing is due. */
  private async loopOnce(): Promise<void> {
    try {
      const { leader } = await this.pass();
      if (leader && !this.desired.head && !this.warnedNoSpecs) {
        this.warnedNoSpecs = true;
        this.logger.error({ err: this.gate.noSpecsError().message }, 'nothing to reconcile yet');
      }
    } catch (e) {
      // A status conflict has already reloaded the branch (RepoSync): plan again from it.
      this.logger.error({ err: errText(e) }, 'reconcile pass failed; retrying');
    }
    if (this.stopped) return;
    await this.sync.saveCacheIfOlder(5 * 60_000);
    // A hint that arrived during the pass (webhook, ref change) is acted on now, not after the sleep.
    if (this.fetchRequested) return;
    // Standing by, only the fetch and the lease have anything to do.
    const due = [this.nextFetchAt, this.now() + this.leadership.dueInMs()];
    if (this.leadership.held)
      due.push(this.observer.nextPollAt, this.queue.nextDueAt() ?? Infinity, this.nextResyncAt);
    await this.sleeper.sleep(Math.max(20, Math.min(...due) - this.now()));
  }

  /**
   * Stops reconciling first: no pass starts, agents waiting for a claim are answered at once and
   * none is handed out, no lease expires. The pass under way gets a few seconds to finish — past
   * that, stopping is a crash the write-ahead record already covers. Then the lease is handed back.
   */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.stopped = true;
      this.sleeper.wake();
      await this.ports.close();
      await Promise.race([this.busy, new Promise((r) => setTimeout(r, STOP_PASS_WAIT_MS).unref())]);
      if (this.controllerId) await Promise.all([this.sync.saveCache(), this.desired.saveCache()]);
      await this.leadership.stop();
      await this.adapters.close();
      await this.codeRepos.close();
      await this.repo.close();
      this.lock.release();
    })();
    return this.stopping;
  }

  /** Whether this controller holds the status branch lease (acts), or stands by. */
  isLeader(): boolean {
    return this.leadership.held;
  }

  /** True when nothing can change without an outside event. */
  idle(): boolean {
    return isIdle(this.status, this.desired);
  }

  /** Ask for a fetch of the specs repo on the next pass (webhook, ref watch). */
  requestFetch(reason: string): void {
    this.logger.debug({ reason }, 'fetch requested');
    this.fetchRequested = true;
    this.sleeper.wake();
  }

  /** Force a reconcile pass for one object (`adv reconcile`). */
  requestReconcile(kind: 'Run', name: string): void {
    this.queue.add(`${kind}/${name}`);
    this.requestFetch('reconcile requested');
  }

  /** Whether a run of that name is desired (a DAG's children included) or has a status. */
  knowsRun(name: string): boolean {
    return this.desired.names('Run').includes(name) || this.status.get('Run', name) !== undefined;
  }

  /** Saves the parsed-status cache (benchmarks call it to measure a warm restart). */
  saveStatusCache(): Promise<void> {
    return this.sync.saveCache();
  }

  /** Records where a running controller can be reached, for `adv reconcile`. */
  writeRuntimeInfo(info: Record<string, unknown>): Promise<void> {
    return writeRuntimeInfo(this.opts.dataDir, info);
  }

  /** A run's status as last loaded or written (tests, embedded use; the dashboard reads `view`). */
  runStatus(name: string): RunStatusDoc | undefined {
    return this.view.runStatus(name);
  }
}
