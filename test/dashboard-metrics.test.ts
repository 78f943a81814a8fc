/**
 * Metric plots on the dashboard, in a real headless Chromium (as test/dashboard.test.ts drives it).
 *
 * First with metric parts put into the store by the test (`metricsPrefix`, as `adv exec` ships
 * them): a run preempted and resumed from step 10 draws one curve with the redone steps and the
 * resume marked, a long series is downsampled to the plot's width, and runs ticked on the overview
 * open the compare page. Then end to end: a real JAX job (examples/metrics-jax/train.py) logging
 * through the `adventuretime` helper under a controller on the local backend, preempted and resumed.
 * Screenshots go to test-artifacts/dashboard/ (metrics.png is the end-to-end run's page).
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import { dashboardRoute } from '../controller/dashboard/index.js';
import { serve, type Serving } from '../controller/serve.js';
import { metricsPrefix } from '../runtime/metrics.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { killTree } from './helpers/processes.js';
import { removeTree } from './helpers/io.js';
import { localJobPids } from './helpers/backends/job-pids.js';
import { PYTHON, pythonAvailable } from './helpers/python/python.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
if (!available && process.env.CI) throw new Error(`the dashboard tests need Chromium at ${CHROMIUM} in CI`);
if (!available) console.warn(`SKIPPING the dashboard metrics tests: they need Chromium at ${CHROMIUM}`);

const ROOT = join(import.meta.dirname, '..');
const SHOTS = join(ROOT, 'test-artifacts', 'dashboard');
/** A metric name is the workload's: it is shown as text, never markup. */
const XSS = '<img src=x onerror=alert(1)>';
/** A ceiling for one wait (runs to finish, the page to draw) on a loaded machine. */
const WAIT_MS = 60_000;

/**
 * Commits a checkpoint at step 10; in attempt 1 it then has adv exec take a SIGTERM (a spot
 * reclaim), so attempt 2 restores step 10.
 */
const RESUMED = runYaml(
  'resumed',
  [
    'sh',
    '-c',
    'if [ "$ADV_ATTEMPT" = 1 ]; then mkdir -p "$ADV_CKPT_DIR/10"; echo w > "$ADV_CKPT_DIR/10/weights"; ' +
      'touch "$ADV_CKPT_DIR/10/COMMITTED"; kill -TERM $PPID; sleep 30; fi',
  ],
  '  policy: {maxAttempts: 2, backoff: {initialSec: 0.5}}\n',
);

/** The lines `adventuretime.log` writes, for steps `from..to`. */
const lines = (from: number, to: number, value: (step: number) => Record<string, number>) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i)
    .map((step) => JSON.stringify({ step, time: 1_764_250_000 + step, metrics: value(step) }) + '\n')
    .join('');

interface Dashboard {
  c: Controller;
  serving: Serving;
  url: string;
}

async function startDashboard(wt: WorkTree, tmp: string): Promise<Dashboard> {
  const c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data'), pollIntervalMs: 100 });
  await c.runUntilIdle({ timeoutMs: 5 * WAIT_MS });
  const serving = await serve(c, { httpAddr: '127.0.0.1:0', watch: false, routes: [dashboardRoute(c)] });
  return { c, serving, url: serving.url! };
}

/** Stops what a describe started, whichever parts of it did start. */
async function stopAll(
  browser: Browser | undefined,
  d: Dashboard | undefined,
  wt: WorkTree | undefined,
  tmp: string | undefined,
): Promise<void> {
  await browser?.close();
  await d?.serving.close();
  await d?.c.stop();
  await wt?.cleanup();
  if (tmp) await removeTree(tmp);
}

/** A page that records what the Content-Security-Policy refused and what the page threw. */
async function newPage(browser: Browser, problems: string[]): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.setDefaultTimeout(WAIT_MS);
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('dialog', (dlg) => {
    problems.push(`dialog: ${dlg.message()}`);
    void dlg.dismiss();
  });
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  return page;
}

/** What a run page's plot of `metric` holds: uPlot's aligned data, read from the page's JS. */
const plotData = (page: Page, metric: string) =>
  page.evaluate(
    (m) =>
      (globalThis as unknown as { advPlots: Record<string, { data: (number | null | undefined)[][] }> })
        .advPlots[m]!.data,
    metric,
  );

/** The defined points of series `i` of aligned data, as [step, value]. */
const seriesPoints = (data: (number | null | undefined)[][], i: number) =>
  data[0]!.flatMap((x, k) => (data[i]![k] == null ? [] : [[x!, data[i]![k]!] as const]));

