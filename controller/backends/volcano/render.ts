/**
 * The Volcano Job of one attempt, rendered from the request and the Backend's settings without
 * calling anything (unit-tested).
 *
 * - One Job per attempt, named after the job name (a DNS label), labelled with the Backend, run
 *   and attempt; the run and attempt are also annotations (exact, where labels are cut to 63).
 * - One task `worker` with `replicas` = nodes and `minAvailable` = replicas: a gang, started
 *   whole or not at all. Plugins `env` (`VC_TASK_INDEX`) and `svc` (`VC_WORKER_HOSTS`, host
 *   names that resolve between the pods).
 * - Policies: a deleted pod (Volcano's own preemption: `PodEvicted`) or a lost node (`Unknown`)
 *   aborts the job; a failed pod — a kubelet eviction is one, reason `Evicted` — terminates it
 *   (its other pods stop: no half gang runs on, volcano #1718); the task completing completes it.
 *   Volcano never restarts anything itself, so evictions never count against `maxRetry` (volcano
 *   #2560): retries are attempts, which resume from the last checkpoint like on every backend,
 *   and `observe.ts` tells a preemption from a failure by the pods.
 * - The pod runs a fixed `sh` prologue that turns the plugins' variables into the multi-host
 *   contract (`ADV_PROCESS_ID` = `VC_TASK_INDEX`, the coordinator = the first host of the task),
 *   then `adv exec` from the runtime ConfigMap, which fetches the code from the object store.
 *   No value is pasted into the prologue: the workload's argv follows `--` as arguments.
 * - Secrets (the run's, the store's credentials) go in a Secret of the job's name, read with
 *   `envFrom`: never in the Job's spec, which anyone who may list jobs can read.
 */
import { attemptSubdir, CheckpointMode, launchMode, stopSignalOf } from '../checkpoint-mode.js';
import { labelValue } from '../names.js';
import { setupVariables } from '../job-env.js';
import type { BackendTraits, JobRequest } from '../types.js';
import {
  DEFAULT_COORDINATOR_PORT,
  DEFAULT_GPU_RESOURCE,
  DEFAULT_GRACE_SEC,
  DEFAULT_SHM,
  DEFAULT_TTL_SEC,
  type VolcanoSettings,
} from './settings.js';

type Settings = VolcanoSettings;

export const BACKEND_LABEL = 'adventuretime.dev/backend';
export const RUN_LABEL = 'adventuretime.dev/run';
export const ATTEMPT_LABEL = 'adventuretime.dev/attempt';
/** Annotations: the exact run name, attempt number and job name (labels are cut to 63). */
export const RUN_ANNOTATION = 'adventuretime.dev/run';
export const ATTEMPT_ANNOTATION = 'adventuretime.dev/attempt';
export const JOB_ANNOTATION = 'adventuretime.dev/job';
/** Label of the ConfigMap holding the bundled `adv exec`: its content hash. */
export const RUNTIME_LABEL = 'adventuretime.dev/runtime';

export const TASK = 'worker';
/** Where the runtime ConfigMap is mounted, and the job dir (an emptyDir) in the pod. */
export const RUNTIME_DIR = '/opt/adventuretime';
export const BUNDLE_FILE = 'adv-exec.mjs';
export const WORK_DIR = '/adv';
/** Where `checkpointVolume` is mounted: an attempt's shared dir is `<run>/<attempt>` under it. */
export const CKPT_MOUNT = '/adv/ckpt';
/** `ADV_CACHE_DIR` in a pod: uv environments, uv's cache, an installed uv. */
export const CACHE_DIR = '/adv/cache';

/** What a `volcano` Backend offers a job (see `checkpoint-mode.ts`): the descriptor's traits. */
export const VOLCANO_TRAITS: BackendTraits = {
  queuesWhenFull: true,
  multiNode: true,
  tpus: false,
  billsFrom: 'started',
  // The Kubernetes name is cut further (`vcNameOf`: its pods' host names must stay DNS labels).
  jobNameMax: 63,
  // Every pod has a volume of its own; one dir for all is the declared ReadWriteMany claim. The
  // pods always reach the store (the code comes from there), but a plain-dir workload would not
  // find a dir in `store` mode with an S3 Storage: `auto` takes it only when asked.
  checkpointModes: (spec) => [
    ...(spec.volcano?.checkpointVolume ? [CheckpointMode.Shared] : []),
    CheckpointMode.PerProcess,
    CheckpointMode.Store,
  ],
  howToOffer: {
    [CheckpointMode.Shared]:
      'declare volcano.checkpointVolume (a ReadWriteMany PersistentVolumeClaim every pod mounts)',
  },
};

