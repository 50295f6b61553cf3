#!/usr/bin/env python3
"""test_profile_push.py - the profile push to a profiling store (issue 35
item 4; docs/FLEET.md, "Profiles to a profiling store").

The real binary replays the MemoryTestApp trace with profile_push_url set
to a receiver on loopback (a free port) that answers as Pyroscope's
/ingest does, profile_push_period = 10s and profile_push_labels:

1. A receiver that takes everything: one POST per process with activity
   per period, [k x 10 s, (k+1) x 10 s) on the trace's clock, the last one
   ending where the data ends; each a multipart/form-data body with the
   pprof profile (field profile) and its sample_type_config (JSON); the
   name is commitwatch.commit{service_name,host,process,env}. Each profile
   is read by `go tool pprof -raw` (Debian's golang-go; skipped visibly
   without it, a failure in CI) and its totals per sample type are the
   window's /api/processes figures of that process exactly; the processes
   pushed are exactly the active ones. /metrics counts the profiles and
   bytes sent, no retry, no drop; /api/health's profile_push says so.
2. A receiver that answers 503 to the first 2 tries: the same profiles
   arrive (nothing lost within the bound), 2 retries counted.
3. A receiver down (nothing listens on its port) while every profile is
   built, with profile_push_buffer = 4KiB: /api/health says "retrying"
   with at most 4 KiB queued; once it listens the newest profiles arrive
   and the older ones are counted in
   commitwatch_profile_push_dropped_total{reason="buffer_full"}: received
   + dropped = the profiles of run 1.
4. A bad profile_push_labels or profile_push_period line stops the start
   with the file and line; a bad profile_push_url and a too small
   profile_push_buffer too.

Environment (tests/CMakeLists.txt): CW_BIN, CW_FIXTURES, CW_BUILD.
"""
import email.parser
import email.policy
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, BUILD, MTA, Checks, Service, free_port, require_fixture  # noqa: E402
from cwtest import require, wait_until  # noqa: E402
from exportcheck import GO, PPROF_TYPES, pprof_raw  # noqa: E402

require_fixture()
require(GO, "go (apt-get install golang-go): `go tool pprof` reads the pushed profiles")

S = 1_000_000_000
PERIOD = 10
t = Checks()
TMP = os.path.join(BUILD, "e2e-profile-push")
os.makedirs(TMP, exist_ok=True)


class Receiver:
    """Pyroscope's /ingest on loopback: records (query, content type, body)
    of each POST; the first `fail` get 503. listen=False: nothing listens
    on the port until start()."""

    def __init__(self, fail=0, port=None):
        self.posts = []
        self.fail = fail
        self.tries = 0
        self.lock = threading.Lock()
        self.port = port or free_port()
        self.server = None

    def start(self):
        rec = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with rec.lock:
                    rec.tries += 1
                    failing = rec.fail > 0
                    if failing:
                        rec.fail -= 1
                    else:
                        rec.posts.append((self.path, self.headers.get("Content-Type", ""), body))
                self.send_response(503 if failing else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    def got(self):
        with self.lock:
            return list(self.posts)


def config(port, extra=""):
    return (f"profile_push_url = http://127.0.0.1:{port}\n"
            f"profile_push_period = {PERIOD}s\n"
            "profile_push_labels = env=test,team=memory\n" + extra)


def metrics(svc):
    _, text = svc.get("/metrics")
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(commitwatch_profile_push_\w+)(\{[^}]*\})? (\d+)$", line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = int(m.group(3))
    return out


def health_push(svc):
    _, h = svc.get("/api/health")
    return h.get("profile_push"), h


def settled(svc):
    """Everything built and nothing waiting: the push's health block."""
    p, h = health_push(svc)
    return (p and h.get("ingest_done") and p["queued"] == 0 and
            p["built_until_ns"] is not None and p["built_until_ns"] >= h["data_end_ns"] and p)


