#!/usr/bin/env python3
"""bench/crash_kill.py - the long crash-consistency campaign of issue 13
item 2 (docs/RELIABILITY.md, "Crash consistency"): tests/e2e/crashkill.py
with many kills. Run under nice on a shared machine:

    nice -n 19 python3 bench/crash_kill.py build/commitwatch --kills 1000 [--seed N] [--speed X]

Prints one line per kill and the summary (kills, integrity checks, lost
trace time per kill, windows compared, power cuts).
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
    ap.add_argument("--speed", type=float, default=120)
    ap.add_argument("--keep", action="store_true", help="keep the database")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cw_bench_crash_")
    c = crashkill.Campaign(os.path.abspath(a.binary), tmp, a.kills, seed=a.seed, speed=a.speed,
                           max_delay=1.5, log=lambda m: print(m, flush=True))
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
