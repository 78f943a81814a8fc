/**
 * The metric plots' script and the charting library it draws with, served from the controller
 * (no CDN: the pages' Content-Security-Policy allows only same-origin scripts and styles).
 *
 * uPlot (MIT, https://github.com/leeoniya/uPlot) is read once from its npm package, which is a
 * production dependency: `node_modules/uplot/dist/uPlot.iife.min.js` and `uPlot.min.css`.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let uplot: { js: string; css: string } | undefined;

/** uPlot's script (defines the global `uPlot`) and stylesheet, read on first use. */
export function uplotAssets(): { js: string; css: string } {
  uplot ??= {
    js: readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8'),
    css: readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8'),
  };
  return uplot;
}

/** Styles of the plots, appended to app.css. */
export const PLOTS_CSS = `
.plots { display: flex; flex-wrap: wrap; gap: 1em 2em; }
.plots figure { margin: 0; }
.plots figcaption { font-weight: 600; margin-bottom: .2em; }
.plots .resume-mark { position: absolute; top: 0; bottom: 0; width: 0; border-left: 1.5px dashed #bc4c00; pointer-events: none; }
.plots .resume-mark span { position: absolute; top: 2px; left: 4px; white-space: nowrap; font-size: 11px; color: #bc4c00; background: rgba(255,255,255,.85); padding: 0 .3em; }
.plots .note { color: var(--muted); }
.compare-bar a.disabled { color: var(--muted); pointer-events: none; }
.metric-picker a, .metric-picker strong { margin-right: .8em; }
`;

/**
 * Draws the plots of `#plots` from its `data-metrics` endpoint with uPlot. `data-mode="run"`: one
 * plot per metric, the run's curve across attempts, the redone points faded, each resume point a
 * dashed line labelled in the DOM (`.resume-mark[data-attempt][data-step]`). `data-mode="compare"`:
 * one plot, a line per run. Asks for as many points as the plot is wide (the server downsamples);
 * follows a live run until it ends. Plots are `window.advPlots[name]` (uPlot instances) and, once
 * all are drawn, `body[data-plots-drawn]` is set and `performance.mark('adv-plots-drawn')` made.
 */
