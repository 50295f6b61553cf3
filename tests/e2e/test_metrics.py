"""test_metrics.py - /metrics is valid Prometheus text (checked by Debian's
`promtool check metrics`), its figures match the API, label values are
scrape-safe and cardinality stays bounded (top N processes + "other").

Needs promtool (Debian package `prometheus`)."""

import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BUILD, MTA, Checks, Service, require_fixture  # noqa: E402

require_fixture()

t = Checks()
PROMTOOL = shutil.which("promtool")
S = 1_000_000_000

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def unescape(v):
    """The exposition format's label escapes: \\\\, \\" and \\n."""
    return re.sub(r'\\(.)', lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)


def parse(text):
    """[(name, {label: value}, float)] for every sample line; raises on junk."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ValueError(f"not a sample line: {line!r}")
        labels = {}
        if m.group(3):
            rest = m.group(3)
            pos = 0
            for lm in LABEL.finditer(rest):
                labels[lm.group(1)] = unescape(lm.group(2))
                pos = lm.end()
            if rest[pos:].strip(", "):
                raise ValueError(f"bad labels: {line!r}")
        out.append((m.group(1), labels, float(m.group(4))))
    return out


def promtool(text, name):
    if not PROMTOOL:
        t.check(f"{name}: promtool installed (apt-get install prometheus)", False, "promtool not found")
        return
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True)
    t.check(f"{name}: promtool check metrics", r.returncode == 0, r.stdout + r.stderr)


# 1. The MemoryTestApp fixture.
with Service(MTA, name="metrics") as svc:
    st, text = svc.get("/metrics")
    t.eq("metrics: 200", st, 200)
    st2, hdrs, _ = svc.request("/metrics")
    t.check("metrics: text exposition content type", hdrs.get("Content-Type", "").startswith("text/plain; version=0.0.4"), hdrs)
    promtool(text, "fixture")
    samples = parse(text)
    names = {n for n, _, _ in samples}
    for n in ("commitwatch_events_ingested_total", "commitwatch_events_lost_total",
              "commitwatch_drift_corrected_bytes",
              "commitwatch_committed_bytes_total", "commitwatch_decommitted_bytes_total",
              "commitwatch_transient_bytes_total", "commitwatch_transient_pieces_total",
              "commitwatch_outstanding_bytes", "commitwatch_uptime_seconds"):
        t.check(f"metrics has {n}", n in names, sorted(names))
    st, h = svc.get("/api/health")
    ev = [v for n, _, v in samples if n == "commitwatch_events_ingested_total"][0]
    t.eq("events ingested = /api/health", int(ev), h["events_ingested"])
    # Outstanding per process = the API's outstanding at the end of the data.
    st, r = svc.get(f"/api/processes?from={h['first_bucket_ns']}&to={h['last_bucket_end_ns']}")
    want = {str(p["id"]): p["outstanding_end_bytes"] for p in r["processes"] if p["outstanding_end_bytes"]}
    got = {}
    for n, lab, v in samples:
        if n == "commitwatch_process_outstanding_bytes":
            got[lab["id"]] = got.get(lab["id"], 0) + int(v)
    t.eq("outstanding per process = API outstanding_end_bytes", got, want)
    total = [v for n, _, v in samples if n == "commitwatch_outstanding_bytes"][0]
    t.eq("outstanding total = API (every instance ends with the run)", int(total),
         sum(p["outstanding_end_bytes"] for p in r["processes"]))
    committed = sum(v for n, _, v in samples if n == "commitwatch_committed_bytes_total")
    t.eq("committed counter = sum of Size over the data", int(committed), sum(p["size_bytes"] for p in r["processes"]))

# 2. Hostile names and many live processes: escaping and the top-N bound.
# The replay is paced (--speed 1) and ends with an event a minute later,
# so the 60 processes are alive, with their commits stored, while we
# scrape (a finished run ends every instance).
d = os.path.join(BUILD, "e2e-http")
os.makedirs(d, exist_ok=True)
trace = os.path.join(d, "many.jsonl")
evil = 'evil "quoted" \\ back\nslash\tname' + "é" * 100


def size(i):
    return 4096 * 1000 if i == 0 else 4096 * (i + 1)


with open(trace, "w") as f:
    f.write('{"format":"commitwatch-trace","version":1,"platform":"windows","pointer_size":8}\n')
    ts = 1_760_000_000 * S
    for i in range(60):
        name = evil if i == 0 else f"proc{i}.exe"
        f.write(json.dumps({"ts": ts, "op": "process_start", "pid": 1000 + i, "name": name}) + "\n")
        f.write(json.dumps({"ts": ts + 1000, "op": "commit", "pid": 1000 + i, "addr": 0x10000000,
                            "size": size(i), "stack": [f"app{i % 7}.dll!f", "KernelBase.dll!VirtualAlloc"]}) + "\n")
        ts += S // 10
    f.write(json.dumps({"ts": ts + 60 * S, "op": "process_start", "pid": 99, "name": "late.exe"}) + "\n")
with Service(trace, name="metrics-many", args=["--speed", "1"], wait_done=False) as svc:
    deadline = time.time() + 30
    while True:
        st, text = svc.get("/metrics")
        m = re.search(r"^commitwatch_processes (\d+)$", text, re.M)
        if (m and int(m.group(1)) >= 60) or time.time() > deadline:
            break
        time.sleep(0.3)
    promtool(text, "hostile names")
    samples = parse(text)
    per = [(lab, v) for n, lab, v in samples if n == "commitwatch_process_outstanding_bytes"]
    procs = {lab["process"] for lab, _ in per}
    t.check("top 20 processes + other", len(procs) == 21 and "other" in procs, sorted(procs))
    t.check("the largest processes are named", "proc59.exe" in procs and "proc2.exe" not in procs, sorted(procs))
    total = sum(v for _, v in per)
    t.eq("top + other add up to all outstanding", int(total), sum(size(i) for i in range(60)))
    ev = [p for p in procs if p.startswith("evil")]
    t.check("hostile name escaped and kept", ev and ev[0].startswith('evil "quoted" \\ back\nslash_name'), ev)
    t.check("label values are bounded (128 bytes)", ev and len(ev[0].encode()) <= 128, ev)

t.done()
