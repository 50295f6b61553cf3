// map.js - a process's committed memory laid out by address (issue 14), in
// the manner of Dump2Picture: the address space folded into rows of a
// canvas, gaps between clusters of ranges compressed to one empty cell, so
// a region that grows shows as a growing block. Coloured by stack tag or
// by age (the time each range was committed); two instants side by side
// or as a difference (new, freed, kept). Beside it a region list (as
// VMMap's), sortable, with runs of same-tag segments whose sizes double
// called out. Data: GET /api/processes/{id}/map (?at= or ?t1=&t2=).
// Drawing writes the cells' pixels into one ImageData, so 100,000 ranges
// draw in a few tens of ms; hover uses a cell -> range index built while
// drawing. Reserved-but-uncommitted space (the API's `reserved` columns)
// is drawn first in one faint colour, so committed memory shows on top of
// it, and listed with Type "reserved"; "Reserved: hide" leaves it out of
// the layout (a huge reservation would otherwise set the cell size).

import { get, nsParam } from './api.js';
import { tagColor } from './chart.js';
import { bytes, time, esc } from './fmt.js';

const CELL_PX = 3;            // a cell is CELL_PX x CELL_PX pixels
const MAX_ROWS = 160;         // rows of cells at most: the cell size grows instead
const GAP_KEEP = 1 << 20;     // gaps below this are drawn to scale, larger ones as one cell
const CHANGE_COLOR = { new: '#d62728', freed: '#2ca02c', kept: '#b0b0b0' };
const RESERVED_COLOR = '#dce3ec'; // reserved, not committed: faint
const NO_RESERVED = { count: 0, addr: [], size: [], reserve_ns: [], stack: [] };
const LIST_ROWS = 300;

const hex = (n) => '0x' + n.toString(16);

/** The JSON's columns, read in place (100,000 range objects cost more
 * than drawing them); obj(i) makes one range object (hover, the list). */
function viewOf(d, showReserved = true) {
  const r = d.ranges, st = new Map(d.stacks.map((x) => [x.id, x]));
  const rv = (showReserved && d.reserved) || NO_RESERVED;
  const one = (cols, i, state) => {
    const x = st.get(cols.stack[i]);
    return { addr: cols.addr[i], size: cols.size[i], state, commit_ns: state === 'committed' ? cols.commit_ns[i] : cols.reserve_ns[i],
      stack: cols.stack[i], tag: x ? x.tag : 'Other', frames: x ? x.frames : [], change: cols.change ? cols.change[i] : null };
  };
  return {
    n: r.count, addr: r.addr, size: r.size, commit: r.commit_ns, stack: r.stack, change: r.change || null, stacks: d.stacks,
    res: rv, // reserved, not committed: {count, addr, size, reserve_ns, stack}
    obj(i) { return one(r, i, 'committed'); },
    resObj(i) { return one(rv, i, 'reserved'); },
    all() {
      const out = new Array(r.count + rv.count);
      for (let i = 0; i < r.count; i++) out[i] = this.obj(i);
      for (let i = 0; i < rv.count; i++) out[r.count + i] = this.resObj(i);
      return out;
    },
  };
}

/** A layout shared by the pictures of one view: clusters of ranges (gaps
 * under GAP_KEEP kept to scale) placed one after another, one empty cell
 * between clusters; the cell size a power of two >= 4 KiB such that
 * everything fits in MAX_ROWS rows of `cols` cells. The views' committed
 * and reserved ranges come sorted by address, each list; they are merged. */
export function layout(views, cols) {
  const clusters = []; // [start, end]
  const add = (a, e) => {
    const last = clusters[clusters.length - 1];
    if (last && a - last[1] < GAP_KEEP) { if (e > last[1]) last[1] = e; } else clusters.push([a, e]);
  };
  const lists = [];
  for (const V of views) {
    lists.push({ n: V.n, addr: V.addr, size: V.size });
    if (V.res && V.res.count) lists.push({ n: V.res.count, addr: V.res.addr, size: V.res.size });
  }
  const at = lists.map(() => 0);
  for (;;) { // a merge of at most four sorted lists
    let k = -1;
    for (let q = 0; q < lists.length; q++) if (at[q] < lists[q].n && (k < 0 || lists[q].addr[at[q]] < lists[k].addr[at[k]])) k = q;
    if (k < 0) break;
    const L = lists[k], i = at[k]++;
    add(L.addr[i], L.addr[i] + L.size[i]);
  }
  const total = clusters.reduce((s, c) => s + (c[1] - c[0]), 0);
  let cell = 4096;
  const fits = (b) => clusters.reduce((n, c) => n + Math.ceil((c[1] - c[0]) / b) + 1, 0) <= cols * MAX_ROWS;
  while (!fits(cell) && cell < 2 ** 50) cell *= 2;
  let next = 0; // cell index where the next cluster starts
  const starts = clusters.map((c) => { const s = next; next += Math.ceil((c[1] - c[0]) / cell) + 1; return s; });
  const cells = Math.max(next, 1);
  /** Cell offset of address a (inside some cluster). */
  function cellOf(a) {
    let lo = 0, hi = clusters.length - 1;
    while (lo < hi) { const m = (lo + hi + 1) >> 1; if (clusters[m][0] <= a) lo = m; else hi = m - 1; }
    return starts[lo] + (a - clusters[lo][0]) / cell;
  }
  return { cell, cols, rows: Math.ceil(cells / cols), cellOf, total, nclusters: clusters.length };
}

