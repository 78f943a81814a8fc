/**
 * The dashboard's pages, rendered on the server from the controller's in-memory status. A page is
 * a list of sections; the ones with an id are re-rendered by `GET /ui/api/...` every refresh and
 * swapped in place by the script, the others (the log tail) are rendered once.
 */
import type { Controller } from '../controller.js';
import { age } from '../status/age.js';
import { attemptCost, formatCost, formatMoney, runCost } from '../status/cost.js';
import { graphOf, type GraphNode } from '../status/dag-graph.js';
import type {
  Attempt,
  BackendStatusDoc,
  Condition,
  DagStatusDoc,
  RunStatusDoc,
  SourceStatusDoc,
} from '../status/types.js';
import { html, phaseClass, type Html } from './html.js';
import { dagSvg } from './svg.js';
import { SWEEP_LABEL } from '../reconcile/sweep-plan.js';

export interface Section {
  /** Refreshed from the page's JSON endpoint when set. */
  id?: string;
  body: Html;
}

export interface View {
  title: string;
  sections: Section[];
  /** What the page's JSON endpoint returns besides the sections. */
  data: Record<string, unknown>;
  /** The page draws metric plots (`#plots`): it loads uPlot and the plots' script. */
  plots?: boolean;
}

export const runHref = (name: string): string => `/ui/runs/${encodeURIComponent(name)}`;
export const dagHref = (name: string): string => `/ui/dags/${encodeURIComponent(name)}`;
export const compareHref = (runs: readonly string[], metric?: string): string =>
  `/ui/compare?runs=${runs.map(encodeURIComponent).join(',')}${metric ? `&metric=${encodeURIComponent(metric)}` : ''}`;

const badge = (phase: string | undefined): Html =>
  phase
    ? html`<span class="badge ph-${phaseClass(phase)}">${phase}</span>`
    : html`<span class="muted">-</span>`;

/** `2026-01-21 10:03:04Z`, with the full ISO time and the age on hover. */
function when(iso: string | undefined, now: number): Html {
  if (!iso || Number.isNaN(Date.parse(iso))) return html`<span class="muted">-</span>`;
  const text = new Date(iso)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z');
  return html`<time datetime="${iso}" title="${age(iso, now)} ago">${text}</time>`;
}

/** `45s`, `3m 05s`, `2h 03m`. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${String(m % 60).padStart(2, '0')}m`;
}

const firstLine = (s: string) => s.split('\n', 1)[0]!.trim();

function progress(doc: RunStatusDoc): Html {
  const step = doc.status.checkpoint?.step;
  const total = doc.appliedSpec?.totalSteps;
  if (total) {
    if (step === undefined) return html`<span class="muted">- / ${total}</span>`;
    const pct = Math.min(100, Math.round((100 * step) / total));
    return html`<progress value="${Math.min(step, total)}" max="${total}" title="${pct}%"></progress>
      <span class="mono">${step} / ${total}</span>`;
  }
  return step === undefined ? html`<span class="muted">-</span>` : html`<span class="mono">${step}</span>`;
}

function table(headers: (string | [string, string])[], rows: Html[], empty: string): Html {
  const th = headers.map((h) =>
    Array.isArray(h) ? html`<th class="${h[1]}">${h[0]}</th>` : html`<th>${h}</th>`,
  );
  return html`<table>
    <thead>
      <tr>
        ${th}
      </tr>
    </thead>
    <tbody>
      ${
        rows.length
          ? rows
          : html`<tr>
              <td class="empty" colspan="${headers.length}">${empty}</td>
            </tr>`
      }
    </tbody>
  </table>`;
}

function conditionsTable(conditions: readonly Condition[], now: number): Html {
  return table(
    ['Type', 'Status', 'Reason', 'Message', 'Since'],
    conditions.map(
      (c) =>
        html`<tr data-condition="${c.type}">
          <td>${c.type}</td>
          <td>${badge(c.status)}</td>
          <td>${c.reason}</td>
          <td class="why">${c.message}</td>
          <td>${age(c.lastTransitionTime, now)}</td>
        </tr>`,
    ),
    'No conditions.',
  );
}

const facts = (items: [string, Html | string | undefined][]): Html =>
  html`<dl class="facts">
    ${items
      .filter(([, v]) => v !== undefined && v !== '')
      .map(
        ([k, v]) =>
          html`<dt>${k}</dt>
            <dd>${v}</dd>`,
      )}
  </dl>`;

// ---------------------------------------------------------------------------------------------
// Overview

/** The status documents of one kind, by name; a name whose document is gone is left out. */
function statusDocs<T>(
  c: Controller,
  kind: 'Run' | 'DAG' | 'Backend',
  get: (name: string) => T | undefined,
): T[] {
  return c.view
    .statusNames(kind)
    .sort()
    .map((n) => get(n))
    .filter((d): d is T => !!d);
}

