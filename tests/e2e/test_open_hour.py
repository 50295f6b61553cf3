#!/usr/bin/env python3
"""test_open_hour.py - the open hour's cells (docs/DESIGN.md, "The open
hour") give the answers the minute cells give, through the real binary.

An hour and a half of 300 live processes (the read-path benchmark's
generator, bench/busy_trace.py: a closed hour, then 56 minutes of an
open one) is replayed into a database by `run`. Then:

- the database holds the open hour's state: a `tiers` row of tier 3
  from the hour tier's end to the minute tier's end, and a cell of tier 3
  for each process with a minute cell in that stretch;
- a copy of the database without that row (so its readers read the
  minute cells, as a database of an older build is read) gives the same
  `analyze --db --json --stacks` output, byte for byte, for the whole
  database, the open hour, the last 24 h and windows from an hour
  boundary to the end of the data;
- both databases served by `serve --db` give the same /api/processes
  lists (the last minute, 10 and 30 minutes, the day; a fresh handle
  each, so the keys cache fills afresh from the open hour downwards) and
  `/api/processes?sort=transient` (the whole-day report);
- a further run of the service on the database (reopened inside the
  hour) deletes the state it cannot vouch for: no tier-3 row or cell is
  left, and its answers are the copy's after the same run.
"""
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cwservice import Checks, live_db, serve_db, sql_one as one  # noqa: E402
from cwtest import stop  # noqa: E402

S = 1_000_000_000
H = 3600 * S
t = Checks()
TMP = tempfile.mkdtemp(prefix="cw_open_hour_")


def check(cond, what, *context):
    return t.check(what, cond, " | ".join(str(c)[:1500] for c in context))


cli = t.cli


trace, db = live_db(t, TMP, 300, 90)

# ---- the state the writer left -------------------------------------------------
row = one(db, "SELECT start_ns, end_ns FROM tiers WHERE tier = 3")
h_end, m_end = one(db, "SELECT (SELECT end_ns FROM tiers WHERE tier = 2), "
                       "(SELECT end_ns FROM tiers WHERE tier = 1)")
check(row is not None and row == (h_end, m_end) and h_end % H == 0 and m_end - h_end > 30 * 60 * S,
        "a tiers row of tier 3: from the hour tier's end to the minute tier's", row, (h_end, m_end))
cells, procs = one(db, f"SELECT (SELECT count(*) FROM cells WHERE tier = 3 AND bucket = {h_end}), "
                       f"(SELECT count(DISTINCT proc) FROM cells WHERE tier = 1 AND bucket >= {h_end} "
                       f"AND bucket < {m_end} AND layer = 0)")
check(cells == procs and cells >= 300, "a cell of tier 3 for each process of the open hour's minutes",
        cells, procs)

# A copy whose readers read the minute cells.
ref = os.path.join(TMP, "minutes.db")
src = sqlite3.connect(db)
dst = sqlite3.connect(ref)
src.backup(dst)
src.close()
dst.execute("DELETE FROM tiers WHERE tier = 3")
dst.commit()
dst.close()

end = one(db, "SELECT max(bucket) FROM cells WHERE tier = 0")[0] + S
first_hour = h_end - H
windows = [None, (h_end, end), (end - 24 * H, end), (first_hour, end), (h_end, end + H),
           (first_hour, h_end + 20 * 60 * S), (h_end, h_end + 40 * 60 * S)]


def analyze(path, w):
    args = ["analyze", "--db", path, "--json", "--stacks"]
    if w:
        args += ["--from", str(w[0]), "--to", str(w[1])]
    return cli(*args)


for w in windows:
    a, b = analyze(db, w), analyze(ref, w)
    check(a == b, f"analyze --db {w}: the same with the open hour's cells as with the minutes",
            a[:1500], b[:1500])
    check(len(json.loads(a)["processes"]) >= 300, f"analyze --db {w}: every live process")


# ---- the HTTP lists ------------------------------------------------------------
def serving(path):
    return serve_db(path, os.path.join(TMP, os.path.basename(path) + ".log"))


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=60) as r:
        return r.read()


urls = [f"/api/processes?from={end - span}&to={end}&limit={lim}"
        for span in (60 * S, 10 * 60 * S, 30 * 60 * S, 24 * H) for lim in (5, 50)]
urls.append(f"/api/processes?from={end - 24 * H}&to={end}&limit=20&sort=transient")
urls.append("/api/processes?limit=100")


def lists(path):
    """Each URL on a fresh serve (a fresh handle: its caches fill afresh),
    then all of them again on the same one (caches moving on)."""
    out = []
    for u in urls[:3]:
        proc, base = serving(path)
        try:
            out.append(get(base, u))
        finally:
            stop(proc)
    proc, base = serving(path)
    try:
        out += [get(base, u) for u in urls]
    finally:
        stop(proc)
    return out


la, lb = lists(db), lists(ref)
for i, (x, y) in enumerate(zip(la, lb)):
    u = (urls[:3] + urls)[i]
    check(x == y, f"GET {u}: the same with the open hour's cells as with the minutes",
            x[:800], y[:800])
check(all(len(json.loads(x)["processes"]) > 0 for x in la), "every list names processes")

# ---- reopened inside the hour --------------------------------------------------
# The next run continues after the data's end (a new process committing
# twice, 10 s and 70 s after it, so a minute closes): its first batch
# deletes the state of the earlier run, which it cannot vouch for, and
# the hour it reopened in is read from its minutes from then on.
with open(trace) as f:
    header = f.readline()
more = os.path.join(TMP, "more.jsonl")
with open(more, "w") as f:
    f.write(header)
    f.write(json.dumps({"ts": end + 10 * S, "op": "process_start", "pid": 99999, "name": "late",
                        "cmdline": "late"}) + "\n")
    for k, dt in enumerate((10, 70)):
        f.write(json.dumps({"ts": end + dt * S, "op": "commit", "pid": 99999,
                            "addr": 0x10000000 + k * 0x100000, "size": 65536,
                            "stack": ["late!main", "libc.so.6!mmap"]}) + "\n")
cli("run", "--no-http", "--source", "replay:" + more, "--db", db)
cli("run", "--no-http", "--source", "replay:" + more, "--db", ref)
left = one(db, "SELECT (SELECT count(*) FROM tiers WHERE tier = 3), "
               "(SELECT count(*) FROM cells WHERE tier = 3)")
check(left == (0, 0), "reopened: the earlier run's open-hour state is deleted", left)
check(one(db, "SELECT end_ns FROM tiers WHERE tier = 1")[0] > m_end, "reopened: a minute closed")
for w in (None, (first_hour, end + 2 * 60 * S), (h_end, end)):
    check(analyze(db, w) == analyze(ref, w), f"reopened: the window {w} reads as the minutes say")

shutil.rmtree(TMP, ignore_errors=True)
t.done()
