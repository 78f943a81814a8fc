/**
 * Crash safety: the controller is killed (SIGKILL, a real process) at random moments while runs
 * are active, and restarted. No run may start twice; finished runs get their final status;
 * running ones are adopted.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import { localBackend } from '../controller/backends/local/index.js';
import type { BackendDescriptor } from '../controller/backends/types.js';
import type { RunStatusDoc } from '../controller/status/types.js';
import { sshBackendYaml } from './helpers/backends/kinds.js';
import { haveSshd, startSshd } from './helpers/servers/sshd.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { removeTree } from './helpers/io.js';
import { waitFor } from './helpers/wait.js';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-crash-'));
});
afterAll(() => removeTree(tmp));

/** The compiled CLI (built by the integration suite's global setup): it starts in half the time. */
const ADV = [process.execPath, join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js')];

function startController(repo: string, dataDir: string, once = false): ChildProcess {
  const args = [
    'controller',
    '--repo',
    repo,
    '--data-dir',
    dataDir,
    '--poll-interval',
    '100ms',
    '--fetch-interval',
    '200ms',
    '--log-level',
    'warn',
  ];
  if (once) args.push('--once', '--timeout', `${FINAL_MS / 60_000}m`);
  return spawn(ADV[0]!, [...ADV.slice(1), ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
}

type Kind = 'ok' | 'preempt' | 'flaky' | 'broken';
/** 20 runs: most succeed; some are preempted twice; some fail once; some always fail. */
const SCENARIO: Record<Kind, number> = { ok: 8, preempt: 6, flaky: 3, broken: 3 };
const KILLS = 100;
/** Ceilings, never windows: one controller's start-up on a loaded machine, and the last run to idle. */
const START_MS = 30_000;
const FINAL_MS = 10 * 60_000;
const START = 'echo "$ADV_RUN $ADV_ATTEMPT" >> "$LEDGER"';
/** Each workload records its start; a "preempted" one has adv exec take a SIGTERM (a spot reclaim). */
const WORKLOAD: Record<Kind, (secs: number) => string> = {
  ok: (s) => `${START}; sleep ${s.toFixed(1)}`,
  preempt: (s) =>
    `${START}; sleep ${s.toFixed(1)}; if [ "$ADV_ATTEMPT" -le 2 ]; then kill -TERM $PPID; sleep 30; fi`,
  flaky: (s) => `${START}; sleep ${s.toFixed(1)}; [ "$ADV_ATTEMPT" -ge 2 ]`,
  broken: (s) => `${START}; sleep ${s.toFixed(1)}; exit 2`,
};
const EXPECT: Record<Kind, { phase: string; classes: string[] }> = {
  ok: { phase: 'Succeeded', classes: ['Succeeded'] },
  preempt: { phase: 'Succeeded', classes: ['Preempted', 'Preempted', 'Succeeded'] },
  flaky: { phase: 'Succeeded', classes: ['UserError', 'Succeeded'] },
  broken: { phase: 'Failed', classes: ['UserError', 'UserError'] },
};

if (!haveSshd() && process.env.CI) throw new Error('the crash test needs openssh-server in CI');
if (!haveSshd()) console.warn('SKIPPING the 20-run crash scenario: it needs openssh-server (sshd)');

describe('controller killed with SIGKILL and restarted', () => {
  it.runIf(haveSshd())(
    'a scenario of 20 runs with preemptions and failures: every attempt once, every final status right',
    async () => {
      const ledger = join(tmp, 'ledger');
      const dataDir = join(tmp, 'data');
      const sshd = await startSshd();
      const kinds = Object.entries(SCENARIO).flatMap(([kind, n]) =>
        Array.from({ length: n }, () => kind as Kind),
      );
      const files: Record<string, string> = {
        // The "broken" runs would make a backend Degraded (3 failed runs in a row), which changes
        // where the next attempts go; this scenario checks failover by cool-down alone.
        'backends/local.yaml': `${LOCAL_BACKEND}  degradeAfterFailures: 50\n`,
        'backends/ssh-local.yaml': `${sshBackendYaml(sshd, 'ssh-local', join(tmp, 'ssh-root'))}  degradeAfterFailures: 50\n`,
      };
      kinds.forEach((kind, i) => {
        const order = i % 2 ? '[ssh-local, local]' : '[local, ssh-local]';
        files[`runs/c${i}.yaml`] = `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: c${i}}
spec:
  command: ${JSON.stringify(['sh', '-c', WORKLOAD[kind](0.5 + (i % 5) * 0.6)])}
  env: {LEDGER: ${ledger}}
  policy: {maxAttempts: 2, backoff: {initialSec: 0.5}, failoverCooldownSec: 600}
  backendSelector: {order: ${order}}
`;
      });
      const wt: WorkTree = await makeWorkTree(files);
      try {
        // Kill at random moments: during start-up, planning, submitting, observing, writing. One
        // kill in five lands in start-up; the others first wait for the controller to be up (it
        // wrote its pid), however long start-up takes on this machine, then a random while longer.
        const kills: number[] = [];
        while (kills.length < KILLS) {
          const proc = startController(wt.dir, dataDir);
          if (kills.length % 5 !== 0)
            await waitFor(
              () =>
                (JSON.parse(readFileSync(join(dataDir, 'controller.json'), 'utf8')) as { pid: number })
                  .pid === proc.pid,
              {
                what: `controller ${kills.length + 1} to write its pid`,
                timeoutMs: START_MS,
                giveUpIf: () => proc.exitCode !== null && `it exited with code ${proc.exitCode}`,
              },
            );
          const delay = Math.floor(Math.random() * 1500);
          kills.push(delay);
          await new Promise((r) => setTimeout(r, delay));
          const exited = new Promise((r) => proc.once('exit', r));
          if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
          else throw new Error(`controller ${kills.length} exited by itself (code ${proc.exitCode})`);
          await exited;
        }
        const commitsBeforeFinal = await wt.git('rev-list', '--count', 'adventuretime/status');
        const ledgerBeforeFinal = existsSync(ledger)
          ? readFileSync(ledger, 'utf8').trim().split('\n').length
          : 0;
        const final = startController(wt.dir, dataDir, true);
        let stderr = '';
        final.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
        const code = await new Promise<number | null>((r) => final.once('exit', r));
        expect(code, stderr).toBe(0);

        // The workload's own record of every start: "<run> <attempt>" once per start.
        const starts = readFileSync(ledger, 'utf8').trim().split('\n');
        const counts = { attempts: 0, starts: starts.length, jobDirs: 0, preempted: 0, userErrors: 0 };
        const finals: Record<string, number> = {};
        for (let i = 0; i < kinds.length; i++) {
          const run = `c${i}`;
          const st = (parse(await wt.git('show', `adventuretime/status:runs/${run}.yaml`)) as RunStatusDoc)
            .status;
          const expected = EXPECT[kinds[i]!];
          const where = `${run} (${kinds[i]}): ${JSON.stringify(st.attempts.map((a) => [a.n, a.backend, a.class, a.finishedAt, a.why]))}`;
          expect(st.phase, where).toBe(expected.phase);
          expect(
            st.attempts.map((a) => a.class),
            where,
          ).toEqual(expected.classes);
          // Every attempt started exactly once, by the workload's count…
          const mine = starts.filter((l) => l.startsWith(`${run} `)).sort();
          expect(mine, where).toEqual(st.attempts.map((a) => `${run} ${a.n}`).sort());
          // …and by the backend's own records: one job dir per attempt, on the backend named.
          for (const a of st.attempts) {
            const dir =
              a.backend === 'local'
                ? join(dataDir, 'local', 'local', 'jobs', a.jobName)
                : join(tmp, 'ssh-root', 'work', a.jobName);
            expect(existsSync(join(dir, 'exit.json')), `${where}: ${dir}`).toBe(true);
            counts.jobDirs++;
          }
          if (kinds[i] === 'preempt')
            expect(st.attempts[1]!.backend, where).not.toBe(st.attempts[0]!.backend);
          counts.attempts += st.attempts.length;
          counts.preempted += st.attempts.filter((a) => a.class === 'Preempted').length;
          counts.userErrors += st.attempts.filter((a) => a.class === 'UserError').length;
          finals[st.phase] = (finals[st.phase] ?? 0) + 1;
        }
        const otherJobs =
          readdirSync(join(dataDir, 'local', 'local', 'jobs')).length +
          readdirSync(join(tmp, 'ssh-root', 'work')).filter((d) => d.startsWith('adv-')).length;
        expect(otherJobs, 'job dirs on the backends, against attempts in status').toBe(counts.attempts);
        expect(counts.starts).toBe(counts.attempts);
        console.log(
          `crash test: ${kills.length} SIGKILLs (${Math.min(...kills)}–${Math.max(...kills)} ms after start-up, or after the start for one in five); ` +
            `${kinds.length} runs, ${counts.attempts} attempts (${counts.preempted} preempted, ${counts.userErrors} user errors), ` +
            `${counts.starts} starts by the workloads' count, ${counts.jobDirs} job records on the backends, ` +
            `${ledgerBeforeFinal} starts and ${commitsBeforeFinal} status commits before the last restart; final: ${JSON.stringify(finals)}`,
        );
      } finally {
        await wt.cleanup();
        await sshd.stop();
      }
    },
    KILLS * (START_MS + 1_500) + FINAL_MS,
  );

  it('a submit killed after creating the job dir but before the launch is launched once on restart', async () => {
    const counts = join(tmp, 'half-counts');
    process.env.COUNT_DIR = counts;
    const wt = await makeWorkTree({
      // Jobs inherit nothing from the controller: the backend passes COUNT_DIR on by name.
      'backends/local.yaml': LOCAL_BACKEND + '  passEnv: [COUNT_DIR]\n',
      'runs/h.yaml': runYaml('h', ['sh', '-c', 'mkdir -p "$COUNT_DIR" && echo start >> "$COUNT_DIR/h"']),
    });
    const dataDir = join(tmp, 'half-data');
    try {
      // What the dying controller left: the write-ahead record, and an empty job dir.
      const first = await Controller.create({
        repo: wt.dir,
        dataDir,
        backends: [
          {
            ...localBackend,
            create: async (spec, ctx) =>
              Object.assign(await localBackend.create(spec, ctx), {
                submit: () => new Promise<never>(() => undefined),
              }),
          },
        ],
      });
      await first.init();
      void first.pass();
      await waitFor('write-ahead record', async () =>
        (await wt.git('show', 'adventuretime/status:runs/h.yaml').catch(() => '')).includes('Submitting'),
      );
      mkdirSync(join(dataDir, 'local', 'local', 'jobs', 'adv-h-1'), { recursive: true });
      await first.stop(); // the process dies (its data dir's lock goes with it)
      const second = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
      await second.runUntilIdle({ timeoutMs: 30_000 });
      await second.stop();
      expect(second.runStatus('h')!.status).toMatchObject({ phase: 'Succeeded' });
      expect(second.runStatus('h')!.status.attempts).toHaveLength(1);
      expect(readFileSync(join(counts, 'h'), 'utf8')).toBe('start\n');
    } finally {
      await wt.cleanup();
    }
  });

  it('adopts a job that was submitted just before the crash instead of submitting it again', async () => {
    const counts = join(tmp, 'adopt-counts');
    process.env.COUNT_DIR = counts;
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND + '  passEnv: [COUNT_DIR]\n',
      'runs/b.yaml': runYaml('b', [
        'sh',
        '-c',
        'mkdir -p "$COUNT_DIR" && echo start >> "$COUNT_DIR/b" && sleep 1',
      ]),
    });
    const dataDir = join(tmp, 'adopt-data');
    try {
      // The first controller's submit reaches the backend, then the controller "dies" before it
      // can record the job id.
      const crashing: BackendDescriptor = {
        ...localBackend,
        create: async (spec, ctx) => {
          const real = await localBackend.create(spec, ctx);
          return Object.assign(Object.create(Object.getPrototypeOf(real)), real, {
            submit: async (req: Parameters<typeof real.submit>[0]) => {
              await real.submit(req);
              return new Promise<never>(() => undefined);
            },
          });
        },
      };
      const first = await Controller.create({ repo: wt.dir, dataDir, backends: [crashing] });
      await first.init();
      void first.pass();
      await waitFor('job started by the first controller', () => existsSync(join(counts, 'b')));
      await first.stop(); // the process dies (its data dir's lock goes with it)
      const second = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
      await second.runUntilIdle({ timeoutMs: 60_000 });
      await second.stop();
      const st = second.runStatus('b')!;
      expect(st.status.phase).toBe('Succeeded');
      expect(st.status.attempts).toHaveLength(1);
      expect(readFileSync(join(counts, 'b'), 'utf8')).toBe('start\n');
      const log = await wt.git('log', '--format=%s', 'adventuretime/status', '--', 'runs/b.yaml');
      expect(log).toMatch(/\[adopted\]/);
    } finally {
      await wt.cleanup();
    }
  });
});
