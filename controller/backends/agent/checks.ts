/**
 * What agents send, checked before the hub acts on it: types, sizes (`AGENT_LIMITS`) and times.
 * Anyone holding an agent token can send anything, and the hub matches, journals and shows it, so
 * each check either returns the value as the hub keeps it (known fields only) or the sentence a
 * 400 answers with: what is wrong and what is expected.
 */
import { AGENT_LIMITS, LABEL_KEY, LABEL_VALUE, type AgentPolicy } from '../../../runtime/agent/protocol.js';

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