/** The Sweep a run is a point of (its label names its owner), else undefined: its owner is a DAG. */
const sweepOf = (d: RunStatusDoc): string | undefined =>
  d.status.owner && d.metadata.labels?.[SWEEP_LABEL] === d.status.owner ? d.status.owner : undefined;

/** A child run's owner: a link to the DAG's page, or the sweep's name (a sweep has no page; `adv describe sweep`). */
const ownerLink = (d: RunStatusDoc, owner: string): Html =>
  sweepOf(d)
    ? html`<span title="adv describe sweep ${owner}">sweep/${owner}</span>`
    : html`<a href="${dagHref(owner)}">dag/${owner}</a>`;

function runRows(runs: readonly RunStatusDoc[], now: number): Html[] {
  return runs.map((d) => {
    const a = d.status.attempts.at(-1);
    const name = d.metadata.name;
    const owner = d.status.owner;
    return html`<tr data-run="${name}">
      <td data-col="select">
        <input type="checkbox" class="compare" value="${name}" aria-label="compare ${name}" />
      </td>
      <td data-col="name"><a href="${runHref(name)}">${name}</a></td>
      <td data-col="owner">${owner ? ownerLink(d, owner) : ''}</td>
      <td data-col="phase">${badge(d.status.phase)}</td>
      <td data-col="backend">${a?.backend ?? '-'}</td>
      <td data-col="attempt" class="num">${a?.n ?? '-'}</td>
      <td data-col="progress">${progress(d)}</td>
      <td data-col="age">${age(d.status.createdAt ?? d.status.attempts[0]?.submittedAt, now)}</td>
      <td data-col="reason" class="muted">${d.status.reason ?? ''}</td>
    </tr>`;
  });
}

function dagRows(dags: readonly DagStatusDoc[], now: number): Html[] {
  return dags.map((d) => {
    const nodes = Object.values(d.status.nodes);
    const ok = nodes.filter((x) => x.phase === 'Succeeded').length;
    const name = d.metadata.name;
    return html`<tr data-dag="${name}">
      <td data-col="name"><a href="${dagHref(name)}">${name}</a></td>
      <td data-col="phase">${badge(d.status.phase)}</td>
      <td data-col="nodes" class="num">${ok}/${nodes.length}</td>
      <td data-col="age">${age(d.status.createdAt, now)}</td>
      <td data-col="reason" class="muted">${d.status.reason ?? ''}</td>
    </tr>`;
  });
}

function backendRows(backends: readonly BackendStatusDoc[]): Html[] {
  return backends.map((d) => {
    const ready = d.status.conditions.find((x) => x.type === 'Ready');
    const degraded = d.status.conditions.find((x) => x.type === 'Degraded');
    const name = d.metadata.name;
    return html`<tr data-backend="${name}">
      <td data-col="name">${name}</td>
      <td data-col="type">${d.status.type}</td>
      <td data-col="ready">
        ${badge(ready?.status ?? 'Unknown')}
        <span class="muted">${ready?.status === 'True' ? '' : (ready?.message ?? '')}</span>
      </td>
      <td data-col="degraded">
        ${
          degraded?.status === 'True'
            ? html`${badge('Degraded')} <span class="why">${degraded.message}</span>`
            : html`<span class="muted">no</span>`
        }
      </td>
      <td data-col="active" class="num">${d.status.activeAttempts}</td>
    </tr>`;
  });
}

