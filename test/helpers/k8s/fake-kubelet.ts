/**
 * The fake kubelet of the fake Kubernetes API server (fake-k8s.ts), plus the default scheduler:
 * one node, `fake-node`, whose "containers" are local processes.
 *
 * A pod bound to the node (spec.nodeName) gets its first container started as
 * `unshare --mount --uts --propagation private -- sh -c SETUP sh …`: in its own mount and UTS
 * namespaces the fixed SETUP script (every value passed as a positional argument, never pasted
 * into the script) bind-mounts the pod's volumes at their real mountPaths (mkdir -p first), a
 * per-pod /etc/hosts, sets the hostname (spec.hostname, else the pod name), cd's to workingDir and
 * `exec`s the command; so the process the kubelet signals is the container's main process. Its
 * stdout and stderr go to a per-container, per-run log file (`pods/NAME/log`). Environment,
 * volumes and /etc/hosts: fake-kubelet-config.ts. Mount points that did not exist on the host are
 * created there (empty) and removed again when no running pod needs them.
 *
 * Faithful: container statuses (waiting ContainerCreating / CreateContainerConfigError with the
 * kubelet's message, retried when secrets or configmaps change; running.startedAt;
 * terminated.exitCode and reason Completed|Error, a signal death as 128+n), pod phases and
 * conditions, podIP/hostIP 127.0.0.1, restartPolicy (Never; OnFailure and Always restart with
 * CrashLoopBackOff delays 10 s·2ⁿ), graceful stop (SIGTERM to the main process, the grace period,
 * SIGKILL to its process group; whatever is left in the group, or carries the pod's mark in its
 * environment (a process that left the group), is killed when the main process ends, as a
 * container's cgroup is), a pod being deleted turning Succeeded/Failed before it goes (as
 * kubelets since 1.27 do), eviction (phase Failed, reason Evicted, a DisruptionTarget condition,
 * the pod kept), logs (`container`, `tailLines`, `follow` until the process exits, `previous`), an
 * unknown PVC keeping the pod Pending (PodScheduled False: `persistentvolumeclaim "x" not found`).
 * Simplified: the image is recorded, never pulled — every image runs the host's binaries, and a
 * container with neither command nor args cannot run (exit 127); only the first container runs
 * (initContainers and sidecars are ignored); no PID or network namespace (pods share the host's
 * network and PIDs, so the main process is not PID 1 and dies of SIGTERM without a handler); no
 * probes, no resource limits enforced, log lines carry no timestamps.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { open } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { constants } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster } from './fake-k8s-api.js';
import { ConfigError, NODE_NAME, PodConfig, podDir, POD_IP } from './fake-kubelet-config.js';
import { apiError, badRequest, defOf, expandVars, guarded, now, type Obj } from './fake-k8s-store.js';

/** How long after a deleted pod's container stopped the pod is removed. */
const FINAL_DELETE_MS = 200;

/** Mounts (4 args each: kind src dst opt), then the hostname, /etc/hosts, workingDir, and exec. */
const SETUP = `set -e
hn=$1; hosts=$2; wd=$3; n=$4; shift 4
while [ "$n" -gt 0 ]; do
  kind=$1; src=$2; dst=$3; opt=$4; shift 4; n=$((n - 1))
  if [ "$kind" = file ]; then
    if [ ! -e "$dst" ]; then mkdir -p "$(dirname "$dst")"; : > "$dst"; fi
  else
    mkdir -p "$dst"
  fi
  if [ "$kind" = tmpfs ]; then
    if [ -n "$opt" ]; then mount -t tmpfs -o "size=$opt" tmpfs "$dst"; else mount -t tmpfs tmpfs "$dst"; fi
  else
    mount --bind "$src" "$dst"
    if [ "$opt" = ro ]; then mount -o remount,bind,ro "$dst"; fi
  fi
done
mount --bind "$hosts" /etc/hosts
hostname "$hn"
if [ -n "$wd" ]; then mkdir -p "$wd"; cd "$wd"; fi
exec "$@"`;

