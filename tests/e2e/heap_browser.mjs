// heap_browser.mjs - the process page's heap traces (web/js/heap.js) in
// Debian's chromium through playwright-core. Run by
// test_heap_browser_root.py, which passes:
//   CW_URL     a service with the live perf source, HTTP and a token
//   CW_TOKEN   that token
//   CW_INST    the instance id of a running heap_truth --attach
//   CW_EXITED  the instance id of a process that has exited
//   CW_LEAK    heap_truth's leaking function and its outstanding bytes, "fn:bytes"
//   CW_SHOTS   folder for screenshots; CW_SOURCE the source tree
//   CW_SEEN    a file this page writes once it has seen the trace running
// The test script sends heap_truth its "go" once the trace is attached
// and CW_SEEN is written.
// Checks: a process page opened while the overview still loads is shown
// (the overview's late failures do not replace it); the "Trace heap" button starts a trace (the token from the
// tab's session), the list shows it running with its progress, and once
// the process ends the report is shown: totals, the caller tree holding
// the leaking function with its outstanding bytes, and the flame graph;
// another measure redraws both; an exited process's button is disabled,
// saying why. Prints "N passed, M failed"; non-zero exit on a failure.
import fs from 'node:fs';
import path from 'node:path';
import { launch, waiter } from './cwbrowser.mjs';

