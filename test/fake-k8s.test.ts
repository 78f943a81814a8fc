/**
 * The fake Kubernetes API server with Volcano (helpers/k8s/fake-k8s.ts) driven by the real `kubectl`:
 * discovery, create/get/replace/delete and what kubectl prints for each answer, Volcano jobs whose
 * pods run as local processes (env and svc plugins, a PVC, a memory emptyDir), gang admission
 * against a queue's capability, eviction and lifecycle policies, volcano #2684 (held pods),
 * garbage collection, ttlSecondsAfterFinished, auth. About 60 kubectl runs.
 */
/* eslint-disable @typescript-eslint/no-explicit-any -- Kubernetes objects are untyped JSON, read field by field */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canRunFakeK8s, startFakeK8s, type FakeK8s } from './helpers/k8s/fake-k8s.js';
import { waitFor } from './helpers/wait.js';
import { alive } from './helpers/processes.js';

type Obj = Record<string, any>;

/** In CI the fake must run (a missing capability fails the file); elsewhere the tests skip, loudly. */
function fakeK8sAvailable(what: string): boolean {
  const ok = canRunFakeK8s();
  const need = 'root, `unshare --mount --uts` that works, and `kubectl` and `openssl` on PATH';
  if (!ok && process.env.CI) throw new Error(`${what} need ${need} in CI`);
  if (!ok) console.warn(`SKIPPING ${what}: this machine lacks ${need}`);
  return ok;
}

const available = fakeK8sAvailable('the fake Kubernetes API server tests');
const NS = 'default';

