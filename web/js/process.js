// process.js - one process instance: outstanding by tag over time (steady
// state) with the peak of each step (transients), a drag-selected window
// whose figures update as WPA's do when zoomed (Size, Count, Impacting,
// transient count and size, the four types), and the window's stacks as a
// caller tree, expandable level by level, sortable by impacting or size.
// The process's alert periods (pending, firing by severity) are shaded on
// the chart, and the thresholds of its `outstanding` rules drawn as lines.
// The window's flame graph (flame.js) opens below on demand (?flame=1).
// Below it, the process's heap traces and a button that starts one (heap.js).

import { get } from './api.js';
import { health, setParams } from './nav.js';
import { stackChart, tagColor } from './chart.js';
import { bytes, delta, perHour, count, time, span, esc, toLocalInput, fromLocalInput } from './fmt.js';
import { bandsOf, ofProcess, periods, rulesByName } from './alerts.js';
import { flamePanel, processStacks } from './flame.js';
import { mapSection } from './map.js';
import { heapSection } from './heap.js';
import { callerTree } from './tree.js';

const S = 1e9;
const NICE_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 180, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
const floorS = (ns) => Math.floor(ns / S) * S;
const ceilS = (ns) => Math.ceil(ns / S) * S;

/** The series of [from, to) at about one step per 2 px of the chart,
 * rounded up to a step the stored tiers hold (1 s, 1 min, 1 h multiples);
 * the peak line keeps spikes visible. */
function series(id, from, to, width) {
  const raw = (to - from) / S / (Math.max(300, width) / 2);
  const step = NICE_STEPS.find((x) => x >= raw) || Math.ceil(raw / 86400) * 86400;
  return get(`/api/processes/${id}/series`, { from, to, step: `${step}s` });
}

