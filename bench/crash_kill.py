#!/usr/bin/env python3
"""bench/crash_kill.py - the long crash-consistency campaign of issue 13
item 2 (docs/RELIABILITY.md, "Crash consistency"): tests/e2e/crashkill.py
with many kills. Run under nice on a shared machine:

    nice -n 19 python3 bench/crash_kill.py build/commitwatch --kills 1000 [--seed N] [--speed X]

and at real-time pace (a kill 1 to 5 s into each run; --bound S fails on a
kill that lost more than S s of trace):

    nice -n 19 python3 bench/crash_kill.py build/commitwatch --kills 20 --speed 1 \
        --min-delay 1 --max-delay 5

Prints one line per kill and the summary (kills, integrity checks, lost
trace time and raw buckets per kill, windows compared, power cuts).
"""

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import crashkill  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--kills", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--speed", type=float, default=120,
                    help="replay pace (trace seconds per wall second; 1 = real time)")
    ap.add_argument("--min-delay", type=float, default=0.06,
                    help="earliest kill (s after the start) of the runs not aimed at start-up")
    ap.add_argument("--max-delay", type=float, default=1.5, help="latest kill (s)")
    ap.add_argument("--bound", type=float, default=None,
                    help="fail on a kill that lost more than this many seconds of trace")
    ap.add_argument("--powercut-every", type=int, default=5, help="a power cut every N runs (0: none)")
    ap.add_argument("--keep", action="store_true", help="keep the database")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cw_bench_crash_")
    if not 0 <= a.min_delay <= a.max_delay:
        ap.error("--min-delay and --max-delay: 0 <= min <= max")
    c = crashkill.Campaign(os.path.abspath(a.binary), tmp, a.kills, seed=a.seed, speed=a.speed,
                           min_delay=a.min_delay, max_delay=a.max_delay, bound_s=a.bound,
                           powercut_every=a.powercut_every, log=lambda m: print(m, flush=True))
    try:
        st = c.run()
    except crashkill.Failure as e:
        print(f"FAIL: {e} (database kept in {tmp})", flush=True)
        return 1
    print(crashkill.summary(st), flush=True)
    if not a.keep:
        shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
