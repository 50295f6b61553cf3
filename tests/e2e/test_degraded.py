#!/usr/bin/env python3
"""test_degraded.py - a live source that cannot open degrades the service,
never stops it (issue 32, item 1; docs/RELIABILITY.md, "A source that
fails").

A database holds a process's history (a Linux trace replayed into it).
Then `commitwatch run --source perf` runs on that database as a user that
may not trace the whole machine (nobody, through setpriv, when the test
runs as root; the test's own user otherwise, with
kernel.perf_event_paranoid >= 1), so perf_event_open is refused. Before
issue 32 the run exited at once with that error. Now:

- it keeps running and serving: /api/health answers "status":"degraded"
  with source_state (up false, the perf error naming perf_event_paranoid,
  since_ns, retries, next_retry_ns), "source":"perf" unchanged;
- /metrics has commitwatch_source_up{source="perf"} 0;
- the stored history is still served (/api/processes of its window);
- the source is retried on the schedule (1 s, 2 s, 4 s: at least three
  tries within about 10 s) and the log says so once, not once per try
  (at most once a minute);
- the built-in alert rule source_down fires (critical, /api/alerts and
  commitwatch_alerts), and its notice reaches a webhook;
- SIGTERM stops it cleanly (exit 0).
"""

import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BUILD, Checks  # noqa: E402
from cwtest import wait_until  # noqa: E402
from cwdegraded import S, DegradedPerf, history_db, require_unprivileged  # noqa: E402
from notifytool import Receiver  # noqa: E402

require_unprivileged()
t = Checks()
TMP = os.path.join(BUILD, "e2e-degraded")
shutil.rmtree(TMP, ignore_errors=True)
os.makedirs(TMP)
hist = history_db(TMP)
t0 = hist.t0

hook = Receiver()
svc = DegradedPerf(TMP, hist.db, config=f"alert_interval = 1s\nwebhook_url = {hook.url}\n")
with svc:
    get, health, logtext = svc.get, svc.health, svc.logtext
    h = wait_until(health, 60, "the service answers /api/health")
    t.eq("health: status degraded", h.get("status"), "degraded")
    t.eq("health: the source string is unchanged", h.get("source"), "perf")
    ss = h.get("source_state") or {}
    t.eq("health: source_state.up is false", ss.get("up"), False)
    t.check("health: the error is perf's (paranoid, CAP_PERFMON)",
            "perf_event_paranoid" in (ss.get("error") or ""), f"{ss}")
    t.check("health: since_ns is a time since the start",
            isinstance(ss.get("since_ns"), int) and ss["since_ns"] >= h["started_ns"], f"{ss}")
    t.check("health: next_retry_ns is after now",
            isinstance(ss.get("next_retry_ns"), int) and ss["next_retry_ns"] > h["now_ns"] - S,
            f"{ss} now {h['now_ns']}")
    t.eq("health: the data's platform", h.get("platform"), "linux")

    status, metrics = get("/metrics")
    t.check("/metrics: commitwatch_source_up{source=\"perf\"} 0",
            re.search(r'^commitwatch_source_up\{source="perf"\} 0$', metrics, re.M),
            "\n".join(m for m in metrics.splitlines() if "source_up" in m))

    status, procs = get(f"/api/processes?from={t0}&to={t0 + 10 * S}")
    t.eq("the stored history is served: 200", status, 200)
    names = {p["name"]: p for p in procs.get("processes", [])}
    t.check("the stored history is served: the process", "degraded-test" in names, f"{procs}")
    t.eq("the stored history is served: its figures",
         names.get("degraded-test", {}).get("impacting_bytes"), 3 << 20)

    # The schedule: tries at about 1, 1 + 2, 1 + 2 + 4 s after the first.
    h = wait_until(lambda: (h := health()) and (h["source_state"] or {}).get("retries", 0) >= 4
                   and h, 30, "the source has been tried 4 times (1 s, 2 s, 4 s apart)")
    ss = h["source_state"]
    t.eq("still degraded after the retries", h["status"], "degraded")
    gap = (ss["next_retry_ns"] - h["now_ns"]) / S
    t.check("the next try is at most 8 s away (the 4th wait)", gap <= 8.5, f"{gap} s")
    text = logtext()
    t.eq("the log says the source failed once (not once per try)",
         len(re.findall(r"the perf source failed", text)), 1)
    t.eq("no 'still fails' line within the first minute",
         len(re.findall(r"the perf source still fails", text)), 0)
    t.check("the log says the service goes on serving", "goes on serving the stored data" in text,
            text)
    # The built-in rule source_down fires through the alert engine, and
    # its notification goes out (the webhook, Alertmanager's format).
    def firing():
        alerts = get("/api/alerts")[1].get("alerts", [])
        return [a for a in alerts if a["rule"] == "source_down" and a["state"] == "firing"]

    fired = wait_until(firing, 30, "the source_down alert fires")
    t.eq("source_down: critical, value 1", (fired[0]["severity"], fired[0]["value"]),
         ("critical", 1))
    status, metrics = get("/metrics")
    t.check("/metrics: commitwatch_alerts{alertname=\"source_down\",...firing} 1",
            re.search(r'^commitwatch_alerts\{alertname="source_down".*alertstate="firing".*\} 1$',
                      metrics, re.M), "")
    sent = wait_until(lambda: [a for b in hook.bodies for a in b.get("alerts", [])
                               if a["labels"].get("alertname") == "source_down"], 30,
                      "the webhook receives the source_down notice")
    t.eq("the notice is firing", sent[0]["status"], "firing")
hook.close()
t.eq("SIGTERM stops the degraded service cleanly (exit 0)", svc.returncode, 0)
t.done()
