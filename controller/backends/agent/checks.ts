/**
 * What agents send, checked before the hub acts on it: types, sizes (`AGENT_LIMITS`) and times.
 * Anyone holding an agent token can send anything, and the hub matches, journals and shows it, so
 * each check either returns the value as the hub keeps it (known fields only) or the sentence a
 * 400 answers with: what is wrong and what is expected.
 */
import {
  AGENT_LIMITS,
  LABEL_KEY,
  LABEL_VALUE,
  type AgentCapabilities,
  type AgentPolicy,
  type ClaimRequest,
  type CompleteRequest,
  type RegisterRequest,
} from '../../../runtime/agent/protocol.js';

/** A value as the hub keeps it, or why it is refused. */
export type Checked<T> = { value: T } | { error: string };

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** `labels` (the agent's, or a policy's): at most `AGENT_LIMITS.labels` of `key=value`, as `adv agent --label` takes them. */
export function checkLabels(v: unknown, what = 'labels'): Checked<Record<string, string>> {
  if (!isObject(v)) return { error: `${what} must map names to strings` };
  const entries = Object.entries(v);
  if (entries.length > AGENT_LIMITS.labels)
    return { error: `${what} has ${entries.length} entries: at most ${AGENT_LIMITS.labels}` };
  for (const [k, x] of entries)
    if (!LABEL_KEY.test(k) || typeof x !== 'string' || !LABEL_VALUE.test(x))
      return {
        error: `${what}: "${k.slice(0, 64)}" must be a key of letters, digits and . _ - / (≤ 253) mapped to a string of letters, digits and . _ - (≤ 63)`,
      };
  return { value: Object.fromEntries(entries) as Record<string, string> };
}

/** `pools` asked for at enrollment: names of pools (DNS labels). */
export function checkPools(v: unknown): Checked<string[]> {
  if (!Array.isArray(v) || !v.every((p) => typeof p === 'string' && /^[a-z0-9-]{1,63}$/.test(p)))
    return { error: 'pools must be a list of pool names (lowercase letters, digits and -)' };
  if (v.length > AGENT_LIMITS.pools)
    return { error: `pools lists ${v.length} names: at most ${AGENT_LIMITS.pools}` };
  return { value: v as string[] };
}

/** The agent owner's policy: run-name globs and run labels, each list bounded. */
export function checkPolicy(v: unknown): Checked<AgentPolicy> {
  if (!isObject(v)) return { error: 'policy must be an object' };
  const out: AgentPolicy = {};
  for (const k of ['runs', 'denyRuns'] as const) {
    const globs = v[k];
    if (globs === undefined) continue;
    if (!Array.isArray(globs) || !globs.every((g) => typeof g === 'string'))
      return { error: `policy.${k} must be a list of globs` };
    if (globs.length > AGENT_LIMITS.globs)
      return { error: `policy.${k} has ${globs.length} globs: at most ${AGENT_LIMITS.globs}` };
    if (globs.some((g: string) => g.length > AGENT_LIMITS.globLength))
      return {
        error: `policy.${k}: a glob is longer than ${AGENT_LIMITS.globLength} characters (run names are at most 63)`,
      };
    out[k] = globs as string[];
  }
  for (const k of ['labels', 'denyLabels'] as const) {
    if (v[k] === undefined) continue;
    const labels = checkLabels(v[k], `policy.${k}`);
    if ('error' in labels) return labels;
    out[k] = labels.value;
  }
  return { value: out };
}

const numberIn = (v: unknown, min: number, max: number): v is number =>
  typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max;

/** The text fields of capabilities: how long each may be, an example, and whether it is required. */
const TEXT_FIELDS = [
  ['hostname', AGENT_LIMITS.hostname, 'desk-3.lab', true],
  ['os', AGENT_LIMITS.text, 'linux 6.8.0', true],
  ['node', AGENT_LIMITS.text, 'v20.11.1', true],
  ['python', AGENT_LIMITS.text, '3.12.3', false],
  ['torch', AGENT_LIMITS.text, '2.3.1', false],
  ['cuda', AGENT_LIMITS.text, '12.4', false],
] as const;

/** Why these capabilities cannot be kept, or undefined when each field has its type and size. */
function capabilitiesError(c: Record<string, unknown>): string | undefined {
  for (const [field, max, example, required] of TEXT_FIELDS) {
    const v = c[field];
    if (v === undefined && !required) continue;
    if (typeof v !== 'string' || !v.length || v.length > max)
      return `capabilities.${field} must be a string of 1 to ${max} characters (like "${example}")`;
  }
  if (!Number.isSafeInteger(c.cores) || !numberIn(c.cores, 1, 1 << 20))
    return 'capabilities.cores must be a whole number ≥ 1';
  if (!numberIn(c.ramGiB, 0, 1 << 30)) return 'capabilities.ramGiB must be a number of GiB ≥ 0';
  const L = AGENT_LIMITS;
  if (!Array.isArray(c.gpus) || c.gpus.length > L.gpus)
    return `capabilities.gpus must be a list of at most ${L.gpus} {name, vramGiB}`;
  const badGpu = (g: unknown) =>
    !isObject(g) ||
    typeof g.name !== 'string' ||
    !g.name.length ||
    g.name.length > L.gpuName ||
    !numberIn(g.vramGiB, 0, 1 << 20);
  if (c.gpus.some(badGpu))
    return `capabilities.gpus: each must be {name: a string of 1 to ${L.gpuName} characters, vramGiB: a number ≥ 0}`;
  return undefined;
}

/**
 * The host's capabilities as `adv agent` detects them, with only the known fields kept (in one
 * order, so an unchanged host compares equal): every string and list bounded, every type checked,
 * so no record breaks matching or the operators' table, and none makes the journal grow.
 */
