/**
 * Every backend kind at once, on this machine, for tests that run the same Run on each and
 * compare what it did (the spec text the same, only `backendSelector` differs). One controller,
 * one `file://` store every job reaches at the same path, and one Backend of each kind, named
 * after its kind:
 * - `local`: a process beside the controller;
 * - `ssh`: the real sshd on 127.0.0.1;
 * - `slurm`: the real two-node SLURM of test/infra, through the same sshd;
 * - `gcp-tpu`: the real gcloud against the fake Cloud TPU API (fake-tpu-api.ts), a one-worker
 *   v4-8 slice whose worker is the sshd on another loopback address;
 * - `vastai`: the fake Vast.ai API (fake-vast-api.ts), the rented instance the sshd on another
 *   loopback address;
 * - `agent`: a real `adv agent` process (agent.ts) pulling from the controller's HTTP API;
 * - `volcano`: the real kubectl against the fake Kubernetes + Volcano (fake-k8s.ts), the pod a
 *   local process in its own mount namespace, the store mounted through a PVC.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import pino from 'pino';
import { beforeAll } from 'vitest';
import { runCli } from '../../../cli/program.js';
import { nodeNameOf } from '../../../controller/backends/gcp-tpu/names.js';
import { labelPrefix } from '../../../controller/backends/vastai/adapter.js';
import { Controller } from '../../../controller/controller.js';
import { serve, type Serving } from '../../../controller/serve.js';
import { startAgentProcess, type AgentProc } from './agent.js';
import {
  agentBackendYaml,
  fileStorageYaml,
  gcloudAvailable,
  gcpTpuBackendYaml,
  slurmAvailable,
  slurmBackendYaml,
  sshBackendYaml,
  useSlurmCluster,
  vastaiBackendYaml,
  volcanoBackendYaml,
} from './kinds.js';
import { k8sAvailable, startFakeK8s, type FakeK8s } from '../k8s/fake-k8s.js';
import { startFakeTpuApi, type FakeNode, type FakeTpuApi } from '../cloud/fake-tpu-api.js';
import { killTree } from '../processes.js';
import { startFakeVastApi, type FakeInstance, type FakeVastApi } from '../cloud/fake-vast-api.js';
import { captureIo } from '../io.js';
import { jobPids, localJobPids } from './job-pids.js';
import { makeWorkTree, type WorkTree } from '../git/specs-repo.js';
import type { Sshd } from '../servers/sshd.js';

export const BACKEND_KINDS = ['local', 'ssh', 'slurm', 'gcp-tpu', 'vastai', 'agent', 'volcano'] as const;
export type BackendKind = (typeof BACKEND_KINDS)[number];

const TPU_PROJECT = 'adv-test-project';
const TPU_ZONE = 'us-central2-b';
/** One sshd serves them all (OpenSSH listens on at most 16 sockets): TPU workers, then Vast instances. */
const TPU_WORKERS = ['127.0.0.2', '127.0.0.3', '127.0.0.4'];
const VAST_HOSTS = ['127.0.0.5', '127.0.0.6', '127.0.0.7'];
const ENROLL = 'enroll-token-for-every-backend-0123456789';
const API_TOKEN = 'api-token-for-every-backend-0123456789abcdef';

/**
 * Whether every backend kind can run here: root, sshd, slurm-wlm and munge, gcloud, kubectl. In
 * CI each must: a missing piece throws; elsewhere the test is skipped with a warning that says why.
 */
export function everyBackendAvailable(what: string): boolean {
  return slurmAvailable(what) && gcloudAvailable(what) && k8sAvailable(what);
}

