#!/usr/bin/env python3
"""End-to-end: `analyze --db` with no window answers, exactly, everything
the raw tier holds up to the newest data, even after retention folded older
history out of it (the service restarted much later): the newest run is
never left out, and a note says where the older history is."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

BIN = os.environ.get("CW_BIN", "build/commitwatch")
FIX = os.environ.get("CW_FIXTURES", "tests/fixtures")
TRACE = os.path.join(FIX, "memorytestapp.jsonl")


def cli(*args):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        print("FAIL:", args, p.stderr, file=sys.stderr)
        sys.exit(1)
    return p.stdout


def main():
    tmp = tempfile.mkdtemp(prefix="cw_whole_")
    db = os.path.join(tmp, "w.db")
    cli("run", "--no-http", "--source", "replay:" + TRACE, "--db", db)
    first = json.loads(cli("analyze", "--db", db, "--json"))
    app = [p for p in first["processes"] if p["name"] == "MemoryTestApp.exe"]
    assert len(app) == 1 and app[0]["size_bytes"] == 132120576, app
    assert "note" not in first, first.get("note")

    # The same scenario replayed now, a long time after: retention folds
    # the first run out of the raw tier.
    cli("run", "--no-http", "--source", "replay:" + TRACE, "--db", db, "--rebase-now")
    doc = json.loads(cli("analyze", "--db", db, "--json"))
    app = [p for p in doc["processes"] if p["name"] == "MemoryTestApp.exe"]
    assert len(app) == 1, [p["name"] for p in doc["processes"]]
    assert app[0]["size_bytes"] == 132120576 and app[0]["impacting_bytes"] == 0, app[0]
    assert app[0]["start_ns"] >= doc["window"]["from_ns"], (app[0]["start_ns"], doc["window"])
    assert "history before it" in doc.get("note", ""), doc.get("note")
    shutil.rmtree(tmp, ignore_errors=True)
    print("6 checks passed")


if __name__ == "__main__":
    main()
