"""test_alerts_recover.py - a leak alert recovers when growth stops
(docs/ALERTS.md, "The leak score": the recent cap; issue 32, item 5).

One 3-hour trace (alerttrace.py), replayed by the real binary with the
alert engine (`run --source replay:FILE --exit-at-end --no-http`) under a
`window = 1h, for = 10m, warn = 0.7` leak rule:

- warm.exe grows 480 MiB over its first 20 minutes, then stays flat: its
  alert resolves within the rule's `for` (10 min) of the plateau (before
  the recent cap: 30 min after it);
- warmlate.exe, flat for an hour, then the same warm-up: no alert is
  firing past its plateau + `for` (before: it fired 14 min after its
  plateau and resolved 35 min after it);
- leaks keep firing, from their first firing to the end, with no resolve:
  a steady leak (1 MiB every 10 s), a slow leak under churn (60 MiB/h
  beside 1 to 8 MiB buffers living 1 to 5 minutes) and a stair (48 MiB
  every 8 minutes: flat steps shorter than `for`);
- a backtest of the rule over the same history (GET
  /api/alert-rules/leak/backtest on `run` serving the replayed database)
  gives warm.exe the same firing and resolve times as the engine did.

The measured times are printed (docs/ALERTS.md quotes them).
"""

import json
import os
import random
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
from alerttrace import (BUILD, HOUR, MIN, S, MiB, T0, Trace, config_text, run,  # noqa: E402
                        series, transitions)
from cwservice import Checks, Service  # noqa: E402

t = Checks()
TMP = os.path.join(BUILD, "e2e-alerts-recover")
shutil.rmtree(TMP, ignore_errors=True)
os.makedirs(TMP)

FOR = 10 * MIN
WARM_END = 20 * MIN  # warm.exe's plateau starts here
LATE_END = HOUR + 20 * MIN  # warmlate.exe's
NAMES = {601: "warm.exe", 602: "warmlate.exe", 603: "leaky.exe", 604: "slow.exe",
         605: "stair.exe"}


def recover_trace():
    tr = Trace()
    for pid, name in NAMES.items():
        tr.start(0, pid, name)
        for _ in range(20):  # a base of 20 MiB
            tr.commit(0, pid, MiB)
    rng = random.Random(7)
    churn = []
    for k in range(1, 3 * 360):  # every 10 s for 3 h
        ts = k * 10 * S
        if ts <= WARM_END:  # warm-up: 4 MiB every 10 s (480 MiB), then flat
            tr.commit(ts, 601, 4 * MiB)
        if HOUR < ts <= LATE_END:  # the same after a flat hour
            tr.commit(ts, 602, 4 * MiB)
        if k % 6 == 0:  # alive while flat: a commit released at once
            for pid in (601, 602):
                a = tr.commit(ts, pid, MiB)
                tr.release(ts + S, pid, a, MiB)
        tr.commit(ts, 603, MiB)  # the steady leak: 360 MiB/h
        if k % 6 == 0:  # the slow leak: 60 MiB/h ...
            tr.commit(ts, 604, MiB)
        size = rng.randint(1, 8) * MiB  # ... under churn
        churn.append((ts + rng.randint(6, 30) * 10 * S, tr.commit(ts, 604, size), size))
        for c in [c for c in churn if c[0] <= ts]:
            tr.release(c[0], 604, c[1], c[2])
            churn.remove(c)
        if k % 48 == 0:  # the stair: 48 MiB every 8 minutes
            for _ in range(12):
                tr.commit(ts, 605, 4 * MiB)
    return tr


RULES = """
[rule leak]
process = *.exe
metric = leak_score
window = 1h
warn = 0.7
for = 10m
"""


def minutes(ns):
    return f"{ns / MIN:.2f} min"


def times(trs, name):
    """(first firing, first resolve after it, resolves after it) of a
    process's series; None when there is none."""
    rows = [r for r in trs if r["process"] == name]
    fired = next((r["ts_ns"] - T0 for r in rows if r["to_state"] == 2), None)
    after = [r["ts_ns"] - T0 for r in rows
             if r["from_state"] == 2 and r["to_state"] == 0 and fired is not None
             and r["ts_ns"] - T0 > fired]
    return fired, (after[0] if after else None), len(after)


