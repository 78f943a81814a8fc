/**
 * A read-only web dashboard under `/ui/` on the controller's `--http` listener: runs, DAGs and
 * backends, a run's attempts, status commits and logs (tailed from the object store), and a DAG
 * drawn as SVG. Everything comes from the controller's memory and its object store; nothing here
 * changes anything. Pages refresh their sections from `/ui/api/...` every couple of seconds.
 *
 *   GET /ui/                          overview           GET /ui/api/overview
 *   GET /ui/runs/<name>[?attempt=N]   one run            GET /ui/api/runs/<name>
 *                                                        GET /ui/api/runs/<name>/logs?attempt=N&after=K
 *                                                        GET /ui/api/runs/<name>/metrics[?metric=M&points=P]
 *   GET /ui/dags/<name>               one DAG            GET /ui/api/dags/<name>
 *   GET /ui/compare?runs=a,b&metric=M runs overlaid      GET /ui/api/compare?runs=a,b&metric=M&points=P
 */
import { ENDED_ATTEMPT_PHASES } from '../status/phases.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { attemptPrefix } from '../../runtime/checkpoint.js';
import type { Controller } from '../controller.js';
import { hostAllowed, type Route } from '../serve.js';
import type { Attempt, RunStatusDoc } from '../status/types.js';
import { CSS, JS } from './assets.js';
import { compareData, DEFAULT_POINTS, MAX_COMPARE_RUNS, MAX_POINTS, runMetricsData } from './metrics.js';
import { compareView, dagView, notFoundView, overviewView, page, runView, type View } from './pages.js';
import { costQuery, costView } from './cost-page.js';
import { PLOTS_CSS, PLOTS_JS, uplotAssets } from './plots.js';

export { esc, html, Html } from './html.js';
export { dagSvg, layoutDag } from './svg.js';
export { downsample } from './metrics.js';
export { hostAllowed } from '../serve.js';

export interface DashboardOptions {
  /** How often pages refresh their data (ms). Default 2000. */
  refreshMs?: number;
  /**
   * Host names (the `Host` header, without port) the dashboard answers besides `localhost` and IP
   * addresses; `*` for any (see `hostAllowed`). `serve` checks the same for every route when given
   * its `allowedHosts`; this check keeps the dashboard safe on a listener that does not.
   */
  allowedHosts?: readonly string[];
  now?: () => number;
}

/** Most log bytes sent in one answer; the rest comes with the next request at once (`more`). */
const MAX_LOG_CHUNK = 512 * 1024;

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-store',
};

const NAME = /^[a-z0-9][a-z0-9.-]{0,252}$/;

export interface LogChunk {
  attempt: number;
  /** Parts seen so far, counting these: the next request's `after`. */
  after: number;
  text: string;
  /** More parts are already there (the answer was capped): ask again now. */
  more: boolean;
  /** The attempt has ended and every part has been sent. */
  done: boolean;
}

/**
 * The log parts of an attempt after the first `after` ones, as `adv logs` reads them: objects
 * under `runs/<run>/attempts/<n>/logs/`, in key order.
 */
export async function readLogChunk(
  c: Controller,
  attempt: Attempt,
  run: string,
  after: number,
): Promise<LogChunk> {
  const store = c.view.objectStore;
  if (!store) return { attempt: attempt.n, after, text: '', more: false, done: true };
  const base = attemptPrefix(run, attempt.n);
  // Ended is decided before listing: the last part is written before the exit record.
  const ended =
    !!attempt.finishedAt ||
    ENDED_ATTEMPT_PHASES.has(attempt.phase) ||
    !!(await store.head(`${base}exit.json`));
  const keys: string[] = [];
  for await (const o of store.list(`${base}logs/`)) keys.push(o.key);
  keys.sort();
  const fresh = keys.slice(after);
  const chunks: Buffer[] = [];
  let size = 0;
  let taken = 0;
  for (const key of fresh) {
    if (taken > 0 && size >= MAX_LOG_CHUNK) break;
    const body = await store.get(key);
    if (body) {
      chunks.push(Buffer.from(body));
      size += body.length;
    }
    taken++;
  }
  const more = taken < fresh.length;
  return {
    attempt: attempt.n,
    after: after + taken,
    text: Buffer.concat(chunks).toString('utf8'),
    more,
    done: ended && !more,
  };
}

function send(
  res: ServerResponse,
  code: number,
  type: string,
  body: string,
  extra: Record<string, string> = {},
) {
  res.writeHead(code, { 'content-type': type, ...SECURITY_HEADERS, ...extra });
  res.end(body);
}

const sendJson = (res: ServerResponse, code: number, body: unknown) =>
  send(res, code, 'application/json; charset=utf-8', JSON.stringify(body) + '\n');

const sectionsOf = (v: View) =>
  Object.fromEntries(v.sections.filter((s) => s.id).map((s) => [s.id!, s.body.text]));

function intParam(url: URL, key: string): number | undefined | null {
  const v = url.searchParams.get(key);
  if (v === null || v === '') return undefined;
  return /^\d{1,9}$/.test(v) ? Number(v) : null;
}

