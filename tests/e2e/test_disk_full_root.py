"""test_disk_full_root.py - issue 13 item 3, as root: the database on a
small tmpfs the test mounts.

1. The disk fills while `run` ingests a paced replay: /api/health says so
   (status "degraded", store_error naming the file), the log says so once,
   the API keeps answering reads, the file passes integrity_check and what
   it holds equals the reference model up to its last stored bucket.
   Then the file system is grown (remount, size=): the writer's retry
   commits, store_error clears, ingestion resumes and the whole trace is
   stored: the database equals the model of the whole trace.
2. SIGTERM while the disk is full: the service leaves within seconds
   (exit non-zero, the log says why), the file is whole.
3. A database on a read-only file system is refused with a clear message
   and left unchanged.
4. The size cap is what keeps a small disk from filling: 8 h of data on a
   6 MiB file system fills it without a cap (most of it the WAL, which a
   full-speed replay with the alert engine reading grows to many MiB) and
   fits with size_cap = 1MiB: the raw tier folded down to its 1 h
   minimum, the file within the cap less the WAL's share. The peak of the
   file and its WAL together, sampled every 5 ms, is printed, not
   checked: the WAL may pass its share by a transaction and by what the
   alert engine's catching-up reads pin, which depends on the machine's
   load (docs/RELIABILITY.md; test_store checks the WAL's bound without
   readers).

Needs root and mount(8) (tmpfs): a missing prerequisite fails in CI
(cwtest.require), never a silent skip. Environment: CW_BIN.
"""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crashkill  # noqa: E402
import refmodel  # noqa: E402
from cwservice import free_port  # noqa: E402
from cwtest import require, wait_until  # noqa: E402

BIN = os.environ.get("CW_BIN", "commitwatch")
SEC = 10**9
T0 = crashkill.T0
failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else f": {str(detail)[:1500]}"), flush=True)
    if not cond:
        failures.append(what)


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, None
    except OSError:
        return None, None


def mount(dirname, opts):
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", dirname], capture_output=True, text=True)
    return r.returncode == 0, r.stderr


def remount(dirname, opts):
    r = subprocess.run(["mount", "-o", "remount," + opts, dirname], capture_output=True, text=True)
    check(r.returncode == 0, f"mount -o remount,{opts}", r.stderr)


def umount(dirname):
    subprocess.run(["umount", "-l", dirname], capture_output=True)


def big_trace(path, span_s):
    """A trace that grows a database fast: every second six process
    instances start (pids reused) with long command lines, commit through
    one of four stacks and release some of it (fold_lifetime = 0: each is
    stored on its own). Returns the events."""
    stacks = [["app.exe!main", f"app.exe!work{k}", "KernelBase.dll!VirtualAlloc"] for k in range(4)]
    evs = []
    n = 0
    for s in range(span_s):
        for j in range(6):
            n += 1
            ts = T0 + s * SEC + j * 10**8
            pid = 600 + n % 100
            evs.append({"ts": ts, "pid": pid, "op": "process_start", "name": f"grow{n % 9}.exe",
                        "cmdline": f"grow.exe --instance {n} " + "x" * 1500})
            for k in range(3):
                evs.append({"ts": ts + k + 1, "pid": pid, "op": "commit", "addr": hex(0x100000 + k * 65536),
                            "size": 8192 * (k + 1), "stack": stacks[(n + k) % 4]})
            evs.append({"ts": ts + 10, "pid": pid, "op": "release", "addr": hex(0x100000), "size": 8192})
    crashkill.write_trace(path, evs)
    return evs


def cap_trace(path, hours):
    """Four processes committing and releasing a page every second each,
    through six stacks: about 0.5 MB of database an hour uncapped."""
    evs = [{"ts": T0, "pid": 700 + p, "op": "process_start", "name": f"c{p}.exe"} for p in range(4)]
    n = 0
    for s in range(hours * 3600):
        for p in range(4):
            n += 1
            ts = T0 + s * SEC + p * 1000 + 1
            evs.append({"ts": ts, "pid": 700 + p, "op": "commit", "addr": hex(0x100000 + (n % 50) * 4096),
                        "size": 4096, "stack": ["a.exe!main", f"a.exe!f{n % 6}", "KernelBase.dll!VirtualAlloc"]})
            evs.append({"ts": ts + 500, "pid": 700 + p, "op": "release",
                        "addr": hex(0x100000 + ((n + 25) % 50) * 4096), "size": 4096})
    crashkill.write_trace(path, evs)


