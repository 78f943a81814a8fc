/**
 * The dashboard's pages, rendered on the server from the controller's in-memory status. A page is
 * a list of sections; the ones with an id are re-rendered by `GET /ui/api/...` every refresh and
 * swapped in place by the script, the others (the log tail) are rendered once. The parts every
 * page uses are in page-kit.ts; the overview and a run's page in their own modules; here the
 * compare and DAG pages and the frame around every page.
 */
import type { Controller } from '../controller.js';
import { age } from '../status/age.js';
import { graphOf, type GraphNode } from '../status/dag-graph.js';
import type { DagStatusDoc } from '../status/types.js';
import { html } from './html.js';
import { dagSvg } from './svg.js';
import { badge, compareHref, conditionsTable, facts, runHref, table, when, type View } from './page-kit.js';
import { historyTable } from './run-page.js';

// The overview and run pages have their own modules; the dashboard's routes take every page from here.
export { overviewView } from './overview-page.js';
export { runView } from './run-page.js';
export type { View } from './page-kit.js';

export function compareView(c: Controller, runs: readonly string[], metric: string | undefined): View {
  const api = `/ui/api${compareHref(runs, metric).slice('/ui'.length)}`;
  const known = new Set(c.view.statusNames('Run'));
  const links = runs.map((r, i) =>
    known.has(r)
      ? html`${i ? ', ' : ''}<a href="${runHref(r)}" data-run="${r}">${r}</a>`
      : html`${i ? ', ' : ''}<span class="muted" data-run="${r}">${r}</span>`,
  );
  const body = !runs.length
    ? html`<p class="muted">
        No runs chosen: tick runs on the <a href="/ui/">overview</a>, or list them here as
        <span class="mono">/ui/compare?runs=a,b&amp;metric=loss</span>.
      </p>`
    : !c.view.objectStore
      ? html`<p class="muted">
          No object store is configured (a Storage spec): there are no metrics to compare.
        </p>`
      : html`<p id="metric-picker" class="metric-picker"></p>
          <div id="plots" class="plots" data-mode="compare" data-metrics="${api}">
            <p class="note">loading…</p>
          </div>`;
  return {
    title: `compare ${runs.join(', ')}`,
    sections: [
      {
        body: html`<h1>Compare runs</h1>
          <p>${links.length ? links : html`<span class="muted">-</span>`}</p>
          ${body}`,
      },
    ],
    data: { runs, metric: metric ?? null },
    plots: runs.length > 0 && !!c.view.objectStore,
  };
}

// ---------------------------------------------------------------------------------------------
// A DAG

/** The graph of the spec last acted on; without one, the nodes in the status, unconnected. */
export function dagGraph(doc: DagStatusDoc): GraphNode[] {
  if (doc.appliedSpec) return graphOf(doc.appliedSpec, doc);
  return Object.entries(doc.status.nodes).map(([id, n]) => ({
    id,
    phase: n.phase,
    needs: [],
    inputsFrom: {},
    depth: 0,
  }));
}

export async function dagView(c: Controller, doc: DagStatusDoc, now: number): Promise<View> {
  const name = doc.metadata.name;
  const st = doc.status;
  const runs = new Set(c.view.statusNames('Run'));
  const graph = dagGraph(doc);
  const childOf = (id: string) => st.nodes[id]?.run ?? `${name}.${id}`;
  const link = (id: string) => (runs.has(childOf(id)) ? runHref(childOf(id)) : undefined);
  const nodes = Object.values(st.nodes);
  const started = graph.map((g) => childOf(g.id)).filter((r) => runs.has(r));
  const compareNodes = started.length
    ? html`<a class="small" id="compare-nodes" href="${compareHref(started)}">compare their metrics</a>`
    : '';
  const summary = html`<h1>${name} ${badge(st.phase)}</h1>
    ${facts([
      ['Reason', st.reason],
      ['Message', st.message ? html`<span class="why">${st.message}</span>` : undefined],
      ['Nodes', `${nodes.filter((x) => x.phase === 'Succeeded').length}/${nodes.length} succeeded`],
      [
        'Created',
        st.createdAt ? html`${when(st.createdAt, now)} (${age(st.createdAt, now)} ago)` : undefined,
      ],
      ['Spec', st.specFile ? html`<span class="mono">${st.specFile}</span>` : undefined],
      [
        'Spec commit',
        st.specCommit ? html`<span class="mono">${st.specCommit.slice(0, 10)}</span>` : undefined,
      ],
    ])}`;
  const rows = graph.map((g) => {
    const n = st.nodes[g.id];
    const href = link(g.id);
    return html`<tr data-node="${g.id}">
      <td>${g.id}</td>
      <td>${badge(n?.phase ?? g.phase)}</td>
      <td>
        ${
          href
            ? html`<a href="${href}">${childOf(g.id)}</a>`
            : html`<span class="muted">${childOf(g.id)}</span>`
        }
      </td>
      <td class="num">${n?.attempts ?? '-'}</td>
      <td>${g.needs.length ? g.needs.join(', ') : '-'}</td>
      <td>${age(n?.since, now)}</td>
      <td>${n?.reason ?? ''}${n?.message ? html`<div class="muted why small">${n.message}</div>` : ''}</td>
    </tr>`;
  });
  return {
    title: `dag ${name}`,
    sections: [
      { id: 'summary', body: summary },
      {
        id: 'graph',
        body: html`<h2>Graph</h2>
          ${dagSvg(name, graph, link)}`,
      },
      {
        id: 'nodes',
        body: html`<h2>Nodes ${compareNodes}</h2>
          ${table(['Node', 'Phase', 'Run', ['Attempts', 'num'], 'Needs', 'Since', 'Reason'], rows, 'No nodes.')}`,
      },
      {
        id: 'conditions',
        body: html`<h2>Conditions</h2>
          ${conditionsTable(st.conditions, now)}`,
      },
      {
        id: 'history',
        body: html`<h2>Status commits</h2>
          ${await historyTable(c, 'DAG', name, now)}`,
      },
    ],
    data: { dag: doc },
  };
}

// ---------------------------------------------------------------------------------------------
// The frame

export function page(view: View, opts: { api?: string; refreshMs: number }): string {
  const body = view.sections.map((s) =>
    s.id ? html`<section data-section="${s.id}">${s.body}</section>` : html`<section>${s.body}</section>`,
  );
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${view.title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/ui/assets/app.css">
<script src="/ui/assets/app.js" defer></script>
${
  view.plots
    ? html`<link rel="stylesheet" href="/ui/assets/uplot.css" />
        <script src="/ui/assets/uplot.js" defer></script>
        <script src="/ui/assets/plots.js" defer></script> `
    : ''
}</head>
<body${opts.api ? html` data-api="${opts.api}" data-refresh-ms="${opts.refreshMs}"` : ''}>
<header><a class="brand" href="/ui/">AdventureTime</a><a href="/ui/">Overview</a><a href="/ui/cost">Cost</a><span class="muted">read-only</span><span id="live" class="live"></span></header>
<main>
${body}
</main>
</body>
</html>
`.text;
}

export function notFoundView(what: string): View {
  return {
    title: 'not found',
    sections: [
      {
        body: html`<h1>Not found</h1>
          <p>${what}</p>
          <p><a href="/ui/">Back to the overview</a></p>`,
      },
    ],
    data: {},
  };
}
