// app.js - the dashboard shell: a hash router over three pages (Overview,
// Process, Diff) and the health badge. No build step: plain ES modules.
//   #/                       overview
//   #/process/ID?from=&to=   one process instance (times in Unix ns)
//   #/diff?process=&t1=&t2=  UMDH-style diff

import { health, parseHash } from './nav.js';
import { overviewPage } from './overview.js';
import { processPage } from './process.js';
import { diffPage } from './diff.js';
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

window.addEventListener('hashchange', route);
route();
badge();
setInterval(badge, 10000);