def start(tmp, db, trace, port, speed, extra=()):
    log = open(os.path.join(tmp, f"run{port}.log"), "w")
    p = subprocess.Popen([BIN, "run", "--source", "replay:" + trace, "--db", db, "--listen",
                          f"127.0.0.1:{port}", "--speed", str(speed), "--config",
                          os.path.join(tmp, "crash.conf"), *extra],
                         stdout=log, stderr=subprocess.STDOUT)
    return p, log.name


def text(path):
    with open(path, errors="replace") as f:
        return f.read()


def main():
    require(hasattr(os, "geteuid") and os.geteuid() == 0, "root (mounts a tmpfs)")
    tmp = tempfile.mkdtemp(prefix="cw_e2e_diskfull_")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    ok, err = mount(mnt, "size=2m,mode=0755")
    require(ok, f"mount -t tmpfs (as root): {err.strip()}")
    camp = crashkill.Campaign(BIN, tmp, 0)  # compare() against the model; writes crash.conf
    try:
        # ---- 1. fills, reads keep working, space returns, ingestion resumes
        trace = os.path.join(tmp, "grow.jsonl")
        evs = big_trace(trace, 420)
        db = os.path.join(mnt, "full.db")
        port = free_port()
        p, logpath = start(tmp, db, trace, port, 30)
        h = wait_until(lambda: (lambda st, b: b if b and b.get("store_error") else None)(*get(port, "/api/health")),
                       120, "/api/health reports a store error (the 2 MiB file system fills)")
        check(h["status"] == "degraded", "health: status degraded", h)
        check(db in h["store_error"] and "space" in h["store_error"], "health: store_error names the "
              "file and the lack of space", h["store_error"])
        check(isinstance(h.get("store_error_since_ns"), int), "health: store_error_since_ns", h)
        wait_until(lambda: "disk is full" in text(logpath), 30, "the log says the disk is full")
        time.sleep(2.5)  # a few retries
        check(text(logpath).count("disk is full") == 1, "the log says it once, not at every retry",
              text(logpath)[-1500:])
        st, procs = get(port, f"/api/processes?from={T0}&to={T0 + 3600 * SEC}")
        check(st == 200 and procs and procs["processes"], "reads keep working: /api/processes", (st, procs))
        res = crashkill.integrity(db)
        check(res == [("ok",)], "integrity_check while full", res)
        end = crashkill.stored_end(crashkill.tiers(db))
        check(end is not None and end > T0, "something was stored before the disk filled", end)
        check(end < evs[-1]["ts"], "the disk filled before the end of the trace", (end, evs[-1]["ts"]))
        model = refmodel.Model([e for e in evs if e["ts"] < end], camp.tag_of)
        try:
            camp.compare(db, model, T0, end, None, "while full")
            check(True, "while full: the stored windows equal the model")
        except crashkill.Failure as e:
            check(False, "while full: the stored windows equal the model", e)
        check(p.poll() is None, "the service is still up")
        remount(mnt, "size=256m")
        wait_until(lambda: (lambda st, b: b if b and b.get("store_error") is None else None)(*get(port, "/api/health")),
                   30, "store_error clears once there is room")
        h = wait_until(lambda: (lambda st, b: b if b and b.get("ingest_done") else None)(*get(port, "/api/health")),
                       120, "the rest of the trace is ingested")
        check(h["status"] == "ok", "health: ok again", h)
        check("room again" in text(logpath), "the log says ingestion resumed", text(logpath)[-1500:])
        p.send_signal(signal.SIGTERM)
        rc = p.wait(30)
        check(rc == 0, "exit 0 on SIGTERM after the recovery", (rc, text(logpath)[-1500:]))
        check(crashkill.integrity(db) == [("ok",)], "integrity_check after the recovery")
        last = (evs[-1]["ts"] // SEC + 1) * SEC
        model = refmodel.Model(evs, camp.tag_of, end_run_at=last)
        try:
            camp.compare(db, model, T0, last, None, "after the recovery")
            camp.compare(db, model, T0 + 60 * SEC, T0 + 300 * SEC, None, "after the recovery")
            check(True, "after the recovery: the whole trace is stored, equal to the model")
        except crashkill.Failure as e:
            check(False, "after the recovery: the whole trace is stored, equal to the model", e)
        os.remove(db)
        for x in ("-wal", "-shm"):
            if os.path.exists(db + x):
                os.remove(db + x)

        # ---- 2. SIGTERM while the disk is full
        remount(mnt, "size=2m")
        db2 = os.path.join(mnt, "stop.db")
        port = free_port()
        p, logpath = start(tmp, db2, trace, port, 30)
        wait_until(lambda: (lambda st, b: b if b and b.get("store_error") else None)(*get(port, "/api/health")),
                   120, "the disk fills again")
        time.sleep(1.5)  # the queue fills: the core thread waits in submit
        t = time.monotonic()
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "hung"
        check(rc not in (0, "hung"), f"SIGTERM while full: leaves (exit {rc}, {time.monotonic() - t:.1f} s)",
              text(logpath)[-1500:])
        check("disk is full" in text(logpath) and "dropped" in text(logpath),
              "SIGTERM while full: the log says what was not stored", text(logpath)[-1500:])
        check(crashkill.integrity(db2) == [("ok",)], "SIGTERM while full: integrity_check ok")
        os.remove(db2)

        # ---- 3. a read-only file system
        remount(mnt, "size=64m")
        db3 = os.path.join(mnt, "ro.db")
        short = os.path.join(tmp, "short.jsonl")
        crashkill.write_trace(short, evs[:200])
        r = subprocess.run([BIN, "run", "--no-http", "--exit-at-end", "--source", "replay:" + short,
                            "--db", db3], capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "a database to make read-only", r.stderr)
        remount(mnt, "ro")
        before = open(db3, "rb").read()
        r = subprocess.run([BIN, "run", "--no-http", "--exit-at-end", "--rebase-now", "--source",
                            "replay:" + short, "--db", db3], capture_output=True, text=True, timeout=120)
        check(r.returncode != 0 and db3 in r.stderr and "read-only" in r.stderr,
              "read-only file system: refused, naming the file", (r.returncode, r.stderr))
        check(open(db3, "rb").read() == before, "read-only file system: bytes unchanged")
        # ---- 4. the size cap keeps a small disk from filling
        remount(mnt, "rw,size=6m")
        capped = os.path.join(tmp, "cap.jsonl")
        cap_trace(capped, 8)
        for name, conf, fills in (("nocap", "fold_lifetime = 0\n", True),
                                  ("cap", "fold_lifetime = 0\nsize_cap = 1MiB\n", False)):
            for f in os.listdir(mnt):
                os.remove(os.path.join(mnt, f))
            cpath = os.path.join(tmp, name + ".conf")
            with open(cpath, "w") as f:
                f.write(conf)
            logp = os.path.join(tmp, name + ".log")
            with open(logp, "w") as lf:
                p = subprocess.Popen([BIN, "run", "--no-http", "--exit-at-end", "--source",
                                      "replay:" + capped, "--db", os.path.join(mnt, name + ".db"),
                                      "--config", cpath], stdout=lf, stderr=subprocess.STDOUT)
                peak = [0, 0]  # file + WAL, WAL

                def sample(dbp=os.path.join(mnt, name + ".db")):
                    while p.poll() is None:
                        sz = [os.path.getsize(x) if os.path.exists(x) else 0 for x in (dbp, dbp + "-wal")]
                        if sum(sz) > peak[0]:
                            peak[:] = [sum(sz), sz[1]]
                        time.sleep(0.005)
                sampler = threading.Thread(target=sample)
                sampler.start()
                wait_until(lambda: p.poll() is not None or "disk is full" in text(logp), 300,
                           f"{name}: the run ends or fills the disk")
                full = "disk is full" in text(logp)
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
                rc = p.wait(30)
                sampler.join()
            print(f"{name}: peak of the file + its WAL during the run {peak[0]} bytes (WAL {peak[1]})")
            check(full == fills, f"8 h of data on a 6 MiB file system, {name}: "
                  f"{'fills it' if fills else 'fits (size_cap = 1MiB folds the raw tier to 1 h)'}",
                  text(logp)[-1500:])
            if not fills:
                size = os.path.getsize(os.path.join(mnt, name + ".db"))
                check(rc == 0 and size <= 1024 * 1024 - 128 * 1024, f"{name}: exit 0, the file within the "
                      f"cap less the WAL's share of 128 KiB ({size} bytes)", (rc, text(logp)[-800:]))
                t = crashkill.tiers(os.path.join(mnt, name + ".db"))
                check(t[0][1] >= crashkill.T0 + 6 * 3600 * SEC, f"{name}: the raw tier keeps the last "
                      "hours only (folded by the cap)", t)
            check(crashkill.integrity(os.path.join(mnt, name + ".db")) == [("ok",)],
                  f"{name}: integrity_check ok")
    finally:
        for q in ("p",):
            pr = locals().get(q)
            if pr is not None and pr.poll() is None:
                pr.kill()
        umount(mnt)
    if failures:
        print(f"FAIL: {len(failures)} checks (logs in {tmp})")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
