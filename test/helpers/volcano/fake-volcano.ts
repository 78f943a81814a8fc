/**
 * The fake Volcano of the fake Kubernetes API server (fake-k8s.ts): the job controller for
 * batch.volcano.sh/v1alpha1 Jobs. Its pods and the env/svc plugins: fake-volcano-plugins.ts; the
 * scheduler and queue controller: fake-volcano-scheduler.ts; the admission webhooks:
 * fake-volcano-webhook.ts.
 *
 * Faithful to volcano's pkg/controllers/job (state/*.go, job_controller_actions.go,
 * job_controller_handler.go):
 * - Requests per job, processed in order: a pod added → PodPending; its phase turning Failed →
 *   PodFailed (with the container's exit code), Succeeded with all its task's pods succeeded →
 *   TaskCompleted, Running → PodRunning; a pod deleted (not by the controller, which marks the pods
 *   it kills `volcano.sh/controller-out-of-sync` first) → PodEvicted; a job's spec or phase
 *   changing → OutOfSync. NB: a pod the *kubelet* evicts is Failed (reason Evicted) and not
 *   deleted, so it raises PodFailed, not PodEvicted ("PodEvictedEvent is triggered if Pod was
 *   deleted", bus/v1alpha1/events.go); a pod deleted by someone else turns Failed (the kubelet's
 *   terminal phase) and then goes: PodFailed, then PodEvicted.
 * - Policies (the task's, then the job's; `event`/`events`/`exitCode` → `action`; `*`; a stale job
 *   version or an internal event → SyncJob; `timeout` delays the action). States: Pending →
 *   Running → (Completing →) Completed | Failed, Aborting → Aborted, Terminating → Terminated,
 *   Restarting → Pending (retryCount; at maxRetry → Failed). KillJob deletes every pod not in the
 *   retained phases (Succeeded/Failed for Abort/Terminate/Complete; none for Restart, except at
 *   the last retry), bumps status.version, zeroes the counts (so a finished job's status shows 0
 *   succeeded, as the real one does), runs the plugins' OnJobDelete (the svc ConfigMap and
 *   Service go) and deletes the PodGroup. Any request for a finished job runs KillJob: shortly
 *   after a job completes, its `<job>-svc` ConfigMap and Service are gone.
 * - Pods are created (all replicas) once the job's PodGroup is Inqueue.
 * - `ttlSecondsAfterFinished`: a Completed/Failed/Terminated job is deleted (foreground) that long
 *   after its last transition.
 * Simplified: no NetworkPolicy from svc, no ssh/mpi/pytorch plugins, no job `volumes`, no
 * dependsOn, no partition policies, no PodPending timeouts, no TaskFailed/JobUnknown events.
 * `hold` reproduces volcano #2684: the job's pods are created and bound but the kubelet does not
 * start them, while the job says Running.
 */
import type { Cluster } from '../k8s/fake-k8s-api.js';
import { clone, defOf, formatQuantity, guarded, now, type Change, type Obj } from '../k8s/fake-k8s-store.js';
import type { FakeKubelet } from '../k8s/fake-kubelet.js';
import { controllerRef, newJobPod, podGroupName, svcHosts } from './fake-volcano-plugins.js';
import { add, podRequests, VolcanoScheduler } from './fake-volcano-scheduler.js';
import { admitJob, admitQueue } from './fake-volcano-webhook.js';

interface Req {
  ns: string;
  job: string;
  jobUid?: string;
  task?: string;
  pod?: string;
  event: string;
  exitCode?: number;
  version?: number;
  action?: string;
}

type Update = (s: Obj) => boolean;
interface Target {
  type: 'task' | 'pod';
  task: string;
  pod?: string;
}

const FINISHED = ['Completed', 'Failed', 'Terminated'];
const SOFT = ['Succeeded', 'Failed'];
const OUT_OF_SYNC = 'volcano.sh/controller-out-of-sync';
const JOBS = defOf('jobs');
const PODS = defOf('pods');
const PODGROUPS = defOf('podgroups');
const QUEUES = defOf('queues');

/** The fake Volcano: job controller, queue controller, scheduler. */
export class FakeVolcano {
  private readonly reqs = new Map<string, Req[]>();
  private readonly held = new Set<string>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly ttl = new Map<string, NodeJS.Timeout>();
  private draining = false;
  private closed = false;
  private readonly scheduler: VolcanoScheduler;

