/**
 * What turns events into hints for the reconcile loop: a webhook (`POST /hooks/git`, signed like
 * GitHub's `X-Hub-Signature-256`), a watch on the local repo's branch ref (chokidar), and
 * `POST /api/v1/reconcile/<kind>/<name>` for `adv reconcile`. Events only say "look now";
 * the loop re-reads everything itself.
 *
 * The listener's contract (DESIGN §8): what changes state is authenticated (the webhook by its
 * signature, the API by the API token, see api-token.ts); every route answers only the Host names
 * it was told (DNS rebinding); bodies, headers and slow clients are bounded.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isIP, type AddressInfo } from 'node:net';
import chokidar from 'chokidar';
import type { Logger } from 'pino';
import { bearerToken, generateApiToken, sessionCookieValue, tokenMatches } from './api-token.js';
import type { HttpHandler } from './backends/types.js';
import { readBody, refuseTooLarge } from './request-body.js';

export interface ServeOptions {
  /** `host:port`; port 0 picks a free one. Default: no HTTP server. */
  httpAddr?: string;
  /** Shared secret for webhook signatures (`/hooks/git` only). Without it webhooks are refused. */
  webhookSecret?: string;
  /**
   * The bearer token the API requires (and with `dashboardAuth`, `/metrics` and the routes).
   * Default: a random one, written to `<data dir>/api-token` with mode 0600.
   */
  apiToken?: string;
  /** `/metrics` and the routes (the dashboard) require the API token too: bearer, or the cookie. */
  dashboardAuth?: boolean;
  /** Host names answered besides localhost and IP literals (see `hostAllowed`); `*` for any. */
  allowedHosts?: readonly string[];
  /** How long a client may take to send a request's headers (ms). Default 10 s. */
  headersTimeoutMs?: number;
  /** How long a client may take to send a whole request (ms). Default 30 s. */
  requestTimeoutMs?: number;
  /** Watch the local repo's branch ref. Default true. */
  watch?: boolean;
  /** More GET routes on the same listener (the dashboard): each says whether it answered. */
  routes?: readonly Route[];
}

/** A route handler: answers and returns true, or returns false to let the next one try. */
export type Route = (req: IncomingMessage, res: ServerResponse, path: string) => Promise<boolean>;

export interface Serving {
  url?: string;
  close(): Promise<void>;
}

/** What serving needs of the controller (a `Controller` is one). */
export interface ServedController {
  readonly dataDir: string;
  readonly logger: Logger;
  readonly metrics: { readonly contentType: string; text(): Promise<string> };
  readonly repo: { watchPaths(): string[] };
  requestFetch(reason: string): void;
  requestReconcile(kind: 'Run', name: string): void;
  /** Whether a run of that name is in the specs or on the status branch (unknown: 404). */
  knowsRun?(name: string): boolean;
  /** Routes adapters mounted (the pull agent's API): each authenticates its own callers. */
  readonly ports?: { handlerFor(path: string): HttpHandler | undefined };
}

/** Largest webhook body (GitHub caps payloads at 25 MB, but push events are far smaller). */
export const WEBHOOK_MAX_BODY = 5 * 1024 * 1024;
/** Largest API body: the API reads none today. */
export const API_MAX_BODY = 64 * 1024;
/** Largest request head (Node answers 431 past it). */
export const MAX_HEADER_SIZE = 16 * 1024;
/** How many webhook delivery ids are remembered to refuse a replay. */
const DELIVERIES_KEPT = 1000;
const SESSION_COOKIE = 'adv_session';
const RECONCILE = /^\/api\/v1\/reconcile\/(run)\/([a-z0-9.-]{1,253})$/;

/** `sha256=<hex>` of the body under the secret, as GitHub computes it. */
export function signBody(secret: string, body: string | Buffer): string {
  return 'sha256=' + createHmac('sha256', secret).update(body).digest('hex');
}

export function verifySignature(secret: string, body: Buffer, header: string | undefined): boolean {
  if (!header) return false;
  const expected = Buffer.from(signBody(secret, body));
  const got = Buffer.from(header);
  return expected.length === got.length && timingSafeEqual(expected, got);
}

