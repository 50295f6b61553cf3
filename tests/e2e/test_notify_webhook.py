"""test_notify_webhook.py - the webhook channel against a real HTTP
receiver (docs/ALERTS.md, "Delivery"): the body in Alertmanager's webhook
format with Prometheus' fingerprint, retries with doubling backoff after
5xx (each attempt a row of notifications), no retry after a 4xx, the
repeat interval for re-sends; and a storm of 1,000 series against the rate
limit (at most the limit delivered, the rest recorded as dropped)."""

import os
import sys
import tempfile

from notifytool import Receiver, fingerprint, notice, rows, run

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


tmp = tempfile.mkdtemp(prefix="cw_notify_webhook_")

# ---- format, retries, backoff, repeat interval ------------------------------
rec = Receiver(fail=2)
db = os.path.join(tmp, "a.db")
n1 = notice(1)
n1_resend_soon = dict(notice(1), resend=True, transition=0, reason=None,
                      ts_ms=n1["ts_ms"] + 60000)
n1_resend_late = dict(n1_resend_soon, ts_ms=n1["ts_ms"] + 3600000)
n1_resolved = dict(notice(1), resolved=True, transition=12, reason="resolved",
                   ends_ms=n1["ts_ms"] + 3700000, ts_ms=n1["ts_ms"] + 3700000)
p, secs = run(["--db", db, "--webhook", rec.url, "--retries", "4", "--backoff-ms", "300",
               "--repeat-s", "3600", "--external-url", "http://cw.example:8080"],
              [{"notices": [n1]}, {"notices": [n1_resend_soon]}, {"notices": [n1_resend_late]},
               {"notices": [n1_resolved]}])
rec.close()
check(p.returncode == 0, f"cw_notify_send exits 0 ({p.returncode}: {p.stderr.strip()})")
check(rec.statuses == [503, 503, 200, 200, 200],
      f"two failures, then the firing, the late re-send and the resolve ({rec.statuses})")
gaps = [b - a for a, b in zip(rec.times, rec.times[1:3])]
check(len(gaps) == 2 and 0.28 <= gaps[0] < 1.5 and 0.58 <= gaps[1] < 2.5 and gaps[1] > gaps[0],
      f"backoff 0.3 s then 0.6 s ({[round(g, 2) for g in gaps]})")
if len(rec.bodies) == 3:
    b = rec.bodies[0]
    a = b["alerts"][0]
    labels = n1["labels"]
    check(b["version"] == "4" and b["status"] == "firing" and b["receiver"] == "commitwatch",
          "version 4, status firing, receiver")
    check(b["externalURL"] == "http://cw.example:8080", "externalURL")
    check(b["truncatedAlerts"] == 0, "truncatedAlerts")
    gk = "{}:{" + ", ".join(f'{k}="{labels[k]}"' for k in sorted(labels)) + "}"
    check(b["groupKey"] == gk, f"groupKey {b['groupKey']}")
    check(b["commonLabels"] == labels and b["groupLabels"] == labels, "commonLabels, groupLabels")
    check(b["commonAnnotations"] == n1["annotations"], "commonAnnotations")
    check(a["labels"] == labels and a["annotations"] == n1["annotations"], "labels, annotations")
    check(a["status"] == "firing" and a["endsAt"] == "0001-01-01T00:00:00Z",
          f"firing, endsAt the zero time ({a['endsAt']})")
    check(a["startsAt"].endswith("Z") and a["startsAt"][:19] ==
          __import__("time").strftime("%Y-%m-%dT%H:%M:%S", __import__("time").gmtime(n1["starts_ms"] / 1000)),
          f"startsAt {a['startsAt']}")
    check(a["generatorURL"] == n1["generator_url"], "generatorURL")
    check(a["fingerprint"] == fingerprint(labels), f"fingerprint {a['fingerprint']} "
          f"== Prometheus' {fingerprint(labels)}")
    check(rec.bodies[1]["alerts"][0]["status"] == "firing", "the late re-send delivered")
    r = rec.bodies[2]
    check(r["status"] == "resolved" and r["alerts"][0]["status"] == "resolved" and
          r["alerts"][0]["endsAt"] != "0001-01-01T00:00:00Z", "resolved, with endsAt")
else:
    check(False, f"three bodies received ({len(rec.bodies)})")
rs = rows(db)
summary = [(r["channel"], r["series"], r["attempt"], r["result"], r["detail"]) for r in rs]
check(summary[:3] == [("webhook", 1, 1, "error", "HTTP 503: no"), ("webhook", 1, 2, "error", "HTTP 503: no"),
                      ("webhook", 1, 3, "ok", None)], f"each attempt recorded ({summary[:3]})")
check(rs[0]["transition"] == 10 and rs[3]["transition"] is None and rs[4]["transition"] == 12,
      "the rows' transitions (a re-send has none)")
check(len(rs) == 5, f"5 rows: the re-send within the repeat interval is not sent ({len(rs)})")

# ---- a 4xx is not retried -----------------------------------------------------
rec = Receiver(fail=5, fail_status=400)
db = os.path.join(tmp, "b.db")
p, _ = run(["--db", db, "--webhook", rec.url, "--retries", "4", "--backoff-ms", "50"],
           [{"notices": [notice(2)]}])
rec.close()
check(len(rec.statuses) == 1, f"one attempt after HTTP 400 ({rec.statuses})")
check([(r["attempt"], r["result"]) for r in rows(db)] == [(1, "error")], "recorded as an error")

# ---- a storm of 1,000 series against the rate limit ---------------------------
rec = Receiver()
db = os.path.join(tmp, "c.db")
storm = [notice(1000 + i, process=f"p{i}", pid=10000 + i) for i in range(1000)]
p, secs = run(["--db", db, "--webhook", rec.url, "--rate-limit", "60"], [{"notices": storm}])
rec.close()
allowed = 60 + int(secs) + 1  # the burst, and the refill (one a second) while it ran
check(60 <= len(rec.bodies) <= allowed,
      f"at most the limit delivered: {len(rec.bodies)} in {secs:.1f} s (<= {allowed})")
rs = rows(db)
dropped = sum(1 for r in rs if r["result"] == "dropped")
ok = sum(1 for r in rs if r["result"] == "ok")
check(ok == len(rec.bodies) and dropped == 1000 - ok,
      f"the rest recorded as dropped ({ok} ok, {dropped} dropped)")
check(all(r["detail"] == "rate limit" for r in rs if r["result"] == "dropped"), "detail: rate limit")
check(p.stderr.count("rate limit of 60 a minute reached") == 1, "logged once")

if failures:
    print(f"FAILED: {len(failures)}: {failures}")
    sys.exit(1)
print("all passed")
