/**
 * The gcp-tpu gcloud client driving the real `gcloud` (Cloud SDK) against the fake Cloud TPU v2
 * API: what gcloud sends for each command (asserted on the fake's recorded requests) and how its
 * answers and failures come back as nodes and typed errors. About a dozen gcloud runs, ~1 s each.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GcloudFailure,
  GcloudTpu,
  TpuAlreadyExistsError,
  TpuCapacityError,
  TpuQuotaError,
  tpuNodeName,
  tpuWorkerAddresses,
  type TpuNode,
} from '../controller/backends/gcp-tpu/gcloud.js';
import { startFakeTpuApi, type FakeNode, type FakeTpuApi } from './helpers/cloud/fake-tpu-api.js';
import { killTree } from './helpers/processes.js';
import { waitFor } from './helpers/wait.js';

/** Whether `gcloud` is on PATH: in CI it must be (a missing one throws); elsewhere the tests skip. */
function gcloudAvailable(what: string): boolean {
  const ok = (process.env.PATH ?? '').split(delimiter).some((d) => d && existsSync(join(d, 'gcloud')));
  if (!ok && process.env.CI) throw new Error(`${what} need the Google Cloud SDK (\`gcloud\` on PATH) in CI`);
  if (!ok) console.warn(`SKIPPING ${what}: no \`gcloud\` on PATH (install the Google Cloud SDK)`);
  return ok;
}

const ZONE = 'us-central2-b';
const FULL_ZONE = 'us-east5-b';
const PROJECT = 'adv-test';
const available = gcloudAvailable('the gcloud TPU client tests');

