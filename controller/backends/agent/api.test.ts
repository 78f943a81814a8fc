import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AGENT_API, AGENTS_ADMIN_API } from '../../../runtime/agent/protocol.js';
import { agentApi, agentsAdminApi } from './api.js';
import type { JobRequest } from '../types.js';
import { waitFor } from '../../../test/helpers/wait.js';
import { AgentHub } from './hub.js';

const TOKEN = 'enrollment-token-for-api-tests';
const caps = { hostname: 'h', cores: 2, ramGiB: 4, os: 'linux', node: 'v20', gpus: [] };

const request = (run: string): JobRequest => ({
  jobName: `adv-${run}-1`,
  run,
  attempt: 1,
  spec: { command: ['true'] },
  argv: ['true'],
  code: { commit: 'c0ffee' },
  env: {},
  secretEnv: {},
});

describe('the agent API over HTTP', () => {
  let dir: string;
  let hub: AgentHub;
  let server: Server;
  let base = '';
  let agentToken = '';
  let clock = Date.now();
  const logged: string[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-agent-api-'));
    hub = new AgentHub(dir, pino({ level: 'silent' }), Date.now);
    hub.attach({
      backend: 'desks',
      pool: 'desks',
      staleAfterSec: 10,
      enrollToken: () => TOKEN,
      requestFor: () => undefined,
      code: { treeOf: async () => 't', payload: async () => Buffer.from(''), extractTo: async () => {} },
    });
    const logger = pino({ level: 'info' }, { write: (l: string) => void logged.push(l) });
    const agent = agentApi(hub, { logger, now: () => clock });
    const admin = agentsAdminApi(hub);
    server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0]!;
      const operator = req.headers.authorization === 'Bearer operator';
      void (path.startsWith(AGENT_API + '/') ? agent : admin)(req, res, path, { operator });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    hub.close();
    await rm(dir, { recursive: true, force: true });
  });

  const post = (path: string, body: unknown, token?: string) =>
    fetch(base + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  it('enrolls, and refuses bad names, bad bodies and wrong tokens with the status that says why', async () => {
    expect(
      (await post(`${AGENT_API}/register`, { enrollToken: 'nope', name: 'a', capabilities: caps })).status,
    ).toBe(401);
    expect(
      (await post(`${AGENT_API}/register`, { enrollToken: TOKEN, name: 'Bad_Name', capabilities: caps }))
        .status,
    ).toBe(400);
    expect(
      (await post(`${AGENT_API}/register`, { enrollToken: TOKEN, name: 'a', capabilities: { cores: 'x' } }))
        .status,
    ).toBe(400);
    expect((await post(`${AGENT_API}/register`, 'not json')).status).toBe(400);
    const ok = await post(`${AGENT_API}/register`, {
      enrollToken: TOKEN,
      name: 'a',
      capabilities: caps,
      labels: { room: 'b12' },
    });
    expect(ok.status).toBe(201);
    agentToken = ((await ok.json()) as { token: string }).token;
  });

  it('authenticates every other call with the agent token, and checks what it sends', async () => {
    expect((await post(`${AGENT_API}/claims?wait=0`, { capabilities: caps })).status).toBe(401);
    expect((await post(`${AGENT_API}/claims?wait=0`, { capabilities: caps }, 'adva_forged')).status).toBe(
      401,
    );
    expect(
      (await post(`${AGENT_API}/claims?wait=0`, { capabilities: caps, policy: { runs: 'x*' } }, agentToken))
        .status,
    ).toBe(400);
    expect((await post(`${AGENT_API}/claims?wait=0`, { capabilities: caps }, agentToken)).status).toBe(204);
    expect(
      (await fetch(`${base}${AGENT_API}/claims`, { headers: { authorization: `Bearer ${agentToken}` } }))
        .status,
    ).toBe(405);
    // A job it does not hold: 409, so it kills whatever it runs for it.
    expect((await post(`${AGENT_API}/jobs/adv-x-1/heartbeat`, { epoch: 3 }, agentToken)).status).toBe(409);
    expect((await post(`${AGENT_API}/jobs/adv-x-1/heartbeat`, { epoch: 'three' }, agentToken)).status).toBe(
      400,
    );
  });

  it('bounds an agent’s policy, and matches a pathological glob without stalling the controller', async () => {
    const claim = (policy: unknown) =>
      post(`${AGENT_API}/claims?wait=0`, { capabilities: caps, policy }, agentToken);
    const many = await claim({ runs: Array.from({ length: 65 }, (_, i) => `r${i}-*`) });
    expect(many.status).toBe(400);
    expect(((await many.json()) as { error: string }).error).toBe('policy.runs has 65 globs: at most 64');
    const long = await claim({ denyRuns: ['x'.repeat(254)] });
    expect(((await long.json()) as { error: string }).error).toMatch(
      /^policy.denyRuns: a glob is longer than 253 characters/,
    );
    expect((await claim({ labels: { 'bad key': 'x' } })).status).toBe(400);
    // 250 stars: a backtracking regex would take longer than the age of the universe.
    hub.enqueue('desks', [request('fork-mid-2026-01-21-001')]);
    expect((await claim({ runs: ['*'.repeat(250) + '!'] })).status).toBe(204);
    const healthy = await fetch(`${base}${AGENTS_ADMIN_API}`, {
      headers: { authorization: 'Bearer operator' },
    });
    expect(healthy.status).toBe(200);
  });

  it('refuses capabilities of the wrong type or size with what is wrong, and journals nothing that changes nothing', async () => {
    const error = async (r: Response) => ((await r.json()) as { error: string }).error;
    const register = (capabilities: unknown) =>
      post(`${AGENT_API}/register`, { enrollToken: TOKEN, name: 'odd', capabilities });
    const { os: _os, ...noOs } = caps;
    for (const [bad, why] of [
      [noOs, 'capabilities.os must be a string of 1 to 128 characters'],
      [
        { ...caps, hostname: 'h'.repeat(254) },
        'capabilities.hostname must be a string of 1 to 253 characters',
      ],
      [{ ...caps, cuda: 12.4 }, 'capabilities.cuda must be a string of 1 to 128 characters'],
      [{ ...caps, cores: 2.5 }, 'capabilities.cores must be a whole number ≥ 1'],
      [{ ...caps, ramGiB: 'lots' }, 'capabilities.ramGiB must be a number of GiB ≥ 0'],
      [{ ...caps, gpus: Array.from({ length: 65 }, () => ({ name: 'L4', vramGiB: 24 })) }, 'at most 64'],
      [{ ...caps, gpus: [{ name: 'x'.repeat(129), vramGiB: 24 }] }, 'capabilities.gpus: each must be'],
    ] as const) {
      const r = await register(bad);
      expect(r.status).toBe(400);
      expect(await error(r)).toContain(why);
    }
    // (A policy that takes nothing: the queue is not what this test is about.)
    const claim = (capabilities: unknown) =>
      post(`${AGENT_API}/claims?wait=0`, { capabilities, policy: { runs: ['none'] } }, agentToken);
    expect(await error(await claim({ ...caps, torch: ['2.3'] }))).toContain(
      'capabilities.torch must be a string',
    );
    // The same host in another key order, with a field the controller does not know: not journaled.
    const journal = join(dir, 'agents', 'journal.jsonl');
    const before = (await stat(journal)).size;
    const reordered = {
      gpus: [],
      node: 'v20',
      os: 'linux',
      ramGiB: 4,
      cores: 2,
      hostname: 'h',
      padding: 'x'.repeat(100_000),
    };
    expect((await claim(reordered)).status).toBe(204);
    expect((await stat(journal)).size).toBe(before);
  });

  it('takes only ISO times within the attempt’s life from an agent, and says what is wrong with an exit', async () => {
    hub.enqueue('desks', [request('times')]);
    const claimed = await post(
      `${AGENT_API}/claims?wait=0`,
      { capabilities: caps, policy: { runs: ['times'] } },
      agentToken,
    );
    const { job, epoch } = (await claimed.json()) as { job: string; epoch: number };
    expect(job).toBe('adv-times-1');
    const say = async (verb: string, body: object) => {
      const r = await post(`${AGENT_API}/jobs/${job}/${verb}`, { epoch, ...body }, agentToken);
      return { status: r.status, error: ((await r.json()) as { error?: string }).error };
    };
    expect(await say('heartbeat', { startedAt: '\u001b[2Jnot-a-date' })).toEqual({
      status: 400,
      error: expect.stringMatching(/^startedAt must be an ISO-8601 time like/),
    });
    expect(await say('complete', {})).toEqual({
      status: 400,
      error:
        "complete needs exit: adv exec's exit record {exitCode, reason, message?, startedAt, finishedAt}",
    });
    const exit = { exitCode: 0, reason: 'Completed', startedAt: '', finishedAt: new Date().toISOString() };
    expect(await say('complete', { exit: { ...exit, exitCode: 'zero' } })).toMatchObject({
      status: 400,
      error: 'exit.exitCode must be a whole number from 0 to 255',
    });
    expect(await say('complete', { exit: { ...exit, finishedAt: '2020-01-01T00:00:00Z' } })).toMatchObject({
      status: 400,
      error: expect.stringContaining('is before the attempt was queued'),
    });
    expect(await say('complete', { exit: { ...exit, finishedAt: '2999-01-01T00:00:00Z' } })).toMatchObject({
      status: 400,
      error: expect.stringContaining('is in the future'),
    });
    // A clock a minute behind: accepted, and kept as a time within the attempt's life.
    const behind = new Date(Date.now() - 60_000).toISOString().replace('Z', '+00:00');
    expect(await say('heartbeat', { startedAt: behind })).toMatchObject({ status: 200 });
    expect(await say('complete', { exit: { ...exit, startedAt: behind } })).toMatchObject({ status: 200 });
    const [o] = hub.observe('desks', [{ backend: 'desks', jobName: job, jobId: job }]);
    expect(o).toMatchObject({ state: 'Succeeded' });
    expect(o!.startedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(o!.startedAt!)).toBeGreaterThan(Date.parse(behind));
  });

  it('logs failed enrollments without the token, and answers 429 past a small burst from one address', async () => {
    clock += 3_600_000; // whatever earlier tests failed is forgotten
    logged.length = 0;
    const guess = (enrollToken: string, name = 'guess') =>
      post(`${AGENT_API}/register`, { enrollToken, name, capabilities: caps });
    for (let i = 0; i < 5; i++) expect((await guess(`wrong-guess-number-${i}`)).status).toBe(401);
    const refused = await guess('wrong-guess-number-5');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('10');
    expect((await refused.json()) as object).toEqual({
      error: 'too many failed enrollments from 127.0.0.1: try again in 10s',
    });
    // Even the right token waits: the address has to slow down first.
    expect((await guess(TOKEN, 'late')).status).toBe(429);
    const log = logged.join('');
    expect(log.match(/enrollment refused/g)).toHaveLength(5);
    expect(log).toContain('"from":"127.0.0.1","agent":"guess","status":401');
    expect(log).toContain('further attempts from 127.0.0.1 are answered 429');
    expect(log).not.toContain('wrong-guess-number');
    clock += 10_000;
    expect((await guess(TOKEN, 'late')).status).toBe(201);
  });

  it('keeps the operators’ routes for the API token', async () => {
    expect(
      (await fetch(base + AGENTS_ADMIN_API, { headers: { authorization: `Bearer ${agentToken}` } })).status,
    ).toBe(401);
    const list = await fetch(base + AGENTS_ADMIN_API, { headers: { authorization: 'Bearer operator' } });
    expect(((await list.json()) as { agents: { name: string }[] }).agents.map((a) => a.name)).toEqual([
      'a',
      'late',
    ]);
    expect((await post(`${AGENTS_ADMIN_API}/a/drain`, {}, 'operator')).status).toBe(200);
    expect((await post(`${AGENTS_ADMIN_API}/zz/drain`, {}, 'operator')).status).toBe(404);
  });
});

