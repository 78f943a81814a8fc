/**
 * Notifications, wired into the controller (Flux's Alert and Provider, in our words). Each pass,
 * after planning and before the write-ahead commit, `stage()` derives the events the status holds
 * (notify/events.ts) and records the ones each Alert wants as pending in its outbox
 * (`alerts/<name>.yaml`): in the same commit as the transition that made them.
 *
 * A delivery worker sends the pending records of outboxes as committed, never what is only
 * staged, off the pass (bounded concurrency, per-request timeout): reconciling never waits on a
 * receiver. Outcomes are kept in memory and written to the outbox by the next pass. So:
 *
 * - an event is recorded exactly once (by id), and sent only after that record is committed;
 * - a controller that dies after a send and before the next commit sends it again after restart
 *   (at-least-once in that window, a few seconds); the event id header lets the receiver dedupe;
 * - one that dies before the send sends it after restart, from the outbox it re-reads.
 */
import type { Logger } from 'pino';
import { checkSelector } from '../../selector.js';
import { SecretSources, type SecretSource } from '../../secrets.js';
import { dagEvents, runEvents, sweepEvents, type ObjectEvent } from '../../notify/events.js';
import {
  applyOutcomes,
  DEFAULT_RETRY,
  emptyOutbox,
  recordEvents,
  type RetryPolicy,
  type TryOutcome,
} from '../../notify/outbox.js';
import { buildRequest, DEFAULT_TIMEOUT_SEC, send, type Fetch } from '../../notify/send.js';
import type { Alert } from '../../spec/schema.js';
import type { StatusWriter } from '../../status/writer.js';
import {
  ConditionType,
  setCondition,
  type AlertDelivery,
  type AlertStatusDoc,
  type DagStatusDoc,
  type RunStatusDoc,
  type SweepStatusDoc,
} from '../../status/types.js';
import type { ControllerOptions } from '../lifecycle/options.js';
import type { DesiredState } from '../desired/desired-state.js';
import type { AdapterPorts } from '../observe/ports.js';

/** Requests in flight at once, over every Provider. */
const CONCURRENCY = 4;
/** How often the worker looks whether what it waits on was committed. */
const COMMIT_WATCH_MS = 50;

/** What the worker needs of the controller (it is handed the controller itself). */
interface Host {
  readonly ports: AdapterPorts;
  readonly logger: Logger;
  isLeader(): boolean;
}

export interface NotificationOptions {
  secrets: SecretSource;
  logger: Logger;
  now: () => number;
  fetch?: Fetch;
  retry?: RetryPolicy;
}

export class Notifications {
  /** Outcomes of tries not yet written to the outboxes, by `<alert>\n<event id>`. */
  private readonly outcomes = new Map<string, TryOutcome>();
  private readonly inFlight = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Whether the status may hold outboxes (read once, then kept): a repo without Alerts costs nothing. */
  private outboxesKnown: boolean | undefined;
  /** Events of a status document, by document: the planner replaces a document, never edits it. */
  private readonly eventsOf = new WeakMap<object, ObjectEvent[]>();

  /** The controller's instance (made on its first pass, closed with its ports). */
  static of(host: Host, status: StatusWriter, desired: DesiredState, opts: ControllerOptions): Notifications {
    return host.ports.shared('notifications', () => {
      const secrets = new SecretSources(opts.secrets ?? {}, opts.secretEnv ?? process.env);
      const logger = host.logger.child({ part: 'notifications' });
      return new Notifications(host, status, desired, { secrets, logger, now: opts.now ?? Date.now });
    });
  }

  constructor(
    private readonly host: Pick<Host, 'isLeader'>,
    private readonly status: StatusWriter,
    private readonly desired: Pick<DesiredState, 'notify'>,
    private readonly opts: NotificationOptions,
  ) {}

