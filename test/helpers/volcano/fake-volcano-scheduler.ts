/**
 * The fake Volcano's scheduler and queue controller (see fake-volcano.ts): gang admission of
 * PodGroups against their queue's capability, binding their pods to the fake node, PodGroup and
 * Queue status.
 *
 * Faithful (to volcano's enqueue/allocate actions with the proportion plugin, as they appear from
 * outside): a PodGroup goes Pending → Inqueue when its queue is Open and capability − in use covers
 * its minResources (in use: the requests, or limits, of the queue's bound unfinished pods, plus
 * what admitted gangs have yet to bind); only resources the capability names are limited; its pods
 * are then bound (beyond minMember only if they fit); Running once minMember pods run or ran.
 * Queue status: state, allocated (cpu, memory and whatever else is requested), and counts of its
 * podgroups by phase. Simplified: one node with no capacity of its own, FIFO by creation, no
 * priorities, preemption, reclaim, deserved/guarantee or hierarchy.
 */
import type { Cluster } from '../k8s/fake-k8s-api.js';
import { defOf, formatQuantity, guarded, parseQuantity, type Obj } from '../k8s/fake-k8s-store.js';
import type { FakeKubelet } from '../k8s/fake-kubelet.js';

const SOFT = ['Succeeded', 'Failed'];
const PODS = defOf('pods');
const PODGROUPS = defOf('podgroups');
const QUEUES = defOf('queues');

/** Sums the requests (or limits) of a pod's containers. */
export function podRequests(spec: Obj): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of spec?.containers ?? []) {
    const r = { ...(c.resources?.limits ?? {}), ...(c.resources?.requests ?? {}) };
    for (const [k, v] of Object.entries(r)) out[k] = (out[k] ?? 0) + parseQuantity(v as string);
  }
  return out;
}

export const add = (a: Record<string, number>, ...bs: Record<string, number>[]) => {
  for (const b of bs) for (const [k, v] of Object.entries(b)) a[k] = (a[k] ?? 0) + v;
  return a;
};

/** The scheduler: `schedule()` asks for a pass (coalesced, on the next turn of the event loop). */
export class VolcanoScheduler {
  private scheduling = false;
  private closed = false;

  constructor(
    private readonly cluster: Cluster,
    private readonly kubelet: FakeKubelet,
  ) {}

  close(): void {
    this.closed = true;
  }

  schedule(): void {
    if (this.scheduling || this.closed) return;
    this.scheduling = true;
    setImmediate(() => {
      this.scheduling = false;
      if (!this.closed) guarded('volcano scheduler pass', () => this.pass());
    });
  }

  private pass(): void {
    const store = this.cluster.store;
    const pods = store.list(PODS).filter((p) => p.metadata.annotations?.['scheduling.k8s.io/group-name']);
    const live = (p: Obj) => !SOFT.includes(p.status?.phase);
    const pgs = store
      .list(PODGROUPS)
      .sort((a, b) => a.metadata.creationTimestamp.localeCompare(b.metadata.creationTimestamp));
    for (const q of store.list(QUEUES)) {
      const cap: Record<string, string> = q.spec?.capability ?? {};
      const qPods = pods.filter((p) => p.metadata.annotations['volcano.sh/queue-name'] === q.metadata.name);
      const pgPods = (pg: Obj) =>
        qPods.filter((p) => p.metadata.annotations['scheduling.k8s.io/group-name'] === pg.metadata.name);
      const minRes = (pg: Obj) =>
        Object.fromEntries(
          Object.entries<string>(pg.spec.minResources ?? {}).map(([k, v]) => [k, parseQuantity(v)]),
        );
      const mine = pgs.filter((x) => x.spec.queue === q.metadata.name);
      // In use: the bound, unfinished pods; and what an admitted gang has yet to bind (reserved for it).
      const used: Record<string, number> = {};
      for (const p of qPods) if (p.spec.nodeName && live(p)) add(used, podRequests(p.spec));
      for (const pg of mine) {
        if (pg.status?.phase !== 'Inqueue') continue;
        const bound = add(
          {},
          ...pgPods(pg)
            .filter((p) => p.spec.nodeName && live(p))
            .map((p) => podRequests(p.spec)),
        );
        for (const [k, v] of Object.entries(minRes(pg)))
          used[k] = (used[k] ?? 0) + Math.max(0, v - (bound[k] ?? 0));
      }
      const fits = (need: Record<string, number>) =>
        Object.entries(cap).every(([k, v]) => (used[k] ?? 0) + (need[k] ?? 0) <= parseQuantity(v) + 1e-9);
      const open = q.status?.state === 'Open';
      for (const pg of mine) {
        const bound = pgPods(pg).filter((p) => p.spec.nodeName);
        if (pg.status?.phase === 'Pending' || !pg.status?.phase) {
          const need = minRes(pg);
          if (!open || !fits(need)) continue;
          add(used, need); // reserved until its pods are bound
          store.mutate(
            PODGROUPS,
            pg.metadata.namespace,
            pg.metadata.name,
            (x) => void (x.status = { ...x.status, phase: 'Inqueue' }),
          );
          continue;
        }
        const waiting = pgPods(pg).filter(
          (p) => !p.spec.nodeName && !p.metadata.deletionTimestamp && live(p),
        );
        let gang = Math.max(0, pg.spec.minMember - bound.length);
        for (const p of waiting) {
          const need = podRequests(p.spec);
          if (gang <= 0 && !fits(need)) continue;
          if (this.kubelet.bind(p)) {
            if (gang <= 0) add(used, need);
            gang--;
          }
        }
        const running = pgPods(pg).filter((p) => p.status?.phase === 'Running').length;
        const phase =
          running + pgPods(pg).filter((p) => p.status?.phase === 'Succeeded').length >= pg.spec.minMember
            ? 'Running'
            : pg.status.phase;
        const st = {
          ...pg.status,
          phase,
          running,
          succeeded: pgPods(pg).filter((p) => p.status?.phase === 'Succeeded').length,
          failed: pgPods(pg).filter((p) => p.status?.phase === 'Failed').length,
        };
        if (JSON.stringify(st) !== JSON.stringify(pg.status))
          store.mutate(PODGROUPS, pg.metadata.namespace, pg.metadata.name, (x) => void (x.status = st));
      }
      this.queueStatus(q.metadata.name, qPods, pgs);
    }
  }

  private queueStatus(name: string, qPods: Obj[], pgs: Obj[]): void {
    const alloc: Record<string, number> = { cpu: 0, memory: 0 };
    for (const p of qPods)
      if (p.spec.nodeName && !SOFT.includes(p.status?.phase)) add(alloc, podRequests(p.spec));
    const mine = pgs.filter(
      (pg) =>
        pg.spec.queue === name && this.cluster.store.get(PODGROUPS, pg.metadata.namespace, pg.metadata.name),
    );
    const n = (ph: string) => mine.filter((pg) => (pg.status?.phase ?? 'Pending') === ph).length;
    this.cluster.store.mutate(QUEUES, undefined, name, (q) => {
      q.status = {
        ...(q.status ?? {}),
        state: q.status?.state ?? 'Open',
        allocated: Object.fromEntries(Object.entries(alloc).map(([k, v]) => [k, formatQuantity(v, k)])),
        pending: n('Pending'),
        inqueue: n('Inqueue'),
        running: n('Running'),
        completed: n('Completed'),
        unknown: n('Unknown'),
      };
    });
  }
}
