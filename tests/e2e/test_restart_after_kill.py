"""test_restart_after_kill.py - a killed run's open instances are closed at
the next start, as the API and the dashboard show them (docs/DESIGN.md,
"A run that did not stop"; issue 32 item 3).

Run 1 replays, at real-time pace, two processes (alive.exe and dead.exe)
that commit memory in their first seconds and would exit ten minutes
later; once their buckets are stored it is killed with SIGKILL: both are
left open in the database. Run 2, into the same database, replays a later
trace in which alive.exe (the same pid) is found by the rundown and a new
process starts. Then, through the API:

- the first run's two instances are ended at E, the end of the data the
  killed run stored (at least where the tiers' end stood after the kill;
  at most the 3 s a pending batch may add, test_crash_kill's bound), with
  "tracking ended" (tracking_ended_ns = E, exit_ns null), in the process
  list and in each process's own record, from which the dashboard's
  process page writes "running when tracking ended";
- their memory is released at E: a window after E holds none of it, and
  the machine's series after the restart is the second run's memory only
  (no double count of alive.exe, whose rundown makes a new instance);
- the log says the last run did not stop and how many were ended.

The store's unit test (test_store, test_end_open) checks the released
rows against every retention tier; test_crash_kill (slow) kills at random.
"""

import os
import signal
import sqlite3
import subprocess
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from alerttrace import MiB, S, Trace  # noqa: E402
from cwservice import BIN, Checks, Service  # noqa: E402
from cwtest import wait_until  # noqa: E402

t = Checks()
folder = os.path.join(os.environ.get("CW_BUILD", "."), "e2e-http", "restart-after-kill-files")
os.makedirs(folder, exist_ok=True)

one = Trace()
one.start(0, 100, "alive.exe")
one.start(0, 200, "dead.exe")
for k in range(4):
    one.commit(k * S + S // 2, 100, 2 * MiB)
    one.commit(k * S + S // 2, 200, MiB)
one.exit(600 * S, 200)
one.exit(600 * S, 100)
DENSE = 10  # the events before the exits
LAST_DENSE = one.base + 3 * S + S // 2
path1 = one.write(os.path.join(folder, "one.jsonl"))

two = Trace(base=one.base + 1000 * S)
two.start(0, 100, "alive.exe")
two.commit(0, 100, 8 * MiB, rundown=True)
two.start(0, 300, "new.exe")
for k in range(3):
    two.commit(k * S + S // 2, 300, MiB)
path2 = two.write(os.path.join(folder, "two.jsonl"))
END2 = two.base + 3 * S  # run 2's tracking ends here (the bucket after its last event)

svc = Service(path2, name="restart-after-kill")  # makes its folder afresh; started below
log1 = open(os.path.join(svc.dir, "run1.log"), "w")
run1 = subprocess.Popen([BIN, "run", "--source", f"replay:{path1}", "--speed", "1", "--no-http",
                         "--db", svc.db], stdout=log1, stderr=subprocess.STDOUT)


def tier0_end():
    if not os.path.exists(svc.db):
        return None
    try:
        with sqlite3.connect(f"file:{svc.db}?mode=ro", uri=True) as c:
            row = c.execute("SELECT end_ns FROM tiers WHERE tier = 0").fetchone()
            n = c.execute("SELECT count(*) FROM processes").fetchone()[0]
    except sqlite3.OperationalError:
        return None
    return row[0] if row and n == 2 and row[0] > LAST_DENSE else None


try:
    wait_until(tier0_end, 60, "run 1 stores the buckets of its processes' commits")
finally:
    run1.send_signal(signal.SIGKILL)
    run1.wait()
    log1.close()
E0 = tier0_end()
with sqlite3.connect(f"file:{svc.db}?mode=ro", uri=True) as c:
    t.eq("after the kill: both instances are open in the database",
         c.execute("SELECT pid, exit_ns, tracking_ended_ns FROM processes ORDER BY pid").fetchall(),
         [(100, None, None), (200, None, None)])


def q(p, **params):
    return p + "?" + urllib.parse.urlencode(params)


with svc:
    st, h = svc.get("/api/health")
    st, r = svc.get(q("/api/processes", **{"from": one.base, "to": END2}))
    procs = r["processes"]
    first = sorted((p for p in procs if p["start_ns"] < two.base), key=lambda p: p["pid"])
    t.eq("the first run's instances: alive.exe and dead.exe",
         [(p["pid"], p["name"]) for p in first], [(100, "alive.exe"), (200, "dead.exe")])
    ends = {p["tracking_ended_ns"] for p in first}
    E = ends.pop() if len(ends) == 1 else None
    t.check("both ended at one time E, with tracking ended, not an exit",
            E is not None and all(p["exit_ns"] is None for p in first), first)
    t.check("E is the end of the data the killed run stored (bucket-aligned)",
            E is not None and E0 <= E <= E0 + 3 * S and E % S == 0, (E0, E))
    for p in first:
        st, one_p = svc.get(q(f"/api/processes/{p['id']}", **{"from": one.base, "to": END2}))
        t.eq(f"/api/processes/{p['id']} ({p['name']}): tracking ended at E, no exit",
             (st, one_p["process"]["exit_ns"], one_p["process"]["tracking_ended_ns"]),
             (200, None, E))
    later = [p for p in procs if p["start_ns"] >= two.base]
    t.eq("the second run's instances: alive.exe anew (its rundown) and new.exe",
         sorted((p["pid"], p["name"], p["tracking_ended_ns"]) for p in later),
         [(100, "alive.exe", END2), (300, "new.exe", END2)])
    # Released at E: nothing of the first run after it.
    st, r = svc.get(q("/api/processes", **{"from": E, "to": END2}))
    held = {(p["pid"], p["start_ns"] < two.base): p["outstanding_end_bytes"] for p in r["processes"]}
    t.check("after E the first run's instances hold nothing",
            all(v == 0 for (pid, old), v in held.items() if old), held)
    st, s = svc.get(q("/api/system/series", **{"from": two.base, "to": END2, "step": "1s"}))
    t.eq("the machine's memory after the restart is the second run's only (no double count)",
         s["outstanding_total"][-1], 8 * MiB + 3 * MiB)
    log = svc.logtext()
    t.check("the log says the last run did not stop and ended its 2 instances",
            "did not stop" in log and "its 2 instance(s) still open are ended" in log,
            log[-2000:])

t.done()
