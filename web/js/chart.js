// chart.js - outstanding commit by stack tag, stacked, with the peak of
// each step drawn over it (so a transient spike shorter than a step still
// shows when zoomed out), on uPlot. Drag on the chart selects a window.

import uPlot from '../vendor/uplot/uPlot.esm.js';
import { bytes, time } from './fmt.js';

const PALETTE = ['#4e79a7', '#f28e2b', '#59a14f', '#76b7b2', '#edc948', '#b07aa1',
  '#ff9da7', '#9c755f', '#e15759', '#8cd17d', '#499894', '#d4a6c8', '#86bcb6', '#f1ce63',
  '#a0cbe8', '#ffbe7d', '#d37295', '#fabfd2', '#b6992d', '#79706e'];

// The default rules' tags (service/stacks/rules/) each have their own color,
// so the common ones never share one; other tags get one from their name.
const KNOWN = ['VirtualAlloc', 'Windows Heap', 'Thread Stack', '(before trace)', 'Other',
  'Managed Heap', 'GDI', 'V8 JS Heap', 'Video Memory', 'CLR JIT Compile', 'Loader',
  'C heap (glibc malloc)', 'Direct mmap', 'Direct brk', 'JVM Heap', 'Python obmalloc',
  'Go Runtime', 'C heap (jemalloc)', 'C heap (tcmalloc)', 'C heap (mimalloc)'];

/** A tag's color, from its name, so every chart and table agree. */
export function tagColor(tag) {
  const k = KNOWN.indexOf(String(tag));
  if (k >= 0) return PALETTE[k % PALETTE.length];
  let h = 0;
  for (const c of String(tag)) h = (h * 31 + c.codePointAt(0)) >>> 0;
  return PALETTE[h % PALETTE.length];
}

/** Tags ordered by their largest value, biggest at the bottom of the stack. */
function tagOrder(s) {
  const max = (a) => a.reduce((m, v) => Math.max(m, v), 0);
  return [...s.tags].sort((a, b) => max(s.outstanding[b]) - max(s.outstanding[a]));
}

/** The y range's top: the data's, raised to show every threshold line. */
function yTop(hi, lines) {
  const top = Math.max(hi > 0 ? hi : 0, ...(lines || []).map((l) => l.y));
  return top > 0 ? top * 1.05 : 1;
}

/** Alert periods: a shaded column per band, with its label at the top. */
function drawBands(u, bands) {
  const ctx = u.ctx, { top, height } = u.bbox;
  ctx.save();
  for (const b of bands) {
    const l = Math.max(u.bbox.left, u.valToPos(b.from_ns / 1e9, 'x', true));
    const r = Math.min(u.bbox.left + u.bbox.width, u.valToPos(b.to_ns / 1e9, 'x', true));
    if (r <= l) continue;
    ctx.fillStyle = b.color;
    ctx.fillRect(l, top, r - l, height);
  }
  ctx.restore();
}

/** Thresholds: a dashed horizontal line per line, labelled at the right. */
function drawLines(u, lines) {
  const ctx = u.ctx;
  ctx.save();
  ctx.setLineDash([6, 4]);
  ctx.lineWidth = 1.5;
  ctx.font = `${11 * devicePixelRatio}px system-ui, sans-serif`;
  ctx.textAlign = 'right';
  for (const ln of lines) {
    const y = u.valToPos(ln.y, 'y', true);
    ctx.strokeStyle = ctx.fillStyle = ln.color;
    ctx.beginPath();
    ctx.moveTo(u.bbox.left, y);
    ctx.lineTo(u.bbox.left + u.bbox.width, y);
    ctx.stroke();
    if (ln.label) ctx.fillText(ln.label, u.bbox.left + u.bbox.width - 4, y - 4);
  }
  ctx.restore();
}

/**
 * Draws series `s` (the JSON of /api/.../series) into el.
 * opts.onSelect(fromNs, toNs) is called after a drag selection, snapped
 * outward to the series' steps. opts.bands: [{from_ns, to_ns, color,
 * label}] shaded behind the data (alert periods); opts.lines: [{y, color,
 * label}] horizontal lines at y bytes (thresholds). Returns {chart,
 * destroy, select(fromNs, toNs)}.
 */
