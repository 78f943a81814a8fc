/**
 * The dashboard's stylesheet and script, served from the controller itself (no CDN, no web font):
 * the pages' Content-Security-Policy allows only these two files.
 */

export const CSS = `
:root {
  --fg: #1f2328; --muted: #656d76; --line: #d8dee4; --bg: #fff; --head: #f6f8fa; --link: #0969da;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--fg); background: var(--bg);
}
body { margin: 0; }
header { display: flex; gap: 1.5em; align-items: baseline; padding: .6em 1.5em; background: #24292f; color: #fff; }
header a { color: #fff; text-decoration: none; }
header .brand { font-weight: 600; font-size: 1.1em; }
header .live { margin-left: auto; color: #afb8c1; font-size: .85em; }
header .live.error { color: #ff8182; }
main { padding: 1em 1.5em 3em; max-width: 1400px; }
h1 { font-size: 1.4em; margin: .4em 0 .6em; }
h2.error { color: #cf222e; }
h1 .badge { font-size: .65em; vertical-align: middle; margin-left: .5em; }
h2 { font-size: 1.1em; margin: 1.6em 0 .5em; }
a { color: var(--link); text-decoration: none; }
a:hover { text-decoration: underline; }
table { border-collapse: collapse; width: 100%; margin-bottom: .5em; }
th, td { text-align: left; padding: .35em .7em; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--head); font-weight: 600; font-size: .85em; color: var(--muted); white-space: nowrap; }
tbody tr:hover { background: #f6f8fa; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.empty { color: var(--muted); font-style: italic; }
.muted { color: var(--muted); }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; font-size: .9em; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .25em 1.2em; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.badge { display: inline-block; padding: .05em .55em; border-radius: 1em; font-size: .85em; font-weight: 500;
  background: #eaeef2; color: #424a53; border: 1px solid rgba(0,0,0,.06); white-space: nowrap; }
.ph-Succeeded, .ph-True { background: #c8e6c9; color: #1b5e20; }
.ph-Running { background: #bbdefb; color: #0d47a1; }
.ph-Queued, .ph-Scheduling, .ph-Submitting { background: #e1f5fe; color: #01579b; }
.ph-Pending, .ph-Waiting, .ph-Unknown { background: #f5f5f5; color: #555; }
.ph-Failed, .ph-Lost, .ph-False { background: #ffcdd2; color: #b71c1c; }
.ph-Cancelled, .ph-Preempted { background: #ffe0b2; color: #e65100; }
.ph-Skipped { background: #e0e0e0; color: #616161; }
.ph-Degraded { background: #fff3cd; color: #7a5b00; }
progress { width: 7em; height: .8em; vertical-align: middle; accent-color: #2da44e; }
.why { white-space: pre-wrap; max-width: 48em; }
.small { font-size: .85em; }
details summary { cursor: pointer; }
pre.logs { background: #0d1117; color: #e6edf3; padding: .8em 1em; border-radius: 6px; max-height: 32em;
  overflow: auto; white-space: pre-wrap; word-break: break-all; margin: .3em 0; min-height: 4em; }
.attempt-picker a, .attempt-picker strong { margin-right: .6em; }
svg.dag { max-width: 100%; height: auto; background: #fbfcfd; border: 1px solid var(--line); border-radius: 6px; }
svg.dag .edge { fill: none; stroke: #8c959f; stroke-width: 1.5; }
svg.dag .node rect { stroke: #57606a; stroke-width: 1; fill: #fff; }
svg.dag .node .id { font-weight: 600; font-size: 13px; fill: #1f2328; }
svg.dag .node .phase { font-size: 11px; fill: #424a53; }
svg.dag a:hover rect { stroke-width: 2; }
svg.dag .ph-Succeeded rect { fill: #c8e6c9; }
svg.dag .ph-Running rect { fill: #bbdefb; }
svg.dag .ph-Queued rect, svg.dag .ph-Scheduling rect { fill: #e1f5fe; }
svg.dag .ph-Pending rect { fill: #eeeeee; }
svg.dag .ph-Waiting rect { fill: #f5f5f5; }
svg.dag .ph-Failed rect, svg.dag .ph-Lost rect { fill: #ffcdd2; }
svg.dag .ph-Cancelled rect, svg.dag .ph-Preempted rect { fill: #ffe0b2; }
svg.dag .ph-Skipped rect { fill: #e0e0e0; }
svg.span { vertical-align: middle; }
svg.span .track { fill: #eaeef2; }
svg.span .bar { fill: #57606a; }
svg.span .ph-Succeeded { fill: #2da44e; }
svg.span .ph-Running { fill: #0969da; }
svg.span .ph-Failed, svg.span .ph-Lost { fill: #cf222e; }
svg.span .ph-Cancelled, svg.span .ph-Preempted { fill: #bc4c00; }
`.trimStart();

