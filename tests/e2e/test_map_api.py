"""test_map_api.py - GET /api/processes/{id}/map (issue 14; DESIGN.md,
"Memory maps") against the real binary.

- Stored snapshots: the MemoryTestApp fixture replayed into a database.
  Its ranges are sorted and never overlap and sum to committed_bytes; the
  difference between the snapshot before the 10 MB step and the one
  after holds a new 10 MB range of `main`'s direct VirtualAlloc, and
  new - freed equals the change of committed bytes; the map is the
  latest snapshot at or before `at`. Bad parameters are 400s naming the
  parameter, an unknown process or an instant before any snapshot 404s.
- Reserved-but-uncommitted space: for every process and snapshot, the
  `reserved` columns are exactly the trace's reserved space minus its
  committed space (a reserve reserves, so does a commit; a decommit leaves
  its range reserved; a release or the exit drops it), computed here by
  plain interval arithmetic; svchost's heap decommits leave some.
- Live: the same fixture paced at real time; the map of the running
  MemoryTestApp.exe comes from the core thread (source "live") and agrees
  with the trace replayed up to its time.
"""

import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import MTA, Checks, Service, require_fixture  # noqa: E402

require_fixture()

S = 1_000_000_000
MB = 1 << 20
t = Checks()


def q(path, **params):
    return path + ("?" + urllib.parse.urlencode(params) if params else "")


def trace_events():
    with open(MTA) as f:
        return [json.loads(line) for line in f][1:]


def cut(ranges, a, b):
    out = []
    for s, x in ranges:
        if x <= a or s >= b:
            out.append((s, x))
        else:
            if s < a:
                out.append((s, a))
            if x > b:
                out.append((b, x))
    return out


def committed_at(events, pid, at):
    """Committed bytes of pid's first instance from the trace, events before at."""
    ranges = []  # [start, end) list, exact interval arithmetic
    for e in events:
        if e["ts"] >= at or e.get("pid") != pid:
            continue
        if e["op"] in ("commit", "decommit", "release"):
            a = int(e["addr"], 16)
            b = a + e["size"]
            ranges = cut(ranges, a, b) + ([(a, b)] if e["op"] == "commit" else [])
        elif e["op"] == "process_exit":
            ranges = []
    return sum(x - s for s, x in ranges)


def merged(ranges):
    out = []
    for s, x in sorted(ranges):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], x))
        else:
            out.append((s, x))
    return out


def reserved_at(events, pid, at):
    """pid's reserved-but-uncommitted address space from the trace, events
    before at, as merged [start, end) intervals."""
    com, res = [], []
    for e in events:
        if e["ts"] >= at or e.get("pid") != pid:
            continue
        if e["op"] == "process_exit":
            com, res = [], []
            continue
        if e["op"] not in ("commit", "decommit", "release", "reserve"):
            continue
        a = int(e["addr"], 16)
        b = a + e["size"]
        if e["op"] in ("commit", "reserve"):
            res = merged(res + [(a, b)])
        if e["op"] == "commit":
            com = merged(com + [(a, b)])
        elif e["op"] == "decommit":
            com = cut(com, a, b)
            res = merged(res + [(a, b)])
        elif e["op"] == "release":
            com = cut(com, a, b)
            res = cut(res, a, b)
    for s, x in com:
        res = cut(res, s, x)
    return merged(res)


