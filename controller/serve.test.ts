import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import {
  API_TOKEN_FILE,
  bearerToken,
  configuredApiToken,
  generateApiToken,
  readApiTokenFile,
  tokenMatches,
} from './api-token.js';
import {
  hostAllowed,
  isLoopback,
  RecentIds,
  serve,
  signBody,
  verifySignature,
  type ServeOptions,
  type ServedController,
} from './serve.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tmp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'adv-serve-'));
  cleanups.push(() => rm(d, { recursive: true, force: true }));
  return d;
}

describe('webhook signatures', () => {
  // The example from GitHub's documentation on validating webhook deliveries.
  it('matches GitHub’s published example', () => {
    expect(signBody("It's a Secret to Everybody", 'Hello, World!')).toBe(
      'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
    );
  });
  it.each([
    ['right secret', 's', true],
    ['wrong secret', 'x', false],
  ])('%s', (_n, secret, ok) => {
    const body = Buffer.from('{"ref":"refs/heads/main"}');
    expect(verifySignature('s', body, signBody(secret, body))).toBe(ok);
  });
  it('refuses a missing header and a truncated one', () => {
    const body = Buffer.from('x');
    expect(verifySignature('s', body, undefined)).toBe(false);
    expect(verifySignature('s', body, signBody('s', body).slice(0, 20))).toBe(false);
  });
});

describe('the API token', () => {
  const token = 'a'.repeat(64);
  it.each([
    ['the token', token, true],
    ['another of the same length', 'b'.repeat(64), false],
    ['a prefix of it', token.slice(0, 10), false],
    ['a longer one', token + 'a', false],
    ['an empty one', '', false],
    ['none', undefined, false],
  ])('matches %s: %s', (_n, given, ok) => {
    expect(tokenMatches(token, given)).toBe(ok);
  });
  it.each([
    ['Bearer abc', 'abc'],
    ['bearer abc', 'abc'],
    ['Basic abc', undefined],
    ['Bearer', undefined],
    ['Bearer a b', undefined],
    [undefined, undefined],
  ])('reads the bearer token of %s', (header, want) => {
    expect(bearerToken(header)).toBe(want);
  });

  it('refuses a token file others can read, naming the file and the fix', async () => {
    const file = join(await tmp(), 'token');
    await writeFile(file, 'x'.repeat(32) + '\n');
    await chmod(file, 0o644);
    await expect(readApiTokenFile(file)).rejects.toMatchObject({
      code: 'UsageError',
      message: expect.stringContaining(`--api-token-file ${file} is readable or writable by group or others`),
      data: { hint: `chmod 600 ${file}` },
    });
    await chmod(file, 0o600);
    expect(await readApiTokenFile(file)).toBe('x'.repeat(32));
    await writeFile(file, 'short\n');
    await expect(readApiTokenFile(file)).rejects.toThrow(/at least 16 printable characters/);
    await expect(readApiTokenFile(`${file}-missing`)).rejects.toThrow(/cannot read it \(ENOENT\)/);
  });

  it('comes from the file, else $ADV_API_TOKEN, else nowhere (then it is generated)', async () => {
    const file = join(await tmp(), 'token');
    await writeFile(file, 'f'.repeat(20), { mode: 0o600 });
    const env = { ADV_API_TOKEN: 'e'.repeat(20) };
    expect(await configuredApiToken(file, env)).toEqual({ token: 'f'.repeat(20), from: file });
    expect(await configuredApiToken(undefined, env)).toEqual({
      token: 'e'.repeat(20),
      from: '$ADV_API_TOKEN',
    });
    expect(await configuredApiToken(undefined, {})).toBeUndefined();
  });

  it('is generated at random into <data dir>/api-token, mode 0600 even over an older open file', async () => {
    const dir = await tmp();
    await writeFile(join(dir, API_TOKEN_FILE), 'old', { mode: 0o644 });
    const a = await generateApiToken(dir);
    const b = await generateApiToken(dir);
    expect(a.token).toMatch(/^[0-9a-f]{64}$/);
    expect(b.token).not.toBe(a.token);
    expect((await readFile(b.file, 'utf8')).trim()).toBe(b.token);
    expect((await stat(b.file)).mode & 0o777).toBe(0o600);
  });
});