  /** Writes outcomes, records new events as pending (staged for this pass's commit), wakes the worker. */
  stage(): void {
    const alerts = this.desired.notify.alerts;
    if (!alerts.size && this.outboxesKnown === false) return;
    const known = this.status.names('Alert');
    this.outboxesKnown = alerts.size > 0;
    if (!alerts.size && !known.length) return;
    const nowIso = new Date(this.opts.now()).toISOString();
    const events = alerts.size ? this.deriveEvents() : [];
    for (const name of known)
      if (!alerts.has(name))
        this.status.stage('Alert', name, null, {
          summary: `alert/${name}: deleted`,
          trailers: [['Alert', name]],
        });
    for (const [name, alert] of alerts) {
      const before = this.status.get<AlertStatusDoc>('Alert', name);
      let doc = before ?? emptyOutbox(name, alert.spec.providerRef.name, nowIso);
      doc = applyOutcomes(doc, this.takeOutcomes(name), this.opts.retry ?? DEFAULT_RETRY);
      // The loader refuses an Alert whose selector does not parse: this is only a guard.
      const sel = checkSelector(alert.spec.selector ?? '');
      if (Array.isArray(sel)) doc = recordEvents(doc, alert, sel, events);
      doc = this.withReady(doc, alert, nowIso);
      const added = doc.status.counts.pending - (before?.status.counts.pending ?? 0);
      this.status.stage('Alert', name, doc, {
        summary: `alert/${name}: ${summaryOf(doc, added)}`,
        trailers: [['Alert', name]],
      });
    }
    this.kick();
  }

  /** Whether an outbox change is staged and not committed yet. */
  private outboxStaged(): boolean {
    return this.status.stagedChanges().some((c) => c.kind === 'Alert');
  }

  /** Pending records of the committed outboxes, not in flight and not tried since they were written. */
  private sendable(): { alert: string; id: string; d: AlertDelivery }[] {
    const out: { alert: string; id: string; d: AlertDelivery }[] = [];
    for (const alert of this.status.names('Alert')) {
      const doc = this.status.get<AlertStatusDoc>('Alert', alert);
      for (const [id, d] of Object.entries(doc?.status.deliveries ?? {})) {
        const key = `${alert}\n${id}`;
        if (d.state === 'pending' && !this.inFlight.has(key) && !this.outcomes.has(key))
          out.push({ alert, id, d });
      }
    }
    return out;
  }

  private deriveEvents(): ObjectEvent[] {
    const runs = this.status.names('Run').flatMap((n) => {
      const doc = this.status.get<RunStatusDoc>('Run', n);
      return doc ? [doc] : [];
    });
    const dags = this.status.names('DAG').flatMap((n) => {
      const doc = this.status.get<DagStatusDoc>('DAG', n);
      return doc ? dagEvents(doc) : [];
    });
    const memo = (doc: RunStatusDoc): ObjectEvent[] => {
      let events = this.eventsOf.get(doc);
      if (!events) this.eventsOf.set(doc, (events = runEvents(doc)));
      return events;
    };
    const sweeps = this.status.names('Sweep').flatMap((n) => {
      const doc = this.status.get<SweepStatusDoc>('Sweep', n);
      return doc ? sweepEvents(doc) : [];
    });
    return [...runs.flatMap(memo), ...dags, ...sweeps];
  }

  private takeOutcomes(alert: string): Map<string, TryOutcome> {
    const out = new Map<string, TryOutcome>();
    for (const [key, o] of this.outcomes) {
      const [a, id] = key.split('\n') as [string, string];
      if (a !== alert) continue;
      out.set(id, o);
      this.outcomes.delete(key);
    }
    return out;
  }

