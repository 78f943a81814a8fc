/**
 * The local backend with the real `adv exec`, started from source as tests and `npm run` scripts
 * start it (through tsx's loader): where adv exec runs, and that it ends whatever is removed under
 * its job.
 */
import { readFileSync, readlinkSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { processStartTicks } from '../../../runtime/proc.js';
import { submitOne, type BackendContext, type JobRequest } from '../types.js';
import { LocalBackend } from './adapter.js';
import { removeTree } from '../../../test/helpers/io.js';

let tmp: string;
/** Every adv exec this file started: killed (with their workloads' groups) at the end whatever happened. */
const started: { pid: number; dir: string }[] = [];

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-local-'));
});
/** Every backend made here: closed at the end, which ends the adv exec each keeps waiting. */
const backends: LocalBackend[] = [];

afterAll(async () => {
  for (const b of backends) await b.close();
  for (const { pid, dir } of started) {
    const child = (await readFile(join(dir, 'exec.json'), 'utf8').catch(() => '{}')) as string;
    for (const p of [pid, (JSON.parse(child) as { childPid?: number }).childPid])
      if (p)
        try {
          process.kill(-p, 'SIGKILL');
        } catch {
          // gone
        }
  }
  await rm(tmp, { recursive: true, force: true });
});

function backend(dataDir: string, standby = true): LocalBackend {
  const ctx: BackendContext = {
    dataDir,
    logger: pino({ level: 'silent' }),
    now: Date.now,
    code: {
      treeOf: async () => 'tree',
      payload: async () => Buffer.alloc(0),
      extractTo: async () => undefined,
    },
    ssh: () => {
      throw new Error('no ssh here');
    },
  };
  const b = new LocalBackend('local', ctx, undefined, undefined, standby);
  backends.push(b);
  return b;
}

const job = (name: string, argv: string[], store?: string): JobRequest => ({
  jobName: name,
  run: name,
  attempt: 1,
  spec: {},
  argv,
  code: { commit: 'c1' },
  env: {},
  ...(store ? { store: { url: store } } : {}),
});

async function submit(b: LocalBackend, dataDir: string, j: JobRequest): Promise<number> {
  const pid = Number((await submitOne(b, j)).jobId);
  started.push({ pid, dir: join(dataDir, 'local', 'local', 'jobs', j.jobName) });
  return pid;
}

/** Waits until `pid` has ended (a zombie counts as ended), with a bound far above a loaded machine's start-up. */
const ended = (pid: number, what: string) =>
  vi.waitFor(
    () => {
      if (processStartTicks(pid) !== undefined) throw new Error(`${what} (pid ${pid}) still runs`);
    },
    { timeout: 90_000, interval: 100 },
  );

describe('local backend jobs', () => {
  it('runs adv exec in a dir that outlives the job, and the workload in its working dir', async () => {
    const dataDir = join(tmp, 'cwd');
    const b = backend(dataDir);
    const dir = join(dataDir, 'local', 'local', 'jobs', 'adv-where-1');
    const pid = await submit(
      b,
      dataDir,
      job('adv-where-1', ['sh', '-c', 'pwd > "$ADV_JOB_DIR/pwd"; sleep 60']),
    );
    const workloadCwd = await vi.waitFor(() => readFile(join(dir, 'pwd'), 'utf8'), { timeout: 60_000 });
    expect(workloadCwd.trim()).toBe(join(dir, 'work'));
    // Inside the job dir, adv exec would die with it (see the next test).
    expect(readlinkSync(`/proc/${pid}/cwd`)).toBe('/');
    await b.cancel({ backend: 'local', jobName: 'adv-where-1', jobId: String(pid) });
    await ended(pid, 'adv exec of a cancelled job');
  }, 120_000);

  it('gives adv exec the setup, the uv settings and the data dir’s cache (ADV_SETUP, ADV_UV, ADV_CACHE_DIR)', async () => {
    const dataDir = join(tmp, 'setup');
    // Spawned, not handed to a standby: what it was started with is then its /proc environ.
    const b = backend(dataDir, false);
    const setup = [{ from: 'Run', run: 'true' }];
    const j = { ...job('adv-setup-1', ['sleep', '60']), setup, uv: { python: '3.12' } };
    const pid = await submit(b, dataDir, j);
    // What the backend started adv exec with, whatever adv exec does with it.
    const environ = Object.fromEntries(
      readFileSync(`/proc/${pid}/environ`, 'utf8')
        .split('\0')
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    );
    expect(environ).toMatchObject({
      ADV_SETUP: JSON.stringify(setup),
      ADV_UV: '{"python":"3.12"}',
      ADV_CACHE_DIR: join(dataDir, 'cache'),
    });
    await b.cancel({ backend: 'local', jobName: 'adv-setup-1', jobId: String(pid) });
    await ended(pid, 'adv exec of a cancelled job');
  }, 120_000);

  it('ends every adv exec whose job dir and store are removed while it starts or runs', async () => {
    // Removed at staggered moments after the launch: while node loads adv exec (where tsx's
    // loader thread used to die of the missing working dir and leave adv exec waiting on it for
    // good), while it restores, while the workload runs, after it ended.
    const delaysMs = [100, 250, 400, 550, 700, 900, 1200, 2000];
    const jobs = await Promise.all(
      delaysMs.map(async (delay, i) => {
        const dataDir = join(tmp, `gone-${i}`);
        await mkdir(dataDir, { recursive: true });
        const store = pathToFileURL(join(dataDir, 'store')).href;
        const pid = await submit(
          backend(dataDir),
          dataDir,
          job(`adv-gone-${i}`, ['sh', '-c', 'sleep 0.5'], store),
        );
        await new Promise((r) => setTimeout(r, delay)); // when to remove it: varied, never waited on
        await removeTree(dataDir);
        return { pid, delay };
      }),
    );
    for (const { pid, delay } of jobs)
      await ended(pid, `adv exec of the job removed ${delay} ms after its launch`);
  }, 180_000);
});
