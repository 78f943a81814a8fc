/**
 * What every dashboard page is made of: the view and section types, links, badges, times, tables
 * and fact lists, read from the controller's in-memory status.
 */
import type { Controller } from '../controller.js';
import { age } from '../status/age.js';
import type { Condition, RunStatusDoc } from '../status/types.js';
import { html, phaseClass, type Html } from './html.js';
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

export const badge = (phase: string | undefined): Html =>
  phase
    ? html`<span class="badge ph-${phaseClass(phase)}">${phase}</span>`
    : html`<span class="muted">-</span>`;

/** `2026-01-21 10:03:04Z`, with the full ISO time and the age on hover. */
export function when(iso: string | undefined, now: number): Html {
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

export const firstLine = (s: string) => s.split('\n', 1)[0]!.trim();

export function progress(doc: RunStatusDoc): Html {
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

export function table(headers: (string | [string, string])[], rows: Html[], empty: string): Html {
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

export function conditionsTable(conditions: readonly Condition[], now: number): Html {
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

export const facts = (items: [string, Html | string | undefined][]): Html =>
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
export function statusDocs<T>(
  c: Controller,
  kind: 'Run' | 'DAG' | 'Backend',
  get: (name: string) => T | undefined,
): T[] {
  // Already sorted, and shared: never sorted in place.
  return c.view
    .statusNames(kind)
    .map((n) => get(n))
    .filter((d): d is T => !!d);
}

/** The Sweep a run is a point of (its label names its owner), else undefined: its owner is a DAG. */
export const sweepOf = (d: RunStatusDoc): string | undefined =>
  d.status.owner && d.metadata.labels?.[SWEEP_LABEL] === d.status.owner ? d.status.owner : undefined;

/** A child run's owner: a link to the DAG's page, or the sweep's name (a sweep has no page; `adv describe sweep`). */
export const ownerLink = (d: RunStatusDoc, owner: string): Html =>
  sweepOf(d)
    ? html`<span title="adv describe sweep ${owner}">sweep/${owner}</span>`
    : html`<a href="${dagHref(owner)}">dag/${owner}</a>`;