def well_formed(name, m):
    r = m["ranges"]
    n = r["count"]
    ok = all(len(r[k]) == n for k in ("addr", "size", "commit_ns", "stack"))
    ok = ok and all(r["addr"][i] + r["size"][i] <= r["addr"][i + 1] for i in range(n - 1))
    t.check(f"{name}: ranges sorted by address, not overlapping, columns of one length", ok)
    t.eq(f"{name}: committed_bytes is the ranges' sum", m["committed_bytes"], sum(r["size"]))
    rv = m["reserved"]
    nr = rv["count"]
    ok = rv["state"] == "reserved" and all(len(rv[k]) == nr for k in ("addr", "size", "reserve_ns", "stack"))
    ok = ok and all(rv["addr"][i] + rv["size"][i] <= rv["addr"][i + 1] for i in range(nr - 1))
    t.check(f"{name}: reserved ranges sorted by address, not overlapping, columns of one length", ok)
    com = [(r["addr"][i], r["addr"][i] + r["size"][i]) for i in range(n)]
    overlap = [i for i in range(nr) if cut(com, rv["addr"][i], rv["addr"][i] + rv["size"][i]) != com]
    t.check(f"{name}: no reserved range overlaps a committed one", not overlap, overlap[:5])
    t.eq(f"{name}: reserved_bytes is the reserved ranges' sum", m["reserved_bytes"], sum(rv["size"]))
    t.check(f"{name}: every stack listed with a tag",
            {s["id"] for s in m["stacks"]} == set(r["stack"]) | set(rv["stack"])
            and all(s["tag"] for s in m["stacks"]))


events = trace_events()
mta_pid = next(e["pid"] for e in events if e["op"] == "process_start" and e["name"] == "MemoryTestApp.exe")

