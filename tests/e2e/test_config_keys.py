#!/usr/bin/env python3
"""test_config_keys.py - every configuration key has a test that shows its
documented effect (issue 30, item 5; README "Configuration", docs/ALERTS.md
"Configuration keys").

1. The inventory (INVENTORY below): each key the parser accepts -> the
   test that shows its effect. The keys are read at test time from the
   binary (`commitwatch install --print-config` writes one line per key of
   the parser's table, service/app/config.c); a key the parser gains
   without a line here, or a line for a key it no longer has, fails the
   test. Each named test file must mention the key, and each key must be
   documented in README.md or docs/ALERTS.md.

2. The effects not shown elsewhere, with the real binary (CW_BIN), a
   configuration file and traces this test writes (alerttrace.py), every
   receiver on 127.0.0.1:
   - alertmanager_url, webhook_url, alert_exec each reached from the
     configuration file alone; external_url in the generatorURL and
     externalURL of what they get (and http://LISTEN without it);
   - alert_resend: the evaluation instants of the re-sends to Alertmanager
     (read back from each alert's endsAt = ts + 4 x max(interval, resend))
     are alert_resend apart, 2 min, and 1 min in the contrast run;
   - alert_repeat_interval: the webhook gets the firing alert once with
     the default (4h), every 3 min of evaluation time with 3m;
   - alert_rate_limit = 3: 10 alerts at once, 3 delivered per channel, 7
     recorded `dropped` / `rate limit`;
   - alert_retries = 2: a webhook answering 503 gets 2 tries per alert;
   - alert_exec_timeout = 1s: a hook sleeping 5 s is killed, recorded
     error `timeout`;
   - alert_log: `no` records no log attempt, `syslog` (and the default,
     auto) one per alert;
   - bad delivery settings (docs/ALERTS.md, "Delivery": "Bad settings stop
     the start with a message naming the key") stop the start;
   - fold_size: which short-lived instances are stored folded (2MiB, 8MiB,
     0 = never);
   - log_level = warning: the info lines are gone;
   - http_threads = 2: one client stalled in its request leaves the API
     answering at once, two hold both workers and the next request waits
     for http_request_timeout to free one;
   - symbol_path: Windows-only (the etw source's DbgHelp symbol path). On
     Linux this shows only that it is a known key (no "unknown key"
     warning) that a replay runs with, and that this build has no etw
     source: the effect (frames named from PDBs, the log line "DbgHelp:
     symbol path ...") needs the live ETW session, which neither Linux
     nor Wine provides.
"""

import datetime
import http.server
import json
import os
import re
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from alerttrace import MIN, S, MiB, T0, Trace  # noqa: E402
from cwservice import BIN, BUILD, SOURCE, Checks, Service  # noqa: E402
from cwtest import file_text, wait_until  # noqa: E402