  constructor(
    private readonly cluster: Cluster,
    private readonly kubelet: FakeKubelet,
    queues: { name: string; capability?: Record<string, string>; state?: 'Open' | 'Closed' }[],
  ) {
    this.scheduler = new VolcanoScheduler(cluster, kubelet);
    cluster.onAdmit('jobs', admitJob(cluster));
    cluster.onAdmit('queues', admitQueue);
    for (const q of queues)
      cluster.create(
        QUEUES,
        undefined,
        {
          metadata: { name: q.name },
          spec: { weight: 1, reclaimable: true, ...(q.capability ? { capability: q.capability } : {}) },
          status: { state: q.state ?? 'Open' },
        },
        { internal: true },
      );
    cluster.store.subscribe((c) => this.onChange(c));
  }

  hold(ns: string, job: string): void {
    this.held.add(`${ns}/${job}`);
    this.kubelet.hold(ns, job);
  }

  release(ns: string, job: string): void {
    this.held.delete(`${ns}/${job}`);
    this.kubelet.release(ns, job);
    this.enqueue({ ns, job, event: 'OutOfSync' });
  }

  setQueueCapability(name: string, capability: Record<string, string>): void {
    this.cluster.store.mutate(QUEUES, undefined, name, (q) => void ((q.spec ??= {}).capability = capability));
  }

  close(): void {
    this.closed = true;
    this.scheduler.close();
    for (const t of [...this.timers, ...this.ttl.values()]) clearTimeout(t);
  }

  // ---- events → requests ----

  private onChange(c: Change): void {
    const o = c.object;
    const ns = o.metadata.namespace;
    switch (c.def.resource) {
      case 'jobs': {
        const key = `${ns}/${o.metadata.name}`;
        if (c.type === 'DELETED') {
          this.reqs.delete(key);
          clearTimeout(this.ttl.get(key));
          this.ttl.delete(key);
          return this.scheduler.schedule();
        }
        this.armTtl(o);
        const changed =
          c.type === 'ADDED' ||
          JSON.stringify(c.old?.spec) !== JSON.stringify(o.spec) ||
          c.old?.status?.state?.phase !== o.status?.state?.phase;
        if (changed) this.enqueue({ ns, job: o.metadata.name, event: 'OutOfSync' });
        return;
      }
      case 'pods': {
        this.scheduler.schedule();
        const owner = (o.metadata.ownerReferences ?? []).find((r: Obj) => r.controller && r.kind === 'Job');
        const ann = o.metadata.annotations ?? {};
        const job = ann['volcano.sh/job-name'];
        const task = ann['volcano.sh/task-spec'];
        if (!owner || !job || !task || ann['volcano.sh/job-version'] === undefined) return;
        const base = {
          ns,
          job,
          jobUid: owner.uid,
          task,
          pod: o.metadata.name,
          version: Number(ann['volcano.sh/job-version']),
        };
        let event = 'OutOfSync';
        let exitCode: number | undefined;
        const phase = o.status?.phase;
        const was = c.old?.status?.phase;
        if (c.type === 'ADDED') event = 'PodPending';
        else if (c.type === 'DELETED') event = 'PodEvicted';
        else if (phase === 'Failed' && was !== 'Failed') {
          event = 'PodFailed';
          exitCode = o.status?.containerStatuses?.[0]?.state?.terminated?.exitCode;
        } else if (phase === 'Succeeded' && was !== 'Succeeded' && this.taskCompleted(ns, job, task))
          event = 'TaskCompleted';
        else if (phase === 'Running' && was !== 'Running') event = 'PodRunning';
        else if (phase === 'Pending' && was !== 'Pending') event = 'PodPending';
        if (OUT_OF_SYNC in ann) event = 'OutOfSync';
        return this.enqueue({ ...base, event, ...(exitCode !== undefined ? { exitCode } : {}) });
      }
      case 'podgroups': {
        const owner = (o.metadata.ownerReferences ?? []).find((r: Obj) => r.kind === 'Job');
        if (c.type === 'MODIFIED' && owner && c.old?.status?.phase !== o.status?.phase)
          this.enqueue({ ns, job: owner.name, event: o.status?.phase === 'Unknown' ? 'Unknown' : '' });
        return this.scheduler.schedule();
      }
      case 'queues':
        if (c.type === 'ADDED' && !o.status?.state)
          setImmediate(() =>
            this.cluster.store.mutate(
              QUEUES,
              undefined,
              o.metadata.name,
              (q) => void ((q.status ??= {}).state = 'Open'),
            ),
          );
        if (c.type !== 'DELETED' && JSON.stringify(c.old?.spec) !== JSON.stringify(o.spec))
          this.scheduler.schedule();
        return;
    }
  }

