#!/usr/bin/env python3
"""test_heap_etl.py - `commitwatch heap --etl FILE` end to end, on the heap
truth written as a Windows trace (tests/etlgen/heap_gen.h, `cw_etl_gen
--heap-truth`): Heap Alloc, ReAlloc and Free events with their stacks, the
images the frames are in written beside (--images).

- 64- and 32-bit traces, stacks as walks and as stack keys, compressed or
  not, heap events with SYSTEM headers or FULL ones (the class GUID): the
  JSON report holds exactly the truth: leak_here's 7 blocks of
  2800 bytes outstanding and first, churn's 50 blocks of 3200 bytes
  allocated and freed (0 outstanding), grow's ReAlloc chain (4 allocations
  of 240 bytes, 3 frees of 112, 128 outstanding), 3 frees of blocks from
  before the trace counted as unknown, other.exe's 999 bytes apart; the
  text report prints the leak's frames innermost first;
- --pid keeps one process;
- bad input, each with a clear message, the report of what was read on
  stdout and exit 1: an Alloc too short for its layout (one block fewer at
  leak_here), a trace without heap events, a truncated file; and exit 1
  without a report for a file that is not an .etl; usage errors exit 2.

Environment: CW_BIN, CW_ETL_GEN (tests/CMakeLists.txt).
"""
import json
import os
import subprocess
import sys
import tempfile

BIN = os.environ.get("CW_BIN", "commitwatch")
GEN = os.environ.get("CW_ETL_GEN", "cw_etl_gen")
fails = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        fails.append(what)
    return ok


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def gen(tmp, name, *opts):
    path = os.path.join(tmp, name)
    rc, _, err = run(GEN, "--heap-truth", path, "--images", tmp, *opts)
    if not check(f"cw_etl_gen --heap-truth {' '.join(opts)}", rc == 0, err):
        sys.exit(1)
    return path


def heap(path, tmp, *args):
    return run(BIN, "heap", "--etl", path, "--images", tmp, *args)


def proc(doc, pid):
    return next((p for p in doc["processes"] if p["pid"] == pid), None)


def stack(p, fn):
    return next((s for s in p["stacks"] if len(s["frames"]) >= 2 and s["frames"][-2] == fn), None)


def figs(s):
    keys = ("outstanding_bytes", "outstanding_count", "alloc_bytes", "alloc_count",
            "freed_bytes", "freed_count")
    return tuple(s[k] for k in keys) if s else None


def truth(tmp, opts):
    what = " ".join(opts)
    path = gen(tmp, "truth.etl", *opts)
    rc, out, err = heap(path, tmp, "--json")
    if not check(f"[{what}] heap --etl --json exits 0", rc == 0, err[-400:]):
        return
    doc = json.loads(out)
    check(f"[{what}] every heap event applied, 3 frees of unknown blocks",
          doc["events"] == 115 and doc["unknown_frees"] == 3, (doc["events"], doc["unknown_frees"]))
    p = proc(doc, 4242)
    if not check(f"[{what}] heaptruth.exe is in the report", p and p["name"] == "heaptruth.exe", doc):
        return
    leak = p["stacks"][0]
    check(f"[{what}] leak_here first, named from the images",
          leak["frames"] == ["heaptruth.exe!main", "heaptruth.exe!leak_here",
                             "ntdll.dll!RtlAllocateHeap"], leak["frames"])
    check(f"[{what}] leak_here: 2800 bytes in 7 blocks outstanding, none freed",
          figs(leak) == (2800, 7, 2800, 7, 0, 0), figs(leak))
    c = stack(p, "heaptruth.exe!churn")
    check(f"[{what}] churn: 50 blocks of 3200 bytes allocated and freed, 0 outstanding",
          figs(c) == (0, 0, 3200, 50, 3200, 50) and c["peak_bytes"] == 64, c)
    g = stack(p, "heaptruth.exe!grow")
    check(f"[{what}] grow: the ReAlloc chain, 128 bytes live",
          figs(g) == (128, 1, 240, 4, 112, 3), figs(g))
    o = proc(doc, 777)
    check(f"[{what}] other.exe's 999 bytes apart",
          o and o["totals"]["outstanding_bytes"] == 999 and len(o["stacks"]) == 1, o)
    rc, out, err = heap(path, tmp, "--top", "1")
    first = out.find("process 4242 heaptruth.exe")
    check(f"[{what}] the text report prints the leak's frames innermost first",
          rc == 0 and first >= 0 and
          "ntdll.dll!RtlAllocateHeap\n      heaptruth.exe!leak_here\n      heaptruth.exe!main"
          in out[first:] and "(2 more stacks; --json lists all)" in out, out[-800:])
    rc, out, err = heap(path, tmp, "--json", "--pid", "777")
    doc = json.loads(out) if rc == 0 else {"processes": []}
    check(f"[{what}] --pid 777 keeps other.exe only",
          [p["pid"] for p in doc["processes"]] == [777], (rc, err[-300:]))