def parse(post):
    """(labels of the name, from s, until s, format, profile bytes, sample
    type config) of one POST."""
    path, ctype, body = post
    u = urllib.parse.urlsplit(path)
    q = urllib.parse.parse_qs(u.query)
    name = q["name"][0]
    m = re.fullmatch(r"commitwatch\.commit\{(.*)\}", name)
    labels = dict(kv.split("=", 1) for kv in m.group(1).split(",")) if m else {"bad name": name}
    msg = email.parser.BytesParser(policy=email.policy.default).parsebytes(
        b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
    parts = {p.get_param("name", header="content-disposition"): p.get_payload(decode=True)
             for p in msg.iter_parts()} if msg.is_multipart() else {}
    return (u.path, labels, int(q["from"][0]), int(q["until"][0]), q["format"][0],
            parts.get("profile"), parts.get("sample_type_config"))


def api_window(svc, frm, until):
    _, r = svc.get(f"/api/processes?from={frm * S}&to={until * S}&limit=100000")
    return r["processes"]


def active(p):
    return bool(p["events"] or p["size_bytes"] or p["commit_count"] or
                any(p["types"][k]["bytes"] for k in ("AIFI", "AIFO", "AOFI")))


def check_pushes(name, svc, posts, full=True):
    """Each POST's form and profile against the API's window; returns the
    set of (from, until, process) pushed."""
    seen = []
    windows = {}
    for i, post in enumerate(posts):
        path, labels, frm, until, fmt, prof, stc = parse(post)
        what = f"{name}: push {i} ({labels.get('process')}, [{frm}, {until}))"
        t.eq(f"{what}: POST /ingest", path, "/ingest")
        t.eq(f"{what}: format=pprof", fmt, "pprof")
        t.check(f"{what}: multipart/form-data", post[1].startswith("multipart/form-data; boundary="),
                post[1])
        t.eq(f"{what}: name's labels", sorted(labels), ["env", "host", "process", "service_name",
                                                         "team"])
        t.eq(f"{what}: service_name is the process", labels.get("service_name"),
             labels.get("process"))
        t.eq(f"{what}: extra labels", (labels.get("env"), labels.get("team")), ("test", "memory"))
        t.eq(f"{what}: host", labels.get("host"), socket.gethostname())
        t.check(f"{what}: the window starts on a period", frm % PERIOD == 0, str(frm))
        t.check(f"{what}: a period or the last part of one", 0 < until - frm <= PERIOD,
                f"{frm} {until}")
        try:
            cfg = json.loads(stc)
        except (TypeError, ValueError):
            cfg = {}
        t.eq(f"{what}: sample_type_config names the sample types", sorted(cfg),
             sorted(x.split("/")[0] for x in PPROF_TYPES))
        if prof is None:
            t.check(f"{what}: has a profile part", False)
            continue
        path = os.path.join(TMP, "p.pb.gz")
        with open(path, "wb") as f:
            f.write(prof)
        types, tot, _ = pprof_raw(path)
        t.eq(f"{what}: pprof sample types", types, PPROF_TYPES)
        if (frm, until) not in windows:
            windows[(frm, until)] = api_window(svc, frm, until)
        procs = [p for p in windows[(frm, until)] if p["name"] == labels.get("process")]
        want = [sum(p[k] for p in procs) for k in ("impacting_bytes", "transient_bytes",
                                                    "commit_count", "size_bytes")]
        seen.append((frm, until, labels.get("process"), tot))
        if len(procs) == 1:  # one instance of that name in the window: its figures
            t.eq(f"{what}: totals = /api/processes", tot, want)
    # Several instances of one name in a window: their pushes add up to theirs.
    if full:
        pushed = {(f, u, n) for f, u, n, _ in seen}
        t.eq(f"{name}: one push per process and window", len(pushed), len(seen))
        want_set = {(f, u, p["name"]) for (f, u), ps in windows.items() for p in ps if active(p)}
        t.eq(f"{name}: the active processes of each window, no other", pushed, want_set)
        for (f, u), ps in windows.items():
            for n in {p["name"] for p in ps}:
                got = [s[3] for s in seen if s[:3] == (f, u, n)]
                if got:
                    tot = [sum(x[i] for x in got) for i in range(4)]
                    want = [sum(p[k] for p in ps if p["name"] == n)
                            for k in ("impacting_bytes", "transient_bytes", "commit_count",
                                      "size_bytes")]
                    t.eq(f"{name}: [{f}, {u}) {n}: totals = /api/processes", tot, want)
    return seen


# ---- 1. every push taken -------------------------------------------------------------
rec = Receiver().start()
with Service(MTA, name="push-ok", config=config(rec.port)) as svc:
    p = wait_until(lambda: settled(svc), 60, "every profile is built and sent")
    posts = rec.got()
    _, h = health_push(svc)
    start_s, end_ns = h["first_bucket_ns"] // S, h["data_end_ns"]
    t.check("1: profiles arrived", len(posts) >= 5, str(len(posts)))
    seen = check_pushes("1", svc, posts)
    wins = sorted({(f, u) for f, u, _, _ in seen})
    t.eq("1: the first window holds the first bucket", wins[0][0], start_s // PERIOD * PERIOD)
    t.eq("1: the last window ends at the data's end", wins[-1][1] * S, end_ns)
    t.check("1: windows are consecutive", all(a[1] == b[0] for a, b in zip(wins, wins[1:])),
            str(wins))
    m = metrics(svc)
    sent_bytes = sum(len(b) for _, _, b in posts)
    t.eq("1: /metrics sent_total", m.get("commitwatch_profile_push_sent_total"), len(posts))
    t.eq("1: /metrics sent_bytes_total", m.get("commitwatch_profile_push_sent_bytes_total"),
         sent_bytes)
    t.eq("1: /metrics retries_total", m.get("commitwatch_profile_push_retries_total"), 0)
    t.eq("1: /metrics dropped_total", (m.get('commitwatch_profile_push_dropped_total{reason="buffer_full"}'),
                                       m.get('commitwatch_profile_push_dropped_total{reason="rejected"}')),
         (0, 0))
    t.eq("1: health profile_push", (p["state"], p["sent"], p["sent_bytes"], p["retries"],
                                    p["last_status"]), ("ok", len(posts), sent_bytes, 0, 200))
    print(f"run 1: {len(posts)} profiles, {sent_bytes} bytes for "
          f"{(end_ns // S - start_s)} s of trace", flush=True)
rec.stop()
base = {(f, u, n) for f, u, n, _ in seen}

# ---- 2. a store answering 503 for a while ------------------------------------------------
rec = Receiver(fail=2).start()
with Service(MTA, name="push-503", config=config(rec.port)) as svc:
    wait_until(lambda: settled(svc), 60, "every profile is sent after the 503s")
    posts = rec.got()
    seen2 = check_pushes("2", svc, posts, full=False)
    t.eq("2: the same profiles arrive (none lost within the bound)",
         {(f, u, n) for f, u, n, _ in seen2}, base)
    t.eq("2: each once", len(seen2), len(base))
    t.eq("2: the receiver saw 2 tries more", rec.tries, len(base) + 2)
    m = metrics(svc)
    t.eq("2: /metrics retries_total", m.get("commitwatch_profile_push_retries_total"), 2)
    t.eq("2: /metrics dropped_total buffer_full",
         m.get('commitwatch_profile_push_dropped_total{reason="buffer_full"}'), 0)
rec.stop()

# ---- 3. a store down past the bound -----------------------------------------------------
rec = Receiver(port=free_port())  # not listening yet
with Service(MTA, name="push-down", config=config(rec.port, "profile_push_buffer = 4KiB\n")) as svc:
    def down_full():
        p, h = health_push(svc)
        return (p and p["built_until_ns"] is not None and p["built_until_ns"] >= h["data_end_ns"]
                and p["retries"] >= 1 and p)
    p = wait_until(down_full, 60, "every profile is built while the store is down")
    t.eq("3: health says retrying while it is down", p["state"], "retrying")
    t.eq("3: the last try had no response", p["last_status"], -1)
    t.check("3: at most 4 KiB queued", 0 < p["queued_bytes"] <= 4096, str(p))
    t.check("3: older profiles dropped", p["dropped_buffer_full"] > 0, str(p))
    rec.start()
    wait_until(lambda: settled(svc), 120, "the queued profiles are sent once it listens")
    posts = rec.got()
    seen3 = check_pushes("3", svc, posts, full=False)
    m = metrics(svc)
    dropped = m.get('commitwatch_profile_push_dropped_total{reason="buffer_full"}')
    t.eq("3: received + dropped (/metrics) = every profile", len(posts) + (dropped or 0), len(base))
    t.check("3: what arrived fits the bound",
            sum(len(b) for _, _, b in posts) <= 4096, str([len(b) for _, _, b in posts]))
    t.eq("3: the newest arrived (the oldest were dropped)",
         sorted(f for f, _, _, _ in seen3), sorted(f for f, _, _ in base)[len(base) - len(posts):])
    t.check("3: retries counted", m.get("commitwatch_profile_push_retries_total", 0) >= 1, str(m))
rec.stop()

# ---- 4. bad values name the file and line -------------------------------------------------
for i, (line, why) in enumerate([
        ("profile_push_labels = host=me", "commitwatch sets service_name, host and process"),
        ("profile_push_labels = env=a b", "without blanks"),
        ("profile_push_period = 1500ms", "a whole number of seconds"),
        ("profile_push_url = 127.0.0.1:4040", "not an http:// or https:// URL"),
        ("profile_push_buffer = 1KiB", "at least 4KiB")]):
    path = os.path.join(TMP, f"bad{i}.conf")
    with open(path, "w") as f:
        f.write("# a comment\n" + line + "\n")
    os.chmod(path, 0o600)
    r = subprocess.run([BIN, "run", "--source", f"replay:{MTA}", "--db", os.path.join(TMP, "bad.db"),
                        "--listen", f"127.0.0.1:{free_port()}", "--config", path, "--exit-at-end"],
                       capture_output=True, text=True, timeout=60)
    t.check(f"4: `{line}` stops the start", r.returncode != 0, str(r.returncode))
    t.check(f"4: `{line}`: the message names the file and line 2 and why",
            f"{path}:2:" in r.stderr and why in r.stderr, r.stderr[-600:])

t.done()
