/**
 * `adv cost` and `adv describe` read money and GPU-hours from the status branch alone, through the
 * real CLI against a real specs repo: runs whose specs were deleted long ago (only their status
 * files are left) count, per run and per label value, clipped to a period; a bad date is refused
 * with the fix. The dashboard's cost page, served by a real controller on that repo, says the same.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { dashboardRoute } from '../controller/dashboard/index.js';
import { serve } from '../controller/serve.js';
import { captureIo, removeTree } from './helpers/io.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { seedRunStatuses } from './helpers/git/status-branch.js';

const at = (day: number, h: number) => new Date(Date.UTC(2026, 9, day, h)).toISOString();

/** A finished run: one attempt from `from` to `to` at `perHour`, holding `gpus` GPUs on one node. */
const run = (
  name: string,
  team: string | undefined,
  gpus: number,
  perHour: number,
  from: string,
  to: string,
) => ({
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'RunStatus',
  metadata: { name, ...(team ? { labels: { team } } : {}) },
  appliedSpec: { command: ['train'], resources: { gpus } },
  status: {
    phase: 'Cancelled',
    reason: 'SpecDeleted',
    conditions: [],
    attempts: [
      {
        n: 1,
        backend: 'box',
        jobName: `adv-${name}-1`,
        phase: 'Succeeded',
        class: 'Succeeded',
        specCommit: 'c0ffee',
        submittedAt: from,
        startedAt: from,
        finishedAt: to,
        price: { perHour, from: 'started' },
      },
    ],
  },
});

describe('adv cost: a lab monthly view from the status branch', () => {
  let tmp: string;
  let wt: WorkTree;

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-cost-usage-'));
    wt = await makeWorkTree({ 'README.md': 'no specs left: every run was deleted\n' });
    seedRunStatuses(wt.dir, [
      // October 1st, 10 h at $2 with 8 GPUs; Oct 2nd 00:00–04:00 at $1 with 2 GPUs; an unlabelled one.
      run('pretrain', 'nlp', 8, 2, at(1, 0), at(1, 10)),
      run('finetune', 'nlp', 2, 1, at(2, 0), at(2, 4)),
      run('vision', undefined, 1, 0.5, at(1, 0), at(1, 2)),
    ]);
  }, 60_000);

  afterAll(async () => {
    await wt?.cleanup();
    if (tmp) await removeTree(tmp);
  });

  async function adv(args: string[]) {
    const io = captureIo({ ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache') }, wt.dir);
    const code = await runCli(args, io);
    return { code, out: io.out(), err: io.err() };
  }

  it('totals every run, and per label value, most expensive first', async () => {
    const r = await adv(['cost', '--by', 'team']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^RUN +COST +GPU-HOURS +HOURS +ATTEMPTS$/m);
    expect(r.out).toMatch(/^pretrain +20\.00 +80\.00 +10\.00 +1$/m);
    expect(r.out).toMatch(/^finetune +4\.00 +8\.00 +4\.00 +1$/m);
    expect(r.out).toMatch(/^nlp +24\.00 +88\.00 +14\.00 +2$/m);
    expect(r.out).toMatch(/^\(none\) +1\.00 +2\.00 +2\.00 +1$/m);
    expect(r.out).toMatch(/^Total: 25\.00 over 3 priced attempt\(s\); 90\.00 GPU-hours; 3 run\(s\)\.$/m);
  });

  it('clips to --since/--until (the part of each attempt inside), as JSON too', async () => {
    const r = await adv(['cost', '--since', at(1, 5), '--until', at(2, 1), '-o', 'json']);
    expect(r.code, r.err).toBe(0);
    const report = JSON.parse(r.out) as { runs: { name: string; cost: number }[]; total: { cost: number } };
    // pretrain: 05:00–10:00 = 5 h × $2; finetune: 00:00–01:00 = 1 h × $1; vision: before the period.
    expect(report.runs.map((x) => [x.name, x.cost])).toEqual([
      ['pretrain', 10],
      ['finetune', 1],
    ]);
    expect(report.total.cost).toBe(11);
  });

  it('refuses a date it cannot read, saying how to write one', async () => {
    const r = await adv(['cost', '--since', 'last tuesday']);
    expect(r.code).not.toBe(0);
    expect(r.err).toContain('--since last tuesday is not a date');
    expect(r.err).toContain('2026-11-01');
  });

  it('adv describe gives the GPU-hours beside the cost so far', async () => {
    const r = await adv(['describe', 'run', 'pretrain']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^Cost: +20\.00 over 1 priced attempt/m);
    expect(r.out).toMatch(/^GPU-hours: +80\.00 \(10\.00 h run × the GPUs it holds\)$/m);
  });

  it('the dashboard shows the same per label and per run, and a run page its GPU-hours', async () => {
    const c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data'), pollIntervalMs: 100 });
    try {
      await c.runUntilIdle({ timeoutMs: 60_000 });
      const serving = await serve(c, { httpAddr: '127.0.0.1:0', watch: false, routes: [dashboardRoute(c)] });
      try {
        const page = await (await fetch(`${serving.url}/ui/cost?by=team`)).text();
        expect(page).toContain('<b>25.00</b> over 3 priced attempt(s)');
        expect(page).toMatch(/<td>nlp<\/td>\s*<td class="num">24\.00<\/td>\s*<td class="num">88\.00<\/td>/);
        expect(page).toMatch(
          /<a href="\/ui\/runs\/pretrain">pretrain<\/a><\/td>\s*<td class="num">20\.00<\/td>/,
        );
        const api = (await (await fetch(`${serving.url}/ui/api/cost?by=team`)).json()) as {
          report: { groups: { name: string; cost: number }[] };
        };
        expect(api.report.groups.map((g) => [g.name, g.cost])).toEqual([
          ['nlp', 24],
          ['(none)', 1],
        ]);
        const bad = await fetch(`${serving.url}/ui/cost?since=someday`);
        expect(bad.status).toBe(400);
        expect(await bad.text()).toContain('since=someday is not a date');
        const run = await (await fetch(`${serving.url}/ui/runs/pretrain`)).text();
        expect(run).toContain('80.00 (10.00 h × 8 GPUs)');
      } finally {
        await serving.close();
      }
    } finally {
      await c.stop();
    }
  });
});
