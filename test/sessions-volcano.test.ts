/**
 * `adv notebook --on` a volcano Backend, end to end: the session Run committed to the specs repo,
 * the controller's Volcano Job (the fake Kubernetes API with the real kubectl, helpers/k8s/fake-k8s.ts),
 * Jupyter Lab started by adv exec in the pod, and the CLI's `kubectl port-forward` to it (WebSocket
 * tunnelled SPDY, helpers/k8s/fake-k8s-streams.ts). Headless Chromium, on the forwarded port, runs a
 * cell through the kernel's WebSocket: it prints the session's ADV_RUN. Then the idle timeout ends
 * the session: Succeeded, and the Job goes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import { fileStorageYaml, volcanoBackendYaml } from './helpers/backends/kinds.js';
import { k8sAvailable, podLogs, startFakeK8s, type FakeK8s } from './helpers/k8s/fake-k8s.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const CHROMIUM = '/usr/bin/chromium';
const VENV_BIN = join(import.meta.dirname, '..', '.venv', 'bin');
const ADV = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');
const k8s = k8sAvailable('the volcano notebook test');
const chromiumHere = existsSync(CHROMIUM) && existsSync(join(VENV_BIN, 'jupyter-lab'));
if (k8s && !chromiumHere && process.env.CI)
  throw new Error(`the volcano notebook test needs Chromium at ${CHROMIUM} and .venv/bin/jupyter-lab in CI`);
if (k8s && !chromiumHere)
  console.warn('SKIPPING the volcano notebook test: it needs Chromium and .venv/bin/jupyter-lab');
const NS = 'default';
const NAME = 'nb-volcano';

describe.runIf(k8s && chromiumHere)('adv notebook on a volcano backend, through kubectl port-forward', () => {
  let tmp: string;
  let store: string;
  let fake: FakeK8s;
  let wt: WorkTree;
  let c: Controller;
  let cli: ChildProcess | undefined;
  let browser: Browser | undefined;
  let passing = true;
  let loop: Promise<void> | undefined;
  const oldPath = process.env.PATH;

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-nb-volcano-'));
    store = join(tmp, 'store');
    await mkdir(store, { recursive: true });
    process.env.KUBECACHEDIR = join(tmp, 'kube-cache');
    // The fake kubelet's pods get the host's PATH: Jupyter Lab from the .venv, as an image would have it.
    process.env.PATH = `${VENV_BIN}${delimiter}${oldPath ?? ''}`;
    fake = await startFakeK8s({ dir: join(tmp, 'k8s'), pvcs: { [`${NS}/adv-store`]: store } });
    wt = await makeWorkTree({
      'backends/k8s.yaml': volcanoBackendYaml(fake, 'k8s', {
        volumes: [{ claimName: 'adv-store', mountPath: store }],
      }),
      'storage.yaml': fileStorageYaml(store),
    });
    c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data'), pollIntervalMs: 200 });
    await c.init();
    // The controller reconciles in the background, as a deployed one does, while the CLI waits.
    loop = (async () => {
      while (passing) {
        await c.pass().catch((e: unknown) => console.error('controller pass:', e));
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
  }, 120_000);

  afterAll(async () => {
    passing = false;
    await loop;
    if (cli && cli.exitCode === null) {
      const gone = new Promise((r) => cli!.once('exit', r));
      cli.kill('SIGTERM');
      await gone;
    }
    await browser?.close();
    await c?.stop();
    await wt?.cleanup();
    await fake?.close();
    process.env.PATH = oldPath;
    delete process.env.KUBECACHEDIR;
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('forwards a local port to Jupyter Lab in the pod; a cell prints ADV_RUN; idle ends it Succeeded', async () => {
    cli = spawn(
      process.execPath,
      [ADV, 'notebook', '--on', 'k8s', '--name', NAME, '--idle', '20s', '--repo', wt.dir, '--wait', '5m'],
      { cwd: wt.dir, env: { ...process.env }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    cli.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    cli.stderr!.on('data', (b: Buffer) => (err += b.toString()));
    const url = await waitFor(() => /http:\/\/127\.0\.0\.1:\d+\/lab\?token=\S+/.exec(out)?.[0], {
      what: 'adv notebook to print its local URL',
      timeoutMs: 300_000,
      giveUpIf: () => cli!.exitCode !== null && `adv notebook exited ${cli!.exitCode}`,
      detail: async () => ({ out, err, pods: await podLogs(join(tmp, 'k8s')) }),
    });
    const { origin, searchParams } = new URL(url);
    const token = searchParams.get('token')!;
    // kubectl's default: the WebSocket upgrade (a GET), not the SPDY one (a POST).
    const forwarded = fake.requests.filter((r) => r.path.endsWith('/portforward'));
    expect(forwarded.map((r) => r.method)).toEqual(['GET']);

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const page = await browser.newPage();
    // The Lab page, not an API one: Jupyter's API responses carry CSP `default-src 'none'`, which
    // would forbid the page's own fetch and WebSocket below.
    await page.goto(url, { waitUntil: 'domcontentloaded' });
    // A kernel, and a cell over its channels WebSocket, from inside the page: what the Lab UI does.
    const printed = await page.evaluate(
      async ({ origin, token }) => {
        const auth = { Authorization: `token ${token}` };
        const k = (await (
          await fetch(`${origin}/api/kernels`, { method: 'POST', headers: auth, body: '{}' })
        ).json()) as { id: string };
        const ws = new WebSocket(
          `${origin.replace('http', 'ws')}/api/kernels/${k.id}/channels?token=${token}`,
        );
        await new Promise((r, j) => ((ws.onopen = r), (ws.onerror = j)));
        const msgId = crypto.randomUUID();
        return new Promise<string>((resolve) => {
          let text = '';
          ws.onmessage = (e) => {
            const m = JSON.parse(String(e.data));
            if (m.parent_header?.msg_id !== msgId) return;
            if (m.msg_type === 'stream') text += m.content.text;
            if (m.msg_type === 'status' && m.content.execution_state === 'idle') resolve(text);
          };
          ws.send(
            JSON.stringify({
              header: {
                msg_id: msgId,
                msg_type: 'execute_request',
                username: '',
                session: msgId,
                version: '5.3',
              },
              parent_header: {},
              metadata: {},
              channel: 'shell',
              content: { code: "import os; print(os.environ['ADV_RUN'])", silent: false },
            }),
          );
        });
      },
      { origin, token },
    );
    expect(printed.trim()).toBe(NAME);
    await browser.close();
    browser = undefined;

    // Nothing uses it now: the idle timeout ends the session, and the CLI with it.
    await waitFor(() => c.runStatus(NAME)?.status?.phase === 'Succeeded', {
      what: `${NAME} to end Succeeded after its idle timeout`,
      timeoutMs: 180_000,
      detail: () => ({ status: c.runStatus(NAME)?.status, out, err }),
    });
    await waitFor(() => !fake.objects('jobs', NS).length, {
      what: "the session's Volcano Job to be deleted",
      timeoutMs: 60_000,
    });
    await waitFor(() => cli!.exitCode !== null, {
      what: 'adv notebook to exit once its session ended',
      timeoutMs: 60_000,
      detail: () => err,
    });
    const code = cli.exitCode;
    expect({ code, err }).toMatchObject({ code: 0, err: expect.stringContaining(`session ${NAME} ended`) });
  }, 600_000);
});