HERE = "test_config_keys.py"
# key -> the test (tests/e2e/, or tests/unit/ with a path) that shows its
# effect, and how. Keep in step with service/app/config.c.
INVENTORY = {
    "db": ("test_cli.py", "config db: the database used and what it holds"),
    "source": ("test_cli.py", "config source: the trace ingested"),
    "listen": ("test_cli.py", "config listen: it serves there"),
    "token": ("test_cli.py", "config token: a POST with it passes, another is refused"),
    "http_threads": (HERE, "2: two slow clients hold both workers, one does not"),
    "http_request_timeout": ("test_http_hostile.py", "a slow request is closed after it"),
    "http_idle_timeout": ("test_http_hostile.py", "an idle keep-alive connection is closed after 1 s"),
    "http_client_connections": ("test_http_hostile.py", "the 9th connection of one client gets 429"),
    "access_log": ("test_api.py", "requests are written to the access log"),
    "web_root": ("test_cli.py", "config web_root: the dashboard comes from it"),
    "stacktags": ("test_cli.py", "config stacktags: the rule file in force, the data tagged by it"),
    "images": ("test_etl.py", "config images = DIR: the frames --images gives"),
    "symbol_path": (HERE, "Windows-only: known key on Linux, no etw source (see the docstring)"),
    "log_level": (HERE, "log_level = warning: no info lines"),
    "retention_raw": ("test_cli.py", "raw buckets older than it are rolled up"),
    "retention_minute": ("test_cli.py", "minute buckets older than it are rolled up"),
    "retention_hour": ("test_cli.py", "hour buckets older than it are deleted"),
    "size_cap": ("test_cli.py", "the oldest data goes past the cap"),
    "fold_lifetime": ("test_fold.py", "fold_lifetime = 0 stores every instance"),
    "fold_size": (HERE, "which short-lived instances are folded (2MiB, 8MiB, 0)"),
    "perf_ring_size": ("test_config_perf_root.py", "/api/health memory.perf_rings follows it"),
    "perf_queue_size": ("test_perf_root.py", "--queue 64KiB: the merge past the cap"),
    "perf_unwind_processes": (None, "not shown: kept unwinder states are internal (no figure "
                              "or log line tells their number)"),
    "heap_trace_max_running": ("test_heap_api_root.py", "1: a second process's trace is refused "
                               "(429) and recorded"),
    "heap_trace_max_duration": ("test_heap_api_root.py", "1m: a trace of 2m is refused (400)"),
    "alert_rules": ("test_alerts_reload.py", "the file's rules in force and their series appear"),
    "alert_default_rules": ("test_alerts_api.py", "no: only the file's rules are in force"),
    "alert_interval": ("test_alerts_engine.py", "transitions at multiples of 10 s"),
    "alert_step": ("test_alerts_perf_root.py", "1 s steps: a live leak fires within seconds"),
    "alert_resend": (HERE, "re-sends to Alertmanager alert_resend apart; endsAt"),
    "alert_repeat_interval": (HERE, "webhook: once with 4h, every 3 min with 3m"),
    "alert_rate_limit": (HERE, "3 of 10 delivered per channel, 7 dropped"),
    "alert_retries": (HERE, "2 tries per alert against a 503"),
    "alertmanager_url": (HERE, "a local receiver gets POST /api/v2/alerts"),
    "webhook_url": (HERE, "a local receiver gets the webhook body"),
    "alert_exec": (HERE, "the hook gets the alert JSON on stdin"),
    "alert_exec_timeout": (HERE, "1s: the sleeping hook is killed, error timeout"),
    "alert_log": (HERE, "no: no log attempts; syslog and auto: one per alert"),
    "external_url": (HERE, "generatorURL and externalURL; http://LISTEN without it"),
    "profile_push_url": ("test_profile_push.py", "a local receiver gets each period's profiles"),
    "profile_push_period": ("test_profile_push.py", "10s: windows of 10 s on the trace's clock"),
    "profile_push_labels": ("test_profile_push.py", "env and team in the pushed name's labels"),
    "profile_push_buffer": ("test_profile_push.py", "4KiB: the oldest dropped while the store is "
                            "down, counted"),
}

t = Checks()
TMP = os.path.join(BUILD, "e2e-config-keys")
shutil.rmtree(TMP, ignore_errors=True)
os.makedirs(TMP)


def path(name):
    return os.path.join(TMP, name)


def write(name, text, mode=0o600):
    p = path(name)
    with open(p, "w") as f:
        f.write(text)
    os.chmod(p, mode)
    return p


# ---- 1. the inventory -------------------------------------------------------------

out = subprocess.run([BIN, "install", "--print-config"], capture_output=True, text=True,
                     timeout=60)
t.eq("install --print-config: exit 0", out.returncode, 0)
keys = re.findall(r"^(?:# )?([a-z_]+) = ", out.stdout, re.M)
t.check("the parser's keys are read (more than 30)", len(keys) > 30, f"{keys}")
t.eq("every key the parser accepts is in the inventory", sorted(set(keys) - set(INVENTORY)), [])
t.eq("every key of the inventory is one the parser accepts", sorted(set(INVENTORY) - set(keys)),
     [])
docs = file_text(os.path.join(SOURCE, "README.md")) + file_text(
    os.path.join(SOURCE, "docs", "ALERTS.md"))
t.eq("every key is documented (README.md or docs/ALERTS.md)",
     [k for k in keys if f"`{k}`" not in docs and f"`{k} =" not in docs], [])
for key, (test, how) in sorted(INVENTORY.items()):
    if test is None:
        continue
    p = os.path.join(SOURCE, "tests", "e2e", test) if "/" not in test else os.path.join(SOURCE, test)
    t.check(f"inventory: {key} -> {test} ({how}): the test exists and names the key",
            key in file_text(p), p)

# ---- receivers ---------------------------------------------------------------------