const TEXT = 'text/plain; charset=utf-8';

/** A request for a page under /ui/ (or its data under /ui/api/), with what answering it needs. */
interface PageRequest {
  c: Controller;
  res: ServerResponse;
  url: URL;
  path: string;
  /** Asked under /ui/api/: answer JSON, not a page. */
  api: boolean;
  /** The decoded path segments after `/ui/` (and `api/`). */
  parts: string[];
  now: number;
  refreshMs: number;
}

function htmlPage(r: PageRequest, code: number, view: View, api?: string): void {
  send(
    r.res,
    code,
    'text/html; charset=utf-8',
    page(view, { ...(api ? { api } : {}), refreshMs: r.refreshMs }),
  );
}

/** A view as a page that refreshes from `api`, or under /ui/api/ as that JSON. */
function sendView(r: PageRequest, view: View, api: string): void {
  if (r.api) sendJson(r.res, 200, { ...view.data, sections: sectionsOf(view) });
  else htmlPage(r, 200, view, api);
}

function notFound(r: PageRequest, what: string): void {
  if (r.api) sendJson(r.res, 404, { error: what });
  else htmlPage(r, 404, notFoundView(what));
}

/**
 * Answers what is not a page: a write (the dashboard is read-only), a Host it does not answer,
 * and `/ui` without its slash. Returns whether it answered.
 */
function refuseOrRedirect(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  allowedHosts: readonly string[] | undefined,
): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    send(res, 405, TEXT, 'the dashboard is read-only\n', { allow: 'GET, HEAD' });
    return true;
  }
  if (!hostAllowed(req.headers.host, allowedHosts)) {
    send(
      res,
      421,
      TEXT,
      `the dashboard answers only localhost and IP addresses, not Host ${req.headers.host}: ` +
        'reach it through an SSH tunnel, or have your proxy send the upstream address as Host\n',
    );
    return true;
  }
  if (path === '/ui') {
    send(res, 308, TEXT, '', { location: '/ui/' });
    return true;
  }
  return false;
}

/** The path's segments after `/ui/`, decoded; undefined when one is not valid percent-encoding. */
function segmentsOf(path: string): string[] | undefined {
  try {
    return path.slice('/ui/'.length).split('/').map(decodeURIComponent);
  } catch {
    return undefined;
  }
}

/** The route table: which handler answers which path. */
async function routeRequest(r: PageRequest): Promise<void> {
  const [top, name, sub, ...extra] = r.parts;
  if (!r.api && top === 'assets' && r.parts.length === 2) return sendAsset(r, name);
  if (r.parts.length === 1 && top === (r.api ? 'overview' : '')) return sendOverview(r);
  if (top === 'runs' && name !== undefined && !extra.length) return sendRun(r, name, sub);
  if (top === 'dags' && name !== undefined && sub === undefined) return sendDag(r, name);
  if (top === 'compare' && r.parts.length === 1) return sendCompare(r);
  if (top === 'cost' && r.parts.length === 1) return sendCost(r);
  notFound(r, `No page ${r.path}.`);
}

/** Money and GPU-hours per run and per label value (`?by=team&since=…&until=…`). */
function sendCost(r: PageRequest): void {
  const q = costQuery(r.url);
  if (typeof q === 'string')
    return r.api ? sendJson(r.res, 400, { error: q }) : send(r.res, 400, TEXT, `${q}\n`);
  sendView(r, costView(r.c, q, r.now), `/ui/api/cost${r.url.search}`);
}

const ASSETS: Record<string, { type: string; body: () => string }> = {
  'app.css': { type: 'text/css; charset=utf-8', body: () => CSS + PLOTS_CSS },
  'app.js': { type: 'text/javascript; charset=utf-8', body: () => JS },
  'plots.js': { type: 'text/javascript; charset=utf-8', body: () => PLOTS_JS },
  'uplot.js': { type: 'text/javascript; charset=utf-8', body: () => uplotAssets().js },
  'uplot.css': { type: 'text/css; charset=utf-8', body: () => uplotAssets().css },
};

function sendAsset(r: PageRequest, name: string | undefined): void {
  const asset = name !== undefined && Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
  if (asset) send(r.res, 200, asset.type, asset.body(), { 'cache-control': 'no-cache' });
  else notFound(r, `No asset ${name}.`);
}

function sendOverview(r: PageRequest): void {
  sendView(r, overviewView(r.c, r.now), '/ui/api/overview');
}

/** A run's page (`?attempt=N` picks whose logs it shows), or under /ui/api/ its data or `logs`. */
async function sendRun(r: PageRequest, name: string, sub: string | undefined): Promise<void> {
  const doc = NAME.test(name) ? r.c.view.runStatus(name) : undefined;
  if (!doc) return notFound(r, `There is no run "${name}" on the status branch.`);
  const attempt = intParam(r.url, 'attempt');
  if (attempt === null) return send(r.res, 400, TEXT, 'attempt must be a number\n');
  if (r.api && sub === 'logs') return sendLogs(r, doc, attempt);
  if (r.api && sub === 'metrics') return sendRunMetrics(r, doc);
  if (sub !== undefined) return notFound(r, `No page ${r.path}.`);
  const view = await runView(r.c, doc, attempt, r.now);
  const q = attempt !== undefined ? `?attempt=${attempt}` : '';
  sendView(r, view, `/ui/api/runs/${encodeURIComponent(name)}${q}`);
}