interface Running {
  uid: string;
  ns: string;
  name: string;
  container: string;
  restart: number;
  child: ChildProcess;
  pid: number;
  startedAt: string;
  containerID: string;
  /** The container's environment: what an exec'd command gets too. */
  env: Record<string, string>;
  exited: Promise<void>;
  /** Mount points (and workingDir) that did not exist on the host: removed when no pod needs them. */
  paths: string[];
  stopping?: Promise<void>;
  evicting?: boolean;
}

export { NODE_NAME };

export interface KubeletOptions {
  dir: string;
  pvcs: Record<string, string>;
}

/** The node's kubelet and the default scheduler. */
export class FakeKubelet {
  private readonly running = new Map<string, Running>();
  private readonly held = new Set<string>();
  private readonly backoff = new Map<string, NodeJS.Timeout>();
  private readonly queued = new Set<string>();
  /** Pods whose container stopped for their deletion, to be removed in FINAL_DELETE_MS. */
  private readonly finishing = new Set<string>();
  private readonly followers = new Set<ServerResponse>();
  /** Host paths the SETUP script creates (mount points), and the pods that need each. */
  private readonly made = new Map<string, Set<string>>();
  private closed = false;
  private readonly config: PodConfig;

  constructor(
    private readonly cluster: Cluster,
    private readonly opts: KubeletOptions,
  ) {
    this.config = new PodConfig(cluster.store, opts);
    cluster.store.subscribe((c) => {
      if (c.def.resource === 'pods') this.queue(c.object.metadata.namespace, c.object.metadata.name);
      else if (c.def.resource === 'secrets' || c.def.resource === 'configmaps' || c.def.resource === 'jobs')
        for (const p of cluster.store.list(defOf('pods'), c.object.metadata.namespace))
          if (p.status?.phase === 'Pending' && p.spec.nodeName)
            this.queue(p.metadata.namespace, p.metadata.name);
    });
  }

  /** The reason a pod cannot be scheduled (an unknown PVC), or undefined. */
  unschedulable(pod: Obj): string | undefined {
    for (const v of pod.spec?.volumes ?? [])
      if (
        v.persistentVolumeClaim &&
        !this.opts.pvcs[`${pod.metadata.namespace}/${v.persistentVolumeClaim.claimName}`]
      )
        return `0/1 nodes are unavailable: persistentvolumeclaim "${v.persistentVolumeClaim.claimName}" not found.`;
    return undefined;
  }

  /** Binds a pod to the node (or records why it cannot be). True when bound. */
  bind(pod: Obj): boolean {
    const why = this.unschedulable(pod);
    this.patchPod(pod, (p) => {
      if (why) {
        setCondition(p, 'PodScheduled', 'False', 'Unschedulable', why);
        return;
      }
      p.spec.nodeName = NODE_NAME;
      setCondition(p, 'PodScheduled', 'True');
    });
    return !why;
  }

  hold(ns: string, job: string): void {
    this.held.add(`${ns}/${job}`);
  }

  release(ns: string, job: string): void {
    this.held.delete(`${ns}/${job}`);
    for (const p of this.cluster.store.list(defOf('pods'), ns))
      if (p.metadata.labels?.['volcano.sh/job-name'] === job) this.queue(ns, p.metadata.name);
  }

  /**
   * The running container an exec or port-forward reaches (`container` defaults to the only one):
   * its main process and environment; otherwise the kubelet's refusal, which kubectl prints.
   */
  runningContainer(
    ns: string,
    name: string,
    container?: string,
  ): { pid: number; env: Record<string, string>; uid: string } {
    const pod = this.cluster.store.must(defOf('pods'), ns, name);
    const names: string[] = (pod.spec.containers ?? []).map((c: Obj) => c.name);
    const c = container || (names.length === 1 ? names[0]! : undefined);
    if (!c)
      throw badRequest(
        `a container name must be specified for pod ${name}, choose one of: [${names.join(' ')}]`,
      );
    if (!names.includes(c)) throw badRequest(`container ${c} is not valid for pod ${name}`);
    const r = this.running.get(pod.metadata.uid);
    if (!r || r.container !== c || r.stopping) throw badRequest(`container not found ("${c}")`);
    return { pid: r.pid, env: r.env, uid: r.uid };
  }

  livePids(): number[] {
    return [...this.running.values()].map((r) => r.pid);
  }

