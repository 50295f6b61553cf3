"""test_read_cache.py - the HTTP workers' read caches (store_report.c,
store_series.c: figures of closed buckets kept per database handle) give
the answers a fresh process gives, through the real binary.

A paced replay (bench/gen_http_trace.py: a long-running process and 30
background ones, 3 h of 1 s data, at 1800x) is served while it ingests.
Over one keep-alive connection (one worker, so one handle and its caches)
the test asks again and again for windows that closed while it watched:
the processes of a past hour, of everything from the start, and series of
the machine and of the long-running process read from the minute and hour
tiers. Every answer given once a window was complete is kept. When the
ingest is done, a second service on a copy of the database (fresh
handles, empty caches) and `analyze --db` answer the same windows: every
kept answer must equal theirs."""

import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, BUILD, Checks, KeptClient, Service, analyze_json  # noqa: E402
from cwtest import wait_until  # noqa: E402

t = Checks()
S = 1_000_000_000
T0 = 1_760_000_000  # Unix s; gen_http_trace.py's first second
SOURCE = os.environ.get("CW_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
work = os.path.join(BUILD, "e2e-read-cache")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
trace = os.path.join(work, "three-hours.jsonl")
with open(trace, "w") as f:
    subprocess.run([sys.executable, os.path.join(SOURCE, "bench", "gen_http_trace.py"),
                    "--start", str(T0), "--seconds", str(3 * 3600), "--procs", "30"],
                   stdout=f, check=True)
empty = os.path.join(work, "empty.jsonl")
with open(trace) as src, open(empty, "w") as f:
    f.write(src.readline())  # the header alone: serves the copied database

A = T0 * S
HOUR = 3600 * S
# The windows asked for. An answer is final once the data reaches past the
# end of the window it answers (its steps rounded up) by a minute, or an
# hour for hour steps: the rollups that serve it are done.
def windows():
    h1, h2 = A + HOUR - 1800 * S, A + 2 * HOUR - 1800 * S  # unaligned hour windows
    return [
        f"/api/processes?from={h1}&to={h1 + HOUR}",
        f"/api/processes?from={h2 - 17 * S}&to={h2 + HOUR}",
        f"/api/processes?from={A - 600 * S}&to={A + 2 * HOUR + 300 * S}",
        f"/api/system/series?from={A}&to={A + 2 * HOUR}&step=120s",
        f"/api/system/series?from={A + 600 * S}&to={A + 2 * HOUR}&step=300s",
        f"/api/system/series?from={A}&to={A + HOUR}&step=3600s",
        f"/api/processes/1/series?from={A}&to={A + 2 * HOUR}&step=180s",
        f"/api/processes/1/series?from={A + 60 * S}&to={A + 150 * 60 * S}&step=60s",
    ]


def final_after(path, body):
    return body["window"]["to_ns"] + (HOUR if path.endswith("step=3600s") else 61 * S)


kept = {}  # path -> the answers given once it was complete
with Service(trace, name="read-cache", args=["--speed", "1800"], wait_done=False) as svc:
    status, h = svc.get("/api/health")
    t.check("/api/health answers while the replay runs", status == 200, h)
    t.check("/api/health has data_end_ns", "data_end_ns" in h, sorted(h))
    c = KeptClient(svc.port)
    rounds = 0
    while True:
        _, h = c.get("/api/health")
        done = h.get("ingest_done")
        end = h.get("data_end_ns") or 0
        for path in windows():
            status, body = c.get(path)
            if status != 200:
                t.check(f"{path} answers 200", False, body)
                continue
            # Still complete after the answer: it was complete during it.
            if end >= final_after(path, body):
                kept.setdefault(path, []).append(body)
        rounds += 1
        if done:
            break
        time.sleep(0.05)
    c.close()
    db = svc.db
    t.check("the windows were asked while the data grew", rounds >= 5, rounds)

t.eq("every window was answered once complete", sorted(kept), sorted(windows()))
t.check("most windows were answered several times before the ingest ended",
        sum(len(v) > 1 for v in kept.values()) >= len(kept) // 2, {p: len(v) for p, v in kept.items()})

def figures(v):
    """v without "tracking_ended_ns": the end of the replay ends tracking
    after the windows, and the processes rows (not cached) say so."""
    if isinstance(v, dict):
        return {k: figures(x) for k, x in v.items() if k != "tracking_ended_ns"}
    if isinstance(v, list):
        return [figures(x) for x in v]
    return v


def difference(got, want, at=""):
    """Where two JSON values first differ, for the failure message."""
    if type(got) is not type(want):
        return f"{at}: {got!r} vs {want!r}"
    if isinstance(got, dict):
        for k in sorted(set(got) ^ set(want)):
            return f"{at}.{k}: only in {'the first' if k in got else 'the second'}"
        for k in sorted(got):
            if got[k] != want[k]:
                return difference(got.get(k), want.get(k), f"{at}.{k}")
    if isinstance(got, list):
        if len(got) != len(want):
            return f"{at}: {len(got)} items vs {len(want)}"
        for i, (x, y) in enumerate(zip(got, want)):
            if x != y:
                return difference(x, y, f"{at}[{i}]")
    return f"{at}: {got!r} vs {want!r}"


def holds_data(body):
    """The answer has figures not all 0: equal answers then compare data,
    not two empty lists."""
    if "processes" in body:
        return any(p["size_bytes"] for p in body["processes"])
    return any(body["committed_bytes"]) and any(body["outstanding_total"])


fresh = Service(empty, name="read-cache-fresh")
shutil.copy(db, fresh.db)
with fresh:
    for path, answers in sorted(kept.items()):
        status, want = fresh.get(path)
        want = figures(want)
        t.eq(f"fresh service answers {path}", status, 200)
        t.check(f"fresh service's answer to {path} holds data", holds_data(want), want)
        for i, got in enumerate(answers):
            got = figures(got)
            t.check(f"{path}: answer {i + 1} of {len(answers)} equals a fresh handle's",
                    got == want, difference(got, want))

# And the processes windows equal `analyze --db` (its own process).
for path in sorted(p for p in kept if p.startswith("/api/processes?")):
    q = dict(kv.split("=") for kv in path.split("?")[1].split("&"))
    rep = analyze_json(db, int(q["from"]), int(q["to"]))
    got = {p["id"]: p for p in kept[path][-1]["processes"]}
    want = {p["id"]: p for p in rep["processes"]}
    t.eq(f"{path}: the processes of analyze --db", sorted(got), sorted(want))
    t.check(f"{path}: analyze --db has processes with commits",
            any(p["size_bytes"] for p in want.values()), rep)
    for pid in sorted(want):
        t.same_keys(f"{path}: instance {pid}'s figures as analyze --db", got.get(pid), want[pid],
                    ("size_bytes", "commit_count", "impacting_bytes", "peak_outstanding_bytes",
                     "peak_ns"))
t.done()
