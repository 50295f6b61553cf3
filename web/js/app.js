// app.js - the dashboard shell: a hash router over four pages (Overview,
// Process, Diff, Alerts), the health badge, the degraded banner and the
// count of firing alerts.
// No build step: plain ES modules.
//   #/                       overview
//   #/process/ID?from=&to=   one process instance (times in Unix ns)
//   #/diff?process=&t1=&t2=  UMDH-style diff
//   #/alerts                 alerts, silences, backtest

import { health, parseHash } from './nav.js';
import { overviewPage } from './overview.js';
import { processPage } from './process.js';
import { diffPage } from './diff.js';
import { alertsPage } from './alerts.js';
import { get } from './api.js';
import { span, esc, time } from './fmt.js';

let current = null;
let routed = 0; // the latest route(): an earlier page still loading is stale

async function route() {
  const my = ++routed;
  if (current && current.destroy) current.destroy();
  current = null;
  const main = document.getElementById('main');
  const { parts, params } = parseHash();
  const page = parts[0] || 'overview';
  for (const a of document.querySelectorAll('[data-nav]'))
    a.classList.toggle('active', a.dataset.nav === page || (page === 'process' && a.dataset.nav === 'overview'));
  main.innerHTML = '';
  try {
    let shown;
    if (page === 'process' && parts[1]) shown = await processPage(main, Number(parts[1]), params);
    else if (page === 'diff') shown = await diffPage(main, params);
    else if (page === 'alerts') shown = await alertsPage(main, params);
    else shown = await overviewPage(main, params);
    // Left while it loaded: the page now shown is another's.
    if (my !== routed) { if (shown && shown.destroy) shown.destroy(); return; }
    current = shown;
  } catch (e) {
    // A page left while it loaded fails on elements the next page
    // replaced: its error is not the new page's.
    if (my === routed) main.innerHTML = `<p class="error">${esc(e.message)}</p>`;
  }
}

/** The banner of every page while /api/health says "degraded": why (the
 * source's error, or the store's) and since when; hidden otherwise. */
export function degradedBanner(el, h) {
  const ss = h && h.source_state;
  const down = h && h.status === 'degraded';
  el.hidden = !down;
  if (!down) { el.textContent = ''; return; }
  const src = ss && ss.up === false && ss.error;
  const why = src ? ss.error : h.store_error || 'the service is degraded';
  const since = src ? ss.since_ns : h.store_error_since_ns;
  const what = src ? `The ${esc(h.source)} source is down` : 'Storing is paused';
  el.innerHTML = `<b>Degraded:</b> ${what}${since != null ? ` since ${esc(time(since))}` : ''}: ` +
    `${esc(why)}. The stored data is still served${src && ss.next_retry_ns != null ? `; next try at ${esc(time(ss.next_retry_ns))}` : ''}.`;
}

async function badge() {
  const el = document.getElementById('status');
  try {
    const h = await health();
    degradedBanner(document.getElementById('banner'), h);
    el.textContent = `${h.read_only ? `read-only ${h.platform || ''} database` : h.source || 'service'} · up ${span(h.uptime_s * 1e9)} · ${Number(h.events_ingested).toLocaleString()} events` +
      (Number(h.events_lost) ? ` · ${Number(h.events_lost).toLocaleString()} lost` : '');
    el.className = h.status === 'degraded' ? 'status bad' : 'status ok';
  } catch (e) {
    el.textContent = 'service unreachable';
    el.className = 'status bad';
  }
}

/** The nav's count of active alerts, red while one fires. */
async function alertCount() {
  const el = document.getElementById('alertcount');
  try {
    const r = await get('/api/alerts');
    const firing = r.alerts.filter((a) => a.state === 'firing');
    el.hidden = r.alerts.length === 0;
    el.textContent = String(r.alerts.length);
    el.className = `badge ${firing.some((a) => a.severity === 'critical') ? 'critical' : firing.length ? 'warning' : 'pending'}`;
    el.title = `${firing.length} firing, ${r.alerts.length - firing.length} pending`;
  } catch (e) {
    el.hidden = true;
  }
}

window.addEventListener('hashchange', route);
route();
badge();
alertCount();
setInterval(() => { badge(); alertCount(); }, 10000);
