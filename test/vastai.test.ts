/**
 * The `vastai` backend end to end, against a fake of the Vast.ai REST API on loopback
 * (test/helpers/cloud/fake-vast-api.ts: Vast cannot run here; no official client is installed, so the
 * adapter's own client drives it) whose rented instances are a real sshd on 127.0.0.2, 127.0.0.3, …
 * The toy workload runs on a rented instance; an interruptible instance outbid mid-run ends the
 * attempt, is destroyed, and the next attempt resumes from the committed step on another one; the
 * fault suite (429 bursts, a deprecated endpoint, garbage HTML, an offer taken between search and
 * rent, an instance stuck loading, the API down for a minute, the controller killed with SIGKILL
 * during a rental) never rents twice for one attempt. Every test ends with nothing billing.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import type { RunStatusDoc } from '../controller/status/types.js';
import { labelPrefix } from '../controller/backends/vastai/adapter.js';
import { FILE_STORAGE, TRAIN, vastaiBackendYaml } from './helpers/backends/kinds.js';
import { killTree } from './helpers/processes.js';
import { startFakeVastApi, type FakeInstance, type FakeVastApi } from './helpers/cloud/fake-vast-api.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { haveSshd, startSshd, type Sshd } from './helpers/servers/sshd.js';
import { jobPids } from './helpers/backends/job-pids.js';
import { passUntil as passesUntil, waitFor } from './helpers/wait.js';

if (!haveSshd() && process.env.CI) throw new Error('the vastai test needs openssh-server in CI');
if (!haveSshd()) console.warn('SKIPPING the vastai test: it needs openssh-server (sshd)');

/** One sshd serves every "instance", each on its own loopback address. */
const HOSTS = Array.from({ length: 10 }, (_, i) => `127.0.0.${i + 2}`);
/** The compiled CLI (built by the integration suite's global setup). */
const ADV = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');

