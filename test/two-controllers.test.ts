/**
 * Two controllers on one specs repo. Before the lease, with separate data dirs each took the
 * other's jobs for lost (`JobDirMissing`) and 8 runs started 41 times; with one data dir two
 * workloads ran in one job dir. Now:
 *
 * - one data dir: the second controller refuses to start (the data dir's flock), naming the first;
 * - separate data dirs: one holds the status branch lease and does the work, the other stands by;
 *   N runs → N starts, counted by the workloads themselves;
 * - when the holder stops, the standby takes over and finishes what is left, again once each.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import { isAdvError } from '../controller/errors.js';
import { removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml } from './helpers/git/specs-repo.js';
import { stopProcess, waitFor } from './helpers/wait.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

const N = 8;

/** A repo of N runs, each appending its name to a shared ledger when it starts. */
async function ledgerRepo(ledger: string) {
  const files: Record<string, string> = { 'backends/local.yaml': LOCAL_BACKEND };
  for (let i = 0; i < N; i++) {
    files[`runs/r${i}.yaml`] = runYaml(`r${i}`, ['sh', '-c', `echo r${i} >> ${ledger}`]);
  }
  const wt = await makeWorkTree(files);
  cleanups.push(() => wt.cleanup());
  return wt;
}

async function dataDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'adv-two-'));
  cleanups.push(() => removeTree(d));
  return d;
}

/** Two controllers on one repo, each with its own data dir, both running until the test ends. */
async function twoRunning(repo: string): Promise<[Controller, Controller]> {
  const opts = { repo, pollIntervalMs: 100, leaseDurationMs: 6_000 };
  const a = await Controller.create({ ...opts, dataDir: await dataDir() });
  const b = await Controller.create({ ...opts, dataDir: await dataDir() });
  const loops = [a.run(), b.run()];
  // Cleanups run in reverse: both are stopped, then their loops end.
  cleanups.push(
    () => Promise.all(loops),
    () => a.stop(),
    () => b.stop(),
  );
  return [a, b];
}

const starts = async (ledger: string) =>
  (await readFile(ledger, 'utf8').catch(() => '')).split('\n').filter(Boolean);

const allSucceeded = (c: Controller) =>
  Array.from({ length: N }, (_, i) => c.runStatus(`r${i}`)?.status.phase).every((p) => p === 'Succeeded');

describe('two controllers, one repo', () => {
  it('refuses a second controller on the same data dir, and says which holds it', async () => {
    const ledger = join(await dataDir(), 'ledger');
    const wt = await ledgerRepo(ledger);
    const dir = await dataDir();
    const a = await Controller.create({ repo: wt.dir, dataDir: dir, pollIntervalMs: 100 });
    cleanups.push(() => a.stop());
    await a.writeRuntimeInfo({ startedAt: '2026-11-23T00:00:00Z' });
    const second = await Controller.create({ repo: wt.dir, dataDir: dir, lockWaitMs: 200 }).then(
      (c) => c,
      (e: unknown) => e,
    );
    expect(isAdvError(second) && second.code).toBe('Conflict');
    expect((second as Error).message).toContain(
      `another controller is running on the data dir ${dir} (pid ${process.pid}`,
    );
    // The first one works as ever, and once it stops the data dir is free again.
    await a.runUntilIdle({ timeoutMs: 120_000 });
    expect(await starts(ledger)).toHaveLength(N);
    await a.stop();
    const b = await Controller.create({ repo: wt.dir, dataDir: dir, lockWaitMs: 5_000 });
    cleanups.push(() => b.stop());
  });

  it('separate data dirs: when the holder stops, the standby takes over and runs what is new, once', async () => {
    const ledger = join(await dataDir(), 'ledger');
    const wt = await ledgerRepo(ledger);
    const [a, b] = await twoRunning(wt.dir);
    const leader = await waitFor(() => (a.isLeader() ? a : b.isLeader() ? b : undefined), {
      what: 'one controller to take the lease',
      timeoutMs: 30_000,
    });
    const standby = leader === a ? b : a;
    await waitFor(() => allSucceeded(leader), { what: 'every run to succeed', timeoutMs: 120_000 });
    expect(standby.isLeader()).toBe(false);

    // The holder stops cleanly (it releases the lease); two more runs are pushed.
    await leader.stop();
    await wt.write('runs/late-1.yaml', runYaml('late-1', ['sh', '-c', `echo late-1 >> ${ledger}`]));
    await wt.write('runs/late-2.yaml', runYaml('late-2', ['sh', '-c', `echo late-2 >> ${ledger}`]));
    await wt.commit('two more runs');
    standby.requestFetch('test');
    await waitFor(
      () => ['late-1', 'late-2'].every((n) => standby.runStatus(n)?.status.phase === 'Succeeded'),
      { what: 'the standby to take over and run the new runs', timeoutMs: 120_000 },
    );
    expect(standby.isLeader()).toBe(true);
    const expected = [...Array.from({ length: N }, (_, i) => `r${i}`), 'late-1', 'late-2'].sort();
    expect((await starts(ledger)).sort()).toEqual(expected);
    // The takeover is in git log, with the epoch that fences off the old holder.
    expect(await wt.git('log', '--format=%B', 'adventuretime/status')).toMatch(
      /^controller \S+ took over the status branch from \S+ on \S+ \(lease epoch 2\)$/m,
    );
  });

  it('separate data dirs, both running to the end: every run once, one controller writes', async () => {
    const ledger = join(await dataDir(), 'ledger');
    const wt = await ledgerRepo(ledger);
    const [a, b] = await twoRunning(wt.dir);
    await waitFor(() => allSucceeded(a) || allSucceeded(b), {
      what: 'every run to succeed',
      timeoutMs: 120_000,
    });
    expect((await starts(ledger)).sort()).toEqual(Array.from({ length: N }, (_, i) => `r${i}`).sort());
    const attempts = Array.from(
      { length: N },
      (_, i) => (a.isLeader() ? a : b).runStatus(`r${i}`)!.status.attempts,
    );
    expect(attempts.map((x) => x.length)).toEqual(Array(N).fill(1));
  });
});

describe('a leader paused past its lease', () => {
  it('says, when it wakes, that it stepped down, and stands by', async () => {
    const wt = await ledgerRepo(join(await dataDir(), 'ledger'));
    const adv = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');
    const start = async () => {
      const p = spawn(
        process.execPath,
        [adv, 'controller', '--repo', wt.dir, '--data-dir', await dataDir(), '--lease-duration', '3s'],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      for (const s of [p.stdout, p.stderr]) s.on('data', (b: Buffer) => (out += b.toString()));
      cleanups.push(() => stopProcess(p));
      return { p, out: () => out };
    };
    const a = await start();
    await waitFor(() => a.out().includes('holding the status branch lease'), { what: 'a to lead' });
    const b = await start();
    await waitFor(() => b.out().includes('standing by'), { what: 'b to stand by' });
    a.p.kill('SIGSTOP');
    await waitFor(() => b.out().includes('took over the status branch lease'), {
      what: 'b to take the lease over from the paused a',
      timeoutMs: 60_000,
    });
    a.p.kill('SIGCONT');
    await waitFor(() => a.out().includes('stepped down'), {
      what: 'a to say it stepped down',
      timeoutMs: 60_000,
    });
    expect(a.out()).toContain('standing by');
  });
});
