// dashboard_browser.mjs - drives the dashboard in Debian's chromium through
// playwright-core (web/node_modules). Run by test_dashboard_browser.py,
// which starts the service on the MemoryTestApp fixture and passes:
//   CW_URL          http://127.0.0.1:PORT
//   CW_WINDOWS      tests/fixtures/memorytestapp.windows.json
//   CW_SHOTS        folder for screenshots
//   CW_SOURCE       the source tree (to find web/node_modules)
// Prints "N passed, M failed" and exits non-zero on any failure.
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const require = createRequire(path.join(process.env.CW_SOURCE, 'web', 'package.json'));
const { chromium } = require('playwright-core');

const URL = process.env.CW_URL;
const W = JSON.parse(readFileSync(process.env.CW_WINDOWS, 'utf8'));
const SHOTS = process.env.CW_SHOTS;
const MB = 1024 * 1024;
let passed = 0, failed = 0;

function check(name, cond, detail = '') {
  if (cond) { passed++; console.log(`ok   ${name}`); }
  else { failed++; console.log(`FAIL ${name} ${detail}`); }
}

/** "+10.0 MB" -> bytes. */
function parseSize(s) {
  const m = /(-?[\d.]+)\s*(B|KB|MB|GB|TB)/.exec(s.replace(/,/g, ''));
  if (!m) return NaN;
  return parseFloat(m[1]) * 1024 ** ['B', 'KB', 'MB', 'GB', 'TB'].indexOf(m[2]);
}

const profile = mkdtempSync(path.join(tmpdir(), 'cw-chromium-'));
// A fresh profile each run (playwright passes it as --user-data-dir).
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CW_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 800 },
});
const consoleErrors = [];
try {
  const page = browser.pages()[0] || await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', (e) => consoleErrors.push(String(e)));

  // Overview: the fixture's process is listed with its figures.
  await page.goto(`${URL}/#/`);
  const row = page.locator(`#procs tr[data-name="${W.process.name}"]`);
  await row.waitFor({ timeout: 15000 });
  const size = await row.locator('[data-fig="size"]').textContent();
  const tcount = await row.locator('[data-fig="transient_count"]').textContent();
  check('overview lists MemoryTestApp', true);
  check('overview shows its size', parseSize(size) > 100 * MB, `size=${size}`);
  check('overview shows transient count', Number(tcount.replace(/,/g, '')) >= 10, `transient=${tcount}`);
  await page.waitForFunction(() => Number(document.querySelector('#chart')?.dataset.drawn) > 0);
  await page.screenshot({ path: path.join(SHOTS, 'overview-1280.png'), fullPage: true });

  // Process page: a non-empty chart.
  await row.locator('a').first().click();
  await page.waitForFunction(() => Number(document.querySelector('#chart')?.dataset.drawn) > 0, null, { timeout: 15000 });
  await page.waitForSelector('#figs [data-fig="impacting"]');
  const painted = await page.evaluate(() => {
    const c = document.querySelector('#chart canvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
    return n;
  });
  check('process chart draws something', painted > 1000, `painted=${painted}`);
  await page.screenshot({ path: path.join(SHOTS, 'process-1280.png'), fullPage: true });

  /** Drags on the chart over [fromNs, toNs), then waits for the figures. */
  async function selectWindow(fromNs, toNs) {
    const box = await page.evaluate(([a, b]) => {
      const u = document.querySelector('#chart')._uplot;
      const r = u.over.getBoundingClientRect();
      return { x1: r.left + u.valToPos(a / 1e9, 'x'), x2: r.left + u.valToPos(b / 1e9, 'x'), y: r.top + r.height / 2 };
    }, [fromNs, toNs]);
    const before = await page.locator('#selwin').textContent();
    await page.mouse.move(box.x1 + 2, box.y);
    await page.mouse.down();
    await page.mouse.move((box.x1 + box.x2) / 2, box.y, { steps: 5 });
    await page.mouse.move(box.x2 - 2, box.y, { steps: 5 });
    await page.mouse.up();
    await page.waitForFunction((b) => document.querySelector('#selwin').textContent !== b, before, { timeout: 10000 });
    const fig = async (k) => (await page.locator(`#figs [data-fig="${k}"]`).textContent()).trim();
    return { impacting: await fig('impacting'), count: await fig('count'), size: await fig('size'),
      tcount: await fig('transient_count'), tsize: await fig('transient_size'), win: await page.locator('#selwin').textContent() };
  }

  const step = W.windows.step;
  const a = await selectWindow(step.from_ns, step.to_ns);
  check('step window: Impacting 10 MB', Math.abs(parseSize(a.impacting) - 10 * MB) < 0.05 * MB, JSON.stringify(a));
  await page.screenshot({ path: path.join(SHOTS, 'process-step-window.png'), fullPage: true });

  const four = W.windows.last_four_spikes;
  const b = await selectWindow(four.from_ns, four.to_ns);
  check('last four spikes: Count 4', b.count === '4', JSON.stringify(b));
  check('last four spikes: Size 40 MB', Math.abs(parseSize(b.size) - 40 * MB) < 0.05 * MB, JSON.stringify(b));
  check('last four spikes: Impacting 0', Math.abs(parseSize(b.impacting)) < 1024 * 1024, JSON.stringify(b));
  check('last four spikes: transient count 4', b.tcount === '4', JSON.stringify(b));
  // The caller tree shows the transient buffer's path.
  const tree = await page.locator('#tree').textContent();
  check('caller tree shows ManipulateTemporaryBuffer', tree.includes('ManipulateTemporaryBuffer'));
  await page.screenshot({ path: path.join(SHOTS, 'process-four-spikes.png'), fullPage: true });

  // Diff page.
  const procId = await page.evaluate(() => location.hash.split('/')[2].split('?')[0]);
  await page.goto(`${URL}/#/diff?process=${procId}&t1=${step.from_ns}&t2=${step.to_ns}`);
  await page.waitForSelector('#sum [data-fig="bytes_delta"]', { timeout: 10000 });
  const dd = await page.locator('#sum [data-fig="bytes_delta"]').textContent();
  check('diff over the step: +10 MB', Math.abs(parseSize(dd) - 10 * MB) < 0.05 * MB, dd);
  await page.screenshot({ path: path.join(SHOTS, 'diff-1280.png'), fullPage: true });

  // Phone width.
  const phone = page;
  await phone.setViewportSize({ width: 390, height: 844 });
  await phone.goto(`${URL}/#/process/${procId}`);
  await phone.waitForFunction(() => Number(document.querySelector('#chart')?.dataset.drawn) > 0, null, { timeout: 15000 });
  const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check('phone width: no sideways scrolling of the page', overflow <= 1, `overflow=${overflow}px`);
  await phone.screenshot({ path: path.join(SHOTS, 'process-phone.png'), fullPage: true });
  await phone.goto(`${URL}/#/`);
  await phone.locator(`#procs tr[data-name="${W.process.name}"]`).waitFor({ timeout: 15000 });
  await phone.screenshot({ path: path.join(SHOTS, 'overview-phone.png'), fullPage: true });

  check('no errors in the browser console', consoleErrors.length === 0, consoleErrors.join(' | '));
} catch (e) {
  failed++;
  console.log(`FAIL exception: ${e.stack || e}`);
  console.log(`browser console: ${consoleErrors.join(' | ')}`);
  for (const p of browser.pages()) await p.screenshot({ path: path.join(SHOTS, 'failure.png'), fullPage: true }).catch(() => {});
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
