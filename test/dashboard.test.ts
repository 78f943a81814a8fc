/**
 * The read-only dashboard (`adv controller --dashboard`) in a real headless Chromium: the overview
 * lists a run and the example DAG's child runs, the DAG page draws the graph as SVG, a run page
 * tails the run's logs from the object store, markup from specs is shown as text, and /metrics is
 * served on the same listener. Screenshots go to test-artifacts/dashboard/.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import { dashboardRoute, esc, hostAllowed, html } from '../controller/dashboard/index.js';
import { serve, type Serving } from '../controller/serve.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';

const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
if (!available && process.env.CI) throw new Error(`the dashboard tests need Chromium at ${CHROMIUM} in CI`);
if (!available) console.warn(`SKIPPING the dashboard tests: they need Chromium at ${CHROMIUM}`);

const SPECS = join(import.meta.dirname, '..', 'specs');
const SHOTS = join(import.meta.dirname, '..', 'test-artifacts', 'dashboard');
const PRINTED = 'hello from the dashboard test';
const XSS = '<img src=x onerror=alert(1)>';
/** A ceiling for one wait (a run to finish, the page to show something) on a loaded machine. */
const WAIT_MS = 60_000;

// Prints two lines around a short sleep and commits a checkpoint at step 5 of 10.
const HELLO = runYaml(
  'hello',
  [
    'sh',
    '-c',
    `echo "${PRINTED}"; sleep 0.5; mkdir -p "$ADV_CKPT_DIR/5"; echo w > "$ADV_CKPT_DIR/5/weights"; ` +
      `touch "$ADV_CKPT_DIR/5/COMMITTED"; sleep 1; echo "second line"`,
  ],
  '  totalSteps: 10\n',
);

