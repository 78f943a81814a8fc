/**
 * The controller's HTTP endpoints against a real controller on loopback (DESIGN §8): what changes
 * state is authenticated (the API by its token, the webhook by its signature), a replayed webhook
 * delivery triggers nothing, bodies, headers and slow clients are bounded, every route checks
 * Host, and `adv reconcile` finds the generated token on its own.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { serve, signBody, type Serving } from '../controller/serve.js';
import { captureIo, removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const SECRET = 'hook-secret';
let tmp: string;
let wt: WorkTree;
let c: Controller;
let loop: Promise<void>;
let serving: Serving;
let url: string;
let token: string;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-endpoints-'));
  wt = await makeWorkTree({ 'backends/local.yaml': LOCAL_BACKEND, 'runs/ep.yaml': runYaml('ep', ['true']) });
  // Fetches only when asked: a fetch counted in /metrics is one a request caused.
  c = await Controller.create({
    repo: wt.dir,
    dataDir: join(tmp, 'data'),
    fetchIntervalMs: 600_000,
    pollIntervalMs: 100,
  });
  serving = await serve(c, { httpAddr: '127.0.0.1:0', webhookSecret: SECRET, watch: false });
  url = serving.url!;
  token = (await readFile(join(c.dataDir, 'api-token'), 'utf8')).trim();
  await c.writeRuntimeInfo({ url, repo: c.repo.location });
  loop = c.run();
  await waitFor(async () => (await passes()) >= 1, { what: 'the first controller pass' });
});

afterAll(async () => {
  await serving?.close();
  await c?.stop();
  await loop;
  await wt?.cleanup();
  await removeTree(tmp);
});

async function metric(re: RegExp): Promise<number> {
  return Number(re.exec(await (await fetch(`${url}/metrics`)).text())?.[1] ?? 0);
}
const fetches = () => metric(/^adventuretime_git_fetch_duration_seconds_count (\d+)$/m);
const passes = () => metric(/^adventuretime_reconcile_duration_seconds_count\{step="total"\} (\d+)$/m);

/** Two whole passes from now: a hint given before this would have been acted on. */
async function twoMorePasses(): Promise<void> {
  const p = await passes();
  await waitFor(async () => (await passes()) >= p + 2, { what: 'two more controller passes' });
}

interface Answer {
  status: number;
  body: string;
}