describe.runIf(available)('metric plots from parts in the store', () => {
  let tmp: string;
  let wt: WorkTree;
  let d: Dashboard;
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-dash-metrics-'));
    await mkdir(SHOTS, { recursive: true });
    wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'storage.yaml': FILE_STORAGE,
      'runs/resumed.yaml': RESUMED,
      'runs/long.yaml': runYaml('long', ['true']),
      'runs/other.yaml': runYaml('other', ['true']),
      'runs/quiet.yaml': runYaml('quiet', ['true']),
      'runs/twice.yaml': runYaml('twice', ['true']),
    });
    d = await startDashboard(wt, tmp);
    const store = d.c.view.objectStore!;
    // resumed: attempt 1 logged steps 1–12, attempt 2 restored step 10 and logged 11–40.
    await store.put(
      `${metricsPrefix('resumed', 1)}part-000000`,
      lines(1, 6, (s) => ({ loss: 10 / s })),
    );
    await store.put(
      `${metricsPrefix('resumed', 1)}part-000001`,
      lines(7, 12, (s) => ({ loss: 10 / s, acc: s / 100 })),
    );
    await store.put(
      `${metricsPrefix('resumed', 2)}part-000000`,
      lines(11, 40, (s) => ({ loss: 9 / s })),
    );
    // twice: resumed twice (status has one attempt: the marks fall back to where each took over).
    await store.put(
      `${metricsPrefix('twice', 1)}part-000000`,
      lines(1, 12, (s) => ({ loss: 3 / s })),
    );
    await store.put(
      `${metricsPrefix('twice', 2)}part-000000`,
      lines(11, 25, (s) => ({ loss: 2 / s })),
    );
    await store.put(
      `${metricsPrefix('twice', 3)}part-000000`,
      lines(21, 30, (s) => ({ loss: 1 / s })),
    );
    // long: 20,000 points with one spike, more than any plot has pixels.
    await store.put(
      `${metricsPrefix('long', 1)}part-000000`,
      lines(1, 20_000, (s) => ({ loss: s === 12_345 ? 50 : 1 + 1 / s })),
    );
    await store.put(
      `${metricsPrefix('long', 1)}part-000001`,
      lines(1, 3, () => ({ [XSS]: 1 })),
    );
    await store.put(
      `${metricsPrefix('other', 1)}part-000000`,
      lines(1, 30, (s) => ({ loss: 5 / s })),
    );
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await newPage(browser, problems);
  }, 6 * WAIT_MS);

  afterAll(() => stopAll(browser, d, wt, tmp));

  it('the resumed run: one continuous curve, the redone steps faded, the resume marked', async () => {
    const st = d.c.view.runStatus('resumed')!.status;
    expect(st.phase).toBe('Succeeded');
    expect(st.attempts.map((a) => [a.n, a.class, a.startStep])).toEqual([
      [1, 'Preempted', undefined],
      [2, 'Succeeded', 10],
    ]);

    const res = await page.goto(`${d.url}/ui/runs/resumed`);
    expect(res?.status()).toBe(200);
    await page.waitForSelector('body[data-plots-drawn]');
    expect(await page.locator('body').getAttribute('data-plots-drawn')).toBe('2');
    expect(
      await page
        .locator('#plots figure.plot')
        .evaluateAll((f) => f.map((x) => x.getAttribute('data-metric'))),
    ).toEqual(['acc', 'loss']);

    const data = await plotData(page, 'loss');
    const curve = seriesPoints(data, 1);
    expect(curve.map(([s]) => s)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(curve.slice(0, 10).map(([s, v]) => v - 10 / s)).toEqual(Array(10).fill(0));
    expect(curve.slice(10).map(([s, v]) => v - 9 / s)).toEqual(Array(30).fill(0));
    expect(seriesPoints(data, 2)).toEqual([
      [11, 10 / 11],
      [12, 10 / 12],
    ]);
    const mark = page.locator('figure[data-metric="loss"] .resume-mark');
    expect(await mark.count()).toBe(1);
    expect(await mark.getAttribute('data-attempt')).toBe('2');
    expect(await mark.getAttribute('data-step')).toBe('10');
    expect(await mark.innerText()).toBe('attempt 2 resumed from step 10');
    // The mark sits over step 10 of the plot: between the first point and the last.
    const box = (await page.locator('figure[data-metric="loss"] .u-over').boundingBox())!;
    const x = (await mark.boundingBox())!.x;
    expect(x).toBeGreaterThan(box.x + box.width * 0.15);
    expect(x).toBeLessThan(box.x + box.width * 0.35);
    // acc was logged by attempt 1 only, on steps that attempt 2 did not redo with acc.
    expect(seriesPoints(await plotData(page, 'acc'), 1).map(([s]) => s)).toEqual([7, 8, 9, 10, 11, 12]);
    expect(await page.locator('#plots').getAttribute('data-done')).toBe('true');
    await page.screenshot({ path: join(SHOTS, 'metrics-seeded.png'), fullPage: true });
    expect(problems).toEqual([]);
  });

  it('a run resumed twice: each resume’s redone steps are a line of their own', async () => {
    await page.goto(`${d.url}/ui/runs/twice`);
    await page.waitForSelector('body[data-plots-drawn]');
    const data = await plotData(page, 'loss');
    expect(seriesPoints(data, 1).map(([s]) => s)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    expect(seriesPoints(data, 2).map(([s]) => s)).toEqual([11, 12]);
    expect(seriesPoints(data, 3).map(([s]) => s)).toEqual([21, 22, 23, 24, 25]);
    expect(data.length).toBe(4);
    const labels = await page.evaluate(() =>
      (
        globalThis as unknown as { advPlots: { loss: { series: { label: string }[] } } }
      ).advPlots.loss.series.map((x) => x.label),
    );
    expect(labels).toEqual(['step', 'loss', 'attempt 1, redone', 'attempt 2, redone']);
    expect(
      await page
        .locator('figure[data-metric="loss"] .resume-mark')
        .evaluateAll((m) => m.map((x) => x.textContent)),
    ).toEqual(['attempt 2 took over at step 11', 'attempt 3 took over at step 21']);
    expect(problems).toEqual([]);
  });

  it('downsamples a series longer than the plot is wide, keeping the spike', async () => {
    await page.goto(`${d.url}/ui/runs/long`);
    await page.waitForSelector('body[data-plots-drawn]');
    const fig = page.locator('figure[data-metric="loss"]');
    expect(await fig.getAttribute('data-total')).toBe('20000');
    const shown = Number(await fig.getAttribute('data-points'));
    const width = (await page.locator('figure[data-metric="loss"] .u-over').boundingBox())!.width;
    expect(shown).toBeGreaterThan(100);
    expect(shown).toBeLessThanOrEqual(Math.ceil(width) + 100);
    const curve = seriesPoints(await plotData(page, 'loss'), 1);
    expect(curve.length).toBe(shown);
    expect(curve).toContainEqual([12_345, 50]);
    expect(curve[0]).toEqual([1, 2]);
    expect(curve.at(-1)![0]).toBe(20_000);
    expect(await page.locator(`figure[data-metric="${XSS}"] figcaption`).innerText()).toBe(XSS);
    expect(await page.locator('#plots img').count()).toBe(0);

    const api = (await (await fetch(`${d.url}/ui/api/runs/long/metrics?points=100`)).json()) as {
      series: { loss: { curve: { steps: number[]; values: number[]; total: number } } };
    };
    expect(api.series.loss.curve.total).toBe(20_000);
    expect(api.series.loss.curve.steps.length).toBeLessThanOrEqual(100);
    expect(api.series.loss.curve.values).toContain(50);
    expect((await fetch(`${d.url}/ui/api/runs/long/metrics?points=x`)).status).toBe(400);
    expect((await fetch(`${d.url}/ui/api/runs/nope/metrics`)).status).toBe(404);
    expect(problems).toEqual([]);
  });

  it('a run with no metrics says so', async () => {
    await page.goto(`${d.url}/ui/runs/quiet`);
    await page.waitForSelector('#plots[data-done="true"]');
    expect(await page.locator('#plots p.note').innerText()).toBe('This run logged no metrics.');
    expect(await page.locator('#plots figure').count()).toBe(0);
  });

  it('runs ticked on the overview open the compare page: a line per run, the other metrics a click away', async () => {
    await page.goto(`${d.url}/ui/`);
    const link = page.locator('#compare-link');
    expect(await link.innerText()).toBe('Compare runs');
    await page.check('tr[data-run="resumed"] input.compare');
    await page.check('tr[data-run="other"] input.compare');
    expect(await link.innerText()).toBe('Compare 2 runs');
    // The table is swapped from /ui/api/overview when it changed (the ages do): the ticks stay.
    const table = 'section[data-section="runs"] table';
    await page.locator(table).evaluate((t) => t.setAttribute('data-before-refresh', ''));
    await page.waitForFunction(
      (sel) =>
        !(
          globalThis as unknown as { document: { querySelector(s: string): unknown } }
        ).document.querySelector(`${sel}[data-before-refresh]`),
      table,
      { timeout: 2 * WAIT_MS }, // ages past 2 minutes change once a minute
    );
    expect(await page.isChecked('tr[data-run="resumed"] input.compare')).toBe(true);
    expect(await page.isChecked('tr[data-run="long"] input.compare')).toBe(false);
    expect(await link.getAttribute('href')).toBe('/ui/compare?runs=resumed,other');

    await link.click();
    await page.waitForURL(`${d.url}/ui/compare?runs=resumed,other`);
    await page.waitForSelector('body[data-plots-drawn]');
    const labels = await page.evaluate(() =>
      (
        globalThis as unknown as { advPlots: { compare: { series: { label: string }[] } } }
      ).advPlots.compare.series.map((s) => s.label),
    );
    expect(labels).toEqual(['step', 'resumed', 'other']);
    const data = await page.evaluate(
      () =>
        (globalThis as unknown as { advPlots: { compare: { data: (number | null)[][] } } }).advPlots.compare
          .data,
    );
    expect(seriesPoints(data, 1).length).toBe(40); // resumed: its curve across both attempts
    expect(seriesPoints(data, 2).length).toBe(30);
    expect(await page.locator('figure[data-metric="compare"] figcaption').innerText()).toBe('loss');
    expect(await page.locator('#metric-picker strong').innerText()).toBe('loss');
    expect(await page.locator('#metric-picker a').allInnerTexts()).toEqual(['acc']);
    await page.screenshot({ path: join(SHOTS, 'compare.png'), fullPage: true });

    await page.click('#metric-picker a:text-is("acc")');
    await page.waitForURL(/metric=acc/);
    await page.waitForSelector('body[data-plots-drawn]');
    expect(await page.locator('ul.missing li[data-run="other"]').innerText()).toBe(
      'other: logged no acc yet',
    );
    expect(problems).toEqual([]);
  });

  it('the compare endpoint says what is wrong with its runs', async () => {
    const bad = await fetch(`${d.url}/ui/api/compare?runs=resumed,Not_A_Name`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toContain('"Not_A_Name" is not a run name');
    const many = Array.from({ length: 51 }, (_, i) => `r${i}`).join(',');
    expect((await fetch(`${d.url}/ui/api/compare?runs=${many}`)).status).toBe(400);
    const j = (await (await fetch(`${d.url}/ui/api/compare?runs=other,gone`)).json()) as {
      runs: { run: string; missing?: string }[];
    };
    expect(j.runs.map((r) => [r.run, r.missing])).toEqual([
      ['other', undefined],
      ['gone', 'no such run on the status branch'],
    ]);
    const uplot = await fetch(`${d.url}/ui/assets/uplot.js`);
    expect(uplot.status).toBe(200);
    expect(uplot.headers.get('content-type')).toContain('text/javascript');
    expect(await uplot.text()).toContain('uPlot');
  });
});

describe.runIf(available)('a live run’s plots', () => {
  let tmp: string;
  let wt: WorkTree;
  let c: Controller;
  let loop: Promise<void>;
  let serving: Serving;
  let browser: Browser;
  const problems: string[] = [];
  let go: string;

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-dash-live-'));
    go = join(tmp, 'go');
    wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'storage.yaml': FILE_STORAGE,
      // Runs until the test lets it end.
      'runs/live.yaml': runYaml(
        'live',
        ['sh', '-c', 'while [ ! -e "$GO" ]; do sleep 0.1; done'],
        `  env: {GO: ${JSON.stringify(go)}}\n`,
      ),
    });
    c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data'), pollIntervalMs: 100 });
    loop = c.run();
    serving = await serve(c, {
      httpAddr: '127.0.0.1:0',
      watch: false,
      routes: [dashboardRoute(c, { refreshMs: 250 })],
    });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  }, 2 * WAIT_MS);

  afterAll(async () => {
    if (go) await writeFile(go, '');
    await browser?.close();
    await serving?.close();
    await c?.stop();
    await loop;
    if (c) await killTree(await localJobPids(c.dataDir));
    await wt?.cleanup();
    if (tmp) await removeTree(tmp);
  });

  it('draws points as they are shipped, and stops asking once the run has ended', async () => {
    await waitFor(() => c.view.runStatus('live')?.status.phase === 'Running', {
      what: 'run live to be Running',
      timeoutMs: WAIT_MS,
      detail: () => c.view.runStatus('live')?.status,
    });
    const page = await newPage(browser, problems);
    await page.goto(`${serving.url}/ui/runs/live`);
    await page.waitForSelector('#plots p.note:text-is("No metrics yet…")');
    const store = c.view.objectStore!;
    await store.put(
      `${metricsPrefix('live', 1)}part-000000`,
      lines(1, 5, (s) => ({ loss: 1 / s })),
    );
    await page.waitForSelector('figure[data-metric="loss"][data-points="5"]');
    expect(await page.locator('#plots p.note').count()).toBe(0);
    await store.put(
      `${metricsPrefix('live', 1)}part-000001`,
      lines(6, 9, (s) => ({ loss: 1 / s, acc: s / 10 })),
    );
    // The same plot takes the new points; a metric that appears gets its own plot.
    await page.waitForSelector('figure[data-metric="loss"][data-points="9"]');
    await page.waitForSelector('figure[data-metric="acc"][data-points="4"]');
    expect(seriesPoints(await plotData(page, 'loss'), 1).map(([s]) => s)).toEqual([
      1, 2, 3, 4, 5, 6, 7, 8, 9,
    ]);
    expect(await page.locator('#plots figure').count()).toBe(2);
    expect(await page.locator('#plots').getAttribute('data-done')).toBeNull();

    await writeFile(go, '');
    await page.waitForSelector('#plots[data-done="true"]', { timeout: WAIT_MS });
    expect(c.view.runStatus('live')?.status.phase).toBe('Succeeded');
    expect(problems).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------

const withPython = available && pythonAvailable('the dashboard’s end-to-end JAX metrics test');
const TRAIN = join(ROOT, 'examples', 'metrics-jax', 'train.py');
const STEPS = 40;
const CKPT_EVERY = 10;
const PREEMPT_AT = 13;

describe.runIf(withPython)('a real JAX job, preempted and resumed, on the dashboard', () => {
  let tmp: string;
  let wt: WorkTree;
  let d: Dashboard;
  let browser: Browser;
  const problems: string[] = [];

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-dash-jax-'));
    await mkdir(SHOTS, { recursive: true });
    const env = {
      PYTHONPATH: join(ROOT, 'runtime', 'python', 'src'),
      JAX_PLATFORMS: 'cpu',
      TRAIN_STEPS: String(STEPS),
      CKPT_EVERY: String(CKPT_EVERY),
      PREEMPT_AT_STEP: String(PREEMPT_AT),
    };
    wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'storage.yaml': FILE_STORAGE,
      'train.py': await readFile(TRAIN, 'utf8'),
      'runs/jax.yaml': runYaml(
        'jax',
        [PYTHON, 'train.py'],
        `  env: ${JSON.stringify(env)}\n  policy: {maxAttempts: 2, backoff: {initialSec: 0.5}}\n`,
      ),
    });
    d = await startDashboard(wt, tmp);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  }, 8 * WAIT_MS);

  afterAll(() => stopAll(browser, d, wt, tmp));

  it('shows one continuous loss curve over both attempts, with the resume from step 10 marked', async () => {
    const st = d.c.view.runStatus('jax')!.status;
    expect(st.phase, JSON.stringify(st, null, 2)).toBe('Succeeded');
    expect(st.attempts.map((a) => [a.n, a.class, a.startStep])).toEqual([
      [1, 'Preempted', undefined],
      [2, 'Succeeded', CKPT_EVERY],
    ]);

    const page = await newPage(browser, problems);
    await page.goto(`${d.url}/ui/runs/jax`);
    await page.waitForSelector('body[data-plots-drawn]');
    expect(
      await page.locator('figure[data-metric="loss"]').count(),
      `no loss plot; the page says: ${await page.locator('#plots').innerText()}`,
    ).toBe(1);
    const data = await plotData(page, 'loss');
    const curve = seriesPoints(data, 1);
    // Steps 1..40 once each: attempt 1's up to its checkpoint, then attempt 2's.
    expect(curve.map(([s]) => s)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    // Gradient descent on a convex loss: it goes down, and attempt 2 carried on from the checkpoint.
    for (let i = 1; i < curve.length; i++) expect(curve[i]![1]).toBeLessThan(curve[i - 1]![1]);
    // Attempt 1 went on past the checkpoint to at least the step it was preempted at: redone.
    const redone = seriesPoints(data, 2).map(([s]) => s);
    expect(redone.slice(0, PREEMPT_AT - CKPT_EVERY)).toEqual([11, 12, 13]);
    // Redone steps compute the same thing from the same checkpoint.
    for (const [s, v] of seriesPoints(data, 2)) expect(v).toBeCloseTo(curve[s - 1]![1], 5);
    const mark = page.locator('figure[data-metric="loss"] .resume-mark');
    expect(await mark.count()).toBe(1);
    expect(await mark.innerText()).toBe(`attempt 2 resumed from step ${CKPT_EVERY}`);
    await page.screenshot({ path: join(SHOTS, 'metrics.png'), fullPage: true });
    expect(problems).toEqual([]);
  });
});
