#!/usr/bin/env python3
"""test_heap_heaptrack.py - `commitwatch heap` against heaptrack's own
report of the same program (issue 31's cross-check).

Runs tests/programs/heap_truth under heaptrack (`heaptrack -o FILE`, then
`heaptrack_print -f FILE --flamegraph-cost-type leaked -F STACKS`: the
bytes still allocated at the end, exact, per stack) and under `commitwatch
heap --json`, and checks that both give the same leaked bytes at each of
the program's functions (truth_leak, truth_realloc, truth_churn: 0).
heaptrack interposes only some allocation functions (1.4: malloc, calloc,
realloc, free, posix_memalign, aligned_alloc, valloc; read from its
library's dynamic symbols): the blocks truth_leak takes from the others
(memalign) are in commitwatch's figure only, and the program says their
bytes (its EXPECT file's `by_allocator`). The comparison is shown to fail
on a figure one byte off.

Needs heaptrack, heaptrack_print and nm (binutils); without them it is
skipped (exit 77), in CI it fails (cwtest.require). Linux only.
Environment (tests/CMakeLists.txt): CW_BIN, CW_BUILD. Standard library
only. Exit status 0 when every check passed."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import Checks  # noqa: E402
from cwtest import require  # noqa: E402
from heaptruth import BIN, TRUTH, at  # noqa: E402

FUNCTIONS = ("truth_leak", "truth_realloc", "truth_churn")

require(sys.platform.startswith("linux"), "Linux")
require(os.path.exists(TRUTH), f"{TRUTH} (built with the tests)")
require(shutil.which("heaptrack") and shutil.which("heaptrack_print"),
        "heaptrack and heaptrack_print (apt-get install heaptrack)")
require(shutil.which("nm"), "nm (binutils), to read which functions heaptrack interposes")
TMP = tempfile.mkdtemp(prefix="cw_e2e_heap_heaptrack_")
c = Checks()


def heaptrack_exports():
    """The allocation functions heaptrack's preload library defines (it
    sits in ../lib/heaptrack beside the heaptrack script, as the script
    itself finds it)."""
    exe = os.path.realpath(shutil.which("heaptrack"))
    lib = os.path.join(os.path.dirname(exe), "..", "lib", "heaptrack", "libheaptrack_preload.so")
    require(os.path.exists(lib), f"heaptrack's preload library ({lib})")
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split()}


def heaptrack_leaks(stacks_file):
    """Leaked bytes per function of FUNCTIONS from heaptrack's folded
    stacks ("outer;...;inner; BYTES", a frame "name (file.c)" when it has
    line tables): each stack counted at its innermost frame of FUNCTIONS."""
    out = dict.fromkeys(FUNCTIONS, 0)
    for line in open(stacks_file):
        stack, _, value = line.rstrip("\n").rpartition(";")
        if not value.strip().isdigit():
            continue
        frames = [f.strip().split(" (")[0] for f in stack.split(";")]
        inner = [f for f in frames if f in FUNCTIONS]
        if inner:
            out[inner[-1]] += int(value)
    return out


def commitwatch_leaks(report):
    """Outstanding bytes per function of FUNCTIONS in commitwatch's report,
    each stack counted at its innermost frame of FUNCTIONS."""
    proc = [p for p in report["processes"] if p["name"] == "heap_truth"][0]
    out = dict.fromkeys(FUNCTIONS, 0)
    for s in proc["stacks"]:
        inner = [f.split("!", 1)[-1] for f in s["frames"]
                 if f.split("!", 1)[-1] in FUNCTIONS]
        if inner:
            out[inner[-1]] += s["outstanding_bytes"]
    return out


# ---- heaptrack ----
expect_ht = os.path.join(TMP, "expect_ht.json")
data = os.path.join(TMP, "ht")
p = subprocess.run(["heaptrack", "-o", data, TRUTH, expect_ht], capture_output=True, text=True,
                   timeout=300)
c.eq("heaptrack runs the program", p.returncode, 0)
files = [f for f in os.listdir(TMP) if f.startswith("ht.")]
c.check("heaptrack wrote its data file", len(files) == 1, f"{os.listdir(TMP)} {p.stdout[-300:]}")
stacks_file = os.path.join(TMP, "leaked.txt")
if files:
    p = subprocess.run(["heaptrack_print", "-f", os.path.join(TMP, files[0]),
                        "--print-leaks", "0", "--print-peaks", "0", "--print-allocators", "0",
                        "--print-temporary", "0", "--flamegraph-cost-type", "leaked",
                        "-F", stacks_file], capture_output=True, text=True, timeout=300)
    c.eq("heaptrack_print reads it", p.returncode, 0)
ht = heaptrack_leaks(stacks_file) if os.path.exists(stacks_file) else {}

# ---- commitwatch ----
expect = os.path.join(TMP, "expect.json")
p = subprocess.run([BIN, "heap", "--json", "--", TRUTH, expect], capture_output=True, text=True,
                   timeout=300)
c.eq("commitwatch heap --json exits 0", p.returncode, 0)
report = json.loads(p.stdout.strip().splitlines()[-1])
want = json.load(open(expect))
cw = commitwatch_leaks(report)
for k in ("dropped_events", "torn_events"):
    c.eq(f"commitwatch: nothing {k}", report[k], 0)

# ---- the comparison ----
# What truth_leak takes from functions heaptrack does not interpose is
# commitwatch's alone.
exports = heaptrack_exports()
unseen = {fn: b for fn, b in want["leak"]["by_allocator"].items() if fn not in exports}
print(f"heaptrack interposes none of {sorted(unseen)}: {sum(unseen.values())} bytes of "
      "truth_leak are commitwatch's alone")


def differences(cw, ht):
    """(function, commitwatch's bytes as heaptrack would see them, heaptrack's)
    where they differ."""
    seen = dict(cw)
    seen["truth_leak"] -= sum(unseen.values())
    return [(fn, seen[fn], ht.get(fn)) for fn in FUNCTIONS if seen[fn] != ht.get(fn)]


c.check("both tools give the same leaked bytes per function", not differences(cw, ht),
        f"{differences(cw, ht)} (commitwatch {cw}, heaptrack {ht})")
c.eq("commitwatch's leak at truth_leak is the truth", cw["truth_leak"],
     want["leak"]["outstanding_bytes"])
c.eq("heaptrack's leak at truth_realloc is the truth", ht.get("truth_realloc"),
     want["realloc"]["outstanding_bytes"])
c.eq("nothing leaks at truth_churn in heaptrack's report", ht.get("truth_churn"), 0)
for fn in FUNCTIONS:
    off = dict(cw)
    off[fn] += 1
    c.check(f"a commitwatch figure one byte off at {fn} does not match", differences(off, ht))
shutil.rmtree(TMP, ignore_errors=True)
c.done()
