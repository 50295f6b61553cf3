#!/usr/bin/env python3
"""test_win_api.py - the API of commitwatch.exe under Wine gives the
figures the Linux build gives, and refmodel.py's.

`commitwatch.exe run --source replay:TRACE` (through scripts/wine_run.sh,
in a Wine prefix of its own, cwwine.PrivatePrefix: a wineserver that
aborts under the HTTP traffic takes no other test down) over the MemoryTestApp fixture and a
random trace (refmodel.random_trace: pid reuse, events after exits,
rundown, partial decommits, equal times). For each:

- against refmodel.py, an independent model of the rules: /api/processes
  in the fixture's windows, the whole data and windows that cut lifetimes;
  /api/processes/{id}; /series at 1 s and 5 s; /stacks; /api/diff;
  /api/system/series; the /metrics counters by tag;
- against the Linux build on the same trace, when the Windows build was
  configured with -DCW_LINUX_BUILD=DIR (without it, refmodel alone):
  every answer of the list below, byte for byte once parsed (JSON) or line
  for line (/metrics), but for what differs by nature: the health's clock,
  uptime, database path and size, the wall-clock times at which its source
  came up and its configuration was loaded, its process-wide memory figures, and
  /metrics' uptime and database size.

The service is stopped with Ctrl+C (cwservice: SIGINT, which Wine turns
into CTRL_C_EVENT) and must exit 0.
"""
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BUILD, MTA, MTA_WINDOWS, Checks, Service, require_fixture  # noqa: E402
from cwtest import require  # noqa: E402
import cwwine  # noqa: E402
from cwwine import LINUX_BUILD  # noqa: E402
import json  # noqa: E402
import refmodel  # noqa: E402
import stacktags_ref  # noqa: E402

S = 1_000_000_000
t = Checks()
require_fixture()
cwwine.require_wine()
LINUX = os.path.join(LINUX_BUILD, "commitwatch") if LINUX_BUILD else None
require(not LINUX or os.access(LINUX, os.X_OK),
        f"the Linux build's commitwatch in CW_LINUX_BUILD={LINUX_BUILD}")
W = json.load(open(MTA_WINDOWS))
HEADER, _ = refmodel.read_trace(MTA)
# Tags from the .stacktags files read by the tests' own matcher (not the
# binaries' `tags explain`, whose matcher is the one under test).
TAG_OF = stacktags_ref.tagger(HEADER["platform"])
FIGS = ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes", "transient_count",
        "peak_outstanding_bytes", "peak_ns", "outstanding_end_bytes", "events", "types")
IDENT = ("id", "pid", "name", "cmdline", "start_ns", "exit_ns", "tracking_ended_ns")
SERIES_COLS = ("committed_bytes", "commit_count", "decommitted_bytes", "transient_bytes",
               "transient_count", "peak_bytes", "outstanding_total")
STACK_FIGS = ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes",
              "transient_count", "types")
# What differs between two runs by nature (clock, path, file size).
VOLATILE_HEALTH = ("now_ns", "started_ns", "uptime_s", "db_path", "db_size_bytes")
# Wall-clock times inside the health's objects: when the source came up
# (source_state.since_ns) and when the configuration was loaded
# (config.at_ns).
VOLATILE_HEALTH_CLOCKS = {"source_state": ("since_ns",), "config": ("at_ns",)}
# The health's memory figures of the whole process (the C runtime's heap,
# SQLite's allocator, the resident set) are the OS's and its libraries';
# store_caches sums the caches of the HTTP workers' read handles, so it
# depends on which worker answered which report (and on the handles still
# open); alert_series depends on which of the alert engine's evaluations
# (its own thread, on the wall clock) had run when the answer was made:
# ended instances are compacted into aggregates at an evaluation after
# their end (docs/DESIGN.md "Memory"; 17,092 against 11,972 bytes in one
# CI run). The components the ingestion counts (tracker, stacks, ...) must
# agree.
VOLATILE_MEMORY = ("sqlite", "sqlite_peak", "heap_in_use", "heap_other", "resident",
                   "resident_peak", "store_caches", "alert_series")
NO_FOLD = "fold_lifetime = 0\n"
VOLATILE_METRICS = ("commitwatch_uptime_seconds", "commitwatch_db_size_bytes")


def q(path, **params):
    return path + ("?" + urllib.parse.urlencode(params) if params else "")


