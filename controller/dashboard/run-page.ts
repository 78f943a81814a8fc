/**
 * The dashboard's page of one run: its summary, attempts on a time line, logs, metrics and
 * history.
 */
import type { Controller } from '../controller.js';
import { age } from '../status/age.js';
import { attemptCost, formatCost, formatMoney, runCost } from '../status/cost.js';
import { gpusOf, runUsage } from '../cost/usage.js';
import type { Attempt, RunStatusDoc } from '../status/types.js';
import { html, phaseClass, type Html } from './html.js';
import {
  badge,
  compareHref,
  conditionsTable,
  duration,
  facts,
  firstLine,
  ownerLink,
  progress,
  runHref,
  sweepOf,
  table,
  when,
  type View,
} from './page-kit.js';

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

export function why(text: string | undefined): Html {
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

export async function historyTable(
  c: Controller,
  kind: 'Run' | 'DAG',
  name: string,
  now: number,
): Promise<Html> {
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

/** GPU-hours the run's attempts held (hours run × GPUs × nodes), when it asks for GPUs. */
function gpuHours(doc: RunStatusDoc, now: number): string | undefined {
  const u = runUsage(doc, {}, now);
  return u.gpuHours > 0
    ? `${u.gpuHours.toFixed(2)} (${u.hours.toFixed(2)} h × ${gpusOf(doc)} GPUs)`
    : undefined;
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
      ['GPU-hours', gpuHours(doc, now)],
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
