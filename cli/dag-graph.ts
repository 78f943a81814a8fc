/**
 * A DAG as text: Mermaid (renders in GitHub, GitLab and most Markdown viewers) and Graphviz DOT,
 * each node with its phase. The layout (`graphOf`) is the controller's, shared with the dashboard.
 */
import type { GraphNode } from '../controller/index.js';

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
