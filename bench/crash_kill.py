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

With --perf (root, Linux), the live source instead: `run --source perf`
with the default configuration (or --config FILE), killed 2 to 6 s after
its rundown, N
times on one database; the loss is the wall time of the kill minus the
stored end (no model: the machine's own activity is the input):

    sudo nice -n 19 python3 bench/crash_kill.py build/commitwatch --kills 10 --perf
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import crashkill  # noqa: E402


def perf_campaign(binary, tmp, kills, seed, config):
    """Kills of the live perf source; returns the seconds lost per kill."""
    rnd = random.Random(seed)
    db = os.path.join(tmp, "perf.db")
    lost = []
    for k in range(kills):
        proc = subprocess.Popen([binary, "run", "--no-http", "--source", "perf", "--db", db]
                                + (["--config", config] if config else []),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ready = threading.Event()
        lines = []

        def reader():
            for line in proc.stderr:
                lines.append(line)
                if "rundown loaded" in line:
                    ready.set()

        th = threading.Thread(target=reader, daemon=True)
        th.start()
        if not ready.wait(60):
            proc.kill()
            raise crashkill.Failure(f"perf run {k}: no rundown in 60 s: {''.join(lines)[-2000:]}")
        time.sleep(rnd.uniform(2.0, 6.0))
        wall = time.time_ns()
        proc.kill()
        proc.wait()
        th.join(10)
        res = crashkill.integrity(db)
        if res != [("ok",)]:
            raise crashkill.Failure(f"perf kill {k}: integrity_check {res}")
        end = crashkill.stored_end(crashkill.tiers(db))
        jend = crashkill.journal_end(db)  # stored first by the next run
        if jend is not None and jend > end:
            end = jend
        lost.append((wall - end) / 1e9)
        print(f"perf kill {k}: stored to {lost[-1]:.3f} s before the kill "
              f"({-(-(wall - end) // crashkill.SEC)} buckets)", flush=True)
    return lost


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
    ap.add_argument("--stall-every", type=int, default=0,
                    help="every N runs, hold the database's write lock for --stall-s s before "
                         "the kill (the writer falls behind; only the journal keeps its queue)")
    ap.add_argument("--stall-s", type=float, default=3.5, help="how long a stall lasts (s)")
    ap.add_argument("--keep", action="store_true", help="keep the database")
    ap.add_argument("--perf", action="store_true",
                    help="kill the live perf source instead (root; loss against the wall clock)")
    ap.add_argument("--config", help="--perf: the service's configuration file")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cw_bench_crash_")
    if a.perf:
        try:
            lost = perf_campaign(os.path.abspath(a.binary), tmp, a.kills, a.seed, a.config)
        except crashkill.Failure as e:
            print(f"FAIL: {e} (database kept in {tmp})", flush=True)
            return 1
        q = lambda f: crashkill.quantile(lost, f)  # noqa: E731
        print(f"{len(lost)} kills of the perf source, integrity_check ok each time; wall time "
              f"lost per kill (s): median {q(0.5):.2f}, p90 {q(0.9):.2f}, max {q(1.0):.2f}",
              flush=True)
        if not a.keep:
            shutil.rmtree(tmp)
        return 0
    if not 0 <= a.min_delay <= a.max_delay:
        ap.error("--min-delay and --max-delay: 0 <= min <= max")
    c = crashkill.Campaign(os.path.abspath(a.binary), tmp, a.kills, seed=a.seed, speed=a.speed,
                           min_delay=a.min_delay, max_delay=a.max_delay, bound_s=a.bound,
                           powercut_every=a.powercut_every, log=lambda m: print(m, flush=True),
                           stall_every=a.stall_every, stall_s=a.stall_s)
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
