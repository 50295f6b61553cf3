// storm_browser.mjs - the process page of an instance corrected from smaps
// shows it (test_storm_root.py runs it): the note "Corrected from smaps: N
// times, X" with the API's count. Env: CW_SOURCE (the source tree),
// CW_URL (the service), CW_PROC_ID, CW_CORRECTIONS (the API's count),
// CW_SHOTS (a folder for the screenshot).
import path from 'node:path';
import { launch, waiter } from './cwbrowser.mjs';

const { browser, close } = await launch();
let ok = false;
try {
  const page = await browser.newPage();
  await page.goto(`${process.env.CW_URL}/#/process/${process.env.CW_PROC_ID}`);
  const shown = await waiter(page, process.env.CW_SOURCE)(() => document.getElementById('corrected'), null, 30000);
  const text = shown ? await page.textContent('#corrected') : '(no note)';
  const n = Number(process.env.CW_CORRECTIONS);
  const want = `Corrected from smaps: ${n.toLocaleString('en-US')} time${n === 1 ? '' : 's'}, `;
  ok = shown && text.startsWith(want) && (await page.isVisible('#corrected'));
  console.log(`${ok ? 'ok  ' : 'FAIL'} the process page says it was corrected: "${text}" (want "${want}...")`);
  await page.screenshot({ path: path.join(process.env.CW_SHOTS, 'storm-process.png') });
} finally {
  await close();
}
process.exit(ok ? 0 : 1);