  private taskCompleted(ns: string, jobName: string, task: string): boolean {
    const job = this.cluster.store.get(JOBS, ns, jobName);
    const replicas = (job?.spec?.tasks ?? []).find((t: Obj) => t.name === task)?.replicas ?? 0;
    if (!job || replicas <= 0) return false;
    const done = this.podsOf(job).filter(
      (p) => p.metadata.annotations?.['volcano.sh/task-spec'] === task && p.status?.phase === 'Succeeded',
    );
    return done.length >= replicas;
  }

  private enqueue(r: Req): void {
    if (this.closed) return;
    const key = `${r.ns}/${r.job}`;
    this.reqs.set(key, [...(this.reqs.get(key) ?? []), r]);
    if (this.draining) return;
    this.draining = true;
    setImmediate(() => this.drain());
  }

  private drain(): void {
    this.draining = false;
    for (let round = 0; round < 50 && this.reqs.size && !this.closed; round++) {
      const batch = [...this.reqs.entries()];
      this.reqs.clear();
      for (const [key, list] of batch)
        for (const r of list)
          guarded(`volcano request ${r.event || 'sync'} for job ${key}`, () => this.process(r));
    }
    if (this.reqs.size && !this.closed) {
      this.draining = true;
      setImmediate(() => this.drain());
    }
  }

  private process(req: Req): void {
    const job = this.cluster.store.get(JOBS, req.ns, req.job);
    if (!job || job.metadata.deletionTimestamp) return;
    const { action, delayMs } = this.applyPolicies(job, req);
    if (delayMs) {
      const t = setTimeout(() => {
        this.timers.delete(t);
        this.enqueue({ ...req, action });
      }, delayMs);
      this.timers.add(t);
      return;
    }
    this.execute(job, action, req);
  }

  /** applyPolicies (job_controller_util.go): the action for a request. */
  private applyPolicies(job: Obj, req: Req): { action: string; delayMs?: number } {
    if (req.action) return { action: req.action };
    if (['OutOfSync', 'CommandIssued', 'PodRunning'].includes(req.event)) return { action: 'SyncJob' };
    if (req.jobUid && req.jobUid !== job.metadata.uid) return { action: 'SyncJob' };
    if (req.version !== undefined && req.version < (job.status?.version ?? 0)) return { action: 'SyncJob' };
    const match = (policies: Obj[] | undefined) => {
      for (const p of policies ?? []) {
        const events: string[] = [...(p.events ?? []), ...(p.event ? [p.event] : [])];
        const hit = events.length && req.event && (events.includes(req.event) || events.includes('*'));
        if (hit && (req.event !== 'PodPending' || p.timeout)) return p;
        if (p.exitCode !== undefined && p.exitCode === (req.exitCode ?? 0)) return p;
      }
      return undefined;
    };
    const task = req.task ? (job.spec.tasks ?? []).find((t: Obj) => t.name === req.task) : undefined;
    const p = match(task?.policies) ?? match(job.spec.policies);
    if (!p) return { action: 'SyncJob' };
    return { action: p.action, ...(p.timeout ? { delayMs: parseDuration(p.timeout) } : {}) };
  }

