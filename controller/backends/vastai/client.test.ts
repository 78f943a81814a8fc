import { describe, expect, it } from 'vitest';
import {
  OfferTakenError,
  VastApiError,
  VastAuthError,
  VastClient,
  VastFailure,
  VastUnreachableError,
  vastInstanceEnv,
  vastSshEndpoint,
  type VastClientOptions,
  type VastInstance,
} from './client.js';
import { offerQuery } from './query.js';

const KEY = 'k3y-5ecret-0123456789abcdef';

type Step = Response | Error | (() => Response);

/** A fetch that plays `steps` in order and records what it was asked. */
function scripted(steps: Step[]) {
  const calls: { url: string; init: RequestInit }[] = [];
  const fetchImpl = (async (url: string | URL | Request, init?: RequestInit) => {
    calls.push({ url: String(url), init: init ?? {} });
    const s = steps.shift();
    if (!s) throw new Error('the script ran out of answers');
    if (s instanceof Error) throw s;
    return typeof s === 'function' ? s() : s;
  }) as typeof fetch;
  return { fetchImpl, calls };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });
const text = (status: number, body: string, headers: Record<string, string> = {}) =>
  new Response(body, { status, headers });
/** What undici throws: a TypeError whose cause is the socket error. */
const netError = (code: string) =>
  Object.assign(new TypeError('fetch failed'), {
    cause: Object.assign(new Error(`connect ${code}`), { code }),
  });

const inst = (id: number, extra: Partial<VastInstance> = {}): VastInstance => ({
  id,
  actual_status: 'running',
  ...extra,
});

function client(steps: Step[], opts: Partial<VastClientOptions> = {}) {
  const { fetchImpl, calls } = scripted(steps);
  const sleeps: number[] = [];
  const logs: string[] = [];
  const logger = {
    debug: (o: object, m: string) => void logs.push(JSON.stringify(o) + m),
    warn: (o: object, m: string) => void logs.push(JSON.stringify(o) + m),
  };
  const c = new VastClient({
    apiUrl: 'https://vast.test/',
    apiKey: KEY,
    fetch: fetchImpl,
    sleep: async (ms) => void sleeps.push(ms),
    random: () => 0.5,
    logger,
    ...opts,
  });
  return { c, calls, sleeps, logs };
}

async function caught(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a rejection');
}

describe('VastClient requests', () => {
  it('sends what the CLI sends: Bearer auth, /api/v0 paths, a JSON body', async () => {
    const { c, calls } = client([json(200, { offers: [{ id: 1 }] })]);
    expect(await c.searchOffers(offerQuery({ gpus: 1, gpuType: '4090' }))).toEqual([{ id: 1 }]);
    const [call] = calls;
    expect(call!.url).toBe('https://vast.test/api/v0/bundles/');
    expect(call!.init.method).toBe('POST');
    expect((call!.init.headers as Record<string, string>).Authorization).toBe(`Bearer ${KEY}`);
    expect(JSON.parse(String(call!.init.body))).toMatchObject({
      gpu_name: { in: ['RTX 4090'] },
      type: 'on-demand',
    });
  });

  it('defaults to console.vast.ai and keeps a versioned path as it is, with JSON-encoded query values', async () => {
    const { c, calls } = client([json(200, { instances: [], next_token: null })], { apiUrl: undefined });
    await c.listInstances({ labels: ['adv-a'] });
    const u = new URL(calls[0]!.url);
    expect(u.origin + u.pathname).toBe('https://console.vast.ai/api/v1/instances/');
    expect(JSON.parse(u.searchParams.get('select_filters')!)).toEqual({ label: { eq: 'adv-a' } });
    expect(JSON.parse(u.searchParams.get('order_by')!)).toEqual([{ col: 'id', dir: 'asc' }]);
    expect(u.searchParams.get('limit')).toBe('25');
    expect(calls[0]!.url).not.toContain(KEY);
  });

  it('rents with the body the CLI sends and returns the new contract', async () => {
    const { c, calls } = client([json(200, { success: true, new_contract: 7835610 })]);
    const r = await c.createInstance(42, { image: 'img:1', label: 'adv-run-1', env: { A: 'b' }, disk: 20 });
    expect(r).toEqual({ id: 7835610 });
    expect(calls[0]!.url).toBe('https://vast.test/api/v0/asks/42/');
    expect(JSON.parse(String(calls[0]!.init.body))).toEqual({
      client_id: 'me',
      image: 'img:1',
      env: { A: 'b' },
      price: null,
      disk: 20,
      label: 'adv-run-1',
      onstart: null,
      runtype: 'ssh_direc ssh_proxy',
    });
  });

  it('follows next_token across pages and filters several labels with `in`', async () => {
    const { c, calls } = client([
      json(200, { success: true, instances: [inst(1), inst(2)], next_token: 'dA==' }),
      json(200, { success: true, instances: [inst(3)], next_token: null }),
    ]);
    expect((await c.listInstances({ labels: ['a', 'b'] })).map((i) => i.id)).toEqual([1, 2, 3]);
    const second = new URL(calls[1]!.url);
    expect(second.searchParams.get('after_token')).toBe('dA==');
    expect(JSON.parse(second.searchParams.get('select_filters')!)).toEqual({ label: { in: ['a', 'b'] } });
  });

  it('asks nothing for no labels', async () => {
    const { c, calls } = client([]);
    expect(await c.listInstances({ labels: [] })).toEqual([]);
    expect(calls).toHaveLength(0);
  });
});