describe('the agent API while the controller stops', () => {
  it('answers a long poll in flight at once with 503 and Retry-After, and every later call too', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'adv-agent-api-close-'));
    const hub = new AgentHub(dir, pino({ level: 'silent' }), Date.now);
    hub.attach({
      backend: 'desks',
      pool: 'desks',
      staleAfterSec: 10,
      enrollToken: () => TOKEN,
      requestFor: () => undefined,
      code: { treeOf: async () => 't', payload: async () => Buffer.from(''), extractTo: async () => {} },
    });
    const agent = agentApi(hub, { logger: pino({ level: 'silent' }), now: Date.now });
    const admin = agentsAdminApi(hub);
    const claims = vi.spyOn(hub, 'claim');
    const server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0]!;
      void (path.startsWith(AGENT_API + '/') ? agent : admin)(req, res, path, { operator: true });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const post = (path: string, body: unknown, token?: string) =>
        fetch(base + path, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
          body: JSON.stringify(body),
        });
      const enrolled = await post(`${AGENT_API}/register`, {
        enrollToken: TOKEN,
        name: 'a',
        capabilities: caps,
      });
      const { token } = (await enrolled.json()) as { token: string };
      const poll = post(`${AGENT_API}/claims?wait=50`, { capabilities: caps }, token);
      await waitFor(() => claims.mock.calls.length === 1, { what: 'the long poll to wait in the hub' });
      hub.close();
      const answered = await poll; // within the test's timeout, far short of the 50 s poll
      expect(answered.status).toBe(503);
      expect(answered.headers.get('retry-after')).toBe('5');
      expect(((await answered.json()) as { error: string }).error).toMatch(/the controller is stopping/);
      const later = await post(`${AGENT_API}/jobs/adv-x-1/heartbeat`, { epoch: 1 }, token);
      expect(later.status).toBe(503);
      expect((await post(`${AGENTS_ADMIN_API}/a/revoke`, {})).status).toBe(503);
    } finally {
      await new Promise((r) => server.close(r));
      hub.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
