/**
 * The solver: which backend gets a run's next attempt, and why. Pure: everything it knows comes in
 * as arguments, so `adv plan` and the tests see exactly what the controller decides.
 *
 * 1. Candidates: `backendSelector.order` if given, else every backend by priority (then name).
 * 2. Hard filters against what each backend declares (and, for GPUs on a host, what it reports):
 *    allowed/forbidden, clusters, usable adapter, preemptible capacity, TPUs (type, chips, hosts), GPUs per node, GPU
 *    type alternatives, nodes, the declared checkpoint mode, VRAM, RAM, CUDA. What a backend's type can do comes from its
 *    descriptor's traits; the solver never asks for a type by name.
 * 3. Soft order: a backend that just preempted or failed this run (cool-down, SkyPilot's "eager
 *    next region") and a degraded backend go after the others; `preferCuda` puts CUDA first;
 *    `policy.optimize: cost|time` then ranks by expected cost or hours, counting the work each
 *    backend's preemptions lose (`BackendInfo.record`, learned from the status branch; cost/estimate.ts).
 * 4. The first candidate that can start now (free GPUs where `capacity()` tells, below
 *    `maxConcurrent`) wins. If none can, the run queues on the candidate with the most GPUs among
 *    those that hold jobs in their own queue (a scheduler such as SLURM keeps the job until it
 *    fits); with no such candidate it waits.
 */
import { modeRefusal } from '../backends/checkpoint-mode.js';
import { describeTpuSlice, parseTpuType, tpuSliceMismatch, type TpuSlice } from '../backends/tpu-slice.js';
import type { BackendInfo } from '../backends/backend-info.js';
import { declaredGpuTypes, type Capacity } from '../backends/types.js';
import {
  expectations,
  expectedHours,
  explainChoice,
  goalKey,
  type Expectation,
  type Goal,
} from '../cost/estimate.js';
import { secondsPerStep } from '../cost/history.js';
import type { RunSpec } from '../spec/schema.js';
import type { Attempt } from '../status/types.js';
import { EndClass } from '../status/types.js';

// Declared beside the registry, which builds it; the solver is its main reader.
export type { BackendInfo };

export interface Decision {
  /** The chosen backend; absent when the run has to wait. */
  backend?: string;
  /** One clause per backend looked at: `slurm-a: no free H100 (0 of 8); slurm-b: chosen, 16 free`. */
  why: string;
  /** Why it waits, when it does. */
  wait?: 'NoBackend' | 'NoCapacity';
  /** GPUs the choice takes from the backend's free count (to reserve within one pass). */
  gpus?: number;
}

/** How long a backend that preempted or failed a run is tried after the others for that run. */
export const DEFAULT_COOLDOWN_SEC = 600;

/** Ends that send the next attempt elsewhere first. */
const COOL_DOWN_CLASSES: ReadonlySet<string> = new Set([
  EndClass.Preempted,
  EndClass.Infrastructure,
  EndClass.UserError,
  EndClass.Timeout,
]);

interface Candidate {
  b: BackendInfo;
  /** Reasons to try it after the others. */
  demoted: string[];
  /** Can it start now, and what it has free (for the message). */
  now: { ok: boolean; why?: string; free?: number };
}

/** What the run asks for, read once from its spec. */
interface Ask {
  spec: RunSpec;
  sel: NonNullable<RunSpec['backendSelector']>;
  cons: NonNullable<NonNullable<RunSpec['backendSelector']>['constraints']>;
  tpus: number;
  /** The TPU slice the run names (`resources.tpuType`). */
  tpuType?: TpuSlice;
  gpus: number;
  nodes: number;
  /** `resources.nodes` as the run gives it (a TPU slice's hosts must match it then). */
  nodesGiven?: number;
  /** Acceptable GPU types; empty when any type will do. */
  types: string[];
  preemptible: boolean;
}