  /** The state machine (pkg/controllers/job/state). */
  private execute(job: Obj, action: string, req: Req): void {
    const phase = job.status?.state?.phase || 'Pending';
    const to =
      (p: string, retry = false): Update =>
      (s) => {
        if (retry) s.retryCount = (s.retryCount ?? 0) + 1;
        s.state.phase = p;
        return true;
      };
    const whenIdle =
      (p: string): Update =>
      (s) => {
        if (s.terminating || s.pending || s.running) return false;
        s.state.phase = p;
        return true;
      };
    const target = (): Target =>
      action === 'RestartTask'
        ? { type: 'task', task: req.task! }
        : { type: 'pod', task: req.task!, pod: req.pod };
    const killers: Record<string, () => void> = {
      RestartJob: () => this.kill(job, [], undefined, to('Restarting', true)),
      RestartTask: () => this.kill(job, [], target(), to('Restarting', true)),
      RestartPod: () => this.kill(job, [], target(), to('Restarting', true)),
      AbortJob: () => this.kill(job, SOFT, undefined, to('Aborting')),
      TerminateJob: () => this.kill(job, SOFT, undefined, to('Terminating')),
      CompleteJob: () => this.kill(job, SOFT, undefined, to('Completing')),
    };
    switch (phase) {
      case 'Pending':
      case 'Running':
        if (killers[action]) return killers[action]();
        return this.sync(
          job,
          phase === 'Pending' ? (s) => this.pendingUpdate(job, s) : (s) => this.runningUpdate(job, s),
        );
      case 'Restarting': {
        const upd: Update = (s) => {
          if ((s.retryCount ?? 0) >= job.spec.maxRetry) return to('Failed')(s);
          const total = (job.spec.tasks ?? []).reduce((n: number, t: Obj) => n + (t.replicas ?? 0), 0);
          return total - (s.terminating ?? 0) >= (s.minAvailable ?? job.spec.minAvailable)
            ? to('Pending')(s)
            : false;
        };
        if (action === 'SyncJob') return this.sync(job, upd);
        if (action === 'RestartTask' || action === 'RestartPod') return this.kill(job, [], target(), upd);
        return this.kill(job, [], undefined, upd);
      }
      case 'Aborting':
        if (action === 'ResumeJob') return this.kill(job, SOFT, undefined, to('Restarting', true));
        return this.kill(job, SOFT, undefined, whenIdle('Aborted'));
      case 'Aborted':
        if (action === 'ResumeJob') return this.kill(job, SOFT, undefined, to('Restarting', true));
        return this.kill(job, SOFT, undefined);
      case 'Terminating':
        return this.kill(job, SOFT, undefined, whenIdle('Terminated'));
      case 'Completing':
        return this.kill(job, SOFT, undefined, whenIdle('Completed'));
      default:
        return this.kill(job, SOFT, undefined);
    }
  }

  private pendingUpdate(job: Obj, s: Obj): boolean {
    const held = this.held.has(`${job.metadata.namespace}/${job.metadata.name}`) && (s.pending ?? 0) > 0;
    if (job.spec.minAvailable <= (s.running ?? 0) + (s.succeeded ?? 0) + (s.failed ?? 0) || held) {
      s.state.phase = 'Running';
      return true;
    }
    return false;
  }

  private runningUpdate(job: Obj, s: Obj): boolean {
    const total = (job.spec.tasks ?? []).reduce((n: number, t: Obj) => n + (t.replicas ?? 0), 0);
    if (!total) return false;
    const succeeded = s.succeeded ?? 0;
    const failed = s.failed ?? 0;
    if (job.spec.minSuccess !== undefined && succeeded >= job.spec.minSuccess) {
      s.state.phase = 'Completed';
      return true;
    }
    if (succeeded + failed === total) {
      const taskMin = (job.spec.tasks ?? []).reduce(
        (n: number, t: Obj) => n + (t.minAvailable ?? t.replicas),
        0,
      );
      let phase = succeeded >= job.spec.minAvailable ? 'Completed' : 'Failed';
      if (job.spec.minAvailable >= taskMin)
        for (const t of job.spec.tasks ?? [])
          if (
            t.minAvailable !== undefined &&
            s.taskStatusCount?.[t.name] &&
            (s.taskStatusCount[t.name].phase?.Succeeded ?? 0) < t.minAvailable
          )
            phase = 'Failed';
      if (job.spec.minSuccess !== undefined && succeeded < job.spec.minSuccess) phase = 'Failed';
      s.state.phase = phase;
      return true;
    }
    if (
      (s.pending ?? 0) > total - job.spec.minAvailable &&
      !this.held.has(`${job.metadata.namespace}/${job.metadata.name}`)
    ) {
      s.state.phase = 'Pending';
      return true;
    }
    return false;
  }