export const PLOTS_JS = `
'use strict';
(() => {
  const root = document.getElementById('plots');
  if (!root || !root.dataset.metrics) return;
  const body = document.body;
  const every = 2 * (Number(body.dataset.refreshMs) || 2000);
  const plots = (window.advPlots = {});
  const figures = {};
  const note = (text) => {
    let p = root.querySelector('p.note');
    if (!text) { if (p) p.remove(); return; }
    if (!p) { p = document.createElement('p'); p.className = 'note'; root.prepend(p); }
    p.textContent = text;
  };
  const width = () => Math.max(320, Math.min(root.clientWidth ? (root.dataset.mode === 'compare' ? root.clientWidth - 20 : (root.clientWidth - 40) / 2) : 600, 1360));
  const url = () => root.dataset.metrics + (root.dataset.metrics.includes('?') ? '&' : '?') + 'points=' + Math.round(width());
  const color = (i) => 'hsl(' + Math.round((i * 137.508) % 360) + ',65%,42%)';
  const fmt = (v) => v == null ? '-' : Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(3) : String(Math.round(v * 1e6) / 1e6);

  // Marks stay DOM elements over the plot, so they are readable (and testable) as text.
  const markPlugin = (getMarks) => ({
    hooks: {
      draw: (u) => {
        const marks = getMarks();
        let layer = u.over.querySelector('.resume-marks');
        if (!layer) { layer = document.createElement('div'); layer.className = 'resume-marks'; u.over.appendChild(layer); }
        layer.replaceChildren(...marks.map((m) => {
          const d = document.createElement('div');
          d.className = 'resume-mark';
          d.dataset.attempt = String(m.attempt);
          d.dataset.step = String(m.step);
          d.style.left = u.valToPos(m.step, 'x') + 'px';
          const s = document.createElement('span');
          s.textContent = m.label;
          d.appendChild(s);
          return d;
        }));
      },
    },
  });

  // Each new plot's first draw; once the first load's are all done, the page is "drawn".
  const firstDraws = [];
  let drawnOnce = false;
  const markDrawn = () => {
    if (drawnOnce) return;
    drawnOnce = true;
    performance.mark('adv-plots-drawn');
    body.dataset.plotsDrawn = String(Object.keys(plots).length);
  };
  const make = (name, caption, series, data, marks) => {
    const fig = document.createElement('figure');
    fig.className = 'plot';
    fig.dataset.metric = name;
    const cap = document.createElement('figcaption');
    cap.textContent = caption;
    fig.appendChild(cap);
    // A plot whose series changed is drawn again in its old place.
    if (figures[name]) {
      plots[name].destroy();
      figures[name].replaceWith(fig);
    } else root.appendChild(fig);
    figures[name] = fig;
    let first = true;
    let resolve;
    firstDraws.push(new Promise((r) => (resolve = r)));
    const opts = {
      width: width(), height: 300,
      scales: { x: { time: false } },
      axes: [{ label: 'step' }, { values: (u, vals) => vals.map(fmt), size: 70 }],
      series: [{ label: 'step' }, ...series],
      cursor: { drag: { x: true, y: false } },
      plugins: [markPlugin(() => marks.current)],
      hooks: { draw: [() => { if (first) { first = false; resolve(); } }] },
    };
    plots[name] = new uPlot(opts, data, fig);
    return fig;
  };

  // The redone points, one faded series per attempt whose steps were redone: a line never joins
  // the redone steps of two different resumes.
  const redoneByAttempt = (r) => {
    const by = new Map();
    r.steps.forEach((x, i) => {
      const a = r.attempts[i];
      if (!by.has(a)) by.set(a, [[], []]);
      by.get(a)[0].push(x);
      by.get(a)[1].push(r.values[i]);
    });
    return [...by.entries()].sort((a, b) => a[0] - b[0]);
  };
  const runPlot = (name, s) => {
    const redone = redoneByAttempt(s.redone);
    const data = uPlot.join([[s.curve.steps, s.curve.values], ...redone.map((x) => x[1])]);
    const shape = redone.map((x) => x[0]).join(',');
    const fig = figures[name];
    if (fig && fig.dataset.redoneAttempts === shape) {
      fig.marks.current = s.resumes;
      plots[name].setData(data);
    } else {
      const marks = { current: s.resumes };
      const faded = 'rgba(9,105,218,.35)';
      const series = [
        { label: name, stroke: '#0969da', width: 1.5, value: (u, v) => fmt(v) },
        ...redone.map(([a]) => ({
          label: 'attempt ' + a + ', redone', stroke: faded, width: 1, dash: [4, 3], value: (u, v) => fmt(v),
          points: { show: true, size: 4, stroke: faded, fill: 'rgba(9,105,218,.15)' },
        })),
      ];
      const f = make(name, name, series, data, marks);
      f.marks = marks;
      f.dataset.redoneAttempts = shape;
    }
    const f = figures[name];
    f.dataset.points = String(s.curve.steps.length);
    f.dataset.total = String(s.curve.total);
    f.dataset.redone = String(s.redone.total);
  };

  const comparePlot = (j) => {
    const lines = j.runs.filter((r) => r.series.steps.length);
    const data = lines.length ? uPlot.join(lines.map((r) => [r.series.steps, r.series.values])) : [[]];
    const key = 'compare';
    const names = lines.map((r) => r.run).join(',');
    if (figures[key] && figures[key].dataset.runs === names) plots[key].setData(data);
    else {
      if (figures[key]) { plots[key].destroy(); figures[key].remove(); delete figures[key]; }
      if (!lines.length) return;
      const series = lines.map((r, i) => ({ label: r.run, stroke: color(i), width: 1.5, value: (u, v) => fmt(v) }));
      make(key, j.metric, series, data, { current: [] }).dataset.runs = names;
    }
    const missing = j.runs.filter((r) => r.missing);
    let ul = root.querySelector('ul.missing');
    if (!ul) { ul = document.createElement('ul'); ul.className = 'missing muted'; root.appendChild(ul); }
    ul.replaceChildren(...missing.map((r) => {
      const li = document.createElement('li');
      li.dataset.run = r.run;
      li.textContent = r.run + ': ' + r.missing;
      return li;
    }));
    const picker = document.getElementById('metric-picker');
    if (picker) {
      const here = new URL(location.href);
      picker.replaceChildren(document.createTextNode('Metric: '), ...j.metrics.map((m) => {
        if (m === j.metric) { const b = document.createElement('strong'); b.textContent = m; return b; }
        here.searchParams.set('metric', m);
        const a = document.createElement('a');
        a.href = here.pathname + here.search;
        a.textContent = m;
        return a;
      }));
    }
  };

  const load = async () => {
    let j;
    try {
      const r = await fetch(url(), { cache: 'no-store', headers: { accept: 'application/json' } });
      if (!r.ok) throw new Error('HTTP ' + r.status + ': ' + (await r.text()));
      j = await r.json();
    } catch (e) {
      note('cannot read the metrics (' + e.message + ')');
      setTimeout(load, every);
      return;
    }
    if (root.dataset.mode === 'compare') {
      comparePlot(j);
      note(j.metric === null ? 'None of these runs has logged metrics' + (j.done ? '.' : ' yet…') : '');
    } else {
      for (const m of j.metrics) if (j.series[m]) runPlot(m, j.series[m]);
      note(j.metrics.length ? '' : j.done ? 'This run logged no metrics.' : 'No metrics yet…');
    }
    root.dataset.loaded = String((Number(root.dataset.loaded) || 0) + 1);
    if (!drawnOnce) Promise.all(firstDraws).then(markDrawn);
    if (j.done) root.dataset.done = 'true';
    else setTimeout(load, every);
  };
  load();
})();
`.trimStart();