/** The job's checkpoint mode on this Backend (throws when it offers not the run's). */
export const volcanoMode = (job: JobRequest, s: Settings): CheckpointMode =>
  launchMode(job.spec, VOLCANO_TRAITS, { type: 'volcano', volcano: s });

/** The pod of task index `k` (Volcano's `<job>-<task>-<index>`). */
export const podName = (jobName: string, k: number): string => `${jobName}-${TASK}-${k}`;

/** The labels every object of an attempt carries (the poll's selector is the first). */
export function attemptLabels(
  backend: string,
  job: Pick<JobRequest, 'run' | 'attempt'>,
): Record<string, string> {
  return {
    [BACKEND_LABEL]: labelValue(backend),
    [RUN_LABEL]: labelValue(job.run),
    [ATTEMPT_LABEL]: String(job.attempt),
  };
}

/**
 * The prologue every pod runs: the plugins' variables become the multi-host facts (the same
 * `ADV_*` names as on SLURM and TPU; `adv exec` derives the JAX and torch variables from them),
 * Node is checked, and `adv exec` takes over the process (its arguments are "$@").
 */
export const PROLOGUE = `set -eu
if [ -z "\${VC_TASK_INDEX:-}" ]; then echo 'adv: VC_TASK_INDEX is not set: the Volcano env plugin is not enabled on this cluster' >&2; exit 127; fi
if [ -z "\${VC_WORKER_HOSTS:-}" ]; then echo 'adv: VC_WORKER_HOSTS is not set: the Volcano svc plugin is not enabled on this cluster' >&2; exit 127; fi
first="\${VC_WORKER_HOSTS%%,*}"
export ADV_PROCESS_ID="$VC_TASK_INDEX"
export ADV_COORDINATOR_ADDRESS="$first:$ADV_COORDINATOR_PORT"
command -v node >/dev/null 2>&1 || { echo "adv: Node.js >= 20 is required in the image and is not in PATH ($PATH)" >&2; exit 127; }
node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' || { echo "adv: Node.js >= 20 is required in the image; it has $(node --version)" >&2; exit 127; }
exec node ${RUNTIME_DIR}/${BUNDLE_FILE} --process "$ADV_PROCESS_ID" --processes "$ADV_NUM_PROCESSES" "$@"
`;

export interface RenderInputs {
  backend: string;
  namespace: string;
  settings: Settings;
  /** The name of the Job and its Secret (a DNS label of ≤ 50). */
  name: string;
  /** The store key of the code payload (`code/<tree>.tar.gz`). */
  codeKey: string;
  /** The runtime ConfigMap's name. */
  runtimeConfigMap: string;
}

export interface Rendered {
  job: Record<string, unknown>;
  /** The Secret with the job's secret variables, when it has any. */
  secret?: Record<string, unknown>;
}

/** Why a request cannot run on this Backend (a person must fix the spec or the Backend); else undefined. */
export function unrenderable(job: JobRequest, s: Settings): string | undefined {
  if (!job.store)
    return 'a volcano Backend needs a Storage: the pods fetch the code from the object store and write checkpoints there';
  const url = job.store.url;
  if (url.startsWith('file://')) {
    const path = decodeURIComponent(new URL(url).pathname);
    const mounted = (s.volumes ?? []).some(
      (v) =>
        path === v.mountPath || path.startsWith(v.mountPath.endsWith('/') ? v.mountPath : `${v.mountPath}/`),
    );
    if (!mounted)
      return `the Storage is ${url}, a directory the pods cannot see: mount it into them with volcano.volumes (a PersistentVolumeClaim at mountPath ${path}), or use an S3 Storage`;
  }
  try {
    volcanoMode(job, s);
  } catch (e) {
    return (e as Error).message;
  }
  return undefined;
}