export interface EveryBackend {
  /** The test's temp dir (removed after its tests). */
  readonly tmp: string;
  readonly sshd: Sshd;
  /** The controller `start` started. */
  readonly controller: Controller;
  /** The specs repo `start` made. */
  readonly repo: WorkTree;
  /**
   * A specs repo with one Backend of each kind (named after it; `spec(kind)` is appended to its
   * spec, indented two spaces), the Storage, and `files`; a controller on it serving the agent
   * API, and the agent enrolled with it. Once per describe block.
   */
  start(
    files: Record<string, string | Uint8Array>,
    spec?: (kind: BackendKind) => string,
  ): Promise<Controller>;
  /** `adv logs RUN` from the store: the workload's output of the latest attempt, or of `attempt`. */
  logs(run: string, attempt?: number): Promise<string>;
  /** The fake Vast.ai API (more offers for tests that rent more than one instance per host). */
  readonly vast: FakeVastApi;
}

/**
 * In a describe block: the infrastructure of every backend kind, started before its tests and
 * stopped after them (with whatever `start` started).
 */
export function useEveryBackend(
  prefix: string,
  /** The kinds to stand up (default: all). Leaving `slurm` out does not start the cluster. */
  kinds: readonly BackendKind[] = BACKEND_KINDS,
): EveryBackend {
  const cluster = useSlurmCluster(
    prefix,
    { addresses: [...TPU_WORKERS, ...VAST_HOSTS] },
    kinds.includes('slurm'),
  );
  let tpu: FakeTpuApi | undefined;
  let vast: FakeVastApi | undefined;
  let k8s: FakeK8s | undefined;
  let wt: WorkTree | undefined;
  let c: Controller | undefined;
  let serving: Serving | undefined;
  let agent: AgentProc | undefined;
  const saved = { CLOUDSDK_CONFIG: process.env.CLOUDSDK_CONFIG, KUBECACHEDIR: process.env.KUBECACHEDIR };
  /** A remote host's `paths.root`. */
  const root = (kind: BackendKind) => join(cluster.tmp, `${kind}-root`);
  const hostPids = async (kind: BackendKind, jobs?: (dir: string) => boolean) =>
    jobPids(join(root(kind), 'work'), jobs);
  /** A TPU node's worker job dirs: `<job>` on worker 0, `<job>-w<k>` on the others. */
  const onNode = (node: FakeNode) => (dir: string) =>
    nodeNameOf(dir.replace(/-w\d+$/, '')) === node.resource.name.split('/').pop();
  /** A rented instance's job dir: the job its label names. */
  const onInstance = (inst: FakeInstance) => (dir: string) => inst.label === `${labelPrefix('vastai')}${dir}`;

  beforeAll(async () => {
    const tmp = cluster.tmp;
    await mkdir(join(tmp, 'store'));
    tpu = await startFakeTpuApi({
      addresses: TPU_WORKERS,
      // The VMs go away: their processes with them (only that node's).
      onPreempt: async (node) => killTree(await hostPids('gcp-tpu', onNode(node))),
      onDelete: async (node) => killTree(await hostPids('gcp-tpu', onNode(node))),
    });
    process.env.CLOUDSDK_CONFIG = await tpu.configDir(TPU_PROJECT);
    vast = await startFakeVastApi({
      sshEndpoints: VAST_HOSTS.map((host) => ({ host, port: cluster.sshd.port })),
      onStop: async (inst) => killTree(await hostPids('vastai', onInstance(inst))),
    });
    // kubectl's discovery cache, which it keeps under ~/.kube/cache otherwise.
    process.env.KUBECACHEDIR = join(tmp, 'kube-cache');
    k8s = await startFakeK8s({
      dir: join(tmp, 'k8s'),
      queues: [{ name: 'default', capability: { 'nvidia.com/gpu': '8', cpu: '64', memory: '256Gi' } }],
      pvcs: { 'default/adv-store': join(tmp, 'store') },
    });
  }, 120_000);

  cluster.defer(async () => {
    await agent?.stop();
    await serving?.close();
    await c?.stop();
    await wt?.cleanup();
    await k8s?.close();
    await vast?.stop();
    await tpu?.stop();
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    // Whatever a failed test left running on the hosts.
    const left = [
      ...(await hostPids('ssh')),
      ...(await hostPids('gcp-tpu')),
      ...(await hostPids('vastai')),
      ...(await jobPids(join(cluster.tmp, 'agent', 'jobs'))),
      ...(await localJobPids(join(cluster.tmp, 'data'))),
    ];
    await killTree(left).catch(() => {});
  });

  const backends = (spec: (kind: BackendKind) => string): Record<string, string> => {
    const s = cluster.sshd;
    const store = join(cluster.tmp, 'store');
    const yaml: Record<BackendKind, string> = {
      local:
        'apiVersion: adventuretime.dev/v1alpha1\nkind: Backend\nmetadata: {name: local}\nspec:\n  type: local\n',
      ssh: sshBackendYaml(s, 'ssh', root('ssh')),
      slurm: slurmBackendYaml(s, root('slurm'), 'high', 'slurm'),
      'gcp-tpu': gcpTpuBackendYaml(s, 'gcp-tpu', root('gcp-tpu'), {
        project: TPU_PROJECT,
        zone: TPU_ZONE,
        acceleratorType: 'v4-8',
        spot: false,
      }),
      vastai: vastaiBackendYaml(s, 'vastai', root('vastai'), { apiUrl: vast!.url }),
      agent: agentBackendYaml('agent'),
      volcano: volcanoBackendYaml(k8s!, 'volcano', {
        volumes: [{ claimName: 'adv-store', mountPath: store }],
      }),
    };
    return Object.fromEntries(kinds.map((kind) => [`backends/${kind}.yaml`, yaml[kind] + spec(kind)]));
  };

  return {
    get tmp() {
      return cluster.tmp;
    },
    get sshd() {
      return cluster.sshd;
    },
    get vast() {
      if (!vast) throw new Error('no Vast.ai fake: it starts before the tests');
      return vast;
    },
    get controller() {
      if (!c) throw new Error('no controller: call start() first');
      return c;
    },
    get repo() {
      if (!wt) throw new Error('no specs repo: call start() first');
      return wt;
    },
    async start(files, spec = () => '') {
      if (c) throw new Error('start() once per describe block');
      const tmp = cluster.tmp;
      // An offer per instance that may be rented (destroyed instances do not come back).
      for (let i = 0; i < VAST_HOSTS.length; i++) vast!.seedOffer({ dph_total: 0.3 });
      wt = await makeWorkTree({
        ...backends(spec),
        'storage.yaml': fileStorageYaml(join(tmp, 'store')),
        ...files,
      });
      c = await Controller.create({
        repo: wt.dir,
        dataDir: join(tmp, 'data'),
        pollIntervalMs: 200,
        // ADV_TEST_LOG=info (outside CI) shows what the adapters did, when a test needs explaining.
        ...(process.env.ADV_TEST_LOG ? { logger: pino({ level: process.env.ADV_TEST_LOG }) } : {}),
        secrets: { env: ['VAST_API_KEY', 'AGENT_ENROLL'] },
        secretEnv: { ...process.env, VAST_API_KEY: vast!.apiKey, AGENT_ENROLL: ENROLL },
      });
      await c.init();
      await c.pass(); // the agent Backend's adapter exists (and mounts the agent API) after the first pass
      serving = await serve(c, { httpAddr: '127.0.0.1:0', watch: false, apiToken: API_TOKEN });
      if (kinds.includes('agent'))
        agent = await startAgentProcess({
          name: 'desk',
          controller: serving.url!,
          token: ENROLL,
          stateDir: join(tmp, 'agent'),
          tokenDir: tmp,
          home: tmp,
        });
      return c;
    },
    async logs(run, attempt) {
      const io = captureIo({ ...process.env }, cluster.tmp);
      const args = ['logs', run, '--store', `file://${join(cluster.tmp, 'store')}`];
      const code = await runCli([...args, ...(attempt ? ['--attempt', String(attempt)] : [])], io);
      if (code !== 0) throw new Error(`adv logs ${run} exited ${code}: ${io.err()}`);
      return io.out();
    },
  };
}
