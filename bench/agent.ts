/**
 * The pull agent (issue 17).
 *
 * 1. Claim latency: from `submit` (the attempt queued in the hub) to the workload's first
 *    instruction on a real `adv agent` process (compiled CLI), long polling (`--wait 30`), against
 *    the controller's poll interval (2 s, the default) — and, measured in the same run, the same
 *    agent short-polling (`--wait 0`: one claim request per 2 s, as a polling agent would).
 * 2. Scale: 100 simulated agents (HTTP clients in a child process: register, long-poll, heartbeat
 *    every 2 s, complete after ~1 s of "work") drain 1,000 queued attempts through the hub and its
 *    HTTP API in this process; this process's CPU time and memory are the controller side's cost.
 *    The git side of 1,000 runs is measured by `controller-scale`, not here.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { AgentBackend } from '../controller/backends/agent/adapter.js';
import { submitOne, type BackendContext, type JobRequest } from '../controller/backends/types.js';
import { AdapterPorts } from '../controller/loop/observe/ports.js';
import { serve } from '../controller/serve.js';
import type { Backend as BackendObject } from '../controller/spec/schema.js';
import { AgentClient } from '../runtime/agent/client.js';
import type { AgentCapabilities, Claim, Enrolled } from '../runtime/agent/protocol.js';
import { median, table } from './lib.js';

const ADV = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');
const TOKEN = 'bench-enrollment-token-0123456789';
const POLL_INTERVAL_MS = 2000;
const CAPS: AgentCapabilities = {
  hostname: 'sim',
  cores: 8,
  ramGiB: 32,
  os: 'linux',
  node: process.version,
  gpus: [],
};

interface Hub {
  backend: AgentBackend;
  url: string;
  close(): Promise<void>;
}

async function startHub(dataDir: string, tgz: Buffer): Promise<Hub> {
  const ports = new AdapterPorts();
  const logger = pino({ level: 'silent' });
  const ctx: BackendContext = {
    dataDir,
    logger,
    now: Date.now,
    code: { treeOf: async () => 'tree', payload: async () => tgz, extractTo: async () => {} },
    ssh: () => {
      throw new Error('no ssh');
    },
    secrets: { get: (n: string) => (n === 'ENROLL' ? TOKEN : undefined), where: 'bench' } as never,
    ...ports.lent(() => undefined),
  };
  const spec = {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'Backend',
    metadata: { name: 'desks' },
    spec: { type: 'agent', agent: { tokenSecret: 'ENROLL', staleAfterSec: 10 } },
  } as unknown as BackendObject;
  const backend = new AgentBackend(spec, ctx);
  const served = await serve(
    {
      dataDir,
      logger,
      metrics: { contentType: 'text/plain', text: async () => '' },
      repo: { watchPaths: () => [] },
      requestFetch: () => {},
      requestReconcile: () => {},
      ports,
    },
    { httpAddr: '127.0.0.1:0', watch: false, apiToken: 'bench-api-token-0123456789abcdef' },
  );
  return {
    backend,
    url: served.url!,
    close: async () => {
      await served.close();
      await backend.close();
      await ports.close();
    },
  };
}

const request = (run: string, argv: string[]): JobRequest => ({
  jobName: `adv-${run}-1`,
  run,
  attempt: 1,
  spec: { command: argv },
  argv,
  code: { commit: 'c0ffee' },
  env: {},
});

async function claimLatency(tmp: string, tgz: Buffer, wait: number, n: number): Promise<number[]> {
  const hub = await startHub(join(tmp, `hub-${wait}`), tgz);
  const state = join(tmp, `agent-${wait}`);
  const agent = spawn(
    process.execPath,
    [
      ADV,
      'agent',
      '--controller',
      hub.url,
      '--name',
      `bench-${wait}`,
      '--state-dir',
      state,
      '--wait',
      String(wait),
      '--log-level',
      'warn',
    ],
    {
      env: { PATH: process.env.PATH, HOME: tmp, ADV_AGENT_ENROLL_TOKEN: TOKEN },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  const out: number[] = [];
  try {
    for (let i = 0; i < n + 1; i++) {
      const marker = join(tmp, `started-${wait}-${i}`);
      // Spread the submits over the poll cycle, as real attempts arrive.
      await new Promise((r) => setTimeout(r, 300 + Math.random() * POLL_INTERVAL_MS));
      const t0 = Date.now();
      await submitOne(hub.backend, request(`lat-${wait}-${i}`, ['sh', '-c', `date +%s%3N > ${marker}`]));
      while (!existsSync(marker) || !readFileSync(marker, 'utf8').trim())
        await new Promise((r) => setTimeout(r, 5));
      if (i > 0) out.push(Number(readFileSync(marker, 'utf8')) - t0); // the first one also enrolls
      // Wait for the report, so the next claim finds the agent free.
      const h = { backend: 'desks', jobName: `adv-lat-${wait}-${i}-1`, jobId: '' };
      while ((await hub.backend.poll([h]))[0]!.state !== 'Succeeded')
        await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    agent.kill('SIGTERM');
    await new Promise((r) => agent.once('exit', r));
    await hub.close();
  }
  return out;
}

/** The child: `agents` simulated agents that work until `attempts` have been completed by all of them. */
async function swarm(url: string, agents: number, workMs: number): Promise<void> {
  let idleRounds = 0;
  await Promise.all(
    Array.from({ length: agents }, async (_, i) => {
      const c = new AgentClient(url);
      const e = (await c.call<Enrolled>(
        'POST',
        '/register',
        { enrollToken: TOKEN, name: `sim-${i}`, capabilities: CAPS },
        30_000,
      ))!;
      c.setToken(e.token);
      for (;;) {
        const claim = await c.call<Claim>('POST', '/claims?wait=5', { capabilities: CAPS }, 60_000);
        if (!claim) {
          if (++idleRounds > agents * 2) return; // everyone has been idle a while: the queue is empty
          continue;
        }
        idleRounds = 0;
        const end = Date.now() + workMs;
        while (Date.now() < end) {
          await new Promise((r) => setTimeout(r, Math.min(claim.heartbeatSec * 1000, end - Date.now())));
          await c.call('POST', `/jobs/${claim.job}/heartbeat`, { epoch: claim.epoch }, 30_000);
        }
        const exit = {
          exitCode: 0,
          reason: 'Completed',
          startedAt: new Date().toISOString(),
          finishedAt: new Date().toISOString(),
        };
        await c.call('POST', `/jobs/${claim.job}/complete`, { epoch: claim.epoch, exit }, 30_000);
      }
    }),
  );
}

