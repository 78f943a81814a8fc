import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_API, AGENTS_ADMIN_API } from '../../../runtime/agent/protocol.js';
import { agentApi, agentsAdminApi } from './api.js';
import { AgentHub } from './hub.js';

const TOKEN = 'enrollment-token-for-api-tests';
const caps = { hostname: 'h', cores: 2, ramGiB: 4, os: 'linux', node: 'v20', gpus: [] };

describe('the agent API over HTTP', () => {
  let dir: string;
  let hub: AgentHub;
  let server: Server;
  let base = '';
  let agentToken = '';

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
    const agent = agentApi(hub);
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
    hub.enqueue('desks', [
      {
        jobName: 'adv-fork-mid-2026-01-21-001-1',
        run: 'fork-mid-2026-01-21-001',
        attempt: 1,
        spec: { command: ['true'] },
        argv: ['true'],
        code: { commit: 'c0ffee' },
        env: {},
        secretEnv: {},
      },
    ]);
    expect((await claim({ runs: ['*'.repeat(250) + '!'] })).status).toBe(204);
    const healthy = await fetch(`${base}${AGENTS_ADMIN_API}`, {
      headers: { authorization: 'Bearer operator' },
    });
    expect(healthy.status).toBe(200);
  });

  it('keeps the operators’ routes for the API token', async () => {
    expect(
      (await fetch(base + AGENTS_ADMIN_API, { headers: { authorization: `Bearer ${agentToken}` } })).status,
    ).toBe(401);
    const list = await fetch(base + AGENTS_ADMIN_API, { headers: { authorization: 'Bearer operator' } });
    expect(((await list.json()) as { agents: { name: string }[] }).agents.map((a) => a.name)).toEqual(['a']);
    expect((await post(`${AGENTS_ADMIN_API}/a/drain`, {}, 'operator')).status).toBe(200);
    expect((await post(`${AGENTS_ADMIN_API}/zz/drain`, {}, 'operator')).status).toBe(404);
  });
});
