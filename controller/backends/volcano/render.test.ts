import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { JobRequest } from '../types.js';
import { vcNameOf } from './adapter.js';
import { expandVars } from '../../../test/helpers/k8s/fake-k8s-store.js';
import { literal, PROLOGUE, podName, renderAttempt, unrenderable, type RenderInputs } from './render.js';

const job: JobRequest = {
  jobName: 'adv-sweep.lr-3-2',
  run: 'sweep.lr-3',
  attempt: 2,
  spec: { resources: { gpus: 4, cpus: 8, memory: '64Gi', nodes: 2 }, workingDir: 'src' },
  argv: ['python3', 'train.py', '--lr', '0.1; rm -rf /'],
  code: { commit: 'c0ffee' },
  env: { LR: '0.1', ADV_REDACT: 'HF_TOKEN' },
  secretEnv: { HF_TOKEN: 'hf_secret_value' },
  store: { url: 's3://bucket/prefix?endpoint=http://s3:9000' },
};

const inputs = (over: Partial<RenderInputs['settings']> = {}): RenderInputs => ({
  backend: 'k8s-a100',
  namespace: 'ml',
  name: vcNameOf(job.jobName),
  codeKey: 'code/abc.tar.gz',
  runtimeConfigMap: 'adv-exec-0123456789ab',
  settings: { namespace: 'ml', image: 'ghcr.io/lab/train:1', ...over },
});

/* eslint-disable-next-line @typescript-eslint/no-explicit-any -- rendered objects are checked field by field */
type Any = Record<string, any>;

describe('renderAttempt: the setup and the Environment’s image', () => {
  const setup = [{ from: 'Run', run: 'make data' }];
  const pod = (j: JobRequest) =>
    (renderAttempt(j, inputs()).job as Any).spec.tasks[0].template.spec.containers[0] as Any;

  it('gives every pod ADV_SETUP, ADV_UV and a cache dir in its work volume', () => {
    const c = pod({ ...job, setup, uv: { python: '3.12' } });
    const env = Object.fromEntries(c.env.map((e: Any) => [e.name, e.value]));
    expect(env).toMatchObject({
      ADV_SETUP: JSON.stringify(setup),
      ADV_UV: '{"python":"3.12"}',
      ADV_CACHE_DIR: '/adv/cache',
    });
    expect(c.volumeMounts).toContainEqual({ name: 'adv-work', mountPath: '/adv' });
  });

  it('runs the Environment’s image when it names one, else the Backend’s', () => {
    expect(pod({ ...job, image: 'ghcr.io/lab/cuda12:2' }).image).toBe('ghcr.io/lab/cuda12:2');
    expect(pod(job).image).toBe('ghcr.io/lab/train:1');
  });
});

