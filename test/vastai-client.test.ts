/**
 * The Vast.ai REST client (controller/backends/vastai/client.ts) against the fake Vast API
 * (test/helpers/cloud/fake-vast-api.ts) on loopback, with a real sshd behind the rented instance's ssh
 * fields: search and rent, watch an instance come up and reach its sshd, list more than one page,
 * destroy; 429 bursts, HTML and deprecated answers, taken offers, the API away for a while and for
 * too long, a wrong key. Waits are injected (the client's `sleep` records instead of sleeping), so
 * nothing here depends on how fast the machine is. Every test ends with nothing left billing.
 */
import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  OfferTakenError,
  VastApiError,
  VastAuthError,
  VastClient,
  VastUnreachableError,
  vastInstanceEnv,
  vastSshEndpoint,
  type VastClientOptions,
  type VastInstance,
} from '../controller/backends/vastai/client.js';
import { offerQuery } from '../controller/backends/vastai/query.js';
import {
  startFakeVastApi,
  type FakeVastApi,
  type FakeVastApiOptions,
  type StopReason,
} from './helpers/cloud/fake-vast-api.js';
import { haveSshd, startSshd, type Sshd } from './helpers/servers/sshd.js';
import { waitFor } from './helpers/wait.js';

const sshdHere = haveSshd();
if (!sshdHere && process.env.CI) throw new Error('the vastai client test needs openssh-server in CI');
if (!sshdHere) console.warn('the vastai client test runs without sshd: the ssh endpoint is not dialled');

/** Endpoints no test dials (the pagination test rents 33 machines). */
const spare = (n: number) => Array.from({ length: n }, (_, i) => ({ host: '127.0.0.1', port: 1 + i }));