const URL = process.env.CW_URL, SHOTS = process.env.CW_SHOTS;
const [leakFn, leakBytes] = process.env.CW_LEAK.split(':');
let passed = 0, failed = 0;
function check(name, cond, detail = '') {
  if (cond) { passed++; console.log(`ok   ${name}`); } else { failed++; console.log(`FAIL ${name} ${detail}`); }
}
const { browser, close } = await launch({ width: 1400, height: 1000 });
const errors = [];
try {
  const page = browser.pages()[0] || await browser.newPage();
  page.setDefaultTimeout(30000);
  page.on('pageerror', (e) => errors.push(String(e)));
  const wait = waiter(page, process.env.CW_SOURCE);
  // The token in the tab's session before any page asks for it.
  await browser.addInitScript((t) => sessionStorage.setItem('cwToken', t), process.env.CW_TOKEN);

  // Straight from the overview, before it has loaded (app.js: the page
  // left is stale, its failures are not the next page's).
  await page.goto(`${URL}/`);
  await page.goto(`${URL}/#/process/${process.env.CW_EXITED}`);
  await page.locator('#htrace').waitFor();
  check('an exited process: the button is disabled', await page.locator('#htrace').isDisabled());
  check('... saying why', (await page.locator('#hstatus').innerText()).includes('has exited'));

  await page.goto(`${URL}/#/process/${process.env.CW_INST}`);
  const btn = page.locator('#htrace');
  await btn.waitFor();
  check('a running process: "Trace heap" is enabled', await btn.isEnabled());
  await page.locator('#hdur').selectOption('1m');
  await btn.click();
  check('the click starts a trace', await wait(() => /trace #\d+ started/.test(document.querySelector('#hstatus').textContent), null, 15000),
    await page.locator('#hstatus').innerText());
  // Seen together: the test script lets the process end once the trace
  // is attached, and the trace ends with it.
  check('the list shows it running, with its progress, the button disabled', await wait(() => {
    const r = document.querySelector('#hlist tr[data-state="running"] .hstate');
    return r && /running.*events so far/.test(r.textContent) && document.querySelector('#htrace').disabled;
  }, null, 15000), await page.locator('#hlist').innerText());
  await page.screenshot({ path: path.join(SHOTS, 'heap-running.png'), fullPage: true });
  // The test script lets heap_truth run to its end once this page has
  // seen the trace running (heap_truth's work takes less than a refresh
  // of the list: a CI run's page first saw it done).
  fs.writeFileSync(process.env.CW_SEEN, 'running\n');
  check('when the process ends, the report is shown', await wait(() => {
    const b = document.querySelector('#hreport');
    return b && b.dataset.trace && document.querySelector('#htree .trow:not(.thead)');
  }, null, 90000), await page.locator('#hreport').innerText());
  const rowText = await page.evaluate((fn) => {
    const rows = [...document.querySelectorAll('#htree .trow')];
    const open = (r) => { const b = r.querySelector('.tog'); if (b && !b.disabled && b.textContent === '▸') b.click(); };
    for (let i = 0; i < 40; i++) [...document.querySelectorAll('#htree .trow')].forEach(open);
    const hit = [...document.querySelectorAll('#htree .trow')].find((r) => r.querySelector('.tframe').textContent.endsWith('!' + fn));
    return hit ? hit.innerText : rows.map((r) => r.innerText).join('\n');
  }, leakFn);
  const fmtLeak = await page.evaluate(async (n) => (await import('/js/fmt.js')).bytes(n), Number(leakBytes));
  check('the caller tree holds the leaking function with its outstanding bytes',
    rowText.includes(leakFn) && rowText.includes(fmtLeak), `${rowText} / ${fmtLeak}`);
  check('the flame graph is drawn', await wait(() => document.querySelector('#heapsec').dataset.flame === 'drawn' &&
    document.querySelector('#hflame svg'), null, 20000));
  check('the totals are shown', /Outstanding at the end/.test(await page.locator('#hreport').innerText()));
  await page.locator('#hmetric').selectOption('alloc_count');
  check('another measure redraws the tree', await wait(() => document.querySelector('#htree').dataset.metric === 'alloc_count'));
  const listed = await page.locator('#hlist').innerText();
  check('the list shows the trace ended with the process', /done \(exited\)/.test(listed), listed);
  await page.screenshot({ path: path.join(SHOTS, 'heap-report.png'), fullPage: true });

  // The same trace in the store's heap layer: the process page's stacks
  // with ?layer=heap (the leak was never freed: its size is its bytes).
  // Its last seconds reach the store a tick or two after the trace ends.
  const layerApi = `${URL}/api/processes/${process.env.CW_INST}/stacks?layer=heap&from=-1h&limit=1&tree=0`;
  let stored = 0;
  for (let i = 0; i < 300 && !stored; i++) {
    stored = (await (await fetch(layerApi)).json()).total || 0;
    if (!stored) await new Promise((r) => setTimeout(r, 100));
  }
  check('the trace is in the heap layer (the API)', stored > 0);
  // The report links the trace's whole seconds on the process page.
  check('the report links the trace in the heap layer', await page.locator('#hlayer').count() === 1);
  await page.locator('#hlayer').click();
  check('?layer=heap: the stacks are the heap layer\'s', await wait(() => {
    const t = document.querySelector('#tree');
    return t && t.dataset.layer === 'heap' && document.querySelector('#tree .trow:not(.thead)');
  }, null, 30000), await page.locator('main').innerText().catch(() => '?'));
  check('... under their heading', (await page.locator('#stackshead').innerText()) === 'Heap allocation stacks');
  const layerRow = await page.evaluate((fn) => {
    const open = (r) => { const b = r.querySelector('.tog'); if (b && !b.disabled && b.textContent === '▸') b.click(); };
    for (let i = 0; i < 40; i++) [...document.querySelectorAll('#tree .trow')].forEach(open);
    const hit = [...document.querySelectorAll('#tree .trow')].find((r) => r.querySelector('.tframe').textContent.endsWith('!' + fn));
    return hit ? hit.innerText : '';
  }, leakFn);
  check('... the leaking function with its bytes', layerRow.includes(fmtLeak), `${layerRow} / ${fmtLeak}`);
  check('... the downloads ask for the heap layer', (await page.locator('#dl-folded').getAttribute('href')).includes('layer=heap'));
  await page.locator('#flamebtn').click();
  check('... and its flame graph is drawn', await wait(() => document.querySelector('#flame svg'), null, 20000));
  await page.locator('#layer').selectOption('');
  check('back to commits: the commit layer\'s stacks', await wait(() => document.querySelector('#tree').dataset.layer === 'commit'));
  await page.screenshot({ path: path.join(SHOTS, 'heap-layer.png'), fullPage: true });
  check('no page error', errors.length === 0, errors.join('\n'));
} catch (e) {
  failed++;
  console.log(`FAIL ${e.stack || e}`);
  if (errors.length) console.log(`page errors:\n${errors.join('\n')}`);
  const page = browser.pages()[0];
  if (page) {
    console.log(`at ${page.url()}: ${(await page.locator('main').innerText().catch(() => '?')).slice(0, 600)}`);
    await page.screenshot({ path: path.join(SHOTS, 'heap-failure.png'), fullPage: true }).catch(() => {});
  }
} finally {
  await close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed || !passed ? 1 : 0);
