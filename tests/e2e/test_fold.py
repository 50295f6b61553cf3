#!/usr/bin/env python3
"""End-to-end: short-lived processes stored folded (docs/DESIGN.md,
"Short-lived processes"), with the real binary and its default settings
(fold_lifetime 2 s, fold_size 4 MiB).

A generated trace: a long-lived server, a shell spawning 300 `true`
instances (50 ms, 8-24 KiB each) and 40 `date` ones, a `cc1` that lives
15 s, a `convert` that commits 8 MiB in half a second, a `lonely` short
process alone of its name, and a `sleep` alive at the end. Replayed into a
database, then:
  - `analyze --db` gives the machine's figures and every name's figures of
    `analyze --source` over the same trace (sums over the lines), and one
    line each for `true` and `date` (pid 0, "folded": the count), while
    cc1, convert, lonely, sleep, the server and the shell are their own
    lines with the analyzer's figures (peak included);
  - the database has a processes row per group, not per instance;
  - /api/processes lists the groups; /api/processes/{id}/instances lists a
    group's instances (pid, start, exit, bytes; limit keeps the total) and
    an instance itself; a bad limit is a 400 naming it, an unknown id 404;
  - `fold_lifetime = 0` in the config stores every instance as before.
The expected figures are the analyzer's, never numbers written here."""
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, Checks, Service  # noqa: E402

S = 1_000_000_000
T0 = 1_760_000_000 * S
FIELDS = ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes", "transient_count",
          "outstanding_end_bytes", "events")
t = Checks()