db, _ = run(TMP, "recover", recover_trace(), RULES)
trs = transitions(db, "leak")

fired, resolved, n = times(trs, "warm.exe")
print(f"warm.exe: plateau at {minutes(WARM_END)}, fired at {fired and minutes(fired)}, "
      f"resolved at {resolved and minutes(resolved)}"
      + (f" (plateau + {minutes(resolved - WARM_END)})" if resolved else ""))
t.check("warm.exe fires while it grows", fired is not None and fired <= WARM_END + FOR,
        f"{[r for r in trs if r['process'] == 'warm.exe']}")
t.check("warm.exe resolves within `for` (10 min) of its plateau",
        resolved is not None and WARM_END < resolved <= WARM_END + FOR,
        f"resolved at {resolved and minutes(resolved)}, plateau at {minutes(WARM_END)}")
t.eq("warm.exe resolves once", n, 1)
# Its row keeps the figures of the resolve: the recent rise, under what the
# window's slope predicts for the span, is what capped the score.
w = [s for s in series(db, "leak") if s["process"] == "warm.exe"]
lk = json.loads(w[0]["detail"] or "{}").get("leak", {}) if len(w) == 1 else {}
t.check("warm.exe resolved by the recent cap: recent < 0.35, plateau above it",
        lk.get("recent", 1) < 0.35 and lk.get("plateau", 0) > lk.get("recent", 1), f"{lk}")

fired, resolved, n = times(trs, "warmlate.exe")
print(f"warmlate.exe: plateau at {minutes(LATE_END)}, fired at {fired and minutes(fired)}, "
      f"resolved at {resolved and minutes(resolved)}")
t.check("warmlate.exe is not firing past its plateau + `for`",
        fired is None or (resolved is not None and resolved <= LATE_END + FOR),
        f"fired at {fired and minutes(fired)}, resolved at {resolved and minutes(resolved)}")

for name in ("leaky.exe", "slow.exe", "stair.exe"):
    fired, resolved, n = times(trs, name)
    print(f"{name}: fired at {fired and minutes(fired)}, {n} resolve(s) after")
    t.check(f"{name} fires", fired is not None, f"{[r for r in trs if r['process'] == name]}")
    t.eq(f"{name} keeps firing to the end (no resolve after it fired)", n, 0)

# ---- the same through a backtest --------------------------------------------------
# The service replays the same trace with the same rules and serves it; the
# backtest evaluates the rule over the stored history from a clean state.
rules_path = os.path.join(TMP, "recover.rules")  # written by run() above
with Service(os.path.join(TMP, "recover.jsonl"), name="alerts-recover",
             config=config_text(rules_path)) as svc:
    st, b = svc.get(f"/api/alert-rules/leak/backtest?from={T0}&to={T0 + 3 * HOUR}&interval=10s")
    t.eq("backtest: 200", st, 200)
    bt = {s["process"]: s["transitions"] for s in (b["series"] if st == 200 else [])}
    warm = bt.get("warm.exe", [])
    bfired = next((x["ts_ns"] - T0 for x in warm if x["to"] == "firing"), None)
    bres = next((x["ts_ns"] - T0 for x in warm if x["from"] == "firing" and x["to"] == "inactive"),
                None)
    print(f"backtest: warm.exe fired at {bfired and minutes(bfired)}, resolved at "
          f"{bres and minutes(bres)}")
    fired, resolved, _ = times(trs, "warm.exe")
    t.eq("backtest: warm.exe fires and resolves when the engine said", (bfired, bres),
         (fired, resolved))
    for name in ("leaky.exe", "slow.exe", "stair.exe"):
        t.check(f"backtest: {name} never resolves after it fired",
                not any(x["from"] == "firing" and x["to"] == "inactive" for x in bt.get(name, [])),
                f"{bt.get(name)}")

t.done()