  // ---- SyncJob / KillJob ----

  private podsOf(job: Obj): Obj[] {
    return this.cluster.store
      .list(PODS, job.metadata.namespace)
      .filter((p) => (p.metadata.ownerReferences ?? []).some((r: Obj) => r.uid === job.metadata.uid));
  }

  private pgName = podGroupName;

  /** syncJob (job_controller_actions.go). */
  private sync(jobIn: Obj, update: Update): void {
    const queue = this.cluster.store.get(QUEUES, undefined, jobIn.spec.queue);
    if (!queue) return;
    let job = jobIn;
    const phase = job.status?.state?.phase;
    if (!phase || phase === 'Pending') job = this.initiate(job);
    else this.pluginsOnUpdate(job);
    this.ensurePodGroup(job);
    const pg = this.cluster.store.get(PODGROUPS, job.metadata.namespace, this.pgName(job));
    const status = clone(job.status);
    if (!pg?.status?.phase || pg.status.phase === 'Pending') {
      update(status);
      return this.writeStatus(job, status);
    }
    const counts = { pending: 0, running: 0, succeeded: 0, failed: 0, unknown: 0, terminating: 0 };
    const taskStatusCount: Obj = {};
    const existing = new Map(this.podsOf(job).map((p) => [p.metadata.name, p]));
    for (const t of job.spec.tasks ?? []) {
      for (let i = 0; i < (t.replicas ?? 0); i++) {
        const name = `${job.metadata.name}-${t.name}-${i}`;
        let pod = existing.get(name);
        existing.delete(name);
        if (!pod) {
          try {
            pod = this.cluster.create(PODS, job.metadata.namespace, newJobPod(job, t, i));
          } catch {
            continue; // AlreadyExists (a pod of another job by that name): volcano skips it too.
          }
        } else if (pod.metadata.deletionTimestamp) {
          counts.terminating++;
          continue;
        } else if (OUT_OF_SYNC in (pod.metadata.annotations ?? {})) this.cluster.deleteQuietly(pod);
        classify(pod, counts, taskStatusCount);
      }
    }
    for (const extra of existing.values()) {
      this.cluster.deleteQuietly(extra);
      counts.terminating++;
    }
    Object.assign(status, counts, { minAvailable: job.spec.minAvailable, taskStatusCount });
    update(status);
    this.writeStatus(job, status);
  }

  /** killJob / killTarget: delete the pods not retained; counts zeroed; plugins' OnJobDelete; the PodGroup goes. */
  private kill(job: Obj, retain: string[], target: Target | undefined, update?: Update): void {
    const status = clone(job.status ?? { state: {} });
    status.state ??= {};
    let terminating = 0;
    const pods = this.podsOf(job);
    let toKill: Obj[];
    if (target) {
      toKill = pods.filter(
        (p) =>
          p.metadata.annotations?.['volcano.sh/task-spec'] === target.task &&
          (target.type === 'task' || p.metadata.name === target.pod),
      );
    } else {
      status.version = (status.version ?? 0) + 1;
      const lastRetry = (status.retryCount ?? 0) >= job.spec.maxRetry - 1;
      const keep = lastRetry ? SOFT : retain;
      toKill = [];
      for (const p of pods) {
        if (p.metadata.deletionTimestamp) terminating++;
        else if (!keep.includes(p.status?.phase)) toKill.push(p);
      }
    }
    for (const p of toKill)
      this.cluster.store.mutate(
        PODS,
        p.metadata.namespace,
        p.metadata.name,
        (x) => void ((x.metadata.annotations ??= {})[OUT_OF_SYNC] = 'true'),
      );
    for (const p of toKill) {
      terminating++;
      if (!p.metadata.deletionTimestamp) this.cluster.deleteQuietly(p);
    }
    Object.assign(status, {
      pending: 0,
      running: 0,
      succeeded: 0,
      failed: 0,
      unknown: 0,
      terminating,
      taskStatusCount: {},
    });
    if (update && update(status)) this.transition(status);
    const since =
      Date.parse(status.state.lastTransitionTime ?? now()) - Date.parse(job.metadata.creationTimestamp);
    status.runningDuration = `${Math.max(0, since / 1000)}s`;
    this.pluginsOnDelete(job, status);
    this.cluster.store.mutate(
      JOBS,
      job.metadata.namespace,
      job.metadata.name,
      (j) => void (j.status = status),
    );
    if (!target) {
      const pg = this.cluster.store.get(PODGROUPS, job.metadata.namespace, this.pgName(job));
      if (pg) this.cluster.deleteQuietly(pg);
    }
  }

