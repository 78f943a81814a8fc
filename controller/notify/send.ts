/**
 * What a Provider sends for one event, and sending it. Building a request is pure (tested per
 * type); `send` does the one HTTP call, bounded by the Provider's timeout. The secret a Provider
 * names (a Slack URL, an HMAC key, a token) goes into the request only: every error text is
 * redacted of it before it is recorded or logged.
 */
import { createHmac } from 'node:crypto';
import { redactText } from '../../runtime/redact.js';
import type { ProviderSpec } from '../spec/schema.js';
import type { AlertDelivery } from '../status/types.js';
import { VERSION } from '../../runtime/version.js';
import { githubRepoOf } from './rules.js';

export const EVENT_ID_HEADER = 'X-AdventureTime-Event-Id';
export const EVENT_HEADER = 'X-AdventureTime-Event';
export const SIGNATURE_HEADER = 'X-AdventureTime-Signature';
export const DEFAULT_GITHUB_API = 'https://api.github.com';
export const DEFAULT_TIMEOUT_SEC = 10;

export interface OutgoingRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** `sha256=<hex>`: the HMAC-SHA256 of the exact body bytes, keyed by the Provider's secret. */
export function signature(body: string, key: string): string {
  return `sha256=${createHmac('sha256', key).update(body, 'utf8').digest('hex')}`;
}

/** The JSON a `webhook` Provider posts: the event, with its id as the idempotency key. */
export function webhookBody(id: string, alert: string, d: AlertDelivery): string {
  const [kind, ...rest] = d.object.split('/');
  const { state: _s, tries: _t, nextTryAt: _n, lastError: _e, deliveredAt: _d, object: _o, ...fields } = d;
  return JSON.stringify({ id, alert, kind, name: rest.join('/'), ...fields });
}

/** One line for people: `run/foo failed (attempt 2): OOM — exit 137`. */
export function summaryLine(d: AlertDelivery): string {
  const what: Record<string, string> = {
    RunFailed: 'failed',
    RunSucceeded: 'succeeded',
    RunPreempted: 'was preempted',
    RunStalled: 'is stalled: a human must act',
    ProvisioningStuck: 'is stuck provisioning',
    HeartbeatLost: 'lost its heartbeat',
    DagDone: `is done (${d.phase ?? 'finished'})`,
    SweepDone: `is done (${d.phase ?? 'finished'})`,
  };
  const attempt = d.attempt ? ` (attempt ${d.attempt})` : '';
  const why = [d.reason, d.message].filter(Boolean).join(': ');
  return `${d.object} ${what[d.event] ?? d.event}${attempt}${why ? ` — ${why}` : ''}`;
}

/** A GitHub commit status state for an event. */
export function githubState(d: AlertDelivery): 'success' | 'failure' | 'pending' {
  if (d.event === 'RunSucceeded') return 'success';
  if (d.event === 'RunFailed') return 'failure';
  if (d.event === 'DagDone' || d.event === 'SweepDone')
    return d.phase === 'Succeeded' ? 'success' : 'failure';
  return 'pending';
}

/**
 * The request a Provider makes for one delivery, or why it cannot make one (a problem that no
 * retry fixes is `final`).
 */
export function buildRequest(
  spec: ProviderSpec,
  secret: string | undefined,
  id: string,
  alert: string,
  d: AlertDelivery,
): OutgoingRequest | { error: string; final: boolean } {
  const base = { 'User-Agent': `adventuretime/${VERSION}`, 'Content-Type': 'application/json' };
  const ids = { [EVENT_ID_HEADER]: id, [EVENT_HEADER]: d.event };
  if (spec.type === 'webhook') {
    const body = webhookBody(id, alert, d);
    const headers: Record<string, string> = { ...base, ...ids };
    if (secret !== undefined) headers[SIGNATURE_HEADER] = signature(body, secret);
    return { url: spec.address!, headers, body };
  }
  if (spec.type === 'slack') {
    const url = secret ?? spec.address;
    if (!url) return { error: 'no webhook URL (spec.secretRef or spec.address)', final: true };
    return {
      url,
      headers: { ...base, ...ids },
      body: JSON.stringify({ text: `[adventuretime] ${summaryLine(d)}` }),
    };
  }
  const repo = spec.address ? githubRepoOf(spec.address) : undefined;
  if (!repo) return { error: 'spec.address names no GitHub repository', final: true };
  if (!d.specCommit) return { error: `${d.object} has no spec commit to set a status on`, final: true };
  if (secret === undefined) return { error: 'no token (spec.secretRef)', final: true };
  const api = (spec.apiUrl ?? DEFAULT_GITHUB_API).replace(/\/+$/, '');
  const [kind, ...rest] = d.object.split('/');
  const context = `adventuretime/${kind === 'run' ? '' : `${kind}/`}${rest.join('/')}`;
  return {
    url: `${api}/repos/${repo.owner}/${repo.repo}/statuses/${d.specCommit}`,
    headers: {
      ...base,
      ...ids,
      Accept: 'application/vnd.github+json',
      Authorization: `Bearer ${secret}`,
      'X-GitHub-Api-Version': '2022-11-28',
    },
    body: JSON.stringify({ state: githubState(d), context, description: summaryLine(d).slice(0, 140) }),
  };
}

export type Fetch = typeof fetch;

/**
 * Sends one request; resolves to undefined on a 2xx, else to what went wrong (secret redacted).
 * A 4xx other than 408/429 is final: the receiver refuses this request, and would again.
 */
export async function send(
  req: OutgoingRequest,
  timeoutMs: number,
  secret: string | undefined,
  fetchImpl: Fetch = fetch,
): Promise<{ error: string; final: boolean } | undefined> {
  const clean = (s: string) => (secret ? redactText(s, [secret]) : s);
  try {
    const res = await fetchImpl(req.url, {
      method: 'POST',
      headers: req.headers,
      body: req.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.arrayBuffer().catch(() => undefined);
    if (res.status >= 200 && res.status < 300) return undefined;
    const final = res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429;
    return { error: clean(`HTTP ${res.status} ${res.statusText}`.trim()), final };
  } catch (e) {
    const err = e as Error & { cause?: { code?: string; message?: string } };
    const why = err.name === 'TimeoutError' ? `no answer within ${timeoutMs / 1000}s` : err.message;
    const cause = err.cause?.code ?? err.cause?.message;
    return { error: clean(cause ? `${why} (${cause})` : why), final: false };
  }
}
