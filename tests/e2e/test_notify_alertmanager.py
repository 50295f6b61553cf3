"""test_notify_alertmanager.py - the Alertmanager channel against Debian's
prometheus-alertmanager, started here on loopback with a temporary
configuration and storage: an alert pushed to /api/v2/alerts appears in
GET /api/v2/alerts with its labels, annotations, generatorURL and the
fingerprint Alertmanager computes itself, active, with endsAt = ts + 4 x
max(alert_interval, alert_resend) as Prometheus sets it; then resolved
(endsAt = the resolve time) it is no longer active. Every POST is a row of
notifications."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone

from cwtest import require, wait_until
from notifytool import fingerprint, notice, rows, run

AM = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
require(AM, "prometheus-alertmanager (apt-get install prometheus-alertmanager; scripts/deps.sh --test)")

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


tmp = tempfile.mkdtemp(prefix="cw_notify_am_")
with open(os.path.join(tmp, "alertmanager.yml"), "w") as f:
    f.write("route:\n  receiver: blackhole\n  group_wait: 1s\nreceivers:\n  - name: blackhole\n")
port = free_port()
url = f"http://127.0.0.1:{port}"
log = open(os.path.join(tmp, "alertmanager.log"), "w")
am = subprocess.Popen([AM, f"--config.file={tmp}/alertmanager.yml", f"--storage.path={tmp}/data",
                       f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                      stdout=log, stderr=subprocess.STDOUT)


def get_alerts(active_only=True):
    q = "?active=true&silenced=true&inhibited=true&unprocessed=true"
    with urllib.request.urlopen(url + "/api/v2/alerts" + q, timeout=5) as r:
        return json.load(r)


try:
    def ready():
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False
    wait_until(ready, 60, "Alertmanager answers /-/ready")

    db = os.path.join(tmp, "cw.db")
    firing = [notice(1), notice(2, process="other", pid=7, severity="critical")]
    p, _ = run(["--db", db, "--alertmanager", url, "--resend-s", "60", "--interval-s", "10"],
               [{"notices": firing}])
    check(p.returncode == 0, f"cw_notify_send exits 0 ({p.stderr.strip()})")
    alerts = wait_until(lambda: len(get_alerts()) == 2 and get_alerts(), 30,
                        "both alerts in GET /api/v2/alerts")
    by_fp = {a["fingerprint"]: a for a in alerts}
    for n in firing:
        fp = fingerprint(n["labels"])
        a = by_fp.get(fp)
        check(a is not None, f"Alertmanager's fingerprint of {n['labels']['process']} is ours ({fp})")
        if not a:
            continue
        check(a["labels"] == n["labels"], f"labels {a['labels']}")
        check(a["annotations"] == n["annotations"], "annotations")
        check(a["generatorURL"] == n["generator_url"], "generatorURL")
        check(a["status"]["state"] == "active", f"state {a['status']['state']}")
        check(abs(ts(a["startsAt"]) - n["starts_ms"] / 1000) < 0.01, f"startsAt {a['startsAt']}")
        want_end = n["ts_ms"] / 1000 + 4 * 60
        check(abs(ts(a["endsAt"]) - want_end) < 0.01,
              f"endsAt {a['endsAt']} = ts + 4 x max(10 s, 60 s)")
    rs = rows(db)
    check([(r["channel"], r["attempt"], r["result"], r["detail"]) for r in rs] ==
          [("alertmanager", 1, "ok", "2 alerts")], f"one POST, one row ({rs})")

    # Resolve one: endsAt = the resolve time (now), so it is no longer active.
    end_ms = int(time.time() * 1000)
    resolved = dict(notice(1), resolved=True, transition=12, reason="resolved",
                    ends_ms=end_ms, ts_ms=end_ms)
    p, _ = run(["--db", db, "--alertmanager", url], [{"notices": [resolved]}])
    fp1 = fingerprint(firing[0]["labels"])

    def gone():
        left = [a["fingerprint"] for a in get_alerts()]
        return fp1 not in left and len(left) == 1 and left
    left = wait_until(gone, 30, "the resolved alert leaves the active alerts")
    check(left == [fingerprint(firing[1]["labels"])], "the other stays active")
    check(len(rows(db)) == 2 and rows(db)[1]["series"] == 1,
          "the resolve's POST recorded with its series")
finally:
    am.terminate()
    try:
        am.wait(10)
    except subprocess.TimeoutExpired:
        am.kill()
    log.close()

if failures:
    print(open(os.path.join(tmp, "alertmanager.log")).read()[-3000:])
    print(f"FAILED: {len(failures)}: {failures}")
    sys.exit(1)
shutil.rmtree(tmp, ignore_errors=True)
print("all passed")
