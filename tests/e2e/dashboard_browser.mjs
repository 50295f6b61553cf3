// dashboard_browser.mjs - drives the dashboard in Debian's chromium through
// playwright-core (web/node_modules). Run by test_dashboard_browser.py,
// which starts the services and passes:
//   CW_URL          the MemoryTestApp fixture, fully ingested
//   CW_LIVE_URL     the same fixture replayed at real time (--rebase-now
//                   --speed 1), still ingesting
//   CW_RANGE_URL    a synthetic trace of 55 minutes (CW_RANGE_SPEC says
//                   what is in it)
//   CW_ALERTS_URL   the fixture with alert state stored beside it
//                   (alertdoc.py; CW_ALERTS_SPEC: its ids, token, times)
//   CW_WINDOWS      tests/fixtures/memorytestapp.windows.json
//   CW_SHOTS        folder for screenshots
//   CW_SOURCE       the source tree (to find web/node_modules)
// What the page shows is compared with the REST API for the same window
// (the page's URL or links name it), and, where the seed knows them, with
// exact figures. Every wait is a condition with a deadline; a wait that
// runs out is a failed check. Answers made late on purpose (page.route
// holds a request back) check that an older answer never replaces a newer
// one. Prints "N passed, M failed" and exits non-zero on any failure.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { api, launchChromium, waiter } from './cwbrowser.mjs';


const URL = process.env.CW_URL;
const LIVE = process.env.CW_LIVE_URL;
const RANGE = process.env.CW_RANGE_URL;
const RSPEC = JSON.parse(readFileSync(process.env.CW_RANGE_SPEC, 'utf8'));
const W = JSON.parse(readFileSync(process.env.CW_WINDOWS, 'utf8'));
const ALERTS = process.env.CW_ALERTS_URL;
const ASPEC = JSON.parse(readFileSync(process.env.CW_ALERTS_SPEC, 'utf8'));
const SHOTS = process.env.CW_SHOTS;
const S = 1e9;
const MB = 1024 * 1024;
const T0 = W.t0_ns;
const STEP = W.windows.step, FOUR = W.windows.last_four_spikes;
let passed = 0, failed = 0;

