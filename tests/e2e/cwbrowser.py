"""cwbrowser.py - what the browser tests share: their prerequisites (node,
Debian's chromium, web/node_modules) and running their .mjs driver.

A missing prerequisite fails the test in CI (CI set in the environment,
or running as root) and skips it (exit 77) elsewhere."""

import contextlib
import os
import subprocess
import sys

from cwservice import BUILD, require_browser


def prerequisites(modules=("playwright-core",), extra=()):
    """(node, chromium, screenshots folder): cwservice.require_browser's
    checks (a missing prerequisite fails in CI, skips elsewhere). extra:
    more (missing?, what) pairs the caller checks."""
    shots = os.path.join(BUILD, "screenshots")
    os.makedirs(shots, exist_ok=True)
    node, chromium = require_browser(modules, also=[what for bad, what in extra if bad])
    return node, chromium, shots


def run_driver(node, script, env, timeout, shots, failure_png=None):
    """Runs tests/e2e/<script> with node and exits with its status."""
    if failure_png:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(shots, failure_png))  # from an earlier run
    try:
        r = subprocess.run([node, os.path.join(os.path.dirname(__file__), script)], env=env,
                           timeout=timeout)
        rc = r.returncode
    except subprocess.TimeoutExpired:
        print(f"FAIL {script} did not finish in {timeout} s")
        rc = 1
    print(f"screenshots in {shots}")
    sys.exit(rc)