/** The overview's JSON: the tables' facts, as values rather than markup. */
function overviewData(
  runs: readonly RunStatusDoc[],
  dags: readonly DagStatusDoc[],
  backends: readonly BackendStatusDoc[],
): View['data'] {
  return {
    runs: runs.map((d) => {
      const a = d.status.attempts.at(-1);
      return {
        name: d.metadata.name,
        owner: d.status.owner ?? null,
        phase: d.status.phase,
        reason: d.status.reason ?? null,
        backend: a?.backend ?? null,
        attempt: a?.n ?? null,
        step: d.status.checkpoint?.step ?? null,
        totalSteps: d.appliedSpec?.totalSteps ?? null,
        createdAt: d.status.createdAt ?? null,
      };
    }),
    dags: dags.map((d) => {
      const nodes = Object.values(d.status.nodes);
      return {
        name: d.metadata.name,
        phase: d.status.phase,
        succeeded: nodes.filter((x) => x.phase === 'Succeeded').length,
        nodes: nodes.length,
        createdAt: d.status.createdAt ?? null,
      };
    }),
    backends: backends.map((d) => ({
      name: d.metadata.name,
      type: d.status.type,
      ready: d.status.conditions.find((x) => x.type === 'Ready')?.status ?? 'Unknown',
      degraded: d.status.conditions.find((x) => x.type === 'Degraded')?.status === 'True',
      activeAttempts: d.status.activeAttempts,
    })),
  };
}

/** The specs repo's load errors (`sources/specs.yaml`), when there are any: file, line and fix. */
function loadErrorsSection(source: SourceStatusDoc | undefined): View['sections'] {
  const s = source?.status;
  if (!s?.errorCount) return [];
  const rows = s.errors.map(
    (e) =>
      html`<tr>
        <td data-col="file">${e.file}:${e.line}:${e.column}</td>
        <td data-col="code">${e.code}</td>
        <td data-col="message">${e.message}${e.fix ? html`<div class="muted">fix: ${e.fix}</div>` : ''}</td>
      </tr>`,
  );
  const more = s.errorCount - s.errors.length;
  return [
    {
      id: 'load-errors',
      body: html`<h2 class="error">
          Spec files that do not load <span class="muted">(${s.errorCount})</span>
        </h2>
        <p class="muted">Nothing in these is acted on until it is fixed and pushed; every other spec is.</p>
        ${table(['Where', 'Code', 'Problem'], rows, '')}
        ${more > 0 ? html`<p class="muted">…and ${more} more (adv validate lists them all).</p>` : ''}`,
    },
  ];
}

/** With trusted signers: the commit acted on, or which head was refused and why (`Verified`). */
function verificationSection(source: SourceStatusDoc | undefined): View['sections'] {
  const c = source?.status.conditions.find((x) => x.type === 'Verified');
  if (!c) return [];
  const acted = source?.status.verified;
  return [
    {
      id: 'verification',
      body:
        c.status === 'True'
          ? html`<p class="muted" data-verified="True">
              Signed commits only: acting on ${acted?.commit ?? '-'}, signed by ${acted?.signer ?? '-'}.
            </p>`
          : html`<h2 class="error">
                The watched branch's head is not acted on <span class="muted">(${c.reason})</span>
              </h2>
              <p data-verified="False">${c.message}</p>`,
    },
  ];
}