describe('what the listener answers', () => {
  it('remembers a bounded number of delivery ids', () => {
    const ids = new RecentIds(3);
    expect(['a', 'b', 'c'].map((id) => ids.add(id))).toEqual([true, true, true]);
    expect(ids.add('b')).toBe(false);
    expect(ids.add('d')).toBe(true); // forgets a, the oldest
    expect(ids.add('a')).toBe(true);
    expect(ids.add('d')).toBe(false);
  });
  it.each([
    ['127.0.0.1:8080', [], true],
    ['[::1]:8080', [], true],
    ['localhost:8080', [], true],
    ['evil.example.com:8080', [], false],
    ['adv.lab.example:443', ['adv.lab.example'], true],
    ['ADV.LAB.EXAMPLE', ['adv.lab.example'], true],
    ['anything.example', ['*'], true],
    // Brackets hold an IPv6 address or nothing: `[anything]` is a name, and refused (probe N16).
    ['[anything]', [], false],
    ['[anything]:8080', [], false],
    ['[::1', [], false],
    ['[fe80::1]', [], true],
  ])('Host %s with %j allowed: %s', (host, allowed, ok) => {
    expect(hostAllowed(host, allowed)).toBe(ok);
  });
  it.each([
    ['127.0.0.1', true],
    ['127.3.2.1', true],
    ['::1', true],
    ['::ffff:127.0.0.1', true],
    ['0.0.0.0', false],
    ['::', false],
    ['192.168.1.10', false],
  ])('%s is loopback: %s', (address, loopback) => {
    expect(isLoopback(address)).toBe(loopback);
  });
});

/** A controller as serve() sees it: counts what it is asked, logs into `lines`. */
async function fake() {
  const lines: string[] = [];
  const calls = { fetches: 0, reconciles: [] as string[] };
  const c: ServedController = {
    dataDir: await tmp(),
    logger: pino({ level: 'info' }, { write: (s: string) => void lines.push(s) }),
    metrics: { contentType: 'text/plain', text: () => Promise.resolve('adventuretime_up 1\n') },
    repo: { watchPaths: () => [] },
    requestFetch: () => void calls.fetches++,
    requestReconcile: (_kind, name) => void calls.reconciles.push(name),
    knowsRun: (name) => name !== 'no-such-run',
  };
  return { c, calls, lines };
}

async function started(c: ServedController, opts: Partial<ServeOptions> = {}): Promise<string> {
  const s = await serve(c, { httpAddr: '127.0.0.1:0', watch: false, ...opts });
  cleanups.push(() => s.close());
  return s.url!;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request with node:http (fetch will not send a Host header of our choosing). */
function call(
  url: string,
  o: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: o.method ?? 'GET', headers: o.headers ?? {} }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end(o.body);
  });
}

