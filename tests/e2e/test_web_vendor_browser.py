"""test_web_vendor_browser.py - a dashboard without its vendored front-end
packages says so (issue 35: a packager's build without `npm ci` made a
page that stayed on "Loading…").

- configure: cmake on a copy of the tracked tree without web/node_modules
  fails, naming the missing packages and `npm ci`;
- the page: a service whose web root lacks vendor/ and node_modules/
  (web_root = a copy of web/ without them) shows on the page which file
  is missing and what to do (web_vendor_browser.mjs, Debian's chromium
  through playwright-core); the same trace served from the complete web
  root shows no such error.

A missing prerequisite fails the test in CI and skips it (exit 77)
elsewhere. Screenshots: $CW_BUILD/screenshots/web-vendor-*.png."""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BUILD, MTA, SOURCE, Service, require_fixture  # noqa: E402
import cwbrowser  # noqa: E402

require_fixture()
node, chromium, shots = cwbrowser.prerequisites()
tmp = os.path.join(BUILD, "e2e-web-vendor")
shutil.rmtree(tmp, ignore_errors=True)
os.makedirs(tmp)
failures = []


def check(what, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else f": {detail}"), flush=True)
    if not cond:
        failures.append(what)


# Configure: the tracked files only (git archive), as a packager's tree.
src = os.path.join(tmp, "src")
os.makedirs(src)
archive = subprocess.run(["git", "-C", SOURCE, "archive", "--format=tar", "HEAD"],
                         capture_output=True, check=True).stdout
subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
for d in ("web", "CMakeLists.txt"):  # the working tree's, so an uncommitted change is what is tested
    s, t = os.path.join(SOURCE, d), os.path.join(src, d)
    if os.path.isdir(s):
        shutil.rmtree(t, ignore_errors=True)
        shutil.copytree(s, t, ignore=shutil.ignore_patterns("node_modules"))
    else:
        shutil.copy(s, t)
r = subprocess.run(["cmake", "-S", src, "-B", os.path.join(tmp, "build")],
                   capture_output=True, text=True, timeout=300)
check("configure without web/node_modules fails", r.returncode != 0, r.stdout[-500:])
check("... naming the missing packages and `npm ci`",
      "front-end packages are missing" in r.stderr and "uplot" in r.stderr and "npm ci" in r.stderr,
      r.stderr[-800:])

# The page: a web root without the packages.
web = os.path.join(tmp, "web")
shutil.copytree(os.path.join(SOURCE, "web"), web,
                ignore=shutil.ignore_patterns("node_modules", "vendor"))
with Service(MTA, name="web-vendor-bare", config=f"web_root = {web}\n") as bare, \
        Service(MTA, name="web-vendor-ok") as ok:
    env = dict(os.environ, CW_URL=bare.base, CW_OK_URL=ok.base, CW_SHOTS=shots, CW_SOURCE=SOURCE,
               CW_CHROMIUM=chromium)
    rc = subprocess.run([node, os.path.join(os.path.dirname(__file__), "web_vendor_browser.mjs")],
                        env=env, timeout=300).returncode
    check("the browser checks pass (web_vendor_browser.mjs)", rc == 0, f"exit {rc}")

if failures:
    print(f"FAIL: {len(failures)} check(s) failed (files in {tmp})")
    sys.exit(1)
shutil.rmtree(tmp, ignore_errors=True)
print("PASS")