export function overviewView(c: Controller, now: number): View {
  const runs = statusDocs(c, 'Run', (n) => c.view.runStatus(n));
  const dags = statusDocs(c, 'DAG', (n) => c.view.dagStatus(n));
  const backends = statusDocs(c, 'Backend', (n) => c.view.backendStatus(n));
  const source = c.view.sourceStatus();

  return {
    title: 'AdventureTime',
    sections: [
      ...verificationSection(source),
      ...loadErrorsSection(source),
      {
        // Outside the refreshed table, so the script keeps it while the rows are swapped.
        body: html`<p class="compare-bar">
          <a id="compare-link" class="disabled" href="/ui/compare">Compare runs</a>
          <span class="muted">: tick runs below to overlay their metrics</span>
        </p>`,
      },
      {
        id: 'runs',
        body: html`<h2>Runs <span class="muted">(${runs.length})</span></h2>
          ${table(
            ['', 'Name', 'Owner', 'Phase', 'Backend', ['Attempt', 'num'], 'Progress', 'Age', 'Reason'],
            runRows(runs, now),
            'No runs yet.',
          )}`,
      },
      {
        id: 'dags',
        body: html`<h2>DAGs <span class="muted">(${dags.length})</span></h2>
          ${table(['Name', 'Phase', ['Succeeded', 'num'], 'Age', 'Reason'], dagRows(dags, now), 'No DAGs.')}`,
      },
      {
        id: 'backends',
        body: html`<h2>Backends <span class="muted">(${backends.length})</span></h2>
          ${table(
            ['Name', 'Type', 'Ready', 'Degraded', ['Active attempts', 'num']],
            backendRows(backends),
            'No backends.',
          )}`,
      },
    ],
    data: { ...overviewData(runs, dags, backends), loadErrors: source?.status.errors ?? [] },
  };
}

// ---------------------------------------------------------------------------------------------
// A run

/** Where each attempt sat in the run's life: a bar per attempt over the whole span. */
function spanBar(a: Attempt, from: number, to: number, now: number): Html {
  const start = Date.parse(a.startedAt ?? a.submittedAt ?? '');
  if (Number.isNaN(start) || to <= from) return html``;
  const end = a.finishedAt ? Date.parse(a.finishedAt) : now;
  const w = 120;
  const x = Math.round(((start - from) / (to - from)) * w);
  const width = Math.max(2, Math.round(((end - start) / (to - from)) * w));
  return html`<svg class="span" width="${w}" height="10" viewBox="0 0 ${w} 10">
    <rect class="track" width="${w}" height="10" rx="2" />
    <rect
      class="bar ph-${phaseClass(a.phase)}"
      x="${Math.min(x, w - 2)}"
      width="${Math.min(width, w - Math.min(x, w - 2))}"
      height="10"
      rx="2"
    />
  </svg>`;
}

function why(text: string | undefined): Html {
  if (!text) return html`<span class="muted">-</span>`;
  const lines = text.trim().split('\n');
  if (lines.length === 1 && text.length <= 160) return html`<div class="why small">${text}</div>`;
  // The rest keeps its line breaks (pre-wrap): no whitespace of the template may go into it.
  const rest = html`<div class="why">${lines.slice(1).join('\n')}</div>`;
  return html`<details class="small">
    <summary>${firstLine(text)}</summary>
    ${rest}
  </details>`;
}

function attemptsTable(doc: RunStatusDoc, now: number): Html {
  const attempts = doc.status.attempts;
  const times = attempts.flatMap((a) =>
    [a.startedAt ?? a.submittedAt, a.finishedAt].filter((t): t is string => !!t).map((t) => Date.parse(t)),
  );
  const from = Math.min(...times);
  const to = Math.max(...times, attempts.some((a) => !a.finishedAt) ? now : -Infinity);
  const rows = attempts.map((a) => {
    const start = a.startedAt ?? a.submittedAt;
    const took = start ? (a.finishedAt ? Date.parse(a.finishedAt) : now) - Date.parse(start) : undefined;
    const steps =
      a.startStep === undefined && a.lastStep === undefined
        ? '-'
        : `${a.startStep ?? 0} → ${a.lastStep ?? a.startStep ?? 0}`;
    const end = [a.class, a.reason].filter((x) => x && x !== a.phase);
    const cost = attemptCost(a, now);
    return html`<tr data-attempt="${a.n}">
      <td class="num">${a.n}</td>
      <td>${badge(a.phase)}</td>
      <td>${a.backend}${a.jobId ? html`<div class="muted mono">${a.jobId}</div>` : ''}</td>
      <td>${when(start, now)}</td>
      <td>${when(a.finishedAt, now)}</td>
      <td class="num">${took === undefined || Number.isNaN(took) ? '-' : duration(took)}</td>
      <td>${spanBar(a, from, to, now)}</td>
      <td>
        ${end.length ? end.join(' / ') : ''}${
          a.message ? html`<div class="muted why small">${a.message}</div>` : ''
        }
      </td>
      <td class="mono">${steps}</td>
      <td class="num">${cost ? formatCost(cost) : '-'}</td>
      <td>${why(a.why)}</td>
    </tr>`;
  });
  return table(
    [
      '#',
      'Phase',
      'Backend',
      'Start (UTC)',
      'End (UTC)',
      ['Took', 'num'],
      'Timeline',
      'End class / reason',
      'Steps',
      ['Cost', 'num'],
      'Why this backend',
    ],
    rows,
    'No attempt yet.',
  );
}

