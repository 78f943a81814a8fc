/**
 * Workload metrics end to end: a Python workload logs a loss every step through the
 * `adventuretime` helper under the bundled `adv exec` with a file store, is preempted mid-way
 * between checkpoints and resumed as attempt 2 from its last one, redoing the steps after it.
 * `adv metrics` shows one curve across the attempts (table, CSV, JSON), the redone points with
 * `--all-attempts`, and `-f` prints points while attempt 2 runs. `adv run` ships metrics too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { git } from '../controller/git/native.js';
import { attemptPrefix, latestCommitted } from '../runtime/checkpoint.js';
import { readAttemptMetrics, type AttemptMetrics } from '../runtime/metrics.js';
import { isSameProcessAlive } from '../runtime/proc.js';
import { EXEC_FILE, readJson, type ExecRecord } from '../runtime/records.js';
import { FileStore } from '../runtime/store/file.js';
import { captureIo, removeTree } from './helpers/io.js';
import { waitFor } from './helpers/wait.js';

const ROOT = join(import.meta.dirname, '..');
const BUNDLE = join(ROOT, 'dist', 'adv-exec.mjs');
const ADV = join(ROOT, 'dist', 'cli', 'adv.js');
const TRAIN = join(import.meta.dirname, 'fixtures', 'metrics', 'train.py');
const PYTHONPATH = join(ROOT, 'runtime', 'python', 'src');
/** A ceiling per step of a test (start node and python, restore, ship): generous on a loaded machine. */
const STEP_MS = 60_000;

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-metrics-'));
});
afterAll(() => removeTree(tmp));

