"""test_alerts_engine.py - the alert engine over replayed traces
(docs/ALERTS.md, "Evaluation and states"; issue 11, item 8).

Traces the test writes (alerttrace.py) are replayed by the real binary
(`run --source replay:FILE --exit-at-end --no-http`); the alert tables
are read back with sqlite3:

- a steady leak fires after `for` with leak score >= 0.7 and a time to
  limit within 5 % of the exact value (`limit = 4GiB`); heavy churn with
  no growth never fires and scores < 0.4; warm-up then plateau and a
  one-off step do not fire; a rising-floor sawtooth fires, a flat one
  does not (one 3-hour trace, six processes);
- the same trace twice gives the same transitions (determinism);
- a value oscillating around the threshold gives one firing and one
  resolve (clear); a dip shorter than keep_firing_for does not resolve, a
  longer one does, at its start + keep_firing_for; a process that exits
  while firing resolves with reason "process exited"; the end of the
  replay (tracking ended) resolves nothing;
- a restart during pending keeps the `for` clock (two runs into one
  database, group_by name);
- a silence records transitions (silenced = 1) and sends nothing, while
  an unsilenced series' alerts reach the exec hook.
"""

import json
import os
import shutil
import sqlite3
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from alerttrace import (BUILD, HOUR, MIN, S, MiB, T0, Level, Trace, run, series,  # noqa: E402
                        transitions)
from cwservice import Checks  # noqa: E402

t = Checks()
TMP = os.path.join(BUILD, "e2e-alerts-engine")
shutil.rmtree(TMP, ignore_errors=True)
os.makedirs(TMP)
IV = 10 * S  # alert_interval


def firing(trs):
    return [r for r in trs if r["to_state"] == 2 and r["from_state"] != 2]


def by_process(trs, name):
    return [r for r in trs if r["process"] == name]


# ---- the leak-score workloads ------------------------------------------------------

LEAK_RATE = MiB  # per 10 s: 360 MiB/h
LIMIT = 4 << 30


def leak_trace():
    tr = Trace()
    names = {101: "leaky.exe", 102: "churn.exe", 103: "plateau.exe", 104: "step.exe",
             105: "sawrise.exe", 106: "sawflat.exe"}
    for pid, name in names.items():
        tr.start(0, pid, name)
    churn = []
    saw = {105: [], 106: []}
    hours = 4
    for pid in (103, 104):  # a base
        for _ in range(20):
            tr.commit(0, pid, MiB)
    for k in range(1, hours * 360):  # every 10 s
        ts = k * 10 * S
        tr.commit(ts, 101, LEAK_RATE)  # the steady leak
        for j in range(5):  # churn: 4 MiB every 2 s, each released 20 s later
            tj = ts + j * 2 * S
            churn.append((tj + 20 * S, tr.commit(tj, 102, 4 * MiB)))
        while churn and churn[0][0] <= ts + 10 * S:
            rt, a = churn.pop(0)
            tr.release(rt, 102, a, 4 * MiB)
        if ts <= 15 * MIN:  # warm-up (a cache filling), then a plateau
            tr.commit(ts, 103, 4 * MiB)
        if k % 60 == 0:  # alive, flat: a commit released at once
            a = tr.commit(ts, 103, MiB)
            tr.release(ts + S, 103, a, MiB)
        if ts == HOUR:  # a one-off step
            for _ in range(100):
                tr.commit(ts, 104, 5 * MiB)
        for pid in (105, 106):  # sawtooths: 450 MiB built over 15 min, released at once
            saw[pid].append(tr.commit(ts, pid, 5 * MiB))
            if k % 90 == 89:
                keep = 7 if pid == 105 else 0  # the rising floor keeps 35 MiB a cycle (8 %)
                for a in saw[pid][keep:]:
                    tr.release(ts + 5 * S, pid, a, 5 * MiB)
                saw[pid] = []
    return tr


LEAK_RULES = """
[rule leak]
process = *.exe, !saw*
metric = leak_score
window = 1h
warn = 0.7
for = 10m
keep_firing_for = 10m
warmup = 45m
limit = 4GiB

[rule saw]
# The sawtooths: their cycles want a longer window.
process = saw*
metric = leak_score
window = 3h
warn = 0.7
for = 10m
warmup = 1h

[rule probe]
# Fires for every process, so its leak score is computed and stored.
process = *.exe
metric = outstanding
warn = 1MiB
"""