describe.runIf(available)('the fake Kubernetes API server with Volcano, driven by kubectl', () => {
  let fake: FakeK8s;
  let dir: string;
  let data: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'adv-fake-k8s-'));
    data = join(dir, 'pvc-data');
    mkdirSync(data);
    writeFileSync(join(data, 'dataset.txt'), 'rows\n');
    fake = await startFakeK8s({
      dir: join(dir, 'k8s'),
      pvcs: { [`${NS}/shared`]: data },
      queues: [
        { name: 'default' },
        { name: 'gpu', capability: { 'nvidia.com/gpu': '2' } },
        { name: 'shut', state: 'Closed' },
      ],
    });
  });
  afterAll(async () => {
    await fake?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Runs kubectl against the fake; never throws. */
  const kubectl = (args: string[], input?: string, kubeconfig = fake.kubeconfig) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(
        'kubectl',
        ['--kubeconfig', kubeconfig, '--context', fake.context, '-n', NS, ...args],
        {
          env: { ...process.env, KUBECACHEDIR: join(dir, 'kube-cache') },
          timeout: 60_000,
          maxBuffer: 16 << 20,
        },
        (err, stdout, stderr) =>
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
      );
      child.stdin?.end(input ?? '');
    });
  const ok = async (args: string[], input?: string) => {
    const r = await kubectl(args, input);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
    return r.stdout;
  };
  const json = async (args: string[]) => JSON.parse(await ok([...args, '-o', 'json'])) as Obj;
  const job = (name: string) => fake.object('jobs', NS, name);
  const pod = (name: string) => fake.object('pods', NS, name);
  const phase = (name: string) => job(name)?.status?.state?.phase as string | undefined;
  const waitPhase = (name: string, want: string, timeoutMs = 30_000) =>
    waitFor(() => phase(name) === want, {
      what: `job ${name} ${want}`,
      timeoutMs,
      detail: () => ({
        job: job(name)?.status,
        pods: fake.objects('pods', NS).map((p) => [p.metadata.name, p.status]),
      }),
    });

  /** A Volcano Job: `replicas` pods of task `worker` running `script` with sh -c. */
  function vcjob(name: string, script: string, o: Obj = {}): Obj {
    return {
      apiVersion: 'batch.volcano.sh/v1alpha1',
      kind: 'Job',
      metadata: { name, labels: { 'adventuretime.dev/backend': o.backend ?? 'test' } },
      spec: {
        ...(o.queue ? { queue: o.queue } : {}),
        ...(o.minAvailable !== undefined ? { minAvailable: o.minAvailable } : {}),
        ...(o.policies ? { policies: o.policies } : {}),
        ...(o.maxRetry ? { maxRetry: o.maxRetry } : {}),
        ...(o.ttl !== undefined ? { ttlSecondsAfterFinished: o.ttl } : {}),
        plugins: o.plugins ?? { env: [], svc: [] },
        tasks: o.tasks ?? [
          {
            name: 'worker',
            replicas: o.replicas ?? 2,
            template: {
              metadata: { labels: { 'adventuretime.dev/backend': o.backend ?? 'test' } },
              spec: {
                restartPolicy: 'Never',
                terminationGracePeriodSeconds: o.grace ?? 2,
                containers: [
                  {
                    name: 'main',
                    image: 'busybox:1.36',
                    command: ['sh', '-c', script],
                    ...(o.resources ? { resources: o.resources } : {}),
                    ...(o.env ? { env: o.env } : {}),
                    ...(o.mounts ? { volumeMounts: o.mounts } : {}),
                  },
                ],
                ...(o.volumes ? { volumes: o.volumes } : {}),
              },
            },
          },
        ],
      },
    };
  }

  it('serves discovery: kubectl api-resources lists Volcano jobs, without warnings', async () => {
    const r = await kubectl(['api-resources']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^jobs\s+vcjob,vj\s+batch\.volcano\.sh\/v1alpha1\s+true\s+Job$/m);
    expect(r.stdout).toMatch(
      /^queues\s+q,queue-v1beta1\s+scheduling\.volcano\.sh\/v1beta1\s+false\s+Queue$/m,
    );
    expect(r.stdout).toMatch(/^pods\s+po\s+v1\s+true\s+Pod$/m);
    expect((await kubectl(['version'])).stdout).toContain('Server Version: v1.32.0-fake');
  });

  it('runs a 2-replica job with env+svc plugins, a PVC and a memory emptyDir to Completed; creating it again is AlreadyExists', async () => {
    const script =
      'echo idx=$VC_TASK_INDEX hosts=$VC_WORKER_HOSTS num=$VC_WORKER_NUM host=$(hostname) token=$TOKEN; ' +
      'cat /etc/volcano/worker.host; echo; ls /data; grep " /dev/shm " /proc/mounts | tail -1 | cut -d" " -f3,4; ' +
      'getent hosts e2e-worker-1.e2e | cut -d" " -f1';
    const list = {
      apiVersion: 'v1',
      kind: 'List',
      items: [
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'e2e', labels: { 'adventuretime.dev/backend': 'test' } },
          stringData: { TOKEN: 's3cret' },
        },
        vcjob('e2e', script, {
          env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'e2e', key: 'TOKEN' } } }],
          mounts: [
            { name: 'data', mountPath: '/data' },
            { name: 'shm', mountPath: '/dev/shm' },
          ],
          volumes: [
            { name: 'data', persistentVolumeClaim: { claimName: 'shared' } },
            { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
          ],
        }),
      ],
    };
    const created = await kubectl(['create', '-f', '-', '-o', 'json'], JSON.stringify(list));
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    // kubectl prints each created object as its own JSON document (not a List).
    const docs = created.stdout.split(/\n(?=\{)/).map((d) => JSON.parse(d) as Obj);
    expect(docs.map((d) => `${d.kind}/${d.metadata.name}`)).toEqual(['Secret/e2e', 'Job/e2e']);
    expect(docs[0]!.data).toEqual({ TOKEN: Buffer.from('s3cret').toString('base64') });
    expect(docs[1]!.spec).toMatchObject({
      queue: 'default',
      minAvailable: 2,
      maxRetry: 3,
      schedulerName: 'volcano',
    });
    expect(
      fake.requests.some(
        (r) => r.method === 'POST' && r.path.endsWith('/jobs') && r.query.fieldValidation === 'Strict',
      ),
    ).toBe(true);

    await waitPhase('e2e', 'Completed');
    for (const i of [0, 1]) {
      const p = pod(`e2e-worker-${i}`)!;
      expect(p.status.phase).toBe('Succeeded');
      expect(p.status.containerStatuses[0].state.terminated).toMatchObject({
        exitCode: 0,
        reason: 'Completed',
      });
      expect(p.metadata.labels).toMatchObject({
        'volcano.sh/job-name': 'e2e',
        'volcano.sh/task-spec': 'worker',
        'volcano.sh/task-index': String(i),
        'volcano.sh/queue-name': 'default',
      });
      expect(p.spec).toMatchObject({ hostname: `e2e-worker-${i}`, subdomain: 'e2e', nodeName: 'fake-node' });
    }
    const logs = await ok([
      'logs',
      '-l',
      'volcano.sh/job-name=e2e',
      '--tail',
      '100',
      '--all-containers',
      '--prefix',
    ]);
    for (const i of [0, 1]) {
      const mine = logs
        .split('\n')
        .filter((l) => l.startsWith(`[pod/e2e-worker-${i}/main] `))
        .map((l) => l.replace(/^\[[^\]]+\] /, ''));
      expect(mine).toEqual([
        `idx=${i} hosts=e2e-worker-0.e2e,e2e-worker-1.e2e num=2 host=e2e-worker-${i} token=s3cret`,
        'e2e-worker-0.e2e',
        'e2e-worker-1.e2e',
        'dataset.txt',
        'tmpfs rw,relatime,size=65536k',
        '127.0.0.1',
      ]);
    }

    const again = await kubectl(['create', '-f', '-', '-o', 'json'], JSON.stringify(list));
    expect(again.code).toBe(1);
    expect(again.stdout).toBe('');
    expect(again.stderr).toBe(
      'Error from server (AlreadyExists): error when creating "STDIN": secrets "e2e" already exists\n' +
        'Error from server (AlreadyExists): error when creating "STDIN": jobs.batch.volcano.sh "e2e" already exists\n',
    );
  });

  it('lists several kinds by label in one List, answers NotFound, Conflict on a stale replace, and denies spec edits', async () => {
    await ok(['create', '-f', '-'], JSON.stringify(vcjob('lst', 'echo hi', { backend: 'lst', replicas: 1 })));
    await ok(
      ['create', '-f', '-'],
      JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: 'lst' }, data: { a: 'Yg==' } }),
    );
    expect(await ok(['label', 'secret', 'lst', 'adventuretime.dev/backend=lst'])).toBe(
      'secret/lst labeled\n',
    );
    await waitFor(() => pod('lst-worker-0'), { what: 'the pod of job lst' });
    const all = await json(['get', 'vcjob,pods,secrets', '-l', 'adventuretime.dev/backend=lst']);
    expect(all.kind).toBe('List');
    expect(all.items.map((i: Obj) => `${i.apiVersion} ${i.kind}/${i.metadata.name}`)).toEqual([
      'batch.volcano.sh/v1alpha1 Job/lst',
      'v1 Pod/lst-worker-0',
      'v1 Secret/lst',
    ]);
    const none = await json(['get', 'vcjob,pods', '-l', 'adventuretime.dev/backend in (nope),!other']);
    expect(none.items).toEqual([]);

    const missing = await kubectl(['get', 'vcjob', 'nope', '-o', 'json']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('Error from server (NotFound): jobs.batch.volcano.sh "nope" not found\n');

    const current = await json(['get', 'vcjob', 'lst']);
    const stale = structuredClone(current);
    stale.metadata.resourceVersion = String(Number(current.metadata.resourceVersion) - 1);
    stale.metadata.labels.extra = 'x';
    const conflict = await kubectl(['replace', '-f', '-'], JSON.stringify(stale));
    expect(conflict.code).toBe(1);
    expect(conflict.stderr).toBe(
      'Error from server (Conflict): error when replacing "STDIN": Operation cannot be fulfilled on jobs.batch.volcano.sh "lst": the object has been modified; please apply your changes to the latest version and try again\n',
    );

    const edited = structuredClone(await json(['get', 'vcjob', 'lst']));
    edited.spec.tasks[0].template.spec.containers[0].image = 'alpine';
    const denied = await kubectl(['replace', '-f', '-'], JSON.stringify(edited));
    expect(denied.code).toBe(1);
    expect(denied.stderr).toBe(
      'Error from server: error when replacing "STDIN": admission webhook "validatejob.volcano.sh" denied the request: job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` and `PriorityClassName`\n',
    );
    const labelled = structuredClone(await json(['get', 'vcjob', 'lst']));
    labelled.metadata.labels.extra = 'y';
    expect(await ok(['replace', '-f', '-'], JSON.stringify(labelled))).toBe(
      'job.batch.volcano.sh/lst replaced\n',
    );

    const table = await ok(['get', 'vcjob', 'lst']);
    expect(table.split('\n')[0]).toMatch(/^NAME\s+STATUS\s+MINAVAILABLE\s+RUNNINGS\s+AGE$/);
    expect(table.split('\n')[1]).toMatch(/^lst\s+(Pending|Running|Completed)\s+1\s+\d+\s+\d+s$/);
  });

  it('denies bad jobs: webhook messages, a bad task name by the CRD schema, an unknown field by strict decoding', async () => {
    const create = (o: Obj) => kubectl(['create', '-f', '-'], JSON.stringify(o));
    const denied = (msg: string) =>
      `Error from server: error when creating "STDIN": admission webhook "validatejob.volcano.sh" denied the request: ${msg}\n`;
    expect((await create(vcjob('bad-q', 'true', { queue: 'nope' }))).stderr).toBe(
      denied('unable to find job queue: queue.scheduling.volcano.sh "nope" not found;'),
    );
    expect((await create(vcjob('bad-shut', 'true', { queue: 'shut' }))).stderr).toBe(
      denied('can only submit job to queue with state `Open`, queue `shut` status is `Closed`;'),
    );
    expect((await create(vcjob('bad-min', 'true', { minAvailable: 3 }))).stderr).toBe(
      denied("job 'minAvailable' should not be greater than total replicas in tasks;"),
    );
    const dup = vcjob('bad-dup', 'true');
    dup.spec.tasks.push(structuredClone(dup.spec.tasks[0]));
    expect((await create(dup)).stderr).toBe(denied('duplicated task name worker;'));
    const noTasks = vcjob('bad-none', 'true', { tasks: [] });
    expect((await create(noTasks)).stderr).toBe(denied('No task specified in job spec'));
    const badName = vcjob('bad-name', 'true');
    badName.spec.tasks[0].name = 'Worker_1';
    const r = await create(badName);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `The Job "bad-name" is invalid: spec.tasks[0].name: Invalid value: "Worker_1": spec.tasks[0].name in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'\n`,
    );
    const typo = vcjob('bad-field', 'true', { mounts: [] });
    typo.spec.tasks[0].template.spec.containers[0].volumeMount =
      typo.spec.tasks[0].template.spec.containers[0].volumeMounts;
    expect((await create(typo)).stderr).toBe(
      'Error from server (BadRequest): error when creating "STDIN": Job in version "v1alpha1" cannot be handled as a Job: strict decoding error: unknown field "spec.tasks[0].template.spec.containers[0].volumeMount"\n',
    );
    expect(fake.objects('jobs', NS).filter((j) => j.metadata.name.startsWith('bad-'))).toEqual([]);
  });

  it('gang-admits against queue capability: a second 2-GPU job stays Pending until the first is deleted', async () => {
    const gpu = { requests: { cpu: '500m', 'nvidia.com/gpu': '1' }, limits: { 'nvidia.com/gpu': '1' } };
    const before = new Set(fake.livePids());
    await ok(
      ['create', '-f', '-'],
      JSON.stringify(vcjob('gang-a', 'sleep 300', { queue: 'gpu', resources: gpu })),
    );
    await waitPhase('gang-a', 'Running');
    await ok(
      ['create', '-f', '-'],
      JSON.stringify(vcjob('gang-b', 'echo b-ran', { queue: 'gpu', resources: gpu })),
    );
    // The scheduler has looked at b's gang and left it out: the queue counts one pending podgroup.
    const q = await waitFor(
      async () => {
        const got = await json(['get', 'queue', 'gpu']);
        return got.status?.pending === 1 && got.status?.running === 1 ? got : undefined;
      },
      {
        what: 'queue gpu to count gang-b pending',
        detail: () => fake.object('queues', undefined, 'gpu')?.status,
      },
    );
    expect(q.status.allocated).toMatchObject({ 'nvidia.com/gpu': '2', cpu: '1' });
    expect(phase('gang-b')).toBe('Pending');
    expect(fake.objects('pods', NS).filter((p) => p.metadata.name.startsWith('gang-b'))).toEqual([]);
    const aPids = fake.livePids().filter((p) => !before.has(p));
    expect(aPids).toHaveLength(2);

    const del = await kubectl(['delete', 'vcjob', 'gang-a']);
    expect(del).toMatchObject({ code: 0, stdout: 'job.batch.volcano.sh "gang-a" deleted\n', stderr: '' });
    await waitPhase('gang-b', 'Completed');
    expect(await ok(['logs', 'gang-b-worker-1'])).toBe('b-ran\n');
    await waitFor(
      () =>
        aPids.every((p) => !alive(p)) &&
        !fake.objects('pods', NS).some((p) => p.metadata.name.startsWith('gang-a')),
      {
        what: "gang-a's processes and pods to be gone",
      },
    );
  });

  it('a kubelet eviction fails the pod (reason Evicted, kept); a PodFailed → AbortJob policy aborts the job and kills the rest', async () => {
    const before = new Set(fake.livePids());
    await ok(
      ['create', '-f', '-'],
      JSON.stringify(vcjob('evict', 'sleep 300', { policies: [{ event: 'PodFailed', action: 'AbortJob' }] })),
    );
    await waitPhase('evict', 'Running');
    const pids = await waitFor(
      () => {
        const p = fake.livePids().filter((x) => !before.has(x));
        return p.length === 2 ? p : undefined;
      },
      { what: 'two container processes' },
    );
    await fake.evict(NS, 'evict-worker-0');
    await waitPhase('evict', 'Aborted');
    await waitFor(() => !pod('evict-worker-1') && pids.every((p) => !alive(p)), {
      what: 'the other pod and its process to be gone',
    });
    const evicted = await json(['get', 'pod', 'evict-worker-0']);
    expect(evicted.status).toMatchObject({ phase: 'Failed', reason: 'Evicted' });
    expect(evicted.status.conditions).toContainEqual(
      expect.objectContaining({ type: 'DisruptionTarget', status: 'True', reason: 'TerminationByKubelet' }),
    );
    expect((await ok(['get', 'pods', 'evict-worker-0'])).split('\n')[1]).toMatch(
      /^evict-worker-0\s+0\/1\s+Evicted\s+0\s+\d+s$/,
    );
  });

  it('a pod deleted while its job runs is PodEvicted (after its PodFailed): a PodEvicted → AbortJob policy aborts', async () => {
    const policies = [{ event: 'PodEvicted', action: 'AbortJob' }];
    await ok(['create', '-f', '-'], JSON.stringify(vcjob('gone', 'sleep 300', { policies })));
    await waitPhase('gone', 'Running');
    // A kubelet eviction is PodFailed only: no policy matches, the job keeps running, counting it.
    await ok(['create', '-f', '-'], JSON.stringify(vcjob('kept', 'sleep 300', { policies })));
    await waitPhase('kept', 'Running');
    await fake.evict(NS, 'kept-worker-0');
    await waitFor(() => job('kept')?.status?.failed === 1, {
      what: 'job kept to count the evicted pod failed',
      detail: () => job('kept')?.status,
    });
    expect(phase('kept')).toBe('Running');

    expect(await ok(['delete', 'pod', 'gone-worker-0', '--wait=false'])).toBe(
      'pod "gone-worker-0" deleted\n',
    );
    await waitPhase('gone', 'Aborted');
    await waitFor(() => !pod('gone-worker-1'), { what: 'the other pod of gone to be killed' });
    await ok(['delete', 'vcjob', 'gone', 'kept']);
  });

  it('restarts on failure per policy until maxRetry, then Failed', async () => {
    const policies = [{ event: 'PodFailed', action: 'RestartJob' }];
    await ok(
      ['create', '-f', '-'],
      JSON.stringify(vcjob('retry', 'exit 3', { policies, maxRetry: 2, replicas: 1 })),
    );
    await waitPhase('retry', 'Failed');
    expect(job('retry')!.status).toMatchObject({ retryCount: 2 });
    const phases = (job('retry')!.status.conditions as Obj[]).map((c) => c.status);
    expect(phases.filter((p) => p === 'Restarting')).toHaveLength(2);
    expect(phases.at(-1)).toBe('Failed');
  });

  it('holdPods (volcano #2684): the job says Running while its pods stay Pending, until released', async () => {
    fake.holdPods(NS, 'held');
    await ok(['create', '-f', '-'], JSON.stringify(vcjob('held', 'echo released')));
    await waitFor(() => phase('held') === 'Running' && job('held')?.status?.pending === 2, {
      what: 'held Running with 2 pending',
      detail: () => job('held')?.status,
    });
    const out = await json(['get', 'vcjob', 'held']);
    expect(out.status).toMatchObject({ state: { phase: 'Running' }, pending: 2, running: 0 });
    for (const i of [0, 1]) expect(pod(`held-worker-${i}`)?.status?.phase).toBe('Pending');
    const waiting = await kubectl(['logs', 'held-worker-0']);
    expect(waiting.stderr).toBe(
      'Error from server (BadRequest): container "main" in pod "held-worker-0" is waiting to start: ContainerCreating\n',
    );
    fake.releasePods(NS, 'held');
    await waitPhase('held', 'Completed');
    expect(await ok(['logs', 'held-worker-0'])).toBe('released\n');
  });

  it('deleting a job stops its pods (SIGTERM, grace, then gone) and garbage-collects the svc ConfigMap and Service', async () => {
    const before = new Set(fake.livePids());
    const script = 'trap "echo got TERM; sleep 0.5; exit 0" TERM; echo up; while :; do sleep 0.1; done';
    await ok(['create', '-f', '-'], JSON.stringify(vcjob('del', script)));
    await waitPhase('del', 'Running');
    const pids = await waitFor(
      () => {
        const p = fake.livePids().filter((x) => !before.has(x));
        return p.length === 2 ? p : undefined;
      },
      { what: 'two container processes' },
    );
    expect(fake.object('configmaps', NS, 'del-svc')?.data).toMatchObject({
      'worker.host': 'del-worker-0.del\ndel-worker-1.del',
      VC_WORKER_NUM: '2',
    });
    expect(fake.object('services', NS, 'del')?.spec).toMatchObject({ clusterIP: 'None' });
    await waitFor(async () => (await ok(['logs', 'del-worker-0'])) === 'up\n', {
      what: 'del-worker-0 to be up',
    });

    const follow = kubectl(['logs', 'del-worker-0', '-f']);
    await waitFor(
      () => fake.requests.some((q) => q.path.endsWith('/pods/del-worker-0/log') && q.query.follow === 'true'),
      {
        what: 'kubectl logs -f to be following',
      },
    );
    const r = await kubectl(['delete', 'vcjob/del', 'secret/del', '--ignore-not-found', '--wait=false']);
    expect(r).toMatchObject({ code: 0, stdout: 'job.batch.volcano.sh "del" deleted\n', stderr: '' });
    await waitFor(() => pod('del-worker-0')?.metadata?.deletionTimestamp || !pod('del-worker-0'), {
      what: 'del-worker-0 to be terminating',
    });
    // The follow ends when the container exits, with what it printed on SIGTERM.
    expect(await follow).toMatchObject({ code: 0, stdout: 'up\ngot TERM\n' });
    await waitFor(
      () =>
        !fake.objects('pods', NS).some((p) => p.metadata.name.startsWith('del-')) &&
        !fake.object('configmaps', NS, 'del-svc') &&
        !fake.object('services', NS, 'del') &&
        pids.every((p) => !alive(p) && !fake.livePids().includes(p)),
      { what: "del's pods, ConfigMap, Service and processes to be gone" },
    );
    expect(fake.objects('podgroups', NS).filter((p) => p.metadata.name.startsWith('del-'))).toEqual([]);
  });

  it('deletes a finished job after ttlSecondsAfterFinished', async () => {
    // lastTransitionTime has whole seconds (as the real one): the job may go up to 1 s before its TTL.
    await ok(['create', '-f', '-'], JSON.stringify(vcjob('ttl', 'true', { ttl: 2, replicas: 1 })));
    await waitPhase('ttl', 'Completed');
    await waitFor(async () => (await kubectl(['get', 'vcjob', 'ttl'])).code === 1, {
      what: 'job ttl to be deleted',
    });
    await waitFor(() => !pod('ttl-worker-0'), { what: 'its pod to be collected' });
  });

  it('refuses a wrong token: kubectl exits 1, asking to log in', async () => {
    const bad = join(dir, 'bad-kubeconfig');
    writeFileSync(bad, readFileSync(fake.kubeconfig, 'utf8').replace(/token: .*/, 'token: wrong'));
    const r = await kubectl(['get', 'pods'], undefined, bad);
    expect(r).toMatchObject({ code: 1, stdout: '' });
    expect(r.stderr).toContain('error: You must be logged in to the server (Unauthorized)');
  });
});
