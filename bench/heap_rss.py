#!/usr/bin/env python3
"""heap_rss.py - commitwatch's memory during a long heap trace of an
allocation-heavy program (docs/BENCHMARKS.md, "Heap drill-down overhead":
issue 31's bound, under 128 MiB for 5 minutes at 1 M allocations/s).

    bench/heap_rss.py [--build DIR] [--seconds S] [--rate N] [--leak-every K] [--max-mib M]

Runs `commitwatch heap --json -- heap_rss_load --seconds S --rate N`
(bench/heap_rss_load.c: N allocations a second from 256 distinct stacks,
a working set of 4,096 live blocks, every K-th block (default 1,024)
leaked from its own function, leak_one) and samples commitwatch's peak resident memory
(VmHWM in /proc/PID/status) and CPU time every 100 ms. Prints the peak,
its CPU time per event, the rate the
program reached, the events commitwatch applied and what it counted as
lost (dropped: the ring was full; torn; truncated stacks; allocations
past the model's bound on live blocks), and checks
what the report must say: when nothing was lost, the bytes and blocks
outstanding at leak_one are exactly what the program says it leaked.
With --max-mib, fails when the peak is over M MiB.

Exit status 0 when every check held; 1 otherwise. Standard library only.
Linux only."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def vm_hwm_kib(pid):
    """The process's peak resident memory so far (KiB), or None once gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid):
    """The process's own user + system CPU time so far, or None once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            w = f.read().rsplit(")", 1)[1].split()
        return (int(w[11]) + int(w[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def parse_load(line):
    """heap_rss_load's last line: "allocs A frees F seconds S rate R ..."."""
    w = line.split()
    return {w[i]: float(w[i + 1]) for i in range(0, len(w) - 1, 2)}


def at_fn(proc, frame):
    """Outstanding bytes and count summed over proc's stacks through frame."""
    b = n = 0
    for s in proc["stacks"]:
        if frame in s["frames"]:
            b += s["outstanding_bytes"]
            n += s["outstanding_count"]
    return b, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rate", type=int, default=1000000)
    ap.add_argument("--max-mib", type=float, default=0)
    ap.add_argument("--leak-every", type=int, default=1024,
                    help="every Nth allocation is leaked (1: all, to reach the bound on live "
                    "blocks)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    cw = os.path.join(build, "commitwatch")
    load = os.path.join(build, "bench", "heap_rss_load")
    for f in (cw, load):
        if not os.access(f, os.X_OK):
            print(f"heap_rss: {f} is not built (cmake --build {a.build})", file=sys.stderr)
            return 1
    tmp = tempfile.mkdtemp(prefix="cw_heap_rss_")
    out_path = os.path.join(tmp, "report.json")
    t0 = time.monotonic()
    with open(out_path, "w") as out:
        p = subprocess.Popen([cw, "heap", "--json", "--", load, "--seconds", str(a.seconds),
                              "--rate", str(a.rate), "--leak-every", str(a.leak_every)],
                             stdout=out, stderr=subprocess.PIPE,
                             text=True)
        peak = cpu = 0
        while p.poll() is None:
            v, t = vm_hwm_kib(p.pid), cpu_seconds(p.pid)
            if v is not None:
                peak = max(peak, v)
            if t is not None:
                cpu = max(cpu, t)
            time.sleep(0.1)
        err = p.stderr.read()
    took = time.monotonic() - t0
    lines = open(out_path).read().strip().splitlines()
    ok = True

    def check(what, cond, detail=""):
        nonlocal ok
        if not cond:
            ok = False
            print(f"FAIL: {what} {detail}")

    check("commitwatch heap exits 0", p.returncode == 0, f"(exit {p.returncode}: {err[-300:]})")
    loads = [l for l in lines if l.startswith("allocs ")]
    check("the program printed its figures", len(loads) == 1, repr(lines[:1]))
    if not ok:
        return 1
    prog = parse_load(loads[0])
    r = json.loads(lines[-1])
    procs = [x for x in r["processes"] if x["name"] == "heap_rss_load"]
    check("the report has the program", len(procs) == 1)
    if not ok:
        return 1
    dropped, torn = r["dropped_events"], r["torn_events"]
    truncated = r.get("truncated_stacks", 0)
    capped = r.get("capped_allocs", 0)
    leak_b, leak_n = at_fn(procs[0], "heap_rss_load!leak_one")
    print(f"heap_rss: {a.seconds:g} s at {a.rate} allocations/s asked, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"  program: {int(prog['allocs'])} allocations in {prog['seconds']:.1f} s "
          f"({prog['rate'] / 1e6:.2f} M/s), leaked {int(prog['leaked_blocks'])} blocks "
          f"{int(prog['leaked_bytes'])} bytes")
    print(f"  commitwatch: peak RSS (VmHWM) {peak / 1024:.1f} MiB, {r['events']} events "
          f"applied, {dropped} dropped, {torn} torn, {truncated} stacks truncated, "
          f"{capped} allocations past the bound on live blocks "
          f"(wall {took:.1f} s)")
    print(f"  commitwatch's CPU: {cpu:.1f} s ({cpu * 1e9 / max(r['events'], 1):.0f} ns an event "
          "applied; sampled every 100 ms)")
    print(f"  report: at leak_one {leak_n} blocks {leak_b} bytes outstanding")
    check("commitwatch's peak RSS was sampled", peak > 0)
    check("events were applied", r["events"] > 0)
    if dropped == 0 and torn == 0 and capped == 0:
        check("the leak's bytes are exact", leak_b == prog["leaked_bytes"],
              f"({leak_b} != {int(prog['leaked_bytes'])})")
        check("the leak's blocks are exact", leak_n == prog["leaked_blocks"],
              f"({leak_n} != {int(prog['leaked_blocks'])})")
    else:
        # Some events were not delivered or not held (counted): the report
        # can only miss leaked blocks, never invent any.
        check("the leak is at most what the program leaked",
              leak_b <= prog["leaked_bytes"] and leak_n <= prog["leaked_blocks"])
    if a.max_mib:
        check(f"peak RSS under {a.max_mib:g} MiB", peak / 1024 < a.max_mib,
              f"({peak / 1024:.1f} MiB)")
    os.remove(out_path)
    os.rmdir(tmp)
    print("heap_rss: ok" if ok else "heap_rss: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