/**
 * Whether the listener answers a request with this `Host`: localhost, IP literals, and the names
 * in `allowed` (`*` for any). Other names are refused, which defeats DNS rebinding (a web page
 * making a browser reach the controller through a name the page's owner controls).
 */
export function hostAllowed(host: string | undefined, allowed: readonly string[] = []): boolean {
  if (!host) return true; // HTTP/1.0 without Host: no browser sends that
  if (allowed.includes('*')) return true;
  // An IPv6 literal, as browsers send it: `[::1]` or `[::1]:8080`, and nothing else in brackets.
  const v6 = /^\[([0-9A-Fa-f:.]+)\](?::\d+)?$/.exec(host);
  if (host.startsWith('[')) return v6 !== null && isIP(v6[1]!) === 6;
  const name = host.replace(/:\d+$/, '').toLowerCase();
  return isIP(name) !== 0 || name === 'localhost' || name.endsWith('.localhost') || allowed.includes(name);
}

/** Whether a bound address is reachable only from this machine. */
export function isLoopback(address: string): boolean {
  return /^(::ffff:)?127\./.test(address) || address === '::1';
}

/** The last `size` ids seen, the oldest forgotten first: memory stays bounded. */
export class RecentIds {
  private readonly ids = new Set<string>();
  constructor(private readonly size: number) {}

  /** Records `id`; false when it was already there. */
  add(id: string): boolean {
    if (this.ids.has(id)) return false;
    this.ids.add(id);
    if (this.ids.size > this.size) this.ids.delete(this.ids.values().next().value!);
    return true;
  }
}

/** What answering a request needs. */
interface Endpoint {
  c: ServedController;
  opts: ServeOptions;
  token: string;
  /** The session cookie's value (derived from the token). */
  cookie: string;
  deliveries: RecentIds;
}

function send(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(code, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body) + '\n');
}

