// flame.js - memory-growth flame graphs (Brendan Gregg's, drawn by
// d3-flame-graph): a window's commit stacks, outermost caller at the
// bottom, each frame as wide as the bytes (or commits) of the stacks
// through it. By impacting bytes (what stayed: AIFO - AOFI, stacks that
// released more than they committed left out and counted in a note), by
// transient bytes or by commit count (churn), or by size. Frames are
// coloured by stack tag (the tag of most of their bytes; the chart's
// colours, with a legend); click zooms, search highlights. The
// differential view compares two windows, A and B (the shown one): each
// frame is as wide as the larger of its two values and coloured by B - A,
// red where it grew, blue where it shrank, stronger for a larger change.
// Data: the stacks list of /api/processes/{id}/stacks or, for the machine,
// /api/stacks (the same JSON, each stack naming its process, which then is
// the bottom frame) - the same data as the caller tree.
//
// d3-flame-graph's UMD bundle takes the d3 modules from the global `d3`:
// they are loaded (once, in dependency order) when a flame graph is first
// shown, from /vendor/ (http_static.c), so pages without one load none.

import { get } from './api.js';
import { tagColor } from './chart.js';
import { bytes, delta, count, esc, time, span, toLocalInput, fromLocalInput } from './fmt.js';

const D3 = ['d3-array', 'd3-dispatch', 'd3-selection', 'd3-color', 'd3-interpolate', 'd3-ease', 'd3-timer',
  'd3-transition', 'd3-format', 'd3-time', 'd3-time-format', 'd3-scale', 'd3-hierarchy'];
const LIMIT = 100000; // the API's largest page of stacks
let lib = null;

/** Loads d3-flame-graph and its d3 modules (classic scripts, in order). */
export function loadFlameLib() {
  if (lib) return lib;
  const css = document.createElement('link');
  css.rel = 'stylesheet';
  css.href = 'vendor/d3-flame-graph/d3-flamegraph.css';
  document.head.appendChild(css);
  const srcs = [...D3.map((m) => `vendor/${m}/${m}.min.js`), 'vendor/d3-flame-graph/d3-flamegraph.umd.min.js'];
  lib = Promise.all(srcs.map((src) => new Promise((ok, fail) => {
    const s = document.createElement('script');
    s.src = src;
    s.async = false; // run in document order, load in parallel
    s.onload = ok;
    s.onerror = () => fail(new Error(`could not load ${src} (run \`npm ci\` in web/)`));
    document.head.appendChild(s);
  }))).then(() => window.flamegraph);
  lib.catch(() => { lib = null; });
  return lib;
}

export const METRICS = {
  impacting: { label: 'Impacting bytes (what stayed)', of: (s) => s.impacting_bytes, fmt: bytes },
  transient: { label: 'Transient bytes (churn)', of: (s) => s.transient_bytes, fmt: bytes },
  count: { label: 'Commit count (churn)', of: (s) => s.commit_count, fmt: count },
  size: { label: 'Size (bytes committed)', of: (s) => s.size_bytes, fmt: bytes },
};

/** The flame tree of stacks: {name, value, a, b, tag, tags, children}.
 * b: each stack's value in the shown window; a: in the compared one (or
 * null). value = sum over the stacks through a frame of b, or of max(a, b)
 * when comparing; a and b are the frame's sums, delta = b - a. Frames
 * merge by name under the same parent; `machine`: the process name is the
 * bottom frame. Stacks whose value is not positive are left out. */
export function flameTree(stacksB, stacksA, metric, machine) {
  const m = METRICS[metric];
  const key = (s) => (machine ? s.process + '\n' : '') + s.frames.join('\n');
  const rows = new Map();
  for (const s of stacksB) rows.set(key(s), { s, a: 0, b: m.of(s) });
  for (const s of stacksA || []) {
    const r = rows.get(key(s));
    if (r) r.a = m.of(s);
    else rows.set(key(s), { s, a: m.of(s), b: 0 });
  }
  const node = (name) => ({ name, value: 0, a: 0, b: 0, tags: {}, children: [], kids: new Map() });
  const root = node('all');
  let dropped = 0, droppedBytes = 0;
  for (const { s, a, b } of rows.values()) {
    const pa = Math.max(0, a), pb = Math.max(0, b);
    const v = stacksA ? Math.max(pa, pb) : pb;
    if (!(v > 0)) { if (b < 0) { dropped++; droppedBytes += b; } continue; }
    const frames = machine ? [s.process, ...s.frames] : s.frames;
    let n = root;
    const add = (x) => { x.value += v; x.a += pa; x.b += pb; x.tags[s.tag] = (x.tags[s.tag] || 0) + v; };
    add(n);
    for (const f of frames) {
      let c = n.kids.get(f);
      if (!c) { c = node(f); n.kids.set(f, c); n.children.push(c); }
      n = c;
      add(n);
    }
  }
  const done = (x) => {
    delete x.kids;
    let best = null;
    for (const [t, v] of Object.entries(x.tags)) if (!best || v > x.tags[best]) best = t;
    x.tag = best;
    x.delta = x.b - x.a;
    x.children.sort((p, q) => q.value - p.value || (p.name < q.name ? -1 : 1));
    x.children.forEach(done);
  };
  done(root);
  return { root, dropped, droppedBytes };
}

