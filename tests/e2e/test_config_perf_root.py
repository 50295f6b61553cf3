#!/usr/bin/env python3
"""test_config_perf_root.py - the perf source's memory keys from the
configuration file (README "Configuration"; docs/DESIGN.md, "Memory"),
as root (the perf source traces the whole machine):

- perf_ring_size: the kernel rings of all CPUs together, each a power of
  two from 512 KiB to 16 MiB (service/sources/perf/perf.c): /api/health's
  memory.perf_rings is rings x (a page + the ring), with the ring the
  largest such size whose total fits: 1MiB and 4MiB give rings of
  512 KiB and 2 MiB on a 2-CPU machine.

And `record --verbose` (`-v`): "log the source's statistics": the perf
source's closing statistics line ("perf: N records, N enters, ...", a
debug line) is logged with it and not without.

perf_queue_size is shown by test_perf_root.py (--queue 64KiB);
perf_unwind_processes has no figure or log line to show it by
(test_config_keys.py's inventory says so).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, BUILD, Checks, free_port  # noqa: E402
from cwtest import require, wait_until  # noqa: E402

require(hasattr(os, "geteuid") and os.geteuid() == 0, "root (the perf source)")
ver = subprocess.run([BIN, "version"], capture_output=True, text=True, timeout=60).stdout
require("perf" in ver.split("sources:")[-1], "a build with the perf source")

t = Checks()
TMP = os.path.join(BUILD, "e2e-config-perf")
shutil.rmtree(TMP, ignore_errors=True)
os.makedirs(TMP)
PAGE = os.sysconf("SC_PAGESIZE")
NCPU = os.sysconf("SC_NPROCESSORS_CONF")
KiB, MiB = 1 << 10, 1 << 20


def ring_for(total):
    ring = 16 * MiB
    while ring > 512 * KiB and ring * NCPU > total:
        ring //= 2
    return ring


def perf_rings(name, text):
    conf = os.path.join(TMP, f"{name}.conf")
    with open(conf, "w") as f:
        f.write(text)
    os.chmod(conf, 0o600)
    port = free_port()
    log = open(os.path.join(TMP, f"{name}.log"), "w")
    p = subprocess.Popen([BIN, "run", "--source", "perf", "--db", os.path.join(TMP, f"{name}.db"),
                          "--listen", f"127.0.0.1:{port}", "--config", conf], stdout=log,
                         stderr=subprocess.STDOUT)

    def health():
        if p.poll() is not None:
            raise RuntimeError(f"commitwatch run exited with {p.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=10) as r:
                m = json.load(r).get("memory", {})
        except OSError:
            return None
        return m.get("perf_rings") or None

    try:
        got = wait_until(health, 60, f"{name}: /api/health shows the perf rings")
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()
    t.eq(f"{name}: exit 0 on SIGTERM", p.returncode, 0)
    return got


for size, text in (("1MiB", 1 * MiB), ("4MiB", 4 * MiB)):
    ring = ring_for(text)
    got = perf_rings(f"ring-{size}", f"alert_default_rules = no\nperf_ring_size = {size}\n")
    nrings = got // (PAGE + ring)
    t.check(f"perf_ring_size = {size}: memory.perf_rings = rings x (page + {ring // KiB} KiB), "
            f"one ring per CPU ({NCPU})",
            got % (PAGE + ring) == 0 and 1 <= nrings <= NCPU, f"perf_rings {got}")

# ---- record --verbose / -v ------------------------------------------------------------

for args in ([], ["--verbose"], ["-v"]):
    out = os.path.join(TMP, f"rec{len(args)}{''.join(args)}.jsonl")
    r = subprocess.run([BIN, "record", "--source", "perf", "--out", out, "--duration", "1", *args],
                       capture_output=True, text=True, timeout=120)
    stats = [x for x in r.stderr.splitlines() if re.search(r"perf: \d+ records, \d+ enters", x)]
    what = " ".join(args) or "without --verbose"
    t.eq(f"record {what}: exit 0", r.returncode, 0)
    t.eq(f"record {what}: the source's statistics {'logged' if args else 'not logged'}",
         len(stats), 1 if args else 0)

t.done()
