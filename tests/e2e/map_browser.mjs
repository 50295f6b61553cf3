// map_browser.mjs - the memory map (web/js/map.js) in Debian's chromium
// through playwright-core. Run by test_map_browser.py, which passes:
//   CW_URL          the MemoryTestApp fixture, fully ingested
//   CW_BIG_URL      one process with CW_BIG_RANGES live ranges
//   CW_SHOTS        folder for screenshots
//   CW_SOURCE       the source tree (to find web/node_modules)
// Checks: overview -> process -> memory map in two clicks; between the
// snapshot before the 10 MB step and the one after it the difference
// shows a new 10 MB block (the page's list and legend, the picture's
// pixels, the hover) that the API says is main's VirtualAlloc; side by
// side and by age draw; the doubling heap segments are called out; the
// 100,000-range process paints in under 1 s (the page's own measure,
// from the map section's start to its first picture: fetch, parse,
// layout, draw); its reserved-but-uncommitted 4 MiB regions are drawn in
// the faint colour, hover as "reserved, not committed" and are listed
// with Type "reserved"; "Reserved: hide" takes them out. Prints "N passed, M failed"; non-zero exit on a failure.
import path from 'node:path';
import { launch } from './cwbrowser.mjs';

const URL = process.env.CW_URL, BIG = process.env.CW_BIG_URL;
const BIG_RANGES = Number(process.env.CW_BIG_RANGES);
const SHOTS = process.env.CW_SHOTS;
const MB = 1024 * 1024;
let passed = 0, failed = 0;
function check(name, cond, detail = '') {
  if (cond) { passed++; console.log(`ok   ${name}`); } else { failed++; console.log(`FAIL ${name} ${detail}`); }
}

const { browser, close } = await launch({ width: 1400, height: 900 });
const errors = [];
const shot = (page, name) => page.screenshot({ path: path.join(SHOTS, name), fullPage: true });
const api = async (base, p) => (await fetch(base + p)).json();

