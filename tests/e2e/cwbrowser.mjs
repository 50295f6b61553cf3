// cwbrowser.mjs - what the browser tests' drivers share: Debian's chromium
// through playwright-core (web/node_modules), with a fresh profile each
// run (playwright passes it as --user-data-dir), in UTC and en-US so times
// and counts read back the same on every machine.
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const require = createRequire(path.join(process.env.CW_SOURCE, 'web', 'package.json'));
export const playwright = require('playwright-core');

/** {browser, close()}: close() also removes the profile. */
export async function launch(viewport = { width: 1280, height: 800 }) {
  const profile = mkdtempSync(path.join(tmpdir(), 'cw-chromium-'));
  const browser = await playwright.chromium.launchPersistentContext(profile, {
    executablePath: process.env.CW_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport,
    timezoneId: 'UTC',
    locale: 'en-US',
  });
  return {
    browser,
    async close() {
      await browser.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
