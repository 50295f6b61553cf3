#!/usr/bin/env python3
"""read_latency.py - p50/p99 of /api/processes over a stored database
(docs/BENCHMARKS.md, "Read path"): serves it with `BINARY serve --db DB`
(read-only) on a loopback port, asks each URL N times in turn with one
connection (the dashboard's overview polls this way), and prints per URL
the median, p99 and maximum in ms and the answer's length. Windows are
relative to the end of the data (`/api/health`'s `data_end_ns`, else the
newest raw bucket): 1min, 1h, 1d, and no window at all (`default`: the
API's default, the hour before the end of the data), the day ranked
by transient bytes (`1d transient`: every process's cells decoded, which
that ranking needs), and the day's full report (`1d full`: every process
with every stack, as `analyze --db` makes it; a `layer` parameter
asks for it), and the day's list of the processes whose name contains
`a` (`1d name=a`: a filtered list, ranked as the others). With
--dashboard, the URLs are instead the overview's (web/js/overview.js):
each range from the whole minute at or before `end - range` (the data's
first second when that is earlier), ranked by impacting bytes with
limit=500, and the same window ranked by transient bytes (`transient`).

With --fresh, every request is the first of a fresh `serve` (started,
asked `/api/health`, asked the URL, stopped): what a handle's first list
costs with its read caches empty and its memory untouched, and the page
faults the server took for it (minor faults from /proc, Linux only).

Every binary given serves the same database at once (ports --port,
--port + 1, ...), each URL's requests alternating between them, so one
run compares builds (a before and an after) under the same load; the
binary asked first moves round each time (the first of a pair ran up
to 10 ms slower, whichever build it was); --check compares their
answers byte for byte.

A binary given as BINARY@FILE serves FILE instead (a copy of the
database at the schema that build reads: a build refuses an older or
newer schema, so a before and an after across a migration each serve
their own copy of the same data).

    python3 bench/read_latency.py --db busy.db [-n 50] [--check] [--dashboard] BINARY[@FILE]...
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
    # Ranked by transient bytes, the list decodes every process's cells;
    # the layer parameter takes the full report, every process with its
    # stacks: the whole-day report through the API.
    out.append(("1d transient", f"/api/processes?from={end - 86400 * S}&to={end}"
                "&limit=20&sort=transient"))
    out.append(("1d full", f"/api/processes?from={end - 86400 * S}&to={end}"
                "&limit=20&sort=transient&layer=commit"))
    out.append(("1d name=a", f"/api/processes?from={end - 86400 * S}&to={end}"
                "&limit=100&name=a"))
    return out


def dashboard_urls(db, end):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    first = con.execute("SELECT min(bucket) FROM cells WHERE tier = 0").fetchone()[0]
    con.close()
    out = []
    for win, span in (("1h", 3600 * S), ("2h", 7200 * S), ("6h", 6 * 3600 * S),
                      ("24h", 86400 * S)):
        frm = (end - span) // (60 * S) * (60 * S)
        if frm < first:
            frm = first // S * S
        for sort, lim in (("impacting", 500), ("transient", 20)):
            out.append((f"{win} {sort}", f"/api/processes?from={frm}&to={end}"
                        f"&sort={sort}&limit={lim}"))
    return out


def serve(binary, db, port):
    binary, _, own = binary.partition("@")
    p = subprocess.Popen([binary, "serve", "--db", own or db, "--listen", f"127.0.0.1:{port}"],
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


def add_row(a, rows, name, b, ts, body, extra):
    """One URL's line for binary b (p50, p99, max, length, extra); with
    --check, the answer must be the first binary's."""
    v = sorted(ts[b])
    p99 = v[min(len(v) - 1, int(len(v) * 0.99))]
    rows[b].append(f"{name:18} {statistics.median(v):8.1f} {p99:8.1f} {v[-1]:8.1f} "
                   f"{len(body[b]):8}{extra}")
    if a.check and body[b] != body[a.binaries[0]]:
        raise SystemExit(f"{name}: {b} answers differently")


