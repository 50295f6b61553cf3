// overview.js - the machine's outstanding commit by tag (stacked, live)
// and the processes of the window sorted by impacting growth, with their
// active alerts (badges) and leak score (the highest of their active alert
// series). Dragging on the chart narrows the table to that window, as
// zooming does in WPA. The machine's flame graph of the window (flame.js)
// opens below the chart on demand; each process links to its own.

import { get } from './api.js';
import { health, setParams } from './nav.js';
import { stackChart } from './chart.js';
import { bytes, delta, perHour, count, time, span, esc } from './fmt.js';
import { badge, fmtScore, ofProcess } from './alerts.js';
import { flamePanel, machineStacks } from './flame.js';

const RANGES = [['15m', 15 * 60e9], ['1h', 3600e9], ['6h', 6 * 3600e9], ['24h', 86400e9], ['7d', 7 * 86400e9]];

/** A real exit, or alive when tracking ended (not an exit). */
function life(p) {
  if (p.exit_ns != null) return ' <span class="muted">(exited)</span>';
  if (p.tracking_ended_ns != null) return ` <span class="muted">(tracking ended ${esc(time(p.tracking_ended_ns))})</span>`;
  return '';
}

export async function overviewPage(main, params) {
  main.innerHTML = `
    <section class="controls">
      <label>Range <select id="range">${RANGES.map(([k]) => `<option value="${k}">last ${k}</option>`).join('')}</select></label>
      <label class="grow">Search <input id="search" type="search" placeholder="process name" value="${esc(params.get('name') || '')}"></label>
      <label><input id="live" type="checkbox" checked> live</label>
      <button id="refresh" type="button">Refresh</button>
    </section>
    <h2>Outstanding commit by stack tag <small id="win" class="muted"></small></h2>
    <p id="note" class="note" hidden></p>
    <div id="chart" class="chart"></div>
    <details id="flamebox" class="fbox"><summary>Flame graph of all processes in the window</summary><div id="flame"></div></details>
    <h2>Processes <small id="sel" class="muted"></small></h2>
    <div class="tablewrap"><table id="procs" class="data">
      <thead><tr><th>Process</th><th>PID</th><th class="n">Impacting</th><th class="n">Growth</th>
      <th class="n">Transient #</th><th class="n">Transient size</th><th class="n">Size</th><th class="n">Count</th>
      <th class="n">Peak</th><th class="n">Outstanding</th><th>Top tag</th><th>Alerts</th><th class="n" title="highest leak score of the process's active alert series">Leak score</th></tr></thead><tbody></tbody></table></div>`;
  const $ = (id) => main.querySelector('#' + id);
  $('range').value = params.get('range') || '1h';
  let chart = null, sel = null, timer = null, win = null, gen = 0, tgen = 0, flame = null, flameKey = null;

  async function load(fresh = false) {
    const my = ++gen;
    const h = await health(fresh);
    const range = RANGES.find(([k]) => k === $('range').value)[1];
    // The range starts on a whole minute (up to 59 s more than asked): the
    // store answers a minute-aligned window from its hour and minute tiers,
    // an unaligned one from every raw second of it (docs/DESIGN.md, "Dashboard").
    let from = Math.floor((h.end_ns - range) / 60e9) * 60e9;
    if (h.first_bucket_ns != null && from < h.first_bucket_ns) from = Math.floor(h.first_bucket_ns / 1e9) * 1e9;
    const to = h.end_ns;
    if (h.last_bucket_end_ns == null || to <= from) {
      $('chart').innerHTML = '<p class="muted">No data stored yet.</p>';
      return;
    }
    const s = await get('/api/system/series', { from, to });
    if (my !== gen) return;
    win = s.window;
    $('win').textContent = `${time(win.from_ns)} – ${time(win.to_ns)} (${span(win.to_ns - win.from_ns)}, step ${span(s.step_ns)})`;
    // Where tracking ended (a replay's input, a stopped service) the data
    // ends: the window is clipped there and the processes alive then are
    // shown as they were.
    $('note').hidden = !s.note;
    $('note').textContent = s.note || '';
    if (h.tracking_ended_ns != null) {
      $('note').hidden = false;
      $('note').textContent = `Tracking ended ${time(h.tracking_ended_ns)}: the data ends there, and processes alive then are shown as they were.`;
    }
    if (chart) chart.destroy();
    $('chart').innerHTML = '';
    chart = stackChart($('chart'), s, { onSelect: (a, b) => { sel = [a, b]; table(); } });
    if (sel) chart.select(sel[0], sel[1]);
    await table();
  }

  async function table() {
    const my = ++tgen; // only the latest call writes the table: answers can come back out of order
    const [from, to] = sel || [win.from_ns, win.to_ns];
    $('sel').innerHTML = sel ? `window ${esc(time(from))} – ${esc(time(to))} <a href="" id="clear">whole range</a>` : '';
    if (sel) $('clear').onclick = (e) => { e.preventDefault(); sel = null; chart && chart.chart.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false); table(); };
    const name = $('search').value.trim();
    const [r, al] = await Promise.all([get('/api/processes', { from, to, sort: 'impacting', limit: 500, name }),
      get('/api/alerts').catch(() => ({ alerts: [] }))]);
    if (my !== tgen) return;
    const w = r.window.to_ns - r.window.from_ns;
    // The live refresh leaves the flame graph (and its zoom) as it is; a
    // new selection or range redraws it.
    const fkey = `${$('range').value} ${sel}`;
    if (flame && fkey !== flameKey) { flameKey = fkey; flame.show(from, to); }
    else if (!flame && $('flamebox').open) $('flamebox').ontoggle(); // opened before the data came
    $('procs').tBodies[0].innerHTML = r.processes.map((p) => {
      const top = p.tags[0] ? p.tags[0].tag : '';
      const href = `#/process/${p.id}?from=${r.window.from_ns}&to=${r.window.to_ns}`;
      const mine = al.alerts.filter((a) => ofProcess(a, p));
      const scores = mine.map((a) => a.leak_score).filter((v) => v != null);
      return `<tr data-id="${p.id}" data-name="${esc(p.name)}">
        <td class="pcell"><a href="${href}">${esc(p.name)}</a>${life(p)} <a class="flamelink" href="${href}&flame=1" title="its flame graph of this window">flame</a></td>
        <td>${p.folded ? `<span title="short-lived instances of this name, folded (docs/DESIGN.md)">${count(p.folded)} folded</span>` : p.pid}</td>
        <td class="n" data-fig="impacting">${delta(p.impacting_bytes)}</td>
        <td class="n">${perHour(p.impacting_bytes, w)}</td>
        <td class="n" data-fig="transient_count">${count(p.transient_count)}</td>
        <td class="n" data-fig="transient_size">${bytes(p.transient_bytes)}</td>
        <td class="n" data-fig="size">${bytes(p.size_bytes)}</td>
        <td class="n" data-fig="count">${count(p.commit_count)}</td>
        <td class="n" data-fig="peak">${bytes(p.peak_outstanding_bytes)}</td>
        <td class="n">${bytes(p.outstanding_end_bytes)}</td>
        <td>${esc(top)}</td>
        <td data-fig="alerts">${mine.map((a) => `<a href="#/alerts?alert=${a.id}">${badge(a)}</a>`).join(' ')}</td>
        <td class="n" data-fig="leak">${scores.length ? fmtScore(Math.max(...scores)) : '–'}</td></tr>`;
    }).join('') || `<tr><td colspan="13" class="muted">No process in this window${name ? ' matches ' + esc(name) : ''}.</td></tr>`;
  }

  $('flamebox').ontoggle = () => {
    if (!$('flamebox').open || flame || !win) return;
    flame = flamePanel($('flame'), { stacks: machineStacks, machine: true });
    const [from, to] = sel || [win.from_ns, win.to_ns];
    flameKey = `${$('range').value} ${sel}`;
    flame.show(from, to);
  };
  const reload = (fresh = false) => load(fresh).catch((e) => { $('chart').innerHTML = `<p class="error">${esc(e.message)}</p>`; });
  $('range').onchange = () => { sel = null; setParams({ range: $('range').value }); reload(); };
  $('refresh').onclick = () => reload(true);
  let typing = null;
  $('search').oninput = () => { clearTimeout(typing); typing = setTimeout(() => table().catch(() => {}), 250); };
  const tick = () => { if ($('live') && $('live').checked && !document.hidden) reload(); };
  timer = setInterval(tick, 5000);
  const destroy = () => { clearInterval(timer); if (chart) chart.destroy(); if (flame) flame.destroy(); };
  try {
    await load();
  } catch (e) {
    destroy(); // the router shows the error; nothing keeps polling
    throw e;
  }
  return { destroy };
}
