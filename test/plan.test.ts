/**
 * The user's day, on a real specs repo with a real status branch: `adv plan` for a branch that
 * adds, changes and removes runs (text, Markdown, JSON, exit codes), `adv retry`, `adv get
 * --watch`, and shell completion.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { captureIo, removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

/** A ceiling for one wait on the controller or the CLI, on a loaded machine. */
const WAIT_MS = 60_000;
/** The compiled CLI (built by the integration suite's global setup), for what needs a process: Ctrl-C. */
const ADV_JS = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-plan-'));
});
afterAll(() => removeTree(tmp));

async function adv(wt: WorkTree, args: string[]) {
  const io = captureIo({ ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache') }, wt.dir);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

/** `adv` as a process in the work tree, its output readable while it runs. */
function advProcess(wt: WorkTree, args: string[]) {
  const child = spawn(process.execPath, [ADV_JS, ...args], {
    cwd: wt.dir,
    env: { ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const done = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  return {
    child,
    done,
    out: () => out,
    err: () => err,
    gone: () => child.exitCode !== null && `adv exited with code ${child.exitCode}: ${err}`,
  };
}

describe('adv plan', () => {
  it('on a branch that adds a run and changes others: the actions, with backends, patches and errors', async () => {
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/tune.yaml': runYaml('tune', ['true']),
      'runs/train.yaml': runYaml('train', ['true'], '  policy: {onSpecChange: Restart}\n'),
      'runs/frozen.yaml': runYaml('frozen', ['true']),
      'runs/old.yaml': runYaml('old', ['true']),
    });
    try {
      const c = await Controller.create({
        repo: wt.dir,
        dataDir: join(tmp, 'data-plan'),
        pollIntervalMs: 100,
      });
      await c.runUntilIdle({ timeoutMs: 60_000 });
      await c.stop();

      await wt.git('checkout', '-q', '-b', 'feature');
      await wt.write('runs/sweep.yaml', runYaml('sweep-1', ['python3', '-c', 'print(1)']));
      await wt.write('runs/tune.yaml', runYaml('tune', ['true'], '  policy: {maxAttempts: 5}\n'));
      await wt.write('runs/train.yaml', runYaml('train', ['false'], '  policy: {onSpecChange: Restart}\n'));
      await wt.write('runs/frozen.yaml', runYaml('frozen', ['false']));
      await wt.remove('runs/old.yaml');
      await wt.commit('a sweep, and changes');

      const text = await adv(wt, ['plan', '--base', 'main']);
      expect(text.code, text.err).toBe(0);
      expect(text.out).toMatch(/^Plan: HEAD \([0-9a-f]{10}\) merged into main \([0-9a-f]{10}\)$/m);
      expect(text.out).toMatch(
        /^ {2}\+ start {3}sweep-1\s+on local: local: chosen\s+\(runs\/sweep\.yaml\)$/m,
      );
      expect(text.out).toMatch(/^ {2}~ update {2}tune\s+add \/policy\s+\(runs\/tune\.yaml\)$/m);
      expect(text.out).toMatch(
        /^ {2}! restart train\s+\/command\/0: cancel, then a new attempt from the last checkpoint on local/m,
      );
      expect(text.out).toMatch(
        /^ {2}✗ reject {2}frozen\s+cannot change \/command\/0 of a started run; revert the change, or set policy\.onSpecChange: Restart/m,
      );
      expect(text.out).toMatch(
        /^ {2}= noop {4}old\s+the spec is removed; the run has finished and its status stays/m,
      );
      expect(text.out).toMatch(/^Plan: 1 to start, 1 to update, 1 to restart, 0 to cancel, 1 rejected\.$/m);

      const md = await adv(wt, ['plan', '--base', 'main', '-o', 'markdown']);
      expect(md.out).toContain('### AdventureTime plan');
      expect(md.out).toContain('| + | `sweep-1` | start | on local: local: chosen | `runs/sweep.yaml` |');
      expect(md.out).toContain('`frozen` — immutable: `/command/0`');
      expect(md.out).toContain('"path": "/command/0"');

      const json = JSON.parse((await adv(wt, ['plan', '--base', 'main', '-o', 'json'])).out) as {
        runs: { run: string; change: string; backend?: string }[];
      };
      expect(json.runs.map((r) => `${r.run}:${r.change}`)).toEqual([
        'frozen:reject',
        'old:noop',
        'sweep-1:start',
        'train:restart',
        'tune:update',
      ]);

      // A broken spec: listed with file and line, exit code 1 for the CI job.
      await wt.write(
        'runs/bad.yaml',
        'apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata: {name: bad}\nspec:\n  comand: [x]\n',
      );
      await wt.commit('a typo');
      const bad = await adv(wt, ['plan', '--base', 'main']);
      expect(bad.code).toBe(1);
      expect(bad.out).toMatch(
        /^ {2}runs\/bad\.yaml:5:3: spec\.comand: unknown field "comand".*did you mean "command"/m,
      );
    } finally {
      await wt.cleanup();
    }
  }, 90_000);
});

describe('adv retry, get --watch, completion', { timeout: 5 * WAIT_MS }, () => {
  it('retry gives a failed run a new attempt with a fresh budget; get --watch prints it as it changes', async () => {
    // Attempt 1 fails; attempt 2 runs until the test releases it, so the watch sees it under way.
    const release = join(tmp, 'release-flaky');
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/flaky.yaml': runYaml(
        'flaky',
        ['sh', '-c', '[ "$ADV_ATTEMPT" -ge 2 ] || exit 1; until [ -e "$RELEASE" ]; do sleep 0.05; done'],
        `  env: {RELEASE: ${release}}\n  policy: {maxAttempts: 1}\n`,
      ),
    });
    try {
      const dataDir = join(tmp, 'data-retry');
      let c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
      await c.runUntilIdle({ timeoutMs: WAIT_MS });
      await c.stop();
      expect(c.runStatus('flaky')!.status).toMatchObject({ phase: 'Failed', reason: 'AttemptsExhausted' });

      const r = await adv(wt, ['retry', 'flaky']);
      expect(r.code, r.err).toBe(0);
      expect(r.out).toMatch(/^retry run\/flaky \(runs\/flaky\.yaml, commit [0-9a-f]{10}\)/);

      // The watch prints the run as it is, then each change, until Ctrl-C (--timeout: a hang guard).
      const watch = advProcess(wt, ['get', 'runs', '--watch', '--timeout', '10m']);
      const printed = (what: string, line: RegExp) =>
        waitFor(() => line.test(watch.out()), {
          what: `adv get --watch to print ${what}`,
          timeoutMs: WAIT_MS,
          giveUpIf: watch.gone,
          detail: watch.out,
        });
      await printed('the failed run', /^flaky\s+Failed\s+1\s+local/m);
      c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
      const idle = c.runUntilIdle({ timeoutMs: 2 * WAIT_MS });
      idle.catch(() => undefined); // awaited below
      await printed('attempt 2 under way', /^flaky\s+Scheduling|^flaky\s+(Queued|Running)\s+2\s+local/m);
      await writeFile(release, '');
      await idle;
      await c.stop();
      const st = c.runStatus('flaky')!.status;
      expect(st.phase).toBe('Succeeded');
      expect(st.attempts.map((a) => a.class)).toEqual(['UserError', 'Succeeded']);
      await printed('the run succeeded', /^flaky\s+Succeeded\s+2\s+local/m);
      watch.child.kill('SIGINT');
      expect(await watch.done, watch.err()).toBe(0);
      const lines = watch.out().trim().split('\n');
      expect(lines[0]).toMatch(/^NAME\s+PHASE\s+ATTEMPT/);
      expect(lines[1]).toMatch(/^flaky\s+Failed\s+1\s+local/);
      expect(lines.some((l) => /^flaky\s+Scheduling|^flaky\s+(Queued|Running)\s+2\s+local/.test(l))).toBe(
        true,
      );
      expect(lines.at(-1)).toMatch(/^flaky\s+Succeeded\s+2\s+local/);
    } finally {
      await wt.cleanup();
    }
  });

  it('completion scripts know every verb, and bash accepts the script', async () => {
    const wt = await makeWorkTree({ 'backends/local.yaml': LOCAL_BACKEND });
    try {
      const bash = await adv(wt, ['completion', 'bash']);
      for (const verb of [
        'get',
        'describe',
        'logs',
        'apply',
        'cancel',
        'retry',
        'reconcile',
        'plan',
        'validate',
      ])
        expect(bash.out).toContain(verb);
      execFileSync('bash', ['-n'], { input: bash.out });
      const fish = await adv(wt, ['completion', 'fish']);
      expect(fish.out).toContain('complete -c adv -n "__fish_seen_subcommand_from get" -l watch');
      expect((await adv(wt, ['completion', 'tcsh'])).code).toBe(2);
    } finally {
      await wt.cleanup();
    }
  });
});