export async function processPage(main, id, params) {
  const h = await health();
  const end = ceilS(h.end_ns);
  const first = h.first_bucket_ns != null ? floorS(h.first_bucket_ns) : end - 3600 * S;
  const width0 = main.clientWidth - 10;
  // The chart comes first: the series (cheap) also names the process, and
  // the window figures (a full report) follow.
  let s0, view;
  if (params.get('from') && params.get('to') && Number(params.get('from')) < Number(params.get('to'))) {
    view = [Number(params.get('from')), Number(params.get('to'))];
    s0 = await series(id, view[0], view[1], width0);
  } else {
    s0 = await series(id, Math.max(first, end - 86400 * S), Math.max(end, first + S), width0);
  }
  const info = s0.process;
  // Default view: the instance's life (clipped to the last 24 h of data).
  // An instance alive when tracking ended is known up to there (a bucket
  // start; the bucket after it holds no data).
  const lifeEnd = info.exit_ns != null ? ceilS(info.exit_ns + 1) : info.tracking_ended_ns != null ? ceilS(info.tracking_ended_ns) : null;
  const lifeTo = Math.max(lifeEnd != null ? Math.min(end, lifeEnd) : end, first + S);
  const lifeFrom = Math.min(Math.max(floorS(Math.max(info.start_ns, first)), lifeTo - 86400 * S), lifeTo - S);
  if (!view) {
    view = [lifeFrom, lifeTo];
    if (s0.window.from_ns !== lifeFrom || s0.window.to_ns !== lifeTo) s0 = await series(id, lifeFrom, lifeTo, width0);
  }
  let sel = params.get('sf') ? [Number(params.get('sf')), Number(params.get('st'))] : null;

  main.innerHTML = `
    <h1 class="proc">${esc(info.name)} <small class="muted">${info.folded
      ? `${info.folded} short-lived instances folded (<a href="/api/processes/${info.id}/instances?from=${info.start_ns}&to=${(info.exit_ns ?? info.start_ns) + 1}">list</a>)`
      : `pid ${info.pid}`} · instance ${info.id} ·
      started ${esc(time(info.start_ns))}${info.exit_ns != null ? ' · exited ' + esc(time(info.exit_ns))
        : info.tracking_ended_ns != null ? ' · running when tracking ended ' + esc(time(info.tracking_ended_ns)) : ' · running'}</small></h1>
    ${info.cmdline ? `<p class="muted cmd">${esc(info.cmdline)}</p>` : ''}
    ${info.corrections ? `<p id="corrected" class="note corrected" title="records were lost (full kernel buffers); the figures were read again from the OS and the difference committed or decommitted (docs/LINUX.md, Losses and drift)">Corrected from ${h.source === 'etw' ? 'VirtualQueryEx' : 'smaps'}: ${count(info.corrections)} time${info.corrections === 1 ? '' : 's'}, ${bytes(info.corrected_bytes)}, the last at ${esc(time(info.last_correction_ns))}: events of it were lost, and its figures were set to the OS's own.</p>` : ''}
    <section class="controls">
      <label>From <input id="vfrom" type="datetime-local" step="1"></label>
      <label>To <input id="vto" type="datetime-local" step="1"></label>
      <button id="apply" type="button">Show</button>
      <button id="zoom" type="button" disabled>Zoom to selection</button>
      <button id="life" type="button">Whole life</button>
      <a id="difflink" href="#/diff">Diff…</a>
      <button id="flamebtn" type="button">Flame graph</button>
      <a id="maplink" href="#memory-map">Memory map</a>
      <a id="heaplink" href="#heap">Heap traces</a>
      <span class="muted">Profile of the window:</span>
      <a id="dl-pprof" download>pprof</a> <a id="dl-folded" download>folded</a> <a id="dl-speedscope" download>speedscope</a>
    </section>
    <h2>Outstanding commit by stack tag <small id="win" class="muted"></small></h2>
    <p class="muted hint">Drag on the chart to select a window; the dashed line is the peak within each step, so short transients stay visible when zoomed out.</p>
    <div id="chart" class="chart"></div>
    <section class="cols">
      <div>
        <h2>Window <small id="selwin" class="muted"></small></h2>
        <dl id="figs" class="figs"></dl>
        <div class="tablewrap"><table id="types" class="data compact"><thead><tr><th>Type</th><th>Meaning</th><th class="n">Count</th><th class="n">Size</th></tr></thead><tbody></tbody></table></div>
        <h3>By tag</h3>
        <div class="tablewrap"><table id="tags" class="data compact"><thead><tr><th>Tag</th><th class="n">Impacting</th><th class="n">Size</th><th class="n">Count</th><th class="n">Transient #</th><th class="n">Transient size</th></tr></thead><tbody></tbody></table></div>
      </div>
      <div>
        <h2 id="stackshead">Commit stacks</h2>
        <section class="controls">
          <label title="The heap layer: the heap traces' allocations of this process, one commit each (whole seconds of a trace)">Layer <select id="layer"><option value="">commits</option><option value="heap">heap allocations</option></select></label>
          <label>Sort <select id="sort"><option value="impacting">impacting</option><option value="size">size</option></select></label>
          <label>Type <select id="type"><option value="">all</option><option value="impacting">impacting</option><option value="transient">transient</option>
            <option>AIFI</option><option>AIFO</option><option>AOFI</option><option>AOFO</option></select></label>
        </section>
        <div id="tree" class="tree"></div>
      </div>
    </section>
    <details id="flamebox" class="fbox"><summary>Flame graph of the window</summary><div id="flame"></div></details>
    <section id="heapsec" class="heapsec"></section>
    <section id="mapsec" class="mapsec"></section>`;
  const $ = (x) => main.querySelector('#' + x);
  let chart = null, gen = 0, cgen = 0, flame = null, fm = params.get('fm') || '', mapShown = false;
  const marks = await alertMarks(info, end).catch(() => ({ bands: [], lines: [] }));
  if (marks.bands.length || marks.lines.length)
    main.querySelector('.hint').insertAdjacentHTML('beforeend', ` Shaded: its <a href="#/alerts">alerts</a>' periods
      (<span class="badge pending">pending</span> <span class="badge warning">warning</span> <span class="badge critical">critical</span>)${marks.lines.length ? '; dashed lines: their thresholds' : ''}.`);

  // The stacks' layer (?layer=heap: the heap traces' allocations).
  $('layer').value = params.get('layer') === 'heap' ? 'heap' : '';
  const layer = () => ($('layer').value ? { layer: $('layer').value } : {});
  function persist() {
    setParams({ from: view[0], to: view[1], sf: sel ? sel[0] : '', st: sel ? sel[1] : '', flame: $('flamebox').open ? 1 : '', fm, map: mapShown ? 1 : '', layer: $('layer').value });
    $('vfrom').value = toLocalInput(view[0]);
    $('vto').value = toLocalInput(view[1]);
    $('zoom').disabled = !sel;
    // The window's stacks as files other tools open (docs/EXPORTS.md).
    const [pf, pt] = sel || view;
    for (const f of ['pprof', 'folded', 'speedscope'])
      $('dl-' + f).href = `/api/processes/${id}/stacks?format=${f}&from=${pf}&to=${pt}${$('layer').value ? '&layer=heap' : ''}`;
    const [a, b] = sel || view;
    $('difflink').href = `#/diff?process=${id}&t1=${a}&t2=${b}`;
  }

  async function drawChart(pre) {
    const my = ++cgen; // a later view's chart wins even if its series comes back first
    const s = pre || await series(id, view[0], view[1], $('chart').clientWidth || 800);
    if (my !== cgen) return;
    $('win').textContent = `${time(s.window.from_ns)} – ${time(s.window.to_ns)} (${span(s.window.to_ns - s.window.from_ns)}, step ${span(s.step_ns)})`;
    if (chart) chart.destroy();
    $('chart').innerHTML = '';
    chart = stackChart($('chart'), s, { onSelect: (a, b) => { sel = [a, b]; persist(); windowFigures(); }, ...marks });
    if (sel) chart.select(sel[0], sel[1]);
  }

  async function windowFigures() {
    const my = ++gen;
    const [from, to] = sel || view;
    const [r, st] = await Promise.all([
      get(`/api/processes/${id}`, { from, to }),
      get(`/api/processes/${id}/stacks`, { from, to, sort: $('sort').value, type: $('type').value, limit: 1, ...layer() }),
    ]);
    $('stackshead').textContent = $('layer').value ? 'Heap allocation stacks' : 'Commit stacks';
    if (my !== gen) return;
    const p = r.process, w = r.window.to_ns - r.window.from_ns;
    $('selwin').innerHTML = `${esc(time(r.window.from_ns))} – ${esc(time(r.window.to_ns))} (${esc(span(w))})` +
      (r.note ? `<br><span class="note">${esc(r.note)}</span>` : '');
    const fig = (k, label, v, title = '') => `<div><dt title="${esc(title)}">${label}</dt><dd data-fig="${k}">${v}</dd></div>`;
    $('figs').innerHTML =
      fig('size', 'Size', bytes(p.size_bytes), 'bytes newly committed in the window') +
      fig('count', 'Count', count(p.commit_count), 'commit events in the window') +
      fig('impacting', 'Impacting', delta(p.impacting_bytes), 'AIFO - AOFI: steady-state growth over the window') +
      fig('rate', 'Impacting rate', perHour(p.impacting_bytes, w)) +
      fig('transient_count', 'Transient count', count(p.transient_count), 'AIFI pieces: committed and released inside the window') +
      fig('transient_size', 'Transient size', bytes(p.transient_bytes)) +
      fig('peak', 'Peak outstanding', `${bytes(p.peak_outstanding_bytes)} <small>at ${esc(time(p.peak_ns))}</small>`) +
      fig('outstanding_end', 'Outstanding at end', bytes(p.outstanding_end_bytes));
    const meaning = { AIFI: 'transient (in, freed in)', AIFO: 'impacting + (in, still out)', AOFI: 'impacting − (before, freed in)', AOFO: 'baseline (before, still out)' };
    $('types').tBodies[0].innerHTML = ['AIFI', 'AIFO', 'AOFI', 'AOFO'].map((t) =>
      `<tr data-type="${t}"><td>${t}</td><td class="muted">${meaning[t]}</td><td class="n">${count(p.types[t].count)}</td><td class="n">${bytes(p.types[t].bytes)}</td></tr>`).join('');
    $('tags').tBodies[0].innerHTML = p.tags.map((t) =>
      `<tr><td><span class="swatch" style="background:${tagColor(t.tag)}"></span>${esc(t.tag)}</td><td class="n">${delta(t.impacting_bytes)}</td><td class="n">${bytes(t.size_bytes)}</td>
       <td class="n">${count(t.commit_count)}</td><td class="n">${count(t.transient_count)}</td><td class="n">${bytes(t.transient_bytes)}</td></tr>`).join('') ||
      '<tr><td colspan="6" class="muted">Nothing in this window.</td></tr>';
    renderTree($('tree'), st.tree, $('sort').value, $('layer').value === 'heap');
    if (flame) flame.show(from, to);
    window.cwFiguresDoneAt = performance.now();
  }

  const fail = (e) => { $('figs').innerHTML = `<p class="error">${esc(e.message)}</p>`; };
  $('apply').onclick = () => {
    const a = fromLocalInput($('vfrom').value), b = fromLocalInput($('vto').value);
    if (a == null || b == null || a >= b) { fail(new Error('From must be before To.')); return; }
    view = [a, b]; sel = null; persist(); drawChart().then(windowFigures).catch(fail);
  };
  $('zoom').onclick = () => { if (!sel) return; view = sel; sel = null; persist(); drawChart().then(windowFigures).catch(fail); };
  $('life').onclick = () => { view = [lifeFrom, lifeTo]; sel = null; persist(); drawChart().then(windowFigures).catch(fail); };
  $('sort').onchange = $('type').onchange = () => windowFigures().catch(fail);
  $('layer').onchange = () => { persist(); windowFigures().catch(fail); };
  // The flame graph: made when first opened; A from ?fa1=&fa2= (differential).
  $('flamebox').ontoggle = () => {
    persist();
    if (!$('flamebox').open || flame) return;
    flame = flamePanel($('flame'), { stacks: (p) => processStacks(id)({ ...p, ...layer() }), metric: fm, onMetric: (m) => { fm = m; persist(); } });
    const [a, b] = sel || view, fa = [Number(params.get('fa1')), Number(params.get('fa2'))];
    flame.show(a, b, fa[0] < fa[1] ? fa : null);
  };
  $('flamebtn').onclick = () => { $('flamebox').open = true; $('flamebox').scrollIntoView(); };
  if (params.get('flame')) $('flamebox').open = true;

  // The memory map (map.js) is fetched when asked for ("Memory map", or
  // ?map=1 in the URL), not with every process page: a process's map can
  // be megabytes, and it would compete with what the page shows first.
  // It shows the selection's (or the view's) ends at that moment.
  const showMap = async () => {
    if (mapShown) return;
    mapShown = true;
    persist();
    const mt = sel || view;
    $('mapsec').scrollIntoView();
    await mapSection($('mapsec'), info, { t1: mt[0], t2: mt[1] >= end ? null : mt[1] }).catch(fail);
    $('mapsec').scrollIntoView();
  };
  $('maplink').onclick = (ev) => { ev.preventDefault(); showMap(); };
  const heap = heapSection($('heapsec'), info, h);
  $('heaplink').onclick = (ev) => { ev.preventDefault(); $('heapsec').scrollIntoView(); };
  persist();
  await drawChart(s0);
  await windowFigures();
  if (params.get('map')) await showMap();
  return { destroy() { if (chart) chart.destroy(); if (flame) flame.destroy(); heap.destroy(); } };
}