describe('serve', () => {
  const token = 't'.repeat(40);

  it('generates the API token into the data dir and never logs it', async () => {
    const { c, lines } = await fake();
    const url = await started(c);
    const generated = (await readFile(join(c.dataDir, API_TOKEN_FILE), 'utf8')).trim();
    const post = (auth?: string) =>
      call(`${url}/api/v1/reconcile/run/r1`, {
        method: 'POST',
        headers: auth ? { authorization: auth } : {},
      });
    expect((await post()).status).toBe(401);
    expect((await post(`Bearer ${generated}`)).status).toBe(202);
    expect(lines.join('')).toContain('API token generated');
    expect(lines.join('')).not.toContain(generated);
  });

  it('refuses the API without the token, with a wrong one, with one of another length, or a cookie', async () => {
    const { c, calls } = await fake();
    const url = await started(c, { apiToken: token, dashboardAuth: true });
    const cookie = (await call(`${url}/ui/?token=${token}`)).headers['set-cookie']![0]!.split(';')[0]!;
    const attempts: Record<string, string>[] = [
      {},
      { authorization: `Bearer ${'x'.repeat(40)}` },
      { authorization: `Bearer ${token}x` },
      { authorization: `Basic ${token}` },
      { cookie },
    ];
    for (const headers of attempts) {
      const r = await call(`${url}/api/v1/reconcile/run/r1`, { method: 'POST', headers });
      expect(r.status, JSON.stringify(headers)).toBe(401);
    }
    expect(calls.reconciles).toEqual([]);
    const ok = await call(`${url}/api/v1/reconcile/run/r1`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(ok.status).toBe(202);
    expect(calls.reconciles).toEqual(['r1']);
    // A run the controller does not know is a 404 that says so (a fetch is asked for all the same).
    const fetches = calls.fetches;
    const unknown = await call(`${url}/api/v1/reconcile/run/no-such-run`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body).error).toContain('no run no-such-run: it is neither in the specs');
    expect(calls.reconciles).toEqual(['r1']);
    expect(calls.fetches).toBe(fetches + 1);
  });

  it('refuses webhooks without a secret, and answers a replayed delivery without a second fetch', async () => {
    const closed = await fake();
    expect((await call(`${await started(closed.c)}/hooks/git`, { method: 'POST', body: '{}' })).status).toBe(
      403,
    );
    const { c, calls } = await fake();
    const url = await started(c, { apiToken: token, webhookSecret: 'hook' });
    const body = '{"ref":"refs/heads/main"}';
    const deliver = (headers: Record<string, string>) =>
      call(`${url}/hooks/git`, { method: 'POST', body, headers });
    const signed = { 'x-hub-signature-256': signBody('hook', body) };
    expect((await deliver({ 'x-github-delivery': 'd-1' })).status).toBe(401);
    expect((await deliver({ 'x-hub-signature-256': signBody('nope', body) })).status).toBe(401);
    expect(calls.fetches).toBe(0);
    expect((await deliver({ ...signed, 'x-github-delivery': 'd-1' })).status).toBe(202);
    const replay = await deliver({ ...signed, 'x-github-delivery': 'd-1' });
    expect([replay.status, JSON.parse(replay.body)]).toEqual([200, { duplicate: true, delivery: 'd-1' }]);
    expect((await deliver({ ...signed, 'x-gitea-delivery': 'g-1' })).status).toBe(202);
    expect((await deliver({ ...signed, 'x-gitea-delivery': 'g-1' })).status).toBe(200);
    expect(calls.fetches).toBe(2);
  });

  it('answers 421 to a Host it was not given, on every route', async () => {
    const { c } = await fake();
    const url = await started(c, { apiToken: token, webhookSecret: 'hook', allowedHosts: ['adv.example'] });
    for (const [method, path] of [
      ['GET', '/metrics'],
      ['GET', '/healthz'],
      ['POST', '/hooks/git'],
      ['POST', '/api/v1/reconcile/run/r1'],
    ] as const) {
      const r = await call(`${url}${path}`, { method, headers: { host: 'evil.example:80' } });
      expect(r.status, path).toBe(421);
    }
    expect((await call(`${url}/metrics`, { headers: { host: 'adv.example' } })).status).toBe(200);
  });

  it('with dashboardAuth, /metrics and the dashboard want the token; ?token= sets a cookie', async () => {
    const { c } = await fake();
    const url = await started(c, { apiToken: token, dashboardAuth: true });
    expect((await call(`${url}/metrics`)).status).toBe(401);
    expect((await call(`${url}/ui/`)).status).toBe(401);
    expect((await call(`${url}/ui/?token=${'y'.repeat(40)}`)).status).toBe(401);
    expect((await call(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(
      200,
    );
    const login = await call(`${url}/ui/?token=${token}`);
    expect(login.status).toBe(303);
    expect(login.headers.location).toBe('/ui/');
    const setCookie = login.headers['set-cookie']![0]!;
    expect(setCookie).toMatch(/^adv_session=[0-9a-f]{64}; HttpOnly; SameSite=Strict; Path=\/$/);
    expect(setCookie).not.toContain(token);
    const cookie = setCookie.split(';')[0]!;
    expect((await call(`${url}/metrics`, { headers: { cookie } })).status).toBe(200);
    expect((await call(`${url}//evil.example/?token=${token}`)).headers.location).toBe('/evil.example/');
    expect((await call(`${url}/healthz`)).status).toBe(200); // probes need no token
  });

  it('warns when bound beyond loopback, naming what is open to anyone', async () => {
    const { c, lines } = await fake();
    await started(c, { apiToken: token, httpAddr: '127.0.0.1:0' });
    expect(lines.join('')).not.toContain('beyond loopback');
    await started(c, { apiToken: token, httpAddr: '0.0.0.0:0' });
    const warn = lines
      .map((l) => JSON.parse(l) as { level: number; msg: string })
      .find((l) => l.level === 40);
    expect(warn?.msg).toMatch(
      /webhook and API are authenticated, but \/metrics and the dashboard are readable/,
    );
    expect(warn?.msg).toContain('--dashboard-auth');
  });
});