function askOf(spec: RunSpec): Ask {
  const sel = spec.backendSelector ?? {};
  const res = spec.resources ?? {};
  const types = res.gpuType ? res.gpuType.split('|') : [];
  return {
    spec,
    sel,
    cons: sel.constraints ?? {},
    tpus: res.tpus ?? 0,
    ...(res.tpuType ? { tpuType: parseTpuType(res.tpuType) } : {}),
    gpus: res.gpus ?? 0,
    nodes: res.nodes ?? 1,
    ...(res.nodes !== undefined ? { nodesGiven: res.nodes } : {}),
    types: types.length === 0 || types.includes('any') ? [] : types,
    preemptible: spec.policy?.preemptible === true,
  };
}

export function solve(
  spec: RunSpec,
  backends: readonly BackendInfo[],
  history: readonly Attempt[] = [],
  nowMs = Date.now(),
): Decision {
  const ask = askOf(spec);
  const { cons } = ask;
  const verdicts = new Verdicts();
  const ordered = candidatesInOrder(ask.sel, backends, verdicts);

  const feasible: Candidate[] = [];
  for (const b of ordered) {
    const why = excluded(b, ask);
    if (why === null) continue;
    if (why !== undefined) {
      verdicts.set(b.name, why);
      continue;
    }
    const demoted: string[] = [];
    const cooling = coolingDown(b.name, history, spec, nowMs);
    if (cooling) demoted.push(cooling);
    if (b.degraded) demoted.push(`degraded (${b.degraded})`);
    if (demoted.length) verdicts.set(b.name, `tried after the others: ${demoted.join('; ')}`);
    feasible.push({ b, demoted, now: canStartNow(b, ask.gpus * ask.nodes, ask.types) });
  }

  if (!feasible.length) {
    return {
      why: verdicts.size ? verdicts.say() : 'no backend is defined that the selector allows',
      wait: 'NoBackend',
    };
  }
  // Stable: healthy before demoted, CUDA first when preferred, then by the optimize goal,
  // otherwise the order above.
  const rank = (c: Candidate) =>
    (c.demoted.length ? 2 : 0) + (cons.preferCuda && c.b.spec.capabilities?.cuda !== true ? 1 : 0);
  const goal =
    spec.policy?.optimize === 'cost' || spec.policy?.optimize === 'time' ? spec.policy.optimize : undefined;
  const expected = goal ? expectationsOf(spec, history, feasible) : undefined;
  const key = (c: Candidate) => (goal && expected ? goalKey(expected.get(c.b.name)!, goal) : 0);
  const sorted = feasible
    .map((c, i) => ({ c, i }))
    .sort((x, y) => rank(x.c) - rank(y.c) || key(x.c) - key(y.c) || x.i - y.i)
    .map(({ c }) => c);

  for (const c of sorted) {
    const note = c.demoted.length ? ` (${c.demoted.join('; ')})` : '';
    if (c.now.ok) {
      const free = c.now.free !== undefined ? `, ${c.now.free} free` : '';
      const why = goal && expected ? ` ${explainOptimized(goal, c, sorted, expected)}` : '';
      verdicts.set(c.b.name, `chosen${free}${why}${note}`);
      return { backend: c.b.name, why: verdicts.say(c.b.name), gpus: ask.gpus * ask.nodes };
    }
    verdicts.evaluated.add(c.b.name);
    verdicts.set(c.b.name, `${c.now.why}${note}`);
  }
  // Nothing can start now: a scheduler can hold the job until it fits. Queue on the candidate
  // with its own queue that has the most GPUs (total over the partitions it may use).
  const queue = sorted
    .filter((c) => c.b.traits.queuesWhenFull && !(c.now.why ?? '').startsWith('full'))
    .sort((x, y) => totalGpus(y.b) - totalGpus(x.b))[0];
  if (queue) {
    const was = verdicts.get(queue.b.name);
    verdicts.set(queue.b.name, `${was}; queued there (the most capacity: ${totalGpus(queue.b)} GPUs)`);
    return { backend: queue.b.name, why: verdicts.say(), gpus: 0 };
  }
  return { why: verdicts.say(), wait: 'NoCapacity' };
}

/**
 * Each feasible backend's expected hours and cost for the run: the work left from its own measured
 * step rate and `totalSteps` (per hour of work when unknown), stretched by the backend's preemptions.
 */
