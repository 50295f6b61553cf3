// cwbrowser.mjs - Debian's chromium through playwright-core
// (web/node_modules), as the browser tests and bench/dashboard_time.mjs
// drive it: headless, a fresh profile each run (playwright passes it as
// --user-data-dir), nothing fetched from outside. UTC and en-US unless
// told otherwise, so times and counts read back the same on every machine.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** playwright-core from the source tree's web/node_modules. */
export function playwright(source) {
  return createRequire(path.join(source, 'web', 'package.json'))('playwright-core');
}

/** {browser (a persistent context), close()}; opts: viewport, prefix of the profile folder. */
export async function launchChromium(source, opts = {}) {
  const { chromium } = playwright(source);
  const profile = mkdtempSync(path.join(tmpdir(), opts.prefix || 'cw-chromium-'));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CW_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: opts.viewport || { width: 1280, height: 800 },
    timezoneId: 'UTC',
    locale: 'en-US',
  });
  return { browser, close: async () => { await browser.close(); rmSync(profile, { recursive: true, force: true }); } };
}

/** GET base+path as JSON (node side); throws on an HTTP error. */
export async function api(base, p, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const res = await fetch(`${base}${p}${q.toString() ? '?' + q : ''}`);
  const body = await res.json();
  if (!res.ok) throw new Error(`${p}?${q}: ${res.status} ${body && body.error}`);
  return body;
}

/** page.waitForFunction with a deadline: true, or false when it ran out. */
export function waiter(page, source) {
  const { errors } = playwright(source);
  return async (fn, arg, ms = 10000) => {
    try {
      await page.waitForFunction(fn, arg, { timeout: ms, polling: 50 });
      return true;
    } catch (e) {
      if (e instanceof errors.TimeoutError) return false;
      throw e;
    }
  };
}

/** launchChromium for drivers run with CW_SOURCE set (map_browser.mjs). */
export function launch(viewport) {
  return launchChromium(process.env.CW_SOURCE, viewport ? { viewport } : {});
}