  private transition(status: Obj): void {
    status.state.lastTransitionTime = now();
    status.conditions = [
      ...(status.conditions ?? []),
      { status: status.state.phase, lastTransitionTime: status.state.lastTransitionTime },
    ];
  }

  private writeStatus(job: Obj, status: Obj): void {
    const cur = this.cluster.store.get(JOBS, job.metadata.namespace, job.metadata.name);
    if (!cur || cur.metadata.uid !== job.metadata.uid) return;
    const before = JSON.stringify(cur.status);
    if (JSON.stringify(status) === before) return;
    if (status.state?.phase !== cur.status?.state?.phase) this.transition(status);
    this.cluster.store.mutate(
      JOBS,
      job.metadata.namespace,
      job.metadata.name,
      (j) => void (j.status = status),
    );
  }

  /** initiateJob: status Pending, plugins' OnJobAdd, the PodGroup. Returns the job as stored. */
  private initiate(job: Obj): Obj {
    const ns = job.metadata.namespace;
    let cur = job;
    if (!job.status?.state?.phase) {
      const t = now();
      cur = this.cluster.store.mutate(JOBS, ns, job.metadata.name, (j) => {
        j.status = {
          ...(j.status ?? {}),
          state: { phase: 'Pending', lastTransitionTime: t },
          minAvailable: j.spec.minAvailable,
          conditions: [{ status: 'Pending', lastTransitionTime: t }],
          controlledResources: {},
        };
      })!;
    }
    const controlled = { ...(cur.status.controlledResources ?? {}) };
    for (const name of Object.keys(cur.spec.plugins ?? {})) {
      if (!['svc', 'env'].includes(name) || controlled[`plugin-${name}`] === name) continue;
      if (name === 'svc') {
        this.upsertConfigMap(cur);
        this.createQuietly(defOf('services'), ns, {
          metadata: { name: cur.metadata.name, ownerReferences: [controllerRef(cur)] },
          spec: {
            clusterIP: 'None',
            selector: { 'volcano.sh/job-name': cur.metadata.name, 'volcano.sh/job-namespace': ns },
            publishNotReadyAddresses: false,
          },
        });
      }
      controlled[`plugin-${name}`] = name;
    }
    if (JSON.stringify(controlled) !== JSON.stringify(cur.status.controlledResources ?? {}))
      cur = this.cluster.store.mutate(
        JOBS,
        ns,
        cur.metadata.name,
        (j) => void (j.status.controlledResources = controlled),
      )!;
    return cur;
  }

  private pluginsOnUpdate(job: Obj): void {
    if ('svc' in (job.spec.plugins ?? {})) this.upsertConfigMap(job);
  }

  private pluginsOnDelete(job: Obj, status: Obj): void {
    const c = (status.controlledResources ??= {});
    if (c['plugin-svc'] === 'svc') {
      const ns = job.metadata.namespace;
      for (const [res, name] of [
        ['configmaps', `${job.metadata.name}-svc`],
        ['services', job.metadata.name],
      ] as const) {
        const o = this.cluster.store.get(defOf(res), ns, name);
        if (o) this.cluster.deleteQuietly(o);
      }
      delete c['plugin-svc'];
    }
    if (c['plugin-env'] === 'env') delete c['plugin-env'];
  }

  /** The svc plugin's ConfigMap (GenerateHosts). */
  private upsertConfigMap(job: Obj): void {
    const data = svcHosts(job);
    const ns = job.metadata.namespace;
    const name = `${job.metadata.name}-svc`;
    if (this.cluster.store.get(defOf('configmaps'), ns, name))
      this.cluster.store.mutate(defOf('configmaps'), ns, name, (cm) => void (cm.data = data));
    else
      this.createQuietly(defOf('configmaps'), ns, {
        metadata: { name, ownerReferences: [controllerRef(job)] },
        data,
      });
  }

