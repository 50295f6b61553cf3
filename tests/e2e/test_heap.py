#!/usr/bin/env python3
"""test_heap.py - `commitwatch heap` (launch mode) against the truth.

Runs the real binary (CW_BIN) on tests/programs/heap_truth, which writes
the figures it expects (derived from its own constants) to a file, and
checks the report gives exactly (with either of the interposer's
unwinders): the leaked bytes and blocks at truth_leak, nothing
outstanding at truth_churn (its allocated bytes and count exact, across
three threads), the realloc chain's final size outstanding at
truth_realloc; nothing dropped, torn or unknown. The
comparison is shown to fail on numbers that are off by one. Then the
text report, --duration (tracing ends, the program runs on), and the
errors: a static program, a missing one, one not executable, a bad
duration, no program.

Environment (tests/CMakeLists.txt): CW_BIN, CW_BUILD. Linux only.
Standard library only. Exit status 0 when every check passed.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import Checks  # noqa: E402
from cwtest import require  # noqa: E402
from heaptruth import BIN, STATIC, TRUTH, mismatches  # noqa: E402

TMP = tempfile.mkdtemp(prefix="cw_e2e_heap_")

require(sys.platform.startswith("linux"), "Linux (launch mode)")
require(os.path.exists(TRUTH), f"{TRUTH} (built with the tests)")
c = Checks()


def heap(*args, timeout=120):
    return subprocess.run([BIN, "heap", *args], capture_output=True, text=True, timeout=timeout)


def report_json(p):
    """The report: the last line of stdout (the program's own output, if
    any, comes first)."""
    lines = p.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else None


# ---- the truth, as JSON ----
expect = os.path.join(TMP, "expect.json")
p = heap("--json", "--", TRUTH, expect)
c.eq("heap --json exits 0", p.returncode, 0)
r = report_json(p)
want = json.load(open(expect))
c.check("the report is JSON with processes", r is not None and "processes" in r, p.stdout[-500:])
bad = mismatches(r, want)
c.check("the report gives the truth program's figures exactly", not bad, f"{bad}")
for k in ("dropped_events", "torn_events", "unknown_frees", "unknown_stacks"):
    c.eq(f"nothing {k}", r[k], 0)
truth = [x for x in r["processes"] if x["name"] == "heap_truth"][0]
top = truth["stacks"][0]
c.eq("the most outstanding stack is the leak's", "heap_truth!truth_leak" in top["frames"], True)
c.eq("its innermost frame is truth_leak (the interposer's own left out)", top["frames"][-1],
     "heap_truth!truth_leak")
c.eq("its peak is what it leaked", top["peak_bytes"], want["leak"]["outstanding_bytes"])
c.check("totals hold the process's", r["totals"]["outstanding_bytes"] >=
        truth["totals"]["outstanding_bytes"] >= want["leak"]["outstanding_bytes"])

# The comparison catches numbers that are off: each figure one off.
for part, field in (("leak", "outstanding_bytes"), ("leak", "outstanding_count"),
                    ("churn", "alloc_count"), ("realloc", "outstanding_bytes")):
    off = json.loads(json.dumps(want))
    off[part][field] += 1
    c.check(f"a truth with {part} {field} one off does not match", mismatches(r, off) != [])

# Both unwinders the interposer has give the truth: libunwind's (its
# default where libunwind 8 is installed) and glibc's backtrace().
env = dict(os.environ, CW_HEAP_UNWIND="libgcc")
p = subprocess.run([BIN, "heap", "--json", "--", TRUTH, expect], capture_output=True, text=True,
                   timeout=120, env=env)
c.eq("heap --json (glibc's backtrace) exits 0", p.returncode, 0)
r2 = report_json(p)
bad = mismatches(r2, json.load(open(expect))) if r2 else ["no report"]
c.check("glibc's backtrace() gives the truth program's figures too", not bad, f"{bad}")

# ---- the text report ----
p = heap("--top", "2", "--", TRUTH, os.path.join(TMP, "expect2.json"))
c.eq("heap (text) exits 0", p.returncode, 0)
c.check("the text names the process and the leak's frame first",
        "heap_truth" in p.stdout and p.stdout.index("heap_truth!truth_leak") <
        p.stdout.index("heap_truth!truth_realloc"), p.stdout[:800])
c.check("the text gives the leaked bytes",
        f"({want['leak']['outstanding_bytes']} B)" in p.stdout, p.stdout[:800])
c.check("--top 2 says stacks were left out", "more stacks; --json lists all" in p.stdout)

# ---- --duration: tracing ends, the program runs on ----
# Into files: the program runs on with commitwatch's stdout and stderr
# (pipes would stay open until it ends).
with open(os.path.join(TMP, "d.out"), "w+") as out, open(os.path.join(TMP, "d.err"), "w+") as err:
    rc = subprocess.run([BIN, "heap", "--duration", "1s", "--json", "--", "sleep", "30"],
                        stdout=out, stderr=err, timeout=60).returncode
    out.seek(0)
    err.seek(0)
    p = subprocess.CompletedProcess([], rc, out.read(), err.read())
c.eq("heap --duration exits 0", p.returncode, 0)
c.check("it says the program runs on untraced", "runs on untraced" in p.stderr, p.stderr)
r = report_json(p)
sleeps = [x for x in (r or {}).get("processes", []) if x["name"] == "sleep"]
c.eq("the report has the sleep process", len(sleeps), 1)
for x in sleeps:  # ours: started by this test
    try:
        os.kill(x["pid"], signal.SIGTERM)
    except ProcessLookupError:
        pass

# ---- errors ----
if os.path.exists(STATIC):
    p = heap("--", STATIC, os.path.join(TMP, "x.json"))
    c.eq("a static program: exit 1", p.returncode, 1)
    c.check("a static program: said so", "statically linked" in p.stderr, p.stderr)
    c.check("a static program: it was not run", not os.path.exists(os.path.join(TMP, "x.json")))
else:
    c.check(f"{STATIC} is built", False)
p = heap("--", "cw_no_such_program_heap")
c.eq("a missing program: exit 1", p.returncode, 1)
c.check("a missing program: said so", "not found on PATH" in p.stderr, p.stderr)
p = heap("--", os.path.join(TMP, "absent"))
c.eq("a missing path: exit 1", p.returncode, 1)
c.check("a missing path: said so", "No such file" in p.stderr, p.stderr)
noexec = os.path.join(TMP, "noexec")
open(noexec, "w").write("#!/bin/sh\n")
os.chmod(noexec, 0o644)
p = heap("--", noexec)
c.eq("not executable: exit 1", p.returncode, 1)
c.check("not executable: said so", "not executable" in p.stderr, p.stderr)
p = heap("--duration", "5x", "--", TRUTH, expect)
c.eq("a bad duration: exit 2", p.returncode, 2)
c.check("a bad duration: said so", "--duration takes a positive duration" in p.stderr, p.stderr)
p = heap("--json")
c.eq("no program: exit 2", p.returncode, 2)
c.check("no program: said so", "no program" in p.stderr, p.stderr)
c.done()
