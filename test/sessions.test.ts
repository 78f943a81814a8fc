/**
 * Interactive sessions end to end, through the compiled CLI against a controller on a specs repo:
 * `adv notebook` on the ssh backend (a real sshd, real Jupyter Lab from the project's .venv) is
 * driven by headless Chromium through the forwarded port — the JupyterLab page loads, and from it
 * a kernel runs a cell (over the kernel WebSocket, as the Lab UI does) that prints the session's
 * ADV_RUN — `adv ssh` opens a shell in its job dir, and once nothing uses it the idle timeout ends
 * it: the run Succeeds. `adv shell` on Vast.ai (the fake API, whose
 * instances are the sshd on loopback addresses) holds the instance while the shell is open, and
 * the idle timeout then ends the session and destroys the instance.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import { fileStorageYaml, sshBackendYaml, vastaiBackendYaml } from './helpers/backends/kinds.js';
import { killTree } from './helpers/processes.js';
import { startFakeVastApi, type FakeVastApi } from './helpers/cloud/fake-vast-api.js';
import { jobPids } from './helpers/backends/job-pids.js';
import { pythonAvailable, VENV_BIN } from './helpers/python/python.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { haveSshd, startSshd, type Sshd } from './helpers/servers/sshd.js';
import { stopProcess, waitFor } from './helpers/wait.js';

const CHROMIUM = '/usr/bin/chromium';
const ADV = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');
const haveChromium = existsSync(CHROMIUM);
if (process.env.CI && (!haveSshd() || !haveChromium))
  throw new Error('the session tests need sshd and Chromium in CI (openssh-server, chromium)');
if (!haveSshd() || !haveChromium)
  console.warn('SKIPPING the session tests: they need /usr/sbin/sshd and /usr/bin/chromium');
const available = haveSshd() && haveChromium && pythonAvailable('the notebook session tests (Jupyter Lab)');

/** Loopback addresses the fake Vast.ai hands out as instances, all served by the one sshd. */
const HOSTS = ['127.0.0.2', '127.0.0.3'];
const WAIT_MS = 120_000;

/**
 * The Environment a session runs in: the project's .venv first on PATH, so its Jupyter is found;
 * a step that prints the session's token, which the logs must show masked.
 */
const JUPYTER_ENV = `apiVersion: adventuretime.dev/v1alpha1
kind: Environment
metadata: {name: jupyter}
spec:
  version: 1
  setup: ['export PATH=${VENV_BIN}:$PATH', 'echo "token in setup: $JUPYTER_TOKEN"']
`;

/** A CLI process and what it printed so far. */
interface Cli {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exit: Promise<number | null>;
}

