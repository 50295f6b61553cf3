"""test_metrics.py - /metrics is valid Prometheus text (checked by Debian's
`promtool check metrics`), every series equals an independent reference,
label values are scrape-safe and cardinality stays bounded (top N
processes + "other").

The reference is refmodel.py (ARCHITECTURE.md's rules in Python) over the
same trace. A finished replay has ended every instance (nothing is
outstanding), so the per-process series are checked while a paced replay
(`--rebase-now --speed 4`) ingests: at every stored state the test can see
whole (the stored end is the same before and after the scrape), every
series equals the model of the data stored so far, with live instances.

Needs promtool (Debian package `prometheus`)."""

import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BUILD, MTA, MTA_WINDOWS, Checks, Service, require_fixture  # noqa: E402
from cwtest import wait_until  # noqa: E402
import refmodel  # noqa: E402
import stacktags_ref  # noqa: E402

require_fixture()

t = Checks()
PROMTOOL = shutil.which("promtool")
S = 1_000_000_000
T0 = json.load(open(MTA_WINDOWS))["t0_ns"]
HEADER, EVENTS = refmodel.read_trace(MTA)
TAG_OF = stacktags_ref.tagger(HEADER["platform"])

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


def one(samples, name):
    """The value of the one sample of an unlabelled series (None if absent)."""
    v = [x for n, lab, x in samples if n == name]
    t.eq(f"{name}: one sample", len(v), 1)
    return v[0] if v else None


def by_tag(samples, name):
    return {lab["tag"]: int(v) for n, lab, v in samples if n == name}


COUNTERS = (("commitwatch_committed_bytes_total", "committed"),
            ("commitwatch_commit_events_total", "events"),
            ("commitwatch_decommitted_bytes_total", "decommitted"),
            ("commitwatch_transient_bytes_total", "transient"),
            ("commitwatch_transient_pieces_total", "pieces"))


def check_figures(what, samples, model, stored_end):
    """Outstanding per process and tag (the top 20; here fewer) and the
    counters by tag against the model of the data stored up to
    stored_end. Returns the expected outstanding series."""
    want = {}
    for (iid, tag), v in model.outstanding_at(stored_end).items():
        inst = model.insts[iid - 1]
        want[(inst.name, str(inst.pid), str(inst.id), tag)] = v
    got = {(lab["process"], lab["pid"], lab["id"], lab["tag"]): int(v)
           for n, lab, v in samples if n == "commitwatch_process_outstanding_bytes"}
    t.eq(f"{what}: outstanding per process and tag", got, want)
    c = model.counters(stored_end)
    for series, kind in COUNTERS:
        t.eq(f"{what}: {series} by tag", by_tag(samples, series), c[kind])
    return want


def scrape_states(svc, scrapes):
    """A wait_until predicate: scrapes /metrics into scrapes[stored end] =
    (text, health) when the stored end is the same before and after the
    scrape and tracking has not ended (a state seen whole, of the data
    while it was traced: the rows that end the run's instances go into its
    last stored bucket, so the stored end alone does not tell that state
    from the one before; "after the end" checks it); true once the replay
    has ended."""
    def step():
        st, h1 = svc.get("/api/health")
        if h1["ingest_done"]:
            return True
        e = h1["last_bucket_end_ns"]
        if e is None or h1["tracking_ended_ns"] is not None:
            return False
        st, text = svc.get("/metrics")
        st, h2 = svc.get("/api/health")
        if (st == 200 and h2["last_bucket_end_ns"] == e and not h2["ingest_done"] and
                h2["tracking_ended_ns"] is None):
            scrapes[e] = (text, h1)
        return False
    return step


def check_scrape(what, text, model, stored_end, health):
    """Every series of one scrape against the model of the data stored up
    to stored_end. Returns the number of processes with outstanding."""
    samples = parse(text)
    want = check_figures(what, samples, model, stored_end)
    t.eq(f"{what}: outstanding total", one(samples, "commitwatch_outstanding_bytes"),
         sum(want.values()))
    nproc = len({k[:3] for k in want})
    t.eq(f"{what}: processes with outstanding", one(samples, "commitwatch_processes"), nproc)
    end = one(samples, "commitwatch_last_bucket_end_seconds")
    t.check(f"{what}: last bucket end", end == stored_end / 1e9, (end, stored_end))
    ing = one(samples, "commitwatch_events_ingested_total")
    stored = sum(1 for e in EVENTS if e["ts"] + model_shift < stored_end)
    t.check(f"{what}: events ingested: at least those stored, at most the trace's",
            ing is not None and stored <= ing <= len(EVENTS), (ing, stored, len(EVENTS)))
    t.eq(f"{what}: events lost", one(samples, "commitwatch_events_lost_total"), 0)
    t.eq(f"{what}: drift corrected", one(samples, "commitwatch_drift_corrected_bytes"), 0)
    t.check(f"{what}: database size", (one(samples, "commitwatch_db_size_bytes") or 0) > 0, "")
    up = one(samples, "commitwatch_uptime_seconds")
    t.check(f"{what}: uptime since the service started",
            up is not None and 0 < up <= time.monotonic() - launched + 1, (up, time.monotonic() - launched))
    info = [lab for n, lab, v in samples if n == "commitwatch_build_info" and v == 1]
    t.eq(f"{what}: build info", info, [{"version": health["version"], "source": "replay:" + MTA}])
    return nproc


