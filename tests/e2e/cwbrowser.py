"""cwbrowser.py - what the browser tests share: their prerequisites (node,
Debian's chromium, web/node_modules) and running their .mjs driver.

A missing prerequisite fails the test in CI (CI set in the environment,
or running as root) and skips it (exit 77) elsewhere."""

import contextlib
import os
import shutil
import subprocess
import sys

from cwservice import BUILD, SOURCE


def in_ci():
    ci = os.environ.get("CI", "").strip().lower()
    return (ci not in ("", "0", "false", "no")) or (hasattr(os, "geteuid") and os.geteuid() == 0)


def prerequisites(modules=("playwright-core",), extra=()):
    """(node, chromium, screenshots folder), or exits naming what is
    missing. extra: more (missing?, what) pairs the caller checks."""
    shots = os.path.join(BUILD, "screenshots")
    os.makedirs(shots, exist_ok=True)
    missing = []
    node = shutil.which("node")
    chromium = os.environ.get("CW_CHROMIUM", "/usr/bin/chromium")
    if not node:
        missing.append("node (apt-get install nodejs)")
    if not os.access(chromium, os.X_OK):
        missing.append(f"{chromium} (apt-get install chromium)")
    missing += [what for bad, what in extra if bad]
    for mod in modules:
        if not os.path.isdir(os.path.join(SOURCE, "web", "node_modules", mod)):
            missing.append(f"web/node_modules/{mod} (run `npm ci` in web/)")
    if missing:
        reason = "the browser test needs: " + ", ".join(missing)
        if in_ci():
            print("FAIL " + reason + " (in CI, or as root, a missing prerequisite is a failure)")
            print("0 passed, 1 failed")
            sys.exit(1)
        print("SKIP: " + reason)
        sys.exit(77)
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
