#!/usr/bin/env python3
"""heap_overhead.py - what tracing one process's heap costs it, and others
(docs/BENCHMARKS.md, "Heap drill-down overhead").

    bench/heap_overhead.py [--build DIR] [--rounds N] [--work N] [--before DIR]

The traced program is python3 with PYTHONMALLOC=malloc (every object from
malloc, as an allocation-heavy C program would): it builds and drops
dicts, lists and strings for --work iterations and prints the seconds its
loop took, measured inside it, so an attach's own latency is not counted.
Attaching tools trace it while it waits for a line on stdin, then the
loop runs.

Modes, each --rounds times, interleaved, medians printed:
  none                 no tracing
  commitwatch launch   commitwatch heap -- python3 ...
  commitwatch attach   commitwatch heap --pid PID (the program already running)
  heaptrack launch     heaptrack python3 ...
  heaptrack attach     heaptrack -p PID (gdb injects its library)
  memleak attach       memleak-bpfcc -p PID (bcc's eBPF uprobes), where it runs
  ... (before)         with --before DIR: commitwatch's two modes again with
                       the commitwatch and libcwheap.so in DIR (another
                       build), in the same rounds, for a change's effect
Others: a second, untraced copy runs beside the traced one in the
`commitwatch attach` mode and in an untraced pair; its time ratio is the
cost to processes that are not traced (goal <= 1.02).
commitwatch's own memory and CPU during a long trace: bench/heap_rss.py.

Ratios are to `none` measured in the same rounds (the machine is shared);
the `other, beside attach` row's is to `other, beside untraced`. For
commitwatch's modes, `dropped` is the most events its report said were
dropped in a round (the ring full and the reader stalled: a run that drops
is faster than one that records everything, so the two are not alike).
"""
import json
import re

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

WORK = r"""
import sys, time
n = int(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
t0 = time.perf_counter()
keep = []
for i in range(n):
    d = {str(k): [k] * 4 for k in range(40)}
    s = "x" * (64 + i % 512)
    if i % 97 == 0:
        keep.append((d, s))
    if len(keep) > 200:
        keep.pop(0)
print(f"elapsed {time.perf_counter() - t0:.6f}", flush=True)
"""


def python_cmd(script, work):
    return [sys.executable, script, str(work)]


def env():
    e = dict(os.environ)
    e["PYTHONMALLOC"] = "malloc"
    return e


def run_plain(cmd, wrap=None):
    """Runs cmd (under wrap, a launch-mode tool's argv prefix), starts its loop at once;
    returns the loop's seconds."""
    p = subprocess.Popen((wrap or []) + cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env(), text=True)
    out, _ = p.communicate("go\n", timeout=1800)
    return elapsed(out, p.returncode, (wrap or []) + cmd), dropped(out)


DROPPED = re.compile(r'"dropped_events"\s*:\s*(\d+)')


def dropped(text):
    """The dropped events a commitwatch --json report in text names, or None."""
    m = DROPPED.search(text or "")
    return int(m.group(1)) if m else None


def elapsed(out, rc, cmd):
    """The loop's seconds, from the workload's "elapsed S" line."""
    lines = [l for l in out.splitlines() if l.startswith("elapsed ")]
    if rc != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)}: exit {rc}, output {out[-300:]!r}")
    return float(lines[0].split()[1])


