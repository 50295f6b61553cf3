"""test_degraded_browser.py - the dashboard's degraded banner in a real
browser (Debian's chromium driven by playwright-core, as the other
browser tests; issue 32). The checks are in degraded_browser.mjs; this
file starts the services:

- degraded: `run --source perf` on a database holding a process's
  history, as a user that may not trace the machine (cwdegraded.py), so
  perf cannot open and the service serves on, degraded;
- ok: the MemoryTestApp fixture replayed, healthy.

A missing prerequisite fails the test in CI and skips it (exit 77)
elsewhere. Screenshots: $CW_BUILD/screenshots/degraded-*.png."""

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BUILD, MTA, SOURCE, Service, require_fixture  # noqa: E402
from cwdegraded import DegradedPerf, history_db, require_unprivileged  # noqa: E402
import cwbrowser  # noqa: E402

require_fixture()
require_unprivileged()
node, chromium, shots = cwbrowser.prerequisites()
tmp = os.path.join(BUILD, "e2e-degraded-browser")
shutil.rmtree(tmp, ignore_errors=True)
os.makedirs(tmp)
hist = history_db(tmp)
with DegradedPerf(tmp, hist.db) as bad, Service(MTA, name="degraded-browser-ok") as ok:
    env = dict(os.environ, CW_URL=bad.base, CW_OK_URL=ok.base, CW_SHOTS=shots, CW_SOURCE=SOURCE,
               CW_CHROMIUM=chromium)
    cwbrowser.run_driver(node, "degraded_browser.mjs", env, 300, shots)
