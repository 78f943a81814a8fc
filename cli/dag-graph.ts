/**
 * A DAG as a graph: Mermaid (renders in GitHub, GitLab and most Markdown viewers) and Graphviz
 * DOT, with each node's phase. The same layout data serves `adv describe dag` and the dashboard.
 */
import type { DagSpec } from '../controller/spec/schema.js';
import type { DagStatusDoc } from '../controller/status/types.js';

export interface GraphNode {
  id: string;
  phase: string;
  needs: string[];
  /** Input name per dependency: `train` reads `TOKENS` from `tokenize`. */
  inputsFrom: Record<string, string[]>;
  /** Longest path from a root: the column the node is drawn in. */
  depth: number;
}

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

const COLOURS: Record<string, string> = {
  Succeeded: '#c8e6c9',
  Running: '#bbdefb',
  Queued: '#e1f5fe',
  Scheduling: '#e1f5fe',
  Pending: '#eeeeee',
  Waiting: '#f5f5f5',
  Failed: '#ffcdd2',
  Cancelled: '#ffe0b2',
  Skipped: '#e0e0e0',
};

/** Mermaid `flowchart LR`; node ids are quoted through labels so any DNS label is safe. */
export function toMermaid(name: string, nodes: readonly GraphNode[]): string {
  const key = (id: string) => `n_${id.replace(/-/g, '_')}`;
  const lines = [`%% DAG ${name}`, 'flowchart LR'];
  for (const n of nodes)
    lines.push(`  ${key(n.id)}["${n.id}<br/><small>${n.phase}</small>"]:::${n.phase.toLowerCase()}`);
  for (const n of nodes)
    for (const d of n.needs) {
      const label = n.inputsFrom[d]?.join(', ');
      lines.push(`  ${key(d)} -->${label ? `|${label}|` : ''} ${key(n.id)}`);
    }
  for (const [phase, colour] of Object.entries(COLOURS))
    lines.push(`  classDef ${phase.toLowerCase()} fill:${colour},stroke:#555`);
  return lines.join('\n') + '\n';
}

/** Graphviz DOT, left to right. */
export function toDot(name: string, nodes: readonly GraphNode[]): string {
  const q = (s: string) => `"${s.replace(/["\\]/g, '\\$&').replace(/\n/g, '\\n')}"`;
  const lines = [
    `digraph ${q(name)} {`,
    '  rankdir=LR;',
    '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
  ];
  for (const n of nodes)
    lines.push(
      `  ${q(n.id)} [label=${q(`${n.id}\n${n.phase}`)}, fillcolor=${q(COLOURS[n.phase] ?? '#ffffff')}];`,
    );
  for (const n of nodes)
    for (const d of n.needs) {
      const label = n.inputsFrom[d]?.join(', ');
      lines.push(`  ${q(d)} -> ${q(n.id)}${label ? ` [label=${q(label)}]` : ''};`);
    }
  lines.push('}');
  return lines.join('\n') + '\n';
}
