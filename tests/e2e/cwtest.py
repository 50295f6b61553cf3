"""cwtest.py - what every end-to-end test shares: waiting on a condition
with a deadline, prerequisites that fail in CI instead of skipping, and
explicit checks.

    from cwtest import require, wait_until

    require(shutil.which("promtool"), "promtool (apt-get install prometheus)")
    h = wait_until(lambda: ready(), 30, "the service answers /api/health")

wait_until never sleeps in the hope that something happened: it polls a
condition and raises WaitTimeout (the test fails, naming what it waited
for) when the deadline passes. Deadlines are generous (a noisy 2-core
machine); they only bound how long a broken build takes to fail.

tier_count: how many random cases a test runs, by the tier that runs it
(scripts/test.sh exports CW_TIER=fast or full; unset, as when a test is
run by hand, is the full count), unless the test's own variable says.

require: ctest counts exit code 77 as "skipped", and a skip prints as
"100% tests passed". A developer's machine may lack a prerequisite (a skip
says which); CI must not: where the environment variable CI is set, or the
test runs as root (CI runs as root), a missing prerequisite fails the test.
"""

import os
import signal
import subprocess
import sys
import time

SKIP = 77  # tests/CMakeLists.txt: SKIP_RETURN_CODE


class WaitTimeout(AssertionError):
    pass


class Checks:
    """check = Checks(); check(cond, what, *context): an explicit check (it
    holds under python -O, unlike assert); a failed one prints FAIL, what,
    and each context (cut to 4,000 characters), and exits 1. check.count
    says how many passed."""

    def __init__(self):
        self.count = 0

    def __call__(self, cond, what, *context):
        self.count += 1
        if not cond:
            print("FAIL:", what, file=sys.stderr)
            for c in context:
                print("  ", str(c)[:4000], file=sys.stderr)
            sys.exit(1)


def in_ci():
    """True in CI: CI set (to anything but 0, false or no), or running as
    root (CI runs as root). The same rule as test_dashboard_browser.py."""
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        return True
    return hasattr(os, "geteuid") and os.geteuid() == 0


def require(ok, what):
    """Continues when ok is true; otherwise exits: 1 (FAIL, with the reason)
    in CI, 77 (ctest: skipped) elsewhere."""
    if ok:
        return
    if in_ci():
        print(f"FAIL: missing prerequisite: {what} (in CI, or as root, a missing "
              "prerequisite is a failure, not a skip)", flush=True)
        sys.exit(1)
    print(f"SKIP: missing prerequisite: {what}", flush=True)
    sys.exit(SKIP)


def tier_count(var, fast, full):
    """The count of random cases: $var if set, else `fast` in the fast tier
    (CW_TIER=fast) and `full` otherwise."""
    if os.environ.get(var):
        return int(os.environ[var])
    return fast if os.environ.get("CW_TIER") == "fast" else full


def wait_until(cond, timeout, what, interval=0.05):
    """Polls cond() until it returns a true value, which is returned.
    Raises WaitTimeout naming `what` (and the last value) when `timeout`
    seconds pass first; an exception cond raises ends the wait at once.
    `what` may be a callable giving the text, for details known only at
    the end."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() >= deadline:
            text = what() if callable(what) else what
            raise WaitTimeout(f"timed out after {timeout} s waiting until {text} "
                              f"(last value: {v!r:.2000})")
        time.sleep(interval)


def file_text(path):
    """The file's text, '' while it does not exist."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def stop(proc, sig=signal.SIGTERM, timeout=20):
    """Sends sig to proc when it still runs and waits up to `timeout`
    seconds for it to exit; kills it after that. Returns its exit status,
    None when it had to be killed."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None
