/**
 * The `volcano` backend end to end, with the real `kubectl` against a fake Kubernetes API server
 * with a fake Volcano on loopback (test/helpers/k8s/fake-k8s.ts: no API server can run here). Each
 * pod is a local process in its own mount and UTS namespaces, so the runtime ConfigMap, the PVCs
 * (a directory each: the file:// store is one) and /dev/shm appear at their real paths, and the
 * svc plugin's host names resolve.
 *
 * A two-replica gang starts both processes with ids 0 and 1 and the first pod as coordinator; an
 * eviction mid-run is a preemption (not a failed attempt) and the next attempt resumes from the
 * committed step; a pod that fails ends the attempt Failed and nothing of the gang runs on; a
 * cancel deletes the gang and keeps the checkpoint written in the grace period; a missing
 * namespace says how to fix it; the queue's capacity steers the solver; a controller killed with
 * SIGKILL while `kubectl create` runs leaves one Job, which the restarted controller adopts.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { CAPACITY_TTL_MS } from '../controller/loop/observe/observer.js';
import type { RunStatusDoc } from '../controller/status/types.js';
import { fileStorageYaml, TRAIN, volcanoBackendYaml } from './helpers/backends/kinds.js';
import { k8sAvailable, startFakeK8s, type FakeK8s } from './helpers/k8s/fake-k8s.js';
import { captureIo } from './helpers/io.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { passUntil as passesUntil, waitFor } from './helpers/wait.js';

const available = k8sAvailable('the volcano test');
const ADV = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');
const NS = 'default';

describe.runIf(available)('volcano: a gang Job per attempt, through the real kubectl', () => {
  let tmp: string;
  let store: string;
  let out: string;
  let k8s: FakeK8s;
  let wt: WorkTree | undefined;
  let c: Controller | undefined;

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-volcano-'));
    store = join(tmp, 'store');
    out = join(tmp, 'out');
    await mkdir(store, { recursive: true });
    await mkdir(out, { recursive: true });
    // kubectl's discovery cache, which it keeps under ~/.kube/cache otherwise.
    process.env.KUBECACHEDIR = join(tmp, 'kube-cache');
    k8s = await startFakeK8s({
      dir: join(tmp, 'k8s'),
      queues: [
        { name: 'default', capability: { 'nvidia.com/gpu': '8', cpu: '64', memory: '256Gi' } },
        { name: 'small', capability: { 'nvidia.com/gpu': '0' } },
      ],
      // `team/adv-store` waits for its namespace: a test creates it with kubectl.
      pvcs: { [`${NS}/adv-store`]: store, [`${NS}/out`]: out, 'team/adv-store': store, 'team/out': out },
    });
  }, 60_000);

  afterAll(async () => {
    await c?.stop();
    await wt?.cleanup();
    await k8s?.close();
    delete process.env.KUBECACHEDIR;
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  const backendYaml = (name: string, queue: string, ns = NS) =>
    volcanoBackendYaml(k8s, name, {
      namespace: ns,
      queue,
      shmSize: '256Mi',
      volumes: [
        { claimName: 'adv-store', mountPath: store },
        { claimName: 'out', mountPath: out },
      ],
    });

  const runYaml = (name: string, command: string, extra = '') => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command: [sh, -c, ${JSON.stringify(command)}]
${extra}`;

  async function start(
    files: Record<string, string>,
    opts: { env?: NodeJS.ProcessEnv } = {},
  ): Promise<Controller> {
    await c?.stop();
    await wt?.cleanup();
    wt = await makeWorkTree({
      'backends/k8s.yaml': backendYaml('k8s', 'default'),
      'storage.yaml': fileStorageYaml(store),
      'train.py': await readFile(TRAIN, 'utf8'),
      ...files,
    });
    c = await Controller.create({
      repo: wt.dir,
      dataDir: join(tmp, `data-${Date.now()}`),
      pollIntervalMs: 200,
      ...(opts.env ? { secretEnv: opts.env, secrets: { env: ['HF_TOKEN'] } } : {}),
    });
    await c.init();
    return c;
  }

  const passUntil = (what: string, done: () => boolean | Promise<boolean>, ms?: number) =>
    passesUntil(c!, what, done, ms);
  const st = (run: string) => c!.runStatus(run)?.status;
  const jobs = () => k8s.objects('jobs', NS);
  const gone = (name: string) =>
    !k8s.object('jobs', NS, name) &&
    !k8s.object('secrets', NS, name) &&
    !k8s.objects('pods', NS).some((p) => p.metadata.labels?.['volcano.sh/job-name'] === name);
  /** A hold file (made) and train.py that checkpoints every 10 steps and waits at `holdAt` while it exists. */
  const heldTraining = async (tag: string, steps: number, holdAt = 20) => {
    const hold = join(out, `hold-${tag}`);
    await writeFile(hold, '');
    const train = `exec python3 train.py --steps ${steps} --ckpt-every 10 --step-sleep 0.02 --hold-at ${holdAt} --hold-file ${hold}`;
    return { hold, train };
  };
  /** Passes until the run's first attempt runs with checkpoint `step` committed; its Job's name. */
  const untilCheckpoint = async (run: string, step: number): Promise<string> => {
    await passUntil(
      `checkpoint ${step} of ${run} committed`,
      () => st(run)?.attempts[0]?.phase === 'Running' && (st(run)?.attempts[0]?.lastStep ?? 0) >= step,
    );
    return st(run)!.attempts[0]!.jobId!;
  };

  it('a two-replica gang: ids 0 and 1, the first pod the coordinator, secrets in a Secret; then deleted', async () => {
    const hold = join(out, 'hold-pair');
    await writeFile(hold, '');
    const cmd = [
      `while [ -f ${hold} ]; do sleep 0.1; done`,
      `c=\${JAX_COORDINATOR_ADDRESS%:*}`,
      `echo "$ADV_PROCESS_ID $JAX_PROCESS_ID $JAX_NUM_PROCESSES $JAX_COORDINATOR_ADDRESS $(hostname) $(getent hosts $c | cut -d' ' -f1) $HF_TOKEN" > ${out}/pair-$ADV_PROCESS_ID`,
      `df -k /dev/shm | tail -1 | awk '{print $2}' > ${out}/shm-$ADV_PROCESS_ID`,
      'echo "hello from $ADV_PROCESS_ID"',
    ].join('; ');
    await start(
      {
        'runs/pair.yaml': runYaml(
          'pair',
          cmd,
          '  resources: {gpus: 2, nodes: 2, cpus: 4, memory: 8Gi}\n  secrets: [HF_TOKEN]\n',
        ),
      },
      { env: { ...process.env, HF_TOKEN: 'hf_canary_73' } },
    );
    await passUntil('both pods running', () => st('pair')?.attempts[0]?.phase === 'Running');
    const name = st('pair')!.attempts[0]!.jobId!;
    expect(name).toBe('adv-pair-1');
    const job = k8s.object('jobs', NS, name)!;
    expect(job.spec).toMatchObject({ minAvailable: 2, queue: 'default', plugins: { env: [], svc: [] } });
    const task = job.spec.tasks[0];
    expect(task).toMatchObject({ name: 'worker', replicas: 2 });
    const container = task.template.spec.containers[0];
    expect(container.resources.limits).toEqual({ 'nvidia.com/gpu': '2', cpu: '4', memory: '8Gi' });
    expect(task.template.spec.restartPolicy).toBe('Never');
    // The secret is in a Secret the pods read, not in the Job anyone who lists jobs can read.
    expect(JSON.stringify(job)).not.toContain('hf_canary_73');
    expect(k8s.object('secrets', NS, name)).toBeDefined();
    // The gang is allocated in the queue.
    expect(k8s.object('queues', undefined, 'default')!.status.allocated['nvidia.com/gpu']).toBe('4');
    await rm(hold);
    await passUntil('the run to succeed', () => st('pair')?.phase === 'Succeeded');
    const lines = await Promise.all([0, 1].map((k) => readFile(join(out, `pair-${k}`), 'utf8')));
    const fields = lines.map((l) => l.trim().split(' '));
    expect(fields.map((f) => f.slice(0, 3).join(' '))).toEqual(['0 0 2', '1 1 2']);
    // Both see the first pod as coordinator; each its own host name, which resolves in the pods.
    expect(fields[0]![3]).toBe(`${name}-worker-0.${name}:8476`);
    expect(fields[1]![3]).toBe(fields[0]![3]);
    expect(fields.map((f) => f[4])).toEqual([`${name}-worker-0`, `${name}-worker-1`]);
    expect(fields.map((f) => f[5])).toEqual(['127.0.0.1', '127.0.0.1']);
    expect(fields.map((f) => f[6])).toEqual(['hf_canary_73', 'hf_canary_73']);
    // /dev/shm is the memory emptyDir of the Backend's size (256Mi), not the host's.
    expect(Number((await readFile(join(out, 'shm-0'), 'utf8')).trim())).toBe(256 * 1024);
    // Each process's output is in the store.
    const adv = async (...args: string[]) => {
      const io = captureIo({ ...process.env }, tmp);
      const code = await runCli(args, io);
      return { code, out: io.out(), err: io.err() };
    };
    expect(await adv('logs', 'pair', '--store', `file://${store}`)).toMatchObject({
      code: 0,
      out: 'hello from 0\n',
    });
    expect(await adv('logs', 'pair', '--worker', '1', '--store', `file://${store}`)).toMatchObject({
      code: 0,
      out: 'hello from 1\n',
    });
    // The finished Job is deleted with its pods and its Secret (volcano #1718); nothing runs on.
    await passUntil('the Job deleted', () => gone(name));
    expect(k8s.livePids()).toEqual([]);
    // One list per pass: every jobs list came with the pods list of the same kubectl call, and no
    // job was read one by one but by the submit's find.
    const lists = (what: string) =>
      k8s.requests.filter(
        (r) => r.method === 'GET' && r.path.endsWith(`/namespaces/${NS}/${what}`) && r.query.labelSelector,
      );
    expect(lists('jobs').length).toBeGreaterThan(2);
    expect(lists('pods').length).toBe(lists('jobs').length);
    expect(
      k8s.requests.filter((r) => r.method === 'GET' && r.path.endsWith(`/jobs/${name}`)).length,
    ).toBeLessThanOrEqual(1);
  }, 240_000);

  it('an eviction mid-run is a preemption: the next attempt resumes from the committed step', async () => {
    const { hold, train } = await heldTraining('resume', 60);
    await start({
      'runs/resume.yaml': runYaml('resume', train, '  resources: {gpus: 1}\n  policy: {maxAttempts: 1}\n'),
    });
    const name = await untilCheckpoint('resume', 20);
    await k8s.evict(NS, `${name}-worker-0`);
    await passUntil('attempt 1 preempted', () => st('resume')?.attempts[0]?.phase === 'Preempted');
    expect(st('resume')!.attempts[0]).toMatchObject({ reason: 'Evicted' });
    await passUntil('the aborted Job deleted', () => gone(name));
    await rm(hold);
    await passUntil('resumed and finished', () => st('resume')?.phase === 'Succeeded', 180_000);
    const [first, second] = st('resume')!.attempts;
    // maxAttempts 1: the eviction did not spend it.
    expect(second).toMatchObject({
      backend: 'k8s',
      phase: 'Succeeded',
      startStep: first!.lastStep,
      lastStep: 60,
    });
    expect(first!.lastStep).toBeGreaterThanOrEqual(20);
  }, 360_000);

  it('a pod deleted from a running gang (Volcano’s own preemption) is a preemption: the next attempt resumes', async () => {
    const { hold, train } = await heldTraining('deleted', 40);
    await start({
      'runs/taken.yaml': runYaml(
        'taken',
        train, // on both pods: a step commits once each has written its part
        '  resources: {nodes: 2}\n  policy: {maxAttempts: 1}\n',
      ),
    });
    const name = await untilCheckpoint('taken', 20);
    // What Volcano's preempt/reclaim actions do: delete a pod of the gang (here with the real
    // kubectl; asynchronously, as the fake API server runs in this process).
    await promisify(execFile)('kubectl', [
      '--kubeconfig',
      k8s.kubeconfig,
      '-n',
      NS,
      'delete',
      'pod',
      `${name}-worker-1`,
      '--wait=false',
    ]);
    await passUntil('attempt 1 preempted', () => st('taken')?.attempts[0]?.phase === 'Preempted');
    // The deleted pod turns Failed first (PodFailed → Terminated), then PodEvicted: either way preempted.
    expect(st('taken')!.attempts[0]!.message).toMatch(/terminated|aborted/);
    await rm(hold);
    await passUntil('resumed and finished', () => st('taken')?.phase === 'Succeeded', 180_000);
    const [first, second] = st('taken')!.attempts;
    expect(second).toMatchObject({ phase: 'Succeeded', startStep: first!.lastStep, lastStep: 40 });
    await waitFor(() => k8s.livePids().length === 0, { what: 'no pod process left', timeoutMs: 60_000 });
  }, 360_000);

  it('a Job that says Running while its pods are Pending (volcano #2684) is still pending', async () => {
    k8s.holdPods(NS, 'adv-held-1');
    try {
      await start({ 'runs/held.yaml': runYaml('held', 'true', '  resources: {nodes: 2}\n') });
      // The Job goes Running at once; the attempt stays queued, saying why.
      await passUntil('the attempt queued behind its pending pods', () =>
        /says Running but 0 of 2 pods started \(2 pending\)/.test(st('held')?.message ?? ''),
      );
      expect(k8s.object('jobs', NS, 'adv-held-1')!.status.state.phase).toBe('Running');
      const a = st('held')!.attempts[0]!;
      expect(a.phase).toBe('Queued');
      expect(a.startedAt).toBeUndefined();
    } finally {
      k8s.releasePods(NS, 'adv-held-1');
    }
    await passUntil('the run to succeed', () => st('held')?.phase === 'Succeeded');
  }, 240_000);

  it('a failed pod ends the attempt Failed with its exit code, and no pod of the gang runs on', async () => {
    await start({
      'runs/bad.yaml': runYaml(
        'bad',
        `if [ "$ADV_PROCESS_ID" = 1 ]; then sleep 0.5; echo "shard 1 is corrupt" >&2; exit 3; fi; touch ${out}/bad-0-started; exec sleep 600`,
        '  resources: {nodes: 2}\n  policy: {maxAttempts: 1}\n',
      ),
    });
    await passUntil('the run to fail', () => st('bad')?.phase === 'Failed');
    expect(existsSync(join(out, 'bad-0-started'))).toBe(true);
    const a = st('bad')!.attempts[0]!;
    expect(a).toMatchObject({ phase: 'Failed', reason: 'PodFailed', exitCode: 3 });
    expect(a.message).toContain(`pod ${a.jobId}-worker-1 failed (exit 3`);
    // What the pod printed last, read before its Job was deleted.
    expect(a.message).toMatch(/its last output: .*shard 1 is corrupt/);
    await passUntil('the Job and its pods deleted', () => gone(a.jobId!));
    await waitFor(() => k8s.livePids().length === 0, { what: 'no pod process left', timeoutMs: 60_000 });
  }, 240_000);

  it('cancel deletes the gang; the checkpoint written in the grace period is kept, and resuming starts there', async () => {
    const { hold, train } = await heldTraining('cancel', 40, 25);
    const spec = (suspend: boolean) =>
      runYaml('halt', train, `  resources: {nodes: 2}\n${suspend ? '  suspend: true\n' : ''}`);
    await start({ 'runs/halt.yaml': spec(false) });
    const name = await untilCheckpoint('halt', 20);
    await wt!.write('runs/halt.yaml', spec(true));
    await wt!.commit('suspend halt');
    c!.requestFetch('test');
    await passUntil('attempt 1 cancelled', () => st('halt')?.attempts[0]?.phase === 'Cancelled');
    await passUntil('the Job, its pods and its Secret deleted', () => gone(name));
    await waitFor(() => k8s.livePids().length === 0, { what: 'no pod process left', timeoutMs: 60_000 });
    expect(existsSync(hold)).toBe(true);
    // Resumed: from the checkpoint train.py wrote on SIGTERM at step 25, in the grace period the
    // pods were given — past the last periodic one (20).
    await rm(hold);
    await wt!.write('runs/halt.yaml', spec(false));
    await wt!.commit('resume halt');
    c!.requestFetch('test');
    await passUntil('resumed and finished', () => st('halt')?.phase === 'Succeeded', 180_000);
    const [first, second] = st('halt')!.attempts;
    expect(first).toMatchObject({ phase: 'Cancelled' });
    expect(second!.startStep).toBeGreaterThan(20);
    expect(second).toMatchObject({ phase: 'Succeeded', lastStep: 40 });
  }, 360_000);

  it('a Backend whose namespace does not exist says how to fix it; once it exists the run goes on', async () => {
    await start({
      'backends/k8s.yaml': backendYaml('k8s', 'default', 'team'),
      'runs/ns.yaml': runYaml('ns', 'true'),
    });
    await passUntil('the submit failure explained', () =>
      /namespaces "team" not found: create it \(kubectl create namespace team\)/.test(
        st('ns')?.attempts[0]?.message ?? '',
      ),
    );
    expect(st('ns')!.attempts[0]).toMatchObject({ reason: 'SubmitFailed' });
    // What the message says to do, with the real kubectl (asynchronously: the fake runs in this
    // process; from a file, as `kubectl create namespace` speaks protobuf, which the fake does not).
    // The next attempt, after the cool-down, runs.
    const nsFile = join(tmp, 'team.yaml');
    await writeFile(nsFile, 'apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n');
    await promisify(execFile)('kubectl', [
      '--kubeconfig',
      k8s.kubeconfig,
      '--context',
      k8s.context,
      'create',
      '-f',
      nsFile,
    ]);
    await passUntil('the run to succeed', () => st('ns')?.phase === 'Succeeded', 180_000);
    const last = st('ns')!.attempts.at(-1)!;
    expect(last.n).toBeGreaterThan(1);
    // Its Job was made in the new namespace.
    expect(k8s.requests.some((r) => r.method === 'POST' && r.path.endsWith('/namespaces/team/jobs'))).toBe(
      true,
    );
  }, 240_000);

  it('the queue’s capacity steers the solver', async () => {
    const order = '  resources: {gpus: 1}\n  backendSelector: {order: [small, k8s]}\n';
    await start({
      'backends/small.yaml': backendYaml('small', 'small'),
      'runs/steer.yaml': runYaml('steer', 'true', order),
    });
    // Two Backends in one namespace: the first pass sweeps both with ONE list of the namespace.
    const listsBefore = k8s.requests.length;
    await c!.pass();
    const firstPass = k8s.requests
      .slice(listsBefore)
      .filter((r) => r.method === 'GET' && r.path.endsWith(`/namespaces/${NS}/jobs`));
    expect(firstPass.map((r) => r.query.labelSelector)).toEqual(['adventuretime.dev/backend']);
    await passUntil('the run to succeed', () => st('steer')?.phase === 'Succeeded');
    // `small` comes first but its queue has no GPU free: the run went to `k8s`.
    expect(st('steer')!.attempts.map((a) => a.backend)).toEqual(['k8s']);
    k8s.setQueueCapability('small', { 'nvidia.com/gpu': '2' });
    // The controller keeps a capacity answer 15 s (CAPACITY_TTL_MS) and asks again when a run
    // wants one: let the answer it has age past that, so the next run's pass reads the queue.
    const lastRead = Math.max(
      ...k8s.requests.filter((r) => r.path.endsWith('/queues/small')).map((r) => r.at),
    );
    await waitFor(() => Date.now() - lastRead > CAPACITY_TTL_MS + 500, {
      what: 'the cached capacity to age',
      timeoutMs: 60_000,
    });
    await wt!.write('runs/steer2.yaml', runYaml('steer2', 'true', order));
    await wt!.commit('a second run');
    c!.requestFetch('test');
    await passUntil('the second run to succeed', () => st('steer2')?.phase === 'Succeeded');
    expect(st('steer2')!.attempts.map((a) => a.backend)).toEqual(['small']);
  }, 240_000);

  it('a controller killed with SIGKILL during kubectl create leaves one Job, which the restarted one adopts', async () => {
    await c?.stop();
    c = undefined;
    await wt?.cleanup();
    // A kubectl on PATH that creates for real, then hangs while a marker exists: the controller is
    // killed after the API server stored the Job and before it heard back.
    const bin = join(tmp, 'bin');
    const marker = join(tmp, 'hang-create');
    await mkdir(bin, { recursive: true });
    const real = execFileSync('sh', ['-c', 'command -v kubectl'], { encoding: 'utf8' }).trim();
    await writeFile(
      join(bin, 'kubectl'),
      `#!/bin/sh\ninput=$(cat)\nprintf '%s' "$input" | ${real} "$@"\nrc=$?\ncase "$input" in *batch.volcano.sh*) while [ -f ${marker} ]; do sleep 0.1; done ;; esac\nexit $rc\n`,
    );
    chmodSync(join(bin, 'kubectl'), 0o755);
    await writeFile(marker, '');
    wt = await makeWorkTree({
      'backends/k8s.yaml': backendYaml('k8s', 'default'),
      'storage.yaml': fileStorageYaml(store),
      'runs/crash.yaml': runYaml(
        'crash',
        `echo "$ADV_PROCESS_ID" >> ${out}/crash`,
        '  resources: {nodes: 2}\n',
      ),
    });
    const dataDir = join(tmp, 'data-crash');
    const env = { ...process.env, PATH: `${bin}:${process.env.PATH}` };
    const controller = (...extra: string[]) => {
      const args = ['controller', '--repo', wt!.dir, '--data-dir', dataDir, '--poll-interval', '200ms'];
      const proc = spawn(process.execPath, [ADV, ...args, '--log-level', 'warn', ...extra], {
        stdio: ['ignore', 'ignore', 'pipe'],
        env,
      });
      let stderr = '';
      proc.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      const exit = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
      return { proc, exit, stderr: () => stderr };
    };
    // Job creations from here on (the earlier tests made theirs).
    const before = k8s.requests.length;
    const creates = () =>
      k8s.requests
        .slice(before)
        .filter(
          (r) => r.method === 'POST' && r.path === `/apis/batch.volcano.sh/v1alpha1/namespaces/${NS}/jobs`,
        );
    const first = controller();
    await waitFor(() => creates().length === 1 && k8s.object('jobs', NS, 'adv-crash-1'), {
      what: 'the Job created',
      timeoutMs: 90_000,
    });
    first.proc.kill('SIGKILL');
    await first.exit;
    await rm(marker);
    const second = controller('--once', '--timeout', '4m');
    expect(await second.exit, second.stderr()).toBe(0);
    const doc = parse(await wt.git('show', 'adventuretime/status:runs/crash.yaml')) as RunStatusDoc;
    expect(doc.status.phase).toBe('Succeeded');
    expect(doc.status.attempts.map((a) => [a.n, a.backend, a.phase])).toEqual([[1, 'k8s', 'Succeeded']]);
    // Exactly one Job was ever created: the restarted controller found it by name.
    expect(creates()).toHaveLength(1);
    expect((await readFile(join(out, 'crash'), 'utf8')).trim().split('\n').sort()).toEqual(['0', '1']);
    expect(jobs().filter((j) => j.metadata.name === 'adv-crash-1')).toEqual([]);
  }, 300_000);
});
