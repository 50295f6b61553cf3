"""test_tracking_ended.py - an imported trace reads as it happened
(DESIGN.md, "End of a run").

The MemoryTestApp fixture is replayed into `run --db` as a new user would:
svchost.exe and notepad.exe are alive when it ends, MemoryTestApp.exe and
cmd.exe exit in it. After the replay:

- /api/processes (the dashboard's default window, and the whole data) and
  the per-process endpoints show the processes alive at the end as alive
  there (exit_ns null, tracking_ended_ns = the end of the data), with the
  figures `analyze --source replay:FILE` gives for the same trace, and so
  does `analyze --db`;
- a real exit still shows as an exit;
- a window reaching past the end of the data is clipped to it, with a
  note (processes, one process, series);
- a second run into the same database (a restart: its rundown finds the
  same memory and starts new instances) never counts that memory twice:
  the machine's series, the sum over processes and the new instances
  agree, and the first run's instances stay "tracking ended", not exited.
"""

import json
import os
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, BUILD, MTA, Checks, Service, require_fixture  # noqa: E402

require_fixture()

S = 1_000_000_000
FIGS = ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes", "transient_count",
        "peak_outstanding_bytes", "peak_ns", "outstanding_end_bytes", "events", "types")
t = Checks()


def q(path, **params):
    return path + ("?" + urllib.parse.urlencode(params) if params else "")


