/**
 * The Vast.ai REST API as a small typed client for the vastai adapter, on Node's global `fetch`.
 * What it sends is what the official CLI sends (vast-ai/vast-cli `vastai/api/client.py`,
 * `offers.py`, `instances.py`): `Authorization: Bearer <key>`, paths under `/api/v0` unless they
 * name their version (`/api/v1/instances/`), query values JSON-encoded, JSON bodies.
 *
 * What the API answers, and so what this client guards against (docs.vast.ai API reference and
 * "Rate Limits and Errors", checked against test/helpers/cloud/fake-vast-api.ts):
 * - Errors are `{"success": false, "error": "invalid_args", "msg": "…"}`, but some endpoints omit
 *   `success` or `error`, or say `message`; a 200 can carry `success: false` too (the deprecated v0
 *   list answers `{"success":false,"error":"deprecated_endpoint",…}`, which an SDK once read as "no
 *   instances" — SkyPilot #10517). So any body that is not the JSON expected, any `success: false`
 *   and any list without its `instances` array is an error here, never an empty result.
 * - Rate limits are a minimum interval per endpoint and caller; a 429 says `API requests too
 *   frequent endpoint threshold=4.5` (plain text or JSON) and carries no `Retry-After` today. The
 *   retry waits at least that threshold, honours `Retry-After` should one come, and otherwise backs
 *   off exponentially with full jitter, a bounded number of times.
 * - A taken offer is `no_such_ask`: HTTP 410 `error: "no_such_ask"`, or 404 `error: "invalid_args"`
 *   with `no_such_ask` in `msg` (third-party clients also saw 400): matched on the words, not the status.
 * - 401 is `{"success":false,"error":"auth_error","msg":"Invalid user key"}`.
 *
 * A create (`PUT /asks/{id}/`) is not idempotent: renting twice rents two machines. It is retried
 * only where the request cannot have been acted on (429, a refused connection); after a 5xx, a
 * timeout or a connection dropped mid-request the error says `ambiguous`, and the caller looks for
 * the instance by its label before renting again.
 *
 * The API key goes into the Authorization header and nowhere else: not in URLs, messages, error
 * data or log lines (and any text the API echoes back is scrubbed of it).
 */
import { setTimeout as sleepMs } from 'node:timers/promises';
import {
  VastActualStatus,
  vastInstanceEnv,
  vastSshEndpoint,
  type CreateInstanceRequest,
  type VastInstance,
  type VastOffer,
  type VastPortBinding,
} from './api-types.js';
import {
  OfferTakenError,
  VastApiError,
  VastAuthError,
  VastError,
  VastFailure,
  VastUnreachableError,
  type VastErrorData,
} from './errors.js';
import { offerQueryBody, type OfferQuery } from './query.js';

// What importers of the client found here before the split.
export {
  OfferTakenError,
  VastActualStatus,
  VastApiError,
  VastAuthError,
  VastError,
  VastFailure,
  VastUnreachableError,
  vastInstanceEnv,
  vastSshEndpoint,
  type CreateInstanceRequest,
  type VastErrorData,
  type VastInstance,
  type VastOffer,
  type VastPortBinding,
};

export const VAST_API_URL = 'https://console.vast.ai';

