#!/usr/bin/env python3
"""heap_layer.py - a heap trace run by the service, stored as the heap
layer (docs/BENCHMARKS.md, "The heap layer in the store": issue 34's item
3 and issue 31's memory bound).

    sudo bench/heap_layer.py [--build DIR] [--seconds S] [--rate N]

Starts `commitwatch run --source perf` (root) on a new database, then
bench/heap_rss_load (N allocations a second from 256 stacks, every
1,024th block leaked from leak_one), asks the service for a heap trace
of it for S seconds (POST /api/processes/{id}/heap-trace), and samples
the daemon's VmHWM and CPU time every 100 ms. Then prints:

- the trace's events applied and dropped, and the daemon's peak RSS;
- the heap layer's size: the `cells` table's pages (dbstat) with and
  without the layer-1 cells (a copy of the database with them deleted,
  vacuumed), so the bytes per stored event include the b-tree's own;
- the heap layer's cells and their BLOB bytes, and what the service
  logged it stored and dropped (its "heap layer" line at the stop);
- a check: the bytes and blocks live at leak_one in the heap layer over
  the trace's whole seconds equal the trace's report (when nothing was
  dropped).

Exit status 0 when the check held. Standard library only; Linux, root.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from heap_rss import cpu_seconds  # noqa: E402

TOKEN = "bench-token"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Api:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def call(self, path, method="GET", body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", "Bearer " + TOKEN)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except OSError:
            return 0, None


def wait(cond, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    sys.exit(f"heap_layer: timed out waiting for {what}")


def cells_bytes(db):
    """Pages of the cells table and its index (dbstat)."""
    c = sqlite3.connect(db)
    n = c.execute("SELECT sum(pgsize) FROM dbstat WHERE name = 'cells' OR name LIKE "
                  "'sqlite_autoindex_cells%'").fetchone()[0] or 0
    c.close()
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--rate", type=int, default=1000000)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("heap_layer: the perf source needs root")
    build = os.path.abspath(a.build)
    binary, load = os.path.join(build, "commitwatch"), os.path.join(build, "bench", "heap_rss_load")
    tmp = tempfile.mkdtemp(prefix="cw_heap_layer_")
    db, logp = os.path.join(tmp, "h.db"), os.path.join(tmp, "run.log")
    port = free_port()
    log = open(logp, "w")
    run = subprocess.Popen([binary, "run", "--source", "perf", "--db", db, "--listen",
                            f"127.0.0.1:{port}", "--token", TOKEN], stderr=log)
    api = Api(port)
    prog = None
    try:
        wait(lambda: api.call("/api/health")[0] == 200, 60, "the service")
        prog = subprocess.Popen([load, "--seconds", str(a.seconds + 30), "--rate", str(a.rate)],
                                stdout=subprocess.PIPE, text=True)

        def instance():
            st, b = api.call(f"/api/processes?pid={prog.pid}&from=-5m")
            return st == 200 and b["processes"] and b["processes"][0]["id"]
        inst = wait(instance, 60, "the load's instance")
        st, b = api.call(f"/api/processes/{inst}/heap-trace", "POST",
                         {"duration": f"{a.seconds}s"})
        if st != 202:
            sys.exit(f"heap_layer: the trace did not start: {st} {b}")
        tid = b["id"]
        peak = rss_top = 0
        mem = {}
        cpu0 = cpu_seconds(run.pid)
        n = 0
        while True:
            st, tr = api.call(f"/api/heap-traces/{tid}")
            peak = max(peak, proc_status(run.pid, "VmHWM") or 0)
            rss = proc_status(run.pid, "VmRSS") or 0
            if rss > rss_top and n % 10 == 0:  # the components near the peak, each second
                hst, h = api.call("/api/health")
                if hst == 200:
                    rss_top, mem = rss, h.get("memory", {})
            n += 1
            if st == 200 and tr.get("state") != "running":
                break
            time.sleep(0.1)
        cpu = (cpu_seconds(run.pid) or 0) - (cpu0 or 0)
        rep = tr.get("report") or {}
        sec = 10**9
        w0, w1 = int(rep["from_ns"]) // sec * sec, -(-int(rep["to_ns"]) // sec) * sec
        want = [0, 0]
        for p in rep.get("processes", []):
            for s in p["stacks"]:
                if "heap_rss_load!leak_one" in s["frames"]:
                    want[0] += s["outstanding_bytes"]
                    want[1] += s["outstanding_count"]
        q = (f"/api/processes/{inst}/stacks?layer=heap&from={w0}&to={w1}&type=AIFO"
             f"&limit=100000&tree=0")
        time.sleep(3)  # the last seconds ride the next bucket
        st, got = api.call(q)
        have = [0, 0]
        for s in got.get("stacks", []) if st == 200 else []:
            if "heap_rss_load!leak_one" in s["frames"]:
                have[0] += s["types"]["AIFO"]["bytes"]
                have[1] += s["types"]["AIFO"]["count"]
    finally:
        if prog:
            prog.kill()
            prog.wait()
        run.send_signal(signal.SIGINT)
        run.wait(timeout=120)
        log.close()
    text = open(logp).read()
    m = re.search(r"heap traces: (\d+) seconds of the heap layer stored, (\d+) dropped", text)
    c = sqlite3.connect(db)
    ncells, blob = c.execute("SELECT count(*), coalesce(sum(length(data)), 0) FROM cells "
                             "WHERE layer = 1").fetchone()
    c.close()
    with_layer = cells_bytes(db)
    copy = os.path.join(tmp, "without.db")
    shutil.copy(db, copy)
    c = sqlite3.connect(copy)
    c.execute("DELETE FROM cells WHERE layer = 1")
    c.commit()
    c.execute("VACUUM")
    c.close()
    # The original vacuumed too, so both are measured packed alike.
    c = sqlite3.connect(db)
    c.execute("VACUUM")
    c.close()
    layer_bytes = cells_bytes(db) - cells_bytes(copy)
    events, dropped = tr.get("events", 0), tr.get("dropped", 0)
    print(f"heap_layer: {a.seconds} s at {a.rate} allocations/s asked "
          f"({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load "
          f"{os.getloadavg()[0]:.1f})")
    print(f"  trace: {events} events applied ({events / max(a.seconds, 1):,.0f}/s), "
          f"{dropped} dropped")
    print(f"  daemon: peak RSS (VmHWM) {peak / 1024:.1f} MiB; CPU {cpu:.1f} s "
          f"({cpu * 1e9 / max(events, 1):.0f} ns an event, all threads)")
    top = sorted(((v, k) for k, v in mem.items() if k not in ("resident", "resident_peak",
                  "heap_in_use", "sqlite_peak") and isinstance(v, int) and v > 0), reverse=True)
    print(f"  at VmRSS {rss_top / 1024:.1f} MiB (/api/health, MiB): " +
          ", ".join(f"{k} {v / 2**20:.1f}" for v, k in top[:7]))
    print(f"  heap layer: {ncells} cells, {blob:,} BLOB bytes; the cells table "
          f"{with_layer:,} bytes, {layer_bytes:,} of them the layer's: "
          f"{layer_bytes / max(events, 1):.2f} bytes an event")
    if m:
        print(f"  the service: {m.group(1)} seconds stored, {m.group(2)} dropped")
    print(f"  leak_one live at the trace's end: heap layer {have[0]} bytes {have[1]} blocks, "
          f"report {want[0]} bytes {want[1]} blocks")
    ok = have == want and want[1] > 0
    print("heap_layer: ok" if ok else "heap_layer: FAILED (the layer and the report differ)")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
