/**
 * A read-only web dashboard under `/ui/` on the controller's `--http` listener: runs, DAGs and
 * backends, a run's attempts, status commits and logs (tailed from the object store), and a DAG
 * drawn as SVG. Everything comes from the controller's memory and its object store; nothing here
 * changes anything. Pages refresh their sections from `/ui/api/...` every couple of seconds.
 *
 *   GET /ui/                          overview           GET /ui/api/overview
 *   GET /ui/runs/<name>[?attempt=N]   one run            GET /ui/api/runs/<name>
 *                                                        GET /ui/api/runs/<name>/logs?attempt=N&after=K
 *   GET /ui/dags/<name>               one DAG            GET /ui/api/dags/<name>
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { attemptPrefix } from '../../runtime/checkpoint.js';
import type { Controller } from '../controller.js';
import type { Route } from '../serve.js';
import type { Attempt } from '../status/types.js';
import { CSS, JS } from './assets.js';
import { dagView, notFoundView, overviewView, page, runView, type View } from './pages.js';

export { esc, html, Html } from './html.js';
export { dagSvg, layoutDag } from './svg.js';

export interface DashboardOptions {
  /** How often pages refresh their data (ms). Default 2000. */
  refreshMs?: number;
  /**
   * Host names (the `Host` header, without port) the dashboard answers besides `localhost` and IP
   * addresses; `*` for any. The default refuses other names, which defeats DNS rebinding (a web
   * page making your browser read the dashboard through a name it controls).
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
const ENDED_PHASES: ReadonlySet<string> = new Set(['Succeeded', 'Failed', 'Cancelled', 'Preempted', 'Lost']);

/** Whether the request's Host is one the dashboard answers (see DashboardOptions.allowedHosts). */
export function hostAllowed(host: string | undefined, allowed: readonly string[] = []): boolean {
  if (!host) return true; // HTTP/1.0 without Host: no browser sends that
  if (allowed.includes('*')) return true;
  if (host.startsWith('[')) return true; // an IPv6 literal
  const name = host.replace(/:\d+$/, '').toLowerCase();
  return isIP(name) !== 0 || name === 'localhost' || name.endsWith('.localhost') || allowed.includes(name);
}

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
  const store = c.objectStore;
  if (!store) return { attempt: attempt.n, after, text: '', more: false, done: true };
  const base = attemptPrefix(run, attempt.n);
  // Ended is decided before listing: the last part is written before the exit record.
  const ended =
    !!attempt.finishedAt || ENDED_PHASES.has(attempt.phase) || !!(await store.head(`${base}exit.json`));
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

/** The dashboard as a route for `serve(controller, { routes })`. */
export function dashboardRoute(c: Controller, opts: DashboardOptions = {}): Route {
  const refreshMs = opts.refreshMs ?? 2000;
  const now = opts.now ?? Date.now;

  const htmlPage = (res: ServerResponse, code: number, view: View, api?: string) =>
    send(res, code, 'text/html; charset=utf-8', page(view, { ...(api ? { api } : {}), refreshMs }));
  const notFound = (res: ServerResponse, api: boolean, what: string) =>
    api ? sendJson(res, 404, { error: what }) : htmlPage(res, 404, notFoundView(what));

  return async (req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean> => {
    if (path !== '/ui' && !path.startsWith('/ui/')) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, 'text/plain; charset=utf-8', 'the dashboard is read-only\n', { allow: 'GET, HEAD' });
      return true;
    }
    if (!hostAllowed(req.headers.host, opts.allowedHosts)) {
      send(
        res,
        403,
        'text/plain; charset=utf-8',
        `the dashboard answers only localhost and IP addresses, not Host ${req.headers.host}: ` +
          'reach it through an SSH tunnel, or have your proxy send the upstream address as Host\n',
      );
      return true;
    }
    if (path === '/ui') {
      send(res, 308, 'text/plain; charset=utf-8', '', { location: '/ui/' });
      return true;
    }
    const url = new URL(req.url ?? '/', 'http://dashboard');
    let rest: string[];
    try {
      rest = path.slice('/ui/'.length).split('/').map(decodeURIComponent);
    } catch {
      send(res, 400, 'text/plain; charset=utf-8', 'bad URL encoding\n');
      return true;
    }
    const api = rest[0] === 'api';
    if (api) rest = rest.slice(1);
    const [top, name, sub, ...extra] = rest;
    const t = now();
    try {
      if (!api && top === 'assets' && rest.length === 2) {
        if (name === 'app.css')
          send(res, 200, 'text/css; charset=utf-8', CSS, { 'cache-control': 'no-cache' });
        else if (name === 'app.js')
          send(res, 200, 'text/javascript; charset=utf-8', JS, { 'cache-control': 'no-cache' });
        else notFound(res, false, `No asset ${name}.`);
        return true;
      }
      if ((!api && rest.length === 1 && top === '') || (api && rest.length === 1 && top === 'overview')) {
        const view = overviewView(c, t);
        if (api) sendJson(res, 200, { ...view.data, sections: sectionsOf(view) });
        else htmlPage(res, 200, view, '/ui/api/overview');
        return true;
      }
      if (top === 'runs' && name !== undefined && !extra.length) {
        const doc = NAME.test(name) ? c.runStatus(name) : undefined;
        if (!doc) {
          notFound(res, api, `There is no run "${name}" on the status branch.`);
          return true;
        }
        const attempt = intParam(url, 'attempt');
        if (attempt === null) {
          send(res, 400, 'text/plain; charset=utf-8', 'attempt must be a number\n');
          return true;
        }
        if (api && sub === 'logs') {
          const after = intParam(url, 'after');
          if (after === null) {
            sendJson(res, 400, { error: 'after must be a number' });
            return true;
          }
          const n = attempt ?? doc.status.attempts.at(-1)?.n;
          const a = doc.status.attempts.find((x) => x.n === n);
          if (!a) {
            notFound(
              res,
              true,
              n === undefined ? `run ${name} has no attempt yet` : `run ${name} has no attempt ${n}`,
            );
            return true;
          }
          sendJson(res, 200, await readLogChunk(c, a, name, after ?? 0));
          return true;
        }
        if (sub !== undefined) {
          notFound(res, api, `No page ${path}.`);
          return true;
        }
        const view = await runView(c, doc, attempt, t);
        const q = attempt !== undefined ? `?attempt=${attempt}` : '';
        if (api) sendJson(res, 200, { ...view.data, sections: sectionsOf(view) });
        else htmlPage(res, 200, view, `/ui/api/runs/${encodeURIComponent(name)}${q}`);
        return true;
      }
      if (top === 'dags' && name !== undefined && sub === undefined) {
        const doc = NAME.test(name) ? c.dagStatus(name) : undefined;
        if (!doc) {
          notFound(res, api, `There is no DAG "${name}" on the status branch.`);
          return true;
        }
        const view = await dagView(c, doc, t);
        if (api) sendJson(res, 200, { ...view.data, sections: sectionsOf(view) });
        else htmlPage(res, 200, view, `/ui/api/dags/${encodeURIComponent(name)}`);
        return true;
      }
      notFound(res, api, `No page ${path}.`);
    } catch (e) {
      c.logger.warn({ err: e, path }, 'dashboard request failed');
      if (!res.headersSent)
        send(res, 500, 'text/plain; charset=utf-8', `the dashboard failed: ${(e as Error).message}\n`);
      else res.end();
    }
    return true;
  };
}
