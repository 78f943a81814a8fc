/**
 * Which agent may take which attempt: pure, so the hub and its tests decide alike. An attempt
 * asks for GPUs (count, types, memory), CUDA, host memory and cores; its Backend may ask for agent
 * labels; the agent's owner may refuse runs by name or label. An agent is offered only attempts it
 * can run, so a CPU-only host never claims a CUDA run.
 */
import type { AgentCapabilities } from '../../../runtime/agent/protocol.js';
// The agent applies its own policy with the same functions (runtime/agent/policy.ts).
export { globMatches, policyAllows } from '../../../runtime/agent/policy.js';
import type { RunSpec } from '../../spec/schema.js';

/** What an attempt needs of the host that claims it. */
export interface Need {
  gpus: number;
  /** Acceptable GPU types (matched as substrings of `nvidia-smi`'s names); absent: any. */
  gpuTypes?: string[];
  minVramGiB?: number;
  minRamGiB?: number;
  cpus?: number;
  cuda: boolean;
}

const GIB: Record<string, number> = {
  Ki: 2 ** -20,
  Mi: 2 ** -10,
  Gi: 1,
  Ti: 1024,
  K: 1e3 / 2 ** 30,
  M: 1e6 / 2 ** 30,
  G: 1e9 / 2 ** 30,
  T: 1e12 / 2 ** 30,
};

/** GiB in a Kubernetes-style quantity (`64Gi`, `512Mi`); a bare number is bytes. */
export function quantityGiB(q: string): number {
  const m = /^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|K|M|G|T)?$/.exec(q);
  if (!m) return NaN;
  return Number(m[1]) * (m[2] ? GIB[m[2]]! : 2 ** -30);
}

/** What a run's spec needs of an agent. A run asking for GPUs needs CUDA too. */
export function needOf(spec: RunSpec): Need {
  const r = spec.resources ?? {};
  const c = spec.backendSelector?.constraints ?? {};
  const gpus = r.gpus ?? 0;
  const types = r.gpuType
    ?.split('|')
    .map((t) => t.trim())
    .filter(Boolean);
  const memory = r.memory ? quantityGiB(r.memory) : undefined;
  const ram = Math.max(c.minRamGiB ?? 0, memory ?? 0);
  return {
    gpus,
    ...(types?.length && !types.some((t) => t.toLowerCase() === 'any') ? { gpuTypes: types } : {}),
    ...(c.minVramGiB !== undefined ? { minVramGiB: c.minVramGiB } : {}),
    ...(ram > 0 ? { minRamGiB: ram } : {}),
    ...(r.cpus !== undefined ? { cpus: r.cpus } : {}),
    cuda: gpus > 0 || c.requireCuda === true,
  };
}

/** Why this agent cannot run an attempt with this need, or undefined when it can. */
export function unfitBecause(need: Need, caps: AgentCapabilities): string | undefined {
  if (need.cuda && !caps.cuda) return 'has no CUDA';
  const fitting = caps.gpus.filter(
    (g) =>
      (!need.gpuTypes || need.gpuTypes.some((t) => g.name.toLowerCase().includes(t.toLowerCase()))) &&
      (need.minVramGiB === undefined || g.vramGiB >= need.minVramGiB),
  );
  if (fitting.length < need.gpus)
    return (
      `has ${fitting.length} fitting GPU(s), the run needs ${need.gpus}` +
      (need.gpuTypes ? ` of ${need.gpuTypes.join('|')}` : '') +
      (need.minVramGiB !== undefined ? ` with ≥ ${need.minVramGiB} GiB` : '')
    );
  if (need.minRamGiB !== undefined && caps.ramGiB < need.minRamGiB)
    return `has ${caps.ramGiB} GiB of memory, the run needs ${need.minRamGiB}`;
  if (need.cpus !== undefined && caps.cores < need.cpus)
    return `has ${caps.cores} cores, the run needs ${need.cpus}`;
  return undefined;
}

/** Whether the agent carries every label the Backend's `selector` asks for. */
export function selectorMatches(
  selector: Record<string, string> | undefined,
  labels: Record<string, string>,
): boolean {
  return Object.entries(selector ?? {}).every(([k, v]) => labels[k] === v);
}
