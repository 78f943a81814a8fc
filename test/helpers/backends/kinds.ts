/** Backend and Storage YAML for tests that run on the real sshd and SLURM of this machine. */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { REPO } from '../paths.js';
import { haveSshd, startSshd, type Sshd } from '../servers/sshd.js';

export const TRAIN = join(REPO, 'examples', 'toy-train', 'train.py');
export const SLURM_INFRA = join(REPO, 'test', 'infra');

/** A file:// object store under the controller's data dir. */
export const FILE_STORAGE =
  'apiVersion: adventuretime.dev/v1alpha1\nkind: Storage\nmetadata: {name: default}\nspec: {type: file, file: {path: store}}\n';

export const sshBackendYaml = (
  s: Sshd,
  name: string,
  root: string,
  port = s.port,
) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata:
  name: ${name}
spec:
  type: ssh
  connection:
    host: 127.0.0.1
    port: ${port}
    user: ${s.user}
    identityFile: ${s.identityFile}
    knownHostsFile: ${s.knownHostsFile}
  paths:
    root: ${root}
`;

/** The two-node cluster of test/infra (`debug` preemptible under `high`), through the sshd. */
export const slurmBackendYaml = (
  s: Sshd,
  root: string,
  partition: string,
  name = 'slurm-local',
) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata:
  name: ${name}
spec:
  type: slurm
  connection: {host: 127.0.0.1, port: ${s.port}, user: ${s.user}, identityFile: ${s.identityFile}, knownHostsFile: ${s.knownHostsFile}}
  paths: {root: ${root}}
  capabilities: {gpus: 2, nodes: 2}
  slurm:
    partitions: [{name: debug, preemptible: true}, {name: high}]
    sbatchDefaults: {partition: ${partition}}
    gresMapping: {default: gpu}
    signalGraceSec: 30
`;

/**
 * Whether the real SLURM tests can run here (root, slurm-wlm, munge, sshd). In CI they must:
 * a missing piece throws; elsewhere the test is skipped with a warning that says why.
 */
export function slurmAvailable(what: string): boolean {
  const ok = haveSshd() && existsSync('/usr/sbin/slurmctld') && userInfo().uid === 0;
  if (!ok && process.env.CI) throw new Error(`${what} needs root, slurm-wlm, munge and openssh-server in CI`);
  if (!ok) console.warn(`SKIPPING ${what}: it needs root, slurm-wlm, munge and openssh-server`);
  return ok;
}

/**
 * In a describe block: the test SLURM cluster and an sshd started before its tests, a temp dir,
 * and everything stopped after them — what `defer` was given first (controllers, work trees),
 * then sshd, the dir, and the cluster (whose stop cancels its jobs). `sshd` is how the sshd listens
 * (more loopback addresses, for the hosts a fake cloud hands out).
 */
export function useSlurmCluster(
  prefix: string,
  sshdOptions: Parameters<typeof startSshd>[0] = {},
  /** false: the sshd and the temp dir only (a test that leaves SLURM out, outside CI). */
  slurm = true,
): {
  readonly sshd: Sshd;
  readonly tmp: string;
  defer(fn: () => unknown): void;
} {
  let sshd: Sshd | undefined;
  let tmp = '';
  const deferred: (() => unknown)[] = [];
  beforeAll(async () => {
    if (slurm) execFileSync(join(SLURM_INFRA, 'slurm-start.sh'), { stdio: 'inherit' });
    sshd = await startSshd(sshdOptions);
    tmp = await mkdtemp(join(tmpdir(), prefix));
  }, 60_000);
  afterAll(async () => {
    for (const fn of deferred.reverse()) await fn();
    await sshd?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
    if (slurm) execFileSync(join(SLURM_INFRA, 'slurm-stop.sh'));
  });
  return {
    get sshd() {
      return sshd!;
    },
    get tmp() {
      return tmp;
    },
    defer: (fn) => void deferred.push(fn),
  };
}

