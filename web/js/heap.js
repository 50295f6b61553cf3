// heap.js - the process page's heap drill-down: its heap traces (stored by
// the service: asked for here, by the API or by an alert rule's
// heap_trace), a "Trace heap" button that starts one (with the token) and
// follows it while it runs (events read so far, time left), and the chosen
// trace's report: totals, the caller tree (outermost caller first, the
// heaviest path opened) and a flame graph, both of outstanding bytes,
// allocated bytes or allocation count.
// Data: /api/heap-traces?process=ID, /api/heap-traces/{id} (the report as
// heap.h's JSON), POST /api/processes/{id}/heap-trace.

import { get, sendAuth } from './api.js';
import { bytes, count, esc, span, time } from './fmt.js';
import { loadFlameLib } from './flame.js';
import { callerTree } from './tree.js';

const S = 1e9;
const HEAP_METRICS = {
  outstanding_bytes: { label: 'Outstanding bytes (what stayed)', fmt: bytes },
  alloc_bytes: { label: 'Allocated bytes', fmt: bytes },
  alloc_count: { label: 'Allocations (churn)', fmt: count },
};

/** The tree of a report's stacks: {name, value, children, figs}. */
export function heapTree(stacks, metric) {
  const node = (name) => ({ name, value: 0, children: [], kids: new Map(), figs: { outstanding_bytes: 0, alloc_bytes: 0, alloc_count: 0, freed_bytes: 0, peak_bytes: 0 } });
  const root = node('all');
  for (const s of stacks) {
    const v = s[metric];
    if (!(v > 0)) continue;
    const add = (n) => { n.value += v; for (const k of Object.keys(n.figs)) n.figs[k] += s[k]; };
    let n = root;
    add(n);
    for (const f of s.frames) {
      let c = n.kids.get(f);
      if (!c) { c = node(f); n.kids.set(f, c); n.children.push(c); }
      n = c;
      add(n);
    }
  }
  const done = (x) => { delete x.kids; x.children.sort((a, b) => b.value - a.value || (a.name < b.name ? -1 : 1)); x.children.forEach(done); };
  done(root);
  return root;
}

function stateText(t) {
  if (t.state === 'running') {
    const left = t.requested_ns + t.duration_ns - Date.now() * 1e6;
    return `running${t.attached ? '' : ' (attaching)'}: ${count(t.events_so_far || 0)} events so far${left > 0 ? `, ${span(left)} left` : ''}`;
  }
  if (t.state === 'failed') return `failed: ${t.error || ''}`;
  return `${t.state} (${t.end_reason || ''})`;
}

/** The heap section in el for process instance info ({id, pid, exit_ns,
 * folded}); h: /api/health. Returns {destroy()}. */
