// alerts.js - the Alerts page (active alerts with their detail, the history
// of transitions, silences, a rule's backtest drawn on a process's chart),
// and what the other pages take from alerts: the active series of a
// process, alert periods from transitions, values in their rule's unit.
//   #/alerts                       the page
//   #/alerts?alert=ID              with that series' detail open
//   #/alerts?rule=&bfrom=&bto=&bproc=   a backtest to run

import { get, sendAuth } from './api.js';
import { health, setParams } from './nav.js';
import { stackChart } from './chart.js';
import { bytes, delta, count, time, span, esc, toLocalInput, fromLocalInput } from './fmt.js';

const S = 1e9;
export const BAND = { pending: 'rgba(237, 201, 72, 0.28)', warning: 'rgba(242, 142, 43, 0.25)', critical: 'rgba(225, 87, 89, 0.25)' };

/** The rules in force by name ({name, fields, ...}); {} when none. */
export async function rulesByName() {
  const r = await get('/api/alert-rules');
  return Object.fromEntries(r.rules.map((x) => [x.name, x]));
}

/** A value in its rule's unit: bytes, bytes per hour, a score, a time. */
export function fmtValue(v, rule) {
  if (v === null || v === undefined) return '–';
  const f = (rule && rule.fields) || {};
  switch (f.metric) {
    case 'impacting_rate': return `${delta(v)}/h`;
    case 'transient_rate': return /B/.test(`${f.warn || ''}${f.crit || ''}`) ? `${bytes(v)}/h` : `${count(Math.round(v))}/h`;
    case 'outstanding': return bytes(v);
    case 'leak_score': return Number(v).toFixed(2);
    case 'time_to_limit': return span(v * S);
    default: return Number(v).toLocaleString();
  }
}

export const fmtScore = (v) => (v === null || v === undefined ? '–' : Number(v).toFixed(2));
export const fmtTtl = (v) => (v === null || v === undefined ? '–' : span(v * S));

/** A severity or state badge. */
export function badge(a) {
  const cls = a.state === 'firing' ? a.severity : a.state;
  const text = a.state === 'firing' ? a.severity : a.state;
  return `<span class="badge ${esc(cls)}" title="${esc(a.rule)}: ${esc(a.state)}">${esc(text)}</span>`;
}

/** Periods [from, to) of pending and firing from transitions (any order),
 * the last one open until `end`: [{from_ns, to_ns, state, severity}]. */
export function periods(transitions, end) {
  const tr = [...transitions].sort((a, b) => a.ts_ns - b.ts_ns);
  const out = [];
  let open = null;
  for (const x of tr) {
    if (open) { open.to_ns = x.ts_ns; out.push(open); open = null; }
    if (x.to !== 'inactive') open = { from_ns: x.ts_ns, to_ns: end, state: x.to, severity: x.severity };
  }
  if (open) out.push(open);
  return out.filter((p) => p.to_ns > p.from_ns);
}

/** Chart bands of periods. */
export function bandsOf(ps, label = '') {
  return ps.map((p) => ({ from_ns: p.from_ns, to_ns: p.to_ns, label: `${label}${p.state}`,
    color: p.state === 'firing' ? BAND[p.severity] || BAND.critical : BAND.pending }));
}

/** Does series a belong to process instance p ({id, name})? Instance
 * series by id, series grouped by name by the name. */
export function ofProcess(a, p) {
  return a.proc != null ? a.proc === p.id : a.process != null && a.process === p.name;
}

/** "alertname=leak, process=~Memory.*, tag!=Heap" -> Alertmanager matchers. */
export function parseMatchers(text) {
  const out = [];
  for (const part of text.split(',').map((x) => x.trim()).filter(Boolean)) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*(.*)$/.exec(part);
    if (!m) throw new Error(`"${part}": a matcher is name=value, name!=value, name=~regex or name!~regex`);
    out.push({ name: m[1], value: m[3].replace(/^"(.*)"$/, '$1'), isRegex: m[2].includes('~'), isEqual: !m[2].startsWith('!') });
  }
  if (!out.length) throw new Error('Give at least one matcher, e.g. alertname=leak');
  return out;
}

