#!/usr/bin/env python3
"""End-to-end: `analyze --db` with no window answers, exactly, everything
the raw tier holds up to the newest data, even after retention folded older
history out of it (the service restarted much later): the newest run is
never left out, and a note says where the older history is.

The expected figures are the fixture generator's (its own model of the
rules, memorytestapp.windows.json), never numbers written here; checks are
explicit (they hold under python -O too)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

BIN = os.environ.get("CW_BIN", "build/commitwatch")
FIX = os.environ.get("CW_FIXTURES", "tests/fixtures")
TRACE = os.path.join(FIX, "memorytestapp.jsonl")
WIN = json.load(open(os.path.join(FIX, "memorytestapp.windows.json")))
APP = WIN["process"]
WHOLE = WIN["windows"]["whole"]["expect"]
checks = 0


def check(cond, what, *context):
    global checks
    checks += 1
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        for c in context:
            print("  ", str(c)[:4000], file=sys.stderr)
        sys.exit(1)


def cli(*args):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, f"commitwatch {' '.join(args)} exits 0", p.stderr)
    return p.stdout


def the_app(doc):
    app = [p for p in doc["processes"] if (p["name"], p["pid"]) == (APP["name"], APP["pid"])]
    check(len(app) == 1, f"one {APP['name']} in the report", [p["name"] for p in doc["processes"]])
    return app[0]


def main():
    check(WHOLE["size_bytes"] > 0 and WHOLE["impacting_bytes"] == 0,
          "the generator's whole-life figures: Size > 0, Impacting 0", WHOLE)
    tmp = tempfile.mkdtemp(prefix="cw_whole_")
    db = os.path.join(tmp, "w.db")
    cli("run", "--no-http", "--source", "replay:" + TRACE, "--db", db)
    first = json.loads(cli("analyze", "--db", db, "--json"))
    app = the_app(first)
    check(app["size_bytes"] == WHOLE["size_bytes"], "the whole database: the app's Size", app)
    check(app["commit_count"] == WHOLE["commit_count"], "the whole database: the app's Count", app)
    check("note" not in first, "no note when the raw tier holds everything", first.get("note"))

    # The same scenario replayed now, a long time after: retention folds
    # the first run out of the raw tier.
    cli("run", "--no-http", "--source", "replay:" + TRACE, "--db", db, "--rebase-now")
    doc = json.loads(cli("analyze", "--db", db, "--json"))
    app = the_app(doc)
    check(app["size_bytes"] == WHOLE["size_bytes"] and app["impacting_bytes"] == WHOLE["impacting_bytes"],
          "the newest run, whole: Size and Impacting", app)
    check(app["start_ns"] >= doc["window"]["from_ns"], "the window starts at or before the newest run",
          (app["start_ns"], doc["window"]))
    check("history before it" in doc.get("note", ""), "a note says where the older history is",
          doc.get("note"))
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{checks} checks passed")


if __name__ == "__main__":
    main()