export function heapSection(el, info, h) {
  const canTrace = h.heap_tracing && info.exit_ns == null && !(info.folded > 1);
  const why = !h.heap_tracing ? 'this service runs no live source: it cannot trace'
    : info.exit_ns != null ? 'the process has exited' : info.folded > 1 ? 'a group of folded instances' : '';
  el.innerHTML = `
    <h2>Heap traces</h2>
    <p class="muted hint">Which allocations of this process leak: its heap allocations by stack, from the
      start of a trace to its end (attached to the running process; blocks allocated before are unknown,
      their frees counted).</p>
    <section class="controls">
      <label>Duration <select id="hdur"><option>30s</option><option selected>1m</option><option>5m</option><option>15m</option></select></label>
      <button id="htrace" type="button" ${canTrace ? '' : 'disabled'} title="${esc(why)}">Trace heap</button>
      <span id="hstatus" class="muted">${esc(why)}</span>
    </section>
    <div class="tablewrap"><table id="hlist" class="data compact"><thead><tr><th>Trace</th><th>Asked by</th><th>Started</th>
      <th>State</th><th class="n">Outstanding</th><th class="n">Allocated</th><th class="n">Unknown frees</th></tr></thead><tbody></tbody></table></div>
    <div id="hreport"></div>`;
  const $ = (x) => el.querySelector('#' + x);
  let timer = null, shown = null, chart = null, gone = false;

  async function list() {
    const r = await get('/api/heap-traces', { process: info.id, limit: 20 });
    if (gone) return [];
    $('hlist').tBodies[0].innerHTML = r.traces.map((t) => `
      <tr data-trace="${t.id}" data-state="${t.state}"><td><a href="#" data-open="${t.id}">#${t.id}</a></td>
        <td>${esc(t.trigger)}${t.rule ? ` <a href="#/alerts/${t.alert_id}">${esc(t.rule)}</a>` : ''}</td>
        <td>${esc(time(t.started_ns || t.requested_ns))}</td><td class="hstate">${esc(stateText(t))}</td>
        <td class="n">${t.state === 'running' ? '' : bytes(t.outstanding_bytes)}</td>
        <td class="n">${t.state === 'running' ? '' : bytes(t.alloc_bytes)}</td>
        <td class="n">${t.state === 'running' ? '' : count(t.unknown_frees)}</td></tr>`).join('') ||
      '<tr><td colspan="7" class="muted">No heap trace of this process yet.</td></tr>';
    for (const a of el.querySelectorAll('[data-open]'))
      a.onclick = (ev) => { ev.preventDefault(); show(Number(a.dataset.open)).catch(fail); };
    const running = r.traces.some((t) => t.state === 'running');
    clearTimeout(timer);
    if (running) timer = setTimeout(() => refresh().catch(fail), 1000);
    $('htrace').disabled = !canTrace || running;
    return r.traces;
  }

  async function refresh() {
    const traces = await list();
    // The newest finished trace is shown once it ends, unless another was chosen.
    const done = traces.find((t) => t.state !== 'running' && t.state !== 'failed');
    if (!shown && done) await show(done.id);
    else if (shown && traces.find((t) => t.id === shown && t.state !== 'running') && !$('hreport').dataset.trace) await show(shown);
  }

  async function show(id) {
    shown = id;
    const t = await get(`/api/heap-traces/${id}`);
    if (gone) return;
    const box = $('hreport');
    if (!t.report) {
      box.dataset.trace = '';
      box.innerHTML = t.state === 'running' ? `<p class="muted">Trace #${id} is running.</p>`
        : `<p class="error">Trace #${id} ${esc(stateText(t))}</p>`;
      return;
    }
    const p = t.report.processes[0];
    box.dataset.trace = String(id);
    box.innerHTML = `
      <h3>Trace #${id} <small class="muted">${esc(time(t.report.from_ns))} – ${esc(time(t.report.to_ns))}
        (${esc(span(t.report.to_ns - t.report.from_ns))}) · ${esc(stateText(t))}</small></h3>
      <dl class="figs">
        <div><dt>Outstanding at the end</dt><dd data-fig="outstanding">${bytes(p ? p.totals.outstanding_bytes : 0)} in ${count(p ? p.totals.outstanding_count : 0)}</dd></div>
        <div><dt>Allocated</dt><dd>${bytes(p ? p.totals.alloc_bytes : 0)} in ${count(p ? p.totals.alloc_count : 0)}</dd></div>
        <div><dt>Freed</dt><dd>${bytes(p ? p.totals.freed_bytes : 0)} in ${count(p ? p.totals.freed_count : 0)}</dd></div>
        <div><dt>Peak outstanding</dt><dd>${bytes(p ? p.totals.peak_bytes : 0)}</dd></div>
        <div><dt title="frees of blocks allocated before the trace began">Unknown frees</dt><dd>${count(t.report.unknown_frees)}</dd></div>
        <div><dt title="events the channel had no room for">Dropped</dt><dd>${count(t.report.dropped_events)}</dd></div>
      </dl>
      <section class="controls">
        <label>Measure <select id="hmetric">${Object.entries(HEAP_METRICS).map(([k, m]) => `<option value="${k}">${m.label}</option>`).join('')}</select></label>
        <a href="/api/heap-traces/${id}?format=folded" download="heap-${id}.folded">folded</a>
        <a href="/api/heap-traces/${id}" download="heap-${id}.json">JSON</a>
        ${layerLink(t)}
      </section>
      <div id="htree" class="tree"></div>
      <h3>Flame graph <small class="muted">outermost caller at the bottom; click a frame to zoom</small></h3>
      <div id="hflame"></div>`;
    const draw = () => {
      const metric = $('hmetric').value;
      const root = heapTree(p ? p.stacks : [], metric);
      renderHeapTree($('htree'), root, metric);
      drawFlame($('hflame'), root, HEAP_METRICS[metric]).catch(fail);
    };
    $('hmetric').onchange = draw;
    draw();
  }

  async function drawFlame(box, root, m) {
    const fg = await loadFlameLib();
    if (gone) return;
    box.innerHTML = '';
    if (chart) { chart.destroy(); chart = null; }
    if (!root.value) { box.innerHTML = '<p class="muted">Nothing to draw for this measure.</p>'; return; }
    chart = fg.default().width(Math.max(300, box.clientWidth || 600)).cellHeight(18).minFrameSize(1)
      .setLabelHandler((d) => `${d.data.name}\n${m.fmt(d.data.value)} (${(100 * d.data.value / root.value).toFixed(2)}%)`);
    window.d3.select(box).datum(root).call(chart);
    el.dataset.flame = 'drawn';
  }

  const fail = (e) => { $('hstatus').innerHTML = `<span class="error">${esc(e.message)}</span>`; };
  $('htrace').onclick = async () => {
    $('htrace').disabled = true;
    try {
      const r = await sendAuth('POST', `/api/processes/${info.id}/heap-trace`, { duration: $('hdur').value }, 'to start a heap trace');
      $('hstatus').textContent = `trace #${r.id} started`;
      shown = r.id;
      $('hreport').dataset.trace = '';
      await refresh();
    } catch (e) {
      $('htrace').disabled = !canTrace;
      fail(e);
    }
  };
  refresh().catch(fail);
  return { destroy() { gone = true; clearTimeout(timer); if (chart) chart.destroy(); } };
}

/** A link to the trace's whole seconds on the process page's heap layer
 * (the API's layer_url, as a page), or nothing when the trace has none. */
function layerLink(t) {
  const u = t.layer_url && new URL(t.layer_url, location.href);
  if (!u) return '';
  const id = u.pathname.split('/')[3], q = u.searchParams;
  return `<a id="hlayer" href="#/process/${esc(id)}?layer=heap&from=${esc(q.get('from'))}&to=${esc(q.get('to'))}"
    title="Any window of the trace, types AIFI/AIFO/AOFI/AOFO, the diff: its seconds in the store's heap layer">In the heap layer</a>`;
}

/** The caller tree of a heap report (tree.js), of the chosen measure. */
function renderHeapTree(el, root, metric) {
  callerTree(el, root, {
    title: 'Allocating stack (outermost caller first)',
    name: (n) => n.name,
    empty: 'No stacks for this measure.',
    columns: [['Outstanding', (n) => bytes(n.figs.outstanding_bytes)], ['Allocated', (n) => bytes(n.figs.alloc_bytes)],
      ['Allocs', (n) => count(n.figs.alloc_count)], ['Freed', (n) => bytes(n.figs.freed_bytes)]],
  });
  el.dataset.metric = metric;
}