describe('escaping', () => {
  it('escapes every interpolated value and passes nested fragments through', () => {
    expect(esc(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
    const inner = html`<b>${XSS}</b>`;
    expect(html`<td title="${'"q"'}">${inner}${[html`<i>${'<'}</i>`, '>']}${undefined}</td>`.text).toBe(
      '<td title="&quot;q&quot;"><b>&lt;img src=x onerror=alert(1)&gt;</b><i>&lt;</i>&gt;</td>',
    );
  });

  it('answers only localhost and IP addresses unless told otherwise (DNS rebinding)', () => {
    expect(hostAllowed('127.0.0.1:8080')).toBe(true);
    expect(hostAllowed('[::1]:8080')).toBe(true);
    expect(hostAllowed('localhost:8080')).toBe(true);
    expect(hostAllowed('evil.example.com:8080')).toBe(false);
    expect(hostAllowed('adv.lab.example:443', ['adv.lab.example'])).toBe(true);
  });
});

describe.runIf(available)('the dashboard in Chromium', () => {
  let tmp: string;
  let wt: WorkTree;
  let c: Controller;
  let serving: Serving;
  let browser: Browser;
  let url: string;
  let page: Page;
  const dialogs: string[] = [];

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-dashboard-'));
    await mkdir(SHOTS, { recursive: true });
    wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'storage.yaml': FILE_STORAGE,
      'runs/hello.yaml': HELLO,
      'runs/bad.yaml': runYaml('bad', ['true'], `  resources:\n    gpus: "${XSS}"\n`),
      'dags/pipeline.yaml': await readFile(join(SPECS, 'dags', 'pipeline.yaml'), 'utf8'),
      'pipeline/tokenize.py': await readFile(join(SPECS, 'pipeline', 'tokenize.py'), 'utf8'),
      'pipeline/train.py': await readFile(join(SPECS, 'pipeline', 'train.py'), 'utf8'),
      'pipeline/rollouts.py': await readFile(join(SPECS, 'pipeline', 'rollouts.py'), 'utf8'),
    });
    c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data'), pollIntervalMs: 100 });
    await c.runUntilIdle({ timeoutMs: 4 * WAIT_MS }); // hello and the DAG's three nodes
    serving = await serve(c, { httpAddr: '127.0.0.1:0', watch: false, routes: [dashboardRoute(c)] });
    url = serving.url!;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    page.setDefaultTimeout(WAIT_MS);
    // An alert() would mean that markup from a spec ran as script.
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
  }, 6 * WAIT_MS);

  afterAll(async () => {
    await browser?.close();
    await serving?.close();
    await c?.stop();
    await wt?.cleanup();
    if (tmp) await removeTree(tmp);
  });

  const cell = (row: string, col: string) => page.locator(`tr${row} td[data-col="${col}"]`).innerText();

  it('lists the runs, the DAG and the backend, and refreshes from its JSON endpoint', async () => {
    const res = await page.goto(`${url}/ui/`);
    expect(res?.status()).toBe(200);
    expect(res?.headers()['content-security-policy']).toContain("script-src 'self'");
    for (const run of ['hello', 'pipeline.tokenize', 'pipeline.train', 'pipeline.rollouts'])
      expect((await cell(`[data-run="${run}"]`, 'phase')).trim(), run).toBe('Succeeded');
    expect(
      await page.locator('tr[data-run="pipeline.train"] td[data-col="owner"] a').getAttribute('href'),
    ).toBe('/ui/dags/pipeline');
    expect(await page.locator('tr[data-run="hello"] td[data-col="owner"]').innerText()).toBe('');
    expect(await cell('[data-run="hello"]', 'backend')).toBe('local');
    expect(await cell('[data-run="hello"]', 'attempt')).toBe('1');
    // The checkpoint against the declared total: a bar and the numbers.
    expect(await cell('[data-run="hello"]', 'progress')).toContain('5 / 10');
    expect(await page.locator('tr[data-run="hello"] progress').getAttribute('value')).toBe('5');
    // No declared total: the step alone (train checkpoints once per shard), or '-' without checkpoint.
    expect(await cell('[data-run="pipeline.train"]', 'progress')).toMatch(/^[1-9]\d*$/);
    expect(await page.locator('tr[data-run="pipeline.train"] progress').count()).toBe(0);
    expect(await cell('[data-run="pipeline.tokenize"]', 'progress')).toBe('-');
    expect((await cell('[data-dag="pipeline"]', 'phase')).trim()).toBe('Succeeded');
    expect(await cell('[data-dag="pipeline"]', 'nodes')).toBe('3/3');
    expect(await cell('[data-backend="local"]', 'type')).toBe('local');
    expect((await cell('[data-backend="local"]', 'ready')).trim()).toBe('True');
    expect(await cell('[data-backend="local"]', 'active')).toBe('0');

    // The script swaps in fresh sections from /ui/api/overview; the rows are still there after.
    await page.waitForSelector('body[data-refreshed]', { timeout: WAIT_MS });
    expect(await page.locator('#live').innerText()).toMatch(/^updated /);
    expect(await page.locator('tr[data-run]').count()).toBe(5);
    await page.screenshot({ path: join(SHOTS, 'overview.png'), fullPage: true });

    const api = (await (await fetch(`${url}/ui/api/overview`)).json()) as {
      runs: { name: string; phase: string; step: number | null; totalSteps: number | null }[];
      dags: { name: string; succeeded: number; nodes: number }[];
    };
    expect(api.runs.find((r) => r.name === 'hello')).toMatchObject({
      phase: 'Succeeded',
      step: 5,
      totalSteps: 10,
    });
    expect(api.dags).toEqual([expect.objectContaining({ name: 'pipeline', succeeded: 3, nodes: 3 })]);
  });

  it('draws the DAG as SVG with each node’s phase, linked to its child run', async () => {
    const res = await page.goto(`${url}/ui/dags/pipeline`);
    expect(res?.status()).toBe(200);
    const nodes = page.locator('svg.dag g.node');
    expect(await nodes.count()).toBe(3);
    const seen: Record<string, string | null> = {};
    for (const n of await nodes.all())
      seen[(await n.getAttribute('data-node'))!] = await n.getAttribute('data-phase');
    expect(seen).toEqual({ tokenize: 'Succeeded', train: 'Succeeded', rollouts: 'Succeeded' });
    expect(await page.locator('svg.dag g.node[data-node="train"] text.phase').textContent()).toBe(
      'Succeeded',
    );
    const edges = await page
      .locator('svg.dag path.edge')
      .evaluateAll((els) => els.map((e) => `${e.getAttribute('data-from')}->${e.getAttribute('data-to')}`));
    expect(edges.sort()).toEqual(['tokenize->train', 'train->rollouts']);
    // Columns by depth: tokenize left of train left of rollouts.
    const x = async (id: string) =>
      (await page.locator(`svg.dag g.node[data-node="${id}"]`).boundingBox())!.x;
    expect(await x('tokenize')).toBeLessThan(await x('train'));
    expect(await x('train')).toBeLessThan(await x('rollouts'));
    expect(await page.locator('svg.dag a:has(g.node[data-node="train"])').getAttribute('href')).toBe(
      '/ui/runs/pipeline.train',
    );
    expect(await page.locator('tr[data-node="rollouts"]').innerText()).toContain('pipeline.rollouts');
    await page.screenshot({ path: join(SHOTS, 'dag-pipeline.png'), fullPage: true });
    expect(await page.locator('#compare-nodes').getAttribute('href')).toBe(
      '/ui/compare?runs=pipeline.tokenize,pipeline.train,pipeline.rollouts',
    );

    await page.click('svg.dag a:has(g.node[data-node="rollouts"])');
    await page.waitForURL(`${url}/ui/runs/pipeline.rollouts`);
    expect(await page.locator('h1').innerText()).toContain('pipeline.rollouts');
  });

  it('goes from the run list to a run page: attempts, status commits, and the tailed logs', async () => {
    await page.goto(`${url}/ui/`);
    await page.click('tr[data-run="hello"] td[data-col="name"] a');
    await page.waitForURL(`${url}/ui/runs/hello`);
    expect(await page.locator('h1').innerText()).toMatch(/^hello\s+Succeeded$/);
    const attempt = page.locator('section[data-section="attempts"] tr[data-attempt="1"]');
    const row = await attempt.innerText();
    expect(row).toContain('local');
    expect(row).toContain('0 → 5'); // steps: from scratch to the checkpoint at 5
    expect(row).toContain('Succeeded');
    // The status commits that touched runs/hello.yaml, newest first, as git has them.
    const commits = await page
      .locator('section[data-section="history"] tr[data-commit]')
      .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-commit')));
    const history = await c.view.statusHistory('Run', 'hello', 30);
    expect(history.length).toBeGreaterThan(1);
    expect(commits).toEqual(history.map((h) => h.oid));
    expect(await page.locator('section[data-section="history"] tr[data-commit] td').nth(2).innerText()).toBe(
      history[0]!.message.split('\n')[0]!.trim(),
    );

    const logs = page.locator('pre#logs');
    await page.waitForSelector('pre#logs:has-text("second line")', { timeout: WAIT_MS });
    const text = await logs.innerText();
    expect(text).toContain(PRINTED);
    expect(text.indexOf(PRINTED)).toBeLessThan(text.indexOf('second line'));
    await page.waitForSelector('pre#logs[data-done="true"]', { timeout: WAIT_MS });
    expect(await page.locator('#logs-note').innerText()).toBe('the attempt has ended');
    await page.screenshot({ path: join(SHOTS, 'run-hello.png'), fullPage: true });
  });

  it('tails logs by parts: after=N returns only what is new', async () => {
    const first = (await (await fetch(`${url}/ui/api/runs/hello/logs?attempt=1&after=0`)).json()) as {
      after: number;
      text: string;
      done: boolean;
    };
    expect(first.text).toContain(PRINTED);
    expect(first.after).toBeGreaterThan(0);
    expect(first.done).toBe(true);
    const again = (await (
      await fetch(`${url}/ui/api/runs/hello/logs?attempt=1&after=${first.after}`)
    ).json()) as {
      after: number;
      text: string;
    };
    expect(again).toMatchObject({ after: first.after, text: '' });
    expect((await fetch(`${url}/ui/api/runs/hello/logs?attempt=7`)).status).toBe(404);
  });

  it('shows markup from a spec as text', async () => {
    await page.goto(`${url}/ui/runs/bad`);
    const valid = page.locator('tr[data-condition="Valid"]');
    expect(await valid.innerText()).toContain(XSS);
    expect(await page.locator('img').count()).toBe(0);
    expect(dialogs).toEqual([]);
    expect(await page.locator('#logs').count()).toBe(0);
    expect(await page.locator('main').innerText()).toContain('No attempt yet');
    await page.screenshot({ path: join(SHOTS, 'run-bad.png'), fullPage: true });
  });

  it('answers 404 for unknown names and pages, and refuses writes and foreign Host names', async () => {
    for (const path of ['/ui/runs/nope', '/ui/dags/nope', '/ui/runs/%3Cscript%3E', '/ui/nothing-here']) {
      const res = await page.goto(`${url}${path}`);
      expect(res?.status(), path).toBe(404);
      expect(await page.locator('h1').innerText()).toBe('Not found');
    }
    expect(await page.locator('main').innerText()).toContain('No page /ui/nothing-here');
    await page.goto(`${url}/ui/runs/nope`);
    expect(await page.locator('main').innerText()).toContain('There is no run "nope"');
    await page.screenshot({ path: join(SHOTS, 'not-found.png'), fullPage: true });
    expect((await fetch(`${url}/ui/api/dags/nope`)).status).toBe(404);
    expect((await fetch(`${url}/ui/`, { method: 'POST' })).status).toBe(405);
    const { request } = await import('node:http');
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const req = request(`${url}/ui/`, { headers: { host: 'attacker.example:80' } }, (res) => {
        res.resume();
        resolve(res.statusCode);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(421);
  });

  it('serves /metrics on the same listener', async () => {
    const res = await fetch(`${url}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('adventuretime_runs{phase="Succeeded"} 4');
    expect(text).toContain('adventuretime_reconcile_duration_seconds_bucket');
  });
});
