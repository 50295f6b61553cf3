#!/usr/bin/env python3
"""test_win_heap.py - `commitwatch.exe heap` under Wine.

- `heap --etl FILE`: the heap truth (tests/etlgen/heap_gen.h) written by
  cw_etl_gen.exe under Wine, read by commitwatch.exe: exactly 2800 bytes in
  7 blocks outstanding at leak_here (first), churn at 0 outstanding, the
  ReAlloc chain at grow, 3 unknown frees, frames named from the images.
- The live heap session, `heap --pid PID`: Wine fakes the session and the
  heap-tracing call but cannot read a session in real time (OpenTrace,
  error 5; docs/WINDOWS.md, "Heap tracing"), so on a running
  memorytestapp.exe it says that ETW heap tracing is unavailable and which
  call failed, exits 1 without a crash, and the process runs on; a second
  attempt says the same (the session the first started was stopped). A
  process that does not exist gets its own message, exit 1.
- Launch mode, `heap -- PROGRAM`: the program is started suspended; as the
  session cannot be read, it is ended before it ran (no output, no process
  left), exit 1 with the same message; a missing program is CreateProcess's
  error.

Run by the Windows build's ctest (label wine), in a prefix of its own
(cwwine.own_prefix); see cwwine.py.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from cwtest import file_text, wait_until  # noqa: E402
from cwservice import Checks  # noqa: E402
import cwwine  # noqa: E402
from cwwine import BUILD, MEMORYTESTAPP, cw, run, spawn, win_path  # noqa: E402

GEN = os.path.join(BUILD, "tests", "etlgen", "cw_etl_gen.exe")
t = Checks()


def etl(tmp):
    path = os.path.join(tmp, "truth.etl")
    rc, out, err = run([GEN, "--heap-truth", win_path(path), "--ptr", "4", "--stacks", "keys",
                        "--compress", "--images", win_path(tmp)], timeout=300)
    if not t.check("cw_etl_gen.exe --heap-truth writes the trace", rc == 0 and os.path.isfile(path),
                   (rc, err[-400:])):
        return
    rc, out, err = cw("heap", "--etl", win_path(path), "--images", win_path(tmp), "--json",
                      timeout=300)
    if not t.check("heap --etl --json: exit 0", rc == 0, (rc, err[-400:])):
        return
    doc = json.loads(out)
    t.eq("heap --etl: every heap event, 3 unknown frees", (doc["events"], doc["unknown_frees"]),
         (115, 3))
    p = next((p for p in doc["processes"] if p["pid"] == 4242), {"stacks": [{}]})
    leak = p["stacks"][0]
    t.eq("heap --etl: leak_here first, named from the images", leak.get("frames"),
         ["heaptruth.exe!main", "heaptruth.exe!leak_here", "ntdll.dll!RtlAllocateHeap"])
    t.eq("heap --etl: leak_here 2800 bytes in 7 blocks outstanding",
         (leak.get("outstanding_bytes"), leak.get("outstanding_count")), (2800, 7))
    by_fn = {s["frames"][-2]: s for s in p["stacks"] if len(s.get("frames", [])) >= 2}
    churn, grow = by_fn.get("heaptruth.exe!churn", {}), by_fn.get("heaptruth.exe!grow", {})
    t.eq("heap --etl: churn allocated and freed 50 blocks, 0 outstanding",
         (churn.get("alloc_count"), churn.get("freed_count"), churn.get("outstanding_bytes")),
         (50, 50, 0))
    t.eq("heap --etl: grow's ReAlloc chain",
         (grow.get("alloc_bytes"), grow.get("freed_bytes"), grow.get("outstanding_bytes")),
         (240, 112, 128))


def live(tmp):
    app_out = os.path.join(tmp, "memorytestapp.out")
    with open(app_out, "w") as out:
        app = spawn([MEMORYTESTAPP, "--seconds", "1", "--delay", "0", "--hold"],
                    stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT)
    try:
        def ready():
            if app.poll() is not None:
                raise RuntimeError(f"memorytestapp.exe exited with {app.returncode}: "
                                   f"{file_text(app_out)}")
            return re.search(r"pid (\d+),", file_text(app_out))

        pid = int(wait_until(ready, 60, "memorytestapp.exe prints its pid").group(1))
        for attempt in ("", " again"):
            rc, out, err = cw("heap", "--pid", str(pid), "--duration", "5s", timeout=180)
            t.eq(f"heap --pid (live){attempt}: exit 1", rc, 1)
            t.check(f"heap --pid (live){attempt}: says ETW heap tracing is unavailable, "
                    "which call failed (OpenTrace, error 5) and what to use instead",
                    f"ETW heap tracing of process {pid} is unavailable" in err
                    and "(OpenTrace) failed (error 5)" in err and "heap --etl FILE" in err,
                    err[-600:])
            t.check(f"heap --pid (live){attempt}: no report on stdout", out == "", out[:300])
        t.check("the traced process runs on", app.poll() is None, app.returncode)
    finally:
        try:  # --hold ends at the end of its input
            app.stdin.close()
            app.wait(timeout=30)
        except Exception:
            app.kill()
            app.wait()
    rc, out, err = cw("heap", "--pid", "999999", timeout=120)
    t.check("heap --pid of no process: exit 1, says so",
            rc == 1 and "no such process" in err and "999999" in err, (rc, err[-400:]))
    # Launch mode: the program starts suspended, the session cannot be
    # read, so it is ended before it ran (it prints nothing, nothing is left).
    rc, out, err = cw("heap", "--", win_path(MEMORYTESTAPP), "--seconds", "1", "--delay", "0",
                      timeout=180)
    t.eq("heap -- PROGRAM (live): exit 1", rc, 1)
    t.check("heap -- PROGRAM (live): ETW heap tracing unavailable, which call failed, and the "
            "program ended before it ran",
            re.search(r"ETW heap tracing of process \d+ is unavailable", err)
            and "(OpenTrace) failed (error 5)" in err and "was ended before it ran" in err,
            err[-600:])
    t.check("heap -- PROGRAM (live): the program did not run (no output)",
            "committed_private" not in out + err, out[-300:])
    left = [n for n in cwwine.wmic_processes().values() if n.lower() == "memorytestapp.exe"]
    t.eq("heap -- PROGRAM (live): no memorytestapp.exe left", left, [])
    rc, out, err = cw("heap", "--", "C:\\no\\such-program.exe", timeout=120)
    t.check("heap -- a missing program: exit 1, says CreateProcess could not start it",
            rc == 1 and "cannot start" in err and "(CreateProcess, error" in err, (rc, err[-400:]))


def main():
    cwwine.require_wine(GEN, MEMORYTESTAPP)
    cwwine.own_prefix("heap")  # no sockets of its own: kept out of the shared prefix's
    with tempfile.TemporaryDirectory(prefix="cw-win-heap-", dir=BUILD) as tmp:
        etl(tmp)
        live(tmp)
    if t.failures:
        print("test_win_heap: FAILED: " + "; ".join(t.failures))
    t.done()


if __name__ == "__main__":
    sys.exit(main())
