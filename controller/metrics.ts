/**
 * Prometheus metrics (prom-client), one registry per controller, served at `GET /metrics` on the
 * controller's `--http` listener. Names follow Prometheus conventions: `_seconds`, `_total`.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class ControllerMetrics {
  readonly registry = new Registry();
  readonly passDuration = new Histogram({
    name: 'adventuretime_reconcile_duration_seconds',
    help: 'Duration of one reconcile pass, by step (fetch, load, observe, plan, write, execute, total).',
    labelNames: ['step'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly queueDepth = new Gauge({
    name: 'adventuretime_workqueue_depth',
    help: 'Keys waiting in the work queue (due now or later).',
    registers: [this.registry],
  });
  readonly runs = new Gauge({
    name: 'adventuretime_runs',
    help: 'Runs by phase, as on the status branch.',
    labelNames: ['phase'],
    registers: [this.registry],
  });
  readonly dags = new Gauge({
    name: 'adventuretime_dags',
    help: 'DAGs by phase, as on the status branch.',
    labelNames: ['phase'],
    registers: [this.registry],
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
    help: 'Attempts that ended, by backend and class (Succeeded, Preempted, Infrastructure, UserError, Timeout, Cancelled).',
    labelNames: ['backend', 'class'],
    registers: [this.registry],
  });
  readonly preemptions = new Counter({
    name: 'adventuretime_preemptions_total',
    help: 'Attempts ended by preemption, by backend.',
    labelNames: ['backend'],
    registers: [this.registry],
  });
  readonly checkpointAge = new Gauge({
    name: 'adventuretime_checkpoint_age_seconds',
    help: 'Age of the latest committed checkpoint of each running run.',
    labelNames: ['run'],
    registers: [this.registry],
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

  constructor(opts: { processMetrics?: boolean } = {}) {
    if (opts.processMetrics) collectDefaultMetrics({ register: this.registry, prefix: 'adventuretime_' });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
