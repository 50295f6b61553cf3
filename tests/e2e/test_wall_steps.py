#!/usr/bin/env python3
"""test_wall_steps.py - wall-clock steps while the service runs reorder and
drop nothing (docs/RELIABILITY.md, "Time").

`run --source replay:TRACE --rebase-now --speed 1` (paced like a live
source, ticking) runs under libfaketime, which fakes only the wall clock
(FAKETIME_DONT_FAKE_MONOTONIC=1) from an offset file the test rewrites
(FAKETIME_NO_CACHE=1): once the service starts ingesting, the wall clock
steps forward 1 h, and 2 s later back 2 h. The trace spans 6 s. Checks:
- the replay takes its 6 s (paced by the monotonic clock: a step back does
  not stall it, a step forward does not rush it);
- the log notes each step, with its direction and size;
- every event is stored, in 6 s of buckets (no 1 h hole, nothing after
  the end), with the figures `analyze --source` gives for the same trace;
- after each step, /api/health's now_ns shows the stepped wall clock while
  its uptime_s and /metrics' commitwatch_uptime_seconds stay the time
  since the service started (the monotonic clock's).

libfaketime (Debian package libfaketime, scripts/deps.sh --test) must be
installed: missing, the test fails in CI and is skipped elsewhere.
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, BUILD, Checks, free_port  # noqa: E402
from cwtest import require, wait_until  # noqa: E402

LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
require(os.path.exists(LIB), "libfaketime (apt-get install libfaketime) for " + LIB)
S = 1_000_000_000
t = Checks()
DIR = os.path.join(BUILD, "e2e-wall-steps")
os.makedirs(DIR, exist_ok=True)
TRACE = os.path.join(DIR, "steps.jsonl")
DB = os.path.join(DIR, "cw.db")
OFFSET = os.path.join(DIR, "faketime")
for f in (DB, DB + "-wal", DB + "-shm"):
    if os.path.exists(f):
        os.remove(f)

# 25 commits of 4 KiB every 250 ms (0 .. 6 s), each third one released.
T0 = 1_000 * S
with open(TRACE, "w") as f:
    f.write('{"format":"commitwatch-trace","version":1,"platform":"linux","pointer_size":8}\n')
    for i in range(25):
        ts = T0 + i * S // 4
        f.write(json.dumps({"ts": ts, "op": "commit", "pid": 7, "addr": 4096 * (i + 1), "size": 4096,
                            "stack": ["app!main", "app!work"]}) + "\n")
        if i % 3 == 2:
            f.write(json.dumps({"ts": ts + 1000, "op": "release", "pid": 7, "addr": 4096 * (i + 1),
                                "size": 4096, "stack": ["app!main", "app!done"]}) + "\n")


def set_offset(text):
    with open(OFFSET + ".tmp", "w") as f:
        f.write(text + "\n")
    os.replace(OFFSET + ".tmp", OFFSET)


set_offset("+0")
env = dict(os.environ, LD_PRELOAD=LIB, FAKETIME_TIMESTAMP_FILE=OFFSET, FAKETIME_NO_CACHE="1",
           FAKETIME_DONT_FAKE_MONOTONIC="1")
# The ASan build (scripts/test.sh runs the integration tests with it)
# wants its runtime first among the libraries; libfaketime preloaded
# comes before it, which ASan refuses unless told that is intended.
env["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                             "verify_asan_link_order=0"]))
logpath = os.path.join(DIR, "run.log")
BASE = f"http://127.0.0.1:{free_port()}"


def uptimes(what, offset_s, launched):
    """After a step to offset_s: the service's wall clock shows it, its
    uptimes do not."""
    with urllib.request.urlopen(BASE + "/api/health", timeout=30) as r:
        h = json.loads(r.read())
    with urllib.request.urlopen(BASE + "/metrics", timeout=30) as r:
        m = re.search(r"^commitwatch_uptime_seconds (\S+)$", r.read().decode(), re.M)
    since = time.monotonic() - launched
    seen = (h["now_ns"] / S - time.time()) / 3600
    t.check(f"{what}: /api/health now_ns shows the wall clock {offset_s / 3600:+.0f} h ({seen:+.3f} h)",
            abs(seen * 3600 - offset_s) < 60, h["now_ns"])
    t.check(f"{what}: /api/health uptime_s is the time since the start ({since:.1f} s)",
            0 < h["uptime_s"] <= since, h["uptime_s"])
    up = float(m.group(1)) if m else None
    t.check(f"{what}: commitwatch_uptime_seconds is the time since the start ({since:.1f} s)",
            up is not None and 0 < up <= since, up)


with open(logpath, "w") as log:
    launched = time.monotonic()
    p = subprocess.Popen([BIN, "run", "--source", "replay:" + TRACE, "--rebase-now", "--speed", "1",
                          "--listen", BASE[len("http://"):], "--exit-at-end", "--db", DB],
                         stdout=log, stderr=subprocess.STDOUT, env=env)
    wait_until(lambda: p.poll() is not None or "ingesting from" in open(logpath).read(), 120,
               "the service starts ingesting", interval=0.02)
    start = time.monotonic()
    # The steps are the stimulus (timed), not waits on a condition.
    time.sleep(0.5)
    set_offset("+3600")
    time.sleep(1)
    uptimes("after the step forward", 3600, launched)
    time.sleep(1)
    set_offset("-3600")
    time.sleep(0.5)
    uptimes("after the step back", -3600, launched)
    try:
        rc = p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    took = time.monotonic() - start
text = open(logpath).read()
t.check("the run exits 0", rc == 0, text[-800:])
t.check(f"the replay is paced by the monotonic clock: {took:.1f} s for a 6 s trace", 5.5 <= took < 30,
        text[-400:])
t.check("the log notes the step forward (1 h)", "wall clock stepped forward by 3600." in text, text[-800:])
t.check("the log notes the step back (2 h)", "wall clock stepped back by 7200." in text, text[-800:])


def analyze(*args):
    r = subprocess.run([BIN, "analyze", *args, "--json"], capture_output=True, text=True, timeout=120)
    t.check("analyze " + " ".join(args[:2]), r.returncode == 0, r.stderr)
    return json.loads(r.stdout) if r.returncode == 0 else {"processes": [], "window": {}}


db = analyze("--db", DB)
ref = analyze("--source", "replay:" + TRACE)
span = db["window"].get("to_ns", 0) - db["window"].get("from_ns", 0)
t.check(f"the stored data spans the trace's 6 s (buckets): {span / S:.0f} s", 6 * S <= span <= 8 * S,
        db["window"])
FIGS = ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes", "transient_count",
        "outstanding_end_bytes", "events")
got = [{k: p[k] for k in FIGS} for p in db["processes"] if p["pid"] == 7]
want = [{k: p[k] for k in FIGS} for p in ref["processes"] if p["pid"] == 7]
t.eq("every event stored: the figures of analyze --source for the same trace", got, want)
t.done()
