/**
 * Crash safety: the controller is killed (SIGKILL, a real process) at random moments while runs
 * are active, and restarted. No run may start twice; finished runs get their final status;
 * running ones are adopted.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import { localBackend } from '../controller/backends/local/index.js';
import type { BackendFactory } from '../controller/backends/types.js';
import { advCommand } from '../controller/internal/self.js';
import type { RunStatusDoc } from '../controller/status/types.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const RUNS = 6;
let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-crash-'));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

function startController(repo: string, dataDir: string, counts: string, once = false): ChildProcess {
  const [node, ...prefix] = advCommand();
  const args = [
    ...prefix,
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
  if (once) args.push('--once', '--timeout', '2m');
  return spawn(node!, args, {
    env: { ...process.env, COUNT_DIR: counts },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
}

describe('controller killed with SIGKILL and restarted', () => {
  it('starts every attempt exactly once and ends with every run Succeeded', async () => {
    const counts = join(tmp, 'counts');
    const dataDir = join(tmp, 'data');
    const files: Record<string, string> = { 'backends/local.yaml': LOCAL_BACKEND };
    for (let i = 0; i < RUNS; i++) {
      files[`runs/c${i}.yaml`] = runYaml(`c${i}`, [
        'sh',
        '-c',
        `mkdir -p "$COUNT_DIR" && echo start >> "$COUNT_DIR/$ADV_RUN" && sleep ${(0.5 + (i % 3) * 1.2).toFixed(1)}`,
      ]);
    }
    const wt: WorkTree = await makeWorkTree(files);
    try {
      // Kill at random moments: before, during and after submissions.
      const kills: number[] = [];
      for (let round = 0; round < 4; round++) {
        const before = await wt
          .git('rev-parse', '--verify', '--quiet', 'adventuretime/status')
          .catch(() => '');
        const proc = startController(wt.dir, dataDir, counts);
        // Once this controller has written status, kill it at a random moment of its work.
        // (When everything has finished, a restarted controller has nothing to write: go on.)
        await waitFor(
          'controller at work',
          async () =>
            (await wt.git('rev-parse', '--verify', '--quiet', 'adventuretime/status').catch(() => '')) !==
            before,
          4000,
          20,
        ).catch(() => undefined);
        const delay = Math.floor(Math.random() * 1200);
        kills.push(delay);
        await new Promise((r) => setTimeout(r, delay));
        proc.kill('SIGKILL');
        await new Promise((r) => proc.once('exit', r));
      }
      // How far the killed controllers got: proof the kills landed while work was in flight.
      const startedBeforeFinal = existsSync(counts) ? readdirSync(counts).length : 0;
      const final = startController(wt.dir, dataDir, counts, true);
      let stderr = '';
      final.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
      const code = await new Promise<number | null>((r) => final.once('exit', r));
      expect(code, stderr).toBe(0);

      let started = 0;
      for (let i = 0; i < RUNS; i++) {
        const st = parse(await wt.git('show', `adventuretime/status:runs/c${i}.yaml`)) as RunStatusDoc;
        expect(st.status.phase, `c${i}`).toBe('Succeeded');
        expect(st.status.attempts, `c${i}`).toHaveLength(1);
        const lines = readFileSync(join(counts, `c${i}`), 'utf8')
          .trim()
          .split('\n');
        expect(lines, `c${i} started ${lines.length} times (kills at ${kills.join(', ')} ms)`).toEqual([
          'start',
        ]);
        started += lines.length;
      }
      console.log(
        `crash test: ${kills.length} SIGKILLs at ${kills.join(', ')} ms after each controller's first status commit; ${startedBeforeFinal} of ${RUNS} runs had started before the last restart; ${started} starts in all, all Succeeded`,
      );
    } finally {
      await wt.cleanup();
    }
  });

  it('a submit killed after creating the job dir but before the launch is launched once on restart', async () => {
    const counts = join(tmp, 'half-counts');
    process.env.COUNT_DIR = counts;
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/h.yaml': runYaml('h', ['sh', '-c', 'mkdir -p "$COUNT_DIR" && echo start >> "$COUNT_DIR/h"']),
    });
    const dataDir = join(tmp, 'half-data');
    try {
      // What the dying controller left: the write-ahead record, and an empty job dir.
      const first = await Controller.create({
        repo: wt.dir,
        dataDir,
        backendFactories: [
          {
            type: 'local',
            create: (spec, ctx) =>
              Object.assign(localBackend.create(spec, ctx), {
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
      'backends/local.yaml': LOCAL_BACKEND,
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
      const crashing: BackendFactory = {
        type: 'local',
        create: (spec, ctx) => {
          const real = localBackend.create(spec, ctx);
          return Object.assign(Object.create(Object.getPrototypeOf(real)), real, {
            submit: async (req: Parameters<typeof real.submit>[0]) => {
              await real.submit(req);
              return new Promise<never>(() => undefined);
            },
          });
        },
      };
      const first = await Controller.create({ repo: wt.dir, dataDir, backendFactories: [crashing] });
      await first.init();
      void first.pass();
      await waitFor('job started by the first controller', () => existsSync(join(counts, 'b')));
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
