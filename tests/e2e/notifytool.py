"""notifytool.py - what the delivery tests (test_notify_*.py) share: the
cw_notify_send tool (tests/notify), notices to feed it, the Prometheus
fingerprint computed independently (Go's algorithm: FNV-1a 64 over the
sorted names and values, 0xff after each), a recording HTTP receiver, and
the notifications table."""

import http.server
import json
import os
import sqlite3
import subprocess
import threading
import time

from cwtest import require

BUILD = os.environ.get("CW_BUILD", "")
TOOL = os.path.join(BUILD, "tests", "notify", "cw_notify_send")


def tool():
    require(os.access(TOOL, os.X_OK), f"{TOOL} (build the target cw_notify_send)")
    return TOOL


def fingerprint(labels):
    h = 14695981039346656037
    for name in sorted(labels):
        for part in (name.encode(), labels[name].encode()):
            for b in part + b"\xff":
                h ^= b
                h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def notice(series, alertname="LikelyLeak", process="leaky", pid=4242, tag="heap", **kw):
    now_ms = int(time.time() * 1000)
    labels = {"alertname": alertname, "severity": kw.pop("severity", "warning"),
              "process": process, "pid": str(pid), "tag": tag}
    n = {"series": series, "transition": series * 10, "rule": alertname, "reason": "for elapsed",
         "labels": labels, "process": process, "pid": pid, "tag": tag,
         "severity": labels["severity"],
         "annotations": {"summary": f"{process} grows", "value": "52MiB/h", "threshold": "50MiB/h"},
         "value": 54525952.0, "threshold": 52428800.0, "leak_score": 0.93, "ttl_s": 7200,
         "starts_ms": now_ms - 60000, "ts_ms": now_ms,
         "generator_url": f"http://127.0.0.1:8080/#/alerts/{series}"}
    n.update(kw)
    return n


def run(args, submits, timeout=120):
    """Runs the tool over submits; returns (CompletedProcess, seconds)."""
    d = os.environ.get("TMPDIR", "/tmp")
    path = os.path.join(d, f"cw_notify_in_{os.getpid()}_{time.monotonic_ns()}.json")
    with open(path, "w") as f:
        json.dump(submits, f)
    t0 = time.monotonic()
    try:
        p = subprocess.run([tool(), *args, path], capture_output=True, text=True, timeout=timeout)
    finally:
        os.unlink(path)
    return p, time.monotonic() - t0


def rows(db):
    with sqlite3.connect(db) as c:
        c.row_factory = sqlite3.Row
        return [dict(r) for r in c.execute("SELECT * FROM notifications ORDER BY id")]


class Receiver:
    """An HTTP server on loopback recording each POST's body and arrival
    time; the first `fail` requests get `fail_status`."""

    def __init__(self, fail=0, fail_status=503):
        self.bodies, self.times, self.statuses = [], [], []
        self.fail, self.fail_status = fail, fail_status
        rec = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    rec.times.append(time.monotonic())
                    failing = rec.fail > 0
                    if failing:
                        rec.fail -= 1
                    else:
                        rec.bodies.append(json.loads(body))
                    status = rec.fail_status if failing else 200
                    rec.statuses.append(status)
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"no" if failing else b"ok")

            def log_message(self, *a):
                pass

        lock = threading.Lock()
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/hook"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