/**
 * Whether the gcp-tpu tests can run here: the real gcloud (the Cloud SDK) and sshd. In CI they must:
 * a missing piece throws; elsewhere the test is skipped with a warning that says why.
 */
export function gcloudAvailable(what: string): boolean {
  let ok = haveSshd();
  try {
    execFileSync('gcloud', ['--version'], { stdio: 'ignore' });
  } catch {
    ok = false;
  }
  if (!ok && process.env.CI) throw new Error(`${what} needs gcloud and openssh-server in CI`);
  if (!ok) console.warn(`SKIPPING ${what}: it needs the Cloud SDK (gcloud) and openssh-server`);
  return ok;
}

/** The agent pool the agent tests enroll into (`AGENT_ENROLL` is its enrollment token). */
export const agentBackendYaml = (name = 'desks', extra = '') => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: ${name}}
spec:
  type: agent
  agent: {tokenSecret: AGENT_ENROLL, staleAfterSec: 10}
  capabilities: {gpus: 1, cuda: true}
${extra}`;

/**
 * A gcp-tpu Backend driven through the real gcloud (pointed at the fake TPU API by
 * `CLOUDSDK_CONFIG`), whose workers are `s` on the loopback addresses the fake hands out.
 * `gcpTpu` holds the project, zone and accelerator type, and overrides the defaults (spot, ready
 * within 120 s); `extra` is more of the spec, indented.
 */
export const gcpTpuBackendYaml = (
  s: Sshd,
  name: string,
  root: string,
  gcpTpu: Record<string, unknown>,
  extra = '',
) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: ${name}}
spec:
  type: gcp-tpu
  gcpTpu: ${JSON.stringify({ spot: true, readyTimeoutSec: 120, ...gcpTpu })}
  connection: {user: ${s.user}, port: ${s.port}, identityFile: ${s.identityFile}, knownHostsFile: ${s.knownHostsFile}}
  paths: {root: ${root}}
${extra}`;

/**
 * A vastai Backend against the fake Vast API at `apiUrl` (its key in the secret `VAST_API_KEY`),
 * whose instances are `s` on the loopback addresses the fake hands out. `vastai` overrides the
 * defaults (one GPU); `extra` is more of the spec, indented.
 */
export const vastaiBackendYaml = (
  s: Sshd,
  name: string,
  root: string,
  vastai: Record<string, unknown>,
  extra = '',
) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: ${name}}
spec:
  type: vastai
  vastai: ${JSON.stringify({ apiKeySecret: 'VAST_API_KEY', numGpus: 1, ...vastai })}
  connection: {identityFile: ${s.identityFile}, knownHostsFile: ${s.knownHostsFile}}
  paths: {root: ${root}}
${extra}`;

/**
 * A volcano Backend driven through the real kubectl against the fake Kubernetes + Volcano
 * (`k8s`: its kubeconfig and context), 8 GPUs on 4 nodes. `volcano` overrides the defaults
 * (namespace `default`, queue `default`, an image the fake kubelet ignores, 5 s grace); `extra`
 * is more of the spec, indented.
 */
export const volcanoBackendYaml = (
  k8s: { kubeconfig: string; context: string },
  name: string,
  volcano: Record<string, unknown>,
  extra = '',
) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: ${name}}
spec:
  type: volcano
  volcano: ${JSON.stringify({
    kubeconfig: k8s.kubeconfig,
    context: k8s.context,
    namespace: 'default',
    queue: 'default',
    image: 'node:20-bookworm',
    graceSec: 5,
    ...volcano,
  })}
  capabilities: {gpus: 8, nodes: 4}
${extra}`;

/** A file:// Storage at an absolute path (one a volcano pod mounts at the same path). */
export const fileStorageYaml = (path: string) =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: Storage\nmetadata: {name: default}\nspec: {type: file, file: {path: ${path}}}\n`;
