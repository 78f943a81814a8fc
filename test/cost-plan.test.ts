/**
 * `adv plan` says what a change will cost, through the real CLI against a real specs repo and
 * status branch: a branch adding two runs (and a DAG node) on a Vast.ai Backend prints each one's price (the
 * cheapest fitting offer the fake Vast.ai API quotes for it), expected hours (its `totalSteps` × the
 * step rate a finished run with the same command measured, read from the status branch) and
 * expected cost, and the total. Offline (`--no-quotes`) the price is what the backend billed per
 * GPU-hour before; without the API key the plan still prints and says why the quote failed.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { startFakeVastApi, type FakeVastApi } from './helpers/cloud/fake-vast-api.js';
import { captureIo, removeTree } from './helpers/io.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { seedRunStatuses } from './helpers/git/status-branch.js';

const COMMAND = ['python3', 'train.py'];

const VAST_BACKEND = `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: vast}
spec:
  type: vastai
  vastai: {apiKeySecret: VAST_API_KEY, numGpus: 1}
`;

const runOf = (name: string, gpus: number, totalSteps: number) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command: ${JSON.stringify(COMMAND)}
  resources: {gpus: ${gpus}}
  totalSteps: ${totalSteps}
`;

/** A DAG whose one node is the same command: its node's run spec is priced too. */
const PIPE = `apiVersion: adventuretime.dev/v1alpha1
kind: DAG
metadata: {name: pipe}
spec:
  nodes:
    - id: train
      run: {command: ${JSON.stringify(COMMAND)}, resources: {gpus: 1}, totalSteps: 500}
`;

/** A finished run of the same command: 100 steps in 360 s on its one attempt (3.6 s a step). */
const calibration = () => {
  const t = Date.parse('2026-10-01T00:00:00Z');
  return {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'RunStatus',
    metadata: { name: 'calib' },
    appliedSpec: { command: COMMAND, resources: { gpus: 1 } },
    status: {
      phase: 'Succeeded',
      conditions: [],
      attempts: [
        {
          n: 1,
          backend: 'vast',
          jobName: 'adv-calib-1',
          phase: 'Succeeded',
          class: 'Succeeded',
          specCommit: 'c0ffee',
          submittedAt: new Date(t).toISOString(),
          startedAt: new Date(t).toISOString(),
          startStep: 0,
          lastStep: 100,
          lastStepAt: new Date(t + 360_000).toISOString(),
          // What its instance billed: $0.60 an hour for its one GPU.
          price: { perHour: 0.6, from: 'started' },
          finishedAt: new Date(t + 400_000).toISOString(),
        },
      ],
    },
  };
};

describe('adv plan: the expected cost of the runs a branch adds', () => {
  let tmp: string;
  let api: FakeVastApi;
  let wt: WorkTree;

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-cost-plan-'));
    // An endpoint makes offers rentable (nothing is rented: a plan only searches).
    api = await startFakeVastApi({ sshEndpoints: [{ host: '127.0.0.2', port: 1 }] });
    api.withdrawOffers();
    api.seedOffer({ num_gpus: 1, dph_total: 0.9 });
    api.seedOffer({ num_gpus: 1, dph_total: 0.5 });
    api.seedOffer({ num_gpus: 2, dph_total: 1.25 });
    api.seedOffer({ num_gpus: 2, dph_total: 2 });
    wt = await makeWorkTree({ 'backends/vast.yaml': VAST_BACKEND });
    seedRunStatuses(wt.dir, [calibration()]);
    await wt.git('checkout', '-q', '-b', 'feature');
    await wt.write('runs/small.yaml', runOf('small', 1, 1000));
    await wt.write('runs/big.yaml', runOf('big', 2, 2000));
    await wt.write('dags/pipe.yaml', PIPE);
    await wt.commit('two Vast.ai runs');
  }, 60_000);

  afterAll(async () => {
    await api?.stop();
    await wt?.cleanup();
    if (tmp) await removeTree(tmp);
  });

  async function plan(
    args: string[],
    env: NodeJS.ProcessEnv = { VAST_URL: api.url, VAST_API_KEY: api.apiKey },
  ) {
    const io = captureIo({ ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache'), ...env }, wt.dir);
    const code = await runCli(['plan', '--base', 'main', ...args], io);
    return { code, out: io.out(), err: io.err() };
  }

  it("prints each run's price from the cheapest fitting offer, its expected hours and cost, and the total", async () => {
    const before = api.requests.length;
    const r = await plan([]);
    expect(r.code, r.err).toBe(0);
    // small and pipe.train ask the same (one GPU): one search each for them and for big.
    const searches = api.requests.slice(before).filter((q) => q.path.includes('bundles'));
    expect(searches).toHaveLength(2);
    // small: 1000 steps × 3.6 s = 1 h at $0.50/h; big: 2000 × 3.6 s = 2 h at $1.25/h.
    expect(r.out).toMatch(
      /^ {2}small +on vast: \$0\.50\/h \(quote\), 1\.0 h, \$0\.50 {2}\(cheapest of 2 offers: RTX 4090 ×1\)$/m,
    );
    expect(r.out).toMatch(
      /^ {2}big +on vast: \$1\.25\/h \(quote\), 2\.0 h, \$2\.50 {2}\(cheapest of 2 offers: RTX 4090 ×2\)$/m,
    );
    // The DAG's node: 500 steps × 3.6 s = 0.5 h at $0.50/h.
    expect(r.out).toMatch(/^ {2}pipe\.train +on vast: \$0\.50\/h \(quote\), 0\.5 h, \$0\.25 /m);
    expect(r.out).toMatch(/^Expected cost: \$3\.25\.$/m);

    const json = JSON.parse((await plan(['-o', 'json'])).out) as {
      cost: { runs: { run: string; perHour: number; hours: number; cost: number; hoursFrom: string }[] };
    };
    expect(json.cost.runs.map((l) => [l.run, l.perHour, l.hours, l.cost, l.hoursFrom])).toEqual([
      ['big', 1.25, 2, 2.5, 'step rate of run calib'],
      ['pipe.train', 0.5, 0.5, 0.25, 'step rate of run calib'],
      ['small', 0.5, 1, 0.5, 'step rate of run calib'],
    ]);

    const md = await plan(['-o', 'markdown']);
    expect(md.out).toContain(
      '| `small` | `vast` | $0.50/h (quote) | 1.0 h | $0.50 | cheapest of 2 offers: RTX 4090 ×1 |',
    );
    expect(md.out).toContain('**Expected cost: $3.25.**');
  });

  it('offline it prices by what the backend billed before; without the API key it says why', async () => {
    const searches = api.requests.length;
    const offline = await plan(['--no-quotes']);
    expect(offline.code, offline.err).toBe(0);
    expect(api.requests.length).toBe(searches);
    // Offline, the price is what the backend billed per GPU-hour before (calib: $0.60 for 1 GPU).
    expect(offline.out).toMatch(/^ {2}small +on vast: \$0\.60\/h \(recorded\), 1\.0 h, \$0\.60$/m);
    expect(offline.out).toMatch(/^ {2}big +on vast: \$1\.20\/h \(recorded\), 2\.0 h, \$2\.40$/m);
    expect(offline.out).toMatch(/^Expected cost: \$3\.30\.$/m);

    const noKey = await plan([], { VAST_URL: api.url, VAST_API_KEY: '' });
    expect(noKey.code, noKey.err).toBe(0);
    expect(noKey.out).toContain('(quote failed: the Vast.ai API key VAST_API_KEY is not set here)');
  });
});