def analyze(*args):
    out = subprocess.run([BIN, "analyze", *args, "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def by_key(procs):
    return {(p["pid"], p["name"], p["start_ns"]): p for p in procs}


def figs(p):
    return {k: p[k] for k in FIGS}


with open(MTA) as f:
    header = f.readline()
    events = [json.loads(line) for line in f if line.strip()]
# `run` ends tracking at the start of the bucket after the last event.
ENDED = (events[-1]["ts"] // S + 1) * S
exits = {e["pid"]: e["ts"] for e in events if e["op"] == "process_exit"}

# The exact analyzer over the whole trace: what "as it happened" means.
X = analyze("--source", f"replay:{MTA}")
XK = by_key(X["processes"])
alive_x = sorted(k for k, p in XK.items() if p["exit_ns"] is None)
t.eq("analyze --source: svchost.exe and notepad.exe are alive at the end of the trace",
     sorted(k[1] for k in alive_x), ["notepad.exe", "svchost.exe"])
t.check("analyze --source: they hold memory at the end",
        all(XK[k]["outstanding_end_bytes"] > 0 for k in alive_x), [XK[k] for k in alive_x])

with Service(MTA, name="tracking-ended") as svc:
    db = svc.db
    st, h = svc.get("/api/health")
    t.eq("health: the data ends where tracking ended",
         (h["data_end_ns"], h["tracking_ended_ns"], h["last_bucket_end_ns"]), (ENDED, ENDED, ENDED + S))

    # The dashboard's default window (the hour before "now", the end of the
    # data for a replay) and the whole data: every process as it happened.
    for what, params in (("default window", {}),
                         ("whole data", {"from": h["first_bucket_ns"], "to": "now"})):
        st, r = svc.get(q("/api/processes", **params))
        t.eq(f"{what}: 200, ends at the end of the data", (st, r["window"]["to_ns"]), (200, ENDED))
        got = by_key(r["processes"])
        t.eq(f"{what}: the trace's processes", sorted(got), sorted(XK))
        for k, p in XK.items():
            g = got.get(k)
            if g is None:
                continue
            t.eq(f"{what}: {k[1]}: the figures of analyze --source", figs(g), figs(p))
            if p["exit_ns"] is None:
                t.eq(f"{what}: {k[1]}: alive where tracking ended",
                     (g["exit_ns"], g["tracking_ended_ns"]), (None, ENDED))
            else:
                t.eq(f"{what}: {k[1]}: a real exit stays an exit",
                     (g["exit_ns"], g["tracking_ended_ns"]), (exits[k[0]], None))

    # One process: its row, its window figures and its series.
    st, r = svc.get(q("/api/processes", **{"from": h["first_bucket_ns"], "to": "now"}))
    ids = {(p["pid"], p["name"], p["start_ns"]): p["id"] for p in r["processes"]}
    for k in alive_x + [k for k in XK if k[1] == "MemoryTestApp.exe"]:
        iid, p = ids[k], XK[k]
        st, one = svc.get(q(f"/api/processes/{iid}", **{"from": h["first_bucket_ns"], "to": "now"}))
        t.eq(f"process/{iid} {k[1]}: figures of analyze --source", figs(one["process"]), figs(p))
        t.eq(f"process/{iid} {k[1]}: exit / tracking ended",
             (one["process"]["exit_ns"], one["process"]["tracking_ended_ns"]),
             (p["exit_ns"], ENDED if p["exit_ns"] is None else None))
        st, s = svc.get(q(f"/api/processes/{iid}/series",
                          **{"from": h["first_bucket_ns"], "to": ENDED + 30 * S, "step": "1s"}))
        t.eq(f"series {k[1]}: clipped to the end of the data", s["window"]["to_ns"], ENDED)
        t.check(f"series {k[1]}: with a note", "tracking ended" in s.get("note", ""), s.get("note"))
        t.eq(f"series {k[1]}: the last step holds what it held at the end",
             s["outstanding_total"][-1], p["outstanding_end_bytes"])
        t.eq(f"series {k[1]}: who", (s["process"]["exit_ns"], s["process"]["tracking_ended_ns"]),
             (p["exit_ns"], ENDED if p["exit_ns"] is None else None))

    # Past the end of the data: clipped, with a note; after it: nothing.
    st, r = svc.get(q("/api/processes", **{"from": h["first_bucket_ns"], "to": ENDED + 3600 * S}))
    t.eq("past the end: clipped to it", r["window"]["to_ns"], ENDED)
    t.check("past the end: a note", "tracking ended" in r.get("note", ""), r.get("note"))
    t.eq("past the end: the same figures",
         {k: figs(p) for k, p in by_key(r["processes"]).items()}, {k: figs(p) for k, p in XK.items()})
    iid = ids[alive_x[0]]
    st, r = svc.get(q(f"/api/processes/{iid}", **{"from": h["first_bucket_ns"], "to": ENDED + 60 * S}))
    t.check("one process past the end: clipped with a note",
            r["window"]["to_ns"] == ENDED and "tracking ended" in r.get("note", ""), r.get("window"))
    st, r = svc.get(q("/api/processes", **{"from": ENDED, "to": ENDED + 60 * S}))
    t.eq("after the end: nothing is known", (st, r["processes"]), (200, []))
    st, s = svc.get(q("/api/system/series", **{"from": h["first_bucket_ns"], "to": ENDED + 60 * S,
                                              "step": "1s"}))
    t.eq("machine series: ends with what the processes held at the end",
         s["outstanding_total"][-1], sum(p["outstanding_end_bytes"] for p in X["processes"]))

# analyze --db over the whole database is analyze --source over the trace.
Y = analyze("--db", db)
t.eq("analyze --db: the whole database ends where tracking ended", Y["window"]["to_ns"], ENDED)
t.eq("analyze --db: the processes and figures of analyze --source",
     {k: figs(p) | {"exit_ns": p["exit_ns"]} for k, p in by_key(Y["processes"]).items()},
     {k: figs(p) | {"exit_ns": p["exit_ns"]} for k, p in XK.items()})
t.eq("analyze --db: alive where tracking ended",
     sorted(k for k, p in by_key(Y["processes"]).items() if p["tracking_ended_ns"] == ENDED), alive_x)
# A window past the end: clipped, with the note in the JSON and the text.
Y = analyze("--db", db, "--from", str(Y["window"]["from_ns"]), "--to", str(ENDED + 3600 * S))
t.check("analyze --db past the end: clipped to it, with a note",
        Y["window"]["to_ns"] == ENDED and "clipped to the end of the data" in Y.get("note", ""), Y.get("note"))
out = subprocess.run([BIN, "analyze", "--db", db, "--from", str(Y["window"]["from_ns"]), "--to",
                      str(ENDED + 3600 * S)], capture_output=True, text=True)
t.check("analyze --db past the end, text: the note is printed",
        out.returncode == 0 and "Note:" in out.stdout and "clipped to the end of the data" in out.stdout,
        out.stdout[:400] + out.stderr)

# ---- a second run into the same database: a restart. Its rundown finds
# what svchost.exe and notepad.exe held (same pids, new instances), and
# svchost.exe commits one more page.
T2 = ENDED + 100 * S
held = {k[0]: (k[1], XK[k]["outstanding_end_bytes"]) for k in alive_x}
lines = [header.strip()]
for pid, (name, nbytes) in sorted(held.items()):
    lines.append(json.dumps({"ts": T2, "op": "process_start", "pid": pid, "name": name}))
    lines.append(json.dumps({"ts": T2, "op": "commit", "pid": pid, "addr": "0x7f0000000000",
                             "size": nbytes, "stack": ["(before trace)"], "rundown": True}))
svc_pid = next(pid for pid, (n, _) in held.items() if n == "svchost.exe")
lines.append(json.dumps({"ts": T2 + 3 * S, "op": "commit", "pid": svc_pid, "addr": "0x10000",
                         "size": 4096, "stack": ["svchost.exe!main", "KernelBase.dll!VirtualAlloc"]}))
trace2 = os.path.join(BUILD, "e2e-http", "tracking-ended-restart.jsonl")
with open(trace2, "w") as f:
    f.write("\n".join(lines) + "\n")
ENDED2 = T2 + 4 * S
run2 = Service(trace2, name="tracking-ended-restart")
run2.db = db  # the same database: a restart
with run2 as svc:
    st, h = svc.get("/api/health")
    t.eq("restart: the data now ends where the second run ended tracking",
         (h["data_end_ns"], h["tracking_ended_ns"]), (ENDED2, ENDED2))
    total2 = sum(n for _, n in held.values()) + 4096
    st, r = svc.get(q("/api/processes", **{"from": h["first_bucket_ns"], "to": "now"}))
    procs = r["processes"]
    for name in ("svchost.exe", "notepad.exe"):
        inst = sorted((p for p in procs if p["name"] == name), key=lambda p: p["start_ns"])
        t.eq(f"restart: {name}: two instances, the second started by the rundown",
             [p["start_ns"] for p in inst][-1:], [T2])
        if len(inst) == 2:
            old, new = inst
            t.eq(f"restart: {name}: the first run's instance ended with its tracking, not exited",
                 (old["exit_ns"], old["tracking_ended_ns"], old["outstanding_end_bytes"]), (None, ENDED, 0))
            t.eq(f"restart: {name}: the new instance holds the memory once",
                 (new["exit_ns"], new["tracking_ended_ns"], new["outstanding_end_bytes"]),
                 (None, ENDED2, held[new["pid"]][1] + (4096 if name == "svchost.exe" else 0)))
    t.eq("restart: the processes hold the memory once", sum(p["outstanding_end_bytes"] for p in procs), total2)
    st, s = svc.get(q("/api/system/series", **{"from": h["first_bucket_ns"], "to": "now", "step": "1s"}))
    tot = dict(zip(s["t"], s["outstanding_total"]))
    t.eq("restart: the machine series at the end counts the memory once", s["outstanding_total"][-1], total2)
    t.eq("restart: the machine series between the runs counts nothing",
         {v for ts, v in tot.items() if ENDED <= ts < T2 - S}, {0})
    t.check("restart: the machine series never holds both runs' memory",
            max(v for ts, v in tot.items() if ts >= ENDED) <= total2, max(s["outstanding_total"]))
    # The first run's windows keep their figures.
    st, r = svc.get(q("/api/processes", **{"from": events[0]["ts"] // S * S, "to": ENDED}))
    t.eq("restart: the first run's window still reads as it happened",
         {k: figs(p) for k, p in by_key(r["processes"]).items()}, {k: figs(p) for k, p in XK.items()})

t.done()