/** The process's alert series (every state) with their transitions: the
 * periods they were pending or firing as chart bands, and the thresholds
 * of its rules on `outstanding` (bytes, the chart's unit) as lines. */
async function alertMarks(info, end) {
  const [r, rules] = await Promise.all([get('/api/alerts', { state: 'all', process: info.name.replace(/[*?[\]]/g, '[$&]') }), rulesByName()]);
  const mine = r.alerts.filter((a) => ofProcess(a, info));
  const details = await Promise.all(mine.slice(0, 20).map((a) => get(`/api/alerts/${a.id}`)));
  const bands = details.flatMap((d) => bandsOf(periods(d.transitions, end), `${d.alert.rule} `));
  const lines = [];
  for (const a of mine) {
    const rule = rules[a.rule];
    if (!rule || rule.fields.metric !== 'outstanding' || a.threshold == null) continue;
    if (!lines.some((l) => l.y === a.threshold))
      lines.push({ y: a.threshold, color: a.severity === 'critical' ? '#c0392b' : '#e67e22', label: `${a.rule} ${bytes(a.threshold)}` });
  }
  return { bands, lines };
}

/** The window's caller tree (tree.js), sorted by sortKey; of the heap
 * layer's stacks when heap. */
function renderTree(el, root, sortKey, heap) {
  callerTree(el, root, {
    title: `${heap ? 'Heap allocation' : 'Commit'} stack (outermost caller first)`,
    name: (n) => n.frame,
    empty: 'No stacks in this window.',
    columns: [['Impacting', (n) => delta(n.impacting_bytes)], ['Size', (n) => bytes(n.size_bytes)],
      ['Count', (n) => count(n.commit_count)], ['Trans. #', (n) => count(n.transient_count)],
      ['Trans. size', (n) => bytes(n.transient_bytes)]],
  });
  el.dataset.sort = sortKey;
  el.dataset.layer = heap ? 'heap' : 'commit';
}
