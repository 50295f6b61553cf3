#!/usr/bin/env python3
"""test_serve.py - `commitwatch serve --db FILE`: a database served
read-only with no source, of either platform (issue 32, item 7;
docs/DESIGN.md, "One path without a source").

Two databases made by replay runs: the MemoryTestApp trace (Windows data:
the other platform on this Linux machine, which `run --source perf`
refuses) and a small Linux trace. Each is served by `serve --db`; then:

- /api/health: "status":"ok", "read_only":true, "source":"none",
  "source_state":null, "platform" the database's own;
- /api/processes of the whole data equals `analyze --db` (the same
  figures as a run would serve), /api/system/series answers, an export
  (folded stacks) and an alert backtest answer 200;
- /metrics serves the stored figures and has no commitwatch_source_up
  (no source to be up);
- a state-changing request (POST /api/silences) is refused: nothing
  writes;
- the database file's bytes are unchanged after serving and stopping
  (SHA-256), and the service exits 0 on SIGTERM;
- --config FILE's `listen` is where it serves (the Linux database);
- `serve` without --db is a usage error (exit 2); a missing file fails
  with a message naming it (exit 1).
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, BUILD, MTA, Checks, analyze_json, free_port, require_fixture  # noqa: E402
from cwtest import stop, wait_until  # noqa: E402

require_fixture()
t = Checks()
TMP = os.path.join(BUILD, "e2e-serve")
shutil.rmtree(TMP, ignore_errors=True)
os.makedirs(TMP)
S = 10**9


def replay(trace, db):
    r = subprocess.run([BIN, "run", "--source", f"replay:{trace}", "--db", db, "--no-http"],
                       capture_output=True, text=True, timeout=120)
    t.eq(f"replay into {os.path.basename(db)}: exit 0", r.returncode, 0)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# A Linux trace (this machine's platform).
t0 = (int(time.time()) - 7200) * S
linux_trace = os.path.join(TMP, "linux.jsonl")
with open(linux_trace, "w") as f:
    for e in [{"format": "commitwatch-trace", "version": 1, "platform": "linux", "pointer_size": 8},
              {"ts": t0, "op": "process_start", "pid": 77, "name": "served-linux"},
              {"ts": t0 + S, "op": "commit", "pid": 77, "addr": "0x1000000", "size": 3 << 20,
               "stack": ["libc.so.6!malloc"]},
              {"ts": t0 + 2 * S, "op": "decommit", "pid": 77, "addr": "0x1000000",
               "size": 1 << 20}]:
        f.write(json.dumps(e) + "\n")

dbs = {"windows": os.path.join(TMP, "windows.db"), "linux": os.path.join(TMP, "linux.db")}
replay(MTA, dbs["windows"])
replay(linux_trace, dbs["linux"])

# Today's `run` refuses a database of the other platform: serve is the way.
r = subprocess.run([BIN, "run", "--source", f"replay:{linux_trace}", "--db", dbs["windows"],
                    "--no-http", "--rebase-now"], capture_output=True, text=True, timeout=120)
t.check("run refuses the other platform's database, pointing to serve",
        r.returncode != 0 and "holds windows data" in r.stderr and "commitwatch serve" in r.stderr,
        r.stderr)


def serve(platform, db, use_config=False):
    """Serves db; use_config: the address comes from a --config file's
    `listen` instead of --listen."""
    before = sha(db)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    logpath = os.path.join(TMP, f"serve-{platform}.log")
    log = open(logpath, "w")
    cmd = [BIN, "serve", "--db", db]
    if use_config:
        conf = os.path.join(TMP, "serve.conf")
        with open(conf, "w") as f:
            f.write(f"listen = 127.0.0.1:{port}\n")
        cmd += ["--config", conf]
    else:
        cmd += ["--listen", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def req(path, method="GET", data=None, headers=None):
        rq = urllib.request.Request(base + path, method=method, data=data, headers=headers or {})
        try:
            with urllib.request.urlopen(rq, timeout=30) as resp:
                return resp.status, resp.headers.get("Content-Type", ""), resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type", ""), e.read()

    def get(path):
        st, ct, body = req(path)
        return st, json.loads(body) if ct.startswith("application/json") else body.decode()

    def health():
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited with {proc.returncode}:\n{open(logpath).read()}")
        try:
            return get("/api/health")[1]
        except OSError:
            return None

    try:
        h = wait_until(health, 60, f"serve {platform}: /api/health answers")
        p = f"serve {platform}: "
        t.eq(p + "health status ok", h.get("status"), "ok")
        t.eq(p + "health read_only", h.get("read_only"), True)
        t.eq(p + "health source none", h.get("source"), "none")
        t.eq(p + "health source_state null", h.get("source_state", "missing"), None)
        t.eq(p + "health platform is the database's", h.get("platform"), platform)
        t.check(p + "health data_end_ns", isinstance(h.get("data_end_ns"), int), f"{h}")
        frm, to = h["first_bucket_ns"], h["data_end_ns"]
        st, procs = get(f"/api/processes?from={frm}&to={to}")
        t.eq(p + "/api/processes 200", st, 200)
        want = analyze_json(db, frm, to)
        key = lambda ps: sorted((x["name"], x["impacting_bytes"], x["outstanding_end_bytes"],
                                 x["size_bytes"]) for x in ps)
        t.check(p + "/api/processes equals analyze --db",
                procs.get("processes") and key(procs["processes"]) == key(want["processes"]),
                f"{procs.get('processes')} vs {want['processes']}")
        st, series = get(f"/api/system/series?from={frm}&to={to}&step=1s")
        t.eq(p + "/api/system/series 200", st, 200)
        pid = procs["processes"][0]["id"]
        st, _, body = req(f"/api/processes/{pid}/stacks?" + urllib.parse.urlencode(
            {"from": frm, "to": to, "format": "folded"}))
        t.check(p + "an export (folded stacks) answers", st == 200 and body, f"{st} {body[:200]}")
        st, rules = get("/api/alert-rules")
        t.eq(p + "/api/alert-rules 200", st, 200)
        st, bt = get("/api/alert-rules/likely_leak/backtest?" + urllib.parse.urlencode(
            {"from": frm, "to": to, "interval": "10s"}))
        t.eq(p + "a backtest answers 200", st, 200)
        st, metrics = get("/metrics")
        t.eq(p + "/metrics 200", st, 200)
        t.check(p + "/metrics has the stored figures",
                "commitwatch_process_outstanding_bytes" in metrics, metrics[:500])
        t.check(p + "/metrics has no commitwatch_source_up (no source)",
                not re.search(r"^commitwatch_source_up", metrics, re.M), "")
        st, _, body = req("/api/silences", "POST", b'{"matchers":[]}',
                          {"Content-Type": "application/json"})
        t.check(p + "a state-changing request is refused", st in (401, 403, 405), f"{st} {body}")
    finally:
        stop(proc, timeout=20)
        log.close()
    t.eq(f"serve {platform}: SIGTERM stops it (exit 0)", proc.returncode, 0)
    t.eq(f"serve {platform}: the database's bytes are unchanged", sha(db), before)
    with open(logpath) as f:
        text = f.read()
    t.check(f"serve {platform}: the log says read-only and the platform",
            f"read-only ({platform} data)" in text, text)


serve("windows", dbs["windows"])
serve("linux", dbs["linux"], use_config=True)

r = subprocess.run([BIN, "serve"], capture_output=True, text=True, timeout=60)
t.check("serve without --db: usage error (exit 2)",
        r.returncode == 2 and "--db FILE is required" in r.stderr, f"{r.returncode} {r.stderr}")
missing = os.path.join(TMP, "missing.db")
r = subprocess.run([BIN, "serve", "--db", missing, "--listen", f"127.0.0.1:{free_port()}"],
                   capture_output=True, text=True, timeout=60)
t.check("serve of a missing file: exit 1 naming it", r.returncode == 1 and missing in r.stderr,
        f"{r.returncode} {r.stderr}")
t.check("serve of a missing file: nothing created", not os.path.exists(missing), "")
t.done()