class Receiver:
    """An HTTP server on loopback recording (path, body) of each POST; the
    first `fail` requests (all with fail=-1) get 503."""

    def __init__(self, fail=0):
        self.posts = []
        self.fail = fail
        self.lock = threading.Lock()
        rec = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with rec.lock:
                    failing = rec.fail != 0
                    if rec.fail > 0:
                        rec.fail -= 1
                    rec.posts.append((self.path, json.loads(body), failing))
                self.send_response(503 if failing else 200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.base = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def got(self):
        with self.lock:
            return list(self.posts)

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def rows(db):
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    r = [dict(x) for x in con.execute("SELECT * FROM notifications ORDER BY id")]
    con.close()
    return r


def by_channel(db, channel):
    return [r for r in rows(db) if r["channel"] == channel]


def ns_of(rfc3339):
    d = datetime.datetime.strptime(rfc3339.replace("Z", "+00:00"), "%Y-%m-%dT%H:%M:%S.%f%z")
    return int(round(d.timestamp() * 1000)) * 1_000_000


RULES = write("grow.rules", "[rule grow]\nprocess = *.exe\nmetric = outstanding\nwarn = 1MiB\n")
BASE = f"alert_rules = {RULES}\nalert_default_rules = no\nalert_interval = 10s\n"


def grow_trace(name, nproc=1, minutes=10):
    """nproc processes that hold 2 MiB from 10 s on (an outstanding rule
    fires for each at one instant), and data every 10 s for `minutes`."""
    tr = Trace()
    for i in range(nproc):
        tr.start(0, 101 + i, f"grow{i}.exe")
        tr.commit(10 * S, 101 + i, 2 * MiB)
    tr.start(0, 99, "ticker")
    for k in range(minutes * 6 + 1):
        a = tr.commit(k * 10 * S + 5 * S, 99, 4096)
        tr.release(k * 10 * S + 6 * S, 99, a, 4096)
    return tr.write(path(f"{name}.jsonl"))


def hook(name, sleep=0):
    """An exec hook appending its stdin (one JSON per line) to NAME.out."""
    outp = path(f"{name}.out")
    p = write(f"{name}.sh", f"#!/bin/sh\n{{ tr -d '\\n'; echo; }} >> {outp}\n"
              + (f"sleep {sleep}\n" if sleep else ""), 0o700)
    return p, outp


def am_instants(posts, resend_ns):
    """The evaluation instant of each Alertmanager POST of the firing
    alert: endsAt - 4 x max(10 s, alert_resend)."""
    lease = 4 * max(10 * S, resend_ns)
    out = []
    for p, body, _ in posts:
        for a in body:
            if a["labels"].get("alertname") == "grow":
                out.append(ns_of(a["endsAt"]) - lease)
    return out


# ---- 2a. every channel from the configuration file alone ---------------------------

am, wh = Receiver(), Receiver()
hook_a, hook_a_out = hook("hook-a")
trace_a = grow_trace("a")
conf_a = (BASE + f"alertmanager_url = {am.base}\nwebhook_url = {wh.base}/hook\n"
          f"alert_exec = {hook_a}\nexternal_url = http://monitor.example:8470/\n"
          "alert_resend = 2m\nalert_log = no\n")
with Service(trace_a, name="cfgkeys-a", config=conf_a) as svc:
    wait_until(lambda: len(wh.got()) >= 1 and file_text(hook_a_out) and len(am.got()) >= 5, 60,
               lambda: f"every receiver got the alert (am {len(am.got())}, webhook "
               f"{len(wh.got())}, exec {bool(file_text(hook_a_out))})")
    wait_until(lambda: not [r for r in rows(svc.db) if r["result"] not in ("ok",)] and
               len(by_channel(svc.db, "webhook")) >= 1, 30, "the attempts are recorded")
    db_a = svc.db
ams = am.got()
t.check("alertmanager_url: POSTs to URL/api/v2/alerts", ams and all(p == "/api/v2/alerts" for p, _, _ in ams),
        f"{[p for p, _, _ in ams]}")
first = ams[0][1][0] if ams and ams[0][1] else {}
t.eq("alertmanager_url: the alert's labels", {k: first.get("labels", {}).get(k) for k in
                                              ("alertname", "process", "severity")},
     {"alertname": "grow", "process": "grow0.exe", "severity": "warning"})
t.check("external_url: Alertmanager's generatorURL (trailing / dropped)",
        first.get("generatorURL", "").startswith("http://monitor.example:8470/#/alerts/"),
        first.get("generatorURL"))
inst = am_instants(ams, 2 * MIN)
t.check("alert_resend = 2m: endsAt of the first POST is 8 min (4 x 2m) after it started",
        inst and first.get("startsAt") and inst[0] == ns_of(first["startsAt"]),
        f"instant {inst[:1]}, startsAt {first.get('startsAt')}, endsAt {first.get('endsAt')}")
t.eq("alert_resend = 2m: re-sent to Alertmanager every 2 min of evaluation time",
     sorted({b - a for a, b in zip(inst, inst[1:])}), [2 * MIN])
t.check("alert_resend = 2m: 5 sends over the 10 min of data", len(inst) == 5, f"{len(inst)}")
whs = wh.got()
t.eq("webhook_url: one POST (alert_repeat_interval 4h: no re-send)", [p for p, _, _ in whs], ["/hook"])
wb = whs[0][1] if whs else {}
t.eq("webhook_url: Alertmanager's webhook body", (wb.get("version"), wb.get("status"),
                                                 wb.get("commonLabels", {}).get("alertname")),
     ("4", "firing", "grow"))
t.eq("external_url: the webhook's externalURL", wb.get("externalURL"), "http://monitor.example:8470")
t.check("external_url: the webhook's generatorURL",
        wb.get("alerts", [{}])[0].get("generatorURL", "").startswith(
            "http://monitor.example:8470/#/alerts/"), f"{wb.get('alerts')}")
lines = [json.loads(x) for x in file_text(hook_a_out).splitlines() if x.strip()]
t.eq("alert_exec: the hook ran once with the alert JSON on stdin",
     [(x.get("status"), x.get("labels", {}).get("alertname")) for x in lines], [("firing", "grow")])
t.check("external_url: the exec JSON's generatorURL",
        lines and lines[0].get("generatorURL", "").startswith("http://monitor.example:8470/#/alerts/"),
        f"{lines}")
chans = sorted({r["channel"] for r in rows(db_a)})
t.eq("alert_log = no: no log attempts (the other channels recorded ok)", chans,
     ["alertmanager", "exec", "webhook"])
am.close()
wh.close()

# ---- 2b. the contrast: alert_resend 1m, alert_repeat_interval 3m, no external_url,
# alert_log the default (auto: journald, else syslog) --------------------------------

am, wh = Receiver(), Receiver()
conf_b = (BASE + f"alertmanager_url = {am.base}\nwebhook_url = {wh.base}/hook\n"
          "alert_resend = 1m\nalert_repeat_interval = 3m\n")
with Service(trace_a, name="cfgkeys-b", config=conf_b) as svc:
    wait_until(lambda: len(am.got()) >= 10 and len(wh.got()) >= 4, 60,
               lambda: f"the re-sends (am {len(am.got())}, webhook {len(wh.got())})")
    wait_until(lambda: len(by_channel(svc.db, "log")) >= 4, 30, "the log attempts are recorded")
    time.sleep(0.5)  # nothing more may come
    port_b, db_b = svc.port, svc.db
inst = am_instants(am.got(), MIN)
t.eq("alert_resend = 1m: re-sent every minute", sorted({b - a for a, b in zip(inst, inst[1:])}),
     [MIN])
expect, last = [], None
for i in inst:  # the repeat interval: a re-send only 3 min after the last delivery
    if last is None or i - last >= 3 * MIN:
        expect.append(i)
        last = i
whs = wh.got()
t.eq("alert_repeat_interval = 3m: the webhook gets the alert every 3 min of evaluation time",
     len(whs), len(expect))
t.check("alert_repeat_interval = 3m: more than once (4h: once)", len(expect) >= 3, f"{expect}")
gen = whs[0][1]["alerts"][0]["generatorURL"] if whs else ""
t.check("no external_url: generatorURL is http://LISTEN/#/alerts/ID",
        gen.startswith(f"http://127.0.0.1:{port_b}/#/alerts/"), gen)
t.eq("no external_url: externalURL is http://LISTEN", whs[0][1].get("externalURL") if whs else None,
     f"http://127.0.0.1:{port_b}")
logs = by_channel(db_b, "log")
t.eq("alert_log default (auto): one log attempt per webhook delivery (same repeat interval)",
     len(logs), len(expect))
am.close()
wh.close()

# ---- 2c. limits: alert_rate_limit, alert_retries, alert_exec_timeout, alert_log -----

wh = Receiver(fail=-1)  # 503 for ever
hook_c, hook_c_out = hook("hook-c", sleep=5)  # past 1s, within the default 10s
trace_c = grow_trace("c", nproc=10, minutes=1)
conf_c = (BASE + f"webhook_url = {wh.base}/hook\nalert_rate_limit = 3\nalert_retries = 2\n"
          f"alert_exec = {hook_c}\nalert_exec_timeout = 1s\nalert_log = syslog\n")
t0 = time.monotonic()
with Service(trace_c, name="cfgkeys-c", config=conf_c) as svc:
    wait_until(lambda: all(len(by_channel(svc.db, c)) >= n for c, n in
                           (("webhook", 13), ("exec", 10), ("log", 10))), 90,
               lambda: f"every attempt recorded ({[(r['channel'], r['result'], r['detail']) for r in rows(svc.db)]})")
    time.sleep(0.5)
    db_c = svc.db
took = time.monotonic() - t0


def summary(ch):
    return sorted((r["result"], r["attempt"], r["detail"] if r["result"] != "error" or ch != "log"
                   else "-") for r in by_channel(db_c, ch))


wr = summary("webhook")
t.eq("alert_rate_limit = 3: 7 of 10 webhook alerts dropped, rate limit",
     [x for x in wr if x[0] == "dropped"], [("dropped", 0, "rate limit")] * 7)
t.eq("alert_retries = 2: each of the 3 others tried twice (503 each time)",
     [x[:2] for x in wr if x[0] != "dropped"], [("error", 1)] * 3 + [("error", 2)] * 3)
t.eq("alert_retries = 2: the receiver got 6 requests", len(wh.got()), 6)
er = summary("exec")
t.eq("alert_exec_timeout = 1s: the 3 runs killed (timeout), 7 rate-limited",
     er, [("dropped", 0, "rate limit")] * 7 + [("error", 1, "timeout")] * 3)
t.eq("alert_exec: the hook got the 3 alerts' JSON before it was killed",
     len([x for x in file_text(hook_c_out).splitlines() if x.startswith("{")]), 3)
lr = summary("log")
t.eq("alert_log = syslog: 3 writes (rate limit 3), 7 dropped",
     sorted((x[0], x[2]) for x in lr),
     sorted([("dropped", "rate limit")] * 7 + [(r, "-" if r == "error" else None)
                                               for r in [x[0] for x in lr if x[0] != "dropped"]]))
t.eq("alert_log = syslog: 3 attempts", len([x for x in lr if x[0] != "dropped"]), 3)
t.check("the limits run took seconds (1 s backoff, 1 s timeouts)", took < 60, f"{took:.1f} s")
wh.close()

# ---- 2d. bad delivery settings stop the start --------------------------------------

tiny = grow_trace("tiny", minutes=1)
for key, value, says in (("webhook_url", "htp://x", "webhook_url"),
                         ("alertmanager_url", "ftp://127.0.0.1:9093", "alertmanager_url"),
                         ("alert_exec", path("no-such-hook"), "alert_exec"),
                         ("alert_log", "carrier-pigeon", "alert_log")):
    conf = write(f"bad-{key}.conf", BASE + f"{key} = {value}\n")
    r = subprocess.run([BIN, "run", "--source", f"replay:{tiny}", "--db", path(f"bad-{key}.db"),
                        "--no-http", "--exit-at-end", "--config", conf],
                       capture_output=True, text=True, timeout=120)
    t.check(f"bad {key}: the start stops (exit 1) naming the key",
            r.returncode == 1 and says in r.stderr and "ingesting from" not in r.stderr,
            f"exit {r.returncode}: {r.stderr[-600:]}")

# ---- 2e. fold_size -----------------------------------------------------------------


def fold_trace():
    tr = Trace()
    tr.start(0, 10, "server")
    tr.commit(S, 10, MiB)
    for i in range(3):  # short-lived: 1 MiB and 3 MiB, half a second each
        for name, size, pid in (("tiny", MiB, 1000 + i), ("mid", 3 * MiB, 2000 + i)):
            tr.start(2 * S + i * S, pid, name)
            tr.commit(2 * S + i * S + S // 10, pid, size)
            tr.exit(2 * S + i * S + S // 2, pid)
    tr.commit(10 * S, 10, MiB)
    return tr.write(path("fold.jsonl"))


ft = fold_trace()


def lines_by_name(extra):
    tag = re.sub(r"\W+", "-", extra.strip())
    db = path(f"fold-{tag}.db")
    conf = write(f"fold-{tag}.conf", "alert_default_rules = no\n" + extra)
    r = subprocess.run([BIN, "run", "--source", f"replay:{ft}", "--db", db, "--no-http",
                        "--exit-at-end", "--config", conf], capture_output=True, text=True,
                       timeout=120)
    t.eq(f"fold ({extra.strip() or 'default'}): run exit 0", r.returncode, 0)
    a = subprocess.run([BIN, "analyze", "--db", db, "--json"], capture_output=True, text=True,
                       timeout=120)
    doc = json.loads(a.stdout) if a.returncode == 0 else {"processes": []}
    out = {}
    for p in doc["processes"]:
        out.setdefault(p["name"], []).append(p.get("folded", 0))
    return {n: sorted(v) for n, v in out.items() if n in ("tiny", "mid")}


t.eq("fold_size = 2MiB: tiny (1 MiB) folded into one line, mid (3 MiB) stored apiece",
     lines_by_name("fold_size = 2MiB\n"), {"tiny": [3], "mid": [0, 0, 0]})
t.eq("fold_size = 8MiB: both folded", lines_by_name("fold_size = 8MiB\n"),
     {"tiny": [3], "mid": [3]})
t.eq("fold_size = 0: nothing folded", lines_by_name("fold_size = 0\n"),
     {"tiny": [0, 0, 0], "mid": [0, 0, 0]})

# ---- 2f. log_level, symbol_path ----------------------------------------------------


def replay_log(name, text):
    conf = write(f"{name}.conf", text)
    r = subprocess.run([BIN, "run", "--source", f"replay:{tiny}", "--db", path(f"{name}.db"),
                        "--no-http", "--exit-at-end", "--config", conf], capture_output=True,
                       text=True, timeout=120)
    t.eq(f"{name}: run exit 0", r.returncode, 0)
    # The heap line is logged before the configuration is read (main.c).
    return [x for x in r.stderr.splitlines() if "heap: glibc" not in x]


info = replay_log("level-info", "alert_default_rules = no\n")
t.check("log_level default (info): info lines", any(": info: ingesting from" in x for x in info),
        f"{info}")
warn = replay_log("level-warning", "alert_default_rules = no\nlog_level = warning\n")
t.eq("log_level = warning: no info lines", [x for x in warn if ": info:" in x], [])
sym = replay_log("symbol-path", "alert_default_rules = no\nsymbol_path = srv*C:\\Symbols*"
                 "https://msdl.microsoft.com/download/symbols\n")
t.eq("symbol_path: a known key (no unknown-key warning)", [x for x in sym if "unknown key" in x],
     [])
ver = subprocess.run([BIN, "version"], capture_output=True, text=True, timeout=60).stdout
t.check("symbol_path: its etw source is not in this build (its effect is shown on Windows only)",
        "sources:" in ver and "etw" not in ver.split("sources:")[1], ver)

# ---- 2g. http_threads ---------------------------------------------------------------

import http.client  # noqa: E402


def timed_health(port):
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/api/health")
    status = c.getresponse().status
    c.close()
    return status, time.monotonic() - t0


def stalled(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")  # never finished
    return s


with Service(tiny, name="cfgkeys-http", config="alert_default_rules = no\nhttp_threads = 2\n"
             "http_request_timeout = 3s\nhttp_client_connections = 0\n") as svc:
    one = stalled(svc.port)
    time.sleep(0.3)
    st1, took1 = timed_health(svc.port)
    two = stalled(svc.port)
    time.sleep(0.3)
    st2, took2 = timed_health(svc.port)
    one.close()
    two.close()
t.check("http_threads = 2: one stalled client, the API answers at once",
        st1 == 200 and took1 < 1.0, f"{st1} after {took1:.2f} s")
t.check("http_threads = 2: two stalled clients hold both workers: answered only once "
        "http_request_timeout (3 s) frees one", st2 == 200 and took2 >= 1.5,
        f"{st2} after {took2:.2f} s")

t.done()
