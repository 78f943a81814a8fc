import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AgentCapabilities, Claim, Enrolled } from '../../../runtime/agent/protocol.js';
import type { JobRequest } from '../types.js';
import { AgentHub, type PoolBinding, type Refusal } from './hub.js';
import type { AgentRec } from './hub-state.js';

const TOKEN = 'the-enrollment-token-0123456789';
const iso = (ms: number) => new Date(ms).toISOString();
const caps: AgentCapabilities = { hostname: 'h', cores: 4, ramGiB: 16, os: 'linux', node: 'v20', gpus: [] };
const gpuCaps: AgentCapabilities = { ...caps, cuda: '12.4', gpus: [{ name: 'NVIDIA L4', vramGiB: 24 }] };

const request = (run: string, n = 1, gpus = 0): JobRequest => ({
  jobName: `adv-${run}-${n}`,
  run,
  attempt: n,
  spec: { command: ['true'], ...(gpus ? { resources: { gpus } } : {}) },
  argv: ['true'],
  code: { commit: 'c0ffee' },
  env: {},
  secretEnv: { STORE_KEY: 'secret-value' },
});

describe('AgentHub', () => {
  let dir: string;
  let t = 1_000_000;
  let hub: AgentHub;
  const now = () => t;
  const binding = (over: Partial<PoolBinding> = {}): PoolBinding => ({
    backend: 'desks',
    pool: 'desks',
    staleAfterSec: 10,
    enrollToken: () => TOKEN,
    requestFor: () => undefined,
    code: { treeOf: async () => 'tree', payload: async () => Buffer.from('tgz'), extractTo: async () => {} },
    ...over,
  });
  const open = () => {
    const h = new AgentHub(dir, pino({ level: 'silent' }), now);
    h.attach(binding());
    return h;
  };
  const enroll = (h: AgentHub, name: string, c = caps): AgentRec => {
    const e = h.register({ enrollToken: TOKEN, name, capabilities: c }) as Enrolled;
    return h.authenticate(e.token)!;
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-hub-'));
    t = 1_000_000;
    hub = open();
  });
  afterEach(async () => {
    hub.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('enrolls with the Backend’s token only, once per name, and keeps only a hash of the agent token', async () => {
    expect(hub.register({ enrollToken: 'wrong', name: 'a', capabilities: caps })).toMatchObject({
      status: 401,
    });
    const e = hub.register({ enrollToken: TOKEN, name: 'a', capabilities: caps }) as Enrolled;
    expect(e.token).toMatch(/^adva_/);
    expect(e.pools).toEqual(['desks']);
    expect(hub.register({ enrollToken: TOKEN, name: 'a', capabilities: caps })).toMatchObject({
      status: 409,
    });
    expect(hub.authenticate(e.token)?.name).toBe('a');
    expect(hub.authenticate('adva_guess')).toBeUndefined();
    const journal = await readFile(join(dir, 'agents', 'journal.jsonl'), 'utf8');
    expect(journal).not.toContain(e.token);
    expect(journal).not.toContain(TOKEN);
  });

  it('opens nothing with an enrollment token shorter than 16 characters, and logs why', async () => {
    hub.close();
    const lines: string[] = [];
    hub = new AgentHub(dir, pino({ level: 'info' }, { write: (l: string) => void lines.push(l) }), now);
    hub.attach(binding({ enrollToken: () => 'ab' }));
    expect(hub.register({ enrollToken: 'ab', name: 'a', capabilities: caps })).toMatchObject({ status: 401 });
    expect(lines.join('')).toContain('an enrollment token shorter than 16 characters opens nothing');
    expect(lines.join('')).not.toContain('"ab"');
  });

  it('hands one attempt to exactly one of two waiting agents, and never journals secrets', async () => {
    const [a, b] = [enroll(hub, 'a'), enroll(hub, 'b')];
    const alive = () => true;
    const pa = hub.claim(a, { capabilities: caps }, 5_000, alive);
    const pb = hub.claim(b, { capabilities: caps }, 50, alive);
    hub.enqueue('desks', [request('r')]);
    const [ca, cb] = await Promise.all([pa, pb]);
    expect(ca).toMatchObject({ job: 'adv-r-1', epoch: 1, secretEnv: { STORE_KEY: 'secret-value' } });
    expect(cb).toBeUndefined();
    expect(await readFile(join(dir, 'agents', 'journal.jsonl'), 'utf8')).not.toContain('secret-value');
  });

  it('hands the agent the job’s setup and uv settings in the claim’s env (ADV_SETUP, ADV_UV)', async () => {
    const a = enroll(hub, 'a');
    const setup = [{ from: 'Environment cuda12@2', run: 'module load cuda/12.4' }];
    hub.enqueue('desks', [{ ...request('s'), env: { LR: '1' }, setup, uv: { groups: ['train'] } }]);
    const c = (await hub.claim(a, { capabilities: caps }, 0, () => true)) as Claim;
    expect(c.env).toEqual({
      LR: '1',
      ADV_SETUP: JSON.stringify(setup),
      ADV_UV: '{"groups":["train"]}',
    });
  });

  it('never offers a CUDA attempt to an agent without CUDA', async () => {
    const cpu = enroll(hub, 'cpu');
    hub.enqueue('desks', [request('g', 1, 1)]);
    expect(await hub.claim(cpu, { capabilities: caps }, 0, () => true)).toBeUndefined();
    const handle = { backend: 'desks', jobName: 'adv-g-1', jobId: 'adv-g-1' };
    expect(hub.observe('desks', [handle])[0]?.message).toMatch(
      /no agent of pool desks can run it \(cpu: has no CUDA\)/,
    );
    const gpu = enroll(hub, 'gpu', gpuCaps);
    expect(hub.observe('desks', [handle])[0]?.message).toMatch(/one of 1 fitting agent/);
    expect(await hub.claim(gpu, { capabilities: gpuCaps }, 0, () => true)).toMatchObject({ job: 'adv-g-1' });
  });

  it('ends a claim whose lease ran out as Lost, and answers its holder 409 from then on', async () => {
    const a = enroll(hub, 'a');
    hub.enqueue('desks', [request('r')]);
    const c = (await hub.claim(a, { capabilities: caps }, 0, () => true)) as Claim;
    t += 9_000;
    expect(hub.heartbeat(a, c.job, { epoch: c.epoch })).toEqual({ cancel: false, leaseSec: 10 });
    expect(hub.heartbeat(a, c.job, { epoch: c.epoch + 1 })).toMatchObject({ status: 409 });
    t += 10_001;
    const [o] = hub.observe('desks', [{ backend: 'desks', jobName: c.job, jobId: c.job }]);
    expect(o).toMatchObject({ state: 'Lost', reason: 'LeaseExpired' });
    expect((hub.heartbeat(a, c.job, { epoch: c.epoch }) as Refusal).status).toBe(409);
    expect(
      hub.complete(a, c.job, {
        epoch: c.epoch,
        exit: { exitCode: 0, reason: 'Completed', startedAt: '', finishedAt: '' },
      }),
    ).toMatchObject({ status: 409 });
  });

  it('a restarted hub honours the claims it journaled and hands none out again', async () => {
    const a = enroll(hub, 'a');
    const b = enroll(hub, 'b');
    hub.enqueue('desks', [request('r'), request('s')]);
    const c = (await hub.claim(a, { capabilities: caps }, 0, () => true)) as Claim;
    hub.close();
    t += 60_000; // down longer than the lease: the agents had no one to talk to
    hub = new AgentHub(dir, pino({ level: 'silent' }), now);
    hub.attach(binding({ requestFor: (job) => (job === 'adv-s-1' ? request('s') : undefined) }));
    expect(hub.heartbeat(a, c.job, { epoch: c.epoch })).toMatchObject({ cancel: false });
    // The other queued attempt is claimable (its request rebuilt), the held one is not offered again.
    const next = (await hub.claim(b, { capabilities: caps }, 0, () => true)) as Claim;
    expect(next).toMatchObject({ job: 'adv-s-1', epoch: c.epoch + 1 });
    expect(await hub.claim(b, { capabilities: caps }, 0, () => true)).toBeUndefined();
  });

  it('cancels: a queued attempt ends at once, a claimed one is told at its next heartbeat', async () => {
    const a = enroll(hub, 'a');
    hub.enqueue('desks', [request('r'), request('q')]);
    const c = (await hub.claim(a, { capabilities: caps }, 0, () => true)) as Claim;
    hub.cancel('adv-q-1');
    hub.cancel(c.job);
    const [q] = hub.observe('desks', [{ backend: 'desks', jobName: 'adv-q-1', jobId: 'x' }]);
    expect(q?.state).toBe('Cancelled');
    expect(hub.heartbeat(a, c.job, { epoch: c.epoch })).toMatchObject({ cancel: true });
  });

  it('forgets what no live attempt owns, and asks an agent to stop such a job', async () => {
    const a = enroll(hub, 'a');
    hub.enqueue('desks', [request('r'), request('q')]);
    const c = (await hub.claim(a, { capabilities: caps }, 0, () => true)) as Claim;
    hub.observe('desks', [], new Set());
    expect(hub.has('adv-q-1')).toBe(false);
    expect(hub.heartbeat(a, c.job, { epoch: c.epoch })).toMatchObject({ cancel: true });
  });

  it('rewrites a journal that has grown well past what it describes at start, keeping the state', async () => {
    hub.close();
    hub = new AgentHub(dir, pino({ level: 'silent' }), now, { compactAtBytes: 1 << 30 });
    hub.attach(binding());
    const a = enroll(hub, 'a');
    hub.enqueue(
      'desks',
      Array.from({ length: 700 }, (_, i) => request(`old${i}`)),
    );
    hub.observe('desks', [], new Set()); // no live attempt owns them: 700 forgets
    hub.enqueue('desks', [request('kept')]);
    const c = (await hub.claim(a, { capabilities: caps }, 0, () => true)) as Claim;
    const file = join(dir, 'agents', 'journal.jsonl');
    const lines = async () => (await readFile(file, 'utf8')).trim().split('\n').length;
    expect(await lines()).toBeGreaterThan(1400);
    hub.close();
    hub = new AgentHub(dir, pino({ level: 'silent' }), now, { compactAtBytes: 64 << 10 });
    hub.attach(binding());
    expect(await lines()).toBeLessThan(10);
    expect(hub.has('adv-old1-1')).toBe(false);
    expect(hub.heartbeat(a, c.job, { epoch: c.epoch })).toMatchObject({ cancel: false });
  });

  it('keeps the journal bounded while running, under a stream of distinct capabilities, and loses nothing', async () => {
    hub.close();
    hub = new AgentHub(dir, pino({ level: 'silent' }), now, { compactAtBytes: 16 << 10 });
    hub.attach(binding({ staleAfterSec: 100 }));
    const a = enroll(hub, 'a');
    hub.enqueue('desks', [request('r'), request('s')]);
    const c = (await hub.claim(a, { capabilities: caps }, 0, () => true)) as Claim;
    const s = (await hub.claim(a, { capabilities: caps }, 0, () => true)) as Claim;
    const exit = { exitCode: 0, reason: 'Completed' as const, startedAt: '', finishedAt: '' };
    expect(hub.complete(a, s.job, { epoch: s.epoch, exit })).toEqual({ ok: true });
    hub.observe('desks', [], new Set([c.job])); // the highest epoch's claim is forgotten
    const file = join(dir, 'agents', 'journal.jsonl');
    let largest = 0;
    // 500 changes of a 253-character host name, each a minute apart (so each is journaled): ~200 KB unbounded.
    for (let i = 0; i < 500; i++) {
      t += 61_000;
      expect(hub.heartbeat(a, c.job, { epoch: c.epoch })).toMatchObject({ cancel: false });
      const hostname = `${i}-`.padEnd(253, 'h');
      await hub.claim(a, { capabilities: { ...caps, hostname } }, 0, () => true);
      if (i % 20 === 0) largest = Math.max(largest, (await stat(file)).size);
    }
    expect(largest).toBeLessThan(5 * (16 << 10));
    expect((await stat(file)).size).toBeLessThan(5 * (16 << 10));
    hub.close();
    hub = open();
    expect(hub.summaries()[0]?.capabilities.hostname).toBe('499-'.padEnd(253, 'h'));
    expect(hub.heartbeat(a, c.job, { epoch: c.epoch })).toMatchObject({ cancel: false });
    // The epoch counter survives compaction: a new claim never reuses an epoch handed out before.
    hub.enqueue('desks', [request('q')]);
    expect(await hub.claim(a, { capabilities: caps }, 0, () => true)).toMatchObject({
      job: 'adv-q-1',
      epoch: s.epoch + 1,
    });
  }, 60_000);

  it('journals a capability change at most once a minute per agent, and none that changes nothing', async () => {
    const a = enroll(hub, 'a');
    const file = join(dir, 'agents', 'journal.jsonl');
    const size = async () => (await stat(file)).size;
    const before = await size();
    await hub.claim(a, { capabilities: caps }, 0, () => true);
    expect(await size()).toBe(before);
    await hub.claim(a, { capabilities: { ...caps, cores: 8 } }, 0, () => true);
    const once = await size();
    expect(once).toBeGreaterThan(before);
    for (let i = 0; i < 50; i++)
      await hub.claim(a, { capabilities: { ...caps, cores: 9 + i } }, 0, () => true);
    expect(await size()).toBe(once);
    expect(hub.summaries()[0]?.capabilities.cores).toBe(58); // kept, in memory
    t += 61_000;
    await hub.claim(a, { capabilities: { ...caps, cores: 2 } }, 0, () => true);
    expect(await size()).toBeGreaterThan(once);
  });

  it('matches a Backend’s selector against the labels an agent enrolled with, not those a claim sends', async () => {
    hub.close();
    hub = new AgentHub(dir, pino({ level: 'silent' }), now);
    hub.attach(binding({ selector: { room: 'b12' } }));
    const plain = enroll(hub, 'plain');
    hub.enqueue('desks', [request('r')]);
    expect(
      await hub.claim(plain, { capabilities: caps, labels: { room: 'b12' } }, 0, () => true),
    ).toBeUndefined();
    expect(hub.summaries()[0]?.labels).toEqual({});
    const e = hub.register({
      enrollToken: TOKEN,
      name: 'b12',
      capabilities: caps,
      labels: { room: 'b12' },
    }) as Enrolled;
    expect(await hub.claim(hub.authenticate(e.token)!, { capabilities: caps }, 0, () => true)).toMatchObject({
      job: 'adv-r-1',
    });
  });

  it('revoke ends the agent’s claims at once, and a new enrollment of its name inherits none of them', async () => {
    const evil = enroll(hub, 'evil1');
    hub.enqueue('desks', [request('ag1')]);
    const c = (await hub.claim(evil, { capabilities: caps }, 0, () => true)) as Claim;
    expect(hub.heartbeat(evil, c.job, { epoch: c.epoch, startedAt: iso(t) })).toMatchObject({
      cancel: false,
    });
    expect(hub.setAgent('evil1', 'revoke')).toMatchObject({ state: 'Revoked', jobs: [] });
    const handle = { backend: 'desks', jobName: c.job, jobId: c.job };
    expect(hub.observe('desks', [handle])[0]).toMatchObject({
      state: 'Lost',
      reason: 'AgentRevoked',
      startedAt: iso(t),
      message: expect.stringContaining('agent evil1 was revoked'),
    });
    const again = enroll(hub, 'evil1');
    expect(hub.heartbeat(again, c.job, { epoch: c.epoch })).toMatchObject({ status: 409 });
    const exit = { exitCode: 0, reason: 'Completed' as const, startedAt: '', finishedAt: '' };
    expect(hub.complete(again, c.job, { epoch: c.epoch, exit })).toMatchObject({ status: 409 });
    // Persisted: a restarted hub knows the claim ended, and still hands it to nobody.
    hub.close();
    hub = open();
    expect(hub.observe('desks', [handle])[0]).toMatchObject({ state: 'Lost', reason: 'AgentRevoked' });
    expect(hub.complete(again, c.job, { epoch: c.epoch, exit })).toMatchObject({ status: 409 });
  });

  it('binds a claim journaled before enrollments were recorded to the enrollment its agent had then', async () => {
    hub.close();
    const sha = (x: string) => createHash('sha256').update(x).digest('hex');
    const rec = (token: string, revoked = false) => ({
      name: 'old',
      tokenHash: sha(token),
      pools: ['desks'],
      labels: {},
      capabilities: caps,
      enrolledAt: iso(t),
      ...(revoked ? { revoked } : {}),
    });
    const q = {
      job: 'adv-r-1',
      backend: 'desks',
      pool: 'desks',
      run: 'r',
      attempt: 1,
      need: { gpus: 0, cuda: false },
      runLabels: {},
      queuedAt: iso(t),
    };
    const lines = [
      { op: 'agent', a: rec('adva_first') },
      { op: 'queue', j: q },
      { op: 'claim', job: 'adv-r-1', agent: 'old', epoch: 1, at: iso(t) },
      { op: 'agent', a: rec('adva_first', true) },
      { op: 'agent', a: rec('adva_second') },
    ];
    await mkdir(join(dir, 'agents'), { recursive: true });
    await writeFile(
      join(dir, 'agents', 'journal.jsonl'),
      lines.map((l) => JSON.stringify(l) + '\n').join(''),
    );
    hub = open();
    const second = hub.authenticate('adva_second')!;
    expect(second.name).toBe('old');
    expect(hub.heartbeat(second, 'adv-r-1', { epoch: 1 })).toMatchObject({ status: 409 });
  });

  it('closing answers every waiting long poll at once, then grants no claim and expires no lease', async () => {
    const [a, b] = [enroll(hub, 'a'), enroll(hub, 'b')];
    hub.enqueue('desks', [request('r'), request('s')]);
    const c = (await hub.claim(a, { capabilities: caps }, 0, () => true)) as Claim;
    // Nothing is left in the queue for b: it waits up to 50 s.
    hub.cancel('adv-s-1');
    const waiting = hub.claim(b, { capabilities: caps }, 50_000, () => true);
    hub.close();
    expect(hub.closing).toBe(true);
    await expect(waiting).resolves.toBeUndefined();
    expect(() => hub.enqueue('desks', [request('q')])).toThrow(/the controller is stopping/);
    expect(await hub.claim(b, { capabilities: caps }, 0, () => true)).toBeUndefined();
    t += 60_000; // far past the lease: the agent had no one to renew with
    const [o] = hub.observe('desks', [{ backend: 'desks', jobName: c.job, jobId: c.job }]);
    expect(o).toMatchObject({ state: 'Pending', reason: 'Claimed' });
  });

  it('grants no claim once closed, even of an attempt queued before', async () => {
    const b = enroll(hub, 'b');
    hub.enqueue('desks', [request('r')]);
    hub.close();
    expect(await hub.claim(b, { capabilities: caps }, 0, () => true)).toBeUndefined();
    expect(await hub.claim(b, { capabilities: caps }, 50_000, () => true)).toBeUndefined();
  });

  it('drain stops new claims, revoke stops the token', async () => {
    const e = hub.register({ enrollToken: TOKEN, name: 'a', capabilities: caps }) as Enrolled;
    const a = hub.authenticate(e.token)!;
    hub.setAgent('a', 'drain');
    hub.enqueue('desks', [request('r')]);
    expect(
      await hub.claim(hub.authenticate(e.token)!, { capabilities: caps }, 0, () => true),
    ).toBeUndefined();
    expect(hub.summaries()[0]).toMatchObject({ name: 'a', state: 'Drained' });
    hub.setAgent('a', 'resume');
    hub.setAgent('a', 'revoke');
    expect(hub.authenticate(e.token)).toBeUndefined();
    expect(hub.setAgent('nobody', 'drain')).toMatchObject({ status: 404 });
    expect(a.name).toBe('a');
  });
});
