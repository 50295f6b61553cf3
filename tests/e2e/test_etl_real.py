#!/usr/bin/env python3
"""test_etl_real.py - `commitwatch etl info` on the real traces of
../shared/data/etl (CW_ETL_DATA; see its README), read in place (the two
zip files are unpacked into a temporary folder, never into the project).

Checks, per file: the header (OS build, pointer size, CPUs, clock, start),
the buffers (how many, how many compressed: every one decompresses to its
size), the event counts per kernel class and type, the processes with
their lifetimes, image ranges, and that every StackWalk event and stack
key found the event it belongs to. None holds VirtualAlloc events: the
report says so and gives the commands that record a usable trace.

A missing file fails the test in CI (cwtest.require) and skips it
elsewhere, saying which file. Standard library only.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import zipfile

sys.path.insert(0, os.path.dirname(__file__))
from cwtest import require  # noqa: E402

BIN = os.environ.get("CW_BIN", "commitwatch")
SOURCE = os.environ.get("CW_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.environ.get("CW_ETL_DATA", os.path.join(SOURCE, "..", "shared", "data", "etl"))
TMP = tempfile.mkdtemp(prefix="cw_e2e_etl_real_")

SHA256 = {
    "perfview-net.4.5.2.x64.etl.zip":
        "7ff6701d6efe27f755678d009e78c765ae7cdf2255610863ddf4605cff29cbc8",
    "perfview-net.4.5.2.x86.etl.zip":
        "9852349d8969d912674fa4875be72d3f521811c32f6c0226d02678429c45e795",
    "perfview-SelfDescribingSingleEvent.etl":
        "4c312c63c7d366e12b908c49769943886c017497183733bc2c93b8d80e932c7c",
    "airbus-ShutdownPerfDiagLogger.etl":
        "91d5e8c962066abacd9b9433754c83c1dbda9f5dfac1a58b309a26f066cd54c5",
}


class Fail(Exception):
    pass


def eq(a, b, what):
    if a != b:
        raise Fail(f"{what}: {a!r} != {b!r}")


def data_file(name):
    p = os.path.join(DATA, name)
    require(os.path.isfile(p), f"the real trace {p} (../shared/data/etl, see its README)")
    h = hashlib.sha256(open(p, "rb").read()).hexdigest()
    eq(h, SHA256[name], f"SHA-256 of {name}")
    if not name.endswith(".zip"):
        return p
    with zipfile.ZipFile(p) as z:
        etl = [n for n in z.namelist() if n.endswith(".etl")]
        eq(len(etl), 1, f"one .etl in {name}")
        z.extract(etl[0], TMP)
        return os.path.join(TMP, etl[0])


def info(path, *extra):
    p = subprocess.run([BIN, "etl", "info", path, "--json", *extra], capture_output=True,
                       text=True, timeout=300)
    if p.returncode != 0:
        raise Fail(f"etl info {path} exited {p.returncode}: {p.stderr}")
    return json.loads(p.stdout)


def count(d, cls, typ, version=None):
    rows = [k for k in d["kernel_events"] if k["class"] == cls and k["type"] == typ and
            (version is None or k["version"] == version)]
    if len(rows) != 1:
        raise Fail(f"{cls}/{typ} v{version}: {len(rows)} rows")
    return rows[0]


def no_valloc(d, what):
    v = d["virtual_alloc"]
    eq((v["alloc_events"], v["free_events"], v["usable"]), (0, 0, False), f"{what}: VirtualAlloc")
    eq(any("-stackwalk VirtualAlloc" in c for c in v["record_with"]), True,
       f"{what}: the xperf command to record one")
    eq(any(c.startswith("wpr -start VirtualAllocation") for c in v["record_with"]), True,
       f"{what}: the wpr command to record one")


def test_net_x64():
    d = info(data_file("perfview-net.4.5.2.x64.etl.zip"), "--images")
    h = d["header"]
    eq((h["os_version"], h["os_build"], h["pointer_size"], h["cpus"], h["clock"],
        h["ticks_per_second"]), ("6.2", 9200, 8, 8, "QPC", 10000000), "x64: header")
    eq(h["start_ns"], 1595981220623616700, "x64: start")
    eq((h["events_lost"], h["buffers_lost"], h["compressed"]), (0, 0, True), "x64: lost, mode")
    f = d["file_stats"]
    eq((f["buffers"], f["buffers_compressed"], f["buffers_unreadable"], f["bytes"], f["events"]),
       (360, 359, 0, 4879401, 179474), "x64: buffers and events")
    eq((f["reordered"], f["truncated"]), (0, False), "x64: per-CPU order")
    eq(count(d, "Process", "Start")["events"], 1, "x64: Process Start")
    eq(count(d, "Process", "DCStart")["events"], 32, "x64: Process DCStart")
    eq(count(d, "Image", "Load", 2)["events"], 35, "x64: Image Load (hook 0x030A)")
    eq(count(d, "Image", "DCStart")["events"], 1763, "x64: Image DCStart")
    eq(count(d, "Thread", "DCStart")["events"], 670, "x64: Thread DCStart")
    eq(count(d, "PerfInfo", "SampledProfile")["events"], 79528, "x64: SampledProfile")
    for typ, n in (("Stack", 252), ("KeyDelete", 1909), ("KeyRundown", 1012),
                   ("StackKeyKernel", 2061), ("StackKeyUser", 7046)):
        eq(count(d, "StackWalk", typ)["events"], n, f"x64: StackWalk {typ}")
    s = d["stacks"]
    # Every StackWalk and every key reference found its event; every key
    # its definition.
    eq((s["joined"], s["orphaned"], s["unresolved"]), (252 + 2061 + 7046, 0, 0), "x64: stacks")
    eq(count(d, "PerfInfo", "SampledProfile")["with_stack"], 6318, "x64: samples with stacks")
    eq(count(d, "Thread", "Start")["with_stack"], 9, "x64: thread starts with stacks")
    check_frames = s["frames_in_images"] / s["frames"]
    eq(check_frames > 0.8, True, f"x64: frames inside known images ({check_frames:.2f})")
    app = [p for p in d["processes"] if p["name"] == "Test.x64.exe"]
    eq(len(app), 1, "x64: the test program")
    eq((app[0]["pid"], app[0]["rundown"], app[0]["start_ns"], app[0]["end_ns"]),
       (3676, False, 1595981223356792500, 1595981228825901300), "x64: its lifetime")
    eq(len(d["processes"]), 33, "x64: processes")
    mods = [m for m in d["images"] if m["pid"] == 3676 and m["name"].lower().endswith("test.x64.exe")]
    eq(len(mods), 1, "x64: the program's image")
    eq(mods[0]["size"] > 0 and mods[0]["unload_ns"] is not None, True, "x64: its range, unloaded")
    no_valloc(d, "x64")


def test_net_x86():
    d = info(data_file("perfview-net.4.5.2.x86.etl.zip"))
    h = d["header"]
    # A 32-bit process on 64-bit Windows: the header has pointer size 8.
    eq((h["os_build"], h["pointer_size"], h["cpus"]), (9200, 8, 8), "x86: header")
    f = d["file_stats"]
    eq((f["buffers"], f["buffers_compressed"], f["buffers_unreadable"], f["events"]),
       (276, 275, 0, 168298), "x86: buffers and events")
    for typ, n in (("Stack", 229), ("StackKeyKernel", 3640), ("StackKeyUser", 8532)):
        eq(count(d, "StackWalk", typ)["events"], n, f"x86: StackWalk {typ}")
    s = d["stacks"]
    eq((s["joined"], s["orphaned"], s["unresolved"]), (229 + 3640 + 8532, 0, 0), "x86: stacks")
    app = [p for p in d["processes"] if p["name"] == "Test.x86.exe"]
    eq([(p["pid"], p["start_ns"], p["end_ns"]) for p in app],
       [(3644, 1595981182415184600, 1595981187701749600)], "x86: the test program")
    no_valloc(d, "x86")


def test_self_describing():
    path = data_file("perfview-SelfDescribingSingleEvent.etl")
    d = info(path)
    h = d["header"]
    eq((h["os_build"], h["cpus"], h["compressed"]), (22000, 12, True), "self-describing: header")
    f = d["file_stats"]
    eq((f["buffers"], f["buffers_compressed"], f["events"]), (3, 2, 23), "self-describing: buffers")
    eq((d["providers"]["events"], d["providers"]["providers"]), (19, 3), "self-describing: providers")
    no_valloc(d, "self-describing")
    # The text form says what to do.
    p = subprocess.run([BIN, "etl", "info", path], capture_output=True, text=True, timeout=60)
    eq(p.returncode, 0, "etl info (text) exit status")
    eq("no VirtualAlloc events" in p.stdout and "wpr -start VirtualAllocation" in p.stdout, True,
       "the text names the missing events and the command")


def test_airbus():
    d = info(data_file("airbus-ShutdownPerfDiagLogger.etl"), "--images")
    h = d["header"]
    eq((h["os_build"], h["pointer_size"], h["cpus"], h["compressed"], h["logger_name"]),
       (18362, 8, 2, False, "PerfDiag Logger"), "airbus: header")
    f = d["file_stats"]
    eq((f["buffers"], f["buffers_compressed"], f["bytes"], f["events"]), (49, 0, 3211264, 17078),
       "airbus: buffers")
    eq(count(d, "Process", "End")["events"], 60, "airbus: Process End")
    eq(count(d, "Process", "Defunct", 5)["events"], 5, "airbus: Process Defunct v5")
    eq(count(d, "Image", "Unload")["events"], 4791, "airbus: Image Unload")
    eq(d["skipped"], 0, "airbus: every payload decoded")
    p = {x["pid"]: x for x in d["processes"]}
    eq((p[496]["name"], p[496]["ppid"], p[496]["end_ns"]), ("svchost.exe", 600, 1582910149720849500),
       "airbus: a service that ended")
    eq((p[4]["name"], p[4]["end_ns"]), ("System", None), "airbus: System runs on")
    k = [m for m in d["images"] if m["pid"] == 0 and m["name"].endswith("ntoskrnl.exe")]
    eq([(m["base"], m["size"]) for m in k], [(0xFFFFF802424AB000, 0xAB6000)], "airbus: the kernel")
    no_valloc(d, "airbus")


def test_run_on_real():
    """--source etl: on a real trace with no VirtualAlloc events: processes,
    no figures, no failure."""
    path = data_file("airbus-ShutdownPerfDiagLogger.etl")
    p = subprocess.run([BIN, "analyze", "--source", f"etl:{path}", "--json"], capture_output=True,
                       text=True, timeout=300)
    eq(p.returncode, 0, f"analyze etl: exit status ({p.stderr})")
    r = json.loads(p.stdout)
    eq(all(x["size_bytes"] == 0 for x in r["processes"]), True, "no commit figures")


def main():
    tests = [test_net_x64, test_net_x86, test_self_describing, test_airbus, test_run_on_real]
    failed = 0
    for t in tests:
        try:
            t()
            print(f"ok   {t.__name__}", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {t.__name__}", flush=True)
            traceback.print_exc()
    shutil.rmtree(TMP, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