/**
 * Refreshes each `[data-section]` from the page's JSON endpoint (`data-api` on <body>), and tails
 * the logs of `pre#logs` from its `data-logs` endpoint. Text is appended as text nodes, never as markup.
 * The runs ticked (`input.compare`) make `#compare-link`'s address; the ticks survive a refresh.
 */
export const JS = `
'use strict';
(() => {
  const body = document.body;
  const every = Number(body.dataset.refreshMs) || 2000;
  const live = document.getElementById('live');
  const say = (text, error) => {
    if (!live) return;
    live.textContent = text;
    live.classList.toggle('error', !!error);
  };
  const getJson = async (url) => {
    const r = await fetch(url, { cache: 'no-store', headers: { accept: 'application/json' } });
    if (!r.ok) throw new Error('HTTP ' + r.status);
    return r.json();
  };

  const picked = new Set();
  const compare = document.getElementById('compare-link');
  const syncPicked = () => {
    if (!compare) return;
    for (const box of document.querySelectorAll('input.compare')) box.checked = picked.has(box.value);
    const runs = [...picked];
    compare.href = '/ui/compare?runs=' + runs.map(encodeURIComponent).join(',');
    compare.textContent = runs.length ? 'Compare ' + runs.length + (runs.length === 1 ? ' run' : ' runs') : 'Compare runs';
    compare.classList.toggle('disabled', !runs.length);
  };
  document.addEventListener('change', (e) => {
    const box = e.target;
    if (!(box instanceof HTMLInputElement) || !box.classList.contains('compare')) return;
    if (box.checked) picked.add(box.value);
    else picked.delete(box.value);
    syncPicked();
  });

  syncPicked();

  const seen = new Map();
  let refreshes = 0;
  const refresh = async () => {
    try {
      const j = await getJson(body.dataset.api);
      for (const [id, markup] of Object.entries(j.sections || {})) {
        const el = document.querySelector('[data-section="' + id + '"]');
        if (el && seen.get(id) !== markup) {
          el.innerHTML = markup;
          seen.set(id, markup);
        }
      }
      syncPicked();
      body.dataset.refreshed = String(++refreshes);
      say('updated ' + new Date().toLocaleTimeString());
    } catch (e) {
      say('cannot reach the controller (' + e.message + ')', true);
    } finally {
      setTimeout(refresh, every);
    }
  };
  if (body.dataset.api) setTimeout(refresh, every);

  const pre = document.getElementById('logs');
  const note = document.getElementById('logs-note');
  if (pre && pre.dataset.logs) {
    let after = 0;
    const tail = async () => {
      let next = 1500;
      try {
        const j = await getJson(pre.dataset.logs + '&after=' + after);
        if (j.text) {
          const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
          pre.appendChild(document.createTextNode(j.text));
          if (pre.textContent.length > 2000000) pre.textContent = pre.textContent.slice(-1500000);
          if (atBottom) pre.scrollTop = pre.scrollHeight;
        }
        after = j.after;
        pre.dataset.parts = String(after);
        if (note) note.textContent = j.done ? (after ? 'the attempt has ended' : 'the attempt ended with no output') : (after ? 'following…' : 'no output yet…');
        if (j.more) next = 0;
        else if (j.done) {
          pre.dataset.done = 'true';
          return;
        }
      } catch (e) {
        if (note) note.textContent = 'cannot read the logs (' + e.message + ')';
      }
      setTimeout(tail, next);
    };
    tail();
  }
})();
`.trimStart();
