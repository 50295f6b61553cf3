#!/usr/bin/env python3
"""End-to-end: stack tags are derived, so a rule change re-tags history.

- `run` with the default Windows rules stores VirtualAlloc / Windows Heap;
- `run` again on the same database with other rules (--stacktags) re-tags
  the stored stacks at start, and `analyze --db` shows the new tags for the
  old data;
- `analyze --db --stacktags` tags a report with other rules and leaves the
  database alone;
- SIGHUP makes a running `run` reload its configuration file: new rules
  re-tag the stored stacks while it keeps ingesting; a broken configuration
  is refused and the running one kept;
- a database holding another platform's data is refused.
"""
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from cwtest import file_text, wait_until  # noqa: E402

BIN = os.environ.get("CW_BIN", "build/commitwatch")
checks = 0


def check(cond, what, *context):
    global checks
    checks += 1
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        for c in context:
            print("  ", str(c)[:4000], file=sys.stderr)
        sys.exit(1)


S = 1_000_000_000
T0 = 1_750_000_000 * S
APP = ["ntdll.dll!RtlUserThreadStart", "MemoryTestApp.exe!main"]
TEMP = APP + ["MemoryTestApp.exe!Operation1", "MemoryTestApp.exe!ManipulateTemporaryBuffer",
              "KernelBase.dll!VirtualAlloc", "ntdll.dll!NtAllocateVirtualMemory"]
HEAP = APP + ["MemoryTestApp.exe!InnerLoopOperation", "ntdll.dll!RtlpAllocateHeapInternal",
              "ntdll.dll!NtAllocateVirtualMemory"]