function ageColor(ns, lo, hi) {
  if (ns == null) return '#7f7f7f'; // before tracing began
  const f = hi > lo ? (ns - lo) / (hi - lo) : 1;
  return `hsl(${Math.round(230 - 230 * f)},70%,50%)`; // old blue -> new red
}

/** '#rrggbb' or 'hsl(h,s%,l%)' as a little-endian RGBA word for ImageData. */
function rgba(css) {
  let r, g, b;
  const m = /^hsl\((\d+),(\d+)%,(\d+)%\)$/.exec(css);
  if (m) {
    const h = Number(m[1]) / 360, sat = Number(m[2]) / 100, l = Number(m[3]) / 100;
    const q = l < 0.5 ? l * (1 + sat) : l + sat - l * sat, p = 2 * l - q;
    const f = (t) => { t = (t + 1) % 1; return t < 1 / 6 ? p + (q - p) * 6 * t : t < 1 / 2 ? q : t < 2 / 3 ? p + (q - p) * (2 / 3 - t) * 6 : p; };
    [r, g, b] = [f(h + 1 / 3), f(h), f(h - 1 / 3)].map((v) => Math.round(v * 255));
  } else {
    const n = parseInt(css.slice(1, 7), 16);
    [r, g, b] = [n >> 16, (n >> 8) & 255, n & 255];
  }
  return ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;
}

/** Draws ranges on a canvas with layout L, as pixels written into one
 * ImageData (a fillRect per range cost ~1 s for 100,000 in a software
 * canvas); returns the cell -> range index for hovering (i: committed
 * range i; -2 - i: reserved range i; -1: nothing). Reserved ranges go
 * first, faint, so a cell that holds committed bytes shows them. Freed
 * ranges (a difference) are drawn as a checkerboard: the bytes are gone. */
function paint(canvas, V, L, colorOf) {
  const W = L.cols * CELL_PX, H = Math.max(1, L.rows) * CELL_PX;
  canvas.width = W;
  canvas.height = H;
  const ctx = canvas.getContext('2d');
  const img = ctx.createImageData(W, H), px = new Uint32Array(img.data.buffer);
  px.fill(rgba('#fafafa'));
  const hit = new Int32Array(L.cols * Math.max(1, L.rows)).fill(-1);
  const words = new Map();
  const faint = rgba(RESERVED_COLOR), R = V.res;
  for (let i = 0; i < R.count; i++) {
    const a = Math.floor(L.cellOf(R.addr[i])), b = Math.max(a + 1, Math.ceil(L.cellOf(R.addr[i] + R.size[i])));
    for (let k = a; k < b; k++) {
      if (hit[k] < -1) continue; // a reserved range already there
      hit[k] = -2 - i;
      const x0 = (k % L.cols) * CELL_PX, y0 = Math.floor(k / L.cols) * CELL_PX;
      for (let y = 0; y < CELL_PX; y++) px.fill(faint, (y0 + y) * W + x0, (y0 + y) * W + x0 + CELL_PX);
    }
  }
  for (let i = 0; i < V.n; i++) {
    const c = colorOf(i), freed = V.change !== null && V.change[i] === 'freed';
    let w = words.get(c);
    if (w === undefined) words.set(c, (w = rgba(c)));
    const a = Math.floor(L.cellOf(V.addr[i])), b = Math.max(a + 1, Math.ceil(L.cellOf(V.addr[i] + V.size[i])));
    for (let k = a; k < b; k++) {
      if (freed && hit[k] >= 0) continue; // what is committed there now shows
      hit[k] = i;
      const x0 = (k % L.cols) * CELL_PX, y0 = Math.floor(k / L.cols) * CELL_PX;
      for (let y = 0; y < CELL_PX; y++) {
        const row = (y0 + y) * W + x0;
        for (let x = 0; x < CELL_PX; x++) if (!freed || ((x + y) & 1) === 0) px[row + x] = w;
      }
    }
  }
  ctx.putImageData(img, 0, 0);
  return hit;
}