describe('renderAttempt', () => {
  const { job: vc, secret } = renderAttempt(
    job,
    inputs({
      queue: 'research',
      priorityClassName: 'high',
      nodeSelector: { pool: 'a100' },
      tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
      shmSize: '16Gi',
      gpuResourceName: 'amd.com/gpu',
      volumes: [{ claimName: 'datasets', mountPath: '/data', readOnly: true }],
    }),
  ) as { job: Any; secret: Any };
  const task = vc.spec.tasks[0];
  const pod = task.template.spec;
  const c = pod.containers[0];
  const env = Object.fromEntries(c.env.map((e: Any) => [e.name, e.value]));

  it('is one gang: minAvailable = replicas = nodes, one task, restartPolicy Never, a TTL', () => {
    expect(vc.apiVersion).toBe('batch.volcano.sh/v1alpha1');
    expect(vc.metadata.name).toBe(vcNameOf('adv-sweep.lr-3-2'));
    expect(vc.metadata.name).toMatch(/^[a-z]([-a-z0-9]*[a-z0-9])?$/);
    expect(vc.spec.minAvailable).toBe(2);
    expect(vc.spec.tasks).toHaveLength(1);
    expect(task.replicas).toBe(2);
    expect(pod.restartPolicy).toBe('Never');
    expect(vc.spec.ttlSecondsAfterFinished).toBe(600);
    expect(vc.spec.queue).toBe('research');
    expect(vc.spec.schedulerName).toBe('volcano');
    expect(vc.spec.plugins).toEqual({ env: [], svc: [] });
  });

  it('aborts on eviction and node loss, terminates on a failed pod, never restarts', () => {
    expect(vc.spec.policies).toEqual([
      { event: 'PodEvicted', action: 'AbortJob' },
      { event: 'Unknown', action: 'AbortJob' },
      { event: 'PodFailed', action: 'TerminateJob' },
      { event: 'TaskCompleted', action: 'CompleteJob' },
    ]);
    expect(JSON.stringify(vc)).not.toContain('RestartJob');
  });

  it('asks for the GPU resource of the Backend, cpu and memory; /dev/shm sized; placement settings', () => {
    expect(c.resources.limits).toEqual({ 'amd.com/gpu': '4', cpu: '8', memory: '64Gi' });
    expect(c.resources.requests).toEqual({ cpu: '8', memory: '64Gi' });
    const shm = pod.volumes.find((v: Any) => v.name === 'dshm');
    expect(shm.emptyDir).toEqual({ medium: 'Memory', sizeLimit: '16Gi' });
    expect(c.volumeMounts).toContainEqual({ name: 'dshm', mountPath: '/dev/shm' });
    expect(pod.priorityClassName).toBe('high');
    expect(vc.spec.priorityClassName).toBe('high');
    expect(pod.nodeSelector).toEqual({ pool: 'a100' });
    expect(pod.tolerations[0].key).toBe('nvidia.com/gpu');
    expect(c.image).toBe('ghcr.io/lab/train:1');
    expect(pod.volumes).toContainEqual({
      name: 'vol-0',
      persistentVolumeClaim: { claimName: 'datasets', readOnly: true },
    });
    expect(c.volumeMounts).toContainEqual({ name: 'vol-0', mountPath: '/data', readOnly: true });
  });

  it('labels the Job and its pods; the exact run and attempt are annotations', () => {
    expect(vc.metadata.labels).toEqual({
      'adventuretime.dev/backend': 'k8s-a100',
      'adventuretime.dev/run': 'sweep-lr-3',
      'adventuretime.dev/attempt': '2',
    });
    expect(task.template.metadata.labels).toEqual(vc.metadata.labels);
    expect(vc.metadata.annotations['adventuretime.dev/run']).toBe('sweep.lr-3');
  });

  it('runs adv exec with the code key and the argv as arguments, never pasted into the script', () => {
    expect(c.command.slice(0, 4)).toEqual(['sh', '-c', literal(PROLOGUE), 'adv']);
    expect(c.command.slice(4)).toEqual([
      '--job-dir',
      '/adv/job',
      '--code',
      'code/abc.tar.gz',
      '--workdir',
      'src',
      '--grace',
      '30',
      '--ckpt-mode',
      'per-process',
      '--stop-signal',
      'SIGTERM',
      '--',
      'python3',
      'train.py',
      '--lr',
      '0.1; rm -rf /',
    ]);
    expect(PROLOGUE).not.toContain('rm -rf');
    expect(env).toMatchObject({
      ADV_RUN: 'sweep.lr-3',
      ADV_ATTEMPT: '2',
      ADV_NUM_PROCESSES: '2',
      ADV_LOCAL_PROCESS_ID: '0',
      ADV_LOCAL_PROCESS_COUNT: '1',
      ADV_STORE: job.store!.url,
      LR: '0.1',
    });
    // adv exec derives the JAX and torch variables: none comes from the Job.
    expect(Object.keys(env).filter((n) => n.startsWith('JAX_'))).toEqual([]);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(30);
    // Without checkpointVolume: every pod checkpoints into its own job dir.
    expect(JSON.stringify(pod)).not.toContain('/adv/ckpt');
  });

  it('mounts checkpointVolume at /adv/ckpt in every pod: one dir per run and attempt for all processes', () => {
    const r = renderAttempt(
      { ...job, spec: { ...job.spec, policy: { stopSignal: 'SIGUSR1' } } },
      inputs({ checkpointVolume: 'ckpt-rwx' }),
    ) as { job: Any };
    const p = r.job.spec.tasks[0].template.spec;
    const cmd: string[] = p.containers[0].command;
    const flag = (f: string) => cmd[cmd.indexOf(f) + 1];
    expect(flag('--ckpt-mode')).toBe('shared');
    expect(flag('--ckpt-dir')).toBe('/adv/ckpt/sweep.lr-3/2');
    expect(flag('--stop-signal')).toBe('SIGUSR1');
    expect(p.volumes).toContainEqual({ name: 'adv-ckpt', persistentVolumeClaim: { claimName: 'ckpt-rwx' } });
    expect(p.containers[0].volumeMounts).toContainEqual({ name: 'adv-ckpt', mountPath: '/adv/ckpt' });
    // A run may still ask for per-process dirs, or the store.
    const store = renderAttempt(
      { ...job, spec: { ...job.spec, checkpoint: { mode: 'store' } } },
      inputs({ checkpointVolume: 'ckpt-rwx' }),
    ) as { job: Any };
    const c2: string[] = store.job.spec.tasks[0].template.spec.containers[0].command;
    expect(c2[c2.indexOf('--ckpt-mode') + 1]).toBe('store');
    expect(c2).not.toContain('--ckpt-dir');
  });

  it('refuses shared mode without a checkpointVolume, saying how to declare one', () => {
    const shared = { ...job, spec: { ...job.spec, checkpoint: { mode: 'shared' as const } } };
    expect(unrenderable(shared, inputs().settings)).toBe(
      'this backend offers no shared checkpoint dir (checkpoint.mode: shared): declare volcano.checkpointVolume (a ReadWriteMany PersistentVolumeClaim every pod mounts)',
    );
    expect(unrenderable(shared, inputs({ checkpointVolume: 'ckpt-rwx' }).settings)).toBeUndefined();
  });

  it('keeps secrets out of the Job: they are in a Secret the pod reads with envFrom', () => {
    expect(JSON.stringify(vc)).not.toContain('hf_secret_value');
    expect(secret.kind).toBe('Secret');
    expect(secret.metadata.name).toBe(vc.metadata.name);
    expect(secret.stringData).toEqual({ HF_TOKEN: 'hf_secret_value' });
    expect(c.envFrom).toEqual([{ secretRef: { name: vc.metadata.name } }]);
  });

  it('has no Secret and no envFrom when the job has no secrets', () => {
    const r = renderAttempt({ ...job, secretEnv: {} }, inputs()) as { job: Any; secret?: Any };
    expect(r.secret).toBeUndefined();
    expect(r.job.spec.tasks[0].template.spec.containers[0].envFrom).toBeUndefined();
  });
});