/** The Job (and Secret) for one attempt. */
export function renderAttempt(job: JobRequest, r: RenderInputs): Rendered {
  const s = r.settings;
  const nodes = job.spec.resources?.nodes ?? 1;
  const labels = attemptLabels(r.backend, job);
  const annotations = {
    [RUN_ANNOTATION]: job.run,
    [ATTEMPT_ANNOTATION]: String(job.attempt),
    [JOB_ANNOTATION]: job.jobName,
  };
  const hasSecrets = Object.keys(job.secretEnv ?? {}).length > 0;
  const vcjob = {
    apiVersion: 'batch.volcano.sh/v1alpha1',
    kind: 'Job',
    metadata: { name: r.name, namespace: r.namespace, labels, annotations },
    spec: {
      schedulerName: 'volcano',
      queue: s.queue ?? 'default',
      minAvailable: nodes,
      ttlSecondsAfterFinished: s.ttlSecondsAfterFinished ?? DEFAULT_TTL_SEC,
      ...(s.priorityClassName ? { priorityClassName: s.priorityClassName } : {}),
      plugins: { env: [], svc: [] },
      policies: [
        { event: 'PodEvicted', action: 'AbortJob' },
        { event: 'Unknown', action: 'AbortJob' },
        { event: 'PodFailed', action: 'TerminateJob' },
        { event: 'TaskCompleted', action: 'CompleteJob' },
      ],
      tasks: [
        {
          name: TASK,
          replicas: nodes,
          minAvailable: nodes,
          template: { metadata: { labels, annotations }, spec: podSpecOf(job, r, hasSecrets) },
        },
      ],
    },
  };
  const secret = hasSecrets
    ? {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'Opaque',
        metadata: { name: r.name, namespace: r.namespace, labels, annotations },
        stringData: job.secretEnv,
      }
    : undefined;
  return { job: vcjob, ...(secret ? { secret } : {}) };
}

/** The variables every pod gets (the per-process ones come from the prologue). */
function workerEnv(job: JobRequest, s: Settings): Record<string, string> {
  const nodes = job.spec.resources?.nodes ?? 1;
  return {
    ...job.env,
    ...setupVariables(job),
    // In the pod's work volume: a pod's uv environment lasts as long as the pod (bake what every
    // attempt needs into the Environment's image).
    ADV_CACHE_DIR: CACHE_DIR,
    ADV_RUN: job.run,
    ADV_ATTEMPT: String(job.attempt),
    ADV_NUM_PROCESSES: String(nodes),
    // One pod per process.
    ADV_LOCAL_PROCESS_ID: '0',
    ADV_LOCAL_PROCESS_COUNT: '1',
    ADV_COORDINATOR_PORT: String(s.coordinatorPort ?? DEFAULT_COORDINATOR_PORT),
    ADV_LOCAL_DEVICE_COUNT: String(job.spec.resources?.gpus ?? 0),
    ...(job.store ? { ADV_STORE: job.store.url } : {}),
    ...(job.spec.policy?.checkpointIntervalSec
      ? { ADV_CKPT_INTERVAL_SEC: String(job.spec.policy.checkpointIntervalSec) }
      : {}),
    ...(job.spec.parallelism ? { ADV_PARALLELISM: JSON.stringify(job.spec.parallelism) } : {}),
  };
}

/** GPUs (the Backend's resource name) as a limit; cpu and memory as request = limit. */
function resourcesOf(job: JobRequest, s: Settings): Record<string, Record<string, string>> {
  const limits: Record<string, string> = {};
  const requests: Record<string, string> = {};
  const gpus = job.spec.resources?.gpus ?? 0;
  if (gpus > 0) limits[s.gpuResourceName ?? DEFAULT_GPU_RESOURCE] = String(gpus);
  if (job.spec.resources?.cpus) requests.cpu = limits.cpu = String(job.spec.resources.cpus);
  if (job.spec.resources?.memory) requests.memory = limits.memory = job.spec.resources.memory;
  return {
    ...(Object.keys(limits).length ? { limits } : {}),
    ...(Object.keys(requests).length ? { requests } : {}),
  };
}