describe('VastClient answers that are not what they seem', () => {
  it.each([
    ['an HTML page', text(200, '<!DOCTYPE html><html>Just a moment...</html>'), 'NotJson'],
    [
      'deprecated_endpoint',
      json(200, { success: false, error: 'deprecated_endpoint', msg: '/api/v0/instances/ is deprecated.' }),
      'SuccessFalse',
    ],
    ['no instances array', json(200, { success: true, next_token: null }), 'MissingField'],
    ['instances not a list', json(200, { instances: '' }), 'MissingField'],
  ])('a list answered with %s is an error, never an empty list', async (_what, answer, problem) => {
    const { c } = client([answer]);
    const e = await caught(c.listInstances());
    expect(e).toBeInstanceOf(VastApiError);
    expect((e as VastApiError).data).toMatchObject({ reason: VastFailure.Api, problem });
  });

  it('a page token handed back twice is an error, not an endless loop', async () => {
    const page = () => json(200, { instances: [inst(1)], next_token: 'same' });
    const { c } = client([page(), page()]);
    expect((await caught(c.listInstances())) as VastApiError).toMatchObject({
      data: { problem: 'Pagination' },
    });
  });

  it('search without `offers` is an error', async () => {
    const { c } = client([json(200, { success: true })]);
    expect(await caught(c.searchOffers(offerQuery({})))).toBeInstanceOf(VastApiError);
  });

  it('a shown instance that is gone is undefined: null, or a 404 that says so', async () => {
    const { c } = client([
      json(200, { instances: null }),
      json(404, { success: false, error: 'no_such_instance', msg: 'gone' }),
    ]);
    expect(await c.showInstance(5)).toBeUndefined();
    expect(await c.showInstance(5)).toBeUndefined();
  });

  it('a 404 from a missing route is an error, not a gone instance', async () => {
    const { c } = client([text(404, '<h1>Not Found</h1>'), text(404, '<h1>Not Found</h1>')]);
    expect(await caught(c.showInstance(5))).toBeInstanceOf(VastApiError);
    expect(await caught(c.destroyInstance(5))).toBeInstanceOf(VastApiError);
  });

  it('destroying an instance that is not there counts as destroyed', async () => {
    const { c } = client([json(404, { success: false, error: 'not_found', msg: 'Instance not found' })]);
    await expect(c.destroyInstance(9)).resolves.toBeUndefined();
  });

  it.each([
    [
      '410 no_such_ask',
      json(410, { success: false, error: 'no_such_ask', msg: 'error 410/3907: no_such_ask Instance type 42 is no longer available.' }), // prettier-ignore
    ],
    [
      '404 invalid_args naming no_such_ask',
      json(404, { success: false, error: 'invalid_args', msg: 'error 404/3603: no_such_ask Instance type by id 42 is not available.' }), // prettier-ignore
    ],
    ['400 no_such_ask in msg only', json(400, { success: false, msg: 'no_such_ask' })],
  ])('a taken offer (%s) is OfferTakenError', async (_what, answer) => {
    const { c, calls } = client([answer]);
    const e = await caught(c.createInstance(42, { image: 'i', label: 'l' }));
    expect(e).toBeInstanceOf(OfferTakenError);
    expect((e as OfferTakenError).data).toMatchObject({ reason: VastFailure.OfferTaken, offerId: 42 });
    expect(calls).toHaveLength(1);
  });

  it('any other refusal is VastApiError with the API’s words', async () => {
    const { c } = client([json(400, { success: false, error: 'invalid_price', msg: 'bid too low' })]);
    const e = (await caught(c.createInstance(42, { image: 'i', label: 'l', price: 0.01 }))) as VastApiError;
    expect(e).toBeInstanceOf(VastApiError);
    expect(e.data).toMatchObject({ status: 400, error: 'invalid_price', msg: 'bid too low' });
  });
});