MISSING = "(missing)"  # a key the answer lacks: never equal to the model's None


def proc_figs(p):
    out = {k: p.get(k, MISSING) for k in IDENT + FIGS}
    out["tags"] = {x["tag"]: {k: x[k] for k in x if k != "tag"} for x in p.get("tags", [])}
    return out


def want_figs(w):
    return {k: w[k] for k in IDENT + FIGS + ("tags",)}


def diff_of(got, want):
    return {k: {"got": got.get(k, MISSING), "want": want[k]} for k in want
            if got.get(k, MISSING) != want[k]}


def against_model(what, svc, m, first, end, windows):
    """Every figure the model has, asked of the service."""
    for name, f, to in windows:
        want = m.report(f, to)
        st, r = svc.get(q("/api/processes", **{"from": f, "to": to}))
        t.check(f"{what} processes {name}: the model has processes", len(want) > 0)
        t.eq(f"{what} processes {name}: ids", sorted(p["id"] for p in r["processes"]),
             sorted(want))
        bad = {p["id"]: diff_of(proc_figs(p), want_figs(want[p["id"]]))
               for p in r["processes"] if p["id"] in want}
        t.check(f"{what} processes {name}: every figure equals the model",
                not any(bad.values()), bad)
    f, to = windows[1][1], windows[1][2]
    want = m.report(f, to)
    for iid, w in want.items():
        st, r = svc.get(q(f"/api/processes/{iid}", **{"from": f, "to": to}))
        t.check(f"{what} process/{iid} ({w['name']}): equals the model",
                st == 200 and not diff_of(proc_figs(r["process"]), want_figs(w)),
                diff_of(proc_figs(r.get("process", {})), want_figs(w)))
    # Series of every instance, at 1 s and 5 s; the system's.
    for inst in m.insts:
        for step in (1, 5):
            n = (end - first) // (step * S)
            st, s = svc.get(q(f"/api/processes/{inst.id}/series",
                              **{"from": first, "to": first + n * step * S, "step": f"{step}s"}))
            ws = m.series(first, step * S, n, inst)
            bad = {c: (s.get(c, MISSING), ws[c]) for c in SERIES_COLS if s.get(c, MISSING) != ws[c]}
            if any(ws["committed_bytes"]) and not any(s.get("committed_bytes") or []):
                bad["committed_bytes"] = "all 0 or missing, the model has commits"
            nz = {k: v for k, v in s.get("outstanding", {}).items() if any(v)}
            wz = {k: v for k, v in ws["outstanding"].items() if any(v)}
            if nz != wz:
                bad["outstanding"] = (nz, wz)
            t.check(f"{what} series/{inst.id} ({inst.name}) step {step}s: every column equals "
                    "the model", st == 200 and not bad, bad)
    n = (end - first) // S
    st, s = svc.get(q("/api/system/series", **{"from": first, "to": end, "step": "1s"}))
    ws = m.series(first, S, n, None)
    t.check(f"{what} system series: the model's outstanding is not all zero",
            any(ws["outstanding_total"]))
    t.eq(f"{what} system series: every column equals the model",
         {c: s.get(c, MISSING) for c in SERIES_COLS}, {c: ws[c] for c in SERIES_COLS})
    # Stacks and diff of every instance with commits, in two windows.
    compared = 0
    for name, f, to in windows[:2]:
        for inst in m.insts:
            sf = m.stack_figs(inst, f, to)
            if not sf:
                continue
            st, sk = svc.get(q(f"/api/processes/{inst.id}/stacks", **{"from": f, "to": to}))
            got = {tuple(x["frames"]): {k: x[k] for k in STACK_FIGS + ("tag",)}
                   for x in sk.get("stacks", [])}
            wst = {fr: {k: v[k] for k in STACK_FIGS} | {"tag": TAG_OF(fr)} for fr, v in sf.items()}
            t.eq(f"{what} stacks/{inst.id} ({inst.name}) {name}: equal the model", got, wst)
            compared += 1
            rows = m.diff_rows(inst, f, to, TAG_OF)
            if rows:
                st, d = svc.get(q("/api/diff", process=inst.id, t1=f, t2=to))
                got = {tuple(x["frames"]): {k: v for k, v in x.items()
                                            if k not in ("frames", "stack_id")}
                       for x in d.get("stacks", [])}
                t.eq(f"{what} diff/{inst.id} ({inst.name}) {name}: per stack, the model's", got,
                     rows)
    t.check(f"{what}: stacks compared for some instance", compared > 0, compared)
    # /metrics: a finished replay has ended every instance; the counters
    # hold every stored bucket (the releases where tracking ended too).
    st, h = svc.get("/api/health")
    st, text = svc.get("/metrics")
    c = m.counters(h["last_bucket_end_ns"])
    got = {}
    for line in text.splitlines():
        if line.startswith("commitwatch_") and "{tag=" in line:
            name, _, rest = line.partition("{tag=\"")
            tag, _, v = rest.rpartition("\"} ")
            got.setdefault(name, {})[tag.replace('\\\\', '\\')] = int(float(v))
    for series, kind in (("commitwatch_committed_bytes_total", "committed"),
                         ("commitwatch_commit_events_total", "events"),
                         ("commitwatch_decommitted_bytes_total", "decommitted"),
                         ("commitwatch_transient_bytes_total", "transient"),
                         ("commitwatch_transient_pieces_total", "pieces")):
        t.eq(f"{what} /metrics {series} by tag: the model's", got.get(series, MISSING), c[kind])
    t.check(f"{what} /metrics: the model's counters are not empty",
            all(any(c[k].values()) for k in ("committed", "events", "decommitted")), c)