/** The log parts of an attempt (the last one by default) after the first `after`. */
async function sendLogs(r: PageRequest, doc: RunStatusDoc, attempt: number | undefined): Promise<void> {
  const name = doc.metadata.name;
  const after = intParam(r.url, 'after');
  if (after === null) return sendJson(r.res, 400, { error: 'after must be a number' });
  const n = attempt ?? doc.status.attempts.at(-1)?.n;
  const a = doc.status.attempts.find((x) => x.n === n);
  if (!a) {
    return notFound(
      r,
      n === undefined ? `run ${name} has no attempt yet` : `run ${name} has no attempt ${n}`,
    );
  }
  sendJson(r.res, 200, await readLogChunk(r.c, a, name, after ?? 0));
}

/** `points` (how many per series the plot can show), clamped; null when it is not a number. */
function pointsParam(url: URL): number | null {
  const points = intParam(url, 'points');
  if (points === null) return null;
  return Math.min(MAX_POINTS, Math.max(16, points ?? DEFAULT_POINTS));
}

/** `metric`: a metric name as the workload wrote it; undefined for all (or the default). */
const metricParam = (url: URL): string | undefined => url.searchParams.get('metric') || undefined;

/** A run's metric series for its plots, across attempts, downsampled to `points`. */
async function sendRunMetrics(r: PageRequest, doc: RunStatusDoc): Promise<void> {
  const store = r.c.view.objectStore;
  if (!store) return notFound(r, 'no object store is configured (a Storage spec): there are no metrics');
  const points = pointsParam(r.url);
  if (points === null) return sendJson(r.res, 400, { error: 'points must be a number' });
  sendJson(r.res, 200, await runMetricsData(store, doc, { metric: metricParam(r.url), points }));
}

/** The runs of `?runs=a,b,c`, or why the list is not one. */
function compareRuns(url: URL): string[] | string {
  const runs = (url.searchParams.get('runs') ?? '')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  const bad = runs.find((x) => !NAME.test(x));
  if (bad !== undefined) return `"${bad}" is not a run name: runs= takes run names separated by commas`;
  if (runs.length > MAX_COMPARE_RUNS)
    return `${runs.length} runs asked for, at most ${MAX_COMPARE_RUNS} fit one plot: compare fewer`;
  return [...new Set(runs)];
}

/** The compare page (`/ui/compare?runs=a,b&metric=loss`), or under /ui/api/ its plot's data. */
async function sendCompare(r: PageRequest): Promise<void> {
  const runs = compareRuns(r.url);
  if (typeof runs === 'string') {
    if (r.api) return sendJson(r.res, 400, { error: runs });
    return send(r.res, 400, TEXT, `${runs}\n`);
  }
  const metric = metricParam(r.url);
  if (!r.api) return htmlPage(r, 200, compareView(r.c, runs, metric));
  const store = r.c.view.objectStore;
  if (!store) return notFound(r, 'no object store is configured (a Storage spec): there are no metrics');
  const points = pointsParam(r.url);
  if (points === null) return sendJson(r.res, 400, { error: 'points must be a number' });
  const docs = runs.map((name) => ({ name, doc: r.c.view.runStatus(name) }));
  sendJson(r.res, 200, await compareData(store, docs, { metric, points }));
}

async function sendDag(r: PageRequest, name: string): Promise<void> {
  const doc = NAME.test(name) ? r.c.view.dagStatus(name) : undefined;
  if (!doc) return notFound(r, `There is no DAG "${name}" on the status branch.`);
  const view = await dagView(r.c, doc, r.now);
  sendView(r, view, `/ui/api/dags/${encodeURIComponent(name)}`);
}

/** The dashboard as a route for `serve(controller, { routes })`. */
export function dashboardRoute(c: Controller, opts: DashboardOptions = {}): Route {
  const refreshMs = opts.refreshMs ?? 2000;
  const now = opts.now ?? Date.now;
  return async (req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean> => {
    if (path !== '/ui' && !path.startsWith('/ui/')) return false;
    if (refuseOrRedirect(req, res, path, opts.allowedHosts)) return true;
    const url = new URL(req.url ?? '/', 'http://dashboard');
    const segments = segmentsOf(path);
    if (!segments) {
      send(res, 400, TEXT, 'bad URL encoding\n');
      return true;
    }
    const api = segments[0] === 'api';
    const parts = api ? segments.slice(1) : segments;
    const r: PageRequest = { c, res, url, path, api, parts, now: now(), refreshMs };
    try {
      await routeRequest(r);
    } catch (e) {
      c.logger.warn({ err: e, path }, 'dashboard request failed');
      if (!res.headersSent) send(res, 500, TEXT, `the dashboard failed: ${(e as Error).message}\n`);
      else res.end();
    }
    return true;
  };
}
