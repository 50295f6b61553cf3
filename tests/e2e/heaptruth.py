"""heaptruth.py - the comparison of a heap report (`commitwatch heap
--json`) with the figures tests/programs/heap_truth derives from its own
constants, and where the binaries are, shared by test_heap.py (launch
mode) and test_heap_attach.py (attach mode); and the live service the
heap-trace tests run (start_live). Standard library only."""
import json
import os
import subprocess
import urllib.request

from cwtest import file_text, wait_until

BIN = os.environ.get("CW_BIN", "commitwatch")
BUILD = os.environ.get("CW_BUILD", "build")
TRUTH = os.path.join(BUILD, "tests", "programs", "heap_truth")
STATIC = os.path.join(BUILD, "tests", "programs", "heap_truth_static")


def at(proc, fn):
    """Figures summed over the stacks of proc that pass through fn."""
    frame = "heap_truth!" + fn
    keys = ("outstanding_bytes", "outstanding_count", "alloc_bytes", "alloc_count", "freed_bytes",
            "freed_count")
    out = dict.fromkeys(keys, 0)
    out["stacks"] = 0
    for s in proc["stacks"]:
        if frame in s["frames"]:
            out["stacks"] += 1
            for k in keys:
                out[k] += s[k]
    return out


def mismatches(report, want):
    """Where the report differs from the truth program's figures: a list
    of (what, got, want), empty when everything matches."""
    procs = [p for p in report["processes"] if p["name"] == "heap_truth"]
    if len(procs) != 1:
        return [("heap_truth processes", len(procs), 1)]
    p = procs[0]
    bad = []
    for part, fields in (("leak", ("outstanding_bytes", "outstanding_count")),
                         ("churn", ("alloc_bytes", "alloc_count")),
                         ("realloc", ("outstanding_bytes", "alloc_bytes", "alloc_count"))):
        got = at(p, want[part]["function"])
        if got["stacks"] == 0:
            bad.append((f"{part}: stacks through {want[part]['function']}", 0, ">= 1"))
        for f in fields:
            if got[f] != want[part][f]:
                bad.append((f"{part} {f}", got[f], want[part][f]))
    got = at(p, want["leak"]["function"])
    if got["freed_count"] != 0:
        bad.append(("leak freed_count", got["freed_count"], 0))
    got = at(p, want["churn"]["function"])
    for f in ("outstanding_bytes", "outstanding_count"):
        if got[f] != 0:
            bad.append((f"churn {f}", got[f], 0))
    if got["freed_bytes"] != want["churn"]["alloc_bytes"]:
        bad.append(("churn freed_bytes", got["freed_bytes"], want["churn"]["alloc_bytes"]))
    got = at(p, want["realloc"]["function"])
    if got["outstanding_count"] != 1:
        bad.append(("realloc outstanding_count", got["outstanding_count"], 1))
    return bad


def start_live(tmp, port, token, *extra):
    """`run --source perf` (root) with HTTP on port and the token, its
    stderr in tmp/run.log, once it serves /api/health with heap tracing and
    has loaded its rundown: (the process, the log file). SystemExit (FAIL)
    if it exits first."""
    log = open(os.path.join(tmp, "run.log"), "w+", buffering=1)
    run = subprocess.Popen(["nice", "-n", "-10", BIN, "run", "--source", "perf", "--db",
                            os.path.join(tmp, "h.db"), "--listen", f"127.0.0.1:{port}", "--token",
                            token, *extra], stderr=log)

    def up():
        if run.poll() is not None:
            raise SystemExit(f"FAIL: the daemon exited:\n{file_text(log.name)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=5) as h:
                ok = json.loads(h.read()).get("heap_tracing")
        except OSError:
            return False
        return ok and "rundown loaded" in file_text(log.name)
    try:
        wait_until(up, 60, "the daemon serves HTTP with heap tracing and loaded its rundown")
    except BaseException:
        if run.poll() is None:
            run.kill()
        raise
    return run, log