describe.runIf(available)('interactive sessions', () => {
  let tmp: string;
  let sshd: Sshd;
  let api: FakeVastApi;
  let wt: WorkTree;
  let c: Controller;
  let browser: Browser | undefined;
  let passing = true;
  let loop: Promise<void>;
  const clis: ChildProcess[] = [];

  const jobsUnder = (root: string) => jobPids(join(tmp, root, 'work'), () => true);

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-sessions-'));
    sshd = await startSshd({ addresses: HOSTS });
    api = await startFakeVastApi({
      sshEndpoints: HOSTS.map((host) => ({ host, port: sshd.port })),
      onStop: async () => killTree(await jobsUnder('vast-root')),
    });
    api.seedOffer({ dph_total: 0.4 });
    wt = await makeWorkTree({
      'backends/ssh-local.yaml': sshBackendYaml(sshd, 'ssh-local', join(tmp, 'ssh-root')),
      'backends/vast.yaml': vastaiBackendYaml(sshd, 'vast', join(tmp, 'vast-root'), { apiUrl: api.url }),
      'environments/jupyter.yaml': JUPYTER_ENV,
      'storage.yaml': fileStorageYaml(join(tmp, 'store')),
    });
    c = await Controller.create({
      repo: wt.dir,
      dataDir: join(tmp, 'data'),
      pollIntervalMs: 200,
      secrets: { env: ['VAST_API_KEY'] },
      secretEnv: { ...process.env, VAST_API_KEY: api.apiKey },
    });
    await c.init();
    // The controller runs beside the CLI processes, as it would on its own host.
    loop = (async () => {
      while (passing) {
        await c.pass();
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
  }, WAIT_MS);

  afterEach(async () => {
    await browser?.close();
    browser = undefined;
    for (const child of clis.splice(0)) await stopProcess(child);
  });

  afterAll(async () => {
    passing = false;
    await loop;
    await c?.stop();
    await api?.stop();
    await sshd?.stop();
    await killTree([...(await jobsUnder('ssh-root')), ...(await jobsUnder('vast-root'))]).catch(() => {});
    await wt?.cleanup();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  /** Starts `adv ARGS` in the specs repo, with the Vast.ai key in its environment (as a user's shell has it). */
  function adv(args: string[], stdin: 'pipe' | 'ignore' = 'ignore'): Cli {
    const child = spawn(process.execPath, [ADV, ...args], {
      cwd: wt.dir,
      env: {
        ...process.env,
        HOME: tmp,
        XDG_CACHE_HOME: join(tmp, 'cache'),
        VAST_API_KEY: api.apiKey,
      },
      stdio: [stdin, 'pipe', 'pipe'],
    });
    clis.push(child);
    let out = '';
    let err = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
    const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    return { child, out: () => out, err: () => err, exit };
  }

  const st = (run: string) => c.runStatus(run)?.status;

  /** Waits for `cond`, failing at once (with what it printed) if the CLI exits first. */
  const whileRunning = <T>(cli: Cli, what: string, cond: () => T): Promise<NonNullable<T>> =>
    Promise.race([
      waitFor(cond, { what, timeoutMs: WAIT_MS }),
      cli.exit.then((code) => {
        const v = cond();
        if (v) return v as NonNullable<T>;
        throw new Error(`adv exited ${code} before ${what}: ${cli.err()}`);
      }),
    ]);

  it(
    'adv notebook on the ssh backend: a cell run from the JupyterLab page in Chromium prints ADV_RUN; unused, it ends and Succeeds',
    async () => {
      const nb = adv([
        'notebook',
        '--on',
        'ssh-local',
        '--env-ref',
        'jupyter',
        '--idle',
        '5s',
        '--name',
        'nb-test',
      ]);
      const url = await whileRunning(
        nb,
        "the notebook's URL",
        () => /^http:\/\/127\.0\.0\.1:\d+\/lab\?token=\w+$/m.exec(nb.out())?.[0],
      );
      // The session Run is in git like any other, and placed like one.
      expect(await wt.git('show', 'main:runs/nb-test.yaml')).toMatch(
        /session:\n {4}kind: notebook\n {4}idleTimeoutSec: 5/,
      );
      expect(st('nb-test')).toMatchObject({ phase: 'Running' });
      expect(st('nb-test')!.attempts[0]!.backend).toBe('ssh-local');

      browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
      const page = await browser.newPage();
      page.setDefaultTimeout(WAIT_MS);
      const res = await page.goto(url);
      expect(res?.status()).toBe(200);
      expect(await page.title()).toContain('JupyterLab');
      // From the page: a kernel, and a cell over its WebSocket, as the Lab UI runs one.
      // The token from the printed URL (the Lab page drops it from its address once it has logged in).
      const token = new URL(url).searchParams.get('token')!;
      const printed = await page.evaluate(async (token: string) => {
        const location = (globalThis as unknown as { location: { href: string; host: string } }).location;
        const headers = { Authorization: `token ${token}`, 'Content-Type': 'application/json' };
        const k = (await (await fetch('/api/kernels', { method: 'POST', headers, body: '{}' })).json()) as {
          id: string;
        };
        const ws = new WebSocket(`ws://${location.host}/api/kernels/${k.id}/channels?token=${token}`);
        await new Promise((r, j) => ((ws.onopen = r), (ws.onerror = j)));
        const msgId = crypto.randomUUID();
        let out = '';
        const done = new Promise<string>((resolve) => {
          ws.onmessage = (e) => {
            const m = JSON.parse(e.data as string);
            if (m.parent_header?.msg_id !== msgId) return;
            if (m.msg_type === 'stream') out += m.content.text;
            if (m.msg_type === 'error') out += `ERROR ${m.content.ename}: ${m.content.evalue}`;
            if (m.msg_type === 'status' && m.content.execution_state === 'idle') resolve(out);
          };
        });
        ws.send(
          JSON.stringify({
            header: {
              msg_id: msgId,
              msg_type: 'execute_request',
              username: 'test',
              session: crypto.randomUUID(),
              version: '5.3',
              date: new Date().toISOString(),
            },
            parent_header: {},
            metadata: {},
            content: {
              code: 'import os; print(os.environ["ADV_RUN"])',
              silent: false,
              store_history: true,
              user_expressions: {},
              allow_stdin: false,
              stop_on_error: true,
            },
            buffers: [],
            channel: 'shell',
          }),
        );
        return done;
      }, token);
      expect(printed.trim()).toBe('nb-test');

      // adv ssh: a shell in the session's job dir, with the run's variables.
      const sh = adv(['ssh', 'nb-test'], 'pipe');
      sh.child.stdin!.end('echo "run=$ADV_RUN dir=$(pwd)"; exit 0\n');
      expect(await sh.exit).toBe(0);
      expect(sh.out()).toContain(`run=nb-test dir=${join(tmp, 'ssh-root', 'work', 'adv-nb-test-1', 'work')}`);

      // While the page holds its kernel connection, the session is in use, however long that is.
      const held = Date.now();
      await waitFor(() => Date.now() - held > 12_000, {
        what: 'two idle timeouts with the page open',
        timeoutMs: 30_000,
      });
      expect(st('nb-test')!.phase).toBe('Running');

      // The page goes away: the session ends after its idle timeout, as a success, and the CLI with it.
      await browser.close();
      browser = undefined;
      expect(await nb.exit).toBe(0);
      expect(nb.err()).toContain('session nb-test ended (Succeeded)');
      const a = st('nb-test')!.attempts[0]!;
      expect(a).toMatchObject({ phase: 'Succeeded', exitCode: 0 });
      expect(a.message ?? st('nb-test')!.message ?? '').toMatch(/unused|idle/);
      // The token was never shipped in the logs (Jupyter prints its URL with it).
      const logs = await readAllLogs(join(tmp, 'store', 'runs', 'nb-test', 'attempts', '1', 'logs'));
      expect(logs).toContain('Jupyter');
      expect(logs).toContain('token in setup: ***');
      expect(logs).not.toContain(token);
    },
    6 * WAIT_MS,
  );

  it(
    'adv shell on Vast.ai: holds the rented instance while the shell is open, then destroys it',
    async () => {
      const sh = adv(['shell', '--on', 'vast', '--idle', '3s', '--name', 'sh-test'], 'pipe');
      await whileRunning(
        sh,
        'the shell session running on a rented instance',
        () => /sh-test: Running/.test(sh.err()) && api.billing().length > 0,
      );
      // The shell is on the instance, in the job's dir, with the run's variables; it holds the session.
      const marker = join(tmp, 'shell-open');
      sh.child.stdin!.write(`echo "run=$ADV_RUN attempt=$ADV_ATTEMPT"; touch ${marker}\n`);
      await waitFor(() => existsSync(marker), { what: 'the shell to run a command', timeoutMs: WAIT_MS });
      await waitFor(() => /run=sh-test attempt=1/.test(sh.out()), { what: 'its output', timeoutMs: WAIT_MS });
      const open = Date.now();
      await waitFor(() => Date.now() - open > 8_000, {
        what: 'two idle timeouts with the shell open',
        timeoutMs: 30_000,
      });
      expect(st('sh-test')!.phase).toBe('Running');
      expect(api.billing().length).toBe(1);
      sh.child.stdin!.end('exit 0\n');
      expect(await sh.exit).toBe(0);
      // No shell: the idle timeout ends the session, a success, and the instance is destroyed.
      await waitFor(() => st('sh-test')?.phase === 'Succeeded', {
        what: 'the session to end',
        timeoutMs: WAIT_MS,
      });
      await waitFor(() => api.billing().length === 0, { what: 'the instance destroyed', timeoutMs: WAIT_MS });
      expect(api.ledger.filter((r) => r.label?.includes(':adv-sh-test-')).every((r) => r.destroyedAt)).toBe(
        true,
      );
    },
    4 * WAIT_MS,
  );
});

/** Every log part of an attempt, concatenated. */
async function readAllLogs(dir: string): Promise<string> {
  const { readdir, readFile } = await import('node:fs/promises');
  if (!existsSync(dir)) return '';
  const parts = (await readdir(dir)).sort();
  return (await Promise.all(parts.map((p) => readFile(join(dir, p), 'utf8')))).join('');
}
