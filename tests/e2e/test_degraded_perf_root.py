#!/usr/bin/env python3
"""test_degraded_perf_root.py - the live source comes back (issue 32,
item 1; docs/RELIABILITY.md, "A source that fails"). As root.

The perf source finds its tracepoints through CW_TRACEFS (the tests'
override of the tracefs folder), pointed at a path that does not exist
yet: perf cannot open ("no syscall tracepoints"), and `run --source perf`
serves on, degraded (/api/health "degraded" with that error,
commitwatch_source_up 0). Then the path is made a link to the machine's
tracefs: at its next try (1 s doubling) the source opens, and the
service says so: health "ok" with source_state up and no error,
commitwatch_source_up 1, the log's "works again after N failed tries",
events ingested (the machine's processes' rundown and syscalls). SIGTERM
stops it with 0. Meanwhile the built-in alert rule source_down fires and
resolves, a webhook hears both, and the system series show the down time
as a gap: each whole step inside it null, the steps after it numbers.
Before issue 32 the run exited at the first failure."""

import os
import re
import shutil
import subprocess
import sys
import urllib.request
import json

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, BUILD, Checks, free_port  # noqa: E402
from cwtest import require, stop, wait_until  # noqa: E402
from notifytool import Receiver  # noqa: E402

require(os.geteuid() == 0, "root (the perf source traces the whole machine)")
real = next((d for d in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
             if os.path.exists(os.path.join(d, "events", "syscalls", "sys_enter_mmap", "id"))), None)
require(real, "tracefs with the syscall tracepoints (/sys/kernel/tracing)")

S = 10**9
t = Checks()
TMP = os.path.join(BUILD, "e2e-degraded-perf")
shutil.rmtree(TMP, ignore_errors=True)
os.makedirs(TMP)
link = os.path.join(TMP, "tracefs")
port = free_port()
base = f"http://127.0.0.1:{port}"
logpath = os.path.join(TMP, "service.log")
log = open(logpath, "w")
hook = Receiver()
conf = os.path.join(TMP, "commitwatch.conf")
with open(conf, "w") as f:
    f.write(f"alert_interval = 1s\nwebhook_url = {hook.url}\n")
proc = subprocess.Popen([BIN, "run", "--source", "perf", "--db", os.path.join(TMP, "perf.db"),
                         "--listen", f"127.0.0.1:{port}", "--config", conf], stdout=log,
                        stderr=subprocess.STDOUT, env=dict(os.environ, CW_TRACEFS=link))


def logtext():
    log.flush()
    with open(logpath) as f:
        return f.read()


def get(path):
    with urllib.request.urlopen(base + path, timeout=30) as resp:
        body = resp.read()
        if resp.headers.get("Content-Type", "").startswith("application/json"):
            return json.loads(body)
        return body.decode()


def health():
    if proc.poll() is not None:
        raise RuntimeError(f"the service exited with {proc.returncode}:\n{logtext()}")
    try:
        return get("/api/health")
    except OSError:
        return None


def source_up_metric():
    m = re.search(r'^commitwatch_source_up\{source="perf"\} (\d)$', get("/metrics"), re.M)
    return m and int(m.group(1))


try:
    h = wait_until(health, 60, "the service answers /api/health")
    ss = h.get("source_state") or {}
    t.eq("no tracefs: health degraded", h.get("status"), "degraded")
    t.check("no tracefs: the error says why", ss.get("up") is False
            and "tracepoints" in (ss.get("error") or ""), f"{ss}")
    t.eq("no tracefs: commitwatch_source_up 0", source_up_metric(), 0)

    def source_down_alerts():
        return [a for a in get("/api/alerts").get("alerts", []) if a["rule"] == "source_down"]

    wait_until(lambda: [a for a in source_down_alerts() if a["state"] == "firing"], 30,
               "the source_down alert fires")
    # Down long enough for whole steps of 1 s inside the gap: two tries.
    wait_until(lambda: (h := health()) and h["source_state"]["retries"] >= 2, 30,
               "two tries failed")
    os.symlink(real, link)
    h = wait_until(lambda: (h := health()) and h["status"] == "ok" and h, 90,
                   "the source opens at its next try: health ok")
    ss = h["source_state"]
    t.check("back: source_state up, no error, no next try",
            ss["up"] is True and ss["error"] is None and ss["next_retry_ns"] is None, f"{ss}")
    t.eq("back: commitwatch_source_up 1", source_up_metric(), 1)
    t.check("back: the log says the source works again",
            re.search(r"the perf source works again after \d+ failed tries", logtext()), logtext())
    wait_until(lambda: (h := health()) and h["events_ingested"] > 0, 60,
               "events are ingested once the source is back")
    t.check("events ingested", True)

    # The alert resolves, and the webhook hears both.
    wait_until(lambda: not source_down_alerts(), 30, "the source_down alert resolves")
    notices = wait_until(lambda: (n := [a["status"] for b in hook.bodies for a in b["alerts"]
                                        if a["labels"].get("alertname") == "source_down"])
                         and "resolved" in n and n, 30, "the webhook hears firing and resolved")
    t.eq("source_down: firing, then resolved", [notices[0], notices[-1]], ["firing", "resolved"])

    # The gap: every step of the down time is null, the data after it not.
    h = wait_until(lambda: (h := health()) and h.get("last_bucket_end_ns") and h, 30,
                   "buckets stored")

    def series_after():
        # Idle seconds are not stored (only buckets with events are), and
        # this test starts no process after the source is back: on a quiet
        # machine the stored data would end where the source came back.
        # A process started at each poll gives the source events.
        subprocess.run(["true"], check=True)
        s = get(f"/api/system/series?from={h['started_ns'] // S * S}&"
                f"to={(health()['last_bucket_end_ns'])}&step=1s")
        ds = s.get("source_down") or []
        if not ds or ds[0][1] is None or s["t"][-1] < ds[0][1] + 2 * S:
            return None
        return s

    s = wait_until(series_after, 30, "the series reach 2 s past the down time")
    down_from, down_to = s["source_down"][0]
    inside = [k for k, t0 in enumerate(s["t"]) if t0 >= down_from and t0 + S <= down_to]
    after = [k for k, t0 in enumerate(s["t"]) if t0 >= down_to]
    t.check("the down time holds whole steps", len(inside) >= 1, f"{s['source_down']} {s['t']}")
    t.check("the down time's steps are null (a gap)",
            all(s["outstanding_total"][k] is None and s["committed_bytes"][k] is None
                for k in inside) and all(v[k] is None for v in s["outstanding"].values()
                                         for k in inside), f"{s}")
    t.check("the steps after it have data", after and all(
        s["outstanding_total"][k] is not None for k in after), f"{s}")
finally:
    stop(proc, timeout=30)
    log.close()
hook.close()
t.eq("SIGTERM stops it (exit 0)", proc.returncode, 0)
t.done()