# 1. The MemoryTestApp fixture, paced: scraped at every stored state while
# instances are alive, then after the end of input.
launched = time.monotonic()
model_shift = 0
with Service(MTA, name="metrics", args=["--rebase-now", "--speed", "4"], wait_done=False) as svc:
    st2, hdrs, _ = svc.request("/metrics")
    t.eq("metrics: 200", st2, 200)
    t.check("metrics: text exposition content type",
            hdrs.get("Content-Type", "").startswith("text/plain; version=0.0.4"), hdrs)
    scrapes = {}
    wait_until(scrape_states(svc, scrapes), 60, "the paced replay ends (ingest_done)", interval=0.02)
    st, h = svc.get("/api/health")
    # The rebase shift: the first event (svchost's start at T0) now starts
    # at T0 + shift. A fresh database numbers instances as they appear, as
    # the model does (the id label).
    st, r = svc.get(f"/api/processes?from={h['first_bucket_ns']}&to={h['last_bucket_end_ns']}")
    starts = [p["start_ns"] for p in r["processes"] if p["name"] == "svchost.exe"]
    t.eq("one svchost.exe", len(starts), 1)
    model_shift = starts[0] - EVENTS[0]["ts"]
    whole = refmodel.Model(EVENTS, TAG_OF, shift=model_shift)
    t.eq("ids: instances numbered in the order they appear",
         {p["id"]: (p["pid"], p["name"], p["start_ns"]) for p in r["processes"]},
         {i.id: i.key() for i in whole.insts})
    live = 0
    for e, (text, h1) in sorted(scrapes.items()):
        model = refmodel.Model([ev for ev in EVENTS if ev["ts"] + model_shift < e], TAG_OF,
                               shift=model_shift)
        n = check_scrape(f"live at +{(e - starts[0]) / S:g}s", text, model, e, h1)
        names = {i.name for i in model.insts if model.outstanding_at(e, i)}
        live += n >= 2 and "MemoryTestApp.exe" in names
    t.check(f"live: at least 3 scrapes with MemoryTestApp.exe and another process outstanding "
            f"({live} of {len(scrapes)})", live >= 3, sorted(scrapes))
    if scrapes:
        promtool(scrapes[max(scrapes)][0], "while ingesting")

    # After the end of input: every instance has ended with the run (at
    # the start of the bucket after the last event); the counters hold
    # the whole trace, ending included.
    st, text = svc.get("/metrics")
    promtool(text, "fixture")
    ended = ((EVENTS[-1]["ts"] + model_shift) // S + 1) * S
    model = refmodel.Model(EVENTS, TAG_OF, end_run_at=ended, shift=model_shift)
    t.eq("after the end: stored up to the bucket of the end of tracking",
         h["last_bucket_end_ns"], ended + S)
    check_scrape("after the end", text, model, h["last_bucket_end_ns"], h)
    samples = parse(text)
    t.eq("after the end: every event ingested", one(samples, "commitwatch_events_ingested_total"),
         len(EVENTS))
    t.eq("after the end: no per-process series (every instance ended)",
         [lab for n, lab, v in samples if n == "commitwatch_process_outstanding_bytes"], [])
    c = model.counters(h["last_bucket_end_ns"])
    t.check("after the end: the model's counters are not empty",
            all(any(c[k].values()) for _, k in COUNTERS), c)
    t.eq("after the end: everything committed was released",
         sum(c["committed"].values()) + sum(p.bytes for p in model.all_pieces if p.rec.rundown),
         sum(c["decommitted"].values()))

# 2. Hostile names and many live processes: escaping and the top-N bound.
# The replay is paced and ends with an event a minute later, so the 60
# processes are alive, with their commits stored, while we scrape (a
# finished run ends every instance).
d = os.path.join(BUILD, "e2e-http")
os.makedirs(d, exist_ok=True)
trace = os.path.join(d, "many.jsonl")
evil = 'evil "quoted" \\ back\nslash\tname' + "é" * 100
N = 60


def size(i):
    return 4096 * 1000 if i == 0 else 4096 * (i + 1)


def name_of(i):
    return evil if i == 0 else f"proc{i}.exe"


with open(trace, "w") as f:
    f.write('{"format":"commitwatch-trace","version":1,"platform":"windows","pointer_size":8}\n')
    ts = 1_760_000_000 * S
    for i in range(N):
        f.write(json.dumps({"ts": ts, "op": "process_start", "pid": 1000 + i, "name": name_of(i)}) + "\n")
        f.write(json.dumps({"ts": ts + 1000, "op": "commit", "pid": 1000 + i, "addr": 0x10000000,
                            "size": size(i), "stack": [f"app{i % 7}.dll!f", "KernelBase.dll!VirtualAlloc"]}) + "\n")
        ts += S // 10
    f.write(json.dumps({"ts": ts + 60 * S, "op": "process_start", "pid": 99, "name": "late.exe"}) + "\n")
tag = TAG_OF(("app0.dll!f", "KernelBase.dll!VirtualAlloc"))
with Service(trace, name="metrics-many", args=["--speed", "2"], wait_done=False) as svc:
    def all_stored():
        st, text = svc.get("/metrics")
        m = re.search(r"^commitwatch_processes (\d+)$", text, re.M)
        return text if m and int(m.group(1)) >= N else None

    text = wait_until(all_stored, 30, f"/metrics counts {N} processes with outstanding commit")
    promtool(text, "hostile names")
    samples = parse(text)
    per = [(lab, v) for n, lab, v in samples if n == "commitwatch_process_outstanding_bytes"]
    top = sorted(range(N), key=lambda i: -size(i))[:20]
    label0 = name_of(0).replace("\t", "_")
    while len(label0.encode()) > 128:  # at most 128 bytes, never a split character
        label0 = label0[:-1]
    want = {(label0 if i == 0 else name_of(i), str(1000 + i), tag): size(i) for i in top}
    want[("other", "", tag)] = sum(size(i) for i in range(N) if i not in top)
    t.eq("top 20 processes by outstanding, the rest as other",
         {(lab["process"], lab["pid"], lab["tag"]): int(v) for lab, v in per}, want)
    t.eq("other has no id", sorted({lab["id"] for lab, _ in per if lab["process"] == "other"}), [""])
    t.eq("outstanding total", one(samples, "commitwatch_outstanding_bytes"), sum(size(i) for i in range(N)))
    ev = [lab["process"] for lab, _ in per if lab["process"].startswith("evil")]
    t.check("hostile name escaped and kept", ev and ev[0].startswith('evil "quoted" \\ back\nslash_name'), ev)
    t.check("label values are bounded (128 bytes)", ev and len(ev[0].encode()) <= 128, ev)

# 3. Hours: a random trace of 3 h 50 min (rundown, pid reuse, partial
# decommits, minute edges) replayed at 600x, so the hour tier closes
# while we scrape and /metrics serves the closed hours from its cache
# (docs/DESIGN.md, "/metrics"): every scrape at a stored state equals
# the model of the data stored so far. The fourth hour lasts 50 min (5 s
# at 600x): at 10 min, an ASan build on a loaded machine made no whole
# scrape in it.
trace = os.path.join(d, "hours.jsonl")
t0h, _ = refmodel.random_trace(trace, 12, HEADER, nev=1500, span_s=3 * 3600 + 3000, minute_edges=True)
_, hev = refmodel.read_trace(trace)
with Service(trace, name="metrics-hours", args=["--speed", "600"], wait_done=False) as svc:
    scrapes = {}
    wait_until(scrape_states(svc, scrapes), 120, "the 3 h replay ends (ingest_done)", interval=0.05)
    hours = set()
    for e, (text, _) in sorted(scrapes.items()):
        model = refmodel.Model([ev for ev in hev if ev["ts"] < e], TAG_OF)
        check_figures(f"hours at +{(e - t0h) / S:g}s", parse(text), model, e)
        hours.add((e - t0h) // (3600 * S))
    t.check(f"hours: scrapes in each of the 4 hours ({len(scrapes)} scrapes)", hours >= {0, 1, 2, 3},
            sorted(hours))

t.done()