  /** Kubelet eviction: SIGTERM, grace, SIGKILL; the pod ends Failed/Evicted and stays. */
  async evict(ns: string, name: string): Promise<void> {
    const pod = this.cluster.store.get(defOf('pods'), ns, name);
    const r = pod && this.running.get(pod.metadata.uid);
    if (!pod || !r) throw new Error(`fake kubelet: pod ${ns}/${name} is not running`);
    r.evicting = true;
    await this.stop(r, pod.spec.terminationGracePeriodSeconds ?? 30);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.backoff.values()) clearTimeout(t);
    for (const f of this.followers) f.end();
    for (const r of this.running.values()) {
      killGroup(r.pid, 'SIGKILL');
      killMarked(r.uid);
    }
    await Promise.race([Promise.all([...this.running.values()].map((r) => r.exited)), sleep(5000)]);
  }

  private queue(ns: string, name: string): void {
    const k = `${ns}/${name}`;
    if (this.queued.has(k) || this.closed) return;
    this.queued.add(k);
    setImmediate(() => {
      this.queued.delete(k);
      if (!this.closed) guarded(`kubelet sync of pod ${k}`, () => this.sync(ns, name));
    });
  }

  private sync(ns: string, name: string): void {
    const pod = this.cluster.store.get(defOf('pods'), ns, name);
    for (const r of this.running.values())
      if (r.ns === ns && r.name === name && r.uid !== pod?.metadata.uid) void this.stop(r, 0);
    if (!pod) return;
    const r = this.running.get(pod.metadata.uid);
    if (pod.metadata.deletionTimestamp) {
      if (r) void this.stop(r, pod.metadata.deletionGracePeriodSeconds ?? 30);
      else if (!this.finishing.has(pod.metadata.uid))
        this.cluster.finishPodDeletion(ns, name, pod.metadata.uid);
      return;
    }
    if (!pod.spec.nodeName) {
      const scheduled = pod.status?.conditions?.some((c: Obj) => c.type === 'PodScheduled');
      if (pod.spec.schedulerName !== 'volcano' && !scheduled) this.bind(pod);
      return;
    }
    if (r || ['Succeeded', 'Failed'].includes(pod.status?.phase) || this.backoff.has(pod.metadata.uid))
      return;
    const job = pod.metadata.labels?.['volcano.sh/job-name'];
    if (job && this.held.has(`${ns}/${job}`)) {
      this.waiting(pod, 'ContainerCreating');
      return;
    }
    try {
      this.start(pod);
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      this.waiting(pod, e.reason, e.message);
    }
  }

  private waiting(pod: Obj, reason: string, message?: string): void {
    const c = pod.spec.containers[0];
    this.patchPod(pod, (p) => {
      const old = p.status.containerStatuses?.[0];
      p.status.containerStatuses = [
        {
          ...containerBase(c),
          restartCount: old?.restartCount ?? 0,
          ...(old?.lastState ? { lastState: old.lastState } : { lastState: {} }),
          state: { waiting: { reason, ...(message ? { message } : {}) } },
        },
      ];
      p.status.hostIP = POD_IP;
      p.status.hostIPs = [{ ip: POD_IP }];
      setCondition(p, 'PodScheduled', 'True');
    });
  }

  /** The log file of a container's run (0 = first, n = after n restarts). */
  logFile(uid: string, container: string, restart: number): string {
    return join(this.opts.dir, 'pods', uid, 'logs', container, `${restart}.log`);
  }

  private start(pod: Obj): void {
    const c = pod.spec.containers[0];
    const env = this.config.env(pod, c);
    const mounts = this.config.volumes(pod, c);
    const hostname = (pod.spec.hostname ?? pod.metadata.name).slice(0, 63);
    env.HOSTNAME = hostname;
    env[POD_MARK] = pod.metadata.uid;
    const hostsFile = join(podDir(this.opts.dir, pod), 'etc-hosts');
    // A pod without volumes has no pod dir yet.
    mkdirSync(dirname(hostsFile), { recursive: true });
    writeFileSync(hostsFile, this.config.hostsFor(pod, hostname));
    const vars = new Map(Object.entries(env));
    const argv = [...(c.command ?? []), ...(c.args ?? [])].map((a: string) => expandVars(String(a), vars));
    const restart = pod.status?.containerStatuses?.[0]?.restartCount ?? 0;
    const log = this.logFile(pod.metadata.uid, c.name, restart);
    mkdirSync(dirname(log), { recursive: true });
    const fd = openSync(log, 'a');
    const args = ['--mount', '--uts', '--propagation', 'private', '--', 'sh', '-c', SETUP, 'sh'];
    args.push(hostname, hostsFile, c.workingDir ?? '', String(mounts.length), ...mounts.flat());
    if (argv.length) args.push(...argv);
    else
      args.push(
        'sh',
        '-c',
        'echo "fake kubelet: the container has no command; images are not run" >&2; exit 127',
      );
    const paths = this.claimPaths(pod.metadata.uid, [
      ...mounts.map((m) => m[2]!),
      ...(c.workingDir ? [c.workingDir] : []),
    ]);
    const child = spawn('unshare', args, { env, detached: true, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    const startedAt = now();
    const r: Running = {
      uid: pod.metadata.uid,
      ns: pod.metadata.namespace,
      name: pod.metadata.name,
      container: c.name,
      restart,
      child,
      pid: child.pid ?? -1,
      startedAt,
      containerID: `containerd://${randomBytes(32).toString('hex')}`,
      env,
      paths,
      exited: new Promise<void>((resolve) => {
        child.once('error', (e) => {
          writeFileSync(log, `fake kubelet: ${String(e)}\n`, { flag: 'a' });
          guarded(`kubelet exit of ${r.name}`, () => this.exited(r, 128, null));
          resolve();
        });
        child.once('exit', (code, signal) => {
          guarded(`kubelet exit of ${r.name}`, () => this.exited(r, code, signal));
          resolve();
        });
      }),
    };
    if (child.pid === undefined) return this.releasePaths(r);
    this.running.set(r.uid, r);
    this.patchPod(pod, (p) => {
      p.status.phase = 'Running';
      p.status.hostIP = POD_IP;
      p.status.hostIPs = [{ ip: POD_IP }];
      p.status.podIP = POD_IP;
      p.status.podIPs = [{ ip: POD_IP }];
      p.status.startTime ??= startedAt;
      const old = p.status.containerStatuses?.[0];
      p.status.containerStatuses = [
        {
          ...containerBase(c),
          containerID: r.containerID,
          ready: true,
          started: true,
          restartCount: restart,
          lastState: old?.lastState ?? {},
          state: { running: { startedAt } },
        },
      ];
      for (const t of [
        'PodReadyToStartContainers',
        'Initialized',
        'Ready',
        'ContainersReady',
        'PodScheduled',
      ])
        setCondition(p, t, 'True');
    });
  }

  /** The container ended: terminal phase, restart, or (being deleted) the pod goes. */
  private exited(r: Running, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.running.get(r.uid) !== r) return;
    this.running.delete(r.uid);
    killGroup(r.pid, 'SIGKILL');
    killMarked(r.uid);
    this.releasePaths(r);
    const pod = this.cluster.store.get(defOf('pods'), r.ns, r.name);
    if (!pod || pod.metadata.uid !== r.uid || this.closed) return;
    const exitCode = code ?? 128 + (signal ? (constants.signals[signal] ?? 9) : 9);
    const terminated = {
      exitCode,
      reason: exitCode === 0 ? 'Completed' : 'Error',
      startedAt: r.startedAt,
      finishedAt: now(),
      containerID: r.containerID,
    };
    const policy = pod.spec.restartPolicy ?? 'Always';
    const deleting = !!pod.metadata.deletionTimestamp;
    const restarts =
      !r.evicting && !deleting && (policy === 'Always' || (policy === 'OnFailure' && exitCode !== 0));
    this.patchPod(pod, (p) => {
      const cs = p.status.containerStatuses?.[0] ?? containerBase(pod.spec.containers[0]);
      if (restarts) {
        cs.restartCount = r.restart + 1;
        cs.lastState = { terminated };
        cs.state = {
          waiting: {
            reason: 'CrashLoopBackOff',
            message: `back-off restarting failed container ${r.container} in pod ${r.name}_${r.ns}(${r.uid})`,
          },
        };
        cs.ready = false;
        cs.started = false;
        for (const t of ['Ready', 'ContainersReady'])
          setCondition(
            p,
            t,
            'False',
            'ContainersNotReady',
            `containers with unready status: [${r.container}]`,
          );
      } else {
        cs.state = { terminated };
        cs.ready = false;
        cs.started = false;
        p.status.phase = exitCode === 0 && !r.evicting ? 'Succeeded' : 'Failed';
        const why = p.status.phase === 'Succeeded' ? 'PodCompleted' : 'PodFailed';
        for (const t of ['Ready', 'ContainersReady']) setCondition(p, t, 'False', why);
        setCondition(p, 'PodReadyToStartContainers', 'False');
        if (r.evicting) {
          const message = 'The node was low on resource: memory. ';
          p.status.reason = 'Evicted';
          p.status.message = message;
          setCondition(p, 'DisruptionTarget', 'True', 'TerminationByKubelet', message);
        }
      }
      p.status.containerStatuses = [cs];
    });
    // The real kubelet's status manager takes a moment to send the final delete: without it,
    // `kubectl delete pod` could miss the deletion of a pod a controller recreates at once.
    if (deleting) {
      this.finishing.add(r.uid);
      setTimeout(() => {
        this.finishing.delete(r.uid);
        this.cluster.finishPodDeletion(r.ns, r.name, r.uid);
      }, FINAL_DELETE_MS);
    } else if (restarts) {
      const delay = r.restart === 0 ? 0 : Math.min(10_000 * 2 ** (r.restart - 1), 300_000);
      this.backoff.set(
        r.uid,
        setTimeout(() => {
          this.backoff.delete(r.uid);
          this.queue(r.ns, r.name);
        }, delay),
      );
    }
  }

  /** Records the host paths that `mkdir -p` of these mount points will create, for this pod. */
  private claimPaths(uid: string, targets: string[]): string[] {
    const out = new Set<string>();
    for (const t of targets)
      for (let p = t; p !== '/' && p !== '.' && (!existsSync(p) || this.made.has(p)); p = dirname(p))
        out.add(p);
    for (const p of out) this.made.set(p, (this.made.get(p) ?? new Set()).add(uid));
    return [...out];
  }

  /** Removes the mount points no live pod needs any more (empty dirs and files only), deepest first. */
  private releasePaths(r: Running): void {
    for (const p of [...r.paths].sort((a, b) => b.length - a.length)) {
      const users = this.made.get(p);
      users?.delete(r.uid);
      if (users?.size) continue;
      this.made.delete(p);
      try {
        if (statSync(p).isDirectory()) rmdirSync(p);
        else if (statSync(p).size === 0) unlinkSync(p);
      } catch {
        // Not empty, or gone: left as it is.
      }
    }
  }

  /** SIGTERM to the main process, `graceSec`, then SIGKILL to its group; resolves when it is gone. */
  private stop(r: Running, graceSec: number): Promise<void> {
    r.stopping ??= (async () => {
      try {
        process.kill(r.pid, graceSec > 0 ? 'SIGTERM' : 'SIGKILL');
      } catch {
        // Gone already.
      }
      const timer = setTimeout(() => killGroup(r.pid, 'SIGKILL'), graceSec * 1000);
      await r.exited;
      clearTimeout(timer);
    })();
    return r.stopping;
  }

  /** Edits the stored pod if it is still the same pod (same uid). */
  private patchPod(pod: Obj, fn: (p: Obj) => void): void {
    const cur = this.cluster.store.get(defOf('pods'), pod.metadata.namespace, pod.metadata.name);
    if (!cur || cur.metadata.uid !== pod.metadata.uid) return;
    this.cluster.store.mutate(defOf('pods'), pod.metadata.namespace, pod.metadata.name, (p) => {
      p.status ??= {};
      fn(p);
    });
  }

  // ---- logs ----

  /** GET pods/NAME/log: `container`, `tailLines`, `follow`, `previous`. */
  async serveLog(ns: string, name: string, q: Record<string, string>, res: ServerResponse): Promise<void> {
    const pod = this.cluster.store.must(defOf('pods'), ns, name);
    const names: string[] = (pod.spec.containers ?? []).map((c: Obj) => c.name);
    const container = q.container || (names.length === 1 ? names[0]! : undefined);
    if (!container)
      throw badRequest(
        `a container name must be specified for pod ${name}, choose one of: [${names.join(' ')}]`,
      );
    if (!names.includes(container)) throw badRequest(`container ${container} is not valid for pod ${name}`);
    const cs = (pod.status?.containerStatuses ?? []).find((s: Obj) => s.name === container);
    const restarts: number = cs?.restartCount ?? 0;
    const previous = q.previous === 'true';
    if (previous && restarts === 0)
      throw badRequest(`previous terminated container "${container}" in pod "${name}" not found`);
    const run = previous ? restarts - 1 : restarts;
    const file = this.logFile(pod.metadata.uid, container, run);
    if (!existsSync(file)) {
      if (cs?.lastState?.terminated && !previous)
        return this.serveLogFile(res, this.logFile(pod.metadata.uid, container, run - 1), q, () => false);
      throw badRequest(
        `container "${container}" in pod "${name}" is waiting to start: ${cs?.state?.waiting?.reason ?? 'ContainerCreating'}`,
      );
    }
    const live = () => {
      const r = this.running.get(pod.metadata.uid);
      return !!r && r.restart === run && !this.closed;
    };
    return this.serveLogFile(res, file, q, q.follow === 'true' && !previous ? live : () => false);
  }

  private async serveLogFile(
    res: ServerResponse,
    file: string,
    q: Record<string, string>,
    live: () => boolean,
  ): Promise<void> {
    if (!existsSync(file))
      throw apiError(404, 'NotFound', 'the server could not find the requested resource', {});
    let text = readFileSync(file, 'utf8');
    let offset = Buffer.byteLength(text);
    if (q.tailLines !== undefined) {
      const n = Number(q.tailLines);
      const lines = text.split('\n');
      const last = lines.at(-1) === '' ? lines.pop() : undefined;
      text = n > 0 ? lines.slice(-n).join('\n') + (last === '' ? '\n' : '') : '';
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write(text);
    if (!live()) return void res.end();
    this.followers.add(res);
    let gone = false;
    res.on('close', () => (gone = true));
    const fh = await open(file, 'r');
    try {
      for (;;) {
        const ended = !live();
        const { size } = await fh.stat();
        if (size > offset) {
          const buf = Buffer.alloc(size - offset);
          await fh.read(buf, 0, buf.length, offset);
          offset = size;
          res.write(buf);
        } else if (ended || gone) break;
        else await sleep(100);
      }
    } finally {
      await fh.close();
      this.followers.delete(res);
      res.end();
    }
  }
}

function containerBase(c: Obj): Obj {
  return {
    name: c.name,
    image: c.image,
    imageID: `${c.image}@sha256:${'0'.repeat(64)}`,
    ready: false,
    started: false,
    restartCount: 0,
  };
}

function setCondition(p: Obj, type: string, status: string, reason?: string, message?: string): void {
  const conds: Obj[] = (p.status.conditions ??= []);
  const i = conds.findIndex((x) => x.type === type);
  const c = conds[i];
  const next = {
    type,
    status,
    lastProbeTime: null,
    lastTransitionTime: now(),
    ...(reason ? { reason } : {}),
    ...(message ? { message } : {}),
  };
  if (!c) conds.push(next);
  else if (c.status !== status || c.reason !== reason || c.message !== message) conds[i] = next;
}

/**
 * Every container process carries this variable, the pod's uid: how the kubelet finds the ones
 * that left the container's process group (`setsid`, as Jupyter's launcher does), which a real
 * runtime kills with the container's cgroup. One that replaced its whole environment escapes.
 */
const POD_MARK = 'FAKE_KUBELET_POD_UID';

/** SIGKILLs every process whose environment carries the pod's mark. */
function killMarked(uid: string): void {
  const mark = Buffer.from(`${POD_MARK}=${uid}\0`);
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/environ`).includes(mark)) process.kill(Number(pid), 'SIGKILL');
    } catch {
      // Gone, or not ours to read.
    }
  }
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is gone.
  }
}