/** A red (grew) or blue (shrank) shade, stronger for a larger change. */
export function diffColor(d, maxAbs) {
  const t = maxAbs > 0 ? Math.min(1, Math.abs(d) / maxAbs) : 0;
  if (d === 0 || t === 0) return 'rgb(220,220,220)';
  const c = Math.round(225 - 175 * t);
  return d > 0 ? `rgb(255,${c},${c})` : `rgb(${c},${c},255)`;
}

/** The flame graph panel in el. opts.stacks(params) fetches the stacks
 * JSON for {from, to, type, sort, limit}; opts.machine: the machine's;
 * opts.metric: the measure first shown, opts.onMetric(m) hears changes.
 * Returns {show(from, to), destroy()}. window.cwFlameDrawnAt is set when
 * a graph is on screen (the browser test measures first paint by it). */
export function flamePanel(el, opts) {
  el.innerHTML = `
    <section class="controls">
      <label>Width <select class="fmetric">${Object.entries(METRICS).map(([k, m]) => `<option value="${k}">${m.label}</option>`).join('')}</select></label>
      <label class="grow">Search <input class="fsearch" type="search" placeholder="frame text (highlights matches)"></label>
      <button class="freset" type="button">Reset zoom</button>
      <label><input class="fdiff" type="checkbox"> differential</label>
      <span class="fa" hidden>
        <label>A from <input class="fafrom" type="datetime-local" step="1"></label>
        <label>A to <input class="fato" type="datetime-local" step="1"></label>
      </span>
    </section>
    <p class="muted hint fwin"></p>
    <div class="flegend"></div>
    <p class="note fnote" hidden></p>
    <div class="flame"></div>
    <p class="muted fdetails">&nbsp;</p>`;
  const q = (c) => el.querySelector('.' + c);
  let win = null, aWin = null, chart = null, gen = 0, cache = new Map();
  if (METRICS[opts.metric]) q('fmetric').value = opts.metric;

  // One answer per window serves every measure (a stack's value is 0 in
  // the measures it has none of): the last few are kept, so switching
  // measures or toggling the differential asks for nothing.
  const fetchStacks = (from, to) => {
    const k = `${from} ${to}`;
    if (!cache.has(k)) {
      const p = opts.stacks({ from, to, sort: 'size', limit: LIMIT, tree: 0 }); // the tree is built here
      p.catch(() => cache.delete(k));
      cache.set(k, p);
      if (cache.size > 4) cache.delete(cache.keys().next().value);
    }
    return cache.get(k);
  };

  async function draw() {
    const my = ++gen;
    const t0 = performance.now();
    const metric = q('fmetric').value, m = METRICS[metric];
    const diff = q('fdiff').checked && aWin;
    const [B, A, fg] = await Promise.all([fetchStacks(win[0], win[1]), diff ? fetchStacks(aWin[0], aWin[1]) : null, loadFlameLib()]);
    if (my !== gen) return;
    const { root, dropped, droppedBytes } = flameTree(B.stacks, A ? A.stacks : null, metric, opts.machine);
    const notes = [];
    if (B.total > B.stacks.length || (A && A.total > A.stacks.length))
      notes.push(`Only the first ${count(LIMIT)} stacks of a window are drawn (${count(Math.max(B.total, A ? A.total : 0))} in all).`);
    if (dropped && !A) notes.push(`${count(dropped)} ${dropped === 1 ? 'stack' : 'stacks'} released more than ${dropped === 1 ? 'it' : 'they'} committed in the window (${delta(droppedBytes)}): not drawn; the differential view shows what shrank.`);
    q('fnote').hidden = !notes.length;
    q('fnote').textContent = notes.join(' ');
    q('fwin').innerHTML = `${A ? `A ${esc(time(A.window.from_ns))} – ${esc(time(A.window.to_ns))}, B ` : ''}${esc(time(B.window.from_ns))} – ${esc(time(B.window.to_ns))} (${esc(span(B.window.to_ns - B.window.from_ns))}) · total ${esc(m.fmt(A ? root.b : root.value))}${A ? ` (A ${esc(m.fmt(root.a))}, B − A ${esc(metric === 'count' ? (root.delta > 0 ? '+' : '') + count(root.delta) : delta(root.delta))})` : ''}. Click a frame to zoom.`;
    const box = q('flame');
    box.innerHTML = '';
    if (chart) { chart.destroy(); chart = null; }
    if (!root.value) {
      box.innerHTML = '<p class="muted">Nothing to draw in this window for this measure.</p>';
      q('flegend').innerHTML = '';
      el.dataset.drawn = String(my);
      window.cwFlameDrawnAt = performance.now();
      return;
    }
    let maxAbs = 0;
    const walk = (x) => { maxAbs = Math.max(maxAbs, Math.abs(x.delta)); x.children.forEach(walk); };
    if (A) root.children.forEach(walk);
    const fmtD = (v) => (metric === 'count' ? (v > 0 ? '+' : '') + count(v) : delta(v));
    const label = (d) => {
      const x = d.data, pct = (100 * x.value / root.value).toFixed(2);
      const tags = Object.entries(x.tags).sort((p, r) => r[1] - p[1]);
      const tagText = tags.length > 1 ? tags.map(([t, v]) => `${t} ${(100 * v / x.value).toFixed(0)}%`).join(', ') : x.tag;
      return A ? `${x.name}\nA ${m.fmt(x.a)}, B ${m.fmt(x.b)}, B − A ${fmtD(x.delta)}\ntag: ${tagText}`
        : `${x.name}\n${m.fmt(x.value)} (${pct}%)\ntag: ${tagText}`;
    };
    chart = fg.default()
      .width(Math.max(300, box.clientWidth || el.clientWidth || 800))
      .cellHeight(18)
      .minFrameSize(1)
      .transitionDuration(250)
      .setColorMapper((d) => (d.highlight ? '#e600e6' : A ? diffColor(d.data.delta, maxAbs) : tagColor(d.data.tag || '')))
      .setLabelHandler(label)
      .setSearchMatch((d, term) => !!term && d.data.name.toLowerCase().includes(term.toLowerCase()))
      .setSearchHandler((res, sum, total) => {
        q('fdetails').textContent = q('fsearch').value
          ? `search: ${count(res.length)} frames match, ${m.fmt(sum)} of ${m.fmt(total)} (${total ? (100 * sum / total).toFixed(1) : 0}%)` : '\u00a0';
      })
      .setDetailsHandler((t) => { q('fdetails').textContent = t ? t.replace(/\n/g, ' · ') : '\u00a0'; });
    window.d3.select(box).datum(root).call(chart);
    if (q('fsearch').value) chart.search(q('fsearch').value);
    legend(root, A);
    el.dataset.drawn = String(my);
    el.dataset.metric = metric;
    el.dataset.diff = A ? '1' : '';
    box._flame = { chart, root };
    window.cwFlameDrawnAt = performance.now();
    window.cwFlameMs = window.cwFlameDrawnAt - t0;
  }

  function legend(root, A) {
    if (A) {
      q('flegend').innerHTML = `<span class="swatch" style="background:${diffColor(1, 1)}"></span>grew (B > A)
        <span class="swatch" style="background:${diffColor(-1, 1)}"></span>shrank (B < A)
        <span class="swatch" style="background:${diffColor(0, 1)}"></span>unchanged`;
      return;
    }
    const tags = {};
    const walk = (x) => { if (!x.children.length) tags[x.tag] = (tags[x.tag] || 0) + x.value; x.children.forEach(walk); };
    walk(root);
    q('flegend').innerHTML = Object.entries(tags).sort((a, b) => b[1] - a[1]).map(([t]) =>
      `<span class="ftag" data-tag="${esc(t)}"><span class="swatch" style="background:${tagColor(t)}"></span>${esc(t)}</span>`).join(' ');
  }

  const fail = (e) => { q('flame').innerHTML = `<p class="error">${esc(e.message)}</p>`; };
  const redraw = () => draw().catch(fail);
  const setA = () => {
    const a = fromLocalInput(q('fafrom').value), b = fromLocalInput(q('fato').value);
    if (a == null || b == null || a >= b) { fail(new Error('A: from must be before to.')); return false; }
    aWin = [a, b];
    return true;
  };
  q('fmetric').onchange = () => { if (opts.onMetric) opts.onMetric(q('fmetric').value); redraw(); };
  q('freset').onclick = () => { if (chart) chart.resetZoom(); };
  let typing = null;
  q('fsearch').oninput = () => {
    clearTimeout(typing);
    typing = setTimeout(() => { if (!chart) return; if (q('fsearch').value) chart.search(q('fsearch').value); else chart.clear(); }, 150);
  };
  q('fdiff').onchange = () => {
    q('fa').hidden = !q('fdiff').checked;
    if (q('fdiff').checked && !aWin && win) {
      // By default A is the window of the same length just before B.
      aWin = [win[0] - (win[1] - win[0]), win[0]];
      q('fafrom').value = toLocalInput(aWin[0]);
      q('fato').value = toLocalInput(aWin[1]);
    }
    redraw();
  };
  q('fafrom').onchange = q('fato').onchange = () => { if (setA()) redraw(); };

  return {
    /** Draws the window [from, to); a (optional): the compared window A. */
    show(from, to, a = null) {
      win = [from, to];
      cache = new Map(); // a new window: the data may have grown (live)
      if (a) {
        aWin = a;
        q('fdiff').checked = true;
        q('fa').hidden = false;
        q('fafrom').value = toLocalInput(a[0]);
        q('fato').value = toLocalInput(a[1]);
      }
      return draw().catch(fail);
    },
    destroy() { gen++; if (chart) chart.destroy(); chart = null; },
  };
}

/** The stacks of process id (opts.stacks for a process page). */
export const processStacks = (id) => (p) => get(`/api/processes/${id}/stacks`, p);
/** The machine's stacks (opts.stacks for the overview). */
export const machineStacks = (p) => get('/api/stacks', p);