describe('VastClient retries', () => {
  it('retries 5xx and dropped connections with full-jitter backoff, then answers', async () => {
    const { c, sleeps } = client([
      text(502, '<html>502 Bad Gateway</html>'),
      netError('UND_ERR_SOCKET'),
      json(200, { instances: inst(7) }),
    ]);
    expect((await c.showInstance(7))?.id).toBe(7);
    // random 0.5 × min(max, 500 × 2^(n−1)).
    expect(sleeps).toEqual([250, 500]);
  });

  it('gives up after the budget with VastUnreachableError, waits growing up to the cap', async () => {
    const { c, sleeps, calls } = client(
      Array.from({ length: 6 }, () => text(503, 'Service Unavailable')),
      { random: () => 0.999, maxDelayMs: 5000 },
    );
    const e = (await caught(c.destroyInstance(1))) as VastUnreachableError;
    expect(e).toBeInstanceOf(VastUnreachableError);
    expect(e.data).toMatchObject({ reason: VastFailure.Unreachable, attempts: 6, status: 503 });
    expect(calls).toHaveLength(6);
    expect(sleeps).toEqual([499, 999, 1998, 3996, 4995]);
  });

  it('a refused connection, to the end, says so', async () => {
    const { c } = client(
      Array.from({ length: 3 }, () => netError('ECONNREFUSED')),
      { retries: 3 },
    );
    const e = (await caught(c.searchOffers(offerQuery({})))) as VastUnreachableError;
    expect(e.data).toMatchObject({ attempts: 3, cause: 'ECONNREFUSED' });
  });

  it('honours Retry-After in seconds exactly, and as an HTTP date', async () => {
    const now = Date.parse('2026-08-01T00:00:00Z');
    const { c, sleeps } = client(
      [
        text(429, 'API requests too frequent', { 'Retry-After': '2' }),
        text(429, 'API requests too frequent', { 'Retry-After': new Date(now + 7000).toUTCString() }),
        text(429, 'API requests too frequent', { 'Retry-After': '3600' }),
        json(200, { offers: [] }),
      ],
      { now: () => now },
    );
    await c.searchOffers(offerQuery({}));
    expect(sleeps).toEqual([2000, 7000, 30_000]);
  });

  it('without Retry-After, waits at least the threshold Vast names', async () => {
    const { c, sleeps } = client([
      text(429, 'API requests too frequent endpoint threshold=4.5'),
      json(429, { detail: 'API requests too frequent endpoint threshold=1.0' }),
      json(200, { offers: [] }),
    ]);
    await c.searchOffers(offerQuery({}));
    expect(sleeps).toEqual([4500, 1000]);
  });

  it('a create is retried only when it cannot have been acted on (429, refused)', async () => {
    const { c, calls } = client([
      text(429, 'API requests too frequent'),
      netError('ECONNREFUSED'),
      json(200, { success: true, new_contract: 9 }),
    ]);
    expect(await c.createInstance(1, { image: 'i', label: 'l' })).toEqual({ id: 9 });
    expect(calls).toHaveLength(3);
  });

  it.each([
    ['a 5xx', text(500, 'Internal Server Error'), VastApiError],
    ['a dropped connection', netError('UND_ERR_SOCKET'), VastUnreachableError],
    ['a reset', netError('ECONNRESET'), VastUnreachableError],
  ] as const)(
    'a create after %s is not sent again: the error says it is ambiguous',
    async (_w, step, cls) => {
      const { c, calls } = client([step]);
      const e = await caught(c.createInstance(1, { image: 'i', label: 'l' }));
      expect(e).toBeInstanceOf(cls);
      expect((e as VastApiError).data.ambiguous).toBe(true);
      expect(calls).toHaveLength(1);
    },
  );

  it('a timeout counts as a dropped connection', async () => {
    const timeout = Object.assign(new Error('The operation was aborted due to timeout'), {
      name: 'TimeoutError',
    });
    const { c } = client([timeout, timeout], { retries: 2 });
    expect(((await caught(c.showInstance(3))) as VastUnreachableError).data.cause).toBe('ETIMEDOUT');
  });
});