export function checkCapabilities(c: unknown): Checked<AgentCapabilities> {
  if (!isObject(c)) return { error: 'capabilities missing: send what adv agent detects' };
  const bad = capabilitiesError(c);
  if (bad) return { error: bad };
  const text = (k: 'python' | 'torch' | 'cuda') => (c[k] === undefined ? {} : { [k]: c[k] as string });
  return {
    value: {
      hostname: c.hostname as string,
      cores: c.cores as number,
      ramGiB: c.ramGiB as number,
      os: c.os as string,
      node: c.node as string,
      ...text('python'),
      ...text('torch'),
      ...text('cuda'),
      gpus: (c.gpus as { name: string; vramGiB: number }[]).map((g) => ({
        name: g.name,
        vramGiB: g.vramGiB,
      })),
    },
  };
}

/** An agent's name: a DNS label (it names the agent in status messages and `adv get agents`). */
const AGENT_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** An enrollment, the token aside (checked by the hub): name, capabilities, labels and pools. */
export function checkRegister(b: Record<string, unknown>): Checked<RegisterRequest> {
  if (typeof b.name !== 'string' || !AGENT_NAME.test(b.name))
    return { error: 'the agent name must be a DNS label: lowercase letters, digits and -, at most 63' };
  const capabilities = checkCapabilities(b.capabilities);
  if ('error' in capabilities) return capabilities;
  const labels = b.labels === undefined ? { value: {} } : checkLabels(b.labels);
  if ('error' in labels) return labels;
  const pools = b.pools === undefined ? undefined : checkPools(b.pools);
  if (pools && 'error' in pools) return pools;
  return {
    value: {
      enrollToken: String(b.enrollToken),
      name: b.name,
      capabilities: capabilities.value,
      labels: labels.value,
      ...(pools?.value.length ? { pools: pools.value } : {}),
    },
  };
}

/**
 * A claim: the host's capabilities now and its owner's policy. Its labels are checked but not
 * kept: an agent's labels are those it enrolled with (a Backend's `selector` matches them).
 */
export function checkClaim(b: Record<string, unknown>): Checked<ClaimRequest> {
  const capabilities = checkCapabilities(b.capabilities);
  if ('error' in capabilities) return capabilities;
  const labels = b.labels === undefined ? undefined : checkLabels(b.labels);
  if (labels && 'error' in labels) return labels;
  const policy = b.policy === undefined ? undefined : checkPolicy(b.policy);
  if (policy && 'error' in policy) return policy;
  return { value: { capabilities: capabilities.value, ...(policy ? { policy: policy.value } : {}) } };
}

/** How far an agent's clock may be from the controller's before the times it reports are refused. */
export const CLOCK_SKEW_MS = 5 * 60_000;
const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/** When an attempt may have started or finished: not before it was queued, not after now (ms). */
export interface TimeWindow {
  from: number;
  to: number;
}

/**
 * A time an agent reports (its workload's start or end): ISO-8601, inside the attempt's window give
 * or take `CLOCK_SKEW_MS`, returned normalized (UTC, ms) and clamped into the window — never as
 * sent, so a status never shows a finish before the submit or text that is not a time. Absent or
 * '' (adv exec never wrote it): undefined.
 */
export function checkTime(v: unknown, field: string, w: TimeWindow): Checked<string | undefined> {
  if (v === undefined || v === '') return { value: undefined };
  const t = typeof v === 'string' && ISO_TIME.test(v) ? Date.parse(v) : NaN;
  if (Number.isNaN(t))
    return {
      error: `${field} must be an ISO-8601 time like 2026-01-21T10:00:00.000Z, not ${JSON.stringify(v).slice(0, 40)}`,
    };
  const when = (ms: number) => new Date(ms).toISOString();
  if (t < w.from - CLOCK_SKEW_MS)
    return {
      error: `${field} ${when(t)} is before the attempt was queued (${when(w.from)}): check this host's clock`,
    };
  if (t > w.to + CLOCK_SKEW_MS)
    return {
      error: `${field} ${when(t)} is in the future (the controller's clock says ${when(w.to)}): check this host's clock`,
    };
  return { value: when(Math.min(w.to, Math.max(w.from, t))) };
}

/** `complete`'s exit record, as adv exec writes it: exit code, reason, message and times. */
export function checkExit(v: unknown, w: TimeWindow): Checked<CompleteRequest['exit']> {
  if (!isObject(v))
    return {
      error:
        "complete needs exit: adv exec's exit record {exitCode, reason, message?, startedAt, finishedAt}",
    };
  if (!Number.isSafeInteger(v.exitCode) || (v.exitCode as number) < 0 || (v.exitCode as number) > 255)
    return { error: 'exit.exitCode must be a whole number from 0 to 255' };
  if (typeof v.reason !== 'string' || !/^[A-Za-z]{1,64}$/.test(v.reason))
    return { error: 'exit.reason must be a word like Completed, Error or Preempted' };
  if (v.message !== undefined && typeof v.message !== 'string')
    return { error: 'exit.message must be a string' };
  const started = checkTime(v.startedAt, 'exit.startedAt', w);
  if ('error' in started) return started;
  const finished = checkTime(v.finishedAt, 'exit.finishedAt', w);
  if ('error' in finished) return finished;
  if (started.value && finished.value && finished.value < started.value)
    return { error: 'exit.finishedAt is before exit.startedAt' };
  return {
    value: {
      exitCode: v.exitCode as number,
      reason: v.reason as CompleteRequest['exit']['reason'],
      ...(v.message ? { message: v.message.slice(0, 2000) } : {}),
      startedAt: started.value ?? '',
      finishedAt: finished.value ?? '',
    },
  };
}
