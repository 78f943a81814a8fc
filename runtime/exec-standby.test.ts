/**
 * The standby adv exec (exec-standby.ts) with the real `adv exec`, started from source as tests
 * start it: a job handed to it runs with its own arguments and environment and writes to its own
 * output.log; a dead standby is never handed a job; closing ends the waiting one.
 */
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { execWouldTake, StandbyExec } from './exec-standby.js';
import { baseJobEnv } from './job-env.js';
import { localExecCommand } from './local-jobs.js';
import { processStartTicks } from './proc.js';

let tmp: string;
const standbys: StandbyExec[] = [];

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-standby-'));
});
afterAll(async () => {
  for (const s of standbys) s.close();
  await rm(tmp, { recursive: true, force: true });
});

function standby(name: string): { s: StandbyExec; dir: string } {
  const dir = join(tmp, name, 'standby');
  const s = new StandbyExec({ dir, command: localExecCommand, env: () => baseJobEnv(process.env), cwd: '/' });
  standbys.push(s);
  return { s, dir };
}

/** Waits until `pid` has ended (a zombie counts), with a bound far above a loaded machine's start-up. */
const ended = (pid: number) =>
  vi.waitFor(
    () => {
      if (processStartTicks(pid) !== undefined) throw new Error(`pid ${pid} still runs`);
    },
    { timeout: 90_000, interval: 100 },
  );

describe('a standby adv exec', () => {
  it('runs the job it is handed, with its arguments and environment, into the job’s output.log', async () => {
    const { s, dir } = standby('run');
    s.warm();
    const pid = s.waitingPid()!;
    expect(pid).toBeGreaterThan(0);
    const jobDir = join(tmp, 'run', 'job');
    await mkdir(jobDir, { recursive: true });
    const output = join(jobDir, 'output.log');
    await writeFile(output, '');
    const args = ['--job-dir', jobDir, '--cwd', jobDir, '--run', 'r', '--attempt', '1', '--'];
    // stdin is /dev/null, as a spawned job's: `cat` ends at once.
    const command = ['sh', '-c', 'echo "v=$MY_VAR n=${#MY_SECRET} pwd=$(pwd)"; cat; echo done'];
    const env = { ...baseJobEnv(process.env), MY_VAR: 'v1', MY_SECRET: 'abcdef' };
    expect(s.take({ args: [...args, ...command], env, output })).toBe(pid);
    const exit = await vi.waitFor(
      async () => JSON.parse(await readFile(join(jobDir, 'exit.json'), 'utf8')) as { exitCode: number },
      { timeout: 90_000, interval: 100 },
    );
    expect(exit.exitCode).toBe(0);
    const exec = JSON.parse(await readFile(join(jobDir, 'exec.json'), 'utf8')) as { pid: number };
    expect(exec.pid).toBe(pid);
    const out = await readFile(output, 'utf8');
    expect(out).toContain(`v=v1 n=6 pwd=${jobDir}`);
    expect(out).toContain('done');
    // Another one waits for the next job; closing ends it and leaves no output file behind.
    await vi.waitFor(() => expect(s.waitingPid()).toBeGreaterThan(0), { timeout: 30_000 });
    const next = s.waitingPid()!;
    expect(next).not.toBe(pid);
    s.close();
    await ended(next);
    expect(readdirSync(dir)).toEqual([]);
  }, 180_000);

  it('is never handed a job once it died: take says none, and another one starts', async () => {
    const { s } = standby('dead');
    s.warm();
    const pid = s.waitingPid()!;
    process.kill(pid, 'SIGKILL');
    await ended(pid);
    await vi.waitFor(() => expect(s.waitingPid()).toBeUndefined(), { timeout: 30_000 });
    const output = join(tmp, 'dead', 'output.log');
    expect(s.take({ args: ['--', 'true'], env: {}, output })).toBeUndefined();
    expect(existsSync(output)).toBe(false);
    await vi.waitFor(() => expect(s.waitingPid()).toBeGreaterThan(0), { timeout: 30_000 });
    const next = s.waitingPid()!;
    s.close();
    await ended(next);
  }, 180_000);
});

describe('which jobs a standby may take', () => {
  it('only what exec itself would take: a string over 128 KiB, a NUL byte or over 1 MiB in all is spawned', () => {
    expect(execWouldTake(['--run', 'r', '--', 'true'], { PATH: '/usr/bin', A: 'b' })).toBe(true);
    expect(execWouldTake(['--', 'true'], { HUGE: 'x'.repeat(200_000) })).toBe(false);
    expect(execWouldTake(['--', 'x'.repeat(131_072)], {})).toBe(false);
    expect(execWouldTake(['--', 'true'], { A: 'a\0b' })).toBe(false);
    const many = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`V${i}`, 'y'.repeat(100_000)]));
    expect(execWouldTake(['--', 'true'], many)).toBe(false);
  });
});
