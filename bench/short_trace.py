#!/usr/bin/env python3
"""short_trace.py - the load of bench/real_load.sh as a generated trace,
replayed (issue 12, docs/BENCHMARKS.md "Short-lived processes").

The live benchmark needs root and a machine quiet enough for the perf
source to keep up; this one is deterministic: N minutes of four long-lived
churners (redis-server, python3, node, sqlite3: commits and releases over
a few dozen stacks each) and a shell starting R processes a second, each
two instances as the perf source sees them (the fork, with its copy of the
shell's 1.2 MB, gone at the exec; then the program, which maps its image
and libraries and exits a few ms later). Every binary given replays it
into its own database (`run --no-http --source replay:`), then the script
prints database MB per minute of trace, process rows, and the
whole-window `analyze --db` time (median of 3).

    python3 bench/short_trace.py [-m MINUTES] [-r RATE] BINARY [BINARY...]
"""
import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import tempfile
import time

S = 1_000_000_000
T0 = 1_780_000_000 * S


def write_trace(path, minutes, rate, seed=12):
    rnd = random.Random(seed)
    end = T0 + int(minutes * 60 * S)
    evs = []  # (ts, seq, line); seq keeps the order of equal times
    seq = 0

    def ev(ts, **kw):
        nonlocal seq
        seq += 1
        kw["ts"] = ts
        evs.append((ts, seq, json.dumps(kw, separators=(",", ":"))))

    churners = [(100, "redis-server", "libjemalloc.so.2"), (200, "python3", "libc.so.6"),
                (300, "node", "node"), (400, "sqlite3", "libsqlite3.so.0")]
    for pid, name, mod in churners:
        ev(T0, op="process_start", pid=pid, name=name, cmdline=name)
        ev(T0, op="commit", pid=pid, addr=0x10000000, size=32 << 20, rundown=True,
           stack=[f"{name}!main", f"{mod}!init"])
        live = []
        nxt = 0x20000000
        t = T0
        while t < end:  # ~200 calls a second, 30 stacks
            t += rnd.randrange(2 * S // 200)
            if not live or rnd.random() < 0.5:
                sz = rnd.choice((65536, 135168, 262144, 1 << 20, 4 << 20))
                ev(t, op="commit", pid=pid, addr=nxt, size=sz,
                   stack=[f"{name}!main", f"{name}!work{rnd.randrange(30)}", f"{mod}!mmap"])
                live.append((nxt, sz))
                nxt += sz + 4096
            else:
                a, sz = live.pop(rnd.randrange(len(live)))
                ev(t, op="release", pid=pid, addr=a, size=sz)
    shell = 500
    ev(T0, op="process_start", pid=shell, name="bash", cmdline="bash spawner")
    pid = 10000
    t = T0 + S
    while t < end - S:
        t += rnd.randrange(2 * S // rate)
        pid += 1
        # the fork: a copy of the shell, gone at the exec
        ev(t, op="process_start", pid=pid, name="bash", cmdline="bash spawner")
        ev(t, op="commit", pid=pid, addr=0x55000000, size=1200 * 1024, stack=["(fork)"])
        ex = t + rnd.randrange(200_000, 2_000_000)
        ev(ex, op="process_exit", pid=pid)
        prog = rnd.choice(("true", "true", "date", "sleep"))
        ev(ex, op="process_start", pid=pid, name=prog, cmdline=prog)
        ev(ex, op="commit", pid=pid, addr=0x56000000, size=rnd.choice((8192, 12288, 20480)),
           stack=["(exec image)"])
        tt = ex
        for k in range(rnd.randrange(3, 7)):  # ld.so and libc mappings
            tt += rnd.randrange(20_000, 200_000)
            ev(tt, op="commit", pid=pid, addr=0x7f000000 + k * 0x100000,
               size=rnd.choice((4096, 8192, 16384, 139264)),
               stack=["ld-linux-x86-64.so.2!_dl_map_object", "libc.so.6!mmap"])
        life = 100_000_000 if prog == "sleep" else rnd.randrange(1_000_000, 5_000_000)
        ev(ex + life, op="process_exit", pid=pid)
    evs.sort()
    with open(path, "w") as f:
        f.write('{"format":"commitwatch-trace","version":1,"platform":"linux","pointer_size":8}\n')
        for _, _, line in evs:
            f.write(line + "\n")
    return len(evs), pid - 10000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--minutes", type=float, default=10)
    ap.add_argument("-r", "--rate", type=int, default=30, help="processes started per second")
    ap.add_argument("-o", "--out", default=None, help="folder for the trace and databases")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="cw_short_trace.")
    os.makedirs(out, exist_ok=True)
    trace = os.path.join(out, "short.jsonl")
    nev, nproc = write_trace(trace, a.minutes, a.rate)
    print(f"trace: {nev} events, {nproc} processes started by the shell "
          f"({2 * nproc} instances), {a.minutes} min; {trace}")
    print(f"loadavg {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'binary':34} {'DB MB':>7} {'MB/min':>7} {'rows':>7} {'folded':>7} "
          f"{'run s':>6} {'analyze s (3)':>20} {'lines':>6}")
    for i, b in enumerate(a.binaries):
        db = os.path.join(out, f"run{i + 1}.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
        t = time.monotonic()
        subprocess.run([b, "run", "--no-http", "--source", "replay:" + trace, "--db", db],
                       check=True, capture_output=True)
        run_s = time.monotonic() - t
        size = os.path.getsize(db) + (os.path.getsize(db + "-wal")
                                      if os.path.exists(db + "-wal") else 0)
        con = sqlite3.connect(db)
        rows = con.execute("SELECT count(*) FROM processes").fetchone()[0]
        try:
            folded = con.execute("SELECT sum(n) FROM folded").fetchone()[0] or 0
        except sqlite3.OperationalError:  # schema 9 and older: a row per instance
            folded = con.execute("SELECT count(*) FROM folded").fetchone()[0]
        con.close()
        times = []
        for _ in range(3):
            t = time.monotonic()
            p = subprocess.run([b, "analyze", "--db", db], check=True, capture_output=True,
                               text=True)
            times.append(time.monotonic() - t)
        lines = p.stdout.count("types:")
        print(f"{b:34} {size / 1e6:7.2f} {size / 1e6 / a.minutes:7.3f} {rows:7} {folded:7} "
              f"{run_s:6.1f} {statistics.median(times):7.3f} "
              f"({', '.join(f'{x:.2f}' for x in times)}) {lines:6}")


main()
