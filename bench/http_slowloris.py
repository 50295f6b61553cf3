#!/usr/bin/env python3
"""http_slowloris.py - /api/health latency for one client while another
holds N connections that never finish their headers (issue 13 item 5,
docs/RELIABILITY.md "Hostile HTTP clients").

Starts `BINARY run` replaying the MemoryTestApp fixture, probes
/api/health from 127.0.0.2 (a new connection every 0.1 s) for SECONDS
without load, then again while 127.0.0.1 holds N slowloris connections
(tests/e2e/hostile.py), and prints median, p99 and failures of both.

    python3 bench/http_slowloris.py [-n 64] [-s 20] [--config FILE] BINARY
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
os.environ.setdefault("CW_BUILD", "/tmp/cw-slowloris")

from cwservice import MTA, Service  # noqa: E402
from hostile import Slowloris, probe_health, summary  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("-n", type=int, default=64, help="slowloris connections")
    ap.add_argument("-s", type=float, default=20, help="seconds of each probe")
    ap.add_argument("--config", help="a configuration file's text to run with")
    ap.add_argument("--p99-ms", type=float, default=100,
                    help="the specification's bound on the attacked p99 (issue 30: 100 ms); "
                         "exit status 1 above it, 0 to only print")
    a = ap.parse_args()
    cfg = open(a.config).read() if a.config else None
    with Service(MTA, name="slowloris", bin=os.path.abspath(a.binary), config=cfg) as svc:
        quiet = summary(probe_health("127.0.0.2", "127.0.0.1", svc.port, a.s))
        with Slowloris("127.0.0.1", svc.port, a.n) as s:
            attacked = summary(probe_health("127.0.0.2", "127.0.0.1", svc.port, a.s))
            opened = s.opened
    print(json.dumps({"binary": a.binary, "slowloris": a.n, "seconds": a.s,
                      "quiet": quiet, "attacked": attacked,
                      "slowloris_connections_opened": opened}, indent=1))
    # The absolute bound of the specification, which tests/e2e/test_http_hostile.py
    # relaxes on a machine whose quiet p99 is itself over it.
    if a.p99_ms:
        p99 = attacked["p99_ms"]
        ok = attacked["failed"] == 0 and p99 is not None and p99 < a.p99_ms
        print(f"{'PASS' if ok else 'FAIL'}: attacked p99 {p99} ms, bound {a.p99_ms:g} ms "
              f"(load average {os.getloadavg()[0]:.1f})", file=sys.stderr)
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
