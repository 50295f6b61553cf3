#!/usr/bin/env python3
"""End-to-end: a database of schema version 8 (before the cells), written
by the build before them (tests/fixtures/v8, make_fixture.sh), is
converted in place when the service opens it, says how long that took,
and then gives every window's report byte for byte as that build gave it:
the whole database, the raw tier, windows inside buckets, windows served
by the minute and hour tiers and from before the raw tier's horizon
(BEFORE baselines). Readers are refused before the conversion; `sqlite3`
still reads the tables after it, through the documented views.

The expected reports are the old build's own output, stored beside the
database (reports.json.gz); checks are explicit (they hold under python -O
too)."""
import gzip
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile

from cwtest import Checks

BIN = os.environ.get("CW_BIN", "build/commitwatch")
FIX = os.path.join(os.environ.get("CW_FIXTURES", "tests/fixtures"), "v8")
check = Checks()


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)


def main():
    tmp = tempfile.mkdtemp(prefix="cw_upgrade_")
    db = os.path.join(tmp, "v8.db")
    with gzip.open(os.path.join(FIX, "commitwatch-v8.db.gz"), "rb") as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    expected = json.load(gzip.open(os.path.join(FIX, "reports.json.gz"), "rt"))
    windows = json.load(open(os.path.join(FIX, "windows.json")))
    check(len(windows) == len(expected) >= 8, "the fixture has a report per window",
          sorted(expected))
    con = sqlite3.connect(db)
    check(con.execute("PRAGMA user_version").fetchone()[0] == 8, "the fixture is at schema 8")
    old_rows = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                   for t in ("commits", "releases", "activity"))
    con.close()
    check(old_rows > 10000, "the fixture has rows to convert", old_rows)

    # A reader does not upgrade: it says to run the service.
    p = run("analyze", "--db", db, "--json")
    check(p.returncode != 0 and "older schema version 8" in p.stderr,
          "analyze refuses schema 8 and says to run the service", p.returncode, p.stderr)

    # The service's writer converts it at its start (a replay of no event).
    header = os.path.join(tmp, "header.jsonl")
    with open(header, "w") as f:
        f.write('{"format":"commitwatch-trace","version":1,"platform":"windows","pointer_size":8}\n')
    p = run("run", "--no-http", "--source", "replay:" + header, "--db", db)
    check(p.returncode == 0, "run on the schema-8 database exits 0", p.stderr)
    m = re.search(r"converted (\d+) rows into (\d+) buckets of cells in ([0-9.]+) s", p.stderr)
    check(m is not None, "the log says what was converted and how long it took", p.stderr)
    check(int(m.group(1)) == old_rows, "every old row was converted", m.group(0), old_rows)

    for w in windows:
        p = run("analyze", "--db", db, "--json", *w["args"])
        check(p.returncode == 0, f"analyze {w['name']} exits 0", p.stderr)
        check(p.stdout == expected[w["name"]], f"window '{w['name']}': the report is the old build's, "
              "byte for byte", p.stdout[:2000], expected[w["name"]][:2000])

    # Converted once: the next start has nothing to do.
    p = run("run", "--no-http", "--source", "replay:" + header, "--db", db)
    check(p.returncode == 0 and "convert" not in p.stderr, "a second start converts nothing",
          p.stderr)

    con = sqlite3.connect(db)
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_schema")}
    check(not any(n.startswith("v8_") for n in names), "the old tables are dropped", names)
    check(con.execute("PRAGMA user_version").fetchone()[0] >= 9, "the schema is 9 or later")
    check(con.execute("PRAGMA integrity_check").fetchone()[0] == "ok", "integrity_check: ok")
    # The documented views name every column and decode nothing: plain
    # sqlite3 reads them without commitwatch's functions.
    cols = [d[0] for d in con.execute("SELECT * FROM commit_cells LIMIT 1").description]
    check(cols == ["tier", "bucket", "proc", "events", "delta", "relpeak", "relpeak_ns", "bytes",
                   "released", "data"], "commit_cells names every column", cols)
    n, nb = con.execute("SELECT count(*), count(DISTINCT bucket) FROM commit_cells").fetchone()
    check(0 < n < old_rows, "fewer cells than old rows", n, old_rows)
    check(con.execute("SELECT count(*) FROM heap_cells").fetchone()[0] == 0, "no heap cells")
    con.close()
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{check.count} checks passed ({old_rows} rows became {n} cells)")


if __name__ == "__main__":
    main()