def rotated(n, r):
    """The indexes 0 .. n-1 starting at r mod n: round r's order."""
    return [(r + i) % n for i in range(n)]


def minflt(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def fresh(a, todo):
    """Each request on a fresh serve; rows per binary."""
    rows = {b: [] for b in a.binaries}
    for name, u in todo:
        ts = {b: [] for b in a.binaries}
        fl = {b: [] for b in a.binaries}
        body = {}
        for r in range(a.n):
            for i in rotated(len(a.binaries), r):
                b = a.binaries[i]
                p, c = serve(b, a.db, a.port + i)
                try:
                    f0 = minflt(p.pid)
                    t = time.perf_counter()
                    c.request("GET", u)
                    r = c.getresponse()
                    body[b] = r.read()
                    ts[b].append((time.perf_counter() - t) * 1000)
                    fl[b].append(minflt(p.pid) - f0)
                    if r.status != 200:
                        raise SystemExit(f"{u}: {r.status} {body[b][:200]}")
                finally:
                    c.close()
                    p.terminate()
                    p.wait()
        for b in a.binaries:
            add_row(a, rows, name, b, ts, body, f" {statistics.median(fl[b]):8.0f}")
    for b in a.binaries:
        print(f"== {b}")
        print(f"{'url (fresh serve)':18} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'bytes':>8} "
              f"{'faults':>8}")
        print("\n".join(rows[b]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("-n", type=int, default=50, help="requests per URL")
    ap.add_argument("--port", type=int, default=18534)
    ap.add_argument("--check", action="store_true", help="answers identical across binaries")
    ap.add_argument("--dashboard", action="store_true",
                    help="the overview's windows, from a whole minute")
    ap.add_argument("--fresh", action="store_true",
                    help="each request the first of a fresh serve; adds its page faults")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    end = data_end(a.db)
    print(f"loadavg {' '.join(open('/proc/loadavg').read().split()[:3])}; db {a.db}; "
          f"{a.n} requests per URL")
    if a.fresh:
        fresh(a, dashboard_urls(a.db, end) if a.dashboard else urls(end))
        return
    # Every binary serves at once, on its own port, and each URL's
    # requests alternate between them: a drift of the shared machine's
    # speed falls on all of them alike (one binary after the other, the
    # second often came out slower whichever it was).
    servers = [list(serve(b, a.db, a.port + i)) + [time.monotonic()]
               for i, b in enumerate(a.binaries)]
    rows = {b: [] for b in a.binaries}
    try:
        for name, u in dashboard_urls(a.db, end) if a.dashboard else urls(end):
            ts = {b: [] for b in a.binaries}
            body = {}
            for r in range(a.n):
                for i in rotated(len(a.binaries), r):
                    b = a.binaries[i]
                    c = servers[i][1]
                    # The server closes a connection idle for its
                    # Keep-Alive timeout (2 s, as the response says): while
                    # the other binaries answer slow requests, this one's
                    # connection is opened anew, as a browser would.
                    if time.monotonic() - servers[i][2] > 1.5:
                        c.close()
                        c = servers[i][1] = http.client.HTTPConnection(
                            "127.0.0.1", a.port + i, timeout=60)
                    t = time.perf_counter()
                    c.request("GET", u)
                    r = c.getresponse()
                    body[b] = r.read()
                    ts[b].append((time.perf_counter() - t) * 1000)
                    servers[i][2] = time.monotonic()
                    if r.status != 200:
                        raise SystemExit(f"{u}: {r.status} {body[b][:200]}")
            for b in a.binaries:
                add_row(a, rows, name, b, ts, body, "")
    finally:
        for p, c, _ in servers:
            c.close()
            p.terminate()
            p.wait()
    for b in a.binaries:
        print(f"== {b}")
        print(f"{'url':18} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'bytes':>8}")
        print("\n".join(rows[b]))

main()