/** Runs of >= 3 same-tag ranges, in commit order, each twice the size of
 * the one before (heap segments growing by doubling). */
export function doublingRuns(ranges) {
  const byTag = new Map();
  for (const r of ranges) {
    if (r.change === 'freed' || r.state === 'reserved') continue;
    if (!byTag.has(r.tag)) byTag.set(r.tag, []);
    byTag.get(r.tag).push(r);
  }
  const runs = [];
  for (const [tag, rs] of byTag) {
    rs.sort((a, b) => (a.commit_ns ?? -Infinity) - (b.commit_ns ?? -Infinity) || a.addr - b.addr);
    let run = [rs[0]];
    const flush = () => { if (run.length >= 3) runs.push({ tag, ranges: run }); };
    for (let i = 1; i < rs.length; i++) {
      if (rs[i].size === 2 * run[run.length - 1].size) run.push(rs[i]);
      else { flush(); run = [rs[i]]; }
    }
    flush();
  }
  return runs;
}

/** The map section of the process page: el is emptied and filled.
 * opts.t1/t2: the instants to show first (ns; t2 may be null: now). */
export async function mapSection(el, info, opts = {}) {
  const tStart = performance.now(); // first paint: from here to the first picture drawn
  el.innerHTML = `
    <h2 id="memory-map">Memory map <small class="muted" id="mapnote"></small></h2>
    <section class="controls">
      <label>T1 <select id="mt1"></select></label>
      <label>T2 <select id="mt2"></select></label>
      <label>Show <select id="mmode"><option value="diff">difference T1 → T2</option><option value="side">side by side</option><option value="one">T2 only</option></select></label>
      <label>Colour <select id="mcolor"><option value="tag">stack tag</option><option value="age">age</option></select></label>
      <label>Reserved <select id="mres"><option value="show">show (faint)</option><option value="hide">hide</option></select></label>
    </section>
    <div class="mapwrap">
      <div class="mappics"><div id="mlegend" class="maplegend"></div><div id="mpics"></div><div id="mhover" class="maphover muted">Hover a block for its range.</div></div>
      <div class="maplist"><div id="mruns"></div>
        <div class="tablewrap"><table id="mlist" class="data compact"><thead><tr>
          <th data-k="addr">Address</th><th data-k="size" class="n">Size</th><th data-k="state">Type</th><th data-k="tag">Tag</th><th data-k="commit_ns" title="committed, or reserved for reserved regions">Since</th><th>Stack</th></tr></thead><tbody></tbody></table></div>
        <div id="mlistnote" class="muted"></div></div>
    </div>`;
  const $ = (id) => el.querySelector('#' + id);
  const base = `/api/processes/${info.id}/map`;
  const first = await get(base).catch((e) => ({ error: e.message }));
  el.dataset.fetchMs = (performance.now() - tStart).toFixed(1); // request + JSON parse
  if (first.error) { $('mpics').innerHTML = `<p class="muted">${esc(first.error)}</p>`; return { first: null }; }
  // The instants offered: the stored snapshots, and now (live or the last).
  const times = [...first.snapshots_ns];
  const opt = (t, label) => `<option value="${t == null ? '' : nsParam(t)}">${esc(label)}</option>`;
  const options = times.map((t) => opt(t, time(t))).join('') + opt(null, first.source === 'live' ? 'now (live)' : 'latest');
  $('mt1').innerHTML = $('mt2').innerHTML = options;
  const pick = (t, dflt) => {
    if (t == null) return dflt;
    let best = dflt;
    times.forEach((x, i) => { if (x <= t) best = i; });
    return best;
  };
  $('mt1').selectedIndex = pick(opts.t1, 0);
  $('mt2').selectedIndex = opts.t2 != null ? pick(opts.t2, times.length) : times.length;
  let sortKey = 'size', sortDesc = true, data = null, drawn = null;

  async function load() {
    const t1 = $('mt1').value, t2 = $('mt2').value, mode = $('mmode').value;
    const at = (v) => (v ? { at: v } : {});
    if (mode === 'one') return { one: await get(base, at(t2)) };
    if (mode === 'side') return { a: await get(base, at(t1)), b: await get(base, at(t2)) };
    const d = await get(base, { t1: t1 || 'now', t2: t2 || 'now' });
    return { diff: d };
  }

  function draw() {
    const t0 = performance.now();
    const pics = $('mpics'), width = Math.max(120, pics.clientWidth || el.clientWidth * 0.6);
    const mode = data.diff ? 'diff' : data.one ? 'one' : 'side';
    const showRes = $('mres').value === 'show';
    const lists = (mode === 'diff' ? [data.diff] : mode === 'one' ? [data.one] : [data.a, data.b]).map((d) => viewOf(d, showRes));
    // Side by side: two canvases, their 1 px borders and the 16 px gap in one row.
    const cols = Math.floor((mode === 'side' ? (width - 16) / 2 - 2 : width - 2) / CELL_PX);
    const L = layout(lists, cols);
    const byAge = $('mcolor').value === 'age';
    let lo = Infinity, hi = -Infinity;
    for (const V of lists) for (const ns of V.commit) if (ns != null) { if (ns < lo) lo = ns; if (ns > hi) hi = ns; }
    const colorsOf = (V) => { // stack id -> its tag's colour
      const m = new Map(V.stacks.map((x) => [x.id, tagColor(x.tag)]));
      return (i) => m.get(V.stack[i]) || tagColor('Other');
    };
    // Age: 32 steps of colour, so the ranges group into few fillStyles.
    const ageStep = (ns) => (ns == null ? null : lo + Math.round(((ns - lo) / Math.max(1, hi - lo)) * 31) * (Math.max(1, hi - lo) / 31));
    const colorFn = (V) => {
      const tagC = colorsOf(V);
      if (mode === 'diff' && !byAge) return (i) => CHANGE_COLOR[V.change[i]];
      if (byAge) return (i) => ageColor(ageStep(V.commit[i]), lo, hi);
      return tagC;
    };
    pics.innerHTML = '';
    const heads = mode === 'diff' ? [`difference ${labelOf(data.diff, 1)} → ${labelOf(data.diff, 2)}`]
      : mode === 'one' ? [labelOf(data.one)] : [labelOf(data.a), labelOf(data.b)];
    lists.forEach((V, k) => {
      const fig = document.createElement('figure');
      fig.className = 'mappic';
      fig.innerHTML = `<figcaption>${esc(heads[k])}</figcaption>`;
      const c = document.createElement('canvas');
      c.className = 'mapcanvas';
      c.dataset.ranges = String(V.n);
      c.dataset.reserved = String(V.res.count);
      fig.appendChild(c);
      pics.appendChild(fig);
      const hit = paint(c, V, L, colorFn(V));
      c.onmousemove = (ev) => {
        const k = c.width / (c.clientWidth || c.width); // the canvas may be shown narrower (phones)
        const x = Math.floor((ev.offsetX * k) / CELL_PX), y = Math.floor((ev.offsetY * k) / CELL_PX);
        const i = x >= 0 && x < L.cols ? hit[y * L.cols + x] : -1;
        $('mhover').innerHTML = i >= 0 ? hoverText(V.obj(i)) : i < -1 ? hoverText(V.resObj(-2 - i)) : 'Hover a block for its range.';
      };
    });
    // Legend.
    const tags = [...new Set(lists.flatMap((V) => V.stacks.map((x) => x.tag)))];
    $('mlegend').innerHTML = (mode === 'diff' && !byAge
      ? Object.entries(CHANGE_COLOR).map(([k, c]) => `<span><i style="background:${c}"></i>${k} ${bytes(data.diff.bytes[k])}</span>`).join('')
      : byAge ? '<span><i style="background:hsl(230,70%,50%)"></i>oldest</span><span><i style="background:hsl(0,70%,50%)"></i>newest</span><span><i style="background:#7f7f7f"></i>before tracing</span>'
        : tags.map((t) => `<span><i style="background:${tagColor(t)}"></i>${esc(t)}</span>`).join(''))
      + (showRes ? `<span><i style="background:${RESERVED_COLOR}"></i>reserved, not committed ${bytes(lists[lists.length - 1].res.size.reduce((s, x) => s + x, 0))}</span>` : '')
      + `<span class="muted">· a cell is ${bytes(L.cell)}; ${L.nclusters} clusters, gaps ≥ ${bytes(GAP_KEEP)} shown as one empty cell${mode === 'diff' && showRes ? ' · reserved space as at T2' : ''}</span>`;
    const ms = performance.now() - t0;
    el.dataset.paintMs = ms.toFixed(1);
    if (!el.dataset.firstPaintMs) el.dataset.firstPaintMs = (performance.now() - tStart).toFixed(1);
    $('mapnote').textContent = `${lists[lists.length - 1].n.toLocaleString()} ranges · drawn in ${ms.toFixed(0)} ms`;
    // The list (sorting 100,000 regions) after the picture is on screen.
    const shown = lists[lists.length - 1];
    requestAnimationFrame(() => setTimeout(() => { if (data === drawn) list(shown.all()); }, 0));
    drawn = data;
  }

  function labelOf(d, k) {
    if (k) return `${time(d[`map${k}_ns`])} (${d[`source${k}`]})`;
    return `${time(d.map_ns)} (${d.source}) · ${bytes(d.committed_bytes)}` +
      (d.reserved_bytes ? ` + ${bytes(d.reserved_bytes)} reserved` : '');
  }

  function hoverText(r) {
    const res = r.state === 'reserved';
    return `<b>${esc(hex(r.addr))} – ${esc(hex(r.addr + r.size))}</b> · ${bytes(r.size)} · ${res ? '<b>reserved, not committed</b> · ' : ''}${esc(r.tag)}` +
      (r.change ? ` · <b>${r.change}</b>` : '') +
      ` · ${res ? 'reserved' : 'committed'} ${r.commit_ns == null ? 'before tracing began' : esc(time(r.commit_ns))}` +
      `<br><span class="stack">${r.frames.map(esc).join(' → ') || 'stack ' + r.stack}</span>`;
  }

  function list(rs) {
    const runs = doublingRuns(rs);
    const inRun = new Set(runs.flatMap((u) => u.ranges));
    $('mruns').innerHTML = runs.length
      ? `<p class="callout"><b>Segments growing by doubling:</b> ${runs.map((u) => `${esc(u.tag)}: ${u.ranges.map((r) => bytes(r.size)).join(' → ')} (${bytes(u.ranges.reduce((s, r) => s + r.size, 0))})`).join('; ')}</p>`
      : '';
    const k = sortKey, dir = sortDesc ? -1 : 1;
    const sorted = [...rs].sort((a, b) => (a[k] < b[k] ? -dir : a[k] > b[k] ? dir : 0) || a.addr - b.addr);
    $('mlist').tBodies[0].innerHTML = sorted.slice(0, LIST_ROWS).map((r) =>
      `<tr class="${inRun.has(r) ? 'doubling' : ''} ${r.change ? 'ch-' + r.change : ''} ${r.state === 'reserved' ? 'reserved' : ''}"><td class="mono">${esc(hex(r.addr))}</td><td class="n">${bytes(r.size)}</td>` +
      `<td class="type">${r.state}</td>` +
      `<td><i class="sw" style="background:${r.state === 'reserved' ? RESERVED_COLOR : tagColor(r.tag)}"></i>${esc(r.tag)}${inRun.has(r) ? ' <b title="part of a doubling run">×2</b>' : ''}${r.change ? ` <small>${r.change}</small>` : ''}</td>` +
      `<td>${r.commit_ns == null ? '<span class="muted">before</span>' : esc(time(r.commit_ns))}</td><td class="stack" title="${esc(r.frames.join(' → '))}">${esc(r.frames[r.frames.length - 1] || '')}</td></tr>`).join('');
    $('mlistnote').textContent = rs.length > LIST_ROWS ? `${LIST_ROWS} of ${rs.length.toLocaleString()} regions` : `${rs.length} regions`;
  }

  el.querySelectorAll('#mlist th[data-k]').forEach((th) => {
    th.style.cursor = 'pointer';
    th.onclick = () => {
      if (sortKey === th.dataset.k) sortDesc = !sortDesc; else { sortKey = th.dataset.k; sortDesc = sortKey === 'size'; }
      if (drawn) list(lastList());
    };
  });
  const lastList = () => viewOf(drawn.diff || drawn.one || drawn.b, $('mres').value === 'show').all();
  const fail = (e) => { $('mpics').innerHTML = `<p class="error">${esc(e.message)}</p>`; };
  let seq = 0; // an older answer never replaces a newer one
  const reload = () => { const my = ++seq; return load().then((d) => { if (my !== seq) return; data = d; draw(); }).catch(fail); };
  $('mt1').onchange = $('mt2').onchange = $('mmode').onchange = reload;
  $('mcolor').onchange = $('mres').onchange = () => { if (data) draw(); };
  // First the map of T2 alone: when T2 is the latest, the answer already
  // fetched (a second 100,000-range request would double the first paint).
  $('mmode').value = 'one';
  if ($('mt2').value === '') { data = { one: first }; draw(); } else await reload();
  return { first };
}