  private createQuietly(d: ReturnType<typeof defOf>, ns: string, body: Obj): void {
    try {
      this.cluster.create(d, ns, body, { internal: true });
    } catch {
      // Exists already.
    }
  }

  /** createOrUpdatePodGroup */
  private ensurePodGroup(job: Obj): void {
    const ns = job.metadata.namespace;
    const name = this.pgName(job);
    const minTaskMember: Record<string, number> = {};
    for (const t of job.spec.tasks ?? []) minTaskMember[t.name] = t.minAvailable ?? t.replicas;
    const spec = {
      minMember: job.spec.minAvailable,
      minTaskMember,
      queue: job.spec.queue,
      minResources: this.minResources(job),
    };
    const pg = this.cluster.store.get(PODGROUPS, ns, name);
    if (!pg) {
      this.createQuietly(PODGROUPS, ns, {
        metadata: {
          name,
          ...(job.metadata.labels ? { labels: job.metadata.labels } : {}),
          ...(job.metadata.annotations ? { annotations: job.metadata.annotations } : {}),
          ownerReferences: [controllerRef(job)],
        },
        spec,
        status: { phase: 'Pending' },
      });
      this.scheduler.schedule();
    } else if (
      pg.spec.minMember !== spec.minMember ||
      JSON.stringify(pg.spec.minResources) !== JSON.stringify(spec.minResources)
    )
      this.cluster.store.mutate(PODGROUPS, ns, name, (p) => void Object.assign(p.spec, spec));
  }

  /** The resources of the job's first minAvailable pods, in task order. */
  private minResources(job: Obj): Record<string, string> {
    const sum: Record<string, number> = {};
    let left = job.spec.minAvailable;
    for (const t of job.spec.tasks ?? [])
      for (let i = 0; i < (t.replicas ?? 0) && left > 0; i++, left--) add(sum, podRequests(t.template?.spec));
    return Object.fromEntries(Object.entries(sum).map(([k, v]) => [k, formatQuantity(v, k)]));
  }

  // ---- TTL ----

  private armTtl(job: Obj): void {
    const key = `${job.metadata.namespace}/${job.metadata.name}`;
    const ttl = job.spec?.ttlSecondsAfterFinished;
    if (ttl === undefined || !FINISHED.includes(job.status?.state?.phase) || this.ttl.has(key) || this.closed)
      return;
    const at = Date.parse(job.status.state.lastTransitionTime ?? now()) + ttl * 1000;
    const uid = job.metadata.uid;
    this.ttl.set(
      key,
      setTimeout(
        () => {
          this.ttl.delete(key);
          const cur = this.cluster.store.get(JOBS, job.metadata.namespace, job.metadata.name);
          if (cur && cur.metadata.uid === uid && FINISHED.includes(cur.status?.state?.phase))
            this.cluster.deleteQuietly(cur, 'Foreground');
        },
        Math.max(0, at - Date.now()),
      ),
    );
  }
}

function classify(pod: Obj, counts: Record<string, number>, tsc: Obj): void {
  const phase: string = pod.status?.phase ?? 'Pending';
  const key =
    (
      { Pending: 'pending', Running: 'running', Succeeded: 'succeeded', Failed: 'failed' } as Record<
        string,
        string
      >
    )[phase] ?? 'unknown';
  counts[key] = (counts[key] ?? 0) + 1;
  const task = pod.metadata.annotations?.['volcano.sh/task-spec'];
  if (!task) return;
  const t = (tsc[task] ??= { phase: {} });
  const ph = ['Pending', 'Running', 'Succeeded', 'Failed'].includes(phase) ? phase : 'Unknown';
  t.phase[ph] = (t.phase[ph] ?? 0) + 1;
}

/** A Go duration ("1m30s", "500ms", "2h") in milliseconds. */
function parseDuration(s: string): number {
  const units: Record<string, number> = {
    ns: 1e-6,
    us: 1e-3,
    µs: 1e-3,
    ms: 1,
    s: 1000,
    m: 60_000,
    h: 3_600_000,
  };
  let ms = 0;
  for (const m of String(s).matchAll(/([\d.]+)(ns|us|µs|ms|s|m|h)/g)) ms += Number(m[1]) * units[m[2]!]!;
  return ms;
}