function check(name, cond, detail = '') {
  if (cond) { passed++; console.log(`ok   ${name}`); }
  else { failed++; console.log(`FAIL ${name} ${detail}`); }
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
function eq(name, got, want) { check(name, same(got, want), `got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`); }

/** "+10.0 MB" -> {v: bytes, tol: half a unit of its last digit}; null if it is not a size. */
function parseSize(s) {
  const m = /^([+-]?)(\d+(?:\.(\d+))?) (B|KB|MB|GB|TB)$/.exec(String(s).trim());
  if (!m) return null;
  const k = ['B', 'KB', 'MB', 'GB', 'TB'].indexOf(m[4]);
  const dec = m[3] ? m[3].length : 0;
  return { v: (m[1] === '-' ? -1 : 1) * parseFloat(m[2]) * 1024 ** k, sign: m[1], tol: k ? 0.5 * 10 ** -dec * 1024 ** k * 1.0001 : 0 };
}
/** "" when `shown` writes `bytes` (signed: with a + for growth), else why not. */
function sizeDiff(what, shown, bytes, signed = false) {
  const p = parseSize(shown);
  if (!p) return `${what}: "${shown}" is not a size (API ${bytes})`;
  if (Math.abs(p.v - bytes) > p.tol) return `${what}: shows "${shown}", API ${bytes}`;
  if (signed && bytes > 0 && p.sign !== '+') return `${what}: "${shown}" lacks the + of growth`;
  if (!signed && p.sign) return `${what}: "${shown}" has a sign`;
  return '';
}
const countOf = (s) => (/^-?[\d,]+$/.test(String(s).trim().replace(/^\+/, '')) ? Number(String(s).trim().replace(/[,+]/g, '')) : NaN);
function countDiff(what, shown, n) { return countOf(shown) === n ? '' : `${what}: shows "${shown}", API ${n}`; }
/** "2025-06-15 15:06:59.504" (the browser runs in UTC) -> ms since the epoch. */
function parseTimeMs(s) { return Date.parse(String(s).trim().replace(' ', 'T') + 'Z'); }
function timeDiff(what, shown, ns) {
  return parseTimeMs(shown) === Math.floor(ns / 1e6) ? '' : `${what}: shows "${shown}", API ${ns} ns`;
}
function listCheck(name, diffs) { const d = diffs.filter(Boolean); check(name, d.length === 0, d.join('; ')); }


/** Polls fn() (async, node side) until truthy or ms pass; the last value. */
async function pollUntil(fn, ms) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const { browser, close } = await launchChromium(process.env.CW_SOURCE);
const consoleErrors = [];
const seriesRequests = []; // {at, url} of every /api/system/series the pages ask for
const shot = (page, name) => page.screenshot({ path: path.join(SHOTS, name), fullPage: true });
const t00 = Date.now();
const elapsed = () => `${((Date.now() - t00) / 1000).toFixed(1)} s`;

try {
  const page = browser.pages()[0] || await browser.newPage();
  page.setDefaultTimeout(15000);
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  page.on('request', (r) => { if (r.url().includes('/api/system/series')) seriesRequests.push({ at: Date.now(), url: r.url() }); });

  /** page.waitForFunction with a deadline: true, or false when it ran out. */
  const waitFor = waiter(page, process.env.CW_SOURCE);

  /** p, or null once ms have passed. */
  const within = (p, ms) => Promise.race([p, new Promise((r) => setTimeout(() => r(null), ms))]);
  /** Holds the requests whose URL (a URL object) matches, before they reach
   * the server, until release(): an answer made late, as a slow server or
   * network would. `seen` resolves with the first such request. */
  async function hold(match) {
    let release, seen;
    const gate = new Promise((r) => { release = r; });
    const first = new Promise((r) => { seen = r; });
    const m = (u) => match(u);
    const handler = async (route) => { seen(route.request()); await gate; await route.continue().catch(() => {}); };
    await page.route(m, handler);
    return { seen: first, release: () => release(), stop: () => page.unroute(m, handler) };
  }
  /** Releases a held request and waits for its answer to reach the page. */
  async function releaseHeld(h, req) {
    const resp = page.waitForResponse((r) => r.request() === req, { timeout: 10000 }).catch(() => null);
    h.release();
    return !!(await resp);
  }

  // ---- Overview helpers ------------------------------------------------
  /** The overview chart's window (ns), its points and the top of its stack. */
  const chartState = () => page.evaluate(() => {
    const el = document.querySelector('#chart');
    const u = el && el._uplot;
    if (!u || !u.root.isConnected) return null;
    return { from: Math.round(u.scales.x.min * 1e3) * 1e6, to: Math.round(u.scales.x.max * 1e3) * 1e6,
      n: u.data[0].length, total: [...u.data[1]], peak: [...u.data[u.data.length - 1]], drawn: Number(el.dataset.drawn) };
  });
  /** The overview chart's bands against /api/system/series for its window:
   * each tag's band is its outstanding, the biggest tag at the bottom. */
  async function compareBands(label, base) {
    const b = await page.evaluate(() => {
      const u = document.querySelector('#chart')._uplot;
      return { labels: u.series.slice(1, -1).map((x) => x.label), data: u.data.slice(1, -1).map((a) => [...a]),
        from: Math.round(u.scales.x.min * 1e3) * 1e6, to: Math.round(u.scales.x.max * 1e3) * 1e6 };
    });
    const sr = await api(base, '/api/system/series', { from: b.from, to: b.to });
    eq(`${label}: the chart has a band per tag of the API`, b.labels.slice().sort(), sr.tags.slice().sort());
    const diffs = b.labels.map((tag, i) => {
      const own = b.data[i].map((v, j) => v - (i + 1 < b.data.length ? b.data[i + 1][j] : 0));
      return same(own, sr.outstanding[tag]) ? '' : `${tag}: ${JSON.stringify(own.slice(-3))} vs API ${JSON.stringify((sr.outstanding[tag] || []).slice(-3))} (last 3)`;
    });
    listCheck(`${label}: each tag's band is the API's outstanding of that tag`, diffs);
    const max = (a) => a.reduce((m, v) => Math.max(m, v), 0);
    const biggest = Math.max(...sr.tags.map((t) => max(sr.outstanding[t])));
    const bottom = b.labels[b.labels.length - 1];
    check(`${label}: the biggest tag is at the bottom of the stack`, max(sr.outstanding[bottom] || []) === biggest, `bottom ${bottom}`);
  }

  /** The process table: a row per process with its figures and its link's window. */
  const overviewRows = () => page.evaluate(() => [...document.querySelectorAll('#procs tbody tr[data-id]')].map((tr) => {
    const c = [...tr.cells].map((td) => td.textContent.trim());
    const q = new URLSearchParams(tr.querySelector('a').getAttribute('href').split('?')[1]);
    return { id: Number(tr.dataset.id), name: tr.dataset.name, pid: c[1], impacting: c[2], growth: c[3], tcount: c[4], tsize: c[5],
      size: c[6], count: c[7], peak: c[8], outstanding: c[9], top: c[10], exited: c[0].includes('(exited)'),
      ended: c[0].includes('(tracking ended '), label: c[0],
      from: Number(q.get('from')), to: Number(q.get('to')) };
  }));
  const tableNote = () => page.evaluate(() => document.querySelector('#procs tbody td.muted')?.textContent.trim() ?? null);
  /** Waits until the table's rows are `names`, in order (and, given, for [from, to)). */
  const waitTable = (names, from = null, to = null, ms = 10000) => waitFor(([n, f, t]) => {
    const rows = [...document.querySelectorAll('#procs tbody tr[data-id]')];
    if (JSON.stringify(rows.map((r) => r.dataset.name)) !== JSON.stringify(n)) return false;
    if (f === null) return true;
    return rows.every((r) => {
      const q = new URLSearchParams(r.querySelector('a').getAttribute('href').split('?')[1]);
      return Number(q.get('from')) === f && Number(q.get('to')) === t;
    });
  }, [names, from, to], ms);

  /** Every row against /api/processes for the rows' window (same name filter). */
  async function compareTable(label, base, name = '') {
    const rows = await overviewRows();
    if (!rows.length) { check(`${label}: table has rows`, false, `note: ${await tableNote()}`); return rows; }
    const { from, to } = rows[0];
    if (!(from > 0 && to > from)) { check(`${label}: the rows link to a window`, false, JSON.stringify(rows[0])); return rows; }
    const r = await api(base, '/api/processes', { from, to, sort: 'impacting', limit: 500, name });
    eq(`${label}: rows are the API's processes for the window, in impacting order`,
      rows.map((x) => `${x.name}#${x.id}`), r.processes.map((p) => `${p.name}#${p.id}`));
    const w = r.window.to_ns - r.window.from_ns;
    const diffs = [];
    for (const x of rows) {
      if (x.from !== r.window.from_ns || x.to !== r.window.to_ns) diffs.push(`${x.name}: link window ${x.from}..${x.to}`);
      const p = r.processes.find((q) => q.id === x.id);
      if (!p) continue;
      const grow = /^([+-]?[\d.]+ [KMGT]?B)\/h$/.exec(x.growth);
      diffs.push(
        countDiff(`${x.name} pid`, x.pid, p.pid),
        sizeDiff(`${x.name} impacting`, x.impacting, p.impacting_bytes, true),
        grow ? sizeDiff(`${x.name} growth`, grow[1], p.impacting_bytes * 3.6e12 / w, true) : `${x.name} growth: "${x.growth}"`,
        countDiff(`${x.name} transient #`, x.tcount, p.transient_count),
        sizeDiff(`${x.name} transient size`, x.tsize, p.transient_bytes),
        sizeDiff(`${x.name} size`, x.size, p.size_bytes),
        countDiff(`${x.name} count`, x.count, p.commit_count),
        sizeDiff(`${x.name} peak`, x.peak, p.peak_outstanding_bytes),
        sizeDiff(`${x.name} outstanding`, x.outstanding, p.outstanding_end_bytes),
        x.top === (p.tags[0] ? p.tags[0].tag : '') ? '' : `${x.name} top tag "${x.top}"`,
        // (exited) is the state when the page asked; a live process may exit after that.
        x.exited === (p.exit_ns != null) || (!x.exited && p.exit_ns >= r.window.to_ns) ? '' : `${x.name} exited mark`,
        // Alive when tracking ended (the end of a replay's input): not an exit.
        x.ended === (p.tracking_ended_ns != null) ? '' : `${x.name} tracking-ended mark`);
    }
    listCheck(`${label}: every figure in the table is the API's`, diffs);
    return rows;
  }

  /** Drags on the chart from fromNs to toNs (2 px inside each end). */
  async function drag(fromNs, toNs) {
    const box = await page.evaluate(([a, b]) => {
      const u = document.querySelector('#chart')._uplot;
      const r = u.over.getBoundingClientRect();
      return { x1: r.left + u.valToPos(a / 1e9, 'x'), x2: r.left + u.valToPos(b / 1e9, 'x'), y: r.top + r.height / 2 };
    }, [fromNs, toNs]);
    await page.mouse.move(box.x1 + 2, box.y);
    await page.mouse.down();
    await page.mouse.move((box.x1 + box.x2) / 2, box.y, { steps: 5 });
    await page.mouse.move(box.x2 - 2, box.y, { steps: 5 });
    await page.mouse.up();
  }

  // ======================================================================
  // 1. Live: the overview of a replay still ingesting at real time. First,
  //    while the paced replay has most of its 32 s left.
  // ======================================================================
  {
    await page.goto(`${LIVE}/#/?range=15m`);
    const liveReq = () => seriesRequests.filter((r) => r.url.startsWith(LIVE));
    // Chart drawn and the table for the chart's window, newer than `after`.
    const waitLive = (after, ms) => waitFor(([name, aft]) => {
      const u = document.querySelector('#chart')?._uplot;
      const a = document.querySelector(`#procs tr[data-name="${name}"] a`);
      if (!u || !u.root.isConnected || !a) return false;
      const to = Math.round(u.scales.x.max * 1e3) * 1e6;
      const q = new URLSearchParams(a.getAttribute('href').split('?')[1]);
      return to > aft && Number(q.get('to')) === to;
    }, [W.process.name, after], ms);
    const liveRow = async () => (await overviewRows()).find((r) => r.name === W.process.name);

    check('live: the overview draws the chart and lists MemoryTestApp while ingesting', await waitLive(0, 20000), elapsed());
    const h0 = await api(LIVE, '/api/health');
    check('live: the replay is still ingesting (the premise of the refresh checks)', h0.ingest_done === false, JSON.stringify(h0));
    const A = await chartState(), rowA = await liveRow();
    check('live: the table is for the chart\'s window', rowA && rowA.from === A.from && rowA.to === A.to, JSON.stringify({ A: [A.from, A.to], row: rowA && [rowA.from, rowA.to] }));

    // The 5 s refresh: chart and table move on without any input.
    const refreshed = await waitLive(A.to, 9000);
    check('live: the 5 s refresh redraws the chart with newer data', refreshed, `chart to ${A.to}, ${elapsed()}`);
    const B = await chartState(), rowB = await liveRow();
    const req = liveReq();
    const gap = req.length >= 2 ? req[req.length - 1].at - req[req.length - 2].at : NaN;
    check('live: the refresh came about 5 s after the first load', gap >= 4000 && gap <= 6500, `gap ${gap} ms between series requests`);
    check('live: the chart\'s window grew with the data', B.to > A.to && B.from === A.from && B.n > A.n,
      JSON.stringify({ A: [A.from, A.to, A.n], B: [B.from, B.to, B.n] }));
    check('live: the table moved to the new window', rowB.from === B.from && rowB.to === B.to, JSON.stringify([rowB.from, rowB.to]));
    check('live: MemoryTestApp\'s Size grew between the two loads', parseSize(rowB.size).v > parseSize(rowA.size).v,
      `${rowA.size} -> ${rowB.size}`);
    const sB = await api(LIVE, '/api/system/series', { from: B.from, to: B.to });
    eq('live: the chart\'s stacked total is the API\'s system series', B.total, sB.outstanding_total);
    eq('live: the chart\'s peak line is the API\'s', B.peak, sB.peak_bytes);
    await compareBands('live chart', LIVE);
    await compareTable('live, after the refresh', LIVE);
    await shot(page, 'overview-live.png');

    // "live" off: no refresh while the data moves on; Refresh brings it.
    await page.uncheck('#live');
    const C = await chartState();
    const nReq = liveReq().length;
    const endOff = (await api(LIVE, '/api/health')).last_bucket_end_ns;
    const moved = await pollUntil(async () => (await api(LIVE, '/api/health')).last_bucket_end_ns >= endOff + 6 * S, 15000);
    check('live: the replay stored 6 s more data with "live" off', moved, `${elapsed()}`);
    const Cafter = await chartState();
    check('live off: no refresh for 6 s', liveReq().length === nReq && Cafter.to === C.to,
      `${liveReq().length - nReq} series requests, chart to ${C.to} -> ${Cafter.to}`);
    await page.click('#refresh');
    check('live off: the Refresh button redraws chart and table with the newer data', await waitLive(C.to, 10000), elapsed());
    const D = await chartState();
    // Refresh asks /api/health anew (not the answer the page shares for a
    // second): the chart reaches at least what was stored before the click.
    check('live: after Refresh the chart shows the data stored while "live" was off', D.to >= endOff + 6 * S, `chart to ${D.to}, data at ${endOff + 6 * S} before the click`);
    const sD = await api(LIVE, '/api/system/series', { from: D.from, to: D.to });
    eq('live: after Refresh the chart\'s stacked total is the API\'s', D.total, sD.outstanding_total);
    await compareTable('live, after Refresh', LIVE);
    console.log(`     (live part done at ${elapsed()})`);
  }

  // ======================================================================
  // 2. Range selector: 55 minutes of data, early.exe in the first minute,
  //    late.exe in the last five.
  // ======================================================================
  {
    const hR = await api(RANGE, '/api/health');
    const first = Math.floor(hR.first_bucket_ns / S) * S, end = hR.data_end_ns;
    const both = [RSPEC.late.name, RSPEC.early.name];
    // The chart asks for [first data, end): the series API gives whole steps.
    const w1h = (await api(RANGE, '/api/system/series', { from: first, to: end })).window;
    check('range 1h: the series window starts at the first data and covers the end', w1h.from_ns === first && w1h.to_ns >= end, JSON.stringify(w1h));
    // The table asks for the chart's window; the API clips it to the end of
    // the data (late.exe is alive when the replay's input ends).
    const r1h = await api(RANGE, '/api/processes', { from: w1h.from_ns, to: w1h.to_ns, sort: 'impacting' });
    const names1h = r1h.processes.map((p) => p.name);
    eq('range 1h: the table\'s window is clipped to the end of the data', r1h.window.to_ns, end);
    await page.goto(`${RANGE}/#/`);
    check('range 1h (the default): both processes are listed, for the chart\'s window', await waitTable(names1h, r1h.window.from_ns, r1h.window.to_ns),
      JSON.stringify((await overviewRows()).map((r) => r.name)));
    eq('range: the default is the last hour', await page.locator('#range').inputValue(), '1h');
    eq('range 1h: the API lists early.exe and late.exe', names1h.slice().sort(), both.slice().sort());
    let c = await chartState();
    eq('range 1h: the chart spans the data (clipped to the first bucket)', [c.from, c.to], [w1h.from_ns, w1h.to_ns]);
    await compareTable('range 1h', RANGE);

    await page.selectOption('#range', '15m');
    const f15 = Math.floor((end - 15 * 60 * S) / (60 * S)) * 60 * S; // ranges start on a whole minute
    const ok15 = await waitTable([RSPEC.late.name], f15, end);
    check('range 15m: only late.exe is listed, for the last 15 minutes', ok15, JSON.stringify((await overviewRows()).map((r) => [r.name, r.from, r.to])));
    c = await chartState();
    eq('range 15m: the chart spans the last 15 minutes, from a whole minute', [c.from, c.to], [f15, end]);
    check('range 15m: the URL keeps the range', (await page.evaluate(() => location.hash)).includes('range=15m'), await page.evaluate(() => location.hash));
    await compareTable('range 15m', RANGE);
    await shot(page, 'overview-range-15m.png');

    await page.reload();
    const ok15r = await waitTable([RSPEC.late.name], f15, end);
    check('range 15m: a reload keeps it', ok15r && await page.locator('#range').inputValue() === '15m', await page.locator('#range').inputValue());

    await page.selectOption('#range', '7d');
    check('range 7d: both processes again', await waitTable(names1h, r1h.window.from_ns, r1h.window.to_ns), JSON.stringify((await overviewRows()).map((r) => r.name)));
  }

  // ======================================================================
  // 3. Overview of the fixture: figures, search, drag to narrow.
  // ======================================================================
  const hM = await api(URL, '/api/health');
  // The data ends where the replay's input ended tracking (not at the end
  // of the last stored bucket, which holds only that end).
  const mFirst = Math.floor(hM.first_bucket_ns / S) * S, mEnd = hM.data_end_ns;
  eq('health: the replay\'s data ends where tracking ended', [hM.tracking_ended_ns, mEnd], [hM.last_bucket_end_ns - S, hM.last_bucket_end_ns - S]);
  const all = (await api(URL, '/api/processes', { from: mFirst, to: mEnd, sort: 'impacting', limit: 500 })).processes;
  await page.goto(`${URL}/#/`);
  check('overview lists the fixture\'s processes', await waitTable(all.map((p) => p.name), mFirst, mEnd),
    JSON.stringify((await overviewRows()).map((r) => r.name)));
  check('overview lists MemoryTestApp', (await overviewRows()).some((r) => r.name === W.process.name && Number(r.pid) === W.process.pid));
  check('overview chart drawn', await waitFor(() => Number(document.querySelector('#chart')?.dataset.drawn) > 0, null, 5000));
  let cs = await chartState();
  eq('overview chart: the window of the data', [cs.from, cs.to], [mFirst, mEnd]);
  const sM = await api(URL, '/api/system/series', { from: cs.from, to: cs.to });
  eq('overview chart: stacked total is the API\'s system series', cs.total, sM.outstanding_total);
  await compareBands('overview chart', URL);
  const rowsAll = await compareTable('overview', URL);
  {
    const mta = rowsAll.find((r) => r.name === W.process.name);
    const whole = W.windows.whole.expect;
    eq('overview: MemoryTestApp Size 126 MB (seed: all it ever commits)', mta && mta.size, '126 MB');
    eq('overview: MemoryTestApp Impacting 0 (everything released by the end)', mta && mta.impacting, '0 B');
    eq('overview: MemoryTestApp Count and transient count', mta && [mta.count, mta.tcount], [String(whole.commit_count), String(whole.transient_count)]);
    // A real exit shows "(exited)"; the processes alive when the replay's
    // input ended show where tracking ended, with what they still held.
    check('overview: MemoryTestApp (a real exit) is marked exited', mta && mta.exited && !mta.ended, mta && mta.label);
    const alive = rowsAll.filter((r) => r.name === 'svchost.exe' || r.name === 'notepad.exe');
    check('overview: svchost.exe and notepad.exe show "(tracking ended …)", not "(exited)", with memory outstanding',
      alive.length === 2 && alive.every((r) => r.ended && !r.exited && r.outstanding !== '0 B'), JSON.stringify(alive.map((r) => [r.label, r.outstanding])));
    const note = await page.locator('#note').textContent();
    check('overview: a note says where tracking ended', await page.locator('#note').isVisible() && note.startsWith('Tracking ended'), note);
  }
  await shot(page, 'overview-1280.png');

  // Search box: filters the table (substring, any case), and ?name= links.
  const apiNames = async (name, from = mFirst, to = mEnd) =>
    (await api(URL, '/api/processes', { from, to, sort: 'impacting', limit: 500, name })).processes.map((p) => p.name);
  await page.fill('#search', 'note');
  check('search "note": only notepad.exe', await waitTable(['notepad.exe'], mFirst, mEnd), JSON.stringify((await overviewRows()).map((r) => r.name)));
  eq('search "note": the API agrees', await apiNames('note'), ['notepad.exe']);
  await page.fill('#search', 'SVCHOST');
  check('search "SVCHOST": any case', await waitTable(['svchost.exe'], mFirst, mEnd), JSON.stringify((await overviewRows()).map((r) => r.name)));
  await compareTable('search "SVCHOST"', URL, 'SVCHOST');
  await page.fill('#search', 'nothing-like-this');
  const noneOk = await waitFor(() => document.querySelector('#procs tbody td.muted')?.textContent.includes('matches nothing-like-this'), null, 5000);
  check('search with no match: the table says so', noneOk && (await overviewRows()).length === 0, String(await tableNote()));
  await page.fill('#search', '');
  check('search cleared: all processes again', await waitTable(all.map((p) => p.name), mFirst, mEnd));
  // A late answer to an older search must not replace the newer one's.
  await page.uncheck('#live'); // no refresh in between
  {
    const h = await hold((u) => u.pathname === '/api/processes' && u.searchParams.get('name') === 'note');
    await page.fill('#search', 'note');
    const req = await within(h.seen, 5000);
    check('late answer: the search for "note" was asked (its answer held back)', !!req);
    await page.fill('#search', 'svc');
    check('late answer: the newer search "svc" shows svchost.exe', await waitTable(['svchost.exe'], mFirst, mEnd));
    check('late answer: the answer for "note" reached the page', req && await releaseHeld(h, req));
    // Rendering follows the answer at once; a second is plenty to see it.
    const stale = await waitFor(() => [...document.querySelectorAll('#procs tbody tr[data-id]')].some((r) => r.dataset.name === 'notepad.exe'), null, 1000);
    check('late answer: the table still shows "svc"\'s rows, not the older search\'s', !stale && await page.locator('#search').inputValue() === 'svc',
      JSON.stringify((await overviewRows()).map((r) => r.name)));
    await h.stop();
  }
  await page.goto(`${URL}/#/?name=Memory`);
  check('a link with ?name=Memory opens the overview filtered', await waitTable([W.process.name], mFirst, mEnd) &&
    await page.locator('#search').inputValue() === 'Memory', await page.locator('#search').inputValue());
  await page.goto(`${URL}/#/`);
  await waitTable(all.map((p) => p.name), mFirst, mEnd);
  await waitFor(() => Number(document.querySelector('#chart')?.dataset.drawn) > 0, null, 5000);

  // Drag on the chart: the table narrows to the dragged window (1 s steps).
  eq('overview chart has 1 s steps over the fixture', sM.step_ns, S);
  await drag(STEP.from_ns, STEP.to_ns);
  const namesStep = await apiNames('', STEP.from_ns, STEP.to_ns);
  check('overview drag over the step: the table narrows to [14 s, 16 s)', await waitTable(namesStep, STEP.from_ns, STEP.to_ns),
    JSON.stringify((await overviewRows()).map((r) => [r.name, r.from, r.to])));
  check('overview drag: cmd.exe (exited at 9 s) leaves the table', !namesStep.includes('cmd.exe') && all.some((p) => p.name === 'cmd.exe'), JSON.stringify(namesStep));
  const selText = await page.locator('#sel').textContent();
  check('overview drag: the heading names the window', selText.includes('2025-06-15 15:06:54') && selText.includes('15:06:56'), selText);
  let rows = await compareTable('overview, step window', URL);
  let mta = rows.find((r) => r.name === W.process.name);
  eq('overview, step window: MemoryTestApp Impacting +10.0 MB (seed)', mta && mta.impacting, '+10.0 MB');
  eq('overview, step window: MemoryTestApp is first (sorted by impacting)', rows[0] && rows[0].name, W.process.name);
  await shot(page, 'overview-step-window.png');

  await drag(FOUR.from_ns, FOUR.to_ns);
  check('overview drag over the last four spikes: the table narrows', await waitTable(await apiNames('', FOUR.from_ns, FOUR.to_ns), FOUR.from_ns, FOUR.to_ns),
    JSON.stringify((await overviewRows()).map((r) => [r.name, r.from, r.to])));
  rows = await compareTable('overview, last four spikes', URL);
  mta = rows.find((r) => r.name === W.process.name);
  eq('overview, last four spikes: MemoryTestApp Count 4, Size 40 MB, transient 4, Impacting 0 (seed)',
    mta && [mta.count, mta.size, mta.tcount, mta.tsize, mta.impacting], ['4', '40.0 MB', '4', '40.0 MB', '0 B']);
  // Search within the narrowed window.
  await page.fill('#search', 'svc');
  check('search within the dragged window keeps the window', await waitTable(['svchost.exe'], FOUR.from_ns, FOUR.to_ns),
    JSON.stringify((await overviewRows()).map((r) => [r.name, r.from, r.to])));
  await page.fill('#search', '');
  await waitTable(await apiNames('', FOUR.from_ns, FOUR.to_ns), FOUR.from_ns, FOUR.to_ns);
  await page.click('#clear');
  check('"whole range" gives the table its whole window back', await waitTable(all.map((p) => p.name), mFirst, mEnd));
  check('"whole range" clears the heading', (await page.locator('#sel').textContent()).trim() === '', await page.locator('#sel').textContent());

  // ======================================================================
  // 4. Process page.
  // ======================================================================
  const procId = all.find((p) => p.name === W.process.name).id;
  await page.locator(`#procs tr[data-name="${W.process.name}"] a`).first().click();
  check('process page: chart drawn', await waitFor(() => Number(document.querySelector('#chart')?.dataset.drawn) > 0, null, 15000));
  await page.waitForSelector('#figs [data-fig="impacting"]');
  const painted = await page.evaluate(() => {
    const c = document.querySelector('#chart canvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
    return n;
  });
  check('process chart draws something', painted > 1000, `painted=${painted}`);

  /** The URL's view and selection. */
  const hashWin = () => page.evaluate(() => {
    const q = new URLSearchParams(location.hash.split('?')[1] || '');
    const n = (k) => (q.get(k) ? Number(q.get(k)) : null);
    return { path: location.hash.split('?')[0], from: n('from'), to: n('to'), sf: n('sf'), st: n('st') };
  });
  /** Everything the window panel shows. */
  const panel = () => page.evaluate(() => {
    const f = {};
    for (const dd of document.querySelectorAll('#figs dd[data-fig]')) f[dd.dataset.fig] = dd.textContent.trim();
    const pk = document.querySelector('#figs dd[data-fig="peak"]');
    f.peakSize = pk ? pk.childNodes[0].textContent.trim() : null;
    f.peakAt = pk && pk.querySelector('small') ? pk.querySelector('small').textContent.replace(/^at /, '').trim() : null;
    const types = {};
    f.typeOrder = [...document.querySelectorAll('#types tbody tr')].map((tr) => tr.cells[0].textContent.trim() + '/' + tr.dataset.type).join(' ');
    for (const tr of document.querySelectorAll('#types tbody tr')) types[tr.dataset.type] = { count: tr.cells[2].textContent.trim(), size: tr.cells[3].textContent.trim() };
    const tags = [...document.querySelectorAll('#tags tbody tr')].filter((tr) => tr.cells.length === 6).map((tr) => [...tr.cells].map((c) => c.textContent.trim()));
    const sw = document.querySelector('#selwin').textContent;
    const m = /^(.+?) – (.+?) \(/.exec(sw);
    return { f, types, tags, selwin: sw, winFrom: m ? m[1] : null, winTo: m ? m[2] : null };
  });
  /** Waits until the panel shows [from, to) (its heading) and the figures are done. */
  const waitPanel = (from, to, ms = 10000) => waitFor(([a, b]) => {
    const m = /^(.+?) – (.+?) \(/.exec(document.querySelector('#selwin')?.textContent || '');
    const t = (s) => Date.parse(s.replace(' ', 'T') + 'Z');
    return m && t(m[1]) === Math.floor(a / 1e6) && t(m[2]) === Math.floor(b / 1e6) && document.querySelector('#figs [data-fig="impacting"]');
  }, [from, to], ms);
  /** The panel against /api/processes/{id}?from=&to=. */
  async function comparePanel(label, from, to) {
    const r = await api(URL, `/api/processes/${procId}`, { from, to });
    const p = r.process, w = r.window.to_ns - r.window.from_ns;
    const ui = await panel();
    const rate = /^(.+)\/h$/.exec(ui.f.rate || '');
    listCheck(`${label}: Size, Count, Impacting, rate, transient, peak, outstanding are the API's`, [
      timeDiff('window from', ui.winFrom, r.window.from_ns), timeDiff('window to', ui.winTo, r.window.to_ns),
      sizeDiff('Size', ui.f.size, p.size_bytes),
      countDiff('Count', ui.f.count, p.commit_count),
      sizeDiff('Impacting', ui.f.impacting, p.impacting_bytes, true),
      rate ? sizeDiff('Impacting rate', rate[1], p.impacting_bytes * 3.6e12 / w, true) : `rate "${ui.f.rate}"`,
      countDiff('Transient count', ui.f.transient_count, p.transient_count),
      sizeDiff('Transient size', ui.f.transient_size, p.transient_bytes),
      sizeDiff('Peak', ui.f.peakSize, p.peak_outstanding_bytes),
      timeDiff('Peak time', ui.f.peakAt, p.peak_ns),
      sizeDiff('Outstanding at end', ui.f.outstanding_end, p.outstanding_end_bytes)]);
    listCheck(`${label}: the four types are the API's, in order`, [ui.f.typeOrder === 'AIFI/AIFI AIFO/AIFO AOFI/AOFI AOFO/AOFO' ? '' : `rows ${ui.f.typeOrder}`,
      ...['AIFI', 'AIFO', 'AOFI', 'AOFO'].flatMap((t) => ui.types[t]
      ? [countDiff(`${t} count`, ui.types[t].count, p.types[t].count), sizeDiff(`${t} size`, ui.types[t].size, p.types[t].bytes)]
      : [`${t} row missing`])]);
    const tagDiffs = [ui.tags.length === p.tags.length ? '' : `${ui.tags.length} tag rows, API ${p.tags.length}`];
    p.tags.forEach((t, i) => {
      const row = ui.tags[i];
      if (!row) return;
      tagDiffs.push(row[0] === t.tag ? '' : `tag ${i}: "${row[0]}", API "${t.tag}"`,
        sizeDiff(`${t.tag} impacting`, row[1], t.impacting_bytes, true), sizeDiff(`${t.tag} size`, row[2], t.size_bytes),
        countDiff(`${t.tag} count`, row[3], t.commit_count), countDiff(`${t.tag} transient #`, row[4], t.transient_count),
        sizeDiff(`${t.tag} transient size`, row[5], t.transient_bytes));
    });
    listCheck(`${label}: the tags table is the API's`, tagDiffs);
    return { ui, p };
  }

  /** The caller tree's visible rows (frame, depth, figures). */
  const treeRows = () => page.evaluate(() => [...document.querySelectorAll('#tree .trow:not(.thead)')]
    .filter((r) => !r.closest('ul[hidden]'))
    .map((r) => ({ frame: r.querySelector('.tframe').getAttribute('title'), depth: Number(r.style.getPropertyValue('--depth')),
      n: [...r.querySelectorAll(':scope > span.n')].map((s) => s.textContent.trim()) })));
  /** The rows the tree should show: the API tree with its first path open. */
  function expectedTree(tree) {
    const out = [];
    const walk = (nodes, depth, first) => nodes.forEach((n, i) => {
      out.push({ frame: n.frame, depth, n });
      if (first && i === 0 && n.children && n.children.length) walk(n.children, depth + 1, true);
    });
    walk((tree && tree.children) || [], 0, true);
    return out;
  }
  async function compareTree(label, from, to, sort, type) {
    const st = await api(URL, `/api/processes/${procId}/stacks`, { from, to, sort, type, limit: 1 });
    const want = expectedTree(st.tree), got = await treeRows();
    eq(`${label}: the caller tree's open rows are the API's (${sort}${type ? ', ' + type : ''})`,
      got.map((r) => `${r.depth}:${r.frame}`), want.map((r) => `${r.depth}:${r.frame}`));
    const diffs = [];
    want.forEach((w, i) => {
      const g = got[i];
      if (!g || g.frame !== w.frame) return;
      diffs.push(sizeDiff(`${w.frame} impacting`, g.n[0], w.n.impacting_bytes, true), sizeDiff(`${w.frame} size`, g.n[1], w.n.size_bytes),
        countDiff(`${w.frame} count`, g.n[2], w.n.commit_count), countDiff(`${w.frame} trans. #`, g.n[3], w.n.transient_count),
        sizeDiff(`${w.frame} trans. size`, g.n[4], w.n.transient_bytes));
    });
    listCheck(`${label}: the caller tree's figures are the API's`, diffs);
    if (!want.length) {
      const txt = await page.locator('#tree').textContent();
      check(`${label}: an empty tree says so`, txt.includes('No stacks in this window'), txt);
    }
    return { got, want };
  }
  const doneAt = () => page.evaluate(() => window.cwFiguresDoneAt);
  const waitDone = (before, ms = 10000) => waitFor((b) => window.cwFiguresDoneAt !== b, before, ms);

  // The view from the overview's link: the overview's window, no selection.
  let hw = await hashWin();
  eq('process page: opened on the overview\'s window', [hw.path, hw.from, hw.to, hw.sf], [`#/process/${procId}`, mFirst, mEnd, null]);
  check('process page: whole-view figures shown', await waitPanel(mFirst, mEnd));
  await comparePanel('process, overview window', mFirst, mEnd);
  check('"Zoom to selection" is disabled without a selection', await page.locator('#zoom').isDisabled());
  await shot(page, 'process-1280.png');

  /** Drags over [from, to) and waits for the URL and the panel to show it. */
  async function select(label, from, to) {
    await drag(from, to);
    const ok = await waitFor(([a, b]) => {
      const q = new URLSearchParams(location.hash.split('?')[1] || '');
      return Number(q.get('sf')) === a && Number(q.get('st')) === b;
    }, [from, to], 10000);
    check(`${label}: the URL names the dragged window (snapped to whole steps)`, ok, JSON.stringify(await hashWin()));
    check(`${label}: the window panel shows it`, await waitPanel(from, to), (await panel()).selwin);
  }

  // The step: Impacting 10 MB (seed), an AIFO of 10 MB.
  await select('process, step window', STEP.from_ns, STEP.to_ns);
  let { ui, p } = await comparePanel('process, step window', STEP.from_ns, STEP.to_ns);
  eq('process, step window: Impacting +10.0 MB (seed)', ui.f.impacting, '+10.0 MB');
  eq('process, step window: API figures are the seed\'s', [p.impacting_bytes, p.size_bytes, p.commit_count, p.types, p.transient_count],
    [STEP.expect.impacting_bytes, STEP.expect.size_bytes, STEP.expect.commit_count, STEP.expect.types, STEP.expect.transient_count]);
  eq('process, step window: AIFO 1 / 10.0 MB', ui.types.AIFO, { count: '1', size: '10.0 MB' });
  check('"Zoom to selection" is enabled with a selection', !(await page.locator('#zoom').isDisabled()));
  await compareTree('process, step window', STEP.from_ns, STEP.to_ns, 'impacting', '');
  await shot(page, 'process-step-window.png');

  // The last four spikes: Count 4, Size 40 MB, Impacting 0 (seed).
  await select('process, last four spikes', FOUR.from_ns, FOUR.to_ns);
  ({ ui, p } = await comparePanel('process, last four spikes', FOUR.from_ns, FOUR.to_ns));
  eq('process, last four spikes: Count 4, Size 40.0 MB, Impacting 0, transient 4 / 40.0 MB (seed)',
    [ui.f.count, ui.f.size, ui.f.impacting, ui.f.transient_count, ui.f.transient_size], ['4', '40.0 MB', '0 B', '4', '40.0 MB']);
  eq('process, last four spikes: peak 30.0 MB at 15:06:59.504 (seed)', [ui.f.peakSize, ui.f.peakAt], ['30.0 MB', '2025-06-15 15:06:59.504']);
  eq('process, last four spikes: API figures are the seed\'s', [p.size_bytes, p.commit_count, p.impacting_bytes, p.types, p.peak_outstanding_bytes, p.peak_ns],
    [FOUR.expect.size_bytes, FOUR.expect.commit_count, FOUR.expect.impacting_bytes, FOUR.expect.types, FOUR.expect.peak_outstanding_bytes, FOUR.expect.peak_ns]);
  const t4 = await compareTree('process, last four spikes', FOUR.from_ns, FOUR.to_ns, 'impacting', '');
  check('caller tree opens the transient buffer\'s path', t4.got.some((r) => r.frame === 'MemoryTestApp.exe!ManipulateTemporaryBuffer'),
    JSON.stringify(t4.got.map((r) => r.frame)));
  await shot(page, 'process-four-spikes.png');

  // [14 s, 29 s): the step and five spikes, where the sorts differ.
  const MIX = [T0 + 14 * S, T0 + 29 * S];
  await select('process, 14-29 s', MIX[0], MIX[1]);
  await comparePanel('process, 14-29 s', MIX[0], MIX[1]);
  const openPath = (rows) => rows.filter((r, i) => i === 0 || r.depth > rows[i - 1].depth).map((r) => r.frame.split('!')[1]);
  let tr = await compareTree('process, 14-29 s', MIX[0], MIX[1], 'impacting', '');
  check('sort by impacting opens main -> VirtualAlloc (the 10 MB step)', openPath(tr.got).join('>').includes('main>VirtualAlloc>NtAllocateVirtualMemory'), openPath(tr.got).join('>'));
  let before = await doneAt();
  await page.selectOption('#sort', 'size');
  check('sort by size: the tree is redrawn', await waitDone(before) && await page.evaluate(() => document.querySelector('#tree').dataset.sort) === 'size');
  tr = await compareTree('process, 14-29 s', MIX[0], MIX[1], 'size', '');
  check('sort by size opens main -> Operation1 -> ManipulateTemporaryBuffer (50 MB of spikes)',
    openPath(tr.got).join('>').includes('main>Operation1>ManipulateTemporaryBuffer>VirtualAlloc'), openPath(tr.got).join('>'));
  for (const type of ['AIFI', 'AIFO', 'AOFI', 'AOFO', 'impacting', 'transient', '']) {
    before = await doneAt();
    await page.selectOption('#type', type);
    check(`type filter "${type || 'all'}": the tree is redrawn`, await waitDone(before));
    tr = await compareTree(`process, 14-29 s, type ${type || 'all'}`, MIX[0], MIX[1], 'size', type);
    const frames = tr.got.map((r) => r.frame);
    if (type === 'AIFI') check('type AIFI: the transient buffer, not the step', frames.includes('MemoryTestApp.exe!ManipulateTemporaryBuffer') && !openPath(tr.got).join('>').includes('main>VirtualAlloc'), openPath(tr.got).join('>'));
    if (type === 'AIFO') check('type AIFO: the step, not the transient buffer', !frames.includes('MemoryTestApp.exe!ManipulateTemporaryBuffer') && openPath(tr.got).join('>').includes('main>VirtualAlloc'), openPath(tr.got).join('>'));
    if (type === 'AIFO') await shot(page, 'process-tree-aifo.png');
  }
  // Expanding a closed node shows its children.
  const closed = await page.evaluate(() => {
    const rows = [...document.querySelectorAll('#tree .trow:not(.thead)')].filter((r) => !r.closest('ul[hidden]'));
    const i = rows.findIndex((r) => !r.querySelector('.tog').disabled && r.querySelector('.tog').textContent === '▸');
    if (i < 0) return null;
    rows[i].setAttribute('data-test-closed', '1');
    return rows[i].querySelector('.tframe').getAttribute('title');
  });
  if (closed) {
    const n0 = (await treeRows()).length;
    await page.click('#tree [data-test-closed] .tog');
    check(`expanding "${closed}" shows its children`, (await treeRows()).length > n0);
  } else check('the tree has a closed node to expand', false);

  // Zoom to selection: the selection becomes the view.
  before = await doneAt();
  await page.click('#zoom');
  const zoomOk = await waitFor(([a, b]) => {
    const q = new URLSearchParams(location.hash.split('?')[1] || '');
    const u = document.querySelector('#chart')._uplot;
    return Number(q.get('from')) === a && Number(q.get('to')) === b && !q.get('sf') &&
      Math.round(u.scales.x.min * 1e3) * 1e6 === a && Math.round(u.scales.x.max * 1e3) * 1e6 === b;
  }, MIX, 10000);
  check('"Zoom to selection": URL and chart show [14 s, 29 s), no selection left', zoomOk, JSON.stringify(await hashWin()));
  check('"Zoom to selection": figures for the new view', await waitDone(before) && await waitPanel(MIX[0], MIX[1]));
  await comparePanel('process, zoomed to 14-29 s', MIX[0], MIX[1]);
  check('"Zoom to selection" is disabled again', await page.locator('#zoom').isDisabled());
  await shot(page, 'process-zoomed.png');

  // A selection inside the zoomed view (the chart's steps are finer now).
  await select('process, zoomed, step window', STEP.from_ns, STEP.to_ns);
  ({ ui } = await comparePanel('process, zoomed, step window', STEP.from_ns, STEP.to_ns));
  eq('process, zoomed, step window: Impacting +10.0 MB (seed)', ui.f.impacting, '+10.0 MB');

  // Whole life: the instance's start (floored) to its exit (ceiled).
  const info = (await api(URL, `/api/processes/${procId}`, { from: mFirst, to: mEnd })).process;
  const life = [Math.floor(info.start_ns / S) * S, Math.ceil((info.exit_ns + 1) / S) * S];
  eq('MemoryTestApp lives [0 s, 31 s) of the fixture', life, [T0, T0 + 31 * S]);
  before = await doneAt();
  await page.click('#life');
  const lifeOk = await waitFor(([a, b]) => {
    const q = new URLSearchParams(location.hash.split('?')[1] || '');
    const u = document.querySelector('#chart')._uplot;
    return Number(q.get('from')) === a && Number(q.get('to')) === b && !q.get('sf') && Math.round(u.scales.x.max * 1e3) * 1e6 === b;
  }, life, 10000);
  check('"Whole life": URL and chart show the instance\'s life', lifeOk, JSON.stringify(await hashWin()));
  check('"Whole life": figures for it', await waitDone(before) && await waitPanel(life[0], life[1]));
  ({ ui, p } = await comparePanel('process, whole life', life[0], life[1]));
  const whole = W.windows.whole.expect;
  eq('process, whole life: Size 126 MB, Count 22, Impacting 0, transient 23 (seed)',
    [ui.f.size, ui.f.count, ui.f.impacting, ui.f.transient_count], ['126 MB', String(whole.commit_count), '0 B', String(whole.transient_count)]);
  eq('process, whole life: API figures are the seed\'s', [p.size_bytes, p.commit_count, p.impacting_bytes, p.types],
    [whole.size_bytes, whole.commit_count, whole.impacting_bytes, whole.types]);

  // From/To and Show: a typed view.
  // A datetime-local value (UTC here); chromium drops ":00" seconds.
  const iso = (ns) => new Date(ns / 1e6).toISOString().slice(0, 19).replace(/:00$/, '');
  await page.fill('#vfrom', iso(T0 + 10 * S));
  await page.fill('#vto', iso(T0 + 20 * S));
  before = await doneAt();
  await page.click('#apply');
  check('From/To + Show: figures for the typed view', await waitDone(before) && await waitPanel(T0 + 10 * S, T0 + 20 * S), (await panel()).selwin);
  eq('From/To + Show: the URL', [(await hashWin()).from, (await hashWin()).to], [T0 + 10 * S, T0 + 20 * S]);
  await comparePanel('process, typed 10-20 s', T0 + 10 * S, T0 + 20 * S);

  // A late chart for an earlier click must not replace a later one's:
  // "Zoom to selection" (its series held back), then "Whole life".
  await select('process, typed view, step window', STEP.from_ns, STEP.to_ns);
  {
    const h = await hold((u) => u.pathname.endsWith('/series') && u.searchParams.get('from') === String(STEP.from_ns) &&
      u.searchParams.get('to') === String(STEP.to_ns));
    await page.click('#zoom');
    const req = await within(h.seen, 5000);
    check('late answer: "Zoom to selection" asked for its series (held back)', !!req);
    await page.click('#life');
    const lifeChart = ([a, b]) => {
      const u = document.querySelector('#chart')?._uplot;
      return !!u && u.root.isConnected && Math.round(u.scales.x.min * 1e3) * 1e6 === a && Math.round(u.scales.x.max * 1e3) * 1e6 === b;
    };
    check('late answer: "Whole life" draws meanwhile', await waitFor(lifeChart, life, 10000) && await waitPanel(life[0], life[1]));
    check('late answer: the zoom\'s series reached the page', req && await releaseHeld(h, req));
    const stale = await waitFor(([a]) => {
      const u = document.querySelector('#chart')?._uplot;
      return !!u && u.root.isConnected && Math.round(u.scales.x.min * 1e3) * 1e6 === a;
    }, [STEP.from_ns], 1000);
    check('late answer: the chart still shows the whole life, not the zoom', !stale && await waitFor(lifeChart, life, 2000),
      JSON.stringify(await page.evaluate(() => { const u = document.querySelector('#chart')._uplot; return [u.scales.x.min, u.scales.x.max]; })));
    hw = await hashWin();
    check('late answer: URL and figures show the whole life', hw.from === life[0] && hw.to === life[1] && await waitPanel(life[0], life[1], 2000), JSON.stringify(hw));
    await h.stop();
  }

  // ======================================================================
  // 5. Diff page, opened from the process page's link for the step.
  // ======================================================================
  await select('process, step window again', STEP.from_ns, STEP.to_ns);
  const dl = await page.locator('#difflink').getAttribute('href');
  eq('the Diff link carries the selection', dl, `#/diff?process=${procId}&t1=${STEP.from_ns}&t2=${STEP.to_ns}`);
  await page.click('#difflink');
  /** The diff table's rows. */
  const diffRows = () => page.evaluate(() => [...document.querySelectorAll('#diff tbody tr')].filter((tr) => tr.cells.length === 7).map((tr) => ({
    c: [...tr.cells].slice(0, 6).map((td) => td.textContent.trim()),
    own: tr.querySelector('summary').textContent.trim(), frames: tr.querySelector('pre').textContent.split('\n') })));
  async function compareDiff(label, process, t1, t2) {
    const d = await api(URL, '/api/diff', { process, t1, t2 });
    const rowsD = await diffRows();
    const sum = await page.locator('#sum').textContent();
    listCheck(`${label}: the summary is the API's`, [
      sizeDiff('bytes delta', await page.locator('#sum [data-fig="bytes_delta"]').textContent(), d.bytes_delta, true),
      sum.includes(d.process.name) ? '' : `summary lacks ${d.process.name}`]);
    eq(`${label}: one row per API stack`, rowsD.length, d.stacks.length);
    const diffs = [];
    d.stacks.forEach((s, i) => {
      const r = rowsD[i];
      if (!r) return;
      const frames = [...s.frames].reverse();
      diffs.push(sizeDiff(`row ${i} bytes delta`, r.c[0], s.bytes_delta, true),
        countDiff(`row ${i} count delta`, r.c[1], s.count_delta),
        s.count_delta > 0 && !r.c[1].startsWith('+') ? `row ${i} count delta "${r.c[1]}" lacks +` : '',
        sizeDiff(`row ${i} new bytes`, r.c[2], s.new_bytes), countDiff(`row ${i} new count`, r.c[3], s.new_count),
        sizeDiff(`row ${i} old bytes`, r.c[4], s.old_bytes), r.c[5] === s.tag ? '' : `row ${i} tag "${r.c[5]}", API "${s.tag}"`,
        same(r.frames, frames) ? '' : `row ${i} frames differ`, frames.includes(r.own) ? '' : `row ${i} summary "${r.own}" not a frame`);
    });
    listCheck(`${label}: every row is the API's stack, in its order`, diffs);
    return { d, rowsD };
  }
  check('diff page: opened for the step', await waitFor(() => document.querySelector('#sum [data-fig="bytes_delta"]'), null, 10000));
  let dh = await page.evaluate(() => location.hash);
  eq('diff page: the URL', dh, `#/diff?process=${procId}&t1=${STEP.from_ns}&t2=${STEP.to_ns}`);
  let dr = await compareDiff('diff over the step', procId, STEP.from_ns, STEP.to_ns);
  eq('diff over the step: +10.0 MB (seed)', await page.locator('#sum [data-fig="bytes_delta"]').textContent(), '+10.0 MB');
  eq('diff over the step: the first row is main\'s 10 MB VirtualAlloc, one allocation more',
    dr.rowsD[0] && [dr.rowsD[0].c[0], dr.rowsD[0].c[1], dr.rowsD[0].own], ['+10.0 MB', '+1', 'MemoryTestApp.exe!main']);
  await shot(page, 'diff-1280.png');

  // Typed times and Compare.
  await page.fill('#t1', iso(T0 + 2 * S));
  await page.fill('#t2', iso(T0 + 25 * S));
  await page.click('#go');
  check('diff: Compare with typed times updates the URL and the table', await waitFor(([a, b]) =>
    location.hash.includes(`t1=${a}`) && location.hash.includes(`t2=${b}`) && document.querySelector('#sum [data-fig="bytes_delta"]'), [T0 + 2 * S, T0 + 25 * S], 10000),
  await page.evaluate(() => location.hash));
  await waitFor((a) => document.querySelector('#sum').textContent.includes(a), '15:06:42', 5000);
  await compareDiff('diff 2-25 s', procId, T0 + 2 * S, T0 + 25 * S);

  // A late answer to an earlier Compare must not replace a later one's.
  {
    const h = await hold((u) => u.pathname === '/api/diff' && u.searchParams.get('t2') === String(T0 + 25 * S));
    await page.fill('#t2', iso(T0 + 25 * S));
    await page.click('#go');
    const req = await within(h.seen, 5000);
    check('late answer: Compare up to 25 s asked (held back)', !!req);
    await page.fill('#t2', iso(T0 + 20 * S));
    await page.click('#go');
    check('late answer: Compare up to 20 s shows meanwhile', await waitFor((t) => document.querySelector('#sum').textContent.includes(t), '→ 2025-06-15 15:07:00:', 10000),
      await page.locator('#sum').textContent());
    check('late answer: the 25 s answer reached the page', req && await releaseHeld(h, req));
    const stale = await waitFor(() => document.querySelector('#sum').textContent.includes('15:07:05'), null, 1000);
    check('late answer: the diff still shows 2-20 s', !stale && (await page.evaluate(() => location.hash)).includes(`t2=${T0 + 20 * S}`),
      await page.locator('#sum').textContent());
    await compareDiff('diff 2-20 s', procId, T0 + 2 * S, T0 + 20 * S);
    await h.stop();
  }

  // Another process from the list.
  const svc = all.find((q) => q.name === 'svchost.exe');
  await page.selectOption('#proc', String(svc.id));
  await page.click('#go');
  check('diff: choosing svchost.exe compares it', await waitFor((n) => document.querySelector('#sum b')?.textContent === n, svc.name, 10000));
  dr = await compareDiff('diff svchost.exe 2-20 s', svc.id, T0 + 2 * S, T0 + 20 * S);
  check('diff svchost.exe: its rundown stacks are tagged (before trace)', dr.rowsD.some((r) => r.c[5] === '(before trace)'), JSON.stringify(dr.rowsD.map((r) => r.c[5])));
  await shot(page, 'diff-svchost.png');

  // svchost.exe was alive when the replay's input ended: its page says so
  // (not "exited"), its default view ends there, and the window figures
  // are what it held then.
  await page.goto(`${URL}/#/process/${svc.id}`);
  await page.waitForSelector('#figs [data-fig="impacting"]');
  const head = await page.locator('h1.proc').textContent();
  check('process page of svchost.exe: "running when tracking ended", not "exited"',
    head.includes('running when tracking ended') && !head.includes('exited'), head);
  hw = await hashWin();
  eq('process page of svchost.exe: its life ends where tracking ended', hw.to, mEnd);
  const rs = await api(URL, `/api/processes/${svc.id}`, { from: hw.from, to: hw.to });
  check('process page of svchost.exe: the API shows it alive with memory outstanding',
    rs.process.exit_ns === null && rs.process.tracking_ended_ns === mEnd && rs.process.outstanding_end_bytes > 0, JSON.stringify(rs.process));
  await shot(page, 'process-tracking-ended.png');

  // ======================================================================
  // 6. Phone width: no sideways scrolling.
  // ======================================================================
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${URL}/#/process/${procId}`);
  check('phone: process chart drawn', await waitFor(() => Number(document.querySelector('#chart')?.dataset.drawn) > 0, null, 15000));
  await page.waitForSelector('#figs [data-fig="impacting"]');
  let overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check('phone width: no sideways scrolling of the process page', overflow <= 1, `overflow=${overflow}px`);
  await shot(page, 'process-phone.png');
  await page.goto(`${URL}/#/`);
  check('phone: overview table', await waitTable(all.map((q) => q.name), mFirst, mEnd));
  overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check('phone width: no sideways scrolling of the overview', overflow <= 1, `overflow=${overflow}px`);
  await shot(page, 'overview-phone.png');
  await page.goto(`${URL}/#/diff?process=${procId}&t1=${STEP.from_ns}&t2=${STEP.to_ns}`);
  await page.waitForSelector('#sum [data-fig="bytes_delta"]');
  overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check('phone width: no sideways scrolling of the diff page', overflow <= 1, `overflow=${overflow}px`);
  await shot(page, 'diff-phone.png');

  // ======================================================================
  // 7. Alerts: the page, the overview's badges and leak scores, the
  //    process chart's alert periods, silences, a backtest.
  // ======================================================================
  await page.setViewportSize({ width: 1280, height: 800 });
  const [A, B, C] = ASPEC.ids.series;
  await page.goto(`${ALERTS}/#/alerts`);
  check('alerts page: the active table', await waitFor((n) => document.querySelectorAll('#active tbody tr[data-id]').length === n, 3));
  const act = await page.evaluate(() => [...document.querySelectorAll('#active tbody tr[data-id]')].map((tr) => ({
    id: Number(tr.dataset.id), cells: [...tr.cells].map((c) => c.textContent.trim()) })));
  const apiAct = await api(ALERTS, '/api/alerts');
  eq('alerts page: rows in the API\'s order', act.map((r) => r.id), apiAct.alerts.map((a) => a.id));
  eq('alerts page: the firing critical series first', act[0] && [act[0].id, act[0].cells[0], act[0].cells[1], act[0].cells[2], act[0].cells[4]],
    [A, 'critical', 'leak', ASPEC.name, 'Heap']);
  eq('alerts page: its leak score and time to limit', act[0] && [act[0].cells[8], act[0].cells[9]], ['0.93', '2 h']);
  eq('alerts page: the leak-score rule\'s value and threshold as scores', act[0] && [act[0].cells[6], act[0].cells[7]], ['0.93', '0.90']);
  eq('alerts page: the machine\'s time-to-limit value as a time', act[1] && [act[1].cells[0], act[1].cells[2], act[1].cells[6]], ['warning', 'machine', '27.8 h']);
  eq('alerts page: the pending one', act[2] && [act[2].id, act[2].cells[0]], [C, 'pending']);
  check('alerts page: the evaluation progress', /evaluations/.test(await page.textContent('#evald')));
  await page.click(`#active tr[data-id="${A}"] td:nth-child(2)`);
  check('alerts page: a click opens the detail', await waitFor((id) => document.querySelector('#detail')?.dataset.id === String(id) && !document.querySelector('#detail').hidden, A));
  const det = await page.evaluate(() => ({
    comp: Object.fromEntries([...document.querySelectorAll('#comp tr')].map((tr) => [tr.cells[0].textContent, tr.cells[1]?.textContent])),
    fc: Object.fromEntries([...document.querySelectorAll('#forecast tr')].map((tr) => [tr.cells[0].textContent, tr.cells[1]?.textContent])),
    tr: [...document.querySelectorAll('#dtrans tbody tr')].map((tr) => [...tr.cells].map((c) => c.textContent.trim())) }));
  eq('alert detail: leak-score components', [det.comp.score, det.comp.mk_z, det.comp.stay_share], ['0.93', '4.2', '0.8']);
  eq('alert detail: forecast', [det.fc.median_s, det.fc.upper_s, det.fc.source], ['2 h', '90 min', 'CommitLimit']);
  eq('alert detail: transitions, newest first', det.tr.map((r) => [r[1], r[2], r[5]]), [['pending', 'firing', 'for elapsed'], ['inactive', 'pending', 'condition']]);
  check('alert detail: the URL names it', (await page.evaluate(() => location.hash)).includes(`alert=${A}`));
  const hist = await page.evaluate(() => [...document.querySelectorAll('#history tbody tr')].map((tr) => tr.cells[8]?.textContent.trim()));
  eq('alerts page: the history has every transition', hist.length, (await api(ALERTS, '/api/alert-transitions')).transitions.length);
  check('alerts page: the history shows the exit', hist.includes('process exited'), JSON.stringify(hist));
  eq('nav: the count of active alerts', await page.evaluate(() => [document.querySelector('#alertcount').textContent, document.querySelector('#alertcount').className]), ['3', 'badge critical']);
  await shot(page, 'alerts.png');

  // Silences: create (the token asked once), list, expire.
  eq('silences: the stored one listed', await page.evaluate(() => [...document.querySelectorAll('#silences tbody tr[data-id]')].map((tr) => tr.cells[1].textContent)), ['active']);
  let prompts = 0;
  page.on('dialog', (d) => { prompts++; d.accept(ASPEC.token); });
  await page.fill('#smatch', 'alertname=leak, process=~Memory.*');
  await page.fill('#scomment', 'browser test');
  await page.click('#silform button[type=submit]');
  check('silences: created', await waitFor(() => /Silence \d+ created/.test(document.querySelector('#silmsg').textContent)), await page.textContent('#silmsg'));
  let sil = await api(ALERTS, '/api/silences');
  eq('silences: the API has it, matchers parsed', sil.silences[0] && [sil.silences[0].comment, sil.silences[0].matchers],
    ['browser test', [{ name: 'alertname', value: 'leak', isRegex: false, isEqual: true }, { name: 'process', value: 'Memory.*', isRegex: true, isEqual: true }]]);
  check('silences: two rows', await waitFor(() => document.querySelectorAll('#silences tbody tr[data-id]').length === 2));
  await page.click(`#silences tr[data-id="${sil.silences[0].id}"] button.expire`);
  check('silences: expired in the table', await waitFor((id) => document.querySelector(`#silences tr[data-id="${id}"]`)?.dataset.state === 'expired', sil.silences[0].id));
  sil = await api(ALERTS, '/api/silences', { state: 'expired' });
  eq('silences: expired in the API', sil.silences.map((x) => x.comment), ['browser test']);
  eq('silences: the token was asked once', prompts, 1);

  // Backtest: the rule `big` over the replay, on the fixture process's chart.
  await page.selectOption('#brule', 'big');
  check('backtest: the process choices', await waitFor((id) => [...document.querySelectorAll('#bproc option')].some((o) => o.value === String(id)), ASPEC.proc));
  await page.selectOption('#bproc', String(ASPEC.proc));
  await page.click('#btform button[type=submit]');
  check('backtest: its transitions listed', await waitFor(() => document.querySelectorAll('#btresult tbody tr[data-key]').length > 0, null, 20000),
    await page.textContent('#btmsg'));
  // The transitions are listed before the process's series is fetched and
  // the chart drawn (alerts.js, backtest()): wait for the chart too.
  await waitFor(() => document.querySelector('#btchart').dataset.bands !== undefined &&
    Number(document.querySelector('#btchart').dataset.drawn) > 0, null, 20000);
  const bt = await page.evaluate(() => ({ rows: [...document.querySelectorAll('#btresult tbody tr[data-key]')].map((tr) => tr.cells[3].textContent),
    bands: (document.querySelector('#btchart')._bands || []).length, drawn: Number(document.querySelector('#btchart').dataset.drawn) }));
  check('backtest: the process fires', bt.rows.includes('firing'), JSON.stringify(bt.rows));
  check('backtest: its periods drawn on the process chart', bt.bands > 0 && bt.drawn > 0, JSON.stringify(bt));
  await shot(page, 'alerts-backtest.png');

  // Overview: badges and the leak-score column.
  await page.goto(`${ALERTS}/#/`);
  check('overview with alerts: the table', await waitFor((id) => !!document.querySelector(`#procs tr[data-id="${id}"] [data-fig="alerts"] .badge`), ASPEC.proc));
  const ov = await page.evaluate((id) => { const tr = document.querySelector(`#procs tr[data-id="${id}"]`);
    return [tr.querySelector('[data-fig="alerts"]').textContent.trim(), tr.querySelector('[data-fig="leak"]').textContent.trim(),
      tr.querySelector('[data-fig="alerts"] a').getAttribute('href')]; }, ASPEC.proc);
  eq('overview: the process\'s badge, leak score and link', ov, ['critical', '0.93', `#/alerts?alert=${A}`]);
  const others = await page.evaluate((id) => [...document.querySelectorAll('#procs tbody tr[data-id]')].filter((tr) => tr.dataset.id !== String(id))
    .map((tr) => tr.querySelector('[data-fig="leak"]').textContent.trim()), ASPEC.proc);
  check('overview: no leak score for processes without alerts', others.length > 0 && others.every((x) => x === '–'), JSON.stringify(others));
  await shot(page, 'overview-alerts.png');
  // A desktop window (1400 and 1280 px wide): every column, the last
  // (Leak score) included, is in view without scrolling the table.
  for (const width of [1400, 1280]) {
    await page.setViewportSize({ width, height: 900 });
    const fit = await page.evaluate(() => {
      const wrap = document.querySelector('#procs').closest('.tablewrap');
      const last = document.querySelector('#procs thead th:last-child').getBoundingClientRect();
      return { scroll: wrap.scrollWidth - wrap.clientWidth, past: Math.round(last.right - wrap.getBoundingClientRect().right) };
    });
    check(`overview at ${width} px: the table fits, Leak score in view`, fit.scroll <= 1 && fit.past <= 1, JSON.stringify(fit));
  }
  await shot(page, 'overview-1280.png');
  await page.setViewportSize({ width: 1280, height: 800 });

  // Process chart: the pending and firing periods of its series.
  await page.goto(`${ALERTS}/#/process/${ASPEC.proc}`);
  check('process with alerts: chart drawn', await waitFor(() => Number(document.querySelector('#chart')?.dataset.drawn) > 0, null, 15000));
  const pb = await page.evaluate(() => (document.querySelector('#chart')._bands || []).map((b) => [b.from_ns, b.label]));
  eq('process chart: its alert periods', pb.map((b) => b[1]), ['leak pending', 'leak firing']);
  eq('process chart: the periods start at the transitions', pb.map((b) => b[0]), [ASPEC.e1, ASPEC.e2]);
  await shot(page, 'process-alerts.png');

  check('no errors in the browser console', consoleErrors.length === 0, consoleErrors.join(' | '));
} catch (e) {
  failed++;
  console.log(`FAIL exception: ${e.stack || e}`);
  console.log(`browser console: ${consoleErrors.join(' | ')}`);
  for (const p of browser.pages()) await p.screenshot({ path: path.join(SHOTS, 'failure.png'), fullPage: true }).catch(() => {});
} finally {
  await close();
}
console.log(`${passed} passed, ${failed} failed (${elapsed()})`);
process.exit(failed ? 1 : 0);
