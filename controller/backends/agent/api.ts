/**
 * The HTTP face of the agent hub, mounted on the controller's listener: the agents' endpoints
 * (their own bearer tokens) and the operators' (the controller's API token). Bodies are small and
 * bounded; tokens and secrets never reach a log line.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import {
  AGENT_API,
  AGENTS_ADMIN_API,
  MAX_CLAIM_WAIT_SEC,
  type CompleteRequest,
  type FailRequest,
  type HeartbeatRequest,
} from '../../../runtime/agent/protocol.js';
import { bearerToken } from '../../api-token.js';
import { readBody } from '../../request-body.js';
import type { HttpHandler } from '../types.js';
import { checkClaim, checkRegister } from './checks.js';
import type { AgentHub, Refusal } from './hub.js';
import { FailureThrottle } from './throttle.js';

/** Agents send capabilities, labels and small reports: nothing near this. */
const MAX_BODY = 256 * 1024;
const JOB_PATH = /^\/jobs\/([a-z0-9][a-z0-9.-]{0,252})\/(heartbeat|complete|fail|release|code)$/;
const ADMIN_PATH = /^\/([a-z0-9][a-z0-9-]{0,62})\/(drain|resume|revoke)$/;
const UNAUTHORIZED = { 'www-authenticate': 'Bearer realm="adventuretime-agent"' };
/** Seconds an agent is told to wait while the controller stops (a restart takes about this long). */
const STOPPING_RETRY_SEC = 5;

/** The answer while the hub is closed: come back later (`adv agent` waits, its jobs run on). */
const stopping = (res: ServerResponse) =>
  send(
    res,
    503,
    { error: 'the controller is stopping: ask again in a few seconds' },
    { 'retry-after': String(STOPPING_RETRY_SEC) },
  );

function send(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(code, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify(body) + '\n');
}

const refused = (x: unknown): x is Refusal =>
  typeof x === 'object' && x !== null && 'status' in x && 'error' in x;

/** A JSON object body, or undefined once answered (too large, not JSON, not an object). */
async function jsonBody<T>(req: IncomingMessage, res: ServerResponse): Promise<T | undefined> {
  const raw = await readBody(req, res, MAX_BODY);
  if (!raw) return undefined;
  try {
    const v = JSON.parse(raw.length ? raw.toString('utf8') : '{}') as unknown;
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as T;
  } catch {
    // answered below
  }
  send(res, 400, { error: 'the body must be a JSON object' });
  return undefined;
}

const epochOf = (v: unknown): number | undefined =>
  Number.isSafeInteger(v) && (v as number) > 0 ? (v as number) : undefined;

export interface AgentApiOptions {
  /** Where refused enrollments are logged (never with a token). */
  logger: Logger;
  now: () => number;
}

/**
 * `POST /register`: an enrollment token for an agent token. Failed attempts are logged (address and
 * name, never a token) and counted per source address: past a small burst, 429 until it refills.
 */
async function register(
  hub: AgentHub,
  throttle: FailureThrottle,
  logger: Logger,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  if (req.method !== 'POST') return send(res, 405, { error: 'use POST' }, { allow: 'POST' });
  const from = req.socket.remoteAddress ?? 'unknown';
  const wait = throttle.waitSec(from);
  if (wait > 0)
    return send(
      res,
      429,
      { error: `too many failed enrollments from ${from}: try again in ${wait}s` },
      { 'retry-after': String(wait) },
    );
  const body = await jsonBody<Record<string, unknown>>(req, res);
  if (!body) return;
  if (hub.closing) return stopping(res);
  if (typeof body.enrollToken !== 'string' || !body.enrollToken)
    return send(res, 401, { error: 'no enrollment token' }, UNAUTHORIZED);
  const checked = checkRegister(body);
  if ('error' in checked) return send(res, 400, { error: checked.error });
  const out = hub.register(checked.value);
  if (!refused(out)) return send(res, 201, out);
  if (out.status === 401 || out.status === 403) {
    const emptied = throttle.failed(from);
    logger.warn(
      { from, agent: checked.value.name, status: out.status },
      `enrollment refused: ${out.error}${emptied ? `; further attempts from ${from} are answered 429 for a while` : ''}`,
    );
  }
  return send(res, out.status, { error: out.error }, out.status === 401 ? UNAUTHORIZED : {});
}

