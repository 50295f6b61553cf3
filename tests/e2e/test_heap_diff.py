#!/usr/bin/env python3
"""test_heap_diff.py - snapshots and UMDH's diff (`commitwatch heap
--snapshot`, `heap diff`), and a trace stored with --db.

`heap --snapshot 100ms --json --db DB -- sh -c 'heap_truth E && sleep 0.5'`
traces tests/programs/heap_truth (and the shell and sleep around it):
snapshots every 100 ms, so at least one after heap_truth has ended. Then:

- the diff from the start to the end gives, at the leaking function,
  exactly the bytes and blocks heap_truth leaked (its own figures), and
  nothing at the churning one;
- from the last snapshot (heap_truth already ended) to the end, nothing of
  heap_truth changed;
- the default diff (the first snapshot to the end) prints as text;
- the trace stored in DB (trigger cli, its heap_stacks rows of layer heap)
  diffs to the very same JSON (`heap diff --db DB --trace ID`);
- errors: a point that does not exist, no report given, a file that is not
  a heap report, a trace not in the database.

Environment: CW_BIN, CW_BUILD. Linux only. Standard library only.
"""
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import Checks  # noqa: E402
from cwtest import require  # noqa: E402
from heaptruth import BIN, TRUTH  # noqa: E402

TMP = tempfile.mkdtemp(prefix="cw_e2e_heap_diff_")
require(sys.platform.startswith("linux"), "Linux (launch mode)")
require(os.path.exists(TRUTH), f"{TRUTH} (built with the tests)")
c = Checks()


def heap(*args):
    return subprocess.run([BIN, "heap", *args], capture_output=True, text=True, timeout=120)


def at(diff, fn, pid=None):
    """(bytes, blocks) growth summed over the diff's stacks through fn."""
    b = n = 0
    for s in diff["stacks"]:
        if ("heap_truth!" + fn) in s["frames"] and (pid is None or s["pid"] == pid):
            b += s["bytes_delta"]
            n += s["count_delta"]
    return b, n


expect, db = os.path.join(TMP, "expect.json"), os.path.join(TMP, "h.db")
p = heap("--snapshot", "100ms", "--json", "--db", db, "--", "sh", "-c",
         f"{TRUTH} {expect} && sleep 0.5")
c.eq("heap --snapshot --db exits 0", p.returncode, 0)
c.check("it says where the trace was stored", "stored as heap trace 1 in" in p.stderr, p.stderr)
report = os.path.join(TMP, "r.json")
with open(report, "w") as f:
    f.write(p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "")
r = json.load(open(report))
want = json.load(open(expect))
truth_pid = [x["pid"] for x in r["processes"] if x["name"] == "heap_truth"]
c.eq("the report has heap_truth", len(truth_pid), 1)
c.check("snapshots were taken (at least 5 in the 0.5 s after heap_truth)",
        len(r["snapshots"]) >= 5, f"{len(r['snapshots'])}")
c.check("their times rise", all(a["ts_ns"] < b["ts_ns"] for a, b in
                                zip(r["snapshots"], r["snapshots"][1:])))

p = heap("diff", report, "--a", "start", "--b", "end", "--json")
c.eq("heap diff start..end exits 0", p.returncode, 0)
d = json.loads(p.stdout)
c.eq("start..end: the leak's growth is exactly what heap_truth leaked",
     at(d, want["leak"]["function"]),
     (want["leak"]["outstanding_bytes"], want["leak"]["outstanding_count"]))
c.eq("start..end: nothing at the churning function", at(d, want["churn"]["function"]), (0, 0))
c.check("start..end: largest growth first", all(a["bytes_delta"] >= b["bytes_delta"] for a, b in
                                                zip(d["stacks"], d["stacks"][1:])))
last = str(len(r["snapshots"]))
p = heap("diff", report, "--a", last, "--b", "end", "--json")
d2 = json.loads(p.stdout) if p.returncode == 0 else {"stacks": []}
c.eq("last snapshot..end: nothing of heap_truth changed (it had ended)",
     [s for s in d2["stacks"] if s["pid"] == truth_pid[0]], [])
p = heap("diff", report, "--top", "1")
c.eq("the default diff (first snapshot to end) exits 0", p.returncode, 0)
c.check("... and prints the points and one stack", p.stdout.startswith("heap diff: 1 -> end:") and
        "more stacks; --json lists all" in p.stdout, p.stdout[:300])

con = sqlite3.connect(db)
row = con.execute("SELECT trigger, state, pid, report IS NOT NULL FROM heap_traces WHERE id = 1"
                  ).fetchone()
n = con.execute("SELECT count(*) FROM heap_stacks WHERE trace = 1 AND layer = 'heap'").fetchone()[0]
con.close()
c.eq("the stored trace: cli, done, with its report", row and (row[0], row[1], row[3]),
     ("cli", "done", 1))
c.check("... and its stacks in heap_stacks, layer heap", n > 0, f"{n}")
p = heap("diff", "--db", db, "--trace", "1", "--a", "start", "--b", "end", "--json")
c.eq("heap diff --db --trace: the same diff as from the saved report",
     json.loads(p.stdout) if p.returncode == 0 else p.stderr, d)

p = heap("diff", report, "--a", "999")
c.eq("a point that does not exist: exit 1", p.returncode, 1)
c.check("... naming the points there are", f"snapshot from 1 to {last}" in p.stderr, p.stderr)
p = heap("diff")
c.eq("no report: exit 2", p.returncode, 2)
notrep = os.path.join(TMP, "other.json")
open(notrep, "w").write('{"processes": []}')
p = heap("diff", notrep)
c.eq("not a heap report: exit 1", p.returncode, 1)
c.check("... said so", "not a heap report" in p.stderr, p.stderr)
p = heap("diff", "--db", db, "--trace", "5")
c.eq("a trace not in the database: exit 1", p.returncode, 1)
c.check("... said so", "no heap trace 5" in p.stderr, p.stderr)
p = heap("--snapshot", "0s", "--", TRUTH, expect)
c.eq("a bad --snapshot: exit 2", p.returncode, 2)
c.done()