def paths_for(first, end, ids, windows):
    """The requests asked of both builds."""
    out = ["/api/health", "/api/tags", "/api/openapi.json", "/metrics",
           q("/api/system/series", **{"from": first, "to": end, "step": "1s"}),
           q("/api/system/series", **{"from": first, "to": end, "step": "5s"}),
           q("/api/processes", **{"from": first, "to": end, "sort": "size", "limit": 2}),
           q("/api/processes", **{"from": first, "to": end, "name": ".exe"}),
           "/api/processes?from=yesterday", "/api/processes/999999", "/api/diff",
           q("/api/system/series", step="-5s")]
    for _, f, to in windows:
        out.append(q("/api/processes", **{"from": f, "to": to}))
        out.append(q("/api/processes", **{"from": f, "to": to, "sort": "outstanding"}))
    for i in ids:
        for _, f, to in windows[:3]:
            out.append(q(f"/api/processes/{i}", **{"from": f, "to": to}))
            out.append(q(f"/api/processes/{i}/stacks", **{"from": f, "to": to}))
            out.append(q(f"/api/processes/{i}/stacks", **{"from": f, "to": to, "type": "AIFI",
                                                         "sort": "size"}))
            out.append(q("/api/diff", process=i, t1=f, t2=to))
        out.append(q(f"/api/processes/{i}/series", **{"from": first, "to": end, "step": "1s"}))
        out.append(q(f"/api/processes/{i}/series", **{"from": first, "to": end, "step": "5s"}))
    return out


ERROR_PATHS = ("/api/processes?from=yesterday", "/api/processes/999999", "/api/diff",
               "/api/system/series?step=-5s")


def lacking(path, status, body, m):
    """What an answer lacks to be a comparison of data (None: nothing):
    the error requests answer 4xx with a body, the others 200 and a body
    that is not empty; and where the model has data in the window asked
    (processes, an instance's stacks or commits), the answer has it too."""
    if path in ERROR_PATHS:
        return None if 400 <= status < 500 and body else f"status {status}, body {body!r:.200}"
    if status != 200 or not body:
        return f"status {status}, body {body!r:.200}"
    if not isinstance(body, dict):
        return None  # /metrics: its lines are compared with the model's above
    q = urllib.parse.parse_qs(urllib.parse.urlparse(path).query)
    if "from" not in q:
        return None
    frm, to = int(q["from"][0]), int(q["to"][0])
    parts = urllib.parse.urlparse(path).path.split("/")  # '', 'api', 'processes', id, ...
    if parts[1:3] == ["api", "processes"] and len(parts) == 3:
        want = [w for w in m.report(frm, to).values() if q.get("name", [""])[0] in w["name"]]
        if want and not body.get("processes"):
            return f"no processes, the model has {len(want)}"
        return None
    inst = [i for i in m.insts if len(parts) > 3 and parts[3].isdigit() and i.id == int(parts[3])]
    if len(parts) == 4 and inst:
        return None if (body.get("process") or {}).get("id") == inst[0].id else "not the process"
    if len(parts) == 5 and parts[4] == "stacks" and inst and "type" not in q:
        if m.stack_figs(inst[0], frm, to) and not body.get("stacks"):
            return "no stacks, the model has some"
    if len(parts) == 5 and parts[4] == "series" and inst:
        commits = [r for r in inst[0].recs if not r.rundown and frm <= r.a < to and r.bytes]
        if commits and not any(body.get("committed_bytes") or []):
            return "no commits in the series, the model has some"
    if parts[1:] == ["api", "system", "series"] and not any(body.get("committed_bytes") or []):
        return "no commits in the system series"
    return None