const matcherText = (ms) => ms.map((m) => `${m.name}${m.isEqual ? '' : '!'}${m.isRegex ? '=~' : '='}${m.value}`).join(', ');

export async function alertsPage(main, params) {
  main.innerHTML = `
    <h2>Active alerts <small id="evald" class="muted"></small></h2>
    <div class="tablewrap"><table id="active" class="data">
      <thead><tr><th>Severity</th><th>Rule</th><th>Process</th><th>PID</th><th>Tag</th><th>Since</th>
      <th class="n">Value</th><th class="n">Threshold</th><th class="n">Leak score</th><th class="n">Time to limit</th></tr></thead>
      <tbody></tbody></table></div>
    <section id="detail" class="panel" hidden></section>
    <h2>History</h2>
    <div class="tablewrap"><table id="history" class="data compact">
      <thead><tr><th>Time</th><th>Rule</th><th>Process</th><th>Tag</th><th>From</th><th>To</th><th>Severity</th>
      <th class="n">Value</th><th>Reason</th></tr></thead><tbody></tbody></table></div>
    <h2>Silences</h2>
    <form id="silform" class="controls">
      <label class="grow">Matchers <input id="smatch" placeholder="alertname=leak, process=~Memory.*" required></label>
      <label>For <select id="sfor"><option>1h</option><option selected>2h</option><option>8h</option><option>24h</option><option>7d</option></select></label>
      <label>By <input id="sby" value="dashboard" required></label>
      <label class="grow">Comment <input id="scomment" required></label>
      <button type="submit">Silence</button>
    </form>
    <p id="silmsg" class="muted"></p>
    <div class="tablewrap"><table id="silences" class="data compact">
      <thead><tr><th>ID</th><th>State</th><th>Matchers</th><th>Starts</th><th>Ends</th><th>By</th><th>Comment</th><th></th></tr></thead>
      <tbody></tbody></table></div>
    <h2>Backtest</h2>
    <p class="muted hint">What a rule in force would have done over the stored history: its transitions, drawn on a process's chart.</p>
    <form id="btform" class="controls">
      <label>Rule <select id="brule"></select></label>
      <label>From <input id="bfrom" type="datetime-local" step="1"></label>
      <label>To <input id="bto" type="datetime-local" step="1"></label>
      <label>Process <select id="bproc"></select></label>
      <button type="submit">Run</button>
    </form>
    <p id="btmsg" class="muted"></p>
    <div id="btchart" class="chart" hidden></div>
    <div class="tablewrap"><table id="btresult" class="data compact">
      <thead><tr><th>Series</th><th>Time</th><th>From</th><th>To</th><th>Severity</th><th class="n">Value</th><th>Reason</th></tr></thead>
      <tbody></tbody></table></div>`;
  const $ = (x) => main.querySelector('#' + x);
  const h = await health();
  let rules = await rulesByName();
  let chart = null, timer = null;
  const procLink = (id, name, from, to) => (id != null
    ? `<a href="#/process/${id}${from != null ? `?from=${from}&to=${to}` : ''}">${esc(name)}</a>` : esc(name ?? 'machine'));

  async function active() {
    const r = await get('/api/alerts');
    $('evald').textContent = r.evaluated_ns != null ? `evaluated ${time(r.evaluated_ns)} · ${count(r.evaluations)} evaluations` : 'not evaluated yet';
    $('active').tBodies[0].innerHTML = r.alerts.map((a) => `<tr data-id="${a.id}" data-rule="${esc(a.rule)}" data-state="${esc(a.state)}" class="click">
        <td>${badge(a)}</td><td>${esc(a.rule)}</td><td>${procLink(a.proc, a.process)}</td><td>${a.pid ?? ''}</td><td>${esc(a.tag ?? 'all')}</td>
        <td>${esc(time(a.state === 'firing' ? a.firing_since_ns : a.active_since_ns))}</td>
        <td class="n" data-fig="value">${fmtValue(a.value, rules[a.rule])}</td><td class="n">${fmtValue(a.threshold, rules[a.rule])}</td>
        <td class="n" data-fig="leak">${fmtScore(a.leak_score)}</td><td class="n" data-fig="ttl">${fmtTtl(a.time_to_limit_s)}</td></tr>`).join('') ||
      '<tr><td colspan="10" class="muted">No alert is pending or firing.</td></tr>';
    for (const tr of $('active').tBodies[0].querySelectorAll('tr[data-id]'))
      tr.onclick = (e) => { if (e.target.tagName !== 'A') detail(Number(tr.dataset.id)).catch(fail('detail')); };
  }

  async function detail(id) {
    setParams({ alert: id });
    const r = await get(`/api/alerts/${id}`);
    const a = r.alert, rule = rules[a.rule];
    const comp = a.leak_score_components || {};
    const fc = a.forecast || {};
    const row = (k, v) => `<div><dt>${esc(k)}</dt><dd>${v}</dd></div>`;
    $('detail').hidden = false;
    $('detail').dataset.id = String(id);
    $('detail').innerHTML = `<h3>${badge(a)} ${esc(a.rule)} · ${procLink(a.proc, a.process)}${a.pid ? ` (pid ${a.pid})` : ''} · ${esc(a.tag ?? 'all tags')}
        <button type="button" id="dclose" class="right">Close</button></h3>
      ${a.summary ? `<p>${esc(a.summary)}</p>` : ''}
      <dl class="figs">${row('Value', fmtValue(a.value, rule))}${row('Threshold', fmtValue(a.threshold, rule))}
        ${row('Leak score', fmtScore(a.leak_score))}${row('Time to limit', fmtTtl(a.time_to_limit_s))}
        ${row('Active since', esc(time(a.active_since_ns)))}${row('Firing since', esc(time(a.firing_since_ns)))}</dl>
      <div class="cols"><div><h3>Leak score components</h3>
        <table class="data compact" id="comp"><tbody>${Object.entries(comp).map(([k, v]) => `<tr><td>${esc(k)}</td><td class="n">${esc(typeof v === 'number' ? (/slope/.test(k) ? `${delta(v)}/h` : +v.toPrecision(4)) : v)}</td></tr>`).join('') || '<tr><td class="muted">none recorded</td></tr>'}</tbody></table>
        <h3>Forecast</h3>
        <table class="data compact" id="forecast"><tbody>${Object.entries(fc).map(([k, v]) => `<tr><td>${esc(k)}</td><td class="n">${esc(/_s$/.test(k) && typeof v === 'number' ? span(v * S) : typeof v === 'number' && /headroom|limit|used/.test(k) ? bytes(v) : v)}</td></tr>`).join('') || '<tr><td class="muted">none recorded</td></tr>'}</tbody></table>
        ${a.labels ? `<h3>Labels</h3><p class="cmd">${esc(Object.entries(a.labels).map(([k, v]) => `${k}="${v}"`).join(' '))}</p>` : ''}</div>
      <div><h3>Transitions</h3><table class="data compact" id="dtrans"><thead><tr><th>Time</th><th>From</th><th>To</th><th>Severity</th><th class="n">Value</th><th>Reason</th></tr></thead><tbody>
        ${r.transitions.map((x) => `<tr><td>${esc(time(x.ts_ns))}</td><td>${esc(x.from)}</td><td>${esc(x.to)}</td><td>${esc(x.severity)}</td>
          <td class="n">${fmtValue(x.value, rule)}</td><td>${esc(x.reason)}${x.silenced ? ' <span class="muted">(silenced)</span>' : ''}</td></tr>`).join('')}</tbody></table></div></div>`;
    $('dclose').onclick = () => { $('detail').hidden = true; setParams({}); };
  }

  async function history() {
    const r = await get('/api/alert-transitions', { limit: 200 });
    $('history').tBodies[0].innerHTML = r.transitions.map((x) => `<tr><td>${esc(time(x.ts_ns))}</td><td>${esc(x.rule)}</td>
        <td>${esc(x.process ?? 'machine')}</td><td>${esc(x.tag ?? 'all')}</td><td>${esc(x.from)}</td><td>${esc(x.to)}</td><td>${esc(x.severity)}</td>
        <td class="n">${fmtValue(x.value, rules[x.rule])}</td><td>${esc(x.reason)}${x.silenced ? ' <span class="muted">(silenced)</span>' : ''}</td></tr>`).join('') ||
      '<tr><td colspan="9" class="muted">No transition yet.</td></tr>';
  }

  async function silences() {
    const r = await get('/api/silences');
    $('silences').tBodies[0].innerHTML = r.silences.map((x) => `<tr data-id="${x.id}" data-state="${esc(x.status.state)}">
        <td>${x.id}</td><td>${esc(x.status.state)}</td><td class="cmd">${esc(matcherText(x.matchers))}</td>
        <td>${esc(time(x.starts_ns))}</td><td>${esc(time(x.deleted_ns != null && x.deleted_ns < x.ends_ns ? x.deleted_ns : x.ends_ns))}</td>
        <td>${esc(x.createdBy)}</td><td>${esc(x.comment)}</td>
        <td>${x.status.state !== 'expired' ? '<button type="button" class="expire">Expire</button>' : ''}</td></tr>`).join('') ||
      '<tr><td colspan="8" class="muted">No silence.</td></tr>';
    for (const b of $('silences').querySelectorAll('button.expire')) {
      const id = b.closest('tr').dataset.id;
      b.onclick = () => sendAuth('DELETE', `/api/silences/${id}`, undefined, 'to change silences')
        .then(() => { $('silmsg').textContent = `Silence ${id} expired.`; return silences(); })
        .catch((e) => { $('silmsg').innerHTML = `<span class="error">${esc(e.message)}</span>`; });
    }
  }

  $('silform').onsubmit = (e) => {
    e.preventDefault();
    let matchers;
    try { matchers = parseMatchers($('smatch').value); } catch (err) { $('silmsg').innerHTML = `<span class="error">${esc(err.message)}</span>`; return; }
    sendAuth('POST', '/api/silences', { matchers, endsAt: `+${$('sfor').value}`, createdBy: $('sby').value, comment: $('scomment').value }, 'to change silences')
      .then((r) => { $('silmsg').textContent = `Silence ${r.id} created.`; $('smatch').value = ''; $('scomment').value = ''; return silences(); })
      .catch((err) => { $('silmsg').innerHTML = `<span class="error">${esc(err.message)}</span>`; });
  };

  // ---- backtest ----
  const end = Math.ceil(h.end_ns / S) * S;
  const first = h.first_bucket_ns != null ? Math.floor(h.first_bucket_ns / S) * S : end - 3600 * S;
  $('brule').innerHTML = Object.keys(rules).map((n) => `<option>${esc(n)}</option>`).join('') || '<option value="">no rule in force</option>';
  if (params.get('rule')) $('brule').value = params.get('rule');
  $('bfrom').value = toLocalInput(Number(params.get('bfrom')) || Math.max(first, end - 3600 * S));
  $('bto').value = toLocalInput(Number(params.get('bto')) || end);

  async function procChoices() {
    const a = fromLocalInput($('bfrom').value), b = fromLocalInput($('bto').value);
    if (a == null || b == null || a >= b) return;
    const r = await get('/api/processes', { from: a, to: b, sort: 'impacting', limit: 200 });
    const want = $('bproc').value || params.get('bproc');
    $('bproc').innerHTML = '<option value="0">the machine</option>' +
      r.processes.map((p) => `<option value="${p.id}" data-name="${esc(p.name)}">${esc(p.name)} (${p.pid})</option>`).join('');
    if (want && [...$('bproc').options].some((o) => o.value === String(want))) $('bproc').value = String(want);
  }
  $('bfrom').onchange = $('bto').onchange = () => procChoices().catch(fail('backtest'));

  async function backtest() {
    const rule = $('brule').value;
    const from = fromLocalInput($('bfrom').value), to = fromLocalInput($('bto').value);
    if (!rule) throw new Error('No rule is in force to backtest.');
    if (from == null || to == null || from >= to) throw new Error('From must be before To.');
    const pid = Number($('bproc').value || 0);
    const pname = pid ? $('bproc').selectedOptions[0].dataset.name : null;
    setParams({ rule, bfrom: from, bto: to, bproc: pid });
    $('btmsg').textContent = 'Running…';
    const r = await get(`/api/alert-rules/${encodeURIComponent(rule)}/backtest`, { from, to });
    const mine = r.series.filter((x) => (pid ? ofProcess(x, { id: pid, name: pname }) : x.process == null));
    $('btmsg').textContent = `${count(r.evaluations)} evaluations every ${span(r.interval_ns)} over ${span(r.window.to_ns - r.window.from_ns)}: ` +
      `${count(r.transitions)} transitions in ${count(r.series.length)} series; ${count(mine.length)} of them ${pid ? `of ${pname}` : 'of the machine'}.`;
    $('btresult').tBodies[0].innerHTML = r.series.flatMap((x) => x.transitions.map((t) => `<tr data-key="${esc(x.key)}" class="${mine.includes(x) ? 'mine' : ''}">
        <td>${esc(x.process ?? 'machine')}${x.pid ? ` (${x.pid})` : ''} · ${esc(x.tag ?? 'all')}</td><td>${esc(time(t.ts_ns))}</td><td>${esc(t.from)}</td><td>${esc(t.to)}</td>
        <td>${esc(t.severity)}</td><td class="n">${fmtValue(t.value, rules[rule])}</td><td>${esc(t.reason)}</td></tr>`)).join('') ||
      '<tr><td colspan="7" class="muted">The rule would not have changed state in this window.</td></tr>';
    const s = await get(pid ? `/api/processes/${pid}/series` : '/api/system/series', { from: r.window.from_ns, to: r.window.to_ns });
    const bands = bandsOf(mine.flatMap((x) => periods(x.transitions, r.window.to_ns)));
    const f = (rules[rule] && rules[rule].fields) || {};
    const lines = f.metric === 'outstanding' ? thresholdLines(f, mine) : [];
    if (chart) chart.destroy();
    $('btchart').hidden = false;
    $('btchart').innerHTML = '';
    chart = stackChart($('btchart'), s, { bands, lines });
    $('btchart').dataset.bands = String(bands.length);
  }
  $('btform').onsubmit = (e) => { e.preventDefault(); backtest().catch(fail('backtest')); };

  function fail(where) {
    return (e) => {
      const el = where === 'backtest' ? $('btmsg') : where === 'detail' ? $('detail') : $('silmsg');
      el.hidden = false;
      el.innerHTML = `<span class="error">${esc(e.message)}</span>`;
    };
  }

  const refresh = async () => { rules = await rulesByName(); await Promise.all([active(), history(), silences()]); };
  await refresh();
  await procChoices().catch(fail('backtest'));
  if (params.get('alert')) await detail(Number(params.get('alert'))).catch(fail('detail'));
  if (params.get('rule') && params.get('bfrom')) await backtest().catch(fail('backtest'));
  timer = setInterval(() => { if (!document.hidden) refresh().catch(() => {}); }, 10000);
  return { destroy() { clearInterval(timer); if (chart) chart.destroy(); } };
}

/** Horizontal lines at an outstanding rule's thresholds (bytes): the
 * series' own (as evaluated), else none (the text's units are the rule
 * parser's to read). */
export function thresholdLines(fields, series) {
  const seen = new Set(), out = [];
  for (const x of series)
    for (const t of x.transitions || [])
      if (t.threshold != null && !seen.has(t.threshold)) {
        seen.add(t.threshold);
        out.push({ y: t.threshold, color: t.severity === 'critical' ? '#c0392b' : '#e67e22', label: `${t.severity} ${bytes(t.threshold)}` });
      }
  return out;
}