function expectationsOf(
  spec: RunSpec,
  history: readonly Attempt[],
  feasible: readonly Candidate[],
): Map<string, Expectation> {
  const rate = secondsPerStep(history);
  const done = Math.max(0, ...history.map((a) => a.lastStep ?? 0));
  const work = expectedHours(
    spec,
    rate === undefined ? undefined : { secondsPerStep: rate, from: 'own' },
    done,
  );
  const list = expectations(
    spec,
    history,
    feasible.map((c) => c.b),
    work,
  );
  return new Map(list.map((e) => [e.name, e]));
}

/** The chosen candidate's figures beside the other feasible ones' (ranked order). */
function explainOptimized(
  goal: Goal,
  chosen: Candidate,
  sorted: readonly Candidate[],
  expected: ReadonlyMap<string, Expectation>,
): string {
  const others = sorted.filter((c) => c !== chosen).map((c) => expected.get(c.b.name)!);
  return explainChoice(
    goal,
    expected.get(chosen.b.name)!,
    others,
    new Map(sorted.map((c) => [c.b.name, c.b])),
  );
}

/** Verdicts by backend, said in the order the backends were walked (up to the chosen one). */
class Verdicts extends Map<string, string> {
  /** Backends in the order they were walked. */
  readonly walked: string[] = [];
  /** Backends asked whether they can start now (said even when after the chosen one). */
  readonly evaluated = new Set<string>();

  say(chosen?: string): string {
    const stop = chosen ? this.walked.indexOf(chosen) : Infinity;
    return [...this.keys()]
      .filter((n) => !chosen || this.walked.indexOf(n) <= stop || this.evaluated.has(n))
      .sort((x, y) => this.walked.indexOf(x) - this.walked.indexOf(y))
      .map((n) => `${n}: ${this.get(n)}`)
      .join('; ');
  }
}

/** `order` if the selector gives one (an unknown name is said), else every backend by priority, then name. */
function candidatesInOrder(
  sel: Ask['sel'],
  backends: readonly BackendInfo[],
  verdicts: Verdicts,
): BackendInfo[] {
  if (!sel.order?.length) {
    const ordered = [...backends].sort(
      (a, b) => (b.spec.priority ?? 0) - (a.spec.priority ?? 0) || (a.name < b.name ? -1 : 1),
    );
    verdicts.walked.push(...ordered.map((b) => b.name));
    return ordered;
  }
  const byName = new Map(backends.map((b) => [b.name, b]));
  return sel.order.flatMap((n) => {
    const b = byName.get(n);
    if (!b) verdicts.set(n, 'no such Backend');
    verdicts.walked.push(n);
    return b ? [b] : [];
  });
}

/**
 * Why a backend cannot take the run at all, by what it declares (and reports of its GPUs):
 * a verdict to say; `null` when the selector leaves it out (said nowhere); undefined when it can.
 */
function excluded(b: BackendInfo, ask: Ask): string | null | undefined {
  const { sel, cons, gpus, nodes, types } = ask;
  const caps = b.spec.capabilities ?? {};
  if (sel.allowed?.length && !sel.allowed.includes(b.name)) return null;
  if (sel.forbidden?.includes(b.name)) return null;
  if (cons.clusters?.length && !(b.spec.cluster && cons.clusters.includes(b.spec.cluster)))
    return `cluster ${b.spec.cluster ?? '(none)'} is not one of ${cons.clusters.join(', ')}`;
  if (!b.usable) return b.why ?? 'not usable';
  if ((b.traits.preemptible?.(b.spec) ?? caps.preemptible) && !ask.preemptible)
    return 'preemptible capacity (set policy.preemptible: true to allow)';
  const tpu = tpuShortfall(b, ask);
  if (tpu) return tpu;
  const hostGpus = hostGpuList(b.capacity);
  const perNode = caps.gpus ?? (hostGpus ? hostGpus.length : undefined);
  if (gpus > 0 && perNode !== undefined && perNode < gpus)
    return `has ${perNode} GPUs per node, run needs ${gpus}`;
  const maxNodes = caps.nodes ?? (b.traits.multiNode ? undefined : 1);
  if (nodes > 1 && maxNodes !== undefined && maxNodes < nodes)
    return `spans ${maxNodes} node${maxNodes === 1 ? '' : 's'}, run needs ${nodes}`;
  const offered = gpus > 0 && types.length ? gpuTypesOf(b) : undefined;
  if (offered && !types.some((t) => offered.keys.has(gpuKey(t))))
    return offered.names.length
      ? `has ${offered.names.join('/')} GPUs, run accepts ${types.join('|')}`
      : `declares no GPU types (capabilities.gpuTypes), run accepts ${types.join('|')}`;
  return modeRefusal(ask.spec, b.traits, b.spec) ?? hardwareShortfall(b, cons);
}

