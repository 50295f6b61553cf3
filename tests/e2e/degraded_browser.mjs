// degraded_browser.mjs - the degraded banner (web/js/app.js) in Debian's
// chromium through playwright-core. Run by test_degraded_browser.py,
// which passes:
//   CW_URL     a service whose perf source cannot open (degraded)
//   CW_OK_URL  a replay's service (healthy)
//   CW_SHOTS   folder for screenshots
//   CW_SOURCE  the source tree (to find web/node_modules)
// Checks: on every page (overview, process, diff, alerts) of the degraded
// service the banner is shown and says the perf source is down, since
// when (/api/health's since_ns, as the page writes times) and why (the
// perf error); the status badge is red; the stored process is still
// listed. On the healthy service no page shows it. Prints "N passed, M
// failed"; non-zero exit on a failure.
import path from 'node:path';
import { launch } from './cwbrowser.mjs';

const URL = process.env.CW_URL, OK = process.env.CW_OK_URL, SHOTS = process.env.CW_SHOTS;
let passed = 0, failed = 0;
function check(name, cond, detail = '') {
  if (cond) { passed++; console.log(`ok   ${name}`); } else { failed++; console.log(`FAIL ${name} ${detail}`); }
}
const pages = ['#/', '#/process/1', '#/diff', '#/alerts'];
const { browser, close } = await launch();
const errors = [];
try {
  const page = browser.pages()[0] || await browser.newPage();
  page.setDefaultTimeout(20000);
  page.on('pageerror', (e) => errors.push(String(e)));
  const h = await (await fetch(URL + '/api/health')).json();
  check('the service is degraded (API)', h.status === 'degraded' && h.source_state && h.source_state.up === false,
    JSON.stringify(h.source_state));
  // The page's own time format (fmt.js), in the browser's time zone.
  await page.goto(URL + '/');
  const since = await page.evaluate(async (ns) => {
    const { time } = await import('/js/fmt.js');
    return time(ns);
  }, h.source_state.since_ns);
  for (const p of pages) {
    await page.goto(URL + '/' + p);
    const banner = page.locator('#banner');
    await banner.waitFor({ state: 'visible' });
    const text = await banner.innerText();
    check(`${p}: the banner says the perf source is down`, /Degraded:.*The perf source is down/.test(text), text);
    check(`${p}: ... since when`, text.includes(`since ${since}`), `${text} / ${since}`);
    check(`${p}: ... and why (perf's error)`, text.includes('perf_event_paranoid'), text);
    check(`${p}: ... and that the stored data is served`, text.includes('stored data is still served'), text);
    const cls = await page.locator('#status').getAttribute('class');
    check(`${p}: the status badge is red`, /\bbad\b/.test(cls), cls);
    await page.screenshot({ path: path.join(SHOTS, `degraded-${p.replace(/[#/]/g, '') || 'overview'}.png`) });
  }
  await page.goto(URL + '/#/');
  const link = page.locator('a', { hasText: 'degraded-test' }).first();
  check('the overview still lists the stored process', await link.count() > 0 ||
    await link.waitFor({ timeout: 10000 }).then(() => true, () => false));
  for (const p of pages) {
    await page.goto(OK + '/' + p);
    await page.locator('#status.ok').waitFor();
    check(`healthy ${p}: no banner`, await page.locator('#banner').isHidden());
  }
  check('no page error', errors.length === 0, errors.join('\n'));
} catch (e) {
  failed++;
  console.log(`FAIL ${e.stack || e}`);
} finally {
  await close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed || !passed ? 1 : 0);
