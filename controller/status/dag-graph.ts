/**
 * A DAG's graph layout with each node's phase, from its spec and status: the one model that
 * `adv describe dag`, `adv dag graph` (Mermaid, DOT) and the dashboard's SVG each draw.
 */
import type { DagSpec } from '../spec/schema.js';
import type { DagStatusDoc } from './types.js';

export interface GraphNode {
  id: string;
  phase: string;
  needs: string[];
  /** Input name per dependency: `train` reads `TOKENS` from `tokenize`. */
  inputsFrom: Record<string, string[]>;
  /** Longest path from a root: the column the node is drawn in. */
  depth: number;
}

/** The nodes of `spec` in spec order; a node without status is `Waiting`. */
export function graphOf(spec: DagSpec, doc: DagStatusDoc | undefined): GraphNode[] {
  const byId = new Map(spec.nodes.map((n) => [n.id, n]));
  const depth = new Map<string, number>();
  const depthOf = (id: string, seen = new Set<string>()): number => {
    const hit = depth.get(id);
    if (hit !== undefined) return hit;
    if (seen.has(id)) return 0; // a cycle cannot be in a valid spec; do not loop on a bad one
    seen.add(id);
    const needs = byId.get(id)?.needs ?? [];
    const d = needs.length ? 1 + Math.max(...needs.map((n) => depthOf(n, seen))) : 0;
    depth.set(id, d);
    return d;
  };
  return spec.nodes.map((n) => {
    const inputsFrom: Record<string, string[]> = {};
    for (const [name, ref] of Object.entries(n.inputs ?? {})) {
      const src = ref.split('.')[0]!;
      (inputsFrom[src] ??= []).push(name);
    }
    return {
      id: n.id,
      phase: doc?.status.nodes[n.id]?.phase ?? 'Waiting',
      needs: n.needs ?? [],
      inputsFrom,
      depth: depthOf(n.id),
    };
  });
}