def trace(path):
    """Writes the trace; returns {pid: (name, start, exit or None, bytes)} of the children."""
    evs = []
    seq = [0]

    def ev(ts, op, pid, **kw):
        seq[0] += 1
        evs.append((ts, seq[0], dict(ts=ts, op=op, pid=pid, **kw)))

    kids = {}
    ev(T0, "process_start", 100, name="server", cmdline="server --port 1")
    ev(T0, "commit", 100, addr=0x1000000, size=1 << 20, stack=["server!main", "libc!mmap"],
       rundown=True)
    for i in range(120):  # a minute of growth and release
        ts = T0 + i * S // 2
        ev(ts, "commit", 100, addr=0x2000000 + i * 0x10000, size=16384 * (1 + i % 4),
           stack=["server!handle", "libc!malloc"])
        if i % 3 == 2:
            ev(ts + 1000, "decommit", 100, addr=0x2000000 + (i - 2) * 0x10000, size=16384)
    ev(T0, "process_start", 200, name="sh")
    pid = 1000

    def child(name, start, life, sizes, stack="child!main"):
        nonlocal pid
        pid += 1
        ev(start, "process_start", pid, name=name, cmdline=f"{name} --n {pid}")
        addr = 0x40000000
        for k, sz in enumerate(sizes):
            ts = start + (life or 2 * S) * k // (len(sizes) + 1)
            ev(ts, "commit", pid, addr=addr, size=sz, stack=[stack, "libc!mmap"])
            if k % 2:
                ev(ts + 1, "release", pid, addr=addr, size=sz)
            addr += sz + 4096
        if life is not None:
            ev(start + life, "process_exit", pid)
        kids[pid] = (name, start, None if life is None else start + life, sum(sizes))

    for i in range(300):  # ~30 a second for 10 s
        child("true", T0 + S + i * S // 30, 50_000_000, [8192, 4096 * (1 + i % 4)])
    for i in range(40):
        child("date", T0 + 2 * S + i * S // 4, 20_000_000, [12288])
    child("cc1", T0 + 3 * S, 15 * S, [65536, 65536])
    child("convert", T0 + 4 * S, S // 2, [8 << 20])
    child("lonely", T0 + 20 * S, S, [4096, 8192])
    child("sleep", T0 + 50 * S, None, [4096])
    ev(T0 + 60 * S, "commit", 200, addr=0x7000000, size=4096, stack=["sh!main", "libc!malloc"])
    evs.sort(key=lambda e: (e[0], e[1]))
    with open(path, "w") as f:
        f.write(json.dumps({"format": "commitwatch-trace", "version": 1, "platform": "linux",
                            "pointer_size": 8}) + "\n")
        for _, _, e in evs:
            f.write(json.dumps(e) + "\n")
    return kids


def cli(*args):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: commitwatch {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p.stdout


def sums(procs):
    return {f: sum(p[f] for p in procs) for f in FIELDS}


def by_name(procs):
    out = {}
    for p in procs:
        out.setdefault(p["name"], []).append(p)
    return out


def main():
    tmp = tempfile.mkdtemp(prefix="cw_fold_")
    tr = os.path.join(tmp, "fold.jsonl")
    kids = trace(tr)
    db = os.path.join(tmp, "fold.db")
    cli("run", "--no-http", "--source", "replay:" + tr, "--db", db)
    got = json.loads(cli("analyze", "--db", db, "--json"))
    want = json.loads(cli("analyze", "--source", "replay:" + tr, "--json"))
    gp, wp = got["processes"], want["processes"]

    t.check("the trace's report has processes with commits (not 0 against 0)",
            any(p["size_bytes"] for p in wp), wp)
    t.eq("machine: every figure summed over the lines", sums(gp), sums(wp))
    gn, wn = by_name(gp), by_name(wp)
    t.eq("the same names", sorted(gn), sorted(wn))
    for name in sorted(wn):
        t.eq(f"{name}: figures summed over its lines", sums(gn.get(name, [])), sums(wn[name]))
    for name, n in (("true", 300), ("date", 40)):
        lines = gn.get(name, [])
        t.check(f"{name}: one line, pid 0, folded {n}",
                len(lines) == 1 and lines[0]["pid"] == 0 and lines[0]["folded"] == n,
                [(p["pid"], p["folded"]) for p in lines])
        if lines:
            starts = [s for (nm, s, _, _) in kids.values() if nm == name]
            exits = [e for (nm, _, e, _) in kids.values() if nm == name]
            t.eq(f"{name}: the group's start and exit are its first start and last exit",
                 (lines[0]["start_ns"], lines[0]["exit_ns"]), (min(starts), max(exits)))
            t.check(f"{name}: the group's peak bounds the largest instance's",
                    lines[0]["peak_outstanding_bytes"] >=
                    max(p["peak_outstanding_bytes"] for p in wn[name]), lines[0])
    for name in ("server", "sh", "cc1", "convert", "lonely", "sleep"):
        w = wn[name][0]
        g = [p for p in gn.get(name, []) if p["pid"] == w["pid"]]
        keys = FIELDS + ("peak_outstanding_bytes", "peak_ns", "start_ns", "exit_ns", "folded",
                         "cmdline")
        t.eq(f"{name}: its own line, the analyzer's figures",
             [{k: p[k] for k in keys} for p in g], [{k: w[k] for k in keys}])

    con = sqlite3.connect(db)
    rows = con.execute("SELECT count(*) FROM processes").fetchone()[0]
    folded = con.execute("SELECT sum(n) FROM folded").fetchone()[0]
    con.close()
    # server, sh; the true and date groups; cc1, convert, lonely (a group
    # of one), sleep
    t.eq("processes rows: one per group and per unfolded instance", rows, 2 + 2 + 4)
    t.eq("folded instances: each in one run", folded, 300 + 40 + 1)

    # ---- the API lists groups, and their instances on demand
    with Service(tr, name="fold") as svc:
        window = f"from={T0 - S}&to={T0 + 120 * S}"
        st, r = svc.get(f"/api/processes?{window}&limit=100")
        lines = {p["name"]: p for p in r["processes"]} if st == 200 else {}
        t.check("/api/processes: the groups as one line each",
                st == 200 and lines.get("true", {}).get("folded") == 300
                and lines.get("date", {}).get("folded") == 40 and len(r["processes"]) == 8,
                (st, sorted((p["name"], p["folded"]) for p in r.get("processes", []))))
        gid = lines.get("true", {}).get("id", 0)
        st, r = svc.get(f"/api/processes/{gid}/instances?{window}")
        want_inst = sorted((s, p, e, b) for p, (nm, s, e, b) in kids.items() if nm == "true")
        got_inst = sorted((i["start_ns"], i["pid"], i["exit_ns"], i["bytes"])
                          for i in r.get("instances", [])) if st == 200 else None
        t.check("/instances: every folded instance with pid, start, exit and bytes",
                st == 200 and r["total"] == 300 and r["process"]["folded"] == 300
                and got_inst == want_inst, (st, r if st != 200 else len(got_inst or [])))
        st, r = svc.get(f"/api/processes/{gid}/instances?{window}&limit=5")
        t.check("/instances?limit=5: the first five by start, the total kept",
                st == 200 and r["total"] == 300 and
                [i["start_ns"] for i in r["instances"]] == [w[0] for w in want_inst[:5]],
                (st, r))
        st, r = svc.get(f"/api/processes/{gid}/instances?from={T0 + 5 * S}&to={T0 + 6 * S}")
        alive = [k for k in want_inst if k[0] < T0 + 6 * S and k[2] >= T0 + 5 * S]
        t.check("/instances over one second: those alive in it",
                st == 200 and r["total"] == len(alive) and 0 < len(alive) < 300, (st, r))
        st, r = svc.get(f"/api/processes/{gid}/series?{window}&step=10s")
        t.check("a group's series: its process says folded",
                st == 200 and r["process"]["folded"] == 300 and r["process"]["pid"] == 0, (st, r))
        cc1 = lines.get("cc1", {}).get("id", 0)
        st, r = svc.get(f"/api/processes/{cc1}/instances?{window}")
        t.check("/instances of an instance: itself",
                st == 200 and r["total"] == 1 and r["process"]["folded"] == 0 and
                r["instances"][0]["pid"] == lines["cc1"]["pid"], (st, r))
        st, r = svc.get(f"/api/processes/{gid}/instances?limit=0")
        t.check("/instances?limit=0: 400 naming limit", st == 400 and "limit" in r["error"],
                (st, r))
        st, r = svc.get("/api/processes/999999/instances")
        t.check("/instances of an unknown id: 404", st == 404, (st, r))
        st, oa = svc.get("/api/openapi.json")
        t.check("openapi documents /api/processes/{id}/instances",
                st == 200 and "/api/processes/{id}/instances" in oa["paths"], st)

    # ---- fold_lifetime = 0: every instance its own line
    conf = os.path.join(tmp, "nofold.conf")
    with open(conf, "w") as f:
        f.write("fold_lifetime = 0\n")
    db2 = os.path.join(tmp, "nofold.db")
    cli("run", "--no-http", "--source", "replay:" + tr, "--db", db2, "--config", conf)
    plain = json.loads(cli("analyze", "--db", db2, "--json"))["processes"]
    t.eq("fold_lifetime = 0: a line per instance", len(plain), len(wp))
    t.check("fold_lifetime = 0: nothing folded", all(p["folded"] == 0 for p in plain), "")
    t.done()


main()
