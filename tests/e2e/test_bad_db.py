"""test_bad_db.py - issue 13 item 3: a database file commitwatch cannot
use is refused with a clear message and never written to. For each of a
truncated commitwatch database (cut to whole pages and not), a text file,
another program's SQLite database, and a database of a newer schema:
`run --db` exits non-zero naming the file and the reason, `analyze --db`
too, and the file's bytes are unchanged (no WAL or journal left behind
either: a read-only open leaves SQLite's empty -wal and -shm). (A read-only database needs a read-only file system as root:
test_disk_full_root.py.)

Environment: CW_BIN (tests/CMakeLists.txt), CW_SOURCE.
"""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

BIN = os.environ.get("CW_BIN", "commitwatch")
SOURCE = os.environ.get("CW_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
TRACE = os.path.join(SOURCE, "examples", "memorytestapp.jsonl")
TMP = tempfile.mkdtemp(prefix="cw_e2e_baddb_")
failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else f": {detail}"), flush=True)
    if not cond:
        failures.append(what)


def cw(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)


def path(name):
    return os.path.join(TMP, name)


# A real database to damage.
good = path("good.db")
p = cw("run", "--no-http", "--exit-at-end", "--source", "replay:" + TRACE, "--db", good)
check(p.returncode == 0, "a database of the example trace", p.stderr)
whole = open(good, "rb").read()
check(len(whole) >= 8 * 4096, "it has pages to cut", len(whole))

cases = {}
with open(path("trunc_pages.db"), "wb") as f:
    f.write(whole[:(len(whole) // 2) & ~4095])
cases["trunc_pages.db"] = "truncated"
with open(path("trunc_odd.db"), "wb") as f:
    f.write(whole[:len(whole) // 2 + 777])
cases["trunc_odd.db"] = "truncated"
with open(path("notes.db"), "w") as f:
    f.write("a text file, not a database\n" * 200)
cases["notes.db"] = "not an SQLite file"
con = sqlite3.connect(path("other.db"))
con.execute("PRAGMA journal_mode = WAL")
con.execute("CREATE TABLE t(x)")
con.execute("INSERT INTO t VALUES (1)")
con.commit()
con.close()
cases["other.db"] = "not a commitwatch database"
shutil.copyfile(good, path("newer.db"))
con = sqlite3.connect(path("newer.db"))
con.execute("PRAGMA user_version = 999")
con.commit()
con.close()
cases["newer.db"] = "newer than version"

for name, words in cases.items():
    f = path(name)
    before = open(f, "rb").read()
    p = cw("run", "--no-http", "--exit-at-end", "--source", "replay:" + TRACE, "--db", f)
    check(p.returncode != 0, f"run --db {name}: refused (exit {p.returncode})", p.stderr)
    check(f in p.stderr and words in p.stderr, f"run --db {name}: the message names it and says "
          f"'{words}'", p.stderr)
    check("unchanged" in p.stderr or "upgrade" in p.stderr,
          f"run --db {name}: says the file was left alone", p.stderr)
    p = cw("analyze", "--db", f, "--json")
    check(p.returncode != 0 and name in p.stderr, f"analyze --db {name}: refused", (p.returncode, p.stderr))
    check(open(f, "rb").read() == before, f"{name}: bytes unchanged")
    # (A read-only open of a WAL-mode file leaves an empty -wal and the
    # -shm index, as SQLite's readers do: nothing of the file's content.)
    left = [x for x in os.listdir(TMP) if x.startswith(name + "-") and
            (x.endswith("-journal") or (x.endswith("-wal") and os.path.getsize(path(x)) > 0))]
    check(not left, f"{name}: no WAL content or journal written", left)

# The good database still opens (the refusals are not of every file).
p = cw("analyze", "--db", good, "--json")
check(p.returncode == 0 and json.loads(p.stdout)["processes"], "the intact database reads", p.stderr)

if failures:
    print(f"FAIL: {len(failures)} checks (files kept in {TMP})")
    sys.exit(1)
shutil.rmtree(TMP)
print("PASS")