/** One request with node:http: it sends the Host header and chunked bodies we choose. */
function call(
  path: string,
  o: { method?: string; headers?: Record<string, string>; body?: string | Buffer[]; base?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${o.base ?? url}${path}`,
      { method: o.method ?? 'GET', headers: o.headers },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      },
    );
    req.on('error', reject);
    if (Array.isArray(o.body)) {
      for (const chunk of o.body) req.write(chunk);
      req.end();
    } else req.end(o.body);
  });
}

const reconcile = (headers: Record<string, string>) =>
  call('/api/v1/reconcile/run/ep', { method: 'POST', headers });
const webhook = (body: string, headers: Record<string, string>) =>
  call('/hooks/git', { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });

describe('what changes state is authenticated', () => {
  it('refuses the API without the token, with a wrong one and with one of another length', async () => {
    const before = await fetches();
    const refused: Record<string, string>[] = [
      {},
      { authorization: `Bearer ${'0'.repeat(token.length)}` },
      { authorization: `Bearer ${token.slice(0, 12)}` },
      { authorization: `Bearer ${token}0` },
      { authorization: token },
    ];
    for (const headers of refused) {
      expect((await reconcile(headers)).status, JSON.stringify(headers)).toBe(401);
    }
    const body = JSON.stringify({ ref: 'refs/heads/main' });
    expect((await webhook(body, {})).status).toBe(401);
    expect((await webhook(body, { 'x-hub-signature-256': signBody('wrong', body) })).status).toBe(401);
    // A reconcile or a webhook would have asked for a fetch: none did.
    await twoMorePasses();
    expect(await fetches()).toBe(before);
    expect((await reconcile({ authorization: `Bearer ${token}` })).status).toBe(202);
    await waitFor(async () => (await fetches()) > before, { what: 'the fetch the reconcile asked for' });
  });

  it('fetches once for a signed delivery, and answers its replay without a second fetch', async () => {
    const body = JSON.stringify({ ref: 'refs/heads/main' });
    const headers = { 'x-hub-signature-256': signBody(SECRET, body), 'x-github-delivery': 'delivery-1' };
    const before = await fetches();
    expect((await webhook(body, headers)).status).toBe(202);
    await waitFor(async () => (await fetches()) === before + 1, { what: 'the fetch the webhook asked for' });
    const replay = await webhook(body, headers);
    expect(replay.status).toBe(200);
    expect(JSON.parse(replay.body)).toEqual({ duplicate: true, delivery: 'delivery-1' });
    await twoMorePasses();
    expect(await fetches()).toBe(before + 1);
  });
});

describe('what a client may send is bounded', () => {
  it('answers 413 to a 6 MB webhook, declared or chunked, and to a large API body', async () => {
    const big = Buffer.alloc(6 * 1024 * 1024, 'a');
    const declared = await fetch(`${url}/hooks/git`, { method: 'POST', body: big });
    expect(declared.status).toBe(413);
    expect(declared.headers.get('connection')).toBe('close');
    const chunks = Array.from({ length: 96 }, (_, i) => big.subarray(i * 65536, (i + 1) * 65536));
    const chunked = await call('/hooks/git', { method: 'POST', body: chunks });
    expect(chunked.status).toBe(413);
    const api = await call('/api/v1/reconcile/run/ep', {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: 'x'.repeat(100 * 1024),
    });
    expect(api.status).toBe(413);
    expect((await call('/healthz')).status).toBe(200);
  });

  it('answers 431 to headers over 16 KiB', async () => {
    expect((await call('/healthz', { headers: { 'x-big': 'a'.repeat(20 * 1024) } })).status).toBe(431);
  });

  it('cuts off a client that sends its headers or its body too slowly', async () => {
    const slow = await serve(c, {
      httpAddr: '127.0.0.1:0',
      webhookSecret: SECRET,
      apiToken: token,
      watch: false,
      headersTimeoutMs: 200,
      requestTimeoutMs: 400,
    });
    const { port } = new URL(slow.url!);
    try {
      for (const partial of [
        'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n', // the headers never end
        'POST /hooks/git HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{"ref":', // nor the body
      ]) {
        const socket = connect(Number(port), '127.0.0.1');
        let closed = false;
        socket.on('close', () => (closed = true)).on('error', () => {});
        socket.on('data', () => {}); // read the 408, if any
        socket.write(partial);
        await waitFor(() => closed, {
          what: `the server closing a client stuck at ${JSON.stringify(partial)}`,
        });
      }
    } finally {
      await slow.close();
    }
  });
});

describe('every route checks Host', () => {
  it('refuses /metrics, the webhook and the API under a foreign Host with 421', async () => {
    const host = { host: 'rebound.attacker.example:8080' };
    expect((await call('/metrics', { headers: host })).status).toBe(421);
    expect((await call('/hooks/git', { method: 'POST', headers: host, body: '{}' })).status).toBe(421);
    expect((await reconcile({ ...host, authorization: `Bearer ${token}` })).status).toBe(421);
    expect((await call('/metrics', { headers: { host: `localhost:${new URL(url).port}` } })).status).toBe(
      200,
    );
  });
});

describe('adv and the API token', () => {
  const adv = async (args: string[], env: Record<string, string> = {}) => {
    const io = captureIo({ HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache'), ...env }, wt.dir);
    const code = await runCli(args, io);
    return { code, out: io.out(), err: io.err() };
  };

  it('adv reconcile reaches the running controller with the token it generated', async () => {
    const before = await fetches();
    const r = await adv(['reconcile', 'run', 'ep', '--data-dir', c.dataDir]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toBe(`run/ep: reconcile requested from the controller at ${url}\n`);
    await waitFor(async () => (await fetches()) > before, { what: 'the fetch adv reconcile asked for' });
  });

  it('adv reconcile with a wrong ADV_API_TOKEN is refused, and says where the token comes from', async () => {
    const r = await adv(['reconcile', 'run', 'ep', '--data-dir', c.dataDir], {
      ADV_API_TOKEN: 'w'.repeat(64),
    });
    expect(r.code).not.toBe(0);
    expect(r.err).toContain('controller answered 401');
    expect(r.err).toContain('ADV_API_TOKEN');
    expect(r.err).toContain(join(c.dataDir, 'api-token'));
    expect(r.err).not.toContain(token);
  });

  it('adv controller refuses a token file others can read, before it starts anything', async () => {
    const file = join(tmp, 'token');
    await writeFile(file, 'k'.repeat(64) + '\n');
    await chmod(file, 0o640);
    const dataDir = join(tmp, 'never-made');
    const args = ['controller', '--api-token-file', file, '--http', '127.0.0.1:0', '--data-dir', dataDir];
    const r = await adv(args);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toContain(`--api-token-file ${file} is readable or writable by group or others`);
    expect(r.err).toContain(`chmod 600 ${file}`);
    expect(existsSync(dataDir)).toBe(false);
  });
});