/**
 * Why a backend's TPUs do not fit the run: the type (generation and chips, `tpu-slice.ts`), the
 * chips per host (a TPU VM gives the job every chip it has) and the hosts (each runs the job).
 */
function tpuShortfall(b: BackendInfo, ask: Ask): string | undefined {
  const wants = ask.tpus > 0 || ask.tpuType !== undefined;
  if (!b.traits.tpus) return wants ? `has no TPUs (type ${b.spec.type})` : undefined;
  if (ask.gpus > 0) return `has TPUs, not GPUs (type ${b.spec.type})`;
  const slice = b.traits.tpuSlice?.(b.spec);
  if (!slice)
    return wants ? `declares no TPU accelerator type, run needs ${ask.tpuType?.type ?? 'TPUs'}` : undefined;
  const type = ask.tpuType && tpuSliceMismatch(ask.tpuType, slice);
  if (type) return type;
  if (ask.tpus && slice.chipsPerHost !== undefined && slice.chipsPerHost !== ask.tpus)
    return `has ${slice.chipsPerHost} TPU chips per host (${describeTpuSlice(slice)}), run needs ${ask.tpus}`;
  if (ask.nodesGiven !== undefined && slice.hosts !== undefined && slice.hosts !== ask.nodesGiven)
    return `has ${slice.hosts} TPU host${slice.hosts === 1 ? '' : 's'} (${describeTpuSlice(slice)}), run needs ${ask.nodesGiven}`;
  return undefined;
}

/** What the selector's hardware constraints (VRAM, RAM, CUDA) find missing, or undefined. */
function hardwareShortfall(b: BackendInfo, cons: Ask['cons']): string | undefined {
  const caps = b.spec.capabilities ?? {};
  const vram = caps.vramGiB ?? hostVramGiB(b.capacity);
  if (cons.minVramGiB !== undefined && !(vram !== undefined && vram >= cons.minVramGiB))
    return vram === undefined
      ? `declares no capabilities.vramGiB, run needs ${cons.minVramGiB} GiB per GPU`
      : `has ${vram} GiB per GPU, run needs ${cons.minVramGiB}`;
  if (cons.minRamGiB !== undefined && !(caps.ramGiB !== undefined && caps.ramGiB >= cons.minRamGiB))
    return caps.ramGiB === undefined
      ? `declares no capabilities.ramGiB, run needs ${cons.minRamGiB} GiB`
      : `has ${caps.ramGiB} GiB RAM, run needs ${cons.minRamGiB}`;
  if (cons.requireCuda && caps.cuda !== true)
    return caps.cuda === false ? 'has no CUDA' : 'does not declare capabilities.cuda: true';
  return undefined;
}

function canStartNow(b: BackendInfo, need: number, types: readonly string[]): Candidate['now'] {
  const max = b.spec.maxConcurrent;
  const active = b.active ?? 0;
  if (max !== undefined && active >= max) return { ok: false, why: `full (${active} of ${max} running)` };
  if (need === 0) return { ok: true };
  const reported = freeGpus(b.capacity, types);
  if (reported === undefined) return { ok: true };
  const free = Math.max(0, reported - (b.reservedGpus ?? 0));
  if (free < need) {
    const what = types.length ? `${types.join('|')} GPUs` : 'GPUs';
    return { ok: false, why: `no free ${what} (${free} free, run needs ${need})`, free };
  }
  return { ok: true, free };
}