try {
  const page = browser.pages()[0] || await browser.newPage();
  page.setDefaultTimeout(20000);
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  // The first map canvas's cells (every third pixel, a cell's middle) of colour [r, g, b].
  const cellsOfColour = (rgb) => page.evaluate(([r, g, b]) => {
    const c = document.querySelector('canvas.mapcanvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, out = [];
    for (let y = 1; y < c.height; y += 3) for (let x = 1; x < c.width; x += 3) {
      const i = (y * c.width + x) * 4;
      if (d[i] === r && d[i + 1] === g && d[i + 2] === b) out.push({ x, y });
    }
    return out;
  }, rgb);

  // Two clicks: the overview's process link, then "Memory map".
  await page.goto(URL + '/#/');
  const link = page.locator('a', { hasText: 'MemoryTestApp.exe' }).first();
  await link.waitFor();
  await link.click();                                   // click 1
  await page.locator('#maplink').click();               // click 2
  await page.locator('canvas.mapcanvas').first().waitFor();
  // The page scrolls to the map when asked and again once it is drawn
  // (process.js, showMap); the canvas appears just before that second
  // scroll, and on a loaded machine the process page's figures above it
  // were still being laid out (a clean-clone run, 2026-12-06: heading out
  // of view, and the hovers below missed the blocks they aimed at). What
  // the user gets is where the page comes to rest: in view within 5 s.
  const inView = await page.waitForFunction(() => {
    const r = document.querySelector('#memory-map').getBoundingClientRect();
    return r.top >= 0 && r.top < window.innerHeight;
  }, null, { timeout: 5000 }).then(() => true, () => false);
  check('overview -> memory map in two clicks (map heading in view)', inView);
  const procId = Number(page.url().match(/#\/process\/(\d+)/)[1]);

  // The stored snapshots around the 10 MB step (half way through the run).
  const m0 = await api(URL, `/api/processes/${procId}/map`);
  const snaps = m0.snapshots_ns;
  check('the fixture has map snapshots before and after the step', snaps.length >= 2, JSON.stringify(snaps));
  const before = snaps[0], after = snaps[snaps.length - 1];
  const diff = await api(URL, `/api/processes/${procId}/map?t1=${before}&t2=${after}`);
  const tenIdx = diff.ranges.size.findIndex((s, i) => s === 10 * MB && diff.ranges.change[i] === 'new');
  check('API: a new 10 MB range between the two snapshots', tenIdx >= 0);
  const st = diff.stacks.find((s) => s.id === diff.ranges.stack[tenIdx]);
  check('API: it is main\'s direct VirtualAlloc', st && st.tag === 'VirtualAlloc' && st.frames.some((f) => /!main$/.test(f)) &&
    !st.frames.some((f) => /ManipulateTemporaryBuffer/.test(f)), JSON.stringify(st));

  // The page: difference between those two snapshots.
  const optVal = (ns) => BigInt(Math.round(ns / 1000)) * 1000n;
  await page.selectOption('#mmode', 'diff');
  const opts = await page.$$eval('#mt1 option', (os) => os.map((o) => o.value));
  const near = (ns) => { // the option whose time is that snapshot (API times are rounded to us in the page)
    const want = optVal(ns);
    return opts.find((v) => v && BigInt(v) === want);
  };
  await page.selectOption('#mt1', near(before));
  await page.selectOption('#mt2', near(after));
  await page.waitForFunction(() => document.querySelector('#mlegend')?.textContent.includes('new'));
  await page.waitForFunction(() => [...document.querySelectorAll('#mlist tr.ch-new td.n')].some((td) => td.textContent === '10.0 MB'));
  check('page: the region list has a new 10.0 MB region', true);
  const legend = await page.textContent('#mlegend');
  check('page: the legend counts the new bytes (>= 10 MB)', /new (1\d\.\d|[2-9]\d\.\d) MB/.test(legend), legend);
  // The picture: find the new block's pixels (red) and hover it.
  const spot = await page.evaluate(() => {
    const c = document.querySelector('canvas.mapcanvas');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0, first = null;
    for (let i = 0; i < d.length; i += 4) {
      if (d[i] === 0xd6 && d[i + 1] === 0x27 && d[i + 2] === 0x28) { n++; if (!first) first = { x: (i / 4) % c.width, y: Math.floor(i / 4 / c.width) }; }
    }
    return { n, first };
  });
  check('picture: new (red) cells drawn', spot.n > 0, JSON.stringify(spot));
  if (spot.first) {
    const box = await page.locator('canvas.mapcanvas').first().boundingBox();
    // Hover each red cell until the one of the 10 MB block answers.
    const cells = await cellsOfColour([0xd6, 0x27, 0x28]);
    let hover = '';
    for (const p of cells.slice(0, 400)) {
      await page.mouse.move(box.x + p.x + 0.5, box.y + p.y + 0.5);
      hover = await page.textContent('#mhover');
      if (hover.includes('10.0 MB')) break;
    }
    check('hover: range, 10.0 MB, new, commit time and stack', /0x[0-9a-f]+ – 0x[0-9a-f]+/.test(hover) && hover.includes('10.0 MB') &&
      hover.includes('new') && hover.includes('committed') && /!main/.test(hover), hover);
  }
  await page.locator('#memory-map').scrollIntoViewIfNeeded();
  await shot(page, 'map-diff.png');
  await page.locator('#mapsec').screenshot({ path: path.join(SHOTS, 'map-diff-section.png') });

  const runs = await page.textContent('#mruns');
  check('doubling heap segments called out (8 KB -> 16 KB -> 32 KB)', /doubling/.test(runs) && /8\.00 KB → 16\.0 KB → 32\.0 KB/.test(runs), runs);

  // Side by side, and coloured by age.
  await page.selectOption('#mmode', 'side');
  await page.waitForFunction(() => document.querySelectorAll('canvas.mapcanvas').length === 2);
  check('side by side: two pictures', true);
  const widths = await page.$$eval('canvas.mapcanvas', (cs) => cs.map((c) => [c.width, c.height]));
  check('side by side: one layout (same size)', JSON.stringify(widths[0]) === JSON.stringify(widths[1]), JSON.stringify(widths));
  const tops = await page.$$eval('canvas.mapcanvas', (cs) => cs.map((c) => c.getBoundingClientRect().top));
  check('side by side: in one row', Math.abs(tops[0] - tops[1]) < 1, JSON.stringify(tops));
  await page.locator('#mapsec').screenshot({ path: path.join(SHOTS, 'map-side.png') });
  await page.selectOption('#mcolor', 'age');
  await page.waitForFunction(() => document.querySelector('#mlegend').textContent.includes('oldest'));
  await page.locator('#mapsec').screenshot({ path: path.join(SHOTS, 'map-age.png') });
  check('colour by age: legend', true);

  // Sort the region list by address.
  await page.click('#mlist th[data-k="addr"]');
  const addrs = await page.$$eval('#mlist tbody tr td.mono', (tds) => tds.map((t) => BigInt(t.textContent)));
  check('region list sorts by address', addrs.length > 1 && addrs.every((a, i) => i === 0 || addrs[i - 1] <= a));

  // 100,000 live ranges: the first paint.
  const bigProcs = await api(BIG, '/api/processes');
  const bigId = bigProcs.processes.find((p) => p.name === 'big.exe').id;
  const times = [];
  for (let k = 0; k < 5; k++) {
    await page.goto('about:blank');
    await page.goto(`${BIG}/#/process/${bigId}?map=1`);
    await page.waitForFunction(() => document.querySelector('#mapsec')?.dataset.firstPaintMs, null, { timeout: 60000 });
    const t = await page.evaluate(() => ({ first: Number(document.querySelector('#mapsec').dataset.firstPaintMs),
      draw: Number(document.querySelector('#mapsec').dataset.paintMs),
      fetch: Number(document.querySelector('#mapsec').dataset.fetchMs),
      ranges: Number(document.querySelector('canvas.mapcanvas').dataset.ranges) }));
    times.push(t);
  }
  console.log(`100k-range first paint (fetch+parse+layout+draw), 5 loads: ${times.map((t) => t.first.toFixed(0) + ' ms').join(', ')}; ` +
    `of which request + parse ${times.map((t) => t.fetch.toFixed(0) + ' ms').join(', ')}; draw ${times.map((t) => t.draw.toFixed(0) + ' ms').join(', ')}`);
  check(`big process: ${BIG_RANGES} ranges drawn`, times[0].ranges === BIG_RANGES, JSON.stringify(times[0]));
  const best = Math.min(...times.map((t) => t.first));
  const budget = Number(process.env.CW_FIRST_PAINT_MS || 1000);
  check(`first paint of 100,000 ranges under ${budget} ms (best of 5)`, best < budget, `best ${best.toFixed(0)} ms`);
  await page.locator('#mapsec').screenshot({ path: path.join(SHOTS, 'map-100k.png') });

  // Reserved, not committed: the big process's 4 MiB reservations.
  const bigMap = await api(BIG, `/api/processes/${bigId}/map`);
  const nres = bigMap.reserved ? bigMap.reserved.count : 0;
  check('API: the big process has reserved-but-uncommitted ranges (4 MiB each)', nres > 0 &&
    bigMap.reserved.size.every((x) => x === 4 * MB) && bigMap.reserved.state === 'reserved', JSON.stringify(bigMap.reserved?.size?.slice(0, 3)));
  check('picture: reserved ranges counted on the canvas', Number(await page.getAttribute('canvas.mapcanvas', 'data-reserved')) === nres);
  const faint = await cellsOfColour([0xdc, 0xe3, 0xec]);
  check('picture: reserved space drawn in the faint colour (#dce3ec)', faint.length > 0, `${faint.length} cells`);
  if (faint.length) {
    const box = await page.locator('canvas.mapcanvas').first().boundingBox();
    await page.mouse.move(box.x + faint[0].x + 0.5, box.y + faint[0].y + 0.5);
    const hover = await page.textContent('#mhover');
    check('hover: range, 4.00 MB, "reserved, not committed", reserve time', /0x[0-9a-f]+ – 0x[0-9a-f]+/.test(hover) &&
      hover.includes('4.00 MB') && hover.includes('reserved, not committed') && / reserved \S/.test(hover), hover);
  }
  await page.waitForFunction(() => document.querySelectorAll('#mlist tbody tr').length > 0);
  const resRows = await page.$$eval('#mlist tbody tr.reserved td.type', (tds) => tds.map((t) => t.textContent));
  check('region list: reserved regions with Type "reserved" (the largest, listed first by size)', resRows.length > 0 &&
    resRows.every((x) => x === 'reserved'), JSON.stringify(resRows.slice(0, 3)));
  const types = await page.$$eval('#mlist tbody td.type', (tds) => [...new Set(tds.map((t) => t.textContent))]);
  check('region list: Type column says committed or reserved', types.every((x) => x === 'committed' || x === 'reserved'), JSON.stringify(types));
  await page.locator('#mapsec').screenshot({ path: path.join(SHOTS, 'map-reserved.png') });
  await page.selectOption('#mres', 'hide');
  await page.waitForFunction(() => document.querySelector('canvas.mapcanvas')?.dataset.reserved === '0');
  const faintLeft = (await cellsOfColour([0xdc, 0xe3, 0xec])).length;
  check('reserved: hide leaves no faint cell', faintLeft === 0, `${faintLeft} cells`);

  // A phone: the map section never makes the page scroll sideways.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.goto(`${URL}/#/process/${procId}?map=1`);
  await page.locator('canvas.mapcanvas').first().waitFor();
  await page.waitForFunction(() => document.querySelectorAll('#mlist tbody tr').length > 0);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  check('phone width: the map does not scroll the page sideways', overflow <= 1, `overflow=${overflow}px`);
  await page.locator('#mapsec').screenshot({ path: path.join(SHOTS, 'map-phone.png') });

  check('no console errors', errors.length === 0, JSON.stringify(errors));
} catch (e) {
  failed++;
  console.log(`FAIL ${e.stack || e}`);
  for (const p of browser.pages()) await p.screenshot({ path: path.join(SHOTS, 'map-failure.png'), fullPage: true }).catch(() => {});
} finally {
  await close();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