/** The log lines the client writes (a pino logger fits). */
export interface VastLogger {
  debug(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface VastClientOptions {
  /** Default `https://console.vast.ai`; the caller passes `VAST_URL` here if it honours it. */
  apiUrl?: string;
  apiKey: string;
  logger?: VastLogger;
  /** Tries per call, the first included. Default 6. */
  retries?: number;
  /** The first backoff ceiling; it doubles each try. Default 500 ms. */
  baseDelayMs?: number;
  /** No wait is longer (a `Retry-After` included). Default 30 s. */
  maxDelayMs?: number;
  /** One request's limit. Default 60 s. */
  timeoutMs?: number;
  sleep?: (ms: number) => Promise<void>;
  /** For `Retry-After` dates. Default `Date.now`. */
  now?: () => number;
  /** In [0, 1): the jitter. Default `Math.random`. */
  random?: () => number;
  fetch?: typeof fetch;
}

interface CallSpec {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  query?: Record<string, unknown>;
  body?: unknown;
  /** May be sent again after an answer that does not say it was refused (a 5xx, a drop). */
  idempotent: boolean;
}

/** A parsed answer: a 2xx or a 4xx that is not about auth, with its JSON body. */
interface Answer {
  status: number;
  json: unknown;
}

/** A try that got no usable answer: retried, or given up on. */
interface Failure {
  /** In words, for logs and messages: `HTTP 429 API requests too frequent…`, `ECONNREFUSED`. */
  failure: string;
  status?: number;
  /** Wait at least this long before the next try (a 429's threshold); exactly this with `exact`. */
  waitMs: number;
  /** `Retry-After` said how long: no jitter on top. */
  exact?: boolean;
  /** The API cannot have acted on the request (a 429, no connection made). */
  refused: boolean;
  err?: unknown;
}

/** What one try came to. */
type Try = { answer: Answer } | Failure;

const MAX_PAGES = 10_000;
const EXCERPT = 200;
const DEFAULT_RUNTYPE = 'ssh_direc ssh_proxy';

/** The Vast.ai REST API for one API key. */
export class VastClient {
  private readonly apiUrl: string;
  private readonly apiKey: string;
  private readonly tries: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly timeoutMs: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly fetchImpl: typeof fetch;
  private readonly logger?: VastLogger;

  constructor(opts: VastClientOptions) {
    if (!opts.apiKey) throw new TypeError('VastClient needs an API key');
    this.apiUrl = (opts.apiUrl ?? VAST_API_URL).replace(/\/+$/, '');
    this.apiKey = opts.apiKey;
    this.tries = Math.max(1, opts.retries ?? 6);
    this.baseDelayMs = opts.baseDelayMs ?? 500;
    this.maxDelayMs = opts.maxDelayMs ?? 30_000;
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    this.sleep = opts.sleep ?? ((ms) => sleepMs(ms).then(() => undefined));
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
    this.fetchImpl = opts.fetch ?? fetch;
    this.logger = opts.logger;
  }

  /** Offers matching `query` (see `offerQuery`), in the order asked for. */
  async searchOffers(query: OfferQuery): Promise<VastOffer[]> {
    const spec: CallSpec = {
      method: 'POST',
      path: '/bundles/',
      body: offerQueryBody(query),
      idempotent: true,
    };
    const json = this.expectOk(spec, await this.call(spec));
    const offers = field(json, 'offers');
    if (!Array.isArray(offers)) throw this.missing(spec, json, 'offers');
    return offers as VastOffer[];
  }

  /**
   * Rents offer `offerId`. Throws OfferTakenError when it is gone, VastApiError (`ambiguous` when
   * the rental may still have been made) or VastUnreachableError.
   */
  async createInstance(offerId: number, req: CreateInstanceRequest): Promise<{ id: number }> {
    const spec: CallSpec = {
      method: 'PUT',
      path: `/asks/${integer(offerId, 'offer id')}/`,
      body: createBody(req),
      idempotent: false,
    };
    const json = this.expectOk(spec, await this.call(spec), offerId);
    const id = field(json, 'new_contract');
    if (typeof id !== 'number' || !Number.isInteger(id))
      throw this.missing(spec, json, 'new_contract', { ambiguous: true });
    return { id };
  }

  /** The instance, or undefined when there is none (destroyed, or never this account's). */
  async showInstance(id: number): Promise<VastInstance | undefined> {
    const spec: CallSpec = {
      method: 'GET',
      path: `/instances/${integer(id, 'instance id')}/`,
      query: { owner: 'me' },
      idempotent: true,
    };
    const answer = await this.call(spec);
    if (isGone(answer)) return undefined;
    const json = this.expectOk(spec, answer);
    if (!json || typeof json !== 'object' || !('instances' in json))
      throw this.missing(spec, json, 'instances');
    const row = (json as { instances: unknown }).instances;
    if (row === null) return undefined;
    // Some older answers wrap the one instance in a list.
    const inst = Array.isArray(row) ? row.find((r: VastInstance) => r?.id === id) : row;
    if (inst === undefined) return undefined;
    if (!isInstance(inst)) throw this.missing(spec, json, 'instances.id');
    return inst;
  }

  /**
   * The account's instances (with `labels`, only those carrying one of them), following
   * `next_token` across pages of 25 (`GET /api/v1/instances/`). One bad page fails the whole list.
   */
  async listInstances(opts: { labels?: readonly string[] } = {}): Promise<VastInstance[]> {
    if (opts.labels && !opts.labels.length) return [];
    const filters = opts.labels ? { label: labelFilter(opts.labels) } : {};
    const out: VastInstance[] = [];
    const seen = new Set<string>();
    let token: string | undefined;
    for (let page = 0; page < MAX_PAGES; page++) {
      const spec: CallSpec = {
        method: 'GET',
        path: '/api/v1/instances/',
        query: {
          select_filters: filters,
          order_by: [{ col: 'id', dir: 'asc' }],
          limit: 25,
          ...(token ? { after_token: token } : {}),
        },
        idempotent: true,
      };
      const json = this.expectOk(spec, await this.call(spec));
      const rows = field(json, 'instances');
      if (!Array.isArray(rows) || !rows.every(isInstance)) throw this.missing(spec, json, 'instances');
      out.push(...rows);
      const next = field(json, 'next_token');
      if (next === null || next === undefined || next === '') return out;
      if (typeof next !== 'string' || seen.has(next))
        throw new VastApiError(
          `GET /api/v1/instances/ handed back next_token ${JSON.stringify(next)} again`,
          {
            method: 'GET',
            path: spec.path,
            problem: 'Pagination',
          },
        );
      seen.add(next);
      token = next;
    }
    throw new VastApiError(`GET /api/v1/instances/ had more than ${MAX_PAGES} pages`, {
      method: 'GET',
      path: '/api/v1/instances/',
      problem: 'Pagination',
    });
  }

  /** Destroys the instance; one that is not there (any more) counts as destroyed. */
  async destroyInstance(id: number): Promise<void> {
    const spec: CallSpec = {
      method: 'DELETE',
      path: `/instances/${integer(id, 'instance id')}/`,
      body: {},
      idempotent: true,
    };
    const answer = await this.call(spec);
    if (isGone(answer)) return;
    this.expectOk(spec, answer);
  }

  /** Stops (keeps the disk, bills storage) or starts the instance. */
  async setState(id: number, state: 'running' | 'stopped'): Promise<void> {
    await this.manage(id, { state });
  }

  /** Relabels the instance. */
  async setLabel(id: number, label: string): Promise<void> {
    await this.manage(id, { label });
  }

  private async manage(id: number, body: { state?: string; label?: string }): Promise<void> {
    const spec: CallSpec = {
      method: 'PUT',
      path: `/instances/${integer(id, 'instance id')}/`,
      body,
      idempotent: true,
    };
    this.expectOk(spec, await this.call(spec));
  }

  /** Sends one call, retrying what may be retried; resolves to a JSON answer or throws. */
  private async call(spec: CallSpec): Promise<Answer> {
    const url = this.url(spec);
    let last: Failure | undefined;
    for (let attempt = 1; attempt <= this.tries; attempt++) {
      const t = await this.once(spec, url);
      if ('answer' in t) return t.answer;
      last = t;
      // Only a refusal (429, no connection) proves a create was not acted on.
      if (!spec.idempotent && !t.refused) throw this.ambiguous(spec, t, attempt);
      if (attempt === this.tries) break;
      const wait = t.exact ? t.waitMs : Math.max(t.waitMs, this.backoff(attempt));
      const delayMs = Math.min(this.maxDelayMs, wait);
      this.logger?.debug(
        { method: spec.method, path: spec.path, attempt, delayMs, failure: t.failure },
        'vast.ai call failed; retrying',
      );
      await this.sleep(delayMs);
    }
    const msg = this.scrub(
      `vast.ai API: ${spec.method} ${spec.path} got no usable answer in ${this.tries} tries (last: ${last?.failure})`,
    );
    this.logger?.warn(
      { method: spec.method, path: spec.path, attempts: this.tries, failure: last?.failure },
      msg,
    );
    throw new VastUnreachableError(
      msg,
      {
        method: spec.method,
        path: spec.path,
        attempts: this.tries,
        ...(last?.status ? { status: last.status } : { cause: errCode(last?.err) }),
      },
      { cause: last?.err },
    );
  }

  /** One request: its answer, or why it should be tried again. */
  private async once(spec: CallSpec, url: string): Promise<Try> {
    let res: Response;
    let text: string;
    try {
      res = await this.fetchImpl(url, {
        method: spec.method,
        headers: {
          Authorization: `Bearer ${this.apiKey}`,
          Accept: 'application/json',
          ...(spec.body !== undefined ? { 'Content-Type': 'application/json' } : {}),
        },
        ...(spec.body !== undefined ? { body: JSON.stringify(spec.body) } : {}),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      text = await res.text();
    } catch (err) {
      const code = errCode(err);
      return { failure: code, waitMs: 0, refused: REFUSED.has(code), err };
    }
    if (res.status === 401 || res.status === 403) throw this.authError(spec, res.status, text);
    const failure = `HTTP ${res.status} ${oneLine(text)}`.trim();
    if (res.status === 429) return { failure, status: 429, refused: true, ...this.rateLimitWait(res, text) };
    if (res.status >= 500) return { failure, status: res.status, waitMs: 0, refused: false };
    return { answer: { status: res.status, json: this.parse(spec, res.status, text) } };
  }

  /** A 429's wait: `Retry-After` (seconds or a date) if sent, else at least the endpoint's threshold. */
  private rateLimitWait(res: Response, text: string): { waitMs: number; exact?: boolean } {
    const header = res.headers.get('retry-after')?.trim();
    if (header) {
      const ms = /^\d+(\.\d+)?$/.test(header) ? Number(header) * 1000 : Date.parse(header) - this.now();
      if (Number.isFinite(ms)) return { waitMs: Math.max(0, ms), exact: true };
    }
    const threshold = /threshold=([0-9.]+)/.exec(text)?.[1];
    return { waitMs: threshold ? Math.ceil(Number(threshold) * 1000) : 0 };
  }

  /** Full jitter: uniform in [0, min(max, base × 2^(attempt−1))). */
  private backoff(attempt: number): number {
    return Math.floor(this.random() * Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (attempt - 1)));
  }

  private parse(spec: CallSpec, status: number, text: string): unknown {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new VastApiError(
        this.scrub(
          `vast.ai API: ${spec.method} ${spec.path} answered HTTP ${status} with a body that is not JSON: ${oneLine(text)}`,
        ),
        {
          method: spec.method,
          path: spec.path,
          status,
          problem: 'NotJson',
          excerpt: this.scrub(oneLine(text)),
        },
      );
    }
  }

  /** The JSON of a successful answer; a 4xx or `success: false` becomes its typed error. */
  private expectOk(spec: CallSpec, a: Answer, offerId?: number): unknown {
    const body = (a.json && typeof a.json === 'object' ? a.json : {}) as Record<string, unknown>;
    if (a.status < 400 && body.success !== false) return a.json;
    const error = typeof body.error === 'string' ? this.scrub(body.error) : undefined;
    const rawMsg = body.msg ?? body.message ?? body.detail;
    const msg = typeof rawMsg === 'string' ? this.scrub(rawMsg) : undefined;
    const data = {
      method: spec.method,
      path: spec.path,
      status: a.status,
      ...(error ? { error } : {}),
      ...(msg ? { msg } : {}),
      ...(offerId !== undefined ? { offerId } : {}),
    };
    const said = [error, msg].filter(Boolean).join(': ') || oneLine(JSON.stringify(a.json));
    if (/no_such_ask/.test(`${error} ${msg}`))
      return fail(
        new OfferTakenError(`vast.ai offer ${offerId ?? '?'} is no longer available (${said})`, data),
      );
    return fail(
      new VastApiError(
        `vast.ai API: ${spec.method} ${spec.path} failed (HTTP ${a.status}): ${said}`,
        a.status < 400 ? { ...data, problem: 'SuccessFalse' } : data,
      ),
    );
  }

  private authError(spec: CallSpec, status: number, text: string): VastAuthError {
    let said = oneLine(text);
    try {
      const j = JSON.parse(text) as Record<string, unknown>;
      said = String(j.msg ?? j.message ?? j.error ?? said);
    } catch {
      // Not JSON: the text itself.
    }
    said = this.scrub(said);
    return new VastAuthError(
      `vast.ai refused the API key (HTTP ${status}${said ? `: ${said}` : ''}): check the API key secret the Backend names`,
      { method: spec.method, path: spec.path, status, ...(said ? { msg: said } : {}) },
    );
  }

  private ambiguous(spec: CallSpec, t: Failure, attempt: number): VastError {
    const message = this.scrub(
      `vast.ai API: ${spec.method} ${spec.path} failed (${t.failure}); the rental may have been made: look for its label before renting again`,
    );
    const data = { method: spec.method, path: spec.path, ambiguous: true, attempts: attempt };
    return t.status
      ? new VastApiError(message, { ...data, status: t.status })
      : new VastUnreachableError(message, { ...data, cause: errCode(t.err) }, { cause: t.err });
  }

  private missing(
    spec: CallSpec,
    json: unknown,
    what: string,
    extra: Partial<VastErrorData> = {},
  ): VastApiError {
    const excerpt = this.scrub(oneLine(JSON.stringify(json) ?? String(json)));
    return new VastApiError(`vast.ai API: ${spec.method} ${spec.path} answered without ${what}: ${excerpt}`, {
      method: spec.method,
      path: spec.path,
      problem: 'MissingField',
      excerpt,
      ...extra,
    });
  }

  private url(spec: CallSpec): string {
    const path = /^\/api\/v\d+\//.test(spec.path) ? spec.path : `/api/v0${spec.path}`;
    const qs = Object.entries(spec.query ?? {})
      .map(([k, v]) => `${k}=${encodeURIComponent(typeof v === 'string' ? v : JSON.stringify(v))}`)
      .join('&');
    return `${this.apiUrl}${path}${qs ? `?${qs}` : ''}`;
  }

  /** Text from outside (the API's words, an excerpt) with the key cut out, should it echo it. */
  private scrub(s: string): string {
    return s.split(this.apiKey).join('[redacted]');
  }
}

/** Socket errors that mean the request never reached the API (so even a create may be sent again). */
const REFUSED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/** The code of a fetch failure: undici wraps the socket error as `cause`. */
function errCode(err: unknown): string {
  const e = err as { name?: string; code?: string; cause?: { code?: string; name?: string } } | undefined;
  if (e?.name === 'TimeoutError') return 'ETIMEDOUT';
  return e?.cause?.code ?? e?.code ?? e?.cause?.name ?? e?.name ?? 'EUNKNOWN';
}

function createBody(req: CreateInstanceRequest): Record<string, unknown> {
  return {
    client_id: 'me',
    image: req.image,
    env: req.env ?? {},
    price: req.price ?? null,
    ...(req.disk !== undefined ? { disk: req.disk } : {}),
    label: req.label,
    onstart: req.onstart ?? null,
    runtype: req.runtype ?? DEFAULT_RUNTYPE,
    ...(req.args ? { args: req.args } : {}),
    ...(req.cancelUnavail !== undefined ? { cancel_unavail: req.cancelUnavail } : {}),
    ...(req.imageLogin ? { image_login: req.imageLogin } : {}),
  };
}

/** A 404 that says the instance is not there (a missing route's 404 is an error, not "gone"). */
function isGone(a: Answer): boolean {
  const e = (a.json as { error?: unknown } | null)?.error;
  return a.status === 404 && (e === 'no_such_instance' || e === 'not_found');
}

const labelFilter = (labels: readonly string[]) =>
  labels.length === 1 ? { eq: labels[0] } : { in: [...labels] };

const field = (json: unknown, key: string): unknown =>
  json && typeof json === 'object' && !Array.isArray(json)
    ? (json as Record<string, unknown>)[key]
    : undefined;

const isInstance = (r: unknown): r is VastInstance =>
  !!r && typeof r === 'object' && typeof (r as { id?: unknown }).id === 'number';

function integer(n: number, what: string): number {
  if (!Number.isSafeInteger(n) || n < 0)
    throw new TypeError(`vast.ai ${what} must be a non-negative integer, not ${n}`);
  return n;
}

function oneLine(s: string): string {
  const t = s.replace(/\s+/g, ' ').trim();
  return t.length > EXCERPT ? `${t.slice(0, EXCERPT)}…` : t;
}

function fail(e: Error): never {
  throw e;
}
