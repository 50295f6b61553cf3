#!/usr/bin/env python3
"""test_win_rundown.py - the "rundown" source under Wine: a VirtualQueryEx
walk of every process's committed private memory (MEM_COMMIT +
MEM_PRIVATE) and reserved private space (MEM_RESERVE + MEM_PRIVATE, as
`reserve` events), recorded as a trace and served by `run`.

A workload with a known figure: memorytestapp.exe --seconds 2 --delay 0
--hold runs its allocations, prints its pid and committed_private=BYTES
(the sum of its own MEM_COMMIT + MEM_PRIVATE regions, a VirtualQuery walk
in the process) and waits, unchanged, until its standard input closes.
Then, in the ctest run's shared prefix:

- `commitwatch.exe record --source rundown --out X.jsonl`: the workload's
  rundown commits sum exactly to committed_private; every process of the
  prefix that lived through the walk is there under its image name (as
  Wine's WMI, `wmic process`, names it); the regions are page-aligned and
  do not overlap, nor do the reserved regions overlap the committed ones;
  the log's counts (processes = walked + not opened, regions, bytes,
  reserved regions and bytes) are the trace's. Wine lets the prefix's administrator
  open every process, and a prefix has no System or protected process:
  "0 could not be opened" is what Wine gives (on Windows the System
  process, at least, is counted there).
- `commitwatch.exe run --source rundown --db D --listen ...`: stores and
  serves it: /api/processes, /api/processes/{id} and its stacks show the
  workload with committed_private outstanding, all "(before trace)".
- `commitwatch.exe analyze --source replay:TRACE` reads the recorded trace
  back (reserves carry no "rundown" flag: the format has it on commits).
"""
import json
import os
import re
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from cwtest import WaitTimeout, file_text, wait_until  # noqa: E402
from cwservice import BUILD, Checks, Service  # noqa: E402
import cwwine  # noqa: E402
from cwwine import MEMORYTESTAPP, cw, spawn, wmic_processes  # noqa: E402

S = 1_000_000_000
PAGE = 4096
t = Checks()
cwwine.require_wine(MEMORYTESTAPP)
out_dir = os.path.join(BUILD, "e2e-wine", "rundown")
os.makedirs(out_dir, exist_ok=True)
trace = os.path.join(out_dir, "rundown.jsonl")
for f in os.listdir(out_dir):
    os.remove(os.path.join(out_dir, f))


def q(path, **params):
    return path + "?" + urllib.parse.urlencode(params)


app_out = os.path.join(out_dir, "memorytestapp.out")
with open(app_out, "w") as out:
    app = spawn([MEMORYTESTAPP, "--seconds", "2", "--delay", "0", "--hold"], stdin=subprocess.PIPE,
                stdout=out, stderr=subprocess.STDOUT)
