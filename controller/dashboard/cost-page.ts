/**
 * The cost page (`/ui/cost?by=team`): money and GPU-hours per run and, with `by`, per value of a
 * label, from the status documents the controller holds (runs deleted since included); `since` and
 * `until` clip attempt time to a period. The same report as `adv cost` (cost/usage.ts).
 */
import type { Controller } from '../controller.js';
import { usageReport, type UsageRow } from '../cost/usage.js';
import { formatMoney } from '../status/cost.js';
import { html, type Html } from './html.js';
import { runHref, statusDocs, table, type View } from './page-kit.js';

/** What the page is asked for; the route checks it (`costQuery`). */
export interface CostQuery {
  by?: string;
  sinceMs?: number;
  untilMs?: number;
}

/** A label key as `metadata.labels` takes it: what `by` may be. */
const LABEL_KEY = /^[A-Za-z0-9]([A-Za-z0-9._/-]{0,252}[A-Za-z0-9])?$/;

/** The page's query from the URL, or what is wrong with it. */
export function costQuery(url: URL): CostQuery | string {
  const by = url.searchParams.get('by') || undefined;
  if (by !== undefined && !LABEL_KEY.test(by)) return `by=${by} is not a label key`;
  const out: CostQuery = by !== undefined ? { by } : {};
  for (const key of ['since', 'until'] as const) {
    const v = url.searchParams.get(key);
    if (!v) continue;
    const ms = Date.parse(v);
    if (!Number.isFinite(ms)) return `${key}=${v} is not a date (ISO 8601, e.g. 2026-11-01)`;
    out[key === 'since' ? 'sinceMs' : 'untilMs'] = ms;
  }
  return out;
}

const money = (u: UsageRow) => (u.priced ? formatMoney(u.cost) : '-');

function rows(list: readonly UsageRow[], link: boolean): Html[] {
  return list.map(
    (u) =>
      html`<tr>
        <td>${link ? html`<a href="${runHref(u.name)}">${u.name}</a>` : u.name}</td>
        <td class="num">${money(u)}</td>
        <td class="num">${u.gpuHours.toFixed(2)}</td>
        <td class="num">${u.hours.toFixed(2)}</td>
        <td class="num">${u.attempts}</td>
      </tr>`,
  );
}

const HEADERS: [string, string][] = [
  ['Cost', 'num'],
  ['GPU-hours', 'num'],
  ['Hours', 'num'],
  ['Attempts', 'num'],
];

export function costView(c: Controller, q: CostQuery, now: number): View {
  const docs = statusDocs(c, 'Run', (n) => c.view.runStatus(n));
  const r = usageReport(docs, q, now);
  const t = r.total;
  const byLabel =
    q.by !== undefined && r.groups
      ? html`<h2>By label ${q.by}</h2>
          ${table([q.by, ...HEADERS], rows(r.groups, false), 'no run used anything')}`
      : html``;
  return {
    title: 'cost',
    sections: [
      {
        id: 'cost',
        body: html`<h1>Cost and GPU-hours</h1>
          <p>
            Total: <b>${t.priced ? formatMoney(t.cost) : '-'}</b> over ${t.priced} priced attempt(s);
            ${t.gpuHours.toFixed(2)} GPU-hours; ${r.runs.length} run(s).
            <span class="muted">Group by a label: <span class="mono">/ui/cost?by=team</span>.</span>
          </p>
          ${byLabel}
          <h2>By run</h2>
          ${table(['Run', ...HEADERS], rows(r.runs, true), 'no run used anything')}`,
      },
    ],
    data: { report: r },
  };
}
