#!/usr/bin/env python3
"""test_heap_attach.py - `commitwatch heap --pid PID` (attach mode) against
the truth.

tests/programs/heap_truth --attach allocates 9 blocks, says "ready" and
waits; the real binary (CW_BIN) attaches to it running (the interposer
loaded with ptrace and dlopen, its GOT slots rewritten) and says so; then
the program leaks, churns, reallocs and frees the 9 blocks the trace
never saw allocated, and exits. The report must give exactly the figures
the program derives from its own constants (heaptruth.py, as launch
mode's test), count the 9 frees as frees of unknown blocks, and show
nothing of the blocks allocated before the attach. Then --duration:
tracing ends while the program waits, and it runs on untraced to a clean
exit (the slots put back), and a second attach to it works. Then the errors: no such process, a static
program, --pid with a PROGRAM, a --pid that is not a number.

Needs the permission to ptrace a process (root in CI). Environment
(tests/CMakeLists.txt): CW_BIN, CW_BUILD. Linux only. Standard library
only. Exit status 0 when every check passed.
"""
import json
import os
import select
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import Checks  # noqa: E402
from cwtest import require  # noqa: E402
from heaptruth import BIN, STATIC, TRUTH, at, mismatches  # noqa: E402

TMP = tempfile.mkdtemp(prefix="cw_e2e_heap_attach_")
BEFORE_N = 9  # heap_truth.c

require(sys.platform.startswith("linux"), "Linux (attach mode)")
require(os.path.exists(TRUTH), f"{TRUTH} (built with the tests)")
require(os.geteuid() == 0 or not os.path.exists("/proc/sys/kernel/yama/ptrace_scope") or
        open("/proc/sys/kernel/yama/ptrace_scope").read().strip() == "0",
        "permission to ptrace another process (root, or Yama's ptrace_scope 0)")
c = Checks()


def start_truth(expect, *extra):
    """heap_truth waiting for its go, once it said ready."""
    t = subprocess.Popen([TRUTH, *extra, expect], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    line = t.stdout.readline()
    if line.strip() != "ready":
        t.kill()
        raise SystemExit(f"heap_truth did not say ready: {line!r}")
    return t


def wait_attached(p, timeout=30):
    """The stderr lines of commitwatch heap up to its 'attached' line."""
    seen, end = "", time.monotonic() + timeout
    while time.monotonic() < end and "attached to process" not in seen:
        r, _, _ = select.select([p.stderr], [], [], 0.2)
        if r:
            line = p.stderr.readline()
            if not line:
                break
            seen += line
    return seen


# ---- the truth, attached ----
expect = os.path.join(TMP, "expect.json")
t = start_truth(expect, "--attach")
cw = subprocess.Popen([BIN, "heap", "--pid", str(t.pid), "--json"], stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True)
said = wait_attached(cw)
c.check("commitwatch heap says it attached, and how many calls it rewrote",
        f"attached to process {t.pid} (" in said, said)
maps = open(f"/proc/{t.pid}/maps").read()
c.check("the interposer (its copy) is mapped in the running process", "/tmp/commitwatch-heap-" in maps)
t.stdin.write("go\n")
t.stdin.close()
c.eq("heap_truth ran to its end", t.wait(timeout=60), 0)
out, err = cw.communicate(timeout=60)
c.eq("heap --pid exits 0 when the process has ended", cw.returncode, 0)
lines = out.strip().splitlines()
r = json.loads(lines[-1]) if lines else None
c.check("the report is JSON with processes", r is not None and "processes" in r, out[-500:])
want = json.load(open(expect))
bad = mismatches(r, want) if r else ["no report"]
c.check("the report gives the truth program's figures exactly", not bad, f"{bad}")
c.eq("the frees of the blocks allocated before the attach are counted as unknown",
     r and r["unknown_frees"], want["unknown_frees"])
c.eq("... and they are the 9 it allocated before", want["unknown_frees"], BEFORE_N)
for k in ("dropped_events", "torn_events", "unknown_stacks"):
    c.eq(f"nothing {k}", r and r[k], 0)
if r:
    proc = [x for x in r["processes"] if x["name"] == "heap_truth"]
    before = at(proc[0], "truth_before") if proc else {"stacks": -1}
    c.eq("nothing of the blocks allocated before the attach is in the report", before["stacks"], 0)

# The comparison fails on a truth that is off by one.
off = json.loads(json.dumps(want))
off["leak"]["outstanding_bytes"] += 1
c.check("a truth one byte off does not match", r is not None and mismatches(r, off) != [])

# ---- --duration: tracing ends, the process runs on untraced ----
t = start_truth(os.path.join(TMP, "expect2.json"), "--attach")
p = subprocess.run([BIN, "heap", "--pid", str(t.pid), "--duration", "1s", "--json"],
                   capture_output=True, text=True, timeout=60)
c.eq("heap --pid --duration exits 0", p.returncode, 0)
c.check("it says the process runs on untraced", "runs on untraced" in p.stderr, p.stderr)
r = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else None
c.check("the report names the process", r is not None and
        [x["pid"] for x in r["processes"]] == [t.pid], p.stdout[-300:])
# Attached again, once the first trace has ended: a new trace of it.
p = subprocess.run([BIN, "heap", "--pid", str(t.pid), "--duration", "1s", "--json"],
                   capture_output=True, text=True, timeout=60)
c.eq("a second attach to the same process exits 0", p.returncode, 0)
c.check("... and says it attached", f"attached to process {t.pid} (" in p.stderr, p.stderr)
t.stdin.write("go\n")
t.stdin.close()
c.eq("after the traces the process runs on to a clean exit (the GOT put back)",
     t.wait(timeout=60), 0)
want2 = json.load(open(os.path.join(TMP, "expect2.json")))
c.eq("... having done all its work", want2["leak"]["function"], "truth_leak")

# ---- errors ----
gone = subprocess.Popen(["true"])
gone.wait()
p = subprocess.run([BIN, "heap", "--pid", str(gone.pid)], capture_output=True, text=True,
                   timeout=60)
c.eq("no such process: exit 1", p.returncode, 1)
c.check("no such process: said so", f"no process {gone.pid}" in p.stderr, p.stderr)
if os.path.exists(STATIC):
    s = subprocess.Popen([STATIC, "--attach", os.path.join(TMP, "s.json")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    s.stdout.readline()
    p = subprocess.run([BIN, "heap", "--pid", str(s.pid)], capture_output=True, text=True,
                       timeout=60)
    c.eq("a static program: exit 1", p.returncode, 1)
    c.check("a static program: said so", "static binary" in p.stderr, p.stderr)
    s.stdin.write("go\n")
    s.stdin.close()
    c.eq("a static program: untouched, it runs to its end", s.wait(timeout=60), 0)
else:
    c.check(f"{STATIC} is built", False)
p = subprocess.run([BIN, "heap", "--pid", "1", "--", "true"], capture_output=True, text=True)
c.eq("--pid with a PROGRAM: exit 2", p.returncode, 2)
c.check("--pid with a PROGRAM: said so", "give no PROGRAM" in p.stderr, p.stderr)
p = subprocess.run([BIN, "heap", "--pid", "x1"], capture_output=True, text=True)
c.eq("--pid x1: exit 2", p.returncode, 2)
c.check("--pid x1: said so", "--pid takes a process ID" in p.stderr, p.stderr)
c.done()
