/**
 * Runs as families (`adv get runs --tree`): each run followed by its forks (`status.forkedFrom`),
 * drawn as a tree in the NAME column, with the parent's step in a FROM column. A fork whose parent
 * is not listed (filtered out, or its status gone) starts a tree of its own, its FROM still says
 * where it came from.
 */
import type { RunStatusDoc } from '../controller/index.js';

/** Each run with its depth-first position: the tree drawn before its name. */
export interface TreeRow {
  doc: RunStatusDoc;
  prefix: string;
}

/** The runs ordered parent first, forks under it (in the order given), each with its drawing. */
export function forkTree(docs: readonly RunStatusDoc[]): TreeRow[] {
  const names = new Set(docs.map((d) => d.metadata.name));
  const children = new Map<string, RunStatusDoc[]>();
  for (const d of docs) {
    const p = d.status.forkedFrom?.run;
    if (p && names.has(p) && p !== d.metadata.name) children.set(p, [...(children.get(p) ?? []), d]);
  }
  const out: TreeRow[] = [];
  const seen = new Set<string>();
  const walk = (d: RunStatusDoc, lead: string, branch: string): void => {
    if (seen.has(d.metadata.name)) return;
    seen.add(d.metadata.name);
    out.push({ doc: d, prefix: lead + branch });
    const kids = (children.get(d.metadata.name) ?? []).filter((k) => !seen.has(k.metadata.name));
    const under = lead + (branch === '' ? '' : branch === '└─ ' ? '   ' : '│  ');
    kids.forEach((k, i) => walk(k, under, i === kids.length - 1 ? '└─ ' : '├─ '));
  };
  const isRoot = (d: RunStatusDoc) => {
    const p = d.status.forkedFrom?.run;
    return !p || !names.has(p) || p === d.metadata.name;
  };
  for (const d of docs) if (isRoot(d)) walk(d, '', '');
  // Forks that lead back to themselves (a name reused for a parent) cannot hang from a root.
  for (const d of docs) walk(d, '', '');
  return out;
}

/**
 * A runs table (`rows[i]` is `docs[i]`'s row, its name first) reordered as `forkTree`, the name
 * drawn in its tree and a FROM column (`parent@step`) after it.
 */
export function treeTable(
  docs: readonly RunStatusDoc[],
  headers: string[],
  rows: string[][],
): { headers: string[]; rows: string[][] } {
  const rowOf = new Map(docs.map((d, i) => [d, rows[i]!]));
  return {
    headers: [headers[0]!, 'FROM', ...headers.slice(1)],
    rows: forkTree(docs).map(({ doc, prefix }) => {
      const [name, ...rest] = rowOf.get(doc)!;
      const f = doc.status.forkedFrom;
      return [prefix + name!, f ? `${f.run}@${f.step}` : '-', ...rest];
    }),
  };
}