const header = (req: IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/** The delivery id a git host gives each webhook delivery (GitHub, Gitea, Gogs), if any. */
function deliveryId(req: IncomingMessage): string | undefined {
  const id = ['x-github-delivery', 'x-gitea-delivery', 'x-gogs-delivery']
    .map((h) => header(req, h))
    .find(Boolean);
  return id && id.length <= 256 ? id : undefined;
}

/**
 * `POST /hooks/git`: a signed delivery asks for a fetch. A delivery id seen before is answered
 * `{duplicate: true}` and asks for nothing. The id is not under the signature, so this stops a
 * redelivery and a verbatim replay, not a replayer who changes the id; either way a fetch is only
 * a hint, and the worst a replay can cause is one more fetch.
 */
async function webhook(e: Endpoint, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const secret = e.opts.webhookSecret;
  if (!secret)
    return send(res, 403, { error: 'webhooks are disabled: start the controller with a webhook secret' });
  const body = await readBody(req, res, WEBHOOK_MAX_BODY);
  if (!body) return;
  if (!verifySignature(secret, body, header(req, 'x-hub-signature-256')))
    return send(res, 401, { error: 'bad or missing X-Hub-Signature-256' });
  const id = deliveryId(req);
  if (id !== undefined && !e.deliveries.add(id)) {
    e.c.logger.info({ delivery: id }, 'webhook delivery seen before: ignored');
    return send(res, 200, { duplicate: true, delivery: id });
  }
  e.c.requestFetch('webhook');
  return send(res, 202, { accepted: true });
}

const UNAUTHORIZED = { 'www-authenticate': 'Bearer realm="adventuretime"' };

/** `POST /api/v1/reconcile/run/<name>`: always behind the API token, as a bearer header only. */
async function api(e: Endpoint, req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
  const m = RECONCILE.exec(path);
  if (!m) return send(res, 404, { error: `no route ${req.method} ${path}` });
  if (req.method !== 'POST') return send(res, 405, { error: 'use POST' }, { allow: 'POST' });
  if (Number(req.headers['content-length']) > API_MAX_BODY) return refuseTooLarge(req, res, API_MAX_BODY);
  // Never the cookie: a browser would send it along with a request another site makes it send.
  if (!tokenMatches(e.token, bearerToken(header(req, 'authorization'))))
    return send(res, 401, { error: 'bad or missing bearer token' }, UNAUTHORIZED);
  if (!(await readBody(req, res, API_MAX_BODY))) return;
  if (e.c.knowsRun && !e.c.knowsRun(m[2]!)) {
    e.c.requestFetch('reconcile of an unknown run'); // just pushed? the next pass sees it anyway
    return send(res, 404, {
      error: `no run ${m[2]}: it is neither in the specs the controller has loaded nor on the status branch (a fetch was requested, in case it was just pushed)`,
    });
  }
  e.c.requestReconcile('Run', m[2]!);
  return send(res, 202, { accepted: true, kind: 'Run', name: m[2] });
}

function cookieOf(cookies: string | undefined, name: string): string | undefined {
  for (const part of (cookies ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * With `dashboardAuth`: whether a read carries the API token, as a bearer header or the session
 * cookie. A GET with `?token=TOKEN` sets the cookie and redirects to the same path without it, so
 * the token leaves the address bar. Otherwise answers (401, or that redirect) and returns false.
 */
function readAllowed(e: Endpoint, req: IncomingMessage, res: ServerResponse, path: string): boolean {
  if (tokenMatches(e.token, bearerToken(header(req, 'authorization')))) return true;
  if (tokenMatches(e.cookie, cookieOf(header(req, 'cookie'), SESSION_COOKIE))) return true;
  const query = new URLSearchParams((req.url ?? '').slice(path.length + 1));
  const given = query.get('token');
  if (req.method === 'GET' && given !== null && tokenMatches(e.token, given)) {
    query.delete('token');
    const rest = query.toString();
    res.writeHead(303, {
      // One leading slash: `//host/` would send the browser to another site.
      location: '/' + path.replace(/^\/+/, '') + (rest ? `?${rest}` : ''),
      'set-cookie': `${SESSION_COOKIE}=${e.cookie}; HttpOnly; SameSite=Strict; Path=/`,
      'cache-control': 'no-store',
      'referrer-policy': 'no-referrer',
    });
    res.end();
    return false;
  }
  res.writeHead(401, {
    'content-type': 'text/plain; charset=utf-8',
    'cache-control': 'no-store',
    ...UNAUTHORIZED,
  });
  res.end(
    'this controller wants its API token: send "Authorization: Bearer TOKEN", or open /ui/?token=TOKEN ' +
      'once in the browser (the token is the one the controller was given, or the one it wrote to ' +
      '<data dir>/api-token)\n',
  );
  return false;
}

/** Routes a request: Host first, then the authenticated endpoints, then reads. */
async function answer(e: Endpoint, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = (req.url ?? '/').split('?')[0]!;
  if (!hostAllowed(req.headers.host, e.opts.allowedHosts))
    return send(res, 421, {
      error:
        `this controller does not answer Host ${req.headers.host}: it answers localhost, IP addresses ` +
        'and the names given to --dashboard-host',
    });
  if (req.method === 'GET' && path === '/healthz') return send(res, 200, { ok: true });
  if (path === '/hooks/git')
    return req.method === 'POST'
      ? webhook(e, req, res)
      : send(res, 405, { error: 'use POST' }, { allow: 'POST' });
  const mounted = e.c.ports?.handlerFor(path);
  if (mounted)
    return mounted(req, res, path, {
      operator: tokenMatches(e.token, bearerToken(header(req, 'authorization'))),
    });
  if (path.startsWith('/api/')) return api(e, req, res, path);
  if (e.opts.dashboardAuth && !readAllowed(e, req, res, path)) return;
  if (req.method === 'GET' && path === '/metrics') {
    const text = await e.c.metrics.text();
    res.writeHead(200, { 'content-type': e.c.metrics.contentType });
    return void res.end(text);
  }
  for (const route of e.opts.routes ?? []) if (await route(req, res, path)) return;
  return send(res, 404, { error: `no route ${req.method} ${path}` });
}

/** Watches the local repo's branch ref; returns how to stop watching (nothing for a remote repo). */
async function watchRefs(controller: ServedController): Promise<(() => Promise<void>) | undefined> {
  const paths = controller.repo.watchPaths();
  if (!paths.length) return undefined;
  // Watch the folders (a ref file is replaced by rename, and may not exist yet when packed).
  const dirs = [...new Set(paths.map((p) => p.slice(0, p.lastIndexOf('/'))))];
  const watcher = chokidar.watch(dirs, { ignoreInitial: true, depth: 0, awaitWriteFinish: false });
  watcher.on('all', (_event, path) => {
    if (paths.includes(path)) controller.requestFetch(`ref changed: ${path}`);
  });
  await new Promise<void>((res) => watcher.once('ready', () => res()));
  return () => watcher.close();
}

/** Starts the HTTP listener on `addr`; resolves once it listens. */
async function listen(
  c: ServedController,
  opts: ServeOptions,
  addr: string,
): Promise<{ url: string; close(): Promise<void> }> {
  let token = opts.apiToken;
  if (!token) {
    const made = await generateApiToken(c.dataDir);
    c.logger.info(
      { file: made.file },
      'API token generated; adv reconcile on this machine reads it from the file',
    );
    token = made.token;
  }
  const e: Endpoint = {
    c,
    opts,
    token,
    cookie: sessionCookieValue(token),
    deliveries: new RecentIds(DELIVERIES_KEPT),
  };
  const requestTimeout = opts.requestTimeoutMs ?? 30_000;
  const headersTimeout = Math.min(opts.headersTimeoutMs ?? 10_000, requestTimeout);
  const server: Server = createServer(
    {
      maxHeaderSize: MAX_HEADER_SIZE,
      headersTimeout,
      requestTimeout,
      // How often Node looks for clients past those times (its default, 30 s, would let them linger).
      connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(headersTimeout / 4))),
    },
    (req, res) => {
      answer(e, req, res).catch((err: unknown) => {
        if (!res.headersSent) send(res, 400, { error: (err as Error).message });
        else res.end();
      });
    },
  );
  const [host, port] = splitAddr(addr);
  await new Promise<void>((res, rej) => {
    server.once('error', rej);
    server.listen(Number(port), host, () => res());
  });
  const bound = server.address() as AddressInfo;
  const url = `http://${bound.address.includes(':') ? `[${bound.address}]` : bound.address}:${bound.port}`;
  if (!isLoopback(bound.address))
    c.logger.warn(
      { url },
      opts.dashboardAuth
        ? 'listening beyond loopback over plain HTTP: every route is authenticated, but tokens cross the network in clear unless a TLS proxy is in front'
        : 'listening beyond loopback: the webhook and API are authenticated, but /metrics and the dashboard are readable by anyone who can reach this port unless --dashboard-auth is set',
    );
  // Closing drops every connection at once: a long poll or a keep-alive socket never holds a
  // stopping controller (the agent hub has answered its long polls by then).
  const close = () =>
    new Promise<void>((res) => {
      server.close(() => res());
      server.closeAllConnections();
    });
  return { url, close };
}

export async function serve(controller: ServedController, opts: ServeOptions): Promise<Serving> {
  const closers: (() => Promise<void>)[] = [];
  const close = async () => {
    for (const c of closers.splice(0)) await c();
  };
  let url: string | undefined;
  try {
    const unwatch = opts.watch !== false ? await watchRefs(controller) : undefined;
    if (unwatch) closers.push(unwatch);
    if (opts.httpAddr) {
      const listening = await listen(controller, opts, opts.httpAddr);
      url = listening.url;
      closers.push(listening.close);
    }
  } catch (e) {
    await close(); // the address is taken, say: stop the watcher, or the process never exits
    throw e;
  }
  return { ...(url ? { url } : {}), close };
}

function splitAddr(addr: string): [string, string] {
  const i = addr.lastIndexOf(':');
  if (i < 0) return ['127.0.0.1', addr];
  return [addr.slice(0, i).replace(/^\[|\]$/g, '') || '127.0.0.1', addr.slice(i + 1)];
}