def bad_input(tmp):
    path = gen(tmp, "short.etl", "--variant", "short")
    rc, out, err = heap(path, tmp, "--json")
    doc = json.loads(out) if out.strip() else None
    leak = stack(proc(doc, 4242), "heaptruth.exe!leak_here") if doc else None
    check("a short Alloc: exit 1, says which events were left out and why",
          rc == 1 and "1 heap events could not be decoded" in err
          and "Heap/33 v2: 1 (payload too short or malformed)" in err, (rc, err))
    check("a short Alloc: the report of the rest (6 blocks, 2700 bytes at leak_here)",
          figs(leak)[:2] == (2700, 6) if leak else False, out[-400:])

    path = gen(tmp, "noheap.etl", "--variant", "no-heap")
    rc, out, err = heap(path, tmp)
    check("no heap events: exit 1, says so and how to record them",
          rc == 1 and "holds no heap events" in err and "xperf -heap -pids PID" in err, (rc, err))
    check("no heap events: the (empty) report on stdout", out.startswith("heap report: 0 events"),
          out[:200])

    whole = gen(tmp, "whole.etl")
    data = open(whole, "rb").read()
    cut = os.path.join(tmp, "cut.etl")
    open(cut, "wb").write(data[:len(data) - 100])
    rc, out, err = heap(cut, tmp, "--json")
    doc = json.loads(out) if out.strip() else {"events": -1}
    check("a truncated file: exit 1, says it is damaged and what the report holds",
          rc == 1 and "is damaged (it ends inside a buffer" in err
          and "only the events of the buffers read" in err, (rc, err))
    check("a truncated file: the report of what was read",
          0 < doc["events"] < 115, doc.get("events"))

    notetl = os.path.join(tmp, "not.etl")
    open(notetl, "wb").write(b"hello, not a trace\n" * 100)
    rc, out, err = heap(notetl, tmp)
    check("not an .etl: exit 1, says so, no report",
          rc == 1 and "not an .etl file" in err and out == "", (rc, err, out[:100]))
    rc, out, err = run(BIN, "heap", "--etl", whole, "--duration", "5s")
    check("--etl with --duration: usage error (exit 2)", rc == 2 and "--etl" in err, (rc, err))
    rc, out, err = run(BIN, "heap", "--images", tmp, "--pid", "1")
    check("--images without --etl: usage error (exit 2)", rc == 2 and "--etl" in err, (rc, err))


def main():
    with tempfile.TemporaryDirectory(prefix="cw-heap-etl-") as tmp:
        for opts in (["--ptr", "8"], ["--ptr", "8", "--stacks", "keys", "--compress"],
                     ["--ptr", "4", "--compress"], ["--ptr", "4", "--stacks", "keys"],
                     ["--ptr", "8", "--full-header"]):
            truth(tmp, opts)
        bad_input(tmp)
    if fails:
        print(f"{len(fails)} checks failed", flush=True)
        return 1
    print("all checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
