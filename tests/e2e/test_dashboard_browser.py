"""test_dashboard_browser.py - the dashboard in a real browser: Debian's
chromium driven by playwright-core (web/node_modules, from `npm ci` in
web/), on the MemoryTestApp fixture. The checks are in
dashboard_browser.mjs: the overview lists the process with its figures,
the process page draws a non-empty chart, selecting the step window shows
Impacting 10 MB, selecting the last four spikes shows Count 4 and 40 MB,
the diff page, and phone width. Screenshots: $CW_BUILD/screenshots/."""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BUILD, MTA, MTA_WINDOWS, SOURCE, Service, require_fixture  # noqa: E402

require_fixture()

shots = os.path.join(BUILD, "screenshots")
os.makedirs(shots, exist_ok=True)
missing = []
node = shutil.which("node")
chromium = os.environ.get("CW_CHROMIUM", "/usr/bin/chromium")
if not node:
    missing.append("node (apt-get install nodejs)")
if not os.path.exists(chromium):
    missing.append(f"{chromium} (apt-get install chromium)")
if not os.path.isdir(os.path.join(SOURCE, "web", "node_modules", "playwright-core")):
    missing.append("web/node_modules/playwright-core (run `npm ci` in web/)")
if missing:
    print("FAIL the browser test needs: " + ", ".join(missing))
    print("0 passed, 1 failed")
    sys.exit(1)

with Service(MTA, name="browser") as svc:
    env = dict(os.environ, CW_URL=svc.base, CW_WINDOWS=MTA_WINDOWS, CW_SHOTS=shots,
               CW_SOURCE=SOURCE, CW_CHROMIUM=chromium)
    r = subprocess.run([node, os.path.join(os.path.dirname(__file__), "dashboard_browser.mjs")],
                       env=env, timeout=300)
print(f"screenshots in {shots}")
sys.exit(r.returncode)