/** Free GPUs of acceptable types, or undefined when the backend cannot tell. */
export function freeGpus(cap: Capacity | undefined, types: readonly string[] = []): number | undefined {
  if (!cap) return undefined;
  const ok = (t: string) =>
    types.length === 0 || t === 'any' || types.some((x) => t.toLowerCase().includes(x.toLowerCase()));
  if (cap.partitions?.length) {
    const byPartition = new Map<string, number>();
    for (const p of cap.partitions)
      if (ok(p.gpuType)) byPartition.set(p.partition, (byPartition.get(p.partition) ?? 0) + p.freeGpus);
    return Math.max(0, ...byPartition.values());
  }
  const list = hostGpuList(cap);
  if (list) return list.filter((g) => !g.busy && ok(g.name)).length;
  return cap.note ? undefined : cap.freeGpus;
}

const hostGpuList = (cap: Capacity | undefined) => (cap?.gpus?.length ? cap.gpus : undefined);

function hostVramGiB(cap: Capacity | undefined): number | undefined {
  const list = hostGpuList(cap);
  return list ? Math.min(...list.map((g) => g.memoryTotalMiB / 1024)) : undefined;
}

/** `RTX_4090`, `rtx-4090` and `RTX 4090` are one GPU name: lower-case letters and digits only. */
const gpuKey = (name: string) => name.toLowerCase().replace(/[^a-z0-9]/g, '');

/**
 * The GPU types a backend offers: what its descriptor reads from its spec (`traits.gpuTypes`,
 * never a type's settings read here) and what `capacity()` reported. `names` for the message;
 * `keys` what a run's type is compared with: each whole name and each of its words with a digit
 * (`NVIDIA H100 80GB HBM3` offers `h100`). Undefined: any type a run names.
 */
function gpuTypesOf(b: BackendInfo): { names: string[]; keys: Set<string> } | undefined {
  const declared = b.traits.gpuTypes ? b.traits.gpuTypes(b.spec) : declaredGpuTypes(b.spec);
  if (declared === undefined) return undefined;
  const names = [
    ...declared,
    ...(b.capacity?.partitions ?? []).map((p) => p.gpuType).filter((t) => t !== 'any'),
    ...(hostGpuList(b.capacity) ?? []).map((g) => g.name),
  ].map((n) => n.toLowerCase());
  const keys = new Set<string>();
  for (const n of names) {
    keys.add(gpuKey(n));
    for (const word of n.split(/[\s_/-]+/)) if (/\d/.test(word)) keys.add(gpuKey(word));
  }
  return { names: [...new Set(names)], keys };
}

function totalGpus(b: BackendInfo): number {
  const parts = b.capacity?.partitions;
  if (parts?.length) return parts.reduce((s, p) => s + p.totalGpus, 0);
  return (b.spec.capabilities?.gpus ?? 0) * (b.spec.capabilities?.nodes ?? 1);
}

/**
 * `cooling down: attempt 1 was preempted 30s ago` while the backend's last attempt of this run
 * ended badly, recently; `setup failed here (attempt 1)` for as long as that is its last attempt
 * of this run — a step that fails on a host (a module it lacks) fails there again.
 */
function coolingDown(
  backend: string,
  history: readonly Attempt[],
  spec: RunSpec,
  nowMs: number,
): string | undefined {
  const last = [...history].reverse().find((a) => a.backend === backend && a.finishedAt);
  if (last?.class === EndClass.SetupFailed) return `setup failed here (attempt ${last.n})`;
  if (!last || !last.class || !COOL_DOWN_CLASSES.has(last.class)) return undefined;
  const ago = nowMs - Date.parse(last.finishedAt!);
  const limit = (spec.policy?.failoverCooldownSec ?? DEFAULT_COOLDOWN_SEC) * 1000;
  if (ago >= limit) return undefined;
  const what = last.class === EndClass.Preempted ? 'was preempted' : `ended (${last.class})`;
  return `cooling down: attempt ${last.n} ${what} ${Math.round(ago / 1000)}s ago`;
}