describe('what the kubelet expands', () => {
  it('the command and env reach the process as written: $$ and $(NAME) are not rewritten', () => {
    const argv = ['sh', '-c', 'echo $$ $(HOME) $$(x) ${LR} $', '$(LR)'];
    const env = { LR: '0.1', PRICE: '$5 $(LR) $$' };
    const { job: vc } = renderAttempt({ ...job, argv, env }, inputs());
    const c = (vc as Any).spec.tasks[0].template.spec.containers[0] as Any;
    // The kubelet's expansion (the fake's, per the Kubernetes docs) over what was rendered.
    const vars = new Map<string, string>(c.env.map((e: Any) => [e.name, expandVars(e.value, new Map())]));
    vars.set('HOME', '/root');
    const ran: string[] = c.command.map((a: string) => expandVars(a, vars));
    expect(ran.slice(-argv.length)).toEqual(argv);
    expect(ran[2]).toBe(PROLOGUE);
    expect(vars.get('PRICE')).toBe(env.PRICE);
  });
});

describe('the prologue', () => {
  const run = (env: Record<string, string>) =>
    execFileSync('sh', ['-c', PROLOGUE.replace(/exec node .*$/m, 'env'), 'adv'], {
      env: { PATH: process.env.PATH!, ADV_COORDINATOR_PORT: '8476', ...env },
      encoding: 'utf8',
    });
  it('turns the plugins’ variables into the multi-host facts: id from VC_TASK_INDEX, coordinator = first host', () => {
    const out = run({ VC_TASK_INDEX: '1', VC_WORKER_HOSTS: 'j-worker-0.j,j-worker-1.j' });
    expect(out).toContain('ADV_PROCESS_ID=1\n');
    expect(out).toContain('ADV_COORDINATOR_ADDRESS=j-worker-0.j:8476\n');
    expect(out).not.toContain('JAX_');
  });
  it('passes adv exec the process id and count as flags', () => {
    const argv = execFileSync(
      'sh',
      ['-c', PROLOGUE.replace(/exec node \S+/, 'printf "%s\\n"'), 'adv', '--ckpt-mode', 'shared'],
      {
        env: {
          PATH: process.env.PATH!,
          ADV_COORDINATOR_PORT: '8476',
          ADV_NUM_PROCESSES: '2',
          VC_TASK_INDEX: '1',
          VC_WORKER_HOSTS: 'a,b',
        },
        encoding: 'utf8',
      },
    );
    expect(argv.split('\n').filter(Boolean)).toEqual([
      '--process',
      '1',
      '--processes',
      '2',
      '--ckpt-mode',
      'shared',
    ]);
  });
  it('says what is missing when the env or svc plugin is not enabled', () => {
    expect(() => run({})).toThrow(/VC_TASK_INDEX is not set/);
    expect(() => run({ VC_TASK_INDEX: '0' })).toThrow(/VC_WORKER_HOSTS is not set: the Volcano svc plugin/);
  });
});

describe('names and checks', () => {
  it('keeps pods’ host names within a DNS label', () => {
    const n = vcNameOf(`adv-${'a.'.repeat(40)}-1`);
    expect(n.length).toBeLessThanOrEqual(50);
    expect(podName(n, 4095).length).toBeLessThanOrEqual(63);
  });
  it('refuses a file:// store the pods cannot see, and no store at all', () => {
    const s = { namespace: 'ml', image: 'i' };
    expect(unrenderable({ ...job, store: { url: 'file:///srv/store' } }, s)).toMatch(/volcano.volumes/);
    expect(
      unrenderable(
        { ...job, store: { url: 'file:///srv/store' } },
        { ...s, volumes: [{ claimName: 'st', mountPath: '/srv' }] },
      ),
    ).toBeUndefined();
    expect(
      unrenderable(
        { ...job, store: { url: 'file:///srvx/store' } },
        { ...s, volumes: [{ claimName: 'st', mountPath: '/srv' }] },
      ),
    ).toMatch(/cannot see/);
    const { store: _s, ...noStore } = job;
    expect(unrenderable(noStore, s)).toMatch(/needs a Storage/);
  });
});
