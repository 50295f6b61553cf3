// web_vendor_browser.mjs - the dashboard served from a web root that lacks
// its vendored front-end packages (web/js/boot.js), in Debian's chromium
// through playwright-core. Run by test_web_vendor_browser.py, which passes:
//   CW_URL      a service whose web root has no vendor/ nor node_modules/
//   CW_OK_URL   a service with the complete web root
//   CW_SHOTS    folder for screenshots
//   CW_SOURCE   the source tree (to find web/node_modules)
// Checks: without the packages the page says within 20 s that it could not
// start and names the missing uPlot file and what to do (not "Loading…"
// forever); with them no such error shows and the overview renders.
// Prints "N passed, M failed"; non-zero exit on a failure.
import path from 'node:path';
import { launch } from './cwbrowser.mjs';

const URL = process.env.CW_URL, OK = process.env.CW_OK_URL, SHOTS = process.env.CW_SHOTS;
let passed = 0, failed = 0;
function check(name, cond, detail = '') {
  if (cond) { passed++; console.log(`ok   ${name}`); } else { failed++; console.log(`FAIL ${name} ${detail}`); }
}
const { browser, close } = await launch();
try {
  const page = browser.pages()[0] || await browser.newPage();
  page.setDefaultTimeout(20000);
  await page.goto(URL + '/');
  const err = page.locator('#loaderror');
  const shown = await err.waitFor({ state: 'visible' }).then(() => true, () => false);
  check('without uPlot the page says it could not start', shown);
  const text = shown ? await err.innerText() : await page.locator('#main').innerText();
  check('... naming the missing file', text.includes('vendor/uplot/uPlot.esm.js (HTTP 404)'), text);
  check('... and what to do', text.includes('npm ci') && text.includes('reinstall'), text);
  check('... instead of Loading…', !(await page.locator('#main').innerText()).includes('Loading'));
  await page.screenshot({ path: path.join(SHOTS, 'web-vendor-missing.png') });

  await page.goto(OK + '/');
  await page.locator('#overview, table').first().waitFor();
  check('with the packages no load error shows', await page.locator('#loaderror').count() === 0);
  check('... and the overview renders', !(await page.locator('#main').innerText()).includes('Loading'));
} catch (e) {
  check('the browser run', false, String(e && e.stack || e));
} finally {
  await close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
