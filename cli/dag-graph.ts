/**
 * A DAG as text: Mermaid (renders in GitHub, GitLab and most Markdown viewers) and Graphviz DOT,
 * each node with its phase. The layout (`graphOf`) is the controller's, shared with the dashboard.
 */
import type { GraphNode } from '../controller/index.js';
import { printable } from './output.js';

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

/**
 * Mermaid `flowchart LR`; node ids are quoted through labels so any DNS label is safe. Names come
 * from the status branch: they are made printable (and quotes entity-coded) before they are drawn.
 */
export function toMermaid(name: string, nodes: readonly GraphNode[]): string {
  const ident = (s: string) => printable(s).replace(/[^A-Za-z0-9_]/g, '_');
  const key = (id: string) => `n_${ident(id)}`;
  const text = (s: string) => printable(s).replace(/"/g, '#quot;').replace(/\|/g, '#124;');
  const lines = [`%% DAG ${printable(name)}`, 'flowchart LR'];
  for (const n of nodes)
    lines.push(
      `  ${key(n.id)}["${text(n.id)}<br/><small>${text(n.phase)}</small>"]:::${ident(n.phase.toLowerCase())}`,
    );
  for (const n of nodes)
    for (const d of n.needs) {
      const label = n.inputsFrom[d]?.join(', ');
      lines.push(`  ${key(d)} -->${label ? `|${text(label)}|` : ''} ${key(n.id)}`);
    }
  for (const [phase, colour] of Object.entries(COLOURS))
    lines.push(`  classDef ${phase.toLowerCase()} fill:${colour},stroke:#555`);
  return lines.join('\n') + '\n';
}

/** Graphviz DOT, left to right. */
export function toDot(name: string, nodes: readonly GraphNode[]): string {
  // Printable first (a newline in a name is shown as \x0a), then DOT's own quoting.
  const q = (s: string) => `"${printable(s).replace(/["\\]/g, '\\$&')}"`;
  // The id and the phase on two lines: DOT's "\n" between the two quoted, printable parts.
  const nodeLabel = (id: string, phase: string) => `${q(id).slice(0, -1)}\\n${q(phase).slice(1)}`;
  const lines = [
    `digraph ${q(name)} {`,
    '  rankdir=LR;',
    '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
  ];
  for (const n of nodes)
    lines.push(
      `  ${q(n.id)} [label=${nodeLabel(n.id, n.phase)}, fillcolor=${q(COLOURS[n.phase] ?? '#ffffff')}];`,
    );
  for (const n of nodes)
    for (const d of n.needs) {
      const label = n.inputsFrom[d]?.join(', ');
      lines.push(`  ${q(d)} -> ${q(n.id)}${label ? ` [label=${q(label)}]` : ''};`);
    }
  lines.push('}');
  return lines.join('\n') + '\n';
}
