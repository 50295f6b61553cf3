#!/usr/bin/env python3
"""test_win_etw.py - the ETW sources of commitwatch.exe under Wine.

- The live source: `run --source etw`, and `run` with no --source (etw is
  the Windows default). Wine starts the system-logger session (a fake one)
  but cannot read it: OpenTrace fails with error 5 (../shared/WINDOWS.md).
  The run says so in one sentence naming the way out (--source etl:FILE,
  --source rundown) and exits 1, without a crash; a second run says the
  same (the session the first left was stopped, or is replaced).
- .etl files: `analyze --source etl:FILE` of a MemoryTestApp trace the
  test writes (tests/etlgen's cw_etl_gen.exe, run under Wine too) equals
  `analyze --source replay:` of the JSONL fixture in every per-process
  figure of the whole life; `etl info --json` of the real traces in
  ../shared/data/etl gives what the Linux build gives (CW_LINUX_BUILD),
  or at least the header the Linux test asserts.

Run by the Windows build's ctest (label wine); see cwwine.py.
"""
import json
import os
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(__file__))
from cwtest import require  # noqa: E402
from cwservice import MTA, require_fixture, Checks  # noqa: E402
import cwwine  # noqa: E402
from cwwine import BUILD, LINUX_BUILD, SOURCE, cw, run, win_path  # noqa: E402

GEN = os.path.join(BUILD, "tests", "etlgen", "cw_etl_gen.exe")
DATA = os.environ.get("CW_ETL_DATA", os.path.join(SOURCE, "..", "shared", "data", "etl"))
REAL = ["airbus-ShutdownPerfDiagLogger.etl", "perfview-SelfDescribingSingleEvent.etl",
        "perfview-net.4.5.2.x64.etl.zip", "perfview-net.4.5.2.x86.etl.zip"]
t = Checks()


def by_process(doc):
    return {(p["pid"], p["name"], p["start_ns"]): {k: v for k, v in p.items()
                                                     if k not in ("tags", "stacks", "id")}
            for p in doc["processes"]}


def live(tmp):
    for args, what in ((["--source", "etw"], "run --source etw"), ([], "run (etw by default)")):
        for attempt in ("", " again"):
            db = os.path.join(tmp, "live.db")
            rc, out, err = cw("run", *args, "--db", db, "--no-http", timeout=180)
            t.check(f"{what}{attempt}: exit 1", rc == 1, (rc, err[-600:]))
            t.check(f"{what}{attempt}: says OpenTrace failed with error 5 and what to use instead",
                  "(OpenTrace) failed (error 5)" in err and "--source etl:FILE" in err
                  and "--source rundown" in err,
                  err[-600:])
            t.check(f"{what}{attempt}: the session starts (Wine's is a fake one)",
                  "left over" not in err and "StartTrace" not in err, err[-600:])


def generated(tmp):
    etl = os.path.join(tmp, "mta.etl")
    rc, out, err = run([GEN, win_path(MTA), win_path(etl)], timeout=300)
    if not t.check("cw_etl_gen.exe writes the MemoryTestApp .etl", rc == 0 and os.path.isfile(etl),
                 (rc, err[-400:])):
        return
    rc, a, err = cw("analyze", "--json", "--source", f"etl:{win_path(etl)}", timeout=300)
    t.check("analyze --source etl: runs under Wine", rc == 0, err[-400:])
    rc, b, err2 = cw("analyze", "--json", "--source", f"replay:{win_path(MTA)}", timeout=300)
    t.check("analyze --source replay: runs under Wine", rc == 0, err2[-400:])
    if rc == 0 and a and b:
        # The fixture's one process with memory from before the trace
        # (svchost.exe, rundown commits) has no counterpart in an .etl,
        # which holds no rundown of committed memory.
        pa, pb = by_process(json.loads(a)), by_process(json.loads(b))
        rundown = {k for k in pb if k[1] == "svchost.exe"}
        pa = {k: v for k, v in pa.items() if k not in rundown}
        pb = {k: v for k, v in pb.items() if k not in rundown}
        t.check("etl: equals replay: in every per-process figure (whole life)",
              len(pa) >= 2 and pa == pb,
              {k: (pa.get(k), pb.get(k)) for k in set(pa) | set(pb) if pa.get(k) != pb.get(k)})


def real(tmp):
    for name in REAL:
        path = os.path.join(DATA, name)
        require(os.path.isfile(path), f"the real trace {path} (../shared/data/etl)")
        if name.endswith(".zip"):
            with zipfile.ZipFile(path) as z:
                inner = [n for n in z.namelist() if n.endswith(".etl")][0]
                z.extract(inner, tmp)
                path = os.path.join(tmp, inner)
        rc, out, err = cw("etl", "info", win_path(path), "--json", timeout=300)
        if not t.check(f"etl info {name} under Wine", rc == 0, err[-400:]):
            continue
        w = json.loads(out)
        t.check(f"etl info {name}: a header and buffers",
              w["header"]["pointer_size"] in (4, 8) and w["file_stats"]["buffers"] > 0, w.get("header"))
        if LINUX_BUILD:
            p = subprocess.run([os.path.join(LINUX_BUILD, "commitwatch"), "etl", "info", path,
                                "--json"], capture_output=True, text=True, timeout=300)
            if t.check(f"etl info {name} on Linux", p.returncode == 0, p.stderr[-400:]):
                lin = json.loads(p.stdout)
                # A key on one side only differs (not None == None).
                diff = sorted(k for k in set(w) | set(lin) if k not in ("file", "path")
                              and (k not in w or k not in lin or w[k] != lin[k]))
                t.check(f"etl info {name}: Wine's report equals Linux's", not diff,
                      {k: (w.get(k), lin.get(k)) for k in diff[:3]})


def main():
    require_fixture()
    cwwine.require_wine(GEN)
    with tempfile.TemporaryDirectory(prefix="cw-win-etw-", dir=BUILD) as tmp:
        live(tmp)
        generated(tmp)
        real(tmp)
    if t.failures:
        print("test_win_etw: FAILED: " + "; ".join(t.failures))
    t.done()  # exits 1 on a failure, or when no check ran


if __name__ == "__main__":
    sys.exit(main())