async function scale(tmp: string, agents: number, attempts: number, workMs: number) {
  const hub = await startHub(join(tmp, 'hub-scale'), Buffer.from(''));
  const rssIdle = process.memoryUsage().rss;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await hub.backend.submit(Array.from({ length: attempts }, (_, i) => request(`s${i}`, ['true'])));
  const queuedMs = performance.now() - t0;
  let peakRss = process.memoryUsage().rss;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 100);
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', import.meta.filename, 'swarm', hub.url, String(agents), String(workMs)],
    {
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  const handles = Array.from({ length: attempts }, (_, i) => ({
    backend: 'desks',
    jobName: `adv-s${i}-1`,
    jobId: '',
  }));
  let done = 0;
  while (done < attempts) {
    await new Promise((r) => setTimeout(r, 250));
    done = (await hub.backend.poll(handles)).filter((o) => o.state === 'Succeeded').length;
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  clearInterval(sampler);
  await new Promise((r) => child.once('exit', r));
  await hub.close();
  return { ms, queuedMs, cpuMs: (cpu.user + cpu.system) / 1000, rssIdle, peakRss, attempts };
}

async function main(): Promise<void> {
  if (process.argv[2] === 'swarm')
    return swarm(process.argv[3]!, Number(process.argv[4]), Number(process.argv[5]));
  const tmp = await mkdtemp(join(tmpdir(), 'adv-bench-agent-'));
  try {
    execFileSync('tar', ['-czf', join(tmp, 'code.tgz'), '-C', tmp, '--files-from', '/dev/null']);
    const tgz = readFileSync(join(tmp, 'code.tgz'));
    const N = 10;
    const long = await claimLatency(tmp, tgz, 30, N);
    const short = await claimLatency(tmp, tgz, 0, N);
    const [ml, ms] = [median(long), median(short)];
    console.log(
      table(
        ['agent', `median of ${N}`, 'max', '× poll interval (2 s)'],
        [
          [
            'long poll (--wait 30)',
            `${ml.toFixed(0)} ms`,
            `${Math.max(...long)} ms`,
            `${(ml / POLL_INTERVAL_MS).toFixed(2)}×`,
          ],
          [
            'short poll (--wait 0, every 2 s)',
            `${ms.toFixed(0)} ms`,
            `${Math.max(...short)} ms`,
            `${(ms / POLL_INTERVAL_MS).toFixed(2)}×`,
          ],
        ],
      ),
    );
    const s = await scale(tmp, 100, 1000, 1000);
    const mib = (b: number) => (b / 2 ** 20).toFixed(0);
    console.log();
    console.log(
      table(
        ['100 agents, 1,000 attempts', 'value'],
        [
          ['queue 1,000 (one journal flush)', `${s.queuedMs.toFixed(0)} ms`],
          [
            'all claimed, run (~1 s each, heartbeats every 2 s) and completed',
            `${(s.ms / 1000).toFixed(1)} s`,
          ],
          [
            'controller-side CPU',
            `${(s.cpuMs / 1000).toFixed(2)} s = ${((100 * s.cpuMs) / s.ms).toFixed(0)}% of one core, ${(s.cpuMs / s.attempts).toFixed(2)} ms per attempt`,
          ],
          ['RSS idle → peak', `${mib(s.rssIdle)} → ${mib(s.peakRss)} MiB`],
        ],
      ),
    );
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

await main();
process.exit(0);