  /** `Ready`: False while the Provider is missing or the selector does not parse. */
  private withReady(doc: AlertStatusDoc, alert: Alert, now: string): AlertStatusDoc {
    const provider = alert.spec.providerRef.name;
    const sel = checkSelector(alert.spec.selector ?? '');
    const problem = !this.desired.notify.providers.has(provider)
      ? {
          reason: 'ProviderNotFound',
          message: `no Provider "${provider}": events stay pending until it exists`,
        }
      : !Array.isArray(sel)
        ? { reason: 'SelectorInvalid', message: `spec.selector: ${sel.problem}` }
        : undefined;
    const cond = problem
      ? { type: ConditionType.Ready, status: 'False' as const, ...problem }
      : { type: ConditionType.Ready, status: 'True' as const, reason: 'Ready', message: '' };
    return { ...doc, status: { ...doc.status, conditions: setCondition(doc.status.conditions, cond, now) } };
  }

  /**
   * Sends what is due in the committed outboxes (while a pass has an outbox staged, it waits for
   * the commit), up to `CONCURRENCY` at a time; schedules itself for the next backoff.
   */
  private kick(): void {
    if (this.closed || this.timer) return;
    if (this.outboxStaged()) {
      this.timer = setTimeout(() => this.wake(), COMMIT_WATCH_MS).unref();
      return;
    }
    if (!this.host.isLeader()) return;
    const now = this.opts.now();
    let next = Infinity;
    for (const s of this.sendable()) {
      const due = s.d.nextTryAt ? Date.parse(s.d.nextTryAt) : now;
      if (due > now) next = Math.min(next, due);
      else if (this.inFlight.size < CONCURRENCY) this.deliver(s.alert, s.id, s.d);
    }
    if (next < Infinity) this.timer = setTimeout(() => this.wake(), next - now).unref();
  }

  private wake(): void {
    this.timer = undefined;
    this.kick();
  }

  private deliver(alert: string, id: string, d: AlertDelivery): void {
    const key = `${alert}\n${id}`;
    this.inFlight.add(key);
    void this.tryOnce(alert, id, d)
      .then((outcome) => {
        if (outcome) this.outcomes.set(key, outcome);
      })
      .finally(() => {
        this.inFlight.delete(key);
        this.kick();
      });
  }

  /** One try; undefined when it was not tried (the Provider is missing or suspended). */
  private async tryOnce(alert: string, id: string, d: AlertDelivery): Promise<TryOutcome | undefined> {
    const a = this.desired.notify.alerts.get(alert);
    const provider = a && this.desired.notify.providers.get(a.spec.providerRef.name);
    if (!provider || provider.spec.suspend) return undefined;
    const ref = provider.spec.secretRef?.name;
    const secret = ref === undefined ? undefined : this.opts.secrets.get(ref);
    const at = () => this.opts.now();
    if (ref !== undefined && secret === undefined)
      return { ok: false, at: at(), error: `secret ${ref} is not set (${this.opts.secrets.where})` };
    const req = buildRequest(provider.spec, secret, id, alert, d);
    if ('error' in req) return { ok: false, at: at(), error: req.error, final: req.final };
    const timeoutMs = (provider.spec.timeoutSec ?? DEFAULT_TIMEOUT_SEC) * 1000;
    const failed = await send(req, timeoutMs, secret, this.opts.fetch);
    const log = { alert, id, provider: provider.metadata.name, tries: d.tries + 1 };
    if (!failed) {
      this.opts.logger.info(log, 'notification delivered');
      return { ok: true, at: at() };
    }
    this.opts.logger.warn({ ...log, err: failed.error }, 'notification not delivered');
    return { ok: false, at: at(), ...failed };
  }

  /** Stops sending; what is in flight finishes or is sent again after a restart. */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

function summaryOf(doc: AlertStatusDoc, added: number): string {
  const c = doc.status.counts;
  const parts = [
    `${c.pending} pending`,
    `${c.delivered} delivered`,
    ...(c.failed ? [`${c.failed} failed`] : []),
  ];
  return `${added > 0 ? `${added} new event${added === 1 ? '' : 's'}; ` : ''}${parts.join(', ')}`;
}
