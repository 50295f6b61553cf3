#!/usr/bin/env python3
"""test_analyze.py - `commitwatch analyze` and `run` end to end.

Runs the real binary (CW_BIN) on the MemoryTestApp fixture of seed 002
(tests/fixtures/gen_memorytestapp.py) and checks the figures the seed
states, the stacks, the table, the database path (`run --db` then
`analyze --db` must agree with the trace on whole-second windows), every
kind of malformed trace, what a bad trace does to an existing database,
the refusal of a trace older than stored data, and a clean stop on SIGINT.

Environment (set by tests/CMakeLists.txt): CW_BIN, CW_FIXTURES, CW_BUILD,
CW_SOURCE. Standard library only. Exit status 0 when every check passed.
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
import time
import traceback

sys.path.insert(0, os.path.dirname(__file__))
from cwtest import tier_count, wait_until  # noqa: E402
import refmodel  # noqa: E402

BIN = os.environ.get("CW_BIN", "commitwatch")
FIX = os.environ.get("CW_FIXTURES", os.path.join(os.path.dirname(__file__), "..", "fixtures"))
BUILD = os.environ.get("CW_BUILD", "")
SOURCE = os.environ.get("CW_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
TRACE = os.path.join(FIX, "memorytestapp.jsonl")
WINDOWS = os.path.join(FIX, "memorytestapp.windows.json")
MB = 1024 * 1024
SEC = 1_000_000_000

FIGS = ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes", "transient_count",
        "peak_outstanding_bytes", "peak_ns", "outstanding_end_bytes")
TYPES = ("AIFI", "AIFO", "AOFI", "AOFO")

TMP = tempfile.mkdtemp(prefix="cw_e2e_analyze_")
WIN = json.load(open(WINDOWS))
APP = WIN["process"]


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def eq(a, b, what):
    if a != b:
        raise Fail(f"{what}: {a!r} != {b!r}")


def run(*args, timeout=300, ok=True):
    if args and args[0] == "run":
        # Ingest and exit: without HTTP, run exits at the end of a replay.
        args = (*args, "--no-http")
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)
    if ok and p.returncode != 0:
        raise Fail(f"commitwatch {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p


def analyze_json(source_args, frm=None, to=None, stacks=False):
    args = ["analyze", *source_args, "--json"]
    if frm is not None:
        args += ["--from", str(frm)]
    if to is not None:
        args += ["--to", str(to)]
    if stacks:
        args.append("--stacks")
    p = run(*args)
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        raise Fail(f"analyze {' '.join(args)}: output is not JSON ({e}):\n{p.stdout[:2000]}")


def replay(path=TRACE):
    return ["--source", "replay:" + path]


def procs_named(doc, name):
    return [p for p in doc["processes"] if p["name"] == name]


def the_app(doc):
    ps = [p for p in doc["processes"] if p["name"] == APP["name"] and p["pid"] == APP["pid"]]
    eq(len(ps), 1, "MemoryTestApp.exe instances in the report")
    return ps[0]


def check_figs(p, expect, what):
    for k in FIGS:
        eq(p[k], expect[k], f"{what}: {k}")
    for t in TYPES:
        eq(p["types"][t], expect["types"][t], f"{what}: types.{t}")


def check_shape(doc):
    """The JSON shape of the CLI spec (more fields allowed)."""
    for k in ("from_ns", "to_ns"):
        check(isinstance(doc["window"][k], int), f"window.{k} is an integer")
    for p in doc["processes"]:
        for k in ("id", "pid", "name", "start_ns", "events") + FIGS:
            check(k in p, f"process field {k} present")
        check("exit_ns" in p and (p["exit_ns"] is None or isinstance(p["exit_ns"], int)),
              "exit_ns is an integer or null")
        check("cmdline" in p, "cmdline present")
        for t in TYPES:
            check(set(p["types"][t]) >= {"bytes", "count"}, f"types.{t} has bytes and count")
        eq(p["impacting_bytes"], p["types"]["AIFO"]["bytes"] - p["types"]["AOFI"]["bytes"],
           f"{p['name']}: impacting = AIFO - AOFI")
        eq(p["transient_bytes"], p["types"]["AIFI"]["bytes"], f"{p['name']}: transient = AIFI")
        eq(p["transient_count"], p["types"]["AIFI"]["count"], f"{p['name']}: transient count")
        eq(p["outstanding_end_bytes"], p["types"]["AIFO"]["bytes"] + p["types"]["AOFO"]["bytes"],
           f"{p['name']}: outstanding_end = AIFO + AOFO")
        for t in p["tags"]:
            for k in ("tag", "size_bytes", "commit_count", "impacting_bytes", "transient_bytes",
                      "transient_count"):
                check(k in t, f"tag field {k} present")
        for k in ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes",
                  "transient_count"):
            eq(sum(t[k] for t in p["tags"]), p[k], f"{p['name']}: tags add up to {k}")


# --- the MemoryTestApp story ---------------------------------------------

def test_fixture_is_current():
    """The committed fixture is what the generator makes (deterministic)."""
    out = os.path.join(TMP, "regen.jsonl")
    win = os.path.join(TMP, "regen.windows.json")
    gen = os.path.join(FIX, "gen_memorytestapp.py")
    subprocess.run([sys.executable, gen, "--out", out, "--windows", win], check=True,
                   capture_output=True)
    check(open(out, "rb").read() == open(TRACE, "rb").read(),
          "tests/fixtures/memorytestapp.jsonl is stale: run gen_memorytestapp.py --examples")
    a, b = json.load(open(win)), WIN
    a["trace"] = b["trace"]
    check(a == b, "memorytestapp.windows.json is stale: run gen_memorytestapp.py --examples")
    ex = os.path.join(SOURCE, "examples", "memorytestapp.jsonl")
    check(open(ex, "rb").read() == open(TRACE, "rb").read(),
          "examples/memorytestapp.jsonl differs from the fixture")


def test_whole_life():
    doc = analyze_json(replay())
    check_shape(doc)
    app = the_app(doc)
    eq(app["impacting_bytes"], 0, "whole life: Impacting Size")
    check(125.5 * MB <= app["size_bytes"] <= 126.5 * MB,
          f"whole life: Size about 126 MB, got {app['size_bytes'] / MB:.2f} MB")
    check(app["exit_ns"] is not None, "MemoryTestApp exited")
    eq(app["outstanding_end_bytes"], 0, "whole life: outstanding at the end")
    # The trace's own window covers every event: same figures as the aligned
    # whole-life window.
    check(doc["window"]["from_ns"] <= WIN["t0_ns"], "default window starts at the first event")
    check_figs(app, WIN["windows"]["whole"]["expect"], "whole life")
    # The spikes: ten 10 MB transients, all inside the life.
    eq(app["types"]["AIFI"]["count"] >= 10, True, "at least ten transients")


def test_key_windows():
    for key, w in WIN["windows"].items():
        doc = analyze_json(replay(), w["from_ns"], w["to_ns"])
        check_shape(doc)
        eq((doc["window"]["from_ns"], doc["window"]["to_ns"]), (w["from_ns"], w["to_ns"]),
           f"{key}: window echoed")
        check_figs(the_app(doc), w["expect"], key)
    step = the_app(analyze_json(replay(), WIN["windows"]["step"]["from_ns"],
                                WIN["windows"]["step"]["to_ns"]))
    eq(step["impacting_bytes"], 10 * MB, "step: Impacting Size")
    eq(step["types"]["AIFO"]["bytes"], 10 * MB, "step: AIFO bytes")
    eq(step["types"]["AIFO"]["count"], 1, "step: AIFO count")
    w = WIN["windows"]["last_four_spikes"]
    last = the_app(analyze_json(replay(), w["from_ns"], w["to_ns"]))
    eq(last["commit_count"], 4, "last four spikes: Count")
    eq(last["size_bytes"], 40 * MB, "last four spikes: Size")
    eq(last["impacting_bytes"], 0, "last four spikes: Impacting Size")
    eq(last["transient_count"], 4, "last four spikes: transient count")
    eq(last["transient_bytes"], 40 * MB, "last four spikes: transient bytes")


def test_unaligned_window():
    """An unaligned window: the first spike only, cut at 50 ms into its life
    (AIFO), then the whole spike (AIFI)."""
    s0 = WIN["spikes_ns"][0]
    app = the_app(analyze_json(replay(), s0, s0 + 50_000_000))
    eq(app["types"]["AIFO"], {"bytes": 10 * MB, "count": 1}, "half a spike: AIFO")
    eq(app["peak_outstanding_bytes"] >= 10 * MB, True, "half a spike: peak includes the buffer")
    eq(app["peak_ns"], s0, "half a spike: peak at the commit")
    app = the_app(analyze_json(replay(), s0 + 1, s0 + 200_000_000))
    eq(app["types"]["AIFO"]["bytes"], 0, "after the commit: no AIFO")
    eq(app["types"]["AOFI"], {"bytes": 10 * MB, "count": 1}, "after the commit: AOFI")
    eq(app["impacting_bytes"], -10 * MB, "after the commit: Impacting -10 MB")
    eq(app["commit_count"], 0, "after the commit: Count")


def test_stacks():
    w = WIN["windows"]["last_four_spikes"]
    doc = analyze_json(replay(), w["from_ns"], w["to_ns"], stacks=True)
    app = the_app(doc)
    check("stacks" in app, "--stacks adds stacks")
    spikes = [s for s in app["stacks"]
              if "MemoryTestApp.exe!ManipulateTemporaryBuffer" in s["frames"]]
    eq(len(spikes), 1, "one ManipulateTemporaryBuffer stack")
    s = spikes[0]
    eq(s["frames"][0], "ntdll.dll!RtlUserThreadStart", "outermost frame first")
    eq(s["frames"][-1], "ntdll.dll!NtAllocateVirtualMemory", "allocating call last")
    eq(s["frames"][-5:], ["MemoryTestApp.exe!main", "MemoryTestApp.exe!Operation1",
                          "MemoryTestApp.exe!ManipulateTemporaryBuffer",
                          "KernelBase.dll!VirtualAlloc", "ntdll.dll!NtAllocateVirtualMemory"],
       "spike stack frames")
    eq((s["size_bytes"], s["transient_bytes"], s["transient_count"], s["impacting_bytes"]),
       (40 * MB, 40 * MB, 4, 0), "spike stack figures")
    check(isinstance(s["stack_id"], int), "stack_id")
    eq(s["tag"], "VirtualAlloc", "spike stack tag (default Windows rules)")
    for k in ("size_bytes", "impacting_bytes", "transient_bytes", "transient_count"):
        eq(sum(x[k] for x in app["stacks"]), app[k], f"stacks add up to {k}")
    # The step: main's own VirtualAlloc.
    w = WIN["windows"]["step"]
    app = the_app(analyze_json(replay(), w["from_ns"], w["to_ns"], stacks=True))
    steps = [s for s in app["stacks"] if s["impacting_bytes"] == 10 * MB]
    eq(len(steps), 1, "one stack holds the step")
    eq(steps[0]["frames"][-3:], ["MemoryTestApp.exe!main", "KernelBase.dll!VirtualAlloc",
                                 "ntdll.dll!NtAllocateVirtualMemory"], "step stack")
    # The leaks show as heap growth under InnerLoopOperation over the life.
    app = the_app(analyze_json(replay(), stacks=True))
    leaks = [s for s in app["stacks"] if "MemoryTestApp.exe!InnerLoopOperation" in s["frames"]]
    eq(len(leaks), 1, "one InnerLoopOperation stack")
    growth = WIN["heap_growth_commits"]
    eq(leaks[0]["size_bytes"], sum(g[1] for g in growth), "heap growth bytes")
    eq(leaks[0]["commit_count"], len(growth), "heap growth commits")
    # With the default Windows stack tags: the leaks are Windows Heap
    # commits, the spikes and the step VirtualAlloc, the rest sorted too.
    eq(leaks[0]["tag"], "Windows Heap", "the leaks' tag")
    tags = {t["tag"]: t for t in app["tags"]}
    check("VirtualAlloc" in tags and tags["VirtualAlloc"]["size_bytes"] >= 110 * MB,
          f"spikes and step are VirtualAlloc: {sorted(tags)}")
    check("Thread Stack" in tags, "thread stacks tagged")
    svc = analyze_json(replay(), stacks=True)
    svc = [p for p in svc["processes"] if p["name"] == "svchost.exe"][0]
    eq(sorted(s["tag"] for s in svc["stacks"] if s["frames"] == ["(before trace)"]),
       ["(before trace)"], "rundown tagged (before trace)")
    # Without --stacks there are none.
    doc = analyze_json(replay())
    check(doc["processes"] and all("stacks" not in p for p in doc["processes"]),
          "no stacks without --stacks")


def test_other_processes():
    doc = analyze_json(replay())
    svc = procs_named(doc, "svchost.exe")
    eq(len(svc), 1, "svchost instances")
    svc = svc[0]
    # Its rundown is AOFO/AOFI, never Size: one rundown region freed at 20 s.
    eq(svc["types"]["AOFI"]["count"], 1, "svchost: rundown region released (AOFI)")
    eq(svc["types"]["AOFI"]["bytes"], 3 * MB + 512 * 1024, "svchost: AOFI bytes")
    eq(svc["types"]["AOFO"]["count"], 3, "svchost: rundown still held (AOFO)")
    check(svc["exit_ns"] is None, "svchost alive at the end")
    check(svc["peak_outstanding_bytes"] >= 1 * MB + 256 * 1024 + 3 * MB + 512 * 1024 + 64 * 1024,
          "svchost: the rundown counts as outstanding")
    reuse = sorted((p for p in doc["processes"] if p["pid"] == 5120), key=lambda p: p["start_ns"])
    eq([p["name"] for p in reuse], ["cmd.exe", "notepad.exe"], "pid 5120 reused: two instances")
    check(reuse[0]["id"] != reuse[1]["id"], "two instance ids")
    check(reuse[0]["exit_ns"] is not None and reuse[1]["exit_ns"] is None, "cmd exited")
    eq(reuse[0]["impacting_bytes"], 0, "cmd.exe: exit released everything")
    eq(reuse[0]["size_bytes"], 6 * 256 * 1024, "cmd.exe: size")
    eq(reuse[0]["types"]["AIFI"]["count"], 6, "cmd.exe: 5 commits freed at exit + 1 decommit")
    eq(reuse[1]["impacting_bytes"], 6 * 16 * 1024, "notepad.exe: impacting")


def test_table():
    p = run("analyze", *replay())
    out = p.stdout
    check("MemoryTestApp.exe" in out, "table names MemoryTestApp.exe")
    line = [ln for ln in out.splitlines() if "MemoryTestApp.exe" in ln]
    eq(len(line), 1, "one table row for MemoryTestApp.exe")
    check(re.search(r"\b126(\.0+)? MB\b", line[0]), f"table row shows 126 MB: {line[0]!r}")
    check(re.search(r"(?i)impacting", out), "table has an Impacting column")
    check(re.search(r"(?i)trans", out), "table has Transient columns")
    check(re.search(r"(?i)peak", out), "table has a Peak column")
    w = WIN["windows"]["step"]
    p = run("analyze", *replay(), "--from", str(w["from_ns"]), "--to", str(w["to_ns"]), "--stacks")
    row = [ln for ln in p.stdout.splitlines() if "MemoryTestApp.exe" in ln]
    check(row and re.search(r"\b10(\.0+)? MB\b", row[0]), f"step row shows 10 MB: {row!r}")
    check("MemoryTestApp.exe!main" in p.stdout or "VirtualAlloc" in p.stdout,
          "--stacks in the table shows frames")


# --- database path ----------------------------------------------------------

def key_of(p):
    return (p["id"], p["pid"], p["name"], p["start_ns"])


def compare_reports(a, b, what, stacks=False, known_until=None, ended_at=None):
    """a (the exact analyzer) and b (the database) agree on every figure.
    known_until: b holds only the data before this time (a stopped run), so
    later exits are unknown to it. ended_at: the run into b ended tracking
    at this time (DESIGN.md "End of a run"): the instances alive then are
    not exited in b (exit_ns null, tracking_ended_ns = ended_at), which
    a, knowing the rest of the trace, may have seen exit later."""
    eq(sorted(key_of(p) for p in a["processes"]), sorted(key_of(p) for p in b["processes"]),
       f"{what}: processes")
    bmap = {key_of(p): p for p in b["processes"]}
    for pa in a["processes"]:
        pb = bmap[key_of(pa)]
        name = f"{what}: {pa['name']} ({pa['pid']})"
        if ended_at is None:  # two reports of the same database
            eq(pa["tracking_ended_ns"], pb["tracking_ended_ns"], f"{name}: tracking_ended_ns")
        else:
            eq(pa["tracking_ended_ns"], None, f"{name}: a trace never ends tracking")
            check(pb["tracking_ended_ns"] in (None, ended_at),
                  f"{name}: tracking ended where the run ended: {pb['tracking_ended_ns']}")
        check(pb["exit_ns"] is None or pb["tracking_ended_ns"] is None,
              f"{name}: an exit or the end of tracking, not both")
        for k in FIGS + ("events", "exit_ns", "cmdline"):
            # b's tracking ended while the instance was alive; a's real
            # exit, if any, came after what b knows (the stop can fall
            # anywhere in the last second before ended_at).
            if k == "exit_ns" and ended_at is not None and pb["tracking_ended_ns"] == ended_at and (
                    pa[k] is None or pa[k] >= (known_until if known_until is not None else ended_at)):
                continue
            eq(pa[k], pb[k], f"{name}: {k}")
        for t in TYPES:
            if known_until is not None and t in ("AIFO", "AOFO"):
                # A piece is a (commit, release event) pair: bytes still
                # committed when b stopped may be freed later in several
                # events, so b can count fewer pieces than the whole trace.
                eq(pa["types"][t]["bytes"], pb["types"][t]["bytes"], f"{name}: {t} bytes")
                check(pb["types"][t]["count"] <= pa["types"][t]["count"],
                      f"{name}: {t} count {pb['types'][t]['count']} <= {pa['types'][t]['count']}")
            else:
                eq(pa["types"][t], pb["types"][t], f"{name}: {t}")
        # Tag figures are Size, Count, Impacting (bytes), transient (AIFI):
        # exact even for a stopped run (only AIFO/AOFO piece counts are not).
        ta = {t["tag"]: t for t in pa["tags"]}
        tb = {t["tag"]: t for t in pb["tags"]}
        eq(ta, tb, f"{name}: tags")
        if stacks:
            sa = {tuple(s["frames"]): {k: v for k, v in s.items() if k != "stack_id"}
                  for s in pa["stacks"]}
            sb = {tuple(s["frames"]): {k: v for k, v in s.items() if k != "stack_id"}
                  for s in pb["stacks"]}
            eq(sa, sb, f"{name}: stacks")


def new_db(name):
    path = os.path.join(TMP, name)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return path


def stored_seconds(db):
    """Seconds of raw buckets a database holds (0 while it has none, or is
    not there yet). Read-only: never creates it, never blocks the writer."""
    if not os.path.exists(db):
        return 0
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        row = con.execute("SELECT start_ns, end_ns FROM tiers WHERE tier = 0").fetchone()
    except sqlite3.OperationalError:  # the schema is not written yet
        return 0
    finally:
        con.close()
    if not row or row[0] is None or row[1] is None or row[0] == -(2**63) or row[1] == -(2**63):
        return 0
    return (row[1] - row[0]) // SEC


def integrity_ok(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        con.close()


def test_db_agrees():
    db = new_db("mta.db")
    run("run", *replay(), "--db", db)
    check(integrity_ok(db), "integrity_check after run")
    windows = list(WIN["windows"].values())
    # A few more whole-second windows, including ones that cut lifetimes.
    t0 = WIN["t0_ns"]
    windows += [{"from_ns": t0 + a * SEC, "to_ns": t0 + b * SEC}
                for a, b in ((0, 1), (1, 2), (0, 15), (13, 17), (16, 31), (20, 21), (29, 32))]
    for w in windows:
        a = analyze_json(replay(), w["from_ns"], w["to_ns"], stacks=True)
        b = analyze_json(["--db", db], w["from_ns"], w["to_ns"], stacks=True)
        eq(b["window"]["from_ns"], w["from_ns"], "db window from")
        eq(b["window"]["to_ns"], w["to_ns"], "db window to")
        compare_reports(a, b, f"[{w['from_ns'] - t0}, {w['to_ns'] - t0}) replay vs db",
                        stacks=True, ended_at=t0 + 32 * SEC)
        if "expect" in w:
            check_figs(the_app(b), w["expect"], "db")
    # The database's whole range holds the whole trace.
    b = analyze_json(["--db", db])
    check_figs(the_app(b), WIN["windows"]["whole"]["expect"], "db, no window")


def test_db_unaligned():
    """An unaligned window on the database is widened to whole buckets, a
    note says so, and the figures are those of the widened window."""
    db = new_db("unaligned.db")
    run("run", *replay(), "--db", db)
    t0 = WIN["t0_ns"]
    frm, to = t0 + 14 * SEC + 250_000_000, t0 + 19 * SEC + 1
    b = analyze_json(["--db", db], frm, to)
    eq((b["window"]["from_ns"], b["window"]["to_ns"]), (t0 + 14 * SEC, t0 + 20 * SEC),
       "widened to the enclosing seconds")
    check(isinstance(b.get("note"), str) and b["note"], "a note says the window was widened")
    a = analyze_json(replay(), t0 + 14 * SEC, t0 + 20 * SEC)
    compare_reports(a, b, "widened window", ended_at=t0 + 32 * SEC)
    p = run("analyze", "--db", db, "--from", str(frm), "--to", str(to))
    check(re.search(r"(?i)note", p.stdout + p.stderr), "the table shows the note")


def test_db_refuses_foreign_files():
    """A file that is not a commitwatch database is refused, never
    modified; a missing database is an error for analyze."""
    text = os.path.join(TMP, "notes.txt")
    with open(text, "w") as fh:
        fh.write("not a database\n" * 100)
    other = new_db("other.sqlite")
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t(x)")
    con.execute("INSERT INTO t VALUES (42)")
    con.commit()
    con.close()
    for path in (text, other):
        before = open(path, "rb").read()
        p = run("run", *replay(), "--db", path, ok=False)
        check(p.returncode > 0, f"run --db {os.path.basename(path)} refused")
        check(os.path.basename(path) in p.stderr, f"the refusal names the file: {p.stderr!r}")
        p = run("analyze", "--db", path, ok=False)
        check(p.returncode > 0, f"analyze --db {os.path.basename(path)} refused")
        check(open(path, "rb").read() == before, f"{os.path.basename(path)} unchanged")
    p = run("analyze", "--db", os.path.join(TMP, "missing.db"), ok=False)
    check(p.returncode > 0 and "missing.db" in p.stderr, f"missing database: {p.stderr!r}")
    check(not os.path.exists(os.path.join(TMP, "missing.db")), "analyze creates no database")


def random_trace(path, seed, nev=400, span_s=12):
    """refmodel.random_trace with four VirtualAlloc stacks and times on
    minute edges too: (t0, where run ends the live instances)."""
    stacks = [["app.exe!main", f"app.exe!f{i}", "KernelBase.dll!VirtualAlloc"] for i in range(4)]
    return refmodel.random_trace(path, seed, HEADER, nev=nev, span_s=span_s, stacks=stacks,
                                 minute_edges=True)


def test_db_random():
    """Random traces: analyze --db equals analyze --source on every
    whole-second window (aggregator + store against the exact analyzer),
    instance by instance: short-lived instances are not folded here
    (fold_lifetime = 0; test_fold.py checks folding)."""
    import random
    nofold = os.path.join(TMP, "nofold.conf")
    with open(nofold, "w") as f:
        f.write("fold_lifetime = 0\n")
    for seed in range(1, 1 + tier_count("CW_DB_RANDOM", 3, 8)):
        path = os.path.join(TMP, f"random{seed}.jsonl")
        t0, ended = random_trace(path, seed)
        db = new_db(f"random{seed}.db")
        run("run", *replay(path), "--db", db, "--config", nofold)
        rnd = random.Random(seed)
        last = (ended - t0) // SEC  # windows up to the end of tracking
        wins = [(0, last)] + [tuple(sorted(rnd.sample(range(last + 1), 2))) for _ in range(6)]
        for a, b in wins:
            frm, to = t0 + a * SEC, t0 + b * SEC
            x = analyze_json(replay(path), frm, to, stacks=True)
            y = analyze_json(["--db", db], frm, to, stacks=True)
            compare_reports(x, y, f"seed {seed} window [{a}, {b}) s", stacks=True,
                            ended_at=ended)
        # The whole database is the whole trace: the instances alive at its
        # end are alive where tracking ended, with analyze --source's
        # figures (the data ends there: the window stops at it).
        x = analyze_json(replay(path))
        alive = sorted(key_of(p) for p in x["processes"] if p["exit_ns"] is None)
        check(alive, f"seed {seed}: some instances are alive at the end of the trace")
        y = analyze_json(["--db", db])
        eq(y["window"]["to_ns"], ended, f"seed {seed}: the whole database ends where tracking ended")
        eq(sorted(key_of(p) for p in y["processes"] if p["tracking_ended_ns"] == ended), alive,
           f"seed {seed}: alive where tracking ended")
        ymap = {key_of(p): p for p in y["processes"]}
        for p in x["processes"]:
            q = ymap.get(key_of(p))
            eq(q and [q[k] for k in ("outstanding_end_bytes", "impacting_bytes", "size_bytes",
                                     "transient_bytes", "exit_ns")],
               [p[k] for k in ("outstanding_end_bytes", "impacting_bytes", "size_bytes",
                               "transient_bytes", "exit_ns")],
               f"seed {seed}: {p['name']} ({p['pid']}): whole database = whole trace")
        # Past the end of the data: clipped to it, with a note; after it,
        # nothing is known.
        z = analyze_json(["--db", db], t0, ended + 5 * SEC)
        eq(z["window"]["to_ns"], ended, f"seed {seed}: a window past the end is clipped to it")
        check("tracking ended" in z.get("note", ""), f"seed {seed}: with a note: {z.get('note')}")
        z = analyze_json(["--db", db], ended, ended + SEC)
        eq(z["processes"], [], f"seed {seed}: nothing after tracking ended")
        check("tracking ended" in z.get("note", ""), f"seed {seed}: a note: {z.get('note')}")


def test_db_rollup():
    """A trace of 30 hours: windows older than the raw tier's retention
    (26 h by default) come from the minute and hour tiers, and must still
    equal the exact analyzer on windows aligned to them."""
    import random
    for seed in range(1, 1 + tier_count("CW_DB_ROLLUP", 1, 3)):
        path = os.path.join(TMP, f"rollup{seed}.jsonl")
        span = 30 * 3600
        t0, ended = random_trace(path, 100 + seed, nev=800, span_s=span)
        db = new_db(f"rollup{seed}.db")
        run("run", *replay(path), "--db", db)
        rnd = random.Random(seed)
        H, M = 3600 * SEC, 60 * SEC
        wins = [(t0, t0 + 2 * H), (t0 + H, t0 + 3 * H)]
        wins += [(t0 + a * M, t0 + b * M) for a, b in
                 (sorted(rnd.sample(range(0, 200), 2)) for _ in range(5))]
        for frm, to in wins:
            y = analyze_json(["--db", db], frm, to, stacks=True)
            check((y["window"]["from_ns"], y["window"]["to_ns"]) == (frm, to),
                  f"[{frm}, {to}) answered exactly: {y['window']} {y.get('note')}")
            x = analyze_json(replay(path), frm, to, stacks=True)
            compare_reports(x, y, f"rollup seed {seed} window [{(frm - t0) // M}, "
                                  f"{(to - t0) // M}) min", stacks=True, ended_at=ended)


# --- malformed traces -----------------------------------------------------------

HEADER = '{"format":"commitwatch-trace","version":1,"platform":"windows","pointer_size":8}'
GOOD = [
    '{"ts":1000,"op":"process_start","pid":7,"name":"a.exe"}',
    '{"ts":2000,"op":"commit","pid":7,"addr":"0x10000","size":8192,"stack":["a.exe!main"]}',
]
# (name, lines after the header or None for the whole file, bad line, words)
MALFORMED = [
    ("not_json", [*GOOD, '{"ts":3000,"op":"commit","pid":7,'], 4, r"json|pars|syntax"),
    ("missing_size", [*GOOD, '{"ts":3000,"op":"commit","pid":7,"addr":"0x20000","stack":[]}'],
     4, r"size"),
    ("missing_addr", [*GOOD, '{"ts":3000,"op":"decommit","pid":7,"size":4096}'], 4, r"addr"),
    ("missing_ts", [*GOOD, '{"op":"commit","pid":7,"addr":"0x20000","size":4096}'], 4, r"ts"),
    ("missing_pid", [*GOOD, '{"ts":3000,"op":"commit","addr":"0x20000","size":4096}'], 4,
     r"pid"),
    ("missing_name", [*GOOD, '{"ts":3000,"op":"process_start","pid":8}'], 4, r"name"),
    ("bad_op", [*GOOD, '{"ts":3000,"op":"allocate","pid":7,"addr":"0x20000","size":4096}'], 4,
     r"op|allocate"),
    ("bad_addr", [*GOOD, '{"ts":3000,"op":"commit","pid":7,"addr":"0xZZ","size":4096}'], 4,
     r"addr"),
    ("bad_addr_type", [*GOOD, '{"ts":3000,"op":"commit","pid":7,"addr":true,"size":4096}'], 4,
     r"addr"),
    ("negative_size", [*GOOD, '{"ts":3000,"op":"commit","pid":7,"addr":"0x20000","size":-4096}'],
     4, r"size"),
    ("back_in_time", [*GOOD, '{"ts":1500,"op":"commit","pid":7,"addr":"0x20000","size":4096}'], 4,
     r"time|ts|order|earlier|before"),
    ("bad_stack", [*GOOD, '{"ts":3000,"op":"commit","pid":7,"addr":"0x20000","size":4096,'
                          '"stack":"a.exe!main"}'], 4, r"stack"),
    ("trailing_garbage",
     [*GOOD, '{"ts":3000,"op":"commit","pid":7,"addr":"0x20000","size":4096} xyz'], 4,
     r"json|pars|syntax|trailing|after"),
    ("two_objects",
     [*GOOD, '{"ts":3000,"op":"commit","pid":7,"addr":"0x20000","size":4096}{"ts":4000}'], 4,
     r"json|pars|syntax|trailing|after"),
    # No address space is 2^63 bytes; such sizes overflowed signed sums.
    ("size_2_63", [*GOOD, '{"ts":3000,"op":"commit","pid":7,"addr":"0x1000",'
                          '"size":9223372036854775808}'], 4, r"size"),
    # INT64_MAX is the "never" sentinel; the default window's end overflowed.
    ("ts_never", [*GOOD, '{"ts":9223372036854775807,"op":"commit","pid":7,"addr":"0x20000",'
                         '"size":4096}'], 4, r"ts"),
    ("bad_header", None, 1, r"header|format"),
    ("wrong_version", None, 1, r"version"),
    ("empty", None, 1, r"empty|header"),
]
WHOLE_FILES = {
    "bad_header": '{"format":"something-else","version":1,"platform":"windows","pointer_size":8}\n'
                  + GOOD[0] + "\n",
    "wrong_version": HEADER.replace('"version":1', '"version":2') + "\n" + GOOD[0] + "\n",
    "empty": "",
}


def write_trace(name, lines):
    path = os.path.join(TMP, name + ".jsonl")
    with open(path, "w") as fh:
        if lines is None:
            fh.write(WHOLE_FILES[name])
        else:
            fh.write("\n".join([HEADER, *lines]) + "\n")
    return path


def check_error(p, path, line, words, what):
    check(p.returncode != 0, f"{what}: nonzero exit (got {p.returncode})")
    check(p.returncode > 0, f"{what}: exits, does not crash (got {p.returncode})")
    err = p.stderr
    base = os.path.basename(path)
    if os.path.getsize(path) == 0:
        # An empty file has no line to name: the file will do.
        check(base in err, f"{what}: message names the file ({base}): {err!r}")
    else:
        check(f"{path}:{line}" in err or f"{base}:{line}" in err,
              f"{what}: message names file:line ({base}:{line}): {err!r}")
    check(re.search(words, err, re.I), f"{what}: message says what is wrong ({words}): {err!r}")


def test_malformed_analyze():
    for name, lines, line, words in MALFORMED:
        path = write_trace(name, lines)
        p = run("analyze", *replay(path), "--json", ok=False)
        check_error(p, path, line, words, f"analyze {name}")
        eq(p.stdout.strip(), "", f"analyze {name}: no report on stdout")


def test_fuzz_lines():
    """Random damage to the fixture: every run either succeeds with JSON or
    fails cleanly (exit 1, file:line in the message), never crashes."""
    import random
    rnd = random.Random(int(os.environ.get("CW_FUZZ_SEED", "2")))
    lines = open(TRACE).read().splitlines()
    for i in range(tier_count("CW_FUZZ_ITER", 40, 250)):
        ls = list(lines)
        k = rnd.randrange(1, len(ls))
        kind = rnd.randrange(6)
        ln = ls[k]
        if kind == 0 and ln:  # flip one character
            j = rnd.randrange(len(ln))
            ln = ln[:j] + chr(rnd.choice(list(range(32, 127)) + [0xe9, 0x7f])) + ln[j + 1:]
        elif kind == 1:  # truncate
            ln = ln[:rnd.randrange(len(ln) + 1)]
        elif kind == 2:  # drop a key
            ev = json.loads(ln)
            ev.pop(rnd.choice(sorted(ev)))
            ln = json.dumps(ev)
        elif kind == 3:  # a number out of range or of the wrong kind
            ev = json.loads(ln)
            key = rnd.choice([x for x in ("ts", "pid", "size", "addr", "tid") if x in ev] or ["ts"])
            ev[key] = rnd.choice([-1, 2**64, 2**63 + 1, 1.5, "12", None, [], {}, True, "0x",
                                  "0x-1"])
            ln = json.dumps(ev)
        elif kind == 4:  # swap with a later line (time may go back)
            k2 = rnd.randrange(k, len(ls))
            ls[k], ls[k2] = ls[k2], ls[k]
            ln = ls[k]
        else:  # a stack of odd frames
            ev = json.loads(ln)
            ev["stack"] = rnd.choice([[""], ["a" * 5000], ["\u00e9\u0000x"], [1], "x", ["(x)"] * 300])
            ln = json.dumps(ev)
        ls[k] = ln
        path = os.path.join(TMP, "fuzz.jsonl")
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write("\n".join(ls) + "\n")
        p = run("analyze", *replay(path), "--json", ok=False)
        what = f"fuzz {i} (kind {kind}, line {k + 1}: {ln[:80]!r})"
        check(p.returncode in (0, 1), f"{what}: exit {p.returncode}: {p.stderr[-500:]}")
        if p.returncode == 0:
            json.loads(p.stdout)
        else:
            check(re.search(r"fuzz\.jsonl:\d+", p.stderr), f"{what}: no file:line in {p.stderr!r}")
            check("runtime error" not in p.stderr and "Sanitizer" not in p.stderr,
                  f"{what}: sanitizer: {p.stderr[-800:]}")


def test_malformed_run_keeps_db():
    # Good data first: the MemoryTestApp trace.
    db = new_db("malformed.db")
    run("run", *replay(), "--db", db)
    w = WIN["windows"]["whole"]
    before = analyze_json(["--db", db], w["from_ns"], w["to_ns"], stacks=True)
    t_end = WIN["t0_ns"] + 40 * SEC
    for i, (name, lines, line, words) in enumerate(MALFORMED):
        if lines is None:
            path = write_trace(name, lines)
        else:
            # Valid events spread over several seconds after the stored
            # data (so some buckets close and are written), then the bad line.
            base = t_end + i * 10 * SEC
            shifted = []
            for j, ln in enumerate(lines):
                ev = json.loads(ln) if j < len(lines) - 1 else None
                if ev is not None:
                    ev["ts"] = base + ev["ts"] * SEC // 1000
                    ev["pid"] = 9000 + i
                    shifted.append(json.dumps(ev))
                else:
                    bad = ln.replace('"pid":7', f'"pid":{9000 + i}')
                    bad = re.sub(r'"ts":(\d+)',
                                 lambda m: f'"ts":{base + int(m.group(1)) * SEC // 1000}', bad)
                    shifted.append(bad)
            path = write_trace(name + "_run", shifted)
        p = run("run", *replay(path), "--db", db, ok=False)
        check_error(p, path, line, words, f"run {name}")
        check(integrity_ok(db), f"run {name}: integrity_check ok")
        after = analyze_json(["--db", db], w["from_ns"], w["to_ns"], stacks=True)
        compare_reports(before, after, f"run {name}: earlier data", stacks=True)


def test_run_refuses_older_trace():
    db = new_db("older.db")
    run("run", *replay(), "--db", db)
    w = WIN["windows"]["whole"]
    before = analyze_json(["--db", db], w["from_ns"], w["to_ns"])
    p = run("run", *replay(), "--db", db, ok=False)
    check(p.returncode > 0, f"a second run of the same trace is refused (exit {p.returncode})")
    check(re.search(r"(?i)before|older|earlier|rebase", p.stderr),
          f"the refusal says why: {p.stderr!r}")
    check(integrity_ok(db), "integrity after the refusal")
    compare_reports(before, analyze_json(["--db", db], w["from_ns"], w["to_ns"]),
                    "refused run leaves data")
    # --rebase-now replays it again, moved to now. (The old window then lies
    # beyond the default retention, so only the new data is checked.)
    start = time.time_ns() // SEC * SEC
    p = run("run", *replay(), "--db", db, "--rebase-now")
    check(integrity_ok(db), "integrity after --rebase-now")
    b = analyze_json(["--db", db], start, start + 40 * SEC)
    eq(the_app(b)["size_bytes"], WIN["windows"]["whole"]["expect"]["size_bytes"],
       "the rebased replay is stored whole")
    eq(the_app(b)["impacting_bytes"], 0, "the rebased replay: Impacting 0")


def test_restart():
    """Instances alive when a run ends are ended there ("tracking ended",
    not an exit: their memory leaves the figures there), so a later run (a
    restart of the service) that starts new instances for the same pids
    from their rundown counts nothing twice."""
    db = new_db("restart.db")
    run("run", *replay(), "--db", db)
    t = WIN["t0_ns"] + 100 * SEC
    path = os.path.join(TMP, "restart.jsonl")
    with open(path, "w") as fh:
        fh.write("\n".join([HEADER] + [json.dumps(e) for e in (
            {"ts": t, "op": "process_start", "pid": 1044, "name": "svchost.exe"},
            {"ts": t, "op": "commit", "pid": 1044, "addr": "0x10000", "size": MB,
             "stack": ["(before trace)"], "rundown": True},
            {"ts": t + 5 * SEC, "op": "commit", "pid": 1044, "addr": "0x200000", "size": 4096,
             "stack": ["a.dll!f"]})]) + "\n")
    run("run", *replay(path), "--db", db)
    doc = analyze_json(["--db", db], t, t + 6 * SEC)  # this run too ends at t + 6 s
    svc = procs_named(doc, "svchost.exe")
    eq(len(svc), 1, "one svchost.exe after the restart")
    eq(svc[0]["start_ns"], t, "the new instance")
    eq(svc[0]["outstanding_end_bytes"], MB + 4096, "its memory only")
    eq(procs_named(doc, "notepad.exe"), [], "the first run's notepad.exe has ended")
    # The first run's windows keep their figures; its live instances end
    # at the start of the bucket after its last event.
    ended = WIN["t0_ns"] + 32 * SEC
    doc = analyze_json(["--db", db], WIN["t0_ns"], ended)
    check_figs(the_app(doc), WIN["windows"]["whole"]["expect"], "first run after the restart")
    for p in doc["processes"]:
        check((p["exit_ns"] is not None and p["exit_ns"] <= ended) or
              (p["exit_ns"] is None and p["tracking_ended_ns"] == ended),
              f"{p['name']} exited or alive when tracking ended at {ended}: {p['exit_ns']}, "
              f"{p['tracking_ended_ns']}")
    doc = analyze_json(["--db", db], ended, ended + SEC)
    eq(sorted(p["name"] for p in doc["processes"]), ["notepad.exe", "svchost.exe"],
       "the first run's live instances are reported where tracking ended them")
    for p in doc["processes"]:
        eq((p["outstanding_end_bytes"], p["exit_ns"], p["tracking_ended_ns"]), (0, None, ended),
           f"{p['name']}: tracking ended (not exited), nothing outstanding after it")


# --- SIGINT -----------------------------------------------------------------------

def big_trace():
    """A large generated trace from the bench generator (bench/gen_trace.c)."""
    path = os.path.join(TMP, "big.jsonl")
    gen = os.path.join(BUILD, "bench", "cw_gen_trace")
    check(os.path.exists(gen), f"{gen} not built")
    subprocess.run([gen, "--events", "2000000", "--procs", "200", "--out", path], check=True,
                   capture_output=True)
    return path


def trace_prefix(path, to):
    """A copy of the trace with its events before `to` (events are in time
    order, so reading stops at the first one at or after it)."""
    out = os.path.join(TMP, "prefix.jsonl")
    with open(path) as src, open(out, "w") as dst:
        dst.write(src.readline())
        for line in src:
            if json.loads(line)["ts"] >= to:
                break
            dst.write(line)
    return out


def test_sigint():
    path = big_trace()
    for sig in (signal.SIGINT, signal.SIGTERM):
        db = new_db("sigint.db")
        proc = subprocess.Popen([BIN, "run", *replay(path), "--db", db, "--no-http"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            # Signal once two minutes of data (about 70,000 events of the
            # hour the trace spans) are stored, while it ingests.
            wait_until(lambda: proc.poll() is not None or stored_seconds(db) >= 120, 60,
                       "run stores 120 s of data")
            check(proc.poll() is None, "the big trace was ingested before the signal; make it bigger")
        except BaseException:
            proc.kill()
            proc.communicate()
            raise
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        eq(proc.returncode, 0, f"run exits cleanly on {sig.name} ({err.strip()})")
        check(integrity_ok(db), f"integrity after {sig.name}")
        stored = analyze_json(["--db", db])
        check(stored["processes"], f"data was flushed before exiting on {sig.name}")
        frm, to = stored["window"]["from_ns"], stored["window"]["to_ns"]
        # The data ends where tracking ended (the last stored second holds
        # only that end, and the whole database stops before it); the
        # second before it holds only the events before the stop. Every
        # earlier second must have been written whole.
        ended = to
        check(any(p["tracking_ended_ns"] == ended for p in stored["processes"]),
              f"instances alive when {sig.name} ended tracking at {ended}")
        to -= SEC
        check(to > frm, "more than two seconds stored")
        # The trace's events before `ended` hold everything the database
        # can know (the stop came before it): analyze that prefix, not all
        # 2 M events. Later releases only split AIFO/AOFO pieces further,
        # and compare_reports allows the database fewer of them.
        a = analyze_json(replay(trace_prefix(path, ended)), frm, to)
        b = analyze_json(["--db", db], frm, to)
        compare_reports(a, b, f"stored prefix after {sig.name} vs the trace", known_until=to,
                        ended_at=ended)


def main():
    if not shutil.which(BIN) and not os.path.exists(BIN):
        print(f"commitwatch binary not found: {BIN}")
        return 1
    only = sys.argv[1:]
    tests = [(n, f) for n, f in globals().items() if n.startswith("test_") and callable(f)]
    failed = 0
    for name, fn in tests:
        if only and name not in only:
            continue
        t = time.time()
        try:
            fn()
            print(f"ok   {name} ({time.time() - t:.1f}s)")
        except Fail as e:
            failed += 1
            print(f"FAIL {name}: {e}")
        except Exception:
            failed += 1
            print(f"FAIL {name}: exception")
            traceback.print_exc()
    if not failed:
        shutil.rmtree(TMP, ignore_errors=True)
    else:
        print(f"{failed} failed; files kept in {TMP}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
