// app.js - the dashboard shell: a hash router over four pages (Overview,
// Process, Diff, Alerts), the health badge and the count of firing alerts.
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
import { span, esc } from './fmt.js';

let current = null;

async function route() {
  if (current && current.destroy) current.destroy();
  current = null;
  const main = document.getElementById('main');
  const { parts, params } = parseHash();
  const page = parts[0] || 'overview';
  for (const a of document.querySelectorAll('[data-nav]'))
    a.classList.toggle('active', a.dataset.nav === page || (page === 'process' && a.dataset.nav === 'overview'));
  main.innerHTML = '';
  try {
    if (page === 'process' && parts[1]) current = await processPage(main, Number(parts[1]), params);
    else if (page === 'diff') current = await diffPage(main, params);
    else if (page === 'alerts') current = await alertsPage(main, params);
    else current = await overviewPage(main, params);
  } catch (e) {
    main.innerHTML = `<p class="error">${esc(e.message)}</p>`;
  }
}

async function badge() {
  const el = document.getElementById('status');
  try {
    const h = await health();
    el.textContent = `${h.source || 'service'} · up ${span(h.uptime_s * 1e9)} · ${Number(h.events_ingested).toLocaleString()} events` +
      (Number(h.events_lost) ? ` · ${Number(h.events_lost).toLocaleString()} lost` : '');
    el.className = 'status ok';
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
