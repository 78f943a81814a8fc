/**
 * A DAG as inline SVG: one column per depth (longest path from a root), nodes in spec order down
 * each column, edges as curves from a dependency's right side to the dependent's left side.
 * Colours come from the stylesheet by phase class, so the page needs no inline style.
 */
import type { GraphNode } from '../status/dag-graph.js';
import { html, phaseClass, type Html } from './html.js';

const W = 168;
const H = 48;
const COL_GAP = 72;
const ROW_GAP = 22;
const PAD = 20;
const MAX_LABEL = 20;

export interface Box {
  x: number;
  y: number;
}

/** Top-left corner of each node's box, and the size of the drawing. */
export function layoutDag(nodes: readonly GraphNode[]): {
  at: Map<string, Box>;
  width: number;
  height: number;
} {
  const columns: GraphNode[][] = [];
  for (const n of nodes) (columns[n.depth] ??= []).push(n);
  const cols = columns.map((c) => c ?? []);
  const rows = Math.max(1, ...cols.map((c) => c.length));
  const height = 2 * PAD + rows * H + (rows - 1) * ROW_GAP;
  const at = new Map<string, Box>();
  cols.forEach((col, depth) => {
    const used = col.length * H + Math.max(0, col.length - 1) * ROW_GAP;
    const top = (height - used) / 2;
    col.forEach((n, i) => at.set(n.id, { x: PAD + depth * (W + COL_GAP), y: top + i * (H + ROW_GAP) }));
  });
  const width = 2 * PAD + Math.max(1, cols.length) * W + Math.max(0, cols.length - 1) * COL_GAP;
  return { at, width, height };
}

const short = (s: string) => (s.length > MAX_LABEL ? s.slice(0, MAX_LABEL - 1) + '…' : s);

/** The drawing; `href` gives the link of a node (its child run), or undefined for none yet. */
export function dagSvg(
  name: string,
  nodes: readonly GraphNode[],
  href: (id: string) => string | undefined,
): Html {
  const { at, width, height } = layoutDag(nodes);
  const edges = nodes.flatMap((n) =>
    n.needs.flatMap((d) => {
      const from = at.get(d);
      const to = at.get(n.id);
      if (!from || !to) return [];
      const x1 = from.x + W;
      const y1 = from.y + H / 2;
      const x2 = to.x - 2;
      const y2 = to.y + H / 2;
      const mid = (x1 + x2) / 2;
      const inputs = n.inputsFrom[d]?.join(', ');
      return [
        html`<path
          class="edge"
          data-from="${d}"
          data-to="${n.id}"
          marker-end="url(#arrow)"
          d="M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}"
          ><title>${d} → ${n.id}${inputs ? ` (${inputs})` : ''}</title></path
        >`,
      ];
    }),
  );
  const boxes = nodes.map((n) => {
    const { x, y } = at.get(n.id)!;
    const box = html`<g class="node ph-${phaseClass(n.phase)}" data-node="${n.id}" data-phase="${n.phase}"
      ><title>${n.id}: ${n.phase}</title><rect x="${x}" y="${y}" width="${W}" height="${H}" rx="6" /><text
        class="id"
        x="${x + 10}"
        y="${y + 20}"
        >${short(n.id)}</text
      ><text class="phase" x="${x + 10}" y="${y + 37}">${n.phase}</text></g
    >`;
    const link = href(n.id);
    return link ? html`<a href="${link}">${box}</a>` : box;
  });
  return html`<svg
    class="dag"
    xmlns="http://www.w3.org/2000/svg"
    role="img"
    aria-label="DAG ${name}"
    width="${width}"
    height="${height}"
    viewBox="0 0 ${width} ${height}"
  >
    <defs>
      <marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="8" markerHeight="8" orient="auto">
        <path d="M0,0 L8,4 L0,8 z" fill="#8c959f" />
      </marker>
    </defs>
    ${edges} ${boxes}
  </svg>`;
}