async function historyTable(c: Controller, kind: 'Run' | 'DAG', name: string, now: number): Promise<Html> {
  let commits: { oid: string; time: number; message: string }[];
  try {
    commits = await c.view.statusHistory(kind, name, 30);
  } catch (e) {
    return html`<p class="muted">The history is not available: ${(e as Error).message}</p>`;
  }
  return table(
    ['Time (UTC)', 'Commit', 'Message'],
    commits.map(
      (x) =>
        html`<tr data-commit="${x.oid}">
          <td>${when(new Date(x.time * 1000).toISOString(), now)}</td>
          <td class="mono" title="${x.oid}">${x.oid.slice(0, 10)}</td>
          <td>${firstLine(x.message)}</td>
        </tr>`,
    ),
    'No commits yet.',
  );
}

/** A run's heading and facts: phase, why, where it runs, how far it got, and which spec. */
/** The run's cost over its priced attempts (hours × the backend's costPerHour), if any has a price. */
function totalCost(attempts: RunStatusDoc['status']['attempts'], now: number): string | undefined {
  const total = runCost(attempts, now);
  return total === undefined ? undefined : `${formatMoney(total)} (hours × costPerHour)`;
}

function runSummary(doc: RunStatusDoc, now: number): Html {
  const st = doc.status;
  const last = st.attempts.at(-1);
  const owner = st.owner;
  return html`<h1>${doc.metadata.name} ${badge(st.phase)}</h1>
    ${facts([
      ['Reason', st.reason],
      ['Message', st.message ? html`<span class="why">${st.message}</span>` : undefined],
      [sweepOf(doc) ? 'Sweep' : 'DAG', owner ? ownerLink(doc, owner) : undefined],
      ['Backend', last ? `${last.backend} (attempt ${last.n})` : undefined],
      ['Progress', st.checkpoint || doc.appliedSpec?.totalSteps ? progress(doc) : undefined],
      [
        'Checkpoint',
        st.checkpoint
          ? html`step ${st.checkpoint.step}, ${age(st.checkpoint.createdAt, now)} ago`
          : undefined,
      ],
      ['Last heartbeat', st.lastHeartbeat ? `${age(st.lastHeartbeat, now)} ago` : undefined],
      ['Cost', totalCost(st.attempts, now)],
      ['Next attempt after', st.nextAttemptAfter ? when(st.nextAttemptAfter, now) : undefined],
      [
        'Created',
        st.createdAt ? html`${when(st.createdAt, now)} (${age(st.createdAt, now)} ago)` : undefined,
      ],
      ['Spec', st.specFile ? html`<span class="mono">${st.specFile}</span>` : undefined],
      [
        'Spec commit',
        st.specCommit ? html`<span class="mono">${st.specCommit.slice(0, 10)}</span>` : undefined,
      ],
      [
        'Code commit',
        st.codeCommit ? html`<span class="mono">${st.codeCommit.slice(0, 10)}</span>` : undefined,
      ],
    ])}`;
}