def run_attached(cmd, attach, settle=2.0, beside=None):
    """Starts cmd, attaches `attach(pid)` (a Popen), lets the loop run, stops the tool.
    beside: a second, untraced command started at the same moment; returns
    (seconds, beside seconds or None)."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env(), text=True)
    p.stdout.readline()  # "ready": started, waiting for its go
    tool = attach(p.pid)
    time.sleep(settle)
    if tool.poll() is not None:
        p.kill()
        why = [l for l in (tool.stderr.read() if tool.stderr else "").splitlines() if l.strip()
               and not l.startswith((" ", "Traceback"))]
        raise RuntimeError(f"the tracing tool ended early (exit {tool.returncode})"
                           + (f": {why[0]}" if why else ""))
    q = None
    if beside:
        q = subprocess.Popen(beside, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env(), text=True)
        q.stdin.write("go\n")
        q.stdin.flush()
    out, _ = p.communicate("go\n", timeout=1800)
    other = elapsed(q.communicate(timeout=1800)[0], q.returncode, beside) if q else None
    try:
        tool.wait(timeout=60 if tool.args[0] != "sleep" else 0.1)
    except subprocess.TimeoutExpired:
        tool.terminate()
        tool.wait(timeout=30)
    report = tool.stdout.read() if tool.stdout else None
    return elapsed(out, p.returncode, cmd), other, dropped(report)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=int, default=200000)
    ap.add_argument("--before", help="a folder with another build's commitwatch and "
                    "libcwheap.so, measured beside --build's")
    a = ap.parse_args()
    cw = os.path.join(os.path.abspath(a.build), "commitwatch")
    tmp = tempfile.mkdtemp(prefix="cw_heap_overhead_")
    script = os.path.join(tmp, "work.py")
    with open(script, "w") as f:
        f.write(WORK)
    cmd = python_cmd(script, a.work)
    # Each mode: a function returning (seconds, dropped events or None).
    def cw_attach(binary):
        return lambda pid: subprocess.Popen([binary, "heap", "--pid", str(pid), "--json"],
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                            text=True)

    def attached(attach, **kw):
        r = run_attached(cmd, attach, **kw)
        return (r[1] if "beside" in kw else r[0]), r[2]

    modes = {"none": lambda: run_plain(cmd)}
    modes["commitwatch launch"] = lambda: run_plain(cmd, [cw, "heap", "--json", "--"])
    modes["commitwatch attach"] = lambda: attached(cw_attach(cw))
    if a.before:
        old = os.path.join(os.path.abspath(a.before), "commitwatch")
        modes["commitwatch launch (before)"] = lambda: run_plain(cmd, [old, "heap", "--json",
                                                                     "--"])
        modes["commitwatch attach (before)"] = lambda: attached(cw_attach(old))
    # Another process, not traced, beside the traced one: its own time with
    # the trace running, against beside an untraced copy.
    modes["other, beside untraced"] = lambda: attached(
        lambda pid: subprocess.Popen(["sleep", "3600"]), beside=cmd)
    modes["other, beside attach"] = lambda: attached(cw_attach(cw), beside=cmd)
    if shutil.which("heaptrack"):
        modes["heaptrack launch"] = lambda: run_plain(
            cmd, ["heaptrack", "-o", os.path.join(tmp, "ht-launch")])
        modes["heaptrack attach"] = lambda: attached(lambda pid: subprocess.Popen(
            ["heaptrack", "-o", os.path.join(tmp, "ht-attach"), "-p", str(pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), settle=8.0)
    if shutil.which("memleak-bpfcc"):
        modes["memleak attach"] = lambda: attached(lambda pid: subprocess.Popen(
            ["memleak-bpfcc", "-p", str(pid)], stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True), settle=15.0)
    res = {m: [] for m in modes}
    drops = {m: [] for m in modes}
    failed = {}
    for r in range(a.rounds):
        for m, fn in modes.items():
            if m in failed:
                continue
            try:
                secs, lost = fn()
                res[m].append(secs)
                if lost is not None:
                    drops[m].append(lost)
            except Exception as e:  # a tool that does not run here: say so, go on
                failed[m] = str(e)
    base = statistics.median(res["none"])
    print(f"python3 PYTHONMALLOC=malloc, {a.work} iterations, {a.rounds} rounds, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{'mode':28} {'median s':>10} {'ratio':>9} {'dropped':>10}")
    for m in modes:
        if m in failed:
            print(f"{m:28} {'-':>10} {'-':>9}  ({failed[m][:100]})")
            continue
        med = statistics.median(res[m])
        ref = statistics.median(res["other, beside untraced"]) if m == "other, beside attach" \
            else base
        lost = f"{max(drops[m]):>10}" if drops[m] else f"{'':>10}"
        print(f"{m:28} {med:10.3f} {med / ref:8.2f}x {lost}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