/**
 * A string Kubernetes passes on as it is: the kubelet expands `$(NAME)` in a container's command,
 * args and env values and turns `$$` into `$`, so a command with `$$` or `$(…)` in it would run
 * differently here than on every other backend. Every `$` doubled expands back to itself.
 */
export const literal = (text: string): string => text.replaceAll('$', () => '$$');

function podSpecOf(job: JobRequest, r: RenderInputs, hasSecrets: boolean): Record<string, unknown> {
  const s = r.settings;
  const grace = s.graceSec ?? DEFAULT_GRACE_SEC;
  const mode = volcanoMode(job, s);
  const shared = mode === CheckpointMode.Shared;
  const execArgs = [
    '--job-dir',
    `${WORK_DIR}/job`,
    '--code',
    r.codeKey,
    ...(job.spec.workingDir ? ['--workdir', job.spec.workingDir] : []),
    '--grace',
    String(grace),
    '--ckpt-mode',
    mode,
    ...(shared ? ['--ckpt-dir', `${CKPT_MOUNT}/${attemptSubdir(job)}`] : []),
    '--stop-signal',
    stopSignalOf(job.spec),
    '--',
    ...job.argv,
  ];
  const container = {
    name: TASK,
    // The run's Environment names the image where it has one; else the Backend's.
    image: job.image ?? s.image,
    ...(s.imagePullPolicy ? { imagePullPolicy: s.imagePullPolicy } : {}),
    command: ['sh', '-c', PROLOGUE, 'adv', ...execArgs].map(literal),
    workingDir: WORK_DIR,
    env: Object.entries(workerEnv(job, s)).map(([name, value]) => ({ name, value: literal(value) })),
    ...(hasSecrets ? { envFrom: [{ secretRef: { name: r.name } }] } : {}),
    resources: resourcesOf(job, s),
    volumeMounts: [
      { name: 'adv-runtime', mountPath: RUNTIME_DIR, readOnly: true },
      { name: 'adv-work', mountPath: WORK_DIR },
      { name: 'dshm', mountPath: '/dev/shm' },
      ...(shared ? [{ name: 'adv-ckpt', mountPath: CKPT_MOUNT }] : []),
      ...(s.volumes ?? []).map((v, i) => ({
        name: `vol-${i}`,
        mountPath: v.mountPath,
        ...(v.readOnly ? { readOnly: true } : {}),
      })),
    ],
  };
  return {
    restartPolicy: 'Never',
    // adv exec's grace for the workload, plus time to upload the last checkpoint and exit record.
    terminationGracePeriodSeconds: grace + 15,
    ...(s.priorityClassName ? { priorityClassName: s.priorityClassName } : {}),
    ...(s.serviceAccountName ? { serviceAccountName: s.serviceAccountName } : {}),
    ...(s.nodeSelector ? { nodeSelector: s.nodeSelector } : {}),
    ...(s.tolerations ? { tolerations: s.tolerations } : {}),
    containers: [container],
    volumes: [
      { name: 'adv-runtime', configMap: { name: r.runtimeConfigMap } },
      { name: 'adv-work', emptyDir: {} },
      { name: 'dshm', emptyDir: { medium: 'Memory', sizeLimit: s.shmSize ?? DEFAULT_SHM } },
      ...(shared ? [{ name: 'adv-ckpt', persistentVolumeClaim: { claimName: s.checkpointVolume } }] : []),
      ...(s.volumes ?? []).map((v, i) => ({
        name: `vol-${i}`,
        persistentVolumeClaim: { claimName: v.claimName, ...(v.readOnly ? { readOnly: true } : {}) },
      })),
    ],
  };
}

/** The ConfigMap that holds the bundled `adv exec` (one per bundle and namespace, shared by jobs). */
export function runtimeConfigMap(
  name: string,
  namespace: string,
  hash: string,
  bundle: string,
): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace, labels: { [RUNTIME_LABEL]: hash } },
    data: { [BUNDLE_FILE]: bundle },
  };
}