/**
 * Where an attempt's log goes: a `<pre>` the script fills from the logs endpoint, or why there is
 * none to show (no attempt yet, no object store, no such attempt).
 */
function logsPane(c: Controller, doc: RunStatusDoc, attempt: number | undefined): Html {
  const name = doc.metadata.name;
  const st = doc.status;
  const store = c.view.objectStore;
  if (!st.attempts.length) return html`<p class="muted">No attempt yet: reload once one has started.</p>`;
  else if (!store)
    return html`<p class="muted">
      No object store is configured (a Storage spec): logs stay on the backend.
    </p>`;
  else if (!st.attempts.some((a) => a.n === attempt))
    return html`<p class="muted">There is no attempt ${attempt}.</p>`;
  else
    return html`<p id="logs-note" class="muted">loading…</p>
      <pre
        id="logs"
        class="logs"
        data-attempt="${attempt}"
        data-logs="${`/ui/api/runs/${encodeURIComponent(name)}/logs?attempt=${attempt}`}"
      ></pre>`;
}

/** Links to each attempt's logs; the one shown is in bold. */
function attemptPicker(doc: RunStatusDoc, attempt: number | undefined): Html {
  const name = doc.metadata.name;
  const st = doc.status;
  return st.attempts.length
    ? html`<p class="attempt-picker">
        Attempt:
        ${st.attempts.map((a) =>
          a.n === attempt
            ? html`<strong>${a.n}</strong>`
            : html`<a href="${`${runHref(name)}?attempt=${a.n}`}">${a.n}</a>`,
        )}
      </p>`
    : html``;
}

export async function runView(
  c: Controller,
  doc: RunStatusDoc,
  attemptParam: number | undefined,
  now: number,
): Promise<View> {
  const name = doc.metadata.name;
  const st = doc.status;
  const attempt = attemptParam ?? st.attempts.at(-1)?.n;
  const summary = runSummary(doc, now);
  const logs = logsPane(c, doc, attempt);
  const picker = attemptPicker(doc, attempt);

  return {
    title: `run ${name}`,
    sections: [
      { id: 'summary', body: summary },
      {
        id: 'conditions',
        body: html`<h2>Conditions</h2>
          ${conditionsTable(st.conditions, now)}`,
      },
      {
        id: 'attempts',
        body: html`<h2>Attempts</h2>
          ${attemptsTable(doc, now)}`,
      },
      { body: metricsPane(c, doc) },
      {
        body: html`<h2>Logs${attempt ? html` <span class="muted">(attempt ${attempt})</span>` : ''}</h2>
          ${picker}${logs}`,
      },
      {
        id: 'history',
        body: html`<h2>Status commits</h2>
          ${await historyTable(c, 'Run', name, now)}`,
      },
    ],
    data: { run: doc },
    plots: !!c.view.objectStore,
  };
}

/** The run's metric plots (drawn by plots.js from the metrics endpoint), or why there are none. */
function metricsPane(c: Controller, doc: RunStatusDoc): Html {
  const name = doc.metadata.name;
  if (!c.view.objectStore)
    return html`<h2>Metrics</h2>
      <p class="muted">No object store is configured (a Storage spec): metrics stay on the backend.</p>`;
  return html`<h2>
      Metrics <span class="small"><a href="${compareHref([name])}">compare with other runs</a></span>
    </h2>
    <div
      id="plots"
      class="plots"
      data-mode="run"
      data-metrics="${`/ui/api/runs/${encodeURIComponent(name)}/metrics`}"
    >
      <p class="note">loading…</p>
    </div>`;
}

// ---------------------------------------------------------------------------------------------
// Comparing runs

/**
 * Several runs' curves of one metric in one plot (drawn by plots.js from `/ui/api/compare`), with
 * links to each run and a picker of the other metrics they logged (filled in by the script).
 */
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
<header><a class="brand" href="/ui/">AdventureTime</a><a href="/ui/">Overview</a><span class="muted">read-only</span><span id="live" class="live"></span></header>
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