def normal(path, body):
    if path == "/metrics" and isinstance(body, str):
        return [ln for ln in body.splitlines() if not ln.startswith(VOLATILE_METRICS)]
    if path == "/api/health" and isinstance(body, dict):
        out = {k: v for k, v in body.items() if k not in VOLATILE_HEALTH}
        if isinstance(out.get("memory"), dict):
            out["memory"] = {k: v for k, v in out["memory"].items() if k not in VOLATILE_MEMORY}
        for obj, keys in VOLATILE_HEALTH_CLOCKS.items():
            if isinstance(out.get(obj), dict):
                out[obj] = {k: v for k, v in out[obj].items() if k not in keys}
        return out
    return body


def one_trace(what, trace):
    _, events = refmodel.read_trace(trace)
    ended = (events[-1]["ts"] // S + 1) * S
    m = refmodel.Model(events, TAG_OF, end_run_at=ended)
    # The model has a line per instance: short-lived ones are not folded
    # (test_fold.py checks folding).
    with Service(trace, name=f"win-api-{what}", config=NO_FOLD) as svc:
        st, h = svc.get("/api/health")
        first, end = h["first_bucket_ns"], h["data_end_ns"]
        t.eq(f"{what}: every event ingested, none lost", (h["events_ingested"], h["events_lost"]),
             (len(events), 0))
        t.eq(f"{what}: stored up to the end of tracking's bucket, the data ends where tracking "
             "ended", (h["last_bucket_end_ns"], end, h["tracking_ended_ns"]), (ended + S, ended, ended))
        windows = [("all", first, end), ("alive", first, first + (end - first) // 2 // S * S)]
        if trace == MTA:
            windows += [(n, w["from_ns"], w["to_ns"]) for n, w in W["windows"].items()]
        windows += [(f"[{a}s, {b}s)", first + a * S, first + b * S) for a, b in ((0, 1), (2, 9))]
        against_model(what, svc, m, first, end, windows)
        if not LINUX:
            return
        ids = [i.id for i in m.insts]
        paths = paths_for(first, end, ids, windows)
        with Service(trace, name=f"linux-api-{what}", bin=LINUX, prefix=[], config=NO_FOLD) as lsvc:
            same, differ, hollow = 0, [], []
            for p in paths:
                ws, wb = svc.get(p)
                ls, lb = lsvc.get(p)
                if (ws, normal(p, wb)) == (ls, normal(p, lb)):
                    same += 1
                else:
                    differ.append((p, {"windows": (ws, normal(p, wb)), "linux": (ls, normal(p, lb))}))
                lack = lacking(p, ws, wb, m)
                if lack:
                    hollow.append((p, lack))
            # Two equal answers compare something only when they hold data:
            # {} against {}, or two errors, would be "the same".
            t.check(f"{what}: every answer compared holds what the model says it should "
                    f"({len(paths) - len(hollow)} of {len(paths)})", not hollow, hollow[:5])
            t.check(f"{what}: the Linux build answers the same to all {len(paths)} requests "
                    f"({same} same)", not differ, str(differ[:2])[:3000])
            # The comparison compares something.
            st, r = lsvc.get(q("/api/processes", **{"from": first, "to": end}))
            t.check(f"{what}: the Linux build reports processes with commits",
                    any(p["size_bytes"] for p in r["processes"]), r)


with cwwine.PrivatePrefix("api") as px:
    os.environ.update(px.env)  # Service's commitwatch.exe runs in it
    one_trace("fixture", MTA)
    rand = os.path.join(BUILD, "e2e-http", "win-api-random.jsonl")
    os.makedirs(os.path.dirname(rand), exist_ok=True)
    refmodel.random_trace(rand, 7, HEADER)
    one_trace("random", rand)
if not LINUX:
    print("note: no Linux build given (-DCW_LINUX_BUILD=DIR): compared with refmodel.py only")
t.done()
