/**
 * Prometheus metrics (prom-client), one registry per controller, served at `GET /metrics` on the
 * controller's `--http` listener. Names follow Prometheus conventions: `_seconds`, `_total`.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The gauges' values, counted by the controller from memory when Prometheus scrapes. */
export interface MetricsSnapshot {
  queueDepth: number;
  runs: ReadonlyMap<string, number>;
  dags: ReadonlyMap<string, number>;
  checkpointAge: ReadonlyMap<string, number>;
  /** Cost so far of each run with a live attempt and a price. */
  runCost: ReadonlyMap<string, number>;
  /** Errors of the specs repo's last load (`sources/specs.yaml`). */
  specLoadErrors: number;
}

export class ControllerMetrics {
  readonly registry = new Registry();
  /** One snapshot per scrape, shared by the gauges that read it. */
  private snapshot: { at: number; value: MetricsSnapshot } | undefined;
  private readonly take = (): MetricsSnapshot => {
    const now = Date.now();
    if (!this.snapshot || now - this.snapshot.at > 100) this.snapshot = { at: now, value: this.source() };
    return this.snapshot.value;
  };
  readonly passDuration = new Histogram({
    name: 'adventuretime_reconcile_duration_seconds',
    help: 'Duration of one reconcile pass, by step (fetch, load, observe, plan, write, execute, total).',
    labelNames: ['step'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly queueDepth: Gauge = new Gauge({
    name: 'adventuretime_workqueue_depth',
    help: 'Keys waiting in the work queue (due now or later).',
    registers: [this.registry],
    collect: (): void => this.queueDepth.set(this.take().queueDepth),
  });
  readonly runs: Gauge<'phase'> = new Gauge({
    name: 'adventuretime_runs',
    help: 'Runs by phase, as on the status branch.',
    labelNames: ['phase'],
    registers: [this.registry],
    collect: (): void => setAll(this.runs, 'phase', this.take().runs),
  });
  readonly dags: Gauge<'phase'> = new Gauge({
    name: 'adventuretime_dags',
    help: 'DAGs by phase, as on the status branch.',
    labelNames: ['phase'],
    registers: [this.registry],
    collect: (): void => setAll(this.dags, 'phase', this.take().dags),
  });
  readonly specLoadErrors: Gauge = new Gauge({
    name: 'adventuretime_spec_load_errors',
    help: 'Errors that kept spec files or documents from loading at the watched commit (listed in sources/specs.yaml on the status branch); errors of a Run or DAG are on its own status.',
    registers: [this.registry],
    collect: (): void => this.specLoadErrors.set(this.take().specLoadErrors),
  });
  readonly submissions = new Counter({
    name: 'adventuretime_submissions_total',
    help: 'Attempts accepted by a backend (submitted or adopted), by backend.',
    labelNames: ['backend'],
    registers: [this.registry],
  });
  readonly submitFailures = new Counter({
    name: 'adventuretime_submission_failures_total',
    help: 'Submissions a backend refused or that failed, by backend.',
    labelNames: ['backend'],
    registers: [this.registry],
  });
  readonly attemptEnds = new Counter({
    name: 'adventuretime_attempt_ends_total',
    help: 'Attempts that ended, by backend and class (Succeeded, Preempted, Infrastructure, UserError, SetupFailed, Timeout, Cancelled).',
    labelNames: ['backend', 'class'],
    registers: [this.registry],
  });
  readonly preemptions = new Counter({
    name: 'adventuretime_preemptions_total',
    help: 'Attempts ended by preemption, by backend.',
    labelNames: ['backend'],
    registers: [this.registry],
  });
  readonly checkpointAge: Gauge<'run'> = new Gauge({
    name: 'adventuretime_checkpoint_age_seconds',
    help: 'Age of the latest committed checkpoint of each running run.',
    labelNames: ['run'],
    registers: [this.registry],
    collect: (): void => setAll(this.checkpointAge, 'run', this.take().checkpointAge),
  });
  readonly runCost: Gauge<'run'> = new Gauge({
    name: 'adventuretime_run_cost',
    help: "Cost so far of each run with a live attempt: hours × each attempt's price (the unit of the Backends' costPerHour).",
    labelNames: ['run'],
    registers: [this.registry],
    collect: (): void => setAll(this.runCost, 'run', this.take().runCost),
  });
  readonly gitFetch = new Histogram({
    name: 'adventuretime_git_fetch_duration_seconds',
    help: 'Duration of refreshing the specs repo (a fetch for a remote repo).',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly gitPush = new Histogram({
    name: 'adventuretime_git_push_duration_seconds',
    help: 'Duration of publishing status commits (a push for a remote repo).',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly gitErrors = new Counter({
    name: 'adventuretime_git_errors_total',
    help: 'Failed fetches and pushes.',
    labelNames: ['op'],
    registers: [this.registry],
  });

  constructor(
    private readonly source: () => MetricsSnapshot,
    opts: { processMetrics?: boolean } = {},
  ) {
    if (opts.processMetrics) collectDefaultMetrics({ register: this.registry, prefix: 'adventuretime_' });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}

function setAll<L extends string>(g: Gauge<L>, label: L, values: ReadonlyMap<string, number>): void {
  g.reset();
  for (const [k, v] of values) g.set({ [label]: k } as Record<L, string>, v);
}