describe.runIf(haveSshd())('vastai: a rented instance per attempt, destroyed however it ends', () => {
  let tmp: string;
  let sshd: Sshd;
  let api: FakeVastApi;
  let wt: WorkTree | undefined;
  let c: Controller | undefined;

  /** The pids of an instance's job (every job's: none given), from the job dirs' pid files. */
  const instancePids = (inst?: FakeInstance) => {
    const job = inst?.label?.slice(labelPrefix('vast').length);
    return jobPids(join(tmp, 'vast-root', 'work'), (d) => !job || d === job);
  };

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-vast-'));
    sshd = await startSshd({ addresses: HOSTS });
    api = await startFakeVastApi({
      sshEndpoints: HOSTS.map((host) => ({ host, port: sshd.port })),
      // The machine goes away: its processes with it, as a paused or destroyed instance's do.
      onStop: async (inst) => killTree(await instancePids(inst)),
    });
  }, 60_000);

  // Each test seeds the offers it means: none left over from the one before.
  beforeEach(() => api.withdrawOffers());

  afterEach(async () => {
    await c?.stop();
    c = undefined;
    // Whatever a test rented is destroyed by the end of it: nothing is left billing.
    expect(api.billing()).toEqual([]);
  });

  afterAll(async () => {
    await wt?.cleanup();
    await api?.stop();
    await sshd?.stop();
    await killTree(await instancePids()).catch(() => {});
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  // A short loading timeout only where being stuck is the subject: elsewhere a loaded machine can
  // take longer than a few seconds between the reads that see an instance loading and running.
  const backendYaml = (loadingTimeoutSec = 600) =>
    vastaiBackendYaml(sshd, 'vast', join(tmp, 'vast-root'), {
      apiUrl: api.url,
      interruptible: true,
      loadingTimeoutSec,
    });

  const runYaml = (
    name: string,
    command: string,
    policy = '{maxAttempts: 4}',
  ) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command: [sh, -c, ${JSON.stringify(command)}]
  policy: ${policy}
  backendSelector: {order: [vast]}
`;

  let dataDir = '';
  async function start(files: Record<string, string>, loadingTimeoutSec?: number): Promise<Controller> {
    await c?.stop();
    await wt?.cleanup();
    wt = await makeWorkTree({
      'backends/vast.yaml': backendYaml(loadingTimeoutSec),
      'storage.yaml': FILE_STORAGE,
      'train.py': await readFile(TRAIN, 'utf8'),
      ...files,
    });
    dataDir = join(tmp, `data-${Date.now()}`);
    c = await Controller.create({
      repo: wt.dir,
      dataDir,
      pollIntervalMs: 200,
      secrets: { env: ['VAST_API_KEY'] },
      secretEnv: { ...process.env, VAST_API_KEY: api.apiKey },
    });
    await c.init();
    return c;
  }

  const passUntil = (what: string, done: () => boolean | Promise<boolean>, ms?: number) =>
    passesUntil(c!, what, done, ms);
  const st = (run: string) => c!.runStatus(run)?.status;
  const rentalsOf = (run: string) => api.ledger.filter((r) => r.label?.includes(`:adv-${run}-`));

  it('runs the toy workload on a rented instance, records its price, and destroys it', async () => {
    api.seedOffer({ dph_total: 0.9 }); // dearer: not the one rented
    const cheap = api.seedOffer({ dph_total: 0.31 });
    await start({ 'runs/toy.yaml': runYaml('toy', 'python3 train.py --steps 30 --ckpt-every 10') });
    await passUntil('the run to succeed', () => st('toy')?.phase === 'Succeeded');
    const [a] = st('toy')!.attempts;
    expect(a).toMatchObject({ backend: 'vast', phase: 'Succeeded', lastStep: 30 });
    // The cheapest fitting offer, rented on demand (the run is not preemptible), labelled for the job.
    expect(rentalsOf('toy')).toEqual([
      expect.objectContaining({ offerId: cheap.id, isBid: false, label: 'adventuretime:vast:adv-toy-1' }),
    ]);
    expect(a!.jobId).toBe(String(rentalsOf('toy')[0]!.instanceId));
    // Its price is the instance's own rate.
    expect(a!.price?.perHour).toBe(0.31);
    await passUntil('the instance destroyed', () => rentalsOf('toy').every((r) => r.destroyedAt));
    // The search asked for what the run and the Backend need.
    const search = api.requests.find((r) => r.path === '/api/v0/bundles/')?.body as Record<string, unknown>;
    expect(search).toMatchObject({
      num_gpus: { eq: 1 },
      verified: { eq: true },
      rentable: { eq: true },
      order: [['dph_total', 'asc']],
      type: 'on-demand',
    });
  }, 240_000);

  it('an outbid interruptible instance ends the attempt; the next one resumes from the committed step', async () => {
    api.seedOffer({ dph_total: 0.5, min_bid: 0.2 });
    api.seedOffer({ dph_total: 0.6, min_bid: 0.25 });
    const hold = join(tmp, 'hold');
    await writeFile(hold, '');
    await start({
      'runs/bid.yaml': runYaml(
        'bid',
        `exec python3 train.py --steps 60 --ckpt-every 10 --step-sleep 0.02 --hold-at 20 --hold-file ${hold}`,
        '{maxAttempts: 4, preemptible: true}',
      ),
    });
    await passUntil(
      'checkpoint 20 committed on the rented instance',
      () => st('bid')?.attempts[0]?.phase === 'Running' && (st('bid')?.attempts[0]?.lastStep ?? 0) >= 20,
    );
    const [first] = rentalsOf('bid');
    // A bid instance, at the offer's minimum bid plus the 10% margin.
    expect(first).toMatchObject({ isBid: true, price: 0.22 });
    await api.outbid(first!.instanceId);
    await passUntil('attempt 1 preempted', () => st('bid')?.attempts[0]?.phase === 'Preempted');
    await passUntil('the outbid instance destroyed', () => rentalsOf('bid')[0]?.destroyedAt !== undefined);
    await rm(hold);
    await passUntil('resumed and finished', () => st('bid')?.phase === 'Succeeded', 180_000);
    const [a1, a2] = st('bid')!.attempts;
    expect(a1).toMatchObject({ phase: 'Preempted', reason: 'Outbid' });
    expect(a2).toMatchObject({ phase: 'Succeeded', startStep: a1!.lastStep, lastStep: 60 });
    expect(rentalsOf('bid')).toHaveLength(2);
    await passUntil('both destroyed', () => rentalsOf('bid').every((r) => r.destroyedAt));
  }, 360_000);

  it('429 bursts, a deprecated endpoint and garbage HTML are errors, never "no instances": one rental', async () => {
    api.seedOffer({ dph_total: 0.3 });
    await start({ 'runs/faults.yaml': runYaml('faults', 'sleep 2') });
    api.failNext(3, '429', { path: /\/bundles\/$/ });
    await passUntil('rented', () => rentalsOf('faults').length === 1);
    await passUntil('running', () => st('faults')?.attempts[0]?.phase === 'Running');
    // Polls that read an error where the list should be: observed as unknown, no second rental.
    api.failNext(1, 'deprecated', { path: '/api/v1/instances/' });
    api.failNext(1, 'garbage-html', { path: '/api/v1/instances/' });
    await passUntil('the run to succeed', () => st('faults')?.phase === 'Succeeded');
    expect(st('faults')!.attempts).toHaveLength(1);
    expect(rentalsOf('faults')).toHaveLength(1);
    expect(api.requests.filter((r) => r.fault === 'deprecated' || r.fault === 'garbage-html')).toHaveLength(
      2,
    );
    await passUntil('destroyed', () => rentalsOf('faults').every((r) => r.destroyedAt));
  }, 240_000);

  it('an offer taken between search and rent moves on to the next one', async () => {
    const gone = api.seedOffer({ dph_total: 0.01 });
    const next = api.seedOffer({ dph_total: 0.02 });
    api.takeAfterNextSearch(1);
    await start({ 'runs/taken.yaml': runYaml('taken', 'true') });
    await passUntil('the run to succeed', () => st('taken')?.phase === 'Succeeded');
    // Asked for the cheapest (another account had just taken it: no_such_ask), then rented the next.
    const ours = [gone.id, next.id].map((id) => `/api/v0/asks/${id}/`);
    const asks = api.requests.filter((r) => r.method === 'PUT' && ours.includes(r.path));
    expect(asks.map((r) => [r.path, r.status])).toEqual([
      [`/api/v0/asks/${gone.id}/`, 410],
      [`/api/v0/asks/${next.id}/`, 200],
    ]);
    expect(rentalsOf('taken')).toHaveLength(1);
    await passUntil('destroyed', () => rentalsOf('taken').every((r) => r.destroyedAt));
  }, 240_000);

  it('sweeps an instance labelled for this backend that no attempt owns, even with nothing running; leaves others', async () => {
    const ghost = api.seedInstance({ label: `${labelPrefix('vast')}adv-ghost-1` });
    const theirs = api.seedInstance({ label: 'someone-elses-notebook' });
    await start({});
    await passUntil('the orphan destroyed', () => !api.billing().some((r) => r.instanceId === ghost.id));
    expect(api.billing().map((r) => r.instanceId)).toEqual([theirs.id]);
    // Not ours to bill for: destroyed here only so that the test ends with nothing billing.
    await fetch(`${api.url}/api/v0/instances/${theirs.id}/`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${api.apiKey}` },
    });
  }, 120_000);

  it('policy.maxCost stops the run once its attempts cost more, and destroys the instance', async () => {
    api.seedOffer({ dph_total: 0.0005 }); // the cheapest: 1 s of it costs 1.4e-7
    await start({
      'runs/budget.yaml': runYaml('budget', 'sleep 300', '{maxAttempts: 4, maxCost: 0.0000005}'),
    });
    await passUntil('failed on its budget', () => st('budget')?.phase === 'Failed', 180_000);
    expect(st('budget')).toMatchObject({ reason: 'CostLimitExceeded' });
    expect(st('budget')!.message).toContain('past policy.maxCost (5e-7)');
    expect(st('budget')!.attempts).toHaveLength(1);
    await passUntil('its instance destroyed', () => rentalsOf('budget').every((r) => r.destroyedAt));
  }, 240_000);

  it('maxHours and a deleted Run spec both stop the attempt and destroy its instance', async () => {
    api.seedOffer({ dph_total: 0.3 });
    api.seedOffer({ dph_total: 0.3 });
    await start({
      // 0.0005 h = 1.8 s; a time-out without progress counts, and one attempt is all it has.
      'runs/short.yaml': runYaml('short', 'sleep 300', '{maxAttempts: 1, maxHours: 0.0005}'),
      'runs/gone.yaml': runYaml('gone', 'sleep 300'),
    });
    await passUntil('both running', () =>
      ['short', 'gone'].every((r) => st(r)?.attempts[0]?.phase === 'Running'),
    );
    await wt!.remove('runs/gone.yaml');
    await wt!.commit('delete gone');
    c!.requestFetch('test');
    await passUntil('short timed out', () => st('short')?.attempts[0]?.reason === 'MaxHoursExceeded');
    await passUntil('gone cancelled', () => st('gone')?.attempts[0]?.phase === 'Cancelled');
    await passUntil('both instances destroyed', () =>
      [...rentalsOf('short'), ...rentalsOf('gone')].every((r) => r.destroyedAt),
    );
    expect(rentalsOf('short')).toHaveLength(1);
    expect(rentalsOf('gone')).toHaveLength(1);
  }, 240_000);

  it('an instance stuck loading is destroyed, its machine excluded, and the next offer rented', async () => {
    const first = api.seedOffer({ dph_total: 0.003 });
    const second = api.seedOffer({ dph_total: 0.004 });
    api.options.stuck = true;
    await start({ 'runs/stuck.yaml': runYaml('stuck', 'true') }, 3);
    await passUntil('rented', () => rentalsOf('stuck').length === 1);
    api.options.stuck = false;
    await passUntil('the run to succeed', () => st('stuck')?.phase === 'Succeeded');
    const [stuck, next] = rentalsOf('stuck');
    expect(stuck?.offerId).toBe(first.id);
    expect(stuck?.destroyedAt).toBeDefined();
    // The next offer, never the stuck machine again (its offer is back in searches once destroyed).
    expect(rentalsOf('stuck')).toHaveLength(2);
    expect(next?.offerId).toBe(second.id);
    expect(
      api.requests.filter((r) => r.method === 'PUT' && r.path === `/api/v0/asks/${first.id}/`),
    ).toHaveLength(1);
    expect(st('stuck')!.attempts).toHaveLength(1);
    await passUntil('destroyed', () => rentalsOf('stuck').every((r) => r.destroyedAt));
  }, 240_000);

  it('the API down for a minute mid-run: observed as unknown, then carried on; one rental', async () => {
    api.seedOffer({ dph_total: 0.3 });
    const hold = join(tmp, 'hold-down');
    await writeFile(hold, '');
    await start({ 'runs/down.yaml': runYaml('down', `while [ -f ${hold} ]; do sleep 0.2; done`) });
    await passUntil('running', () => st('down')?.attempts[0]?.phase === 'Running');
    await api.down(60_000);
    await passUntil('the API seen unreachable', () =>
      (st('down')?.conditions ?? []).some((x) => x.type === 'Stale' && x.status === 'True'),
    );
    await rm(hold);
    await passUntil(
      'the run to succeed once the API is back',
      () => st('down')?.phase === 'Succeeded',
      240_000,
    );
    expect(rentalsOf('down')).toHaveLength(1);
    await passUntil('destroyed', () => rentalsOf('down').every((r) => r.destroyedAt));
  }, 420_000);

  it('a controller killed with SIGKILL during a rental: the restarted one adopts the instance', async () => {
    await c?.stop();
    c = undefined;
    await wt?.cleanup();
    api.seedOffer({ dph_total: 0.3 });
    api.seedOffer({ dph_total: 0.4 });
    const out = join(tmp, 'out-crash');
    await mkdir(out, { recursive: true });
    wt = await makeWorkTree({
      'backends/vast.yaml': backendYaml(),
      'storage.yaml': FILE_STORAGE,
      'runs/crash.yaml': runYaml('crash', `echo ran > ${out}/ran`),
    });
    const data = join(tmp, 'data-crash');
    const controller = (...extra: string[]) => {
      const args = ['controller', '--repo', wt!.dir, '--data-dir', data, '--poll-interval', '200ms'];
      const proc = spawn(
        process.execPath,
        [ADV, ...args, '--secrets-env', 'VAST_API_KEY', '--log-level', 'warn', ...extra],
        { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, VAST_API_KEY: api.apiKey } },
      );
      let stderr = '';
      proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      const exit = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
      return { proc, exit, stderr: () => stderr };
    };
    // The instance stays loading, so the kill lands while it is being provisioned.
    api.options.stuck = true;
    try {
      const first = controller();
      await waitFor(() => rentalsOf('crash').length === 1 || first.proc.exitCode !== null, {
        what: 'the rental',
        timeoutMs: 90_000,
      }).catch((e: Error) => {
        throw new Error(`${e.message}\n${first.stderr()}`);
      });
      expect(first.proc.exitCode, first.stderr()).toBeNull();
      first.proc.kill('SIGKILL');
      await first.exit;
    } finally {
      api.options.stuck = false;
    }
    api.stuck(rentalsOf('crash')[0]!.instanceId, false);
    const second = controller('--once', '--timeout', '4m');
    expect(await second.exit, second.stderr()).toBe(0);
    const doc = parse(await wt.git('show', 'adventuretime/status:runs/crash.yaml')) as RunStatusDoc;
    expect(doc.status.phase).toBe('Succeeded');
    expect(doc.status.attempts.map((a) => [a.n, a.phase])).toEqual([[1, 'Succeeded']]);
    expect(await readFile(join(out, 'ran'), 'utf8')).toBe('ran\n');
    // One rental, ever, destroyed before the controller exited.
    expect(rentalsOf('crash')).toHaveLength(1);
    expect(rentalsOf('crash')[0]!.destroyedAt).toBeDefined();
  }, 300_000);
});