export function stackChart(el, s, opts = {}) {
  const n = s.t.length;
  const stepS = s.step_ns / 1e9;
  // A point describes the state at the end of its step.
  const xs = s.t.map((t) => t / 1e9 + stepS);
  const tags = tagOrder(s);
  const cum = [];
  let acc = new Array(n).fill(0);
  for (const tag of tags) {
    // A step the source was down for is null in every tag: drawn as a gap.
    acc = acc.map((v, i) => (v === null || s.outstanding[tag][i] === null ? null : v + s.outstanding[tag][i]));
    cum.push(acc);
  }
  // uPlot draws in order: the tallest band first, each lower one over it.
  const data = [xs];
  const series = [{ value: (u, v) => (v == null ? '–' : time(v * 1e9)) }];
  for (let k = tags.length - 1; k >= 0; k--) {
    const tag = tags[k];
    const color = tagColor(tag);
    data.push(cum[k]);
    series.push({
      label: tag,
      stroke: color,
      fill: color + 'cc',
      width: 1,
      paths: uPlot.paths.stepped({ align: -1 }),
      value: (u, v, si, di) => (di == null ? '–' : bytes(s.outstanding[tag][di])),
      points: { show: false },
    });
  }
  data.push(s.peak_bytes);
  series.push({
    label: s.peak_kind === 'exact' ? 'Peak in step' : 'Peak in step (upper bound)',
    stroke: '#c0392b',
    width: 1.5,
    dash: [4, 3],
    paths: uPlot.paths.stepped({ align: -1 }),
    value: (u, v) => (v == null ? '–' : bytes(v)),
    points: { show: false },
  });

  const width = () => Math.max(280, el.clientWidth);
  const height = () => (window.innerWidth < 600 ? 220 : (opts.height || 300));
  const u = new uPlot({
    width: width(),
    height: height(),
    series,
    scales: { x: { time: true, range: [s.window.from_ns / 1e9, s.window.to_ns / 1e9] }, y: { range: (u, lo, hi) => [0, yTop(hi, opts.lines)] } },
    axes: [{}, { values: (u, vals) => vals.map((v) => bytes(v)), size: 70 }],
    cursor: { drag: { x: true, y: false, setScale: false } },
    legend: { live: true },
    hooks: {
      setSelect: [(u) => {
        if (!opts.onSelect || u.select.width < 3) return;
        const a = u.posToVal(u.select.left, 'x');
        const b = u.posToVal(u.select.left + u.select.width, 'x');
        const from = s.window.from_ns + Math.floor((a * 1e9 - s.window.from_ns) / s.step_ns) * s.step_ns;
        const to = s.window.from_ns + Math.ceil((b * 1e9 - s.window.from_ns) / s.step_ns) * s.step_ns;
        opts.onSelect(Math.max(from, s.window.from_ns), Math.min(to, s.window.to_ns));
      }],
      drawClear: [(u) => drawBands(u, opts.bands || [])],
      draw: [(u) => { drawLines(u, opts.lines || []); window.cwChartDrawnAt = performance.now(); el.dataset.drawn = String(n); }],
    },
  }, data, el);

  el._uplot = u; // for tests and the console
  el._bands = opts.bands || [];
  el._lines = opts.lines || [];
  const ro = new ResizeObserver(() => u.setSize({ width: width(), height: height() }));
  ro.observe(el);
  return {
    chart: u,
    /** Shows [fromNs, toNs) as the selection. */
    select(fromNs, toNs) {
      const l = u.valToPos(fromNs / 1e9, 'x'), r = u.valToPos(toNs / 1e9, 'x');
      u.setSelect({ left: l, width: Math.max(1, r - l), top: 0, height: u.over.clientHeight }, false);
    },
    destroy() { ro.disconnect(); u.destroy(); },
  };
}
