/**
 * The agent's HTTP client: every call has a deadline (a stalled link must not hold a heartbeat
 * forever), the agent token goes in a header, never a URL, and answers the controller refuses
 * become `AgentHttpError` with the status the agent acts on (401: stop everything; 409: kill that job).
 */
import { AGENT_API } from './protocol.js';

export class AgentHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** The controller's `Retry-After` (seconds): it is stopping (503) or slowing this address down (429). */
    readonly retryAfterSec?: number,
  ) {
    super(message);
    this.name = 'AgentHttpError';
  }
}

export class AgentClient {
  constructor(
    private readonly base: string,
    private token?: string,
  ) {
    this.base = base.replace(/\/+$/, '');
  }

  setToken(token: string): void {
    this.token = token;
  }

  /** JSON in, JSON out; 204 → undefined. Throws AgentHttpError for an answer ≥ 300, else the network's error. */
  async call<T>(
    method: 'GET' | 'POST',
    path: string,
    body: unknown,
    timeoutMs: number,
    abort?: AbortSignal,
  ): Promise<T | undefined> {
    const res = await fetch(this.base + AGENT_API + path, {
      method,
      headers: {
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: abort
        ? AbortSignal.any([abort, AbortSignal.timeout(timeoutMs)])
        : AbortSignal.timeout(timeoutMs),
    });
    if (res.status === 204) return undefined;
    if (res.status >= 300) {
      const text = await res.text().catch(() => '');
      let msg = text.trim();
      try {
        msg = (JSON.parse(text) as { error?: string }).error ?? msg;
      } catch {
        // not JSON: keep the text
      }
      const retryAfter = Number(res.headers.get('retry-after') ?? NaN);
      throw new AgentHttpError(
        res.status,
        `${method} ${AGENT_API}${path}: ${res.status} ${msg.slice(0, 500)}`,
        Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined,
      );
    }
    const type = res.headers.get('content-type') ?? '';
    if (type.includes('application/json')) return (await res.json()) as T;
    return Buffer.from(await res.arrayBuffer()) as T;
  }
}