/** The handler for `/api/v1/agent/...`: enrollment, claims and the claimed jobs' reports. */
export function agentApi(hub: AgentHub, opts: AgentApiOptions): HttpHandler {
  const throttle = new FailureThrottle(opts.now);
  return async (req, res, fullPath) => {
    if (hub.closing) return stopping(res);
    const path = fullPath.slice(AGENT_API.length);
    if (path === '/register') return register(hub, throttle, opts.logger, req, res);
    const agent = hub.authenticate(bearerToken(req.headers.authorization));
    if (!agent)
      return send(
        res,
        401,
        { error: 'bad, missing or revoked agent token: enroll with adv agent --enroll-token-file' },
        UNAUTHORIZED,
      );
    if (path === '/claims') {
      if (req.method !== 'POST') return send(res, 405, { error: 'use POST' }, { allow: 'POST' });
      const body = await jsonBody<Record<string, unknown>>(req, res);
      if (!body) return;
      if (hub.closing) return stopping(res);
      const checked = checkClaim(body);
      if ('error' in checked) return send(res, 400, { error: checked.error });
      const wait = Number(new URL(req.url ?? '', 'http://x').searchParams.get('wait') ?? 0);
      const waitMs = Math.max(0, Math.min(MAX_CLAIM_WAIT_SEC, Number.isFinite(wait) ? wait : 0)) * 1000;
      const alive = () => !req.socket.destroyed && !res.writableEnded;
      const claim = await hub.claim(agent, checked.value, waitMs, alive);
      if (!alive()) return; // the agent hung up: a claim made meanwhile expires with its lease
      if (!claim && hub.closing) return stopping(res);
      return claim
        ? send(res, 200, claim)
        : void (res.writeHead(204, { 'cache-control': 'no-store' }), res.end());
    }
    const m = JOB_PATH.exec(path);
    if (!m) return send(res, 404, { error: `no route ${req.method} ${fullPath}` });
    const [, job, verb] = m as unknown as [string, string, string];
    if (verb === 'code') {
      if (req.method !== 'GET') return send(res, 405, { error: 'use GET' }, { allow: 'GET' });
      const epoch = epochOf(Number(new URL(req.url ?? '', 'http://x').searchParams.get('epoch')));
      if (!epoch) return send(res, 400, { error: 'epoch=N is required' });
      const out = await hub.code(agent, job, epoch);
      if (refused(out)) return send(res, out.status, { error: out.error });
      res.writeHead(200, { 'content-type': 'application/gzip', 'content-length': String(out.length) });
      return void res.end(out);
    }
    if (req.method !== 'POST') return send(res, 405, { error: 'use POST' }, { allow: 'POST' });
    const body = await jsonBody<{ epoch?: unknown }>(req, res);
    if (!body) return;
    if (hub.closing) return stopping(res);
    const epoch = epochOf(body.epoch);
    if (!epoch) return send(res, 400, { error: 'epoch (a positive integer) is required' });
    const out =
      verb === 'heartbeat'
        ? hub.heartbeat(agent, job, { ...(body as HeartbeatRequest), epoch })
        : verb === 'complete'
          ? hub.complete(agent, job, { ...(body as CompleteRequest), epoch })
          : verb === 'fail'
            ? hub.fail(agent, job, { ...(body as FailRequest), epoch })
            : hub.release(agent, job, epoch);
    return refused(out) ? send(res, out.status, { error: out.error }) : send(res, 200, out);
  };
}

/** The handler for `/api/v1/agents[/NAME/drain|resume|revoke]`: the controller's API token only. */
export function agentsAdminApi(hub: AgentHub): HttpHandler {
  return async (req, res, fullPath, caller) => {
    if (!caller.operator)
      return send(
        res,
        401,
        { error: "bad or missing bearer token: use the controller's API token" },
        {
          'www-authenticate': 'Bearer realm="adventuretime"',
        },
      );
    if (hub.closing) return stopping(res);
    const path = fullPath.slice(AGENTS_ADMIN_API.length);
    if (path === '' || path === '/') {
      if (req.method !== 'GET') return send(res, 405, { error: 'use GET' }, { allow: 'GET' });
      return send(res, 200, { agents: hub.summaries() });
    }
    const m = ADMIN_PATH.exec(path);
    if (!m) return send(res, 404, { error: `no route ${req.method} ${fullPath}` });
    if (req.method !== 'POST') return send(res, 405, { error: 'use POST' }, { allow: 'POST' });
    const out = hub.setAgent(m[1]!, m[2] as 'drain' | 'resume' | 'revoke');
    return refused(out) ? send(res, out.status, { error: out.error }) : send(res, 200, out);
  };
}
