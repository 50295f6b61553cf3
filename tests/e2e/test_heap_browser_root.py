#!/usr/bin/env python3
"""test_heap_browser_root.py - the dashboard's "Trace heap" in a real
browser (Debian's chromium through playwright-core; the checks are in
heap_browser.mjs) against the service with the live perf source (root):
a running tests/programs/heap_truth --attach is traced from its process
page; this script lets it run to its end once the trace is attached and
the page has seen it running, and the page then shows the report with
the truth's leaking function.

Without root it fails, saying why (CI runs as root); a missing browser
prerequisite fails in CI and skips elsewhere."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import SOURCE, free_port  # noqa: E402
from cwtest import wait_until  # noqa: E402
from heaptruth import BIN, TRUTH, start_live  # noqa: E402
import cwbrowser  # noqa: E402

TOKEN = "heap-browser-token"


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=30) as r:
        return json.loads(r.read())


def main():
    if os.geteuid() != 0:
        print("FAIL: the perf source needs root (CI runs this as root)")
        return 1
    node, chromium, shots = cwbrowser.prerequisites(("playwright-core", "uplot"))
    tmp = tempfile.mkdtemp(prefix="cw_heap_browser_")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    run, log = start_live(tmp, port, TOKEN)
    kids = []
    try:

        def instance(pid):
            procs = get(base, f"/api/processes?pid={pid}&from=-1h")["processes"]
            return procs[0]["id"] if procs else None

        gone = subprocess.Popen(["sleep", "0.2"])
        gone.wait()
        expect = os.path.join(tmp, "expect.json")
        t = subprocess.Popen([TRUTH, "--attach", expect], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        kids.append(t)
        if t.stdout.readline().strip() != "ready":
            print("FAIL: heap_truth did not say ready")
            return 1
        inst = wait_until(lambda: instance(t.pid), 60, "heap_truth's instance is stored")
        exited = wait_until(lambda: instance(gone.pid), 60, "the exited process is stored")
        wait_until(lambda: get(base, f"/api/processes/{exited}")["process"].get("exit_ns"), 60,
                   "its exit is stored")
        seen = os.path.join(tmp, "seen-running")
        env = dict(os.environ, CW_URL=base, CW_TOKEN=TOKEN, CW_INST=str(inst),
                   CW_EXITED=str(exited), CW_SHOTS=shots, CW_SOURCE=SOURCE, CW_CHROMIUM=chromium,
                   CW_SEEN=seen)
        # heap_truth writes its truth when it ends; its leak (function and
        # bytes) comes from its constants: read it from a launch-mode run.
        probe = subprocess.run([BIN, "heap", "--json", "--", TRUTH, os.path.join(tmp, "p.json")],
                               capture_output=True, text=True, timeout=120)
        want = json.load(open(os.path.join(tmp, "p.json")))
        env["CW_LEAK"] = f"{want['leak']['function']}:{want['leak']['outstanding_bytes']}"
        driver = subprocess.Popen([node, os.path.join(os.path.dirname(__file__),
                                                      "heap_browser.mjs")], env=env)
        kids.append(driver)

        def attached():
            if driver.poll() is not None:
                return True
            ts = get(base, f"/api/heap-traces?process={inst}")["traces"]
            return any(x.get("attached") for x in ts)
        wait_until(attached, 60, "the page's trace attaches")
        # heap_truth runs to its end once the page has seen its trace
        # running too (the page writes `seen`; or once the page has ended).
        wait_until(lambda: driver.poll() is not None or os.path.exists(seen), 120,
                   "the page sees its trace running")
        t.stdin.write("go\n")
        t.stdin.close()
        t.wait(timeout=60)
        rc = driver.wait(timeout=300)
        print(f"screenshots in {shots}")
        if probe.returncode != 0:
            print(f"FAIL: heap -- heap_truth: {probe.stderr[-500:]}")
            rc = rc or 1
        run.send_signal(signal.SIGINT)
        run.wait(timeout=120)
        return rc
    finally:
        for k in kids:
            if k.poll() is None:
                k.kill()
        if run.poll() is None:
            run.kill()


if __name__ == "__main__":
    sys.exit(main())