describe('vastai client against the fake Vast.ai API', () => {
  let sshd: Sshd | undefined;
  let fake: FakeVastApi;
  const fakes: FakeVastApi[] = [];
  const logs: string[] = [];
  const stops: { id: number; why: StopReason }[] = [];

  beforeAll(async () => {
    if (sshdHere) sshd = await startSshd();
  }, 60_000);
  afterAll(async () => {
    await sshd?.stop();
  });
  afterEach(async () => {
    for (const f of fakes.splice(0)) {
      expect(logs.join('\n')).not.toContain(f.apiKey);
      await f.stop();
    }
    logs.length = 0;
    stops.length = 0;
  });

  async function start(opts: FakeVastApiOptions = {}): Promise<FakeVastApi> {
    fake = await startFakeVastApi({
      sshEndpoints: [...(sshd ? [{ host: sshd.host, port: sshd.port }] : []), ...spare(40)],
      onStop: (inst, why) => void stops.push({ id: inst.id, why }),
      ...opts,
    });
    fakes.push(fake);
    return fake;
  }

  /** A client on the fake whose waits are recorded, not slept. */
  function vast(opts: Partial<VastClientOptions> = {}) {
    const sleeps: number[] = [];
    const record = (o: object, m: string) => void logs.push(`${m} ${JSON.stringify(o)}`);
    const c = new VastClient({
      apiUrl: fake.url,
      apiKey: fake.apiKey,
      sleep: async (ms) => void sleeps.push(ms),
      logger: { debug: record, warn: record },
      ...opts,
    });
    return { c, sleeps };
  }

  async function caught(p: Promise<unknown>): Promise<Error> {
    try {
      await p;
    } catch (e) {
      return e as Error;
    }
    throw new Error('expected a rejection');
  }

  /** Reads the instance until it runs, returning every `actual_status` seen on the way. */
  async function untilRunning(
    c: VastClient,
    id: number,
  ): Promise<{ seen: (string | null)[]; inst: VastInstance }> {
    const seen: (string | null)[] = [];
    const inst = await waitFor(
      async () => {
        const i = await c.showInstance(id);
        seen.push(i ? i.actual_status : 'gone');
        return i?.actual_status === 'running' ? i : undefined;
      },
      { what: `instance ${id} to run`, timeoutMs: 10_000, everyMs: 1 },
    );
    return { seen, inst };
  }

  /** The first bytes the ssh endpoint sends: an SSH server says `SSH-2.0-…` first. */
  function banner(host: string, port: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const s = connect(port, host);
      s.once('data', (b) => (s.destroy(), resolve(b.toString())));
      s.once('error', reject);
    });
  }

  it('searches, rents the cheapest fit, watches it come up, reaches its sshd, destroys it', async () => {
    await start();
    const cheap = fake.seedOffer({ gpu_name: 'RTX 4090', dph_total: 0.31 });
    const h100 = fake.seedOffer({ gpu_name: 'H100 SXM', gpu_ram: 81559, dph_total: 2.4 });
    fake.seedOffer({ gpu_name: 'RTX 4090', dph_total: 0.1, verified: false, verification: 'unverified' });
    fake.seedOffer({ gpu_name: 'RTX 4090', dph_total: 0.2, reliability: 0.9 });
    fake.seedOffer({ gpu_name: 'RTX 4090', num_gpus: 2, dph_total: 0.25 });
    fake.seedOffer({ gpu_name: 'RTX 3090', gpu_ram: 24576, dph_total: 0.15 });
    const { c } = vast();

    const needs = { gpus: 1, gpuType: 'RTX4090|H100', minVramGiB: 24 };
    expect((await c.searchOffers(offerQuery(needs))).map((o) => o.id)).toEqual([cheap.id, h100.id]);
    const capped = await c.searchOffers(offerQuery({ ...needs, maxDollarsPerHour: 1 }));
    expect(capped.map((o) => o.id)).toEqual([cheap.id]);

    const { id } = await c.createInstance(capped[0]!.id, {
      image: 'vastai/base-image:cuda-12.4',
      label: 'adv-run-a-1',
      env: { ADV_RUN: 'run-a', '-p 8080:8080': '1' },
      disk: 32,
    });
    expect((await c.searchOffers(offerQuery(needs))).map((o) => o.id)).toEqual([h100.id]);

    const { seen, inst } = await untilRunning(c, id);
    expect(seen).toEqual([null, 'loading', 'running']);
    expect(inst).toMatchObject({
      id,
      label: 'adv-run-a-1',
      intended_status: 'running',
      gpu_name: 'RTX 4090',
      num_gpus: 1,
      dph_total: 0.31,
      is_bid: false,
      disk_space: 32,
      image_uuid: 'vastai/base-image:cuda-12.4',
    });
    expect(vastInstanceEnv(inst)).toEqual({ ADV_RUN: 'run-a', '-p 8080:8080': '1' });
    const ssh = vastSshEndpoint(inst);
    expect(vastSshEndpoint(inst, 'direct')).toEqual(ssh);
    if (sshd) {
      expect(ssh).toEqual({ host: sshd.host, port: sshd.port });
      expect(await banner(ssh!.host, ssh!.port)).toMatch(/^SSH-2\.0-/);
    }

    await c.destroyInstance(id);
    expect(stops).toEqual([{ id, why: 'destroyed' }]);
    expect(await c.showInstance(id)).toBeUndefined();
    await c.destroyInstance(id); // gone already: fine
    expect(fake.requests.at(-1)).toMatchObject({ method: 'DELETE', status: 404 });
    expect((await c.searchOffers(offerQuery(needs))).map((o) => o.id)).toEqual([cheap.id, h100.id]);
    expect(fake.requests.every((r) => r.auth === 'bearer')).toBe(true);
    expect(fake.billing()).toEqual([]);
  });

  it('lists more than one page of instances, by label, following next_token', async () => {
    await start({ provisionReads: 0, loadingReads: 0 });
    const { c } = vast();
    const mine: number[] = [];
    for (let i = 0; i < 33; i++) {
      const o = fake.seedOffer({ dph_total: 0.3 + i / 1000 });
      const label = i < 30 ? 'adv-page' : 'someone-else';
      const { id } = await c.createInstance(o.id, { image: 'img', label });
      if (i < 30) mine.push(id);
    }

    const listed = await c.listInstances({ labels: ['adv-page'] });
    expect(listed.map((i) => i.id)).toEqual(mine);
    expect(listed.every((i) => i.actual_status === 'running' && i.label === 'adv-page')).toBe(true);
    const pages = fake.requests.filter((r) => r.path === '/api/v1/instances/');
    expect(pages).toHaveLength(2);
    expect(pages[0]!.query.after_token).toBeUndefined();
    expect(pages[1]!.query.after_token).toEqual(expect.any(String));

    expect(await c.listInstances()).toHaveLength(33);
    expect(await c.listInstances({ labels: ['adv-page', 'someone-else'] })).toHaveLength(33);
    expect(await c.listInstances({ labels: ['nobody'] })).toEqual([]);

    for (const i of await c.listInstances()) await c.destroyInstance(i.id);
    expect(await c.listInstances()).toEqual([]);
    expect(fake.billing()).toEqual([]);
  });

  it('rides out 429 bursts: Retry-After when sent, else the threshold Vast names; too many is an error', async () => {
    await start();
    const offer = fake.seedOffer();
    const { c, sleeps } = vast({ random: () => 0 });

    fake.failNext(3, '429', { retryAfter: 2, path: '/api/v0/bundles/' });
    expect((await c.searchOffers(offerQuery({}))).map((o) => o.id)).toEqual([offer.id]);
    expect(sleeps).toEqual([2000, 2000, 2000]);
    const searches = fake.requests.filter((r) => r.path === '/api/v0/bundles/');
    expect(searches.map((r) => r.status)).toEqual([429, 429, 429, 200]);

    sleeps.length = 0;
    fake.failNext(2, '429', { threshold: 4.5, body: 'json', method: 'PUT' });
    const { id } = await c.createInstance(offer.id, { image: 'img', label: 'adv-429' });
    expect(sleeps).toEqual([4500, 4500]);
    expect(fake.billing()).toHaveLength(1);

    fake.failNext(6, '429', { path: `/api/v0/instances/${id}/` });
    const e = await caught(c.showInstance(id));
    expect(e).toBeInstanceOf(VastUnreachableError);
    expect((e as VastUnreachableError).data).toMatchObject({ status: 429, attempts: 6 });

    await c.destroyInstance(id);
    expect(fake.billing()).toEqual([]);
  });

  it('an HTML page or deprecated_endpoint is an error, never an empty list', async () => {
    await start();
    const { c } = vast();
    const { id } = await c.createInstance(fake.seedOffer().id, { image: 'img', label: 'adv-html' });

    fake.failNext(1, 'garbage-html', { path: '/api/v1/instances/' });
    const html = await caught(c.listInstances({ labels: ['adv-html'] }));
    expect(html).toBeInstanceOf(VastApiError);
    expect((html as VastApiError).data).toMatchObject({ problem: 'NotJson', status: 200 });

    fake.failNext(1, 'deprecated', { path: '/api/v1/instances/' });
    const dep = await caught(c.listInstances({ labels: ['adv-html'] }));
    expect(dep).toBeInstanceOf(VastApiError);
    expect((dep as VastApiError).data).toMatchObject({
      error: 'deprecated_endpoint',
      problem: 'SuccessFalse',
    });

    fake.failNext(1, 'garbage-html', { path: '/api/v0/bundles/' });
    expect(await caught(c.searchOffers(offerQuery({})))).toBeInstanceOf(VastApiError);

    // The old v0 list answers so for real now (SkyPilot #10517); the client never asks it.
    const v0 = await fetch(`${fake.url}/api/v0/instances/?owner=me`, {
      headers: { Authorization: `Bearer ${fake.apiKey}` },
    });
    expect(await v0.json()).toMatchObject({ success: false, error: 'deprecated_endpoint' });

    expect((await c.listInstances({ labels: ['adv-html'] })).map((i) => i.id)).toEqual([id]);
    await c.destroyInstance(id);
    expect(fake.billing()).toEqual([]);
  });

  it('a taken offer is OfferTakenError (410, 404, or no machine left), and comes back when freed', async () => {
    await start({ sshEndpoints: spare(1) });
    const a = fake.seedOffer({ dph_total: 0.2 });
    const b = fake.seedOffer({ dph_total: 0.3 });
    const { c } = vast();

    const { id } = await c.createInstance(a.id, { image: 'img', label: 'adv-taken' });
    const again = await caught(c.createInstance(a.id, { image: 'img', label: 'adv-taken-2' }));
    expect(again).toBeInstanceOf(OfferTakenError);
    expect((again as OfferTakenError).data).toMatchObject({
      status: 410,
      error: 'no_such_ask',
      offerId: a.id,
    });
    const never = await caught(c.createInstance(999, { image: 'img', label: 'adv-taken-3' }));
    expect(never).toBeInstanceOf(OfferTakenError);
    expect((never as OfferTakenError).data).toMatchObject({ status: 404, error: 'invalid_args' });

    // The only ssh endpoint is in use: offer b is not rentable now.
    expect(await c.searchOffers(offerQuery({}))).toEqual([]);
    expect(await caught(c.createInstance(b.id, { image: 'img', label: 'adv-taken-4' }))).toBeInstanceOf(
      OfferTakenError,
    );
    expect(fake.billing()).toHaveLength(1);

    await c.destroyInstance(id);
    expect((await c.searchOffers(offerQuery({}))).map((o) => o.id)).toEqual([a.id, b.id]);
    expect(fake.billing()).toEqual([]);
  });

  it('recovers when the API comes back within the retry budget, and gives up beyond it', async () => {
    await start();
    const offer = fake.seedOffer();
    const setup = vast().c;
    const { id } = await setup.createInstance(offer.id, { image: 'img', label: 'adv-down' });

    await fake.down();
    const sleeps: number[] = [];
    const patient = vast({
      sleep: async (ms) => {
        sleeps.push(ms);
        if (sleeps.length === 2) await fake.up();
      },
    }).c;
    expect((await patient.listInstances({ labels: ['adv-down'] })).map((i) => i.id)).toEqual([id]);
    expect(sleeps).toHaveLength(2);

    await fake.down();
    const impatient = vast({ retries: 3 });
    const e = await caught(impatient.c.showInstance(id));
    expect(e).toBeInstanceOf(VastUnreachableError);
    expect((e as VastUnreachableError).data).toMatchObject({ attempts: 3, cause: 'ECONNREFUSED' });
    expect(impatient.sleeps).toHaveLength(2);
    await fake.up();

    // A connection dropped without an answer is retried for a read…
    fake.failNext(1, 'drop', { path: `/api/v0/instances/${id}/` });
    expect((await setup.showInstance(id))?.id).toBe(id);
    // …but not for a rental, which may have been made: the client says so, and the label finds it.
    fake.failNext(1, 'drop', { method: 'PUT', applied: true });
    const other = fake.seedOffer();
    const lost = await caught(setup.createInstance(other.id, { image: 'img', label: 'adv-lost' }));
    expect(lost).toBeInstanceOf(VastUnreachableError);
    expect((lost as VastUnreachableError).data.ambiguous).toBe(true);
    const found = await setup.listInstances({ labels: ['adv-lost'] });
    expect(found).toHaveLength(1);

    for (const i of [id, found[0]!.id]) await setup.destroyInstance(i);
    expect(fake.billing()).toEqual([]);
  });

  it('a wrong key is VastAuthError, and the error never holds a key', async () => {
    await start();
    fake.seedOffer();
    const wrongKey = 'wr0ng-vast-key-5f1e2d3c4b5a';
    const { c } = vast({ apiKey: wrongKey });
    const e = await caught(c.searchOffers(offerQuery({})));
    expect(e).toBeInstanceOf(VastAuthError);
    expect((e as VastAuthError).data).toMatchObject({ status: 401, msg: 'Invalid user key' });
    expect(e.message).toContain('check the API key secret the Backend names');
    const text = JSON.stringify({ m: e.message, d: (e as VastAuthError).data, s: e.stack });
    expect(text).not.toContain(wrongKey);
    expect(text).not.toContain(fake.apiKey);
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0]).toMatchObject({ auth: 'wrong', status: 401 });
    expect(logs.join('\n')).not.toContain(wrongKey);
    expect(fake.billing()).toEqual([]);
  });

  it('shows an interruptible instance outbid, exited, offline, stopped and stuck as Vast reports them', async () => {
    await start();
    const { c } = vast();
    const offer = fake.seedOffer({ dph_total: 0.5, min_bid: 0.12 });
    const [bidOffer] = await c.searchOffers(offerQuery({ interruptible: true }));
    expect(bidOffer).toMatchObject({ id: offer.id, dph_total: 0.12, is_bid: true });
    const tooLow = await caught(c.createInstance(offer.id, { image: 'img', label: 'adv-bid', price: 0.05 }));
    expect((tooLow as VastApiError).data).toMatchObject({ status: 400, error: 'invalid_price' });
    const { id } = await c.createInstance(offer.id, { image: 'img', label: 'adv-bid', price: 0.13 });
    const { inst } = await untilRunning(c, id);
    expect(inst).toMatchObject({ is_bid: true, dph_total: 0.13 });

    await fake.outbid(id);
    expect(stops).toEqual([{ id, why: 'outbid' }]);
    expect(await c.showInstance(id)).toMatchObject({ actual_status: 'stopped', intended_status: 'running' });
    fake.resume(id);
    expect((await untilRunning(c, id)).seen).toEqual(['loading', 'running']);

    await fake.exit(id);
    expect(await c.showInstance(id)).toMatchObject({ actual_status: 'exited' });
    await c.setState(id, 'running');
    await untilRunning(c, id);
    await c.setState(id, 'stopped');
    expect(await c.showInstance(id)).toMatchObject({ actual_status: 'stopped', intended_status: 'stopped' });
    await c.setLabel(id, 'adv-bid-renamed');
    expect((await c.listInstances({ labels: ['adv-bid-renamed'] })).map((i) => i.id)).toEqual([id]);

    fake.options.stuck = true;
    const { id: stuckId } = await c.createInstance(fake.seedOffer().id, { image: 'img', label: 'adv-stuck' });
    for (let i = 0; i < 5; i++) await c.showInstance(stuckId);
    expect(await c.showInstance(stuckId)).toMatchObject({ actual_status: 'loading', ports: null });
    await fake.offline(stuckId);
    expect(await c.showInstance(stuckId)).toMatchObject({ actual_status: 'offline' });
    expect(stops.map((s) => s.why)).toEqual(['outbid', 'exited', 'stopped', 'offline']);

    for (const i of [id, stuckId]) await c.destroyInstance(i);
    expect(fake.billing()).toEqual([]);
  });
});