describe.runIf(available)('gcloud compute tpus tpu-vm against the fake Cloud TPU API', () => {
  let fake: FakeTpuApi;
  let tpu: GcloudTpu;
  const preempted: FakeNode[] = [];
  /** A process "on" the node that gets preempted: the hook must kill it as the VM's shutdown would. */
  let worker: ChildProcess;

  beforeAll(async () => {
    worker = spawn('sleep', ['600'], { stdio: 'ignore' });
    fake = await startFakeTpuApi({
      pageSize: 2, // so a list of three or more nodes takes gcloud more than one page
      onPreempt: async (node) => {
        preempted.push(node);
        await killTree([worker.pid!], { graceMs: 1000 });
      },
    });
    const env = { ...process.env, CLOUDSDK_CONFIG: await fake.configDir(PROJECT) };
    tpu = new GcloudTpu({ project: PROJECT, env, callTimeoutMs: 60_000, waitTimeoutMs: 60_000 });
  });
  afterAll(async () => {
    worker?.kill('SIGKILL');
    await fake?.stop();
  });

  const sent = (method: string, path: RegExp) =>
    fake.requests.filter((r) => r.method === method && path.test(r.path));

  it('creates a v4-16 spot node and waits for it: READY with one endpoint per worker host', async () => {
    const node = await tpu.create({
      name: 'run-sync',
      zone: ZONE,
      acceleratorType: 'v4-16',
      runtimeVersion: 'tpu-ubuntu2204-base',
      spot: true,
      labels: { 'adv-run': 'run-sync', 'adv-managed-by': 'tpu-a' },
      metadata: { 'ssh-keys': 'adv:ssh-ed25519 AAAA adv', note: 'a, b=c' },
    });
    expect(node).toMatchObject({
      name: `projects/${PROJECT}/locations/${ZONE}/nodes/run-sync`,
      state: 'READY',
      acceleratorType: 'v4-16',
      schedulingConfig: { spot: true },
    });
    expect(node).not.toHaveProperty('@type');
    expect(tpuNodeName(node)).toBe('run-sync');
    expect(node.networkEndpoints).toHaveLength(2);
    expect(tpuWorkerAddresses(node)).toEqual(fake.node(ZONE, 'run-sync')!.addresses);

    const [post] = sent('POST', /\/nodes$/);
    expect(post!.path).toBe(`/v2/projects/${PROJECT}/locations/${ZONE}/nodes`);
    expect(post!.query).toEqual({ alt: 'json', nodeId: 'run-sync' });
    expect(post!.body).toEqual({
      acceleratorType: 'v4-16',
      runtimeVersion: 'tpu-ubuntu2204-base',
      labels: { 'adv-run': 'run-sync', 'adv-managed-by': 'tpu-a' },
      metadata: { 'ssh-keys': 'adv:ssh-ed25519 AAAA adv', note: 'a, b=c' },
      schedulingConfig: { preemptible: false, reserved: false, spot: true },
      networkConfig: { enableExternalIps: true, network: 'default' },
      shieldedInstanceConfig: { enableSecureBoot: false },
    });
    expect(sent('GET', /\/operations\/operation-/).length).toBeGreaterThanOrEqual(1);
  });

  it('creates --async: the pending operation at once, then CREATING → READY on later reads', async () => {
    fake.options.createReads = 2;
    const op = await tpu.create({
      name: 'run-async',
      zone: ZONE,
      acceleratorType: 'v4-8',
      runtimeVersion: 'tpu-ubuntu2204-base',
      preemptible: true,
      labels: { 'adv-run': 'run-async' },
      metadata: {},
      async: true,
    });
    fake.options.createReads = 1;
    expect(op.done).toBe(false);
    expect(op.name).toMatch(new RegExp(`^projects/${PROJECT}/locations/${ZONE}/operations/operation-`));
    expect(op.metadata).toMatchObject({ verb: 'create', target: expect.stringMatching(/nodes\/run-async$/) });
    const states: string[] = [];
    const ready = await waitFor(
      async () => {
        const n = await tpu.describe(ZONE, 'run-async');
        states.push(n?.state ?? 'absent');
        return n?.state === 'READY' ? n : undefined;
      },
      { what: 'run-async to be READY', timeoutMs: 60_000, everyMs: 10, detail: () => states },
    );
    expect(states[0]).toBe('CREATING');
    expect(ready.networkEndpoints).toHaveLength(1);
    expect(ready.schedulingConfig).toEqual({ preemptible: true });
  });

  it('describes a missing node as undefined (NOT_FOUND is no error)', async () => {
    expect(await tpu.describe(ZONE, 'no-such-node')).toBeUndefined();
    expect(sent('GET', /\/nodes\/no-such-node$/).map((r) => r.status)).toEqual([404]);
  });

  it('lists only the nodes whose labels match exactly, across pages; the filter stays in gcloud', async () => {
    fake.seed(PROJECT, ZONE, 'decoy-prefix', {
      acceleratorType: 'v4-8',
      labels: { 'adv-run': 'run-sync-2' },
    });
    fake.seed(PROJECT, ZONE, 'decoy-other', { acceleratorType: 'v4-8', labels: { 'adv-run': 'other' } });
    const before = fake.requests.length;
    const nodes = await tpu.list(ZONE, { 'adv-run': 'run-sync' });
    expect(nodes.map(tpuNodeName)).toEqual(['run-sync']);
    const lists = fake.requests.slice(before);
    expect(lists.every((r) => r.method === 'GET' && r.path.endsWith(`/locations/${ZONE}/nodes`))).toBe(true);
    expect(lists.map((r) => r.query.pageToken !== undefined)).toEqual([false, true]);
    expect(lists.some((r) => 'filter' in r.query)).toBe(false);
    expect(await tpu.list('europe-west4-a')).toEqual([]);
  });

  it('reports a full zone as TpuCapacityError naming the zone; over quota as TpuQuotaError', async () => {
    fake.failCapacity(FULL_ZONE, true);
    const full = await tpu
      .create({
        name: 'run-full',
        zone: FULL_ZONE,
        acceleratorType: 'v4-32',
        runtimeVersion: 'v2-alpha-tpuv4',
      })
      .catch((e: unknown) => e);
    fake.failCapacity(FULL_ZONE, false);
    expect(full).toBeInstanceOf(TpuCapacityError);
    expect((full as TpuCapacityError).message).toMatch(
      /^ERROR: \(gcloud\.compute\.tpus\.tpu-vm\.create\) RESOURCE_EXHAUSTED: There is no more capacity in the zone "us-east5-b"; .*\[EID: 0x[0-9a-f]+\]$/,
    );
    expect((full as TpuCapacityError).data).toMatchObject({
      reason: 'Capacity',
      grpcCode: 8,
      zone: FULL_ZONE,
    });
    expect(fake.node(FULL_ZONE, 'run-full')).toBeUndefined();

    fake.failQuota(FULL_ZONE, true);
    const quota = await tpu
      .create({
        name: 'run-quota',
        zone: FULL_ZONE,
        acceleratorType: 'v4-8',
        runtimeVersion: 'v2-alpha-tpuv4',
        async: true,
      })
      .catch((e: unknown) => e);
    fake.failQuota(FULL_ZONE, false);
    expect(quota).toBeInstanceOf(TpuQuotaError);
    expect((quota as Error).message).toMatch(
      /^ERROR: \(gcloud\.compute\.tpus\.tpu-vm\.create\) RESOURCE_EXHAUSTED: Quota limit '/,
    );
  });

  it('refuses a second node of the same name with TpuAlreadyExistsError', async () => {
    const dup = await tpu
      .create({
        name: 'run-sync',
        zone: ZONE,
        acceleratorType: 'v4-8',
        runtimeVersion: 'tpu-ubuntu2204-base',
      })
      .catch((e: unknown) => e);
    expect(dup).toBeInstanceOf(TpuAlreadyExistsError);
    expect((dup as Error).message).toBe(
      `ERROR: (gcloud.compute.tpus.tpu-vm.create) ALREADY_EXISTS: Resource 'projects/${PROJECT}/locations/${ZONE}/nodes/run-sync' already exists`,
    );
  });

  it('preempts: PREEMPTED and still listed, the hook killed the worker processes', async () => {
    const exited = new Promise<NodeJS.Signals | null>((r) => worker.once('exit', (_c, s) => r(s)));
    await fake.preempt(ZONE, 'run-async');
    expect(preempted.map((n) => n.id)).toEqual(['run-async']);
    expect(await exited).toBe('SIGTERM');
    const listed = await tpu.list(ZONE, { 'adv-run': 'run-async' });
    expect(listed.map((n: TpuNode) => [tpuNodeName(n), n.state])).toEqual([['run-async', 'PREEMPTED']]);
  });

  it('deletes: waiting (gone after), --async (DELETING, then gone), and a missing node is no error', async () => {
    const op = await tpu.delete(ZONE, 'run-sync');
    expect(op).toMatchObject({ done: true, metadata: { verb: 'delete' } });
    expect(fake.node(ZONE, 'run-sync')).toBeUndefined();
    expect(sent('DELETE', /\/nodes\/run-sync$/)).toHaveLength(1);

    fake.options.deleteReads = 2;
    expect(await tpu.delete(ZONE, 'run-async', { async: true })).toMatchObject({ done: false });
    fake.options.deleteReads = 1;
    expect((await tpu.describe(ZONE, 'run-async'))?.state).toBe('DELETING');
    await waitFor(async () => (await tpu.describe(ZONE, 'run-async')) === undefined, {
      what: 'run-async to be gone',
      timeoutMs: 60_000,
      everyMs: 10,
    });

    expect(await tpu.delete(ZONE, 'never-was')).toBeUndefined();
    expect(fake.requests.filter((r) => r.status >= 500)).toEqual([]);
  });

  it('fails list loudly rather than returning an empty list', async () => {
    const broken = new GcloudTpu({
      project: PROJECT,
      env: {
        ...process.env,
        CLOUDSDK_CONFIG: await fake.configDir(PROJECT),
        CLOUDSDK_AUTH_DISABLE_CREDENTIALS: 'false',
      },
    });
    const err = await broken.list(ZONE).catch((e: unknown) => e);
    expect(err).toMatchObject({
      data: { reason: GcloudFailure.Auth, command: 'gcloud.compute.tpus.tpu-vm.list' },
    });
    expect((err as Error).message).toMatch(/^ERROR: \(gcloud\.compute\.tpus\.tpu-vm\.list\) /);
    expect((err as Error).message).not.toContain('\n');
  });
});
