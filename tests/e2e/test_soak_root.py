#!/usr/bin/env python3
"""test_soak_root.py - the soak (bench/soak.py) for 2 minutes, as root:
the daemon on the live perf source while a spawner starts 25 short-lived
processes a second (fork/exec/exit, threads, half of them on a pid that
was just freed) and two churners map, unmap, mprotect and brk all the
time (after 30 s of the same load and 20 s without spawners: the
baseline). It checks what the 30-minute soak reports (docs/RELIABILITY.md,
"Soak"): the daemon's RSS back within 10 % of its baseline once the load
stopped and the raw tier's retention (1 min here) folded it, no file
descriptor growth, zero drift of the churners' outstanding commit
(/api/processes) against their smaps, every spawned process stored, and
retention pruning the processes and folded rows of every ended instance
(a one-process trace replayed 3 h later moves every tier's horizon past
the soak). Every check is required, RSS too: what held it above 10 %
was the report cache's sums of every ended instance's stacks, which it
no longer keeps (docs/RELIABILITY.md, "Soak"); drift is 0 in every
check with the perf source's in-order merge.

It never skips: without root or perf, or an unbuilt workload, it fails
saying why (CI runs as root).
"""
import os
import sys

SOURCE = os.environ.get("CW_SOURCE", ".")
sys.path.insert(0, os.path.join(SOURCE, "bench"))
import soak  # noqa: E402

if __name__ == "__main__":
    sys.exit(soak.main(["--minutes", "2", "--prime", "30", "--warmup", "40", "--settle", "80",
                        "--retention-raw", "1m", "--sample", "5", "--drift-every", "30",
                        "--spawn-rate", "25", "--churners", "2", "--hold", "16", "--check"]))