describe('VastClient and the API key', () => {
  it('a 401 is VastAuthError at once, naming the secret to check but not the key', async () => {
    const { c, calls, logs } = client([
      json(401, { success: false, error: 'auth_error', msg: 'Invalid user key' }),
    ]);
    const e = (await caught(c.searchOffers(offerQuery({})))) as VastAuthError;
    expect(e).toBeInstanceOf(VastAuthError);
    expect(e.message).toContain('check the API key secret the Backend names');
    expect(e.data).toMatchObject({ reason: VastFailure.Auth, status: 401, msg: 'Invalid user key' });
    expect(calls).toHaveLength(1);
    expect(JSON.stringify({ m: e.message, d: e.data, s: e.stack, logs })).not.toContain(KEY);
  });

  it('a key the API echoes back is cut out of messages and data', async () => {
    const { c } = client([
      json(400, { success: false, error: 'invalid_args', msg: `bad key ${KEY} given` }),
      text(403, `forbidden for ${KEY}`),
      text(200, `<html>${KEY}</html>`),
    ]);
    const errors = [
      await caught(c.setLabel(1, 'x')),
      await caught(c.setState(1, 'stopped')),
      await caught(c.showInstance(1)),
    ] as VastApiError[];
    for (const e of errors) {
      expect(JSON.stringify({ m: e.message, d: e.data })).not.toContain(KEY);
      expect(e.message).toContain('[redacted]');
    }
  });

  it('no log line holds the key', async () => {
    const { c, logs } = client([netError('ECONNREFUSED'), netError('ECONNREFUSED')], { retries: 2 });
    await caught(c.searchOffers(offerQuery({})));
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.join('\n')).not.toContain(KEY);
  });
});

describe('instance helpers', () => {
  const i = inst(1, {
    ssh_host: 'ssh4.vast.ai',
    ssh_port: 12345,
    public_ipaddr: '203.0.113.9',
    ports: { '22/tcp': [{ HostIp: '0.0.0.0', HostPort: '41022' }] },
    extra_env: [
      ['A', '1'],
      ['-p 8080:8080', '1'],
    ],
  });

  it('finds the gateway or the direct ssh address', () => {
    expect(vastSshEndpoint(i)).toEqual({ host: 'ssh4.vast.ai', port: 12345 });
    expect(vastSshEndpoint(i, 'direct')).toEqual({ host: '203.0.113.9', port: 41022 });
    expect(vastSshEndpoint(inst(2, { actual_status: null }))).toBeUndefined();
  });

  it('reads the env pairs as a map', () => {
    expect(vastInstanceEnv(i)).toEqual({ A: '1', '-p 8080:8080': '1' });
  });
});