with Service(MTA, name="map-api") as svc:
    st, h = svc.get("/api/health")
    st, procs = svc.get(q("/api/processes", **{"from": h["first_bucket_ns"], "to": "now"}))
    pid_of = {p["name"]: p["id"] for p in procs["processes"]}
    mid = pid_of["MemoryTestApp.exe"]
    st, m = svc.get(f"/api/processes/{mid}/map")
    t.eq("default: 200", st, 200)
    t.eq("an ended run's map is stored, not live", m["source"], "stored")
    snaps = m["snapshots_ns"]
    t.check("snapshots before and after the step", len(snaps) >= 2 and snaps[0] < snaps[-1], snaps)
    well_formed("latest", m)
    for at in snaps:
        st, mm = svc.get(q(f"/api/processes/{mid}/map", at=at + S // 2))
        t.eq(f"at {at} + 0.5 s: the snapshot at {at}", mm["map_ns"], at)
        t.eq(f"snapshot {at}: committed bytes as the trace says", mm["committed_bytes"],
             committed_at(events, mta_pid, at))
    before, after = snaps[0], snaps[-1]
    st, d = svc.get(q(f"/api/processes/{mid}/map", t1=before, t2=after))
    t.eq("diff: 200", st, 200)
    r = d["ranges"]
    new10 = [i for i in range(r["count"]) if r["change"][i] == "new" and r["size"][i] == 10 * MB]
    t.eq("diff: one new 10 MB range", len(new10), 1)
    if new10:
        stk = next(s for s in d["stacks"] if s["id"] == r["stack"][new10[0]])
        t.check("diff: it is main's direct VirtualAlloc",
                stk["tag"] == "VirtualAlloc" and any(f.endswith("!main") for f in stk["frames"])
                and not any("ManipulateTemporaryBuffer" in f for f in stk["frames"]), stk)
        t.check("diff: committed between the two snapshots", before <= r["commit_ns"][new10[0]] < after)
    st, m1 = svc.get(q(f"/api/processes/{mid}/map", at=before))
    st, m2 = svc.get(q(f"/api/processes/{mid}/map", at=after))
    t.eq("diff: new - freed is the change of committed bytes",
         d["bytes"]["new"] - d["bytes"]["freed"], m2["committed_bytes"] - m1["committed_bytes"])
    t.eq("diff: kept + freed is the t1 map", d["bytes"]["kept"] + d["bytes"]["freed"], m1["committed_bytes"])
    t.eq("diff: kept + new is the t2 map", d["bytes"]["kept"] + d["bytes"]["new"], m2["committed_bytes"])

    for params, want in (({"at": before, "t1": before, "t2": after}, "at:"),
                         ({"t1": before}, "t2:"), ({"t2": after}, "t1:"),
                         ({"t1": after, "t2": before}, "t1:"), ({"at": "yesterday-ish"}, "at:"),
                         ({"frames": 1}, "frames")):
        st, e = svc.get(q(f"/api/processes/{mid}/map", **params))
        t.check(f"400 for {params} naming {want}", st == 400 and e["error"].startswith(want), (st, e))
    # Reserved space, every process and snapshot, against the trace.
    pids = {p["name"]: p["pid"] for p in procs["processes"]}
    nonempty = 0
    for name, pid_id in pid_of.items():
        st, pm = svc.get(f"/api/processes/{pid_id}/map")
        if st != 200:
            continue
        for at in pm["snapshots_ns"]:
            st, mm = svc.get(q(f"/api/processes/{pid_id}/map", at=at))
            rv = mm["reserved"]
            got = merged((rv["addr"][i], rv["addr"][i] + rv["size"][i]) for i in range(rv["count"]))
            want = reserved_at(events, pids[name], at)
            t.eq(f"{name} at {at}: reserved-but-uncommitted space as the trace says", got, want)
            nonempty += bool(want)
    t.check("some snapshots hold reserved space (svchost's decommitted heap pages)", nonempty > 0, nonempty)
    # A reserved range's time and stack: svchost.exe reserved nothing by
    # itself; its reserved pages were reserved by commits (decommitted
    # since), so each carries the time and stack of one of its commits.
    st, pm = svc.get(f"/api/processes/{pid_of['svchost.exe']}/map")
    rv = pm["reserved"]
    commit_ts = {e["ts"] for e in events if e.get("pid") == pids["svchost.exe"] and e["op"] == "commit"}
    t.check("reserved: svchost.exe holds reserved pages at the end", rv["count"] > 0, rv["count"])
    t.check("reserved: each time is one of svchost's commits'", set(rv["reserve_ns"]) <= commit_ts,
            sorted(set(rv["reserve_ns"]) - commit_ts))
    t.check("reserved: their stacks listed with frames",
            all(s["frames"] for s in pm["stacks"] if s["id"] in set(rv["stack"])))
    st, d2 = svc.get(q(f"/api/processes/{pid_of['svchost.exe']}/map", t1=pm["snapshots_ns"][0], t2=pm["snapshots_ns"][-1]))
    t.eq("diff: reserved columns of the t2 map", d2["reserved"]["addr"], rv["addr"])
    t.eq("diff: reserved_bytes of the t2 map", d2["reserved_bytes"], pm["reserved_bytes"])

    st, oa = svc.get("/api/openapi.json")
    mp = oa.get("paths", {}).get("/api/processes/{id}/map", {}).get("get", {})
    t.eq("openapi documents the map with at, t1, t2",
         sorted(p["name"] for p in mp.get("parameters", [])), ["at", "id", "t1", "t2"])
    t.check("openapi documents the reserved columns",
            "reserve_ns" in json.dumps(mp.get("responses", {}).get("200", {})))
    st, e = svc.get("/api/processes/999/map")
    t.check("404 for an unknown process", st == 404 and "999" in e["error"], (st, e))
    st, e = svc.get(q(f"/api/processes/{mid}/map", at=before - 1))
    t.check("404 before the first snapshot, saying what is kept", st == 404 and "retention" in e["error"], (st, e))

# Live: the fixture at real time; MemoryTestApp.exe's map from the core thread.
with Service(MTA, name="map-api-live", wait_done=False, args=["--rebase-now", "--speed", "1"]) as live:
    got = None
    deadline = time.time() + 40
    while time.time() < deadline:
        st, procs = live.get(q("/api/processes", **{"from": "-1h", "to": "now"}))
        ids = [p["id"] for p in procs.get("processes", []) if p["name"] == "MemoryTestApp.exe"] if st == 200 else []
        if ids:
            st, m = live.get(f"/api/processes/{ids[0]}/map")
            if st == 200 and m["source"] == "live" and m["committed_bytes"] >= 20 * MB:
                got = m
                break
        time.sleep(0.3)
    t.check("live: a map from the core thread once the step is in", got is not None)
    if got:
        well_formed("live", got)
        # The replay is rebased: compare with the trace shifted to its start.
        st, info = live.get(f"/api/processes/{ids[0]}")
        shift = info["process"]["start_ns"] - next(e["ts"] for e in events if e["op"] == "process_start"
                                                   and e["pid"] == mta_pid)
        t.eq("live: committed bytes as the trace says at the map's time", got["committed_bytes"],
             committed_at(events, mta_pid, got["map_ns"] - shift))

t.done()
