#!/usr/bin/env python3
"""read_latency.py - p50/p99 of /api/processes over a stored database
(docs/BENCHMARKS.md, "Read path"): serves it with `BINARY serve --db DB`
(read-only) on a loopback port, asks each URL N times in turn with one
connection (the dashboard's overview polls this way), and prints per URL
the median, p99 and maximum in ms and the answer's length. Windows are
relative to the end of the data (`/api/health`'s `data_end_ns`, else the
newest raw bucket): 1min, 1h, 1d, and no window at all (`default`: the
API's default, the hour before the end of the data).

Every binary given serves the same database in turn, so one run compares
builds (a before and an after) under the same load; --check compares
their answers byte for byte.

    python3 bench/read_latency.py --db busy.db [-n 50] [--check] BINARY [BINARY...]
"""
import argparse
import http.client
import sqlite3
import statistics
import subprocess
import time

S = 1_000_000_000


def data_end(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    v = con.execute("SELECT max(bucket) FROM cells WHERE tier = 0").fetchone()[0]
    con.close()
    return v + S


def urls(end):
    out = []
    for win, span in (("1min", 60 * S), ("1h", 3600 * S), ("1d", 86400 * S)):
        for lim in (20, 100):
            out.append((f"{win} limit={lim}",
                        f"/api/processes?from={end - span}&to={end}&limit={lim}"))
    out.append(("default limit=100", "/api/processes?limit=100"))
    return out


def serve(binary, db, port):
    p = subprocess.Popen([binary, "serve", "--db", db, "--listen", f"127.0.0.1:{port}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("GET", "/api/health")
            c.getresponse().read()
            return p, c
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise SystemExit(f"{binary} serve did not answer on port {port}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("-n", type=int, default=50, help="requests per URL")
    ap.add_argument("--port", type=int, default=18534)
    ap.add_argument("--check", action="store_true", help="answers identical across binaries")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    end = data_end(a.db)
    print(f"loadavg {' '.join(open('/proc/loadavg').read().split()[:3])}; db {a.db}; "
          f"{a.n} requests per URL")
    answers = {}
    for b in a.binaries:
        p, c = serve(b, a.db, a.port)
        try:
            print(f"== {b}")
            print(f"{'url':18} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'bytes':>8}")
            for name, u in urls(end):
                ts = []
                for _ in range(a.n):
                    t = time.perf_counter()
                    c.request("GET", u)
                    r = c.getresponse()
                    body = r.read()
                    ts.append((time.perf_counter() - t) * 1000)
                    if r.status != 200:
                        raise SystemExit(f"{u}: {r.status} {body[:200]}")
                ts.sort()
                p99 = ts[min(len(ts) - 1, int(len(ts) * 0.99))]
                print(f"{name:18} {statistics.median(ts):8.1f} {p99:8.1f} {ts[-1]:8.1f} "
                      f"{len(body):8}")
                if a.check:
                    if name in answers and answers[name] != body:
                        raise SystemExit(f"{name}: {b} answers differently")
                    answers[name] = body
        finally:
            c.close()
            p.terminate()
            p.wait()


main()
