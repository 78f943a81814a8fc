/**
 * The dashboard's overview page: runs, DAGs and backends, with the specs repo's load errors and
 * signature verdict.
 */
import type { Controller } from '../controller.js';
import { age } from '../status/age.js';
import type { BackendStatusDoc, DagStatusDoc, RunStatusDoc, SourceStatusDoc } from '../status/types.js';
import { html, type Html } from './html.js';
import { badge, dagHref, progress, runHref, statusDocs, table, ownerLink, type View } from './page-kit.js';

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