try:
    def done():
        if app.poll() is not None:
            raise RuntimeError(f"memorytestapp.exe exited with {app.returncode}: "
                               f"{file_text(app_out)}")
        return re.search(r"pid (\d+),.*\ncommitted_private=(\d+)\n", file_text(app_out), re.S)

    m = wait_until(done, 60, "memorytestapp.exe prints its pid and committed_private")
    pid, committed = int(m.group(1)), int(m.group(2))
    t.check("memorytestapp.exe: committed private memory above its 20 MB of VirtualAlloc",
            committed > 20 * 1024 * 1024, committed)

    # ---- record: the trace
    before = wmic_processes()
    rc, stdout, log = cw("record", "--source", "rundown", "--out", trace)
    after = wmic_processes()
    t.eq("record --source rundown: exit 0", (rc, stdout), (0, ""))
    lines = file_text(trace).splitlines()
    header = json.loads(lines[0]) if lines else {}
    evs = [json.loads(x) for x in lines[1:]]
    t.eq("trace header: Windows, 64-bit", (header.get("platform"), header.get("pointer_size")),
         ("windows", 8))
    starts = {e["pid"]: e for e in evs if e["op"] == "process_start"}
    commits = [e for e in evs if e["op"] == "commit"]
    reserves = [e for e in evs if e["op"] == "reserve"]
    t.check("the trace holds process starts, commits and reserves only, one start per process",
            len(evs) == len(starts) + len(commits) + len(reserves) and len(starts) == sum(
                1 for e in evs if e["op"] == "process_start"), sorted({e["op"] for e in evs}))
    t.check("every event at one time (the snapshot's)", len({e["ts"] for e in evs}) == 1,
            sorted({e["ts"] for e in evs})[:5])
    t.check("every commit is a rundown commit stacked \"(before trace)\", after its process's start",
            commits and all(c.get("rundown") is True and c.get("stack") == ["(before trace)"]
                            and c["pid"] in starts
                            and evs.index(starts[c["pid"]]) < evs.index(c) for c in commits),
            commits[:3])
    mine = [c for c in commits if c["pid"] == pid]
    t.eq(f"the workload (pid {pid}): its rundown commits sum to its committed_private",
         sum(c["size"] for c in mine), committed)
    t.eq(f"the workload (pid {pid}) is named memorytestapp.exe",
         starts.get(pid, {}).get("name"), "memorytestapp.exe")
    t.check("the workload's regions: several", len(mine) >= 3, len(mine))
    t.check("every reserve is stacked \"(before trace)\", not flagged rundown (a commit's flag only), "
            "after its process's start",
            all("rundown" not in r and r.get("stack") == ["(before trace)"] and r["pid"] in starts
                and evs.index(starts[r["pid"]]) < evs.index(r) for r in reserves), reserves[:3])
    t.check("the workload has reserved, uncommitted regions (its heap's)",
            any(r["pid"] == pid for r in reserves), len(reserves))
    # The recorded trace reads back (the format allows "rundown" on commits
    # only): analyze over it gives the workload its rundown commits.
    arc, aout, alog = cw("analyze", "--source", "replay:" + trace, "--json")
    t.eq("analyze --source replay: the recorded trace reads back: exit 0", (arc, alog[-300:] if arc else ""),
         (0, ""))
    if arc == 0:
        procs = {p["pid"]: p for p in json.loads(aout).get("processes", [])}
        t.eq(f"analyze of the trace: the workload (pid {pid}) outstanding at the end = its rundown "
             "commits", procs.get(pid, {}).get("outstanding_end_bytes"), committed)
    by_pid = {}
    for c in commits + reserves:  # committed and reserved regions never overlap
        by_pid.setdefault(c["pid"], []).append((int(c["addr"], 16), c["size"]))
    bad = []
    for p, regions in by_pid.items():
        regions.sort()
        for (a, n), (b, _) in zip(regions, regions[1:] + [(None, None)]):
            if a % PAGE or n <= 0 or n % PAGE or (b is not None and a + n > b):
                bad.append((p, hex(a), n))
    t.eq("regions (committed and reserved) are whole pages and never overlap within a process", bad, [])
    # Names: every process alive before and after the walk (the same pid
    # and name in both listings) is in the trace under that name.
    stable = {p: n for p, n in before.items() if after.get(p) == n}
    t.check("wmic lists the workload and Wine's services", stable.get(pid) == "memorytestapp.exe"
            and "services.exe" in stable.values(), stable)
    t.eq("every process alive through the walk is there, under its image name",
         {p: starts.get(p, {}).get("name") for p in stable}, stable)
    t.check("the recorder itself is there (commitwatch.exe)",
            "commitwatch.exe" in {e["name"] for e in starts.values()}, sorted(
                e["name"] for e in starts.values()))

    # The log's counts are the trace's; Wine opens every process.
    m = re.search(r"rundown: (\d+) processes, (\d+) walked \((\d+) committed private regions, "
                  r"(\d+) bytes; (\d+) reserved, (\d+) bytes\), (\d+) could not be opened", log)
    t.check("the log counts the walk", m is not None, log)
    if m:
        nproc, walked, nreg, nbytes, nres, nresbytes, unopened = map(int, m.groups())
        t.eq("log: reserved regions and bytes = the trace's reserves", (nres, nresbytes),
             (len(reserves), sum(r["size"] for r in reserves)))
        t.eq("log: processes = walked + could not be opened", nproc, walked + unopened)
        t.eq("log: walked = the trace's processes", walked, len(starts))
        t.eq("log: regions and bytes = the trace's commits", (nreg, nbytes),
             (len(commits), sum(c["size"] for c in commits)))
        t.eq("log: under Wine every process of the prefix can be opened", unopened, 0)

    # ---- run: stores and serves the snapshot
    with Service(None, name="rundown-run", source="rundown") as svc:
        st, h = svc.get("/api/health")
        t.eq("run --source rundown: health source", (st, h["source"], h["ingest_done"]),
             (200, "rundown", True))
        first = h["first_bucket_ns"]
        # Every instance ends with the run, at the start of the next second:
        # outstanding at the end of the snapshot's second is the rundown.
        win = {"from": first, "to": first + S}
        st, r = svc.get(q("/api/processes", name="memorytestapp", **win))
        got = [p for p in r.get("processes", []) if p["pid"] == pid]
        t.eq("/api/processes: the workload, once", [(p["pid"], p["name"]) for p in got],
             [(pid, "memorytestapp.exe")])
        if got:
            p = got[0]
            t.eq("/api/processes: outstanding = committed_private, all before the trace",
                 (p["outstanding_end_bytes"], p["types"]["AOFO"]["bytes"], p["size_bytes"],
                  p["commit_count"]), (committed, committed, 0, 0))
            t.eq("/api/processes: by tag", [(x["tag"]) for x in p["tags"]], ["(before trace)"])
            st, one = svc.get(q(f"/api/processes/{p['id']}", **win))
            t.eq("/api/processes/{id}: the same figures", one.get("process"), p)
            st, sk = svc.get(q(f"/api/processes/{p['id']}/stacks", **win))
            t.eq("/api/processes/{id}/stacks: one stack, (before trace), with it all",
                 [(s["frames"], s["types"]["AOFO"]["bytes"], s["types"]["AOFO"]["count"])
                  for s in sk.get("stacks", [])], [(["(before trace)"], committed, len(mine))])
            st, s = svc.get(q(f"/api/processes/{p['id']}/series", step="1s", **win))
            t.eq("/api/processes/{id}/series: outstanding at the end of the second",
                 s.get("outstanding_total"), [committed])
        st, r = svc.get(q("/api/processes", **win))
        t.check("/api/processes: every process of the walk that lived through it",
                {x["pid"]: x["name"] for x in r["processes"]}.items() >= stable.items(),
                (r["processes"], stable))
finally:
    try:
        app.stdin.close()
        app.wait(timeout=30)
    except (subprocess.TimeoutExpired, OSError, WaitTimeout):
        app.kill()
        app.wait()
t.eq("memorytestapp.exe exits 0 when its input closes", app.returncode, 0)
t.done()
