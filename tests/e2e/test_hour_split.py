#!/usr/bin/env python3
"""test_hour_split.py - windows from a minute that is not on an hour
(docs/DESIGN.md, "The hour split"), through the real binary, against the
exact analyzer.

Two and a half hours of 200 live processes (the read-path benchmark's
generator, bench/busy_trace.py: each commits and releases every 5 s on
average, holding up to 64 allocations, so an hour's commits are released
in the hours after it) are replayed into a database by `run`. The hour
tier then holds a partial first hour and a closed one, and the open
hour's cells the rest. For windows whose start is on a minute but
not on an hour, reaching through closed hours, the open hour or both,
and ending at the end of the data or on a minute inside it:

- `analyze --db --json --stacks` gives every process and stack the
  figures `analyze --source replay:` (the exact analyzer over the same
  trace) gives, field by field (the database's window ends where
  tracking ended);
- `serve --db` lists the processes ranked by impacting bytes (the
  dashboard's overview) and by transient bytes (the full report) with
  the same figures for the processes listed, in the order the exact
  figures rank them.
"""
import json
import os
import shutil
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cwservice import Checks, live_db, serve_db, sql_one as one  # noqa: E402
from cwtest import stop  # noqa: E402

S = 1_000_000_000
M = 60 * S
H = 3600 * S
t = Checks()
TMP = tempfile.mkdtemp(prefix="cw_hour_split_")
FIGS = ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes", "transient_count",
        "outstanding_end_bytes", "peak_outstanding_bytes", "peak_ns", "events", "types")


def check(cond, what, *context):
    return t.check(what, cond, " | ".join(str(c)[:1500] for c in context))


cli = t.cli


trace, db = live_db(t, TMP, 200, 150)

start, end = one(db, "SELECT start_ns, end_ns FROM tiers WHERE tier = 0")
h_end, o_row = one(db, "SELECT end_ns FROM tiers WHERE tier = 2")[0], \
    one(db, "SELECT start_ns, end_ns FROM tiers WHERE tier = 3")
h_first = start - start % H  # the partial first hour
check(h_end - h_first == 2 * H and o_row is not None and o_row[0] == h_end,
      "the hour tier: a partial first hour and a closed one, then the open hour",
      (start, h_end, o_row))
m_end = o_row[1] if o_row else end
# Where tracking ended: the database's windows end there.
ended = end - S


def win(t0, t1):
    assert t0 % M == 0 and t0 % H != 0
    return (t0, t1)


# The split's parts after t0's hour's minutes (store_report_sums.h):
windows = [
    win(h_first + 31 * M, ended),           # a closed hour, the open hour's cells
    win(h_first + H + 7 * M, ended),        # the open hour's cells
    win(h_first + 41 * M, h_end + 13 * M),  # a closed hour, then minutes to t1
    win(h_first + 59 * M, h_end),           # a closed hour to an hour
    # No split (controls): t1 before the open hour's cells end, and no
    # whole hour after t0's.
    win(h_end - H + 2 * M, m_end - 3 * M),
    win(h_first + H + 30 * M, h_end + 5 * M),
]


def analyze(src, w):
    return json.loads(cli("analyze", *src, "--json", "--stacks", "--from", str(w[0]), "--to",
                          str(w[1])))


def keyed(r):
    return {p["pid"]: p for p in r["processes"]}


def diff(a, b):
    """The figures that differ, with both values."""
    return {f: (a.get(f), b.get(f)) for f in FIGS if a.get(f) != b.get(f)}


def stacks(r):
    """A process's stacks, by frames, with their figures."""
    return sorted((json.dumps(s.get("frames")), [s.get(f) for f in FIGS])
                  for s in r.get("stacks", []))


exact = {}
for w in windows:
    x = analyze(["--source", "replay:" + trace], w)
    y = analyze(["--db", db], w)
    exact[w] = x
    check(y["window"]["from_ns"] == w[0] and y["window"]["to_ns"] == min(w[1], ended),
          f"window {w}: the database answers it exactly", y["window"], y.get("note"))
    px, py = keyed(x), keyed(y)
    check(len(px) == 200 and sorted(px) == sorted(py), f"window {w}: every live process", len(px),
          len(py))
    bad = [pid for pid, p in px.items() if diff(p, py.get(pid, {}))]
    check(not bad, f"window {w}: every process's figures are the exact analyzer's",
          f"{len(bad)} differ", bad[:5], bad and diff(px[bad[0]], py.get(bad[0], {})))
    bad = [pid for pid, p in px.items() if stacks(p) != stacks(py.get(pid, {}))]
    check(not bad, f"window {w}: every process's stacks are the exact analyzer's",
          f"{len(bad)} differ", bad[:5], bad and (stacks(px[bad[0]])[:2],
                                                  stacks(py.get(bad[0], {}))[:2]))


# ---- the HTTP lists ------------------------------------------------------------
proc, base = serve_db(db, os.path.join(TMP, "serve.log"))
try:
    for w in windows:
        px = keyed(exact[w])
        for sort, key in (("impacting", "impacting_bytes"), ("transient", "transient_bytes")):
            u = f"/api/processes?from={w[0]}&to={w[1]}&sort={sort}&limit=25"
            with urllib.request.urlopen(base + u, timeout=120) as r:
                got = json.loads(r.read())
            ps = got["processes"]
            check(len(ps) == 25, f"GET {u}: 25 processes", len(ps))
            want = sorted(px.values(), key=lambda p: (-p[key], p["id"]))
            check([p[key] for p in ps] == [p[key] for p in want[:25]],
                  f"GET {u}: ranked as the exact figures rank", [p[key] for p in ps][:5],
                  [p[key] for p in want[:5]])
            bad = [p["pid"] for p in ps if diff(px[p["pid"]], p)]
            check(not bad, f"GET {u}: the figures of every process listed are exact", bad[:5],
                  bad and diff(px[bad[0]], next(p for p in ps if p["pid"] == bad[0])))
finally:
    stop(proc)

shutil.rmtree(TMP, ignore_errors=True)
t.done()
