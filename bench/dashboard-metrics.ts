/**
 * The dashboard's metric plots (issue 31) in headless Chromium: a compare page overlaying R runs of
 * P points each (20 × 10,000 by default) against the single-run page of one such run, same run.
 * Time to rendered = navigation start to the mark the plots' script sets once every plot has drawn
 * (`performance.mark('adv-plots-drawn')`): fetching the series (read from the store and downsampled
 * on the server to about the plot's width), joining them and drawing. Median of K fresh page loads.
 *
 *   BENCH_DASH_RUNS (20), BENCH_DASH_POINTS (10000), BENCH_DASH_REPEATS (7)
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { Controller } from '../controller/controller.js';
import { dashboardRoute } from '../controller/dashboard/index.js';
import { serve } from '../controller/serve.js';
import { metricsPrefix } from '../runtime/metrics.js';
import { FILE_STORAGE } from '../test/helpers/backends/kinds.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml } from '../test/helpers/git/specs-repo.js';
import { median, stopLocalJobs, table } from './lib.js';

const RUNS = Number(process.env.BENCH_DASH_RUNS ?? 20);
const POINTS = Number(process.env.BENCH_DASH_POINTS ?? 10_000);
const REPEATS = Number(process.env.BENCH_DASH_REPEATS ?? 7);
const CHROMIUM = '/usr/bin/chromium';
if (!existsSync(CHROMIUM)) throw new Error(`the dashboard-metrics benchmark needs Chromium at ${CHROMIUM}`);

const names = Array.from({ length: RUNS }, (_, i) => `r${i}`);
const files: Record<string, string> = { 'backends/local.yaml': LOCAL_BACKEND, 'storage.yaml': FILE_STORAGE };
for (const n of names) files[`runs/${n}.yaml`] = runYaml(n, ['true']);
const wt = await makeWorkTree(files);
const tmp = await mkdtemp(join(tmpdir(), 'adv-bench-dash-'));
const c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data'), pollIntervalMs: 100 });
let browser: Browser | undefined;
try {
  await c.runUntilIdle({ timeoutMs: 10 * 60_000 });
  const store = c.view.objectStore!;
  // A noisy decaying loss, shipped as parts of 1,000 lines like adv exec's.
  for (const [i, n] of names.entries()) {
    for (let from = 1; from <= POINTS; from += 1000) {
      let text = '';
      for (let s = from; s < Math.min(from + 1000, POINTS + 1); s++)
        text += `{"step":${s},"time":${1_764_250_000 + s},"metrics":{"loss":${(2 + i / RUNS) / Math.sqrt(s) + 0.05 * Math.sin(s * (i + 1))}}}\n`;
      await store.put(`${metricsPrefix(n, 1)}part-${String((from - 1) / 1000).padStart(6, '0')}`, text);
    }
  }
  const serving = await serve(c, { httpAddr: '127.0.0.1:0', watch: false, routes: [dashboardRoute(c)] });
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const timeToDrawn = async (path: string): Promise<{ ms: number; points: number }> => {
      const page = await browser!.newPage({ viewport: { width: 1400, height: 900 } });
      try {
        page.setDefaultTimeout(120_000);
        await page.goto(`${serving.url}${path}`);
        await page.waitForSelector('body[data-plots-drawn]');
        return await page.evaluate(() => {
          const g = globalThis as unknown as {
            performance: { getEntriesByName(n: string): { startTime: number }[] };
            advPlots: Record<string, { data: unknown[][] }>;
          };
          const points = Object.values(g.advPlots).reduce(
            (sum, u) => sum + u.data.slice(1).reduce((k, s) => k + s.filter((v) => v != null).length, 0),
            0,
          );
          return { ms: g.performance.getEntriesByName('adv-plots-drawn')[0]!.startTime, points };
        });
      } finally {
        await page.close();
      }
    };
    const pages = [
      { what: `one run's page (${POINTS.toLocaleString('en')} points)`, path: `/ui/runs/${names[0]}` },
      {
        what: `compare ${RUNS} runs × ${POINTS.toLocaleString('en')} points`,
        path: `/ui/compare?runs=${names.join(',')}&metric=loss`,
      },
    ];
    await timeToDrawn(pages[0]!.path); // warm-up: Chromium's caches, the JIT, uPlot read once
    const results = pages.map(() => ({ ms: [] as number[], points: 0 }));
    for (let k = 0; k < REPEATS; k++)
      for (const [i, p] of pages.entries()) {
        const r = await timeToDrawn(p.path);
        results[i]!.ms.push(r.ms);
        results[i]!.points = r.points;
      }
    const base = median(results[0]!.ms);
    console.log(
      table(
        ['page', 'points drawn', 'time to rendered, median ms', 'ratio to one run'],
        pages.map((p, i) => [
          p.what,
          results[i]!.points,
          median(results[i]!.ms),
          i === 0 ? '1' : (median(results[i]!.ms) / base).toFixed(2),
        ]),
      ),
    );
  } finally {
    await serving.close();
  }
} finally {
  await browser?.close();
  await c.stop();
  await stopLocalJobs(c.dataDir);
  await wt.cleanup();
  await rm(tmp, { recursive: true, force: true });
}