/** Processes a test started: killed (with their process group) if the test ended before they did. */
const running = new Set<ChildProcess>();
/** Job dirs of the attempts a test started: adv exec runs the workload in a group of its own. */
const jobs: string[] = [];
afterEach(async () => {
  for (const job of jobs.splice(0)) {
    const exec = readJson<ExecRecord>(job, EXEC_FILE);
    try {
      if (exec?.childPid && isSameProcessAlive(exec.childPid, exec.childStartTicks))
        process.kill(-exec.childPid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  for (const child of running) {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // gone
    }
    if (child.exitCode === null && child.signalCode === null)
      await new Promise((r) => child.once('close', r));
  }
  running.clear();
});

function start(cmd: string[], cwd: string, env: NodeJS.ProcessEnv = {}) {
  // Its own group: afterEach can take the workload with it.
  const child = spawn(process.execPath, cmd, {
    cwd,
    env: { ...process.env, PYTHONPATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  running.add(child);
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const done = new Promise<number | null>((r) =>
    child.once('close', (code) => {
      running.delete(child);
      r(code);
    }),
  );
  return { child, done, out: () => out, gone: () => child.exitCode !== null && `it exited early:\n${out}` };
}

/** The bundled adv exec for one attempt of run `r`. */
function attempt(n: number, url: string, hold: string, holdAt: number) {
  const job = join(tmp, `job-${n}`);
  jobs.push(job);
  return {
    job,
    ...start(
      [
        BUNDLE,
        ...['--store', url, '--run', 'r', '--attempt', String(n), '--job-dir', job, '--grace', '60'],
        ...['--', 'python3', TRAIN, '--steps', '20', '--ckpt-every', '5', '--hold-file', hold],
        ...['--hold-at', String(holdAt)],
      ],
      tmp,
      { ADV_CKPT_DIR: join(job, 'ckpt') },
    ),
  };
}

async function adv(args: string[]) {
  const io = captureIo({}, tmp);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

const steps = (a: AttemptMetrics | undefined) => a?.events.map((e) => e.step);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe('metrics across a preemption', () => {
  it(
    'one curve across attempts: attempt 2 resumes from step 10 and its points replace the steps it redid',
    async () => {
      const root = join(tmp, 'store');
      const url = `file://${root}`;
      const store = new FileStore(root);
      const hold1 = join(tmp, 'hold-1');
      const hold2 = join(tmp, 'hold-2');
      await writeFile(hold1, '');
      await writeFile(hold2, '');

      // Attempt 1 logs steps 1..13 and holds there; its last checkpoint is step 10.
      const a1 = attempt(1, url, hold1, 13);
      await waitFor(
        async () =>
          (await latestCommitted(store, 'r'))?.step === 10 &&
          (await readAttemptMetrics(store, 'r', 1)).some((e) => e.step === 13),
        {
          what: 'checkpoint 10 and the metric of step 13 in the store',
          timeoutMs: STEP_MS,
          giveUpIf: a1.gone,
          detail: a1.out,
        },
      );
      a1.child.kill('SIGTERM'); // a preemption notice, to adv exec
      expect(await a1.done, a1.out()).toBe(143);
      expect(a1.out()).toContain('stopped at step 13 without a checkpoint');
      const exit1 = JSON.parse(
        Buffer.from((await store.get(`${attemptPrefix('r', 1)}exit.json`))!).toString(),
      ) as {
        reason: string;
      };
      expect(exit1.reason).toBe('Preempted');
      expect(existsSync(join(a1.job, 'metrics.jsonl'))).toBe(true);

      // Attempt 2 restores step 10, redoes 11..13, holds at 15: `adv metrics -f` sees it as it runs.
      const a2 = attempt(2, url, hold2, 15);
      const io = captureIo({}, tmp);
      let followEnded = false;
      const follow = runCli(
        ['metrics', 'r', '--store', url, '-f', '-o', 'csv', '--interval', '100'],
        io,
      ).finally(() => (followEnded = true));
      await waitFor(() => /^15,2,/m.test(io.out()), {
        what: '`adv metrics -f` to print attempt 2’s step 15',
        timeoutMs: STEP_MS,
        giveUpIf: () => a2.gone() || (followEnded && `adv metrics -f ended:\n${io.out()}${io.err()}`),
        detail: () => `${a2.out()}\n--- adv metrics -f:\n${io.out()}${io.err()}`,
      });
      // Seen while it runs: attempt 2 holds at step 15 until the hold file goes.
      expect(a2.child.exitCode).toBeNull();
      expect(followEnded).toBe(false);
      await rm(hold2);
      expect(await a2.done, a2.out()).toBe(0);
      expect(a2.out()).toContain('resumed from step 10');
      expect(await follow).toBe(0);
      const followed = io
        .out()
        .trim()
        .split('\n')
        .slice(1)
        .map((l) => l.split(',').slice(0, 2).join(','));
      // Every event once, in the order each attempt shipped them: attempt 1's, then attempt 2's.
      expect(followed).toEqual([...range(1, 13).map((s) => `${s},1`), ...range(11, 20).map((s) => `${s},2`)]);

      // JSON: the events of each attempt, as shipped.
      const json = await adv(['metrics', 'r', '--store', url, '-o', 'json']);
      expect(json.code, json.err).toBe(0);
      const doc = JSON.parse(json.out) as { run: string; attempts: AttemptMetrics[] };
      expect(doc.attempts.map((a) => a.attempt)).toEqual([1, 2]);
      expect(steps(doc.attempts[0])).toEqual(range(1, 13));
      expect(steps(doc.attempts[1])).toEqual(range(11, 20));

      // CSV: one curve, attempt 1 up to the checkpoint it resumed from, attempt 2 after it.
      const csv = await adv(['metrics', 'r', '--store', url, '-o', 'csv']);
      const rows = csv.out.trim().split('\n');
      expect(rows[0]).toBe('step,attempt,loss');
      expect(rows.slice(1).map((l) => l.split(',').slice(0, 2).join(','))).toEqual([
        ...range(1, 10).map((s) => `${s},1`),
        ...range(11, 20).map((s) => `${s},2`),
      ]);
      // The values are attempt 2's where it redid the step (its loss is 0.001 higher).
      expect(Number(rows.find((l) => l.startsWith('12,'))!.split(',')[2])).toBeCloseTo(1 / 12 + 0.001, 9);

      // The table, and the redone points with --all-attempts.
      const table = await adv(['metrics', 'r', '--store', url]);
      expect(table.out.split('\n')[0]).toMatch(/^STEP\s+ATTEMPT\s+LOSS$/);
      expect(table.out.trim().split('\n')).toHaveLength(21);
      const all = await adv(['metrics', 'r', '--store', url, '--all-attempts']);
      const redone = all.out
        .split('\n')
        .filter((l) => /\sredone$/.test(l))
        .map((l) => l.split(/\s+/).slice(0, 2).join(' '));
      expect(redone).toEqual(['11 1', '12 1', '13 1']);
    },
    5 * STEP_MS,
  );
});

describe('adv run', () => {
  it(
    'ships the metrics of a run here, through adv exec, where adv metrics reads them',
    async () => {
      const project = join(tmp, 'project');
      await mkdir(project);
      await git(['init', '-q', '-b', 'main'], { cwd: project });
      const url = `file://${join(tmp, 'run-store')}`;
      const r = start(
        [
          ADV,
          'run',
          '--name',
          'logged',
          '--store',
          url,
          '--env',
          `PYTHONPATH=${PYTHONPATH}`,
          '--',
          'python3',
          TRAIN,
          '--steps',
          '3',
        ],
        project,
        {
          HOME: tmp,
          XDG_DATA_HOME: join(tmp, 'share'),
        },
      );
      expect(await r.done, r.out()).toBe(0);
      const csv = await adv(['metrics', 'logged', '--store', url, '-o', 'csv']);
      expect(csv.code, csv.err).toBe(0);
      expect(csv.out.trim().split('\n').slice(1)).toEqual(['1,1,1', '2,1,0.5', `3,1,${1 / 3}`]);
    },
    2 * STEP_MS,
  );
});
