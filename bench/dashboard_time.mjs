// dashboard_time.mjs - time from navigation to a drawn chart on the
// process page, in Debian's chromium via playwright-core (web/node_modules).
// usage: node bench/dashboard_time.mjs URL PROCESS_ID FROM_NS TO_NS [RUNS]
// Prints one line per run and the median, in ms (navigation start to the
// chart's first draw with data, uPlot's draw hook). The first run includes
// the browser's own cold start.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium } from '../tests/e2e/cwbrowser.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const [url, id, from, to, runs = '5'] = process.argv.slice(2);

const { browser: ctx, close } = await launchChromium(path.join(here, '..'), { prefix: 'cw-bench-' });
const times = [];
try {
  const page = ctx.pages()[0] || await ctx.newPage();
  for (let i = 0; i < Number(runs); i++) {
    await page.goto('about:blank');
    await page.goto(`${url}/#/process/${id}?from=${from}&to=${to}`);
    await page.waitForFunction(() => window.cwChartDrawnAt !== undefined, null, { timeout: 60000 });
    const r = await page.evaluate(() => ({ t: window.cwChartDrawnAt, n: Number(document.querySelector('#chart').dataset.drawn) }));
    times.push(r.t);
    // Let the page's window figures (full reports) finish before the next
    // run, so runs do not compete for the CPU.
    await page.waitForFunction(() => window.cwFiguresDoneAt !== undefined, null, { timeout: 120000 });
    console.log(`run ${i + 1}: chart drawn after ${r.t.toFixed(0)} ms (${r.n} steps)`);
  }
} finally {
  await close();
}
times.sort((a, b) => a - b);
console.log(`median: ${times[Math.floor(times.length / 2)].toFixed(0)} ms`);