db1, _ = run(TMP, "leak", leak_trace(), LEAK_RULES)
trs = transitions(db1, "leak")
for name in ("churn.exe", "plateau.exe", "step.exe", "sawflat.exe"):
    t.eq(f"{name} never fires", firing(by_process(trs, name)), [])
lk = by_process(trs, "leaky.exe")
fl = firing(lk)
if t.eq("the steady leak fires once", len(fl), 1):
    f = fl[0]
    pend = [r for r in lk if r["to_state"] == 1]
    t.check("it was pending first", len(pend) == 1, f"{lk}")
    if pend:
        t.eq("it fires `for` (10 min) after it became pending", f["ts_ns"] - pend[0]["ts_ns"],
             10 * MIN)
        t.check("pending not before the warm-up", pend[0]["ts_ns"] - T0 >= 45 * MIN,
                f"{(pend[0]['ts_ns'] - T0) / MIN} min")
    t.check("leak score >= 0.7 when it fires", f["leak_score"] >= 0.7, f"{f['leak_score']}")
    # Exact: outstanding at T is 1 MiB per 10 s commit before T; the slope
    # 360 MiB/h.
    T = f["ts_ns"]
    out = ((T - T0 - 1) // (10 * S)) * LEAK_RATE
    exact = (LIMIT - out) / (LEAK_RATE * 360) * 3600
    t.check("time to limit within 5 % of the exact value",
            f["ttl_s"] is not None and abs(f["ttl_s"] - exact) <= 0.05 * exact,
            f"got {f['ttl_s']}, exact {exact:.0f}")
saw = transitions(db1, "saw")
t.check("the rising-floor sawtooth fires", len(firing(by_process(saw, "sawrise.exe"))) >= 1,
        f"{by_process(saw, 'sawrise.exe')}")
t.eq("the flat sawtooth does not", firing(by_process(saw, "sawflat.exe")), [])
probe = {s["process"]: s for s in series(db1, "probe")}
churn = probe.get("churn.exe")
t.check("churn's leak score < 0.4", churn is not None and churn["leak_score"] is not None
        and churn["leak_score"] < 0.4, f"{churn and churn['leak_score']}")
t.check("the leak's score (probe) >= 0.7", probe.get("leaky.exe", {}).get("leak_score", 0) >= 0.7,
        f"{probe.get('leaky.exe', {}).get('leak_score')}")
t.check("the replay's end resolves nothing", all(
    r["reason"] not in ("process exited", "tracking ended") for r in transitions(db1)),
    f"{[r for r in transitions(db1) if r['reason'] in ('process exited', 'tracking ended')]}")

# ---- determinism ---------------------------------------------------------------------


def canon(rows):
    return [(r["ts_ns"], r["rule"], r["key"], r["from_state"], r["to_state"], r["severity"],
             r["reason"], round(r["value"] or 0, 3)) for r in rows]


db2, _ = run(TMP, "leak2", leak_trace(), LEAK_RULES)
t.eq("the same trace twice: the same transitions", canon(transitions(db2)), canon(transitions(db1)))

# ---- states: oscillation, dips, exit -------------------------------------------------


def states_trace():
    tr = Trace()
    tr.start(0, 201, "osc.exe")
    tr.start(0, 202, "dip.exe")
    tr.start(0, 203, "exiter.exe")
    osc, dip, ex = Level(tr, 201), Level(tr, 202), Level(tr, 203)
    import math
    for k in range(0, 90 * 6):  # 90 min, every 10 s
        ts = k * 10 * S + 5 * S
        m = ts / MIN
        osc.to(ts, (100 + 15 * math.sin(2 * math.pi * m / 10)) * MiB if m < 60 else 10 * MiB)
        low = 20 <= m < 22 or 50 <= m < 65
        dip.to(ts, 50 * MiB if low else 200 * MiB)
        if m < 30:
            ex.to(ts, 200 * MiB)
    tr.exit(30 * MIN + 2 * S, 203)
    tr.start(0, 299, "ticker.exe")  # data up to the end: an event every 10 s
    for k in range(0, 90 * 6):
        a = tr.commit(k * 10 * S + 7 * S, 299, 4096)
        tr.release(k * 10 * S + 8 * S, 299, a, 4096)
    return tr


STATE_RULES = """
[rule osc]
process = osc.exe
metric = outstanding
warn = 100MiB
clear = 0.8

[rule dip]
process = dip.exe
metric = outstanding
warn = 100MiB
keep_firing_for = 5m

[rule exit]
process = exiter.exe
metric = outstanding
warn = 100MiB
"""

db3, _ = run(TMP, "states", states_trace(), STATE_RULES)
osc = transitions(db3, "osc")
t.eq("oscillation: one firing", len([r for r in osc if r["to_state"] == 2]), 1)
t.eq("oscillation: one resolve", [r["reason"] for r in osc if r["to_state"] == 0], ["resolved"])
if osc and osc[-1]["to_state"] == 0:
    t.check("oscillation resolves after the drop (60 min)", osc[-1]["ts_ns"] - T0 > 60 * MIN,
            f"{(osc[-1]['ts_ns'] - T0) / MIN} min")
dip = transitions(db3, "dip")
t.eq("dips: fire, resolve (the long dip), fire", [(r["from_state"], r["to_state"]) for r in dip],
     [(0, 2), (2, 0), (0, 2)])
if len(dip) == 3:
    # The long dip starts at 50 min (its first instant seeing it: 50:10);
    # it resolves keep_firing_for (5 min) later.
    t.eq("the long dip resolves at its start + keep_firing_for", dip[1]["ts_ns"] - T0,
         55 * MIN + 10 * S)
ex = transitions(db3, "exit")
t.eq("exit while firing", [(r["to_state"], r["reason"]) for r in ex],
     [(2, "condition"), (0, "process exited")])
if len(ex) == 2:
    t.check("exit: resolved with its last figures", ex[1]["value"] >= 199 * MiB, f"{ex[1]}")
    t.check("exit: resolved at the first instant after it",
            30 * MIN < ex[1]["ts_ns"] - T0 <= 30 * MIN + 10 * S, f"{ex[1]['ts_ns'] - T0}")

# ---- restart during pending ----------------------------------------------------------

RESTART_RULES = """
[rule svc]
process = svc.exe
group_by = name
tag_by = all
metric = outstanding
warn = 100MiB
for = 10m
"""
tr1 = Trace()
tr1.start(0, 301, "svc.exe")
for _ in range(150):
    tr1.commit(0, 301, MiB)
for k in range(1, 30):  # alive for 5 min
    a = tr1.commit(k * 10 * S, 301, MiB)
    tr1.release(k * 10 * S + S // 2, 301, a, MiB)
db4 = os.path.join(TMP, "restart.db")
run(TMP, "restart1", tr1, RESTART_RULES, db=db4)
mid = transitions(db4, "svc")
t.eq("restart: pending at the end of the first run", [r["to_state"] for r in mid], [1])
# The second run: a new instance finds the same memory (rundown) just after
# the first run's end (5 min: tracking ended at 4:51).
tr2 = Trace()
tr2.start(4 * MIN + 52 * S, 302, "svc.exe")
for _ in range(150):
    tr2.commit(4 * MIN + 52 * S, 302, MiB, rundown=True)
for k in range(30, 150):
    a = tr2.commit(k * 10 * S, 302, MiB)
    tr2.release(k * 10 * S + S // 2, 302, a, MiB)
run(TMP, "restart2", tr2, RESTART_RULES, db=db4)
after = transitions(db4, "svc")
t.eq("restart: pending, then firing (no reset)", [r["to_state"] for r in after], [1, 2])
if len(after) == 2:
    t.eq("restart: firing `for` after pending, across the restart",
         after[1]["ts_ns"] - after[0]["ts_ns"], 10 * MIN)

# A restart with the rule changed: its active series resolves "rule
# removed" at once; the new rule's series starts over.
tr3 = Trace()
tr3.start(25 * MIN, 303, "svc.exe")
for _ in range(150):
    tr3.commit(25 * MIN, 303, MiB, rundown=True)
for k in range(151, 200):
    a = tr3.commit(k * 10 * S, 303, MiB)
    tr3.release(k * 10 * S + S // 2, 303, a, MiB)
run(TMP, "restart3", tr3, RESTART_RULES.replace("warn = 100MiB", "warn = 120MiB"), db=db4)
after3 = transitions(db4, "svc")[len(after):]
t.eq("rule changed: the active series resolves 'rule removed', the new one starts over",
     [(r["to_state"], r["reason"]) for r in after3][:2], [(0, "rule removed"), (1, "condition")])

# ---- silences ----------------------------------------------------------------------------

SIL_RULES = """
[rule sil]
process = quiet.exe, loud.exe
metric = outstanding
warn = 100MiB
"""
hook = os.path.join(TMP, "hook.sh")
calls = os.path.join(TMP, "hook.calls")
with open(hook, "w") as f:
    f.write(f"#!/bin/sh\ncat >> {calls}\necho >> {calls}\n")
os.chmod(hook, os.stat(hook).st_mode | stat.S_IXUSR)
db5 = os.path.join(TMP, "silence.db")
pre = Trace()
pre.start(0, 400, "pre.exe")
pre.commit(S, 400, MiB)
run(TMP, "silence0", pre, SIL_RULES, db=db5)  # creates the database
now = time.time_ns()
con = sqlite3.connect(db5)
con.execute("INSERT INTO silences(matchers, starts_ns, ends_ns, created_by, comment, created_ns)"
            " VALUES (?, ?, ?, 'test', 'quiet please', ?)",
            (json.dumps([{"name": "process", "value": "quiet\\.exe", "isRegex": True,
                          "isEqual": True}]), now - HOUR // S * S, now + HOUR, now))
con.commit()
con.close()
sil = Trace()
sil.start(MIN, 401, "quiet.exe")
sil.start(MIN, 402, "loud.exe")
for pid in (401, 402):
    for _ in range(120):
        sil.commit(MIN + S, pid, MiB)
for k in range(7, 40):
    sil.commit(k * 10 * S, 401, 4096)
    sil.commit(k * 10 * S, 402, 4096)
run(TMP, "silence", sil, SIL_RULES, db=db5,
    extra=f"alert_exec = {hook}\nalert_exec_timeout = 5s\nalert_repeat_interval = 1h\n")
st = transitions(db5, "sil")
q = [r for r in st if r["process"] == "quiet.exe"]
ld = [r for r in st if r["process"] == "loud.exe"]
t.check("silence: the silenced series' transitions are stored", len(q) >= 1, f"{st}")
t.check("silence: stored with silenced = 1", q and all(r["silenced"] == 1 for r in q), f"{q}")
t.check("silence: the other series is not silenced", ld and all(r["silenced"] == 0 for r in ld),
        f"{ld}")
text = open(calls).read() if os.path.exists(calls) else ""
t.check("silence: the unsilenced alert reached the exec hook", "loud.exe" in text, text[:500])
t.check("silence: nothing of the silenced one was sent", "quiet.exe" not in text, text[:2000])

# ---- a stretch without data is not evaluated instant by instant -------------------
# A second run into the same database 30 days after the first (a replay
# rebased long after the stored history): the engine goes on from the last
# instant before the new data instead of evaluating 259,200 empty instants;
# the name series, still outstanding, keeps firing across the gap.
GAP_RULES = """
[rule gap]
process = gap.exe
group_by = name
metric = outstanding
warn = 8MiB
"""
GAP = 30 * 24 * HOUR
g1 = Trace()
g1.start(0, 501, "gap.exe")
for k in range(1, 31):
    g1.commit(k * 10 * S, 501, MiB)
db6, _ = run(TMP, "gap1", g1, GAP_RULES)
g2 = Trace()
g2.start(GAP, 502, "gap.exe")
for k in range(1, 31):
    g2.commit(GAP + k * 10 * S, 502, MiB)
t0 = time.monotonic()
run(TMP, "gap2", g2, GAP_RULES, db=db6)
took = time.monotonic() - t0
con = sqlite3.connect(db6)
evals = int(con.execute("SELECT value FROM meta WHERE key = 'alert_evaluations'").fetchone()[0])
done = int(con.execute("SELECT value FROM meta WHERE key = 'alert_evaluated_ns'").fetchone()[0])
con.close()
t.check("gap: the 30 days without data are skipped, not evaluated every 10 s",
        evals < 2000, f"{evals} evaluations, {took:.1f} s")
t.check("gap: the second run's data is evaluated", done >= T0 + GAP + 300 * S,
        f"evaluated up to {(done - T0 - GAP) / S} s after the gap")
gt = transitions(db6, "gap")
t.eq("gap: the name series fires in each run (the first run's resolves when its tracking ends)",
     [r["to_state"] for r in gt if r["to_state"] == 2], [2, 2])

t.done()
