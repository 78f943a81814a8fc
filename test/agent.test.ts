/**
 * The pull agent end to end: a real controller (in process, its HTTP listener on loopback) and real
 * `adv agent` processes (the compiled CLI) that claim, run under `adv exec`, heartbeat and report.
 * The toy workload succeeds on an agent; an agent SIGKILLed mid-run loses its lease and the attempt
 * resumes on another from its checkpoint, while the killed one, back, gets 409 and runs nothing
 * twice; two agents race for one attempt; a stalled link (a TCP proxy that holds the bytes) never
 * lets two run at once; a wrong or revoked token gets 401; an agent without CUDA never claims a
 * CUDA run; a controller restarted while agents hold claims honours every one.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import { serve, type Serving } from '../controller/serve.js';
import { ADV, startAgentProcess, type AgentProc } from './helpers/backends/agent.js';
import { agentBackendYaml, FILE_STORAGE, TRAIN } from './helpers/backends/kinds.js';
import { freePort } from './helpers/net.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { startStallProxy } from './helpers/servers/stall-proxy.js';
import { passUntil as passesUntil, waitFor } from './helpers/wait.js';
import type { ExecRecord, ExitRecord } from '../runtime/records.js';

const ENROLL = 'enroll-token-for-the-agent-pool-0123456789';
const API = 'api-token-for-operators-0123456789abcdef';

const runYaml = (name: string, args: string, extra = '') => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command: [python3, train.py, ${args
    .split(' ')
    .map((a) => JSON.stringify(a))
    .join(', ')}]
  policy: {maxAttempts: 4}
  backendSelector: {order: [desks]}
${extra}`;

describe('agent: hosts that pull their work', () => {
  let tmp: string;
  let wt: WorkTree | undefined;
  let c: Controller | undefined;
  let serving: Serving | undefined;
  let port = 0;
  let dataDir = '';
  const agents: AgentProc[] = [];

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-agent-'));
    // A fake nvidia-smi: the "GPU host" agents have it on their PATH, the CPU-only ones do not.
    await mkdir(join(tmp, 'gpu-bin'));
    await writeFile(
      join(tmp, 'gpu-bin', 'nvidia-smi'),
      `#!/bin/sh\nif [ -n "$1" ]; then echo "0, NVIDIA A100-SXM4-80GB, 81920, 0"; else echo "| NVIDIA-SMI 550.54  Driver Version: 550.54  CUDA Version: 12.4 |"; fi\n`,
    );
    await chmod(join(tmp, 'gpu-bin', 'nvidia-smi'), 0o755);
  });

  afterEach(async () => {
    await Promise.all(agents.splice(0).map((a) => a.stop()));
    await serving?.close();
    await c?.stop();
    serving = undefined;
    c = undefined;
  });

  afterAll(async () => {
    await wt?.cleanup();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  async function startController(files?: Record<string, string>, keepData = false): Promise<Controller> {
    if (files) {
      await wt?.cleanup();
      wt = await makeWorkTree({
        'backends/desks.yaml': agentBackendYaml(),
        'storage.yaml': FILE_STORAGE,
        'train.py': await readFile(TRAIN, 'utf8'),
        ...files,
      });
    }
    if (!keepData) {
      dataDir = join(tmp, `data-${Date.now()}`);
      port = await freePort();
    }
    c = await Controller.create({
      repo: wt!.dir,
      dataDir,
      pollIntervalMs: 200,
      secrets: { env: ['AGENT_ENROLL'] },
      secretEnv: { ...process.env, AGENT_ENROLL: ENROLL },
    });
    await c.init();
    await c.pass(); // the Backend's adapter exists (and mounts the agent API) after the first pass
    serving = await serve(c, { httpAddr: `127.0.0.1:${port}`, watch: false, apiToken: API });
    return c;
  }

  const url = () => `http://127.0.0.1:${port}`;

  async function startAgent(
    name: string,
    opts: { gpu?: boolean; controller?: string; token?: string; extra?: string[]; stateDir?: string } = {},
  ): Promise<AgentProc> {
    const a = await startAgentProcess({
      name,
      controller: opts.controller ?? url(),
      token: opts.token ?? ENROLL,
      stateDir: opts.stateDir ?? join(tmp, `agent-${name}-${Date.now()}`),
      tokenDir: tmp,
      path: (opts.gpu ? `${join(tmp, 'gpu-bin')}:` : '') + process.env.PATH,
      home: process.env.HOME ?? tmp,
      ...(opts.extra ? { extra: opts.extra } : {}),
    });
    agents.push(a);
    return a;
  }

  /** The compiled CLI with the operator's API token (or `env`): its exit code and output. */
  const cli = (args: string[], env: Record<string, string> = { ADV_API_TOKEN: API }) =>
    new Promise<{ code: number | null; out: string }>((resolve) => {
      const p = spawn(process.execPath, [ADV, ...args], {
        env: { PATH: process.env.PATH, HOME: tmp, ...env },
      });
      let out = '';
      p.stdout.on('data', (b: Buffer) => (out += b.toString()));
      p.stderr.on('data', (b: Buffer) => (out += b.toString()));
      p.once('close', (code) => resolve({ code, out }));
    });

  const passUntil = (what: string, done: () => boolean | Promise<boolean>, ms?: number) =>
    passesUntil(c!, what, done, ms);
  const st = (run: string) => c!.runStatus(run)?.status;
  const jobsOf = async (a: AgentProc) => (await readdir(join(a.stateDir, 'jobs')).catch(() => [])).sort();
  const admin = async (path: string, method = 'GET') =>
    (await fetch(url() + path, { method, headers: { authorization: `Bearer ${API}` } })).json() as Promise<{
      agents: { name: string; state: string; jobs: string[]; capabilities: { cuda?: string } }[];
    }>;
  const enrolled = (n: number) =>
    waitFor(
      async () => (await admin('/api/v1/agents')).agents.filter((x) => x.state === 'Ready').length >= n,
      {
        what: `${n} agent(s) enrolled and polling`,
      },
    );

  it('runs the toy workload on an agent; killed, the attempt resumes on another from its checkpoint, and the killed one runs nothing twice', async () => {
    const hold = join(tmp, 'hold-1');
    await writeFile(hold, '');
    await startController({
      'runs/toy.yaml': runYaml('toy', `--steps 40 --ckpt-every 10 --hold-file ${hold} --hold-at 20`),
    });
    const a = await startAgent('desk-a', { gpu: true });
    // Both: its heartbeat (checkpoints, from the store) can come before the agent's word that it runs.
    await passUntil(
      'attempt 1 to run and reach the hold at step 20',
      () => st('toy')?.attempts[0]?.phase === 'Running' && (st('toy')?.attempts[0]?.lastStep ?? 0) >= 20,
    );
    expect(st('toy')!.attempts[0]).toMatchObject({ backend: 'desks', phase: 'Running' });
    expect(await jobsOf(a)).toEqual(['adv-toy-1']);
    a.proc.kill('SIGKILL'); // the agent dies; its job is on its own now
    await a.exited;
    const b = await startAgent('desk-b', { gpu: true });
    // Held at step 20 until its lease runs out: the orphan must stop on its own, not finish.
    await passUntil('attempt 1 to be lost', () => st('toy')?.attempts[0]?.phase === 'Lost');
    await rm(hold);
    await passUntil('the run to succeed on the other agent', () => st('toy')?.phase === 'Succeeded');
    const [first, second] = st('toy')!.attempts;
    expect(first).toMatchObject({ phase: 'Lost', reason: 'LeaseExpired' });
    expect(second).toMatchObject({ phase: 'Succeeded', backend: 'desks' });
    expect(await jobsOf(b)).toEqual(['adv-toy-2']);
    const outB = await readFile(join(b.stateDir, 'jobs', 'adv-toy-2', 'output.log'), 'utf8');
    // From the orphan's last checkpoint: step 20, or 21 when its SIGTERM handler saved one more.
    expect(Number(/resumed from step (\d+)/.exec(outB)?.[1])).toBeGreaterThanOrEqual(20);
    expect(outB).toMatch(/done: step 40/);
    // The orphaned job stopped itself when its lease ran out, before the other agent started.
    const dirA = join(a.stateDir, 'jobs', 'adv-toy-1');
    const exitA = JSON.parse(await readFile(join(dirA, 'exit.json'), 'utf8')) as ExitRecord;
    const execB = JSON.parse(
      await readFile(join(b.stateDir, 'jobs', 'adv-toy-2', 'exec.json'), 'utf8'),
    ) as ExecRecord;
    expect(exitA).toMatchObject({ reason: 'Preempted', message: expect.stringContaining('lease') });
    expect(Date.parse(exitA.finishedAt)).toBeLessThan(Date.parse(execB.startedAt));
    // Back, the killed agent reports its old job, is told 409, and claims nothing it ran before.
    const a2 = await startAgent('desk-a', { gpu: true, stateDir: a.stateDir });
    await waitFor(() => existsSync(join(dirA, 'reported')), {
      what: 'the restarted agent to settle its old job',
      detail: a2.out,
    });
    expect(a2.out()).toContain('the controller no longer holds this claim');
    expect(await jobsOf(a2)).toEqual(['adv-toy-1']);
  }, 240_000);

  it('two agents race for one attempt: exactly one runs it', async () => {
    await startController({ 'backends/desks.yaml': agentBackendYaml() });
    const [a, b] = [await startAgent('race-a', { gpu: true }), await startAgent('race-b', { gpu: true })];
    await enrolled(2);
    // Both are long-polling when the run appears.
    await wt!.write('runs/race.yaml', runYaml('race', '--steps 10 --ckpt-every 5'));
    await wt!.commit('add race');
    c!.requestFetch('test');
    await passUntil('the run to succeed', () => st('race')?.phase === 'Succeeded');
    expect(st('race')!.attempts).toHaveLength(1);
    const ran = [...(await jobsOf(a)), ...(await jobsOf(b))];
    expect(ran).toEqual(['adv-race-1']);
    const journal = await readFile(join(dataDir, 'agents', 'journal.jsonl'), 'utf8');
    expect(journal.split('\n').filter((l) => l.includes('"op":"claim"'))).toHaveLength(1);
  }, 120_000);

  it('a stalled link never lets two agents run the attempt at once; the stalled one gets 409 once it flows again', async () => {
    const hold = join(tmp, 'hold-stall');
    await writeFile(hold, '');
    await startController({
      'runs/stall.yaml': runYaml('stall', `--steps 30 --ckpt-every 10 --hold-file ${hold} --hold-at 10`),
    });
    const proxy = await startStallProxy('127.0.0.1', port);
    try {
      const a = await startAgent('far', { gpu: true, controller: proxy.url });
      await passUntil(
        'attempt 1 to reach step 10 behind the proxy',
        () => (st('stall')?.attempts[0]?.lastStep ?? 0) >= 10,
      );
      proxy.hold();
      const b = await startAgent('near', { gpu: true });
      await passUntil('attempt 1 to be lost', () => st('stall')?.attempts[0]?.phase === 'Lost');
      await rm(hold);
      await passUntil('the run to succeed on the near agent', () => st('stall')?.phase === 'Succeeded');
      expect(st('stall')!.attempts.map((x) => x.phase)).toEqual(['Lost', 'Succeeded']);
      const exitA = JSON.parse(
        await readFile(join(a.stateDir, 'jobs', 'adv-stall-1', 'exit.json'), 'utf8'),
      ) as ExitRecord;
      const execB = JSON.parse(
        await readFile(join(b.stateDir, 'jobs', 'adv-stall-2', 'exec.json'), 'utf8'),
      ) as ExecRecord;
      expect(exitA.reason).toBe('Preempted');
      expect(Date.parse(exitA.finishedAt)).toBeLessThan(Date.parse(execB.startedAt));
      proxy.release();
      await waitFor(() => existsSync(join(a.stateDir, 'jobs', 'adv-stall-1', 'reported')), {
        what: 'the stalled agent to hear 409 once the link flows',
        timeoutMs: 60_000,
        detail: a.out,
      });
      expect(await jobsOf(a)).toEqual(['adv-stall-1']);
    } finally {
      proxy.release();
      await proxy.stop();
    }
  }, 240_000);

  it('a wrong token gets 401 and claims nothing; a revoked agent stops; a drained one takes no work', async () => {
    await startController({ 'backends/desks.yaml': agentBackendYaml() });
    const wrong = await startAgent('intruder', { gpu: true, token: 'not-the-enrollment-token-at-all' });
    expect(await wrong.exited).toBe(8); // refused for good: systemd does not restart it
    expect(wrong.out()).toMatch(/enrollment refused: .*401/);
    const raw = await fetch(`${url()}/api/v1/agent/claims`, {
      method: 'POST',
      headers: { authorization: 'Bearer adva_forged', 'content-type': 'application/json' },
      body: '{}',
    });
    expect(raw.status).toBe(401);
    const ok = await startAgent('desk-r', { gpu: true });
    await enrolled(1);
    // The operator's view, through the CLI and the API token.
    const listed = await cli(['get', 'agents', '--controller', url(), '-o', 'json']);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.out)).toMatchObject({
      agents: [
        { name: 'desk-r', state: 'Ready', pools: ['desks'], capabilities: { cuda: '12.4' }, jobs: [] },
      ],
    });
    expect((await cli(['get', 'agents', '--controller', url()], {})).out).toMatch(
      /bad or missing bearer token/,
    );
    // Drained: no new work.
    expect((await cli(['agent', 'drain', 'desk-r', '--controller', url()])).out).toContain(
      'agent/desk-r: Drained',
    );
    await wt!.write('runs/later.yaml', runYaml('later', '--steps 5 --ckpt-every 5'));
    await wt!.commit('add later');
    c!.requestFetch('test');
    await passUntil('the run to be queued for an agent', () => st('later')?.attempts[0]?.phase === 'Queued');
    await c!.pass();
    expect(await jobsOf(ok)).toEqual([]);
    expect((await admin('/api/v1/agents')).agents[0]).toMatchObject({ name: 'desk-r', state: 'Drained' });
    // Revoked: its token stops working and the agent exits saying so.
    const revoke = await fetch(`${url()}/api/v1/agents/desk-r/revoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API}` },
    });
    expect(revoke.status).toBe(200);
    expect(await ok.exited).toBe(8);
    expect(ok.out()).toContain('revoked');
    const saved = JSON.parse(await readFile(join(ok.stateDir, 'agent.json'), 'utf8')) as { token: string };
    const replay = await fetch(`${url()}/api/v1/agent/claims?wait=0`, {
      method: 'POST',
      headers: { authorization: `Bearer ${saved.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        capabilities: { hostname: 'x', cores: 1, ramGiB: 1, os: 'linux', node: 'v20', gpus: [] },
      }),
    });
    expect(replay.status).toBe(401);
    expect(await jobsOf(ok)).toEqual([]);
    // The operator endpoints want the API token; the agent token is not it.
    expect(
      (await fetch(`${url()}/api/v1/agents`, { headers: { authorization: `Bearer ${saved.token}` } })).status,
    ).toBe(401);
  }, 120_000);

  it('an agent without CUDA never claims a CUDA run; one with CUDA does', async () => {
    await startController({
      'runs/gpu.yaml': runYaml('gpu', '--steps 5 --ckpt-every 5', '  resources: {gpus: 1}\n'),
    });
    const cpu = await startAgent('cpu-only');
    await enrolled(1);
    await passUntil('the run to wait for a fitting agent', () =>
      /cpu-only: has no CUDA/.test(st('gpu')?.message ?? ''),
    );
    expect(await jobsOf(cpu)).toEqual([]);
    const gpu = await startAgent('gpu-box', { gpu: true });
    await passUntil('the run to succeed on the CUDA agent', () => st('gpu')?.phase === 'Succeeded');
    expect(await jobsOf(cpu)).toEqual([]);
    expect(await jobsOf(gpu)).toEqual(['adv-gpu-1']);
    const caps = (await admin('/api/v1/agents')).agents.find((x) => x.name === 'gpu-box')!.capabilities;
    expect(caps.cuda).toBe('12.4');
  }, 120_000);

  it('a controller restarted while agents hold claims honours every one and hands none out twice', async () => {
    const hold = join(tmp, 'hold-restart');
    await writeFile(hold, '');
    await startController({
      'runs/held.yaml': runYaml('held', `--steps 20 --ckpt-every 10 --hold-file ${hold} --hold-at 10`),
    });
    const a = await startAgent('holder', { gpu: true });
    await passUntil('the held attempt to run', () => (st('held')?.attempts[0]?.lastStep ?? 0) >= 10);
    await serving!.close();
    await c!.stop();
    const spare = await startAgent('spare', { gpu: true });
    await startController(undefined, true); // same data dir, same port
    await rm(hold);
    await passUntil('the run to succeed', () => st('held')?.phase === 'Succeeded');
    expect(st('held')!.attempts).toHaveLength(1);
    expect(st('held')!.attempts[0]).toMatchObject({ phase: 'Succeeded', lastStep: 20 });
    expect(await jobsOf(a)).toEqual(['adv-held-1']);
    expect(await jobsOf(spare)).toEqual([]);
  }, 120_000);
});