def write_trace(path, seconds, platform="windows", t0=T0):
    """A MemoryTestApp-like trace: one 1 MiB transient per second through
    ManipulateTemporaryBuffer, heap growth through the NT heap."""
    ev = [{"ts": t0, "op": "process_start", "pid": 10, "name": "MemoryTestApp.exe"}]
    for i in range(seconds):
        t = t0 + i * S + 1000
        addr = 0x10000000 + i * 0x200000
        ev.append({"ts": t, "op": "commit", "pid": 10, "addr": addr, "size": 1 << 20, "stack": TEMP})
        ev.append({"ts": t + S // 10, "op": "release", "pid": 10, "addr": addr, "size": 1 << 20})
        ev.append({"ts": t + S // 5, "op": "commit", "pid": 10, "addr": 0x40000000 + i * 65536,
                   "size": 65536, "stack": HEAP})
    with open(path, "w") as f:
        f.write(json.dumps({"format": "commitwatch-trace", "version": 1, "platform": platform,
                            "pointer_size": 8}) + "\n")
        for e in ev:
            f.write(json.dumps(e) + "\n")


ALT_RULES = """<?xml version="1.0"?>
<Tag Name="">
  <Tag Name="Temp Buffers" Priority="50">
    <Entrypoint Module="MemoryTestApp.exe" Method="ManipulateTemporaryBuffer"/>
  </Tag>
</Tag>
"""


def cli(*args, timeout=120):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def app_tags(db, *extra):
    rc, out, err = cli("analyze", "--db", db, "--json", *extra)
    check(rc == 0, "analyze --db works", err)
    tags = {}
    for p in json.loads(out)["processes"]:
        if p["name"] == "MemoryTestApp.exe":
            for t in p["tags"]:
                tags[t["tag"]] = tags.get(t["tag"], 0) + t["size_bytes"]
    return tags


def stored_tags(db):
    """The tags of the stored stacks; empty while the database is not
    there yet (read-only: never creates it)."""
    if not os.path.exists(db):
        return set()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return {tag for (tag,) in con.execute("SELECT DISTINCT tag FROM stacks")}
    except sqlite3.OperationalError:  # the schema is not written yet
        return set()
    finally:
        con.close()


def stored_end(db):
    """End of the last stored raw bucket (INT64_MIN while none)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        row = con.execute("SELECT end_ns FROM tiers WHERE tier = 0").fetchone()
        return row[0] if row and row[0] is not None else -(2**63)
    finally:
        con.close()


def main():
    tmp = tempfile.mkdtemp(prefix="cw_retag_")
    trace = os.path.join(tmp, "app.jsonl")
    alt = os.path.join(tmp, "alt.stacktags")
    db = os.path.join(tmp, "a.db")
    write_trace(trace, 6)
    with open(alt, "w") as f:
        f.write(ALT_RULES)

    # Default Windows rules.
    rc, _, err = cli("run", "--no-http", "--source", "replay:" + trace, "--db", db)
    check(rc == 0, "run with the default rules", err)
    tags = app_tags(db)
    check(tags.get("VirtualAlloc") == 6 << 20, "transients are VirtualAlloc", tags)
    check(tags.get("Windows Heap") == 6 * 65536, "heap growth is Windows Heap", tags)

    # Other rules for the report only: the database keeps its tags.
    tags = app_tags(db, "--stacktags", alt)
    check(tags.get("Temp Buffers") == 6 << 20, "report re-tagged with --stacktags", tags)
    check("Temp Buffers" not in stored_tags(db), "analyze --stacktags writes nothing", stored_tags(db))

    # A second run (later data) with other rules re-tags the stored (old)
    # stacks.
    later = os.path.join(tmp, "later.jsonl")
    write_trace(later, 2, t0=T0 + 20 * S)
    rc, _, err = cli("run", "--no-http", "--source", "replay:" + later, "--db", db, "--stacktags", alt)
    check(rc == 0, "second run with other rules", err)
    check("re-tagged" in err, "the log says the stored stacks were re-tagged", err)
    rc, out, err = cli("analyze", "--db", db, "--json", "--from", str(T0), "--to", str(T0 + 7 * S))
    check(rc == 0, "analyze the old window", err)
    old = {t["tag"]: t["size_bytes"] for p in json.loads(out)["processes"] for t in p["tags"]}
    check(old.get("Temp Buffers") == 6 << 20, "old data shows the new tag", old)

    # SIGHUP reloads the configuration file while ingesting.
    db2 = os.path.join(tmp, "b.db")
    conf = os.path.join(tmp, "cw.conf")
    runlog = os.path.join(tmp, "run.log")
    with open(conf, "w") as f:
        f.write("# defaults first\nlog_level = info\n")
    log = open(runlog, "w")
    p = subprocess.Popen([BIN, "run", "--no-http", "--source", "replay:" + trace, "--db", db2, "--config", conf,
                          "--rebase-now", "--speed", "1"], stdout=log, stderr=subprocess.STDOUT)
    try:
        # Some stacks are stored with the default rules before the reload.
        wait_until(lambda: "VirtualAlloc" in stored_tags(db2), 30,
                   "the first stacks are stored with the default rules")
        check(p.poll() is None, "still ingesting when the rules change (the trace lasts 6 s)", file_text(runlog))
        with open(conf, "w") as f:
            f.write("stacktags = %s\n" % alt)
        p.send_signal(signal.SIGHUP)
        wait_until(lambda: "re-tagged" in file_text(runlog), 30, "SIGHUP re-tagged the stored stacks")
        check("Temp Buffers" in stored_tags(db2), "the stored stacks carry the new tag", stored_tags(db2))
        # A broken configuration is refused; the service keeps running and
        # storing.
        with open(conf, "w") as f:
            f.write("retention_raw = soon\n")
        before = stored_end(db2)
        p.send_signal(signal.SIGHUP)
        wait_until(lambda: "keeping the running configuration" in file_text(runlog), 30,
                   "the bad reload is reported")
        check(p.poll() is None, "a bad reload does not stop the service", file_text(runlog))
        wait_until(lambda: stored_end(db2) > before, 30, "the service stores more after the bad reload")
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
        log.close()
    text = file_text(runlog)
    check(rc == 0, "run exits 0 on SIGINT after reloads", text)
    check(f"reload requested: reloading {conf}" in text, "the reload is logged", text)
    check(re.search(r"reload: .*retention_raw.*; keeping the running configuration", text),
          "bad reload is reported, naming the key", text)
    check("Temp Buffers" in stored_tags(db2), "stacks stored after the reload carry the new tag", stored_tags(db2))

    # One database holds one platform's data.
    lin = os.path.join(tmp, "linux.jsonl")
    write_trace(lin, 1, platform="linux")
    rc, _, err = cli("run", "--no-http", "--source", "replay:" + lin, "--db", db, "--rebase-now")
    check(rc == 1 and "holds windows data" in err, "another platform's data is refused", err)

    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{checks} checks passed")


if __name__ == "__main__":
    main()
