/**
 * An agent's own policy (which runs it takes): applied by the agent to each claim and by the
 * controller's hub before it offers one, so both decide alike.
 */
import type { AgentPolicy } from './protocol.js';

/**
 * Whether `name` matches `glob`: `*` matches any run of characters (none included), everything
 * else is literal. A greedy scan that, on a mismatch, retries only from the last star it passed,
 * so it takes at most |glob|·|name| steps whatever the pattern: an agent's policy is matched on the
 * controller's event loop, and a backtracking regex (`^.*.*…!$`) would stall it for hours.
 */
export function globMatches(glob: string, name: string): boolean {
  let g = 0;
  let n = 0;
  let star = -1; // the glob index of the last star passed; its match resumes at `from`
  let from = 0;
  while (n < name.length) {
    if (glob[g] === '*') {
      star = g++;
      from = n;
    } else if (g < glob.length && glob[g] === name[n]) {
      g++;
      n++;
    } else if (star >= 0) {
      g = star + 1;
      n = ++from;
    } else return false;
  }
  while (glob[g] === '*') g++;
  return g === glob.length;
}

/** Whether the agent's own policy lets it take this run. */
export function policyAllows(
  policy: AgentPolicy | undefined,
  run: string,
  labels: Record<string, string>,
): boolean {
  if (!policy) return true;
  if (policy.runs?.length && !policy.runs.some((g) => globMatches(g, run))) return false;
  if (policy.denyRuns?.some((g) => globMatches(g, run))) return false;
  for (const [k, v] of Object.entries(policy.labels ?? {})) if (labels[k] !== v) return false;
  for (const [k, v] of Object.entries(policy.denyLabels ?? {})) if (labels[k] === v) return false;
  return true;
}
