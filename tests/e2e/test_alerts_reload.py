"""test_alerts_reload.py - alert rules reloaded in a running service
(docs/ALERTS.md, "Evaluation and states", Saving).

A paced replay (2 h of data at 240x: 30 s) with two firing rules; while
it runs the rules file is rewritten (one rule unchanged but for a comment and spacing, one
removed, one added) and the service gets SIGHUP: the removed rule's
series resolves with reason "rule removed", the unchanged one keeps its
state (no new transition), the new one is evaluated (it fires: its
series appears), and the rules in force (meta alert_rules) follow; then
POST /api/reload with the token does the same for a second change.
"""

import json
import os
import signal
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(__file__))
from alerttrace import MIN, S, MiB, Trace, transitions  # noqa: E402
from cwservice import Checks, Service  # noqa: E402
from cwtest import wait_until  # noqa: E402

t = Checks()
TOKEN = "reload-token-0123456789"

tr = Trace()
tr.start(0, 501, "big.exe")
for _ in range(200):
    tr.commit(S, 501, MiB)
for k in range(1, 720):  # 2 hours of data
    a = tr.commit(k * 10 * S, 501, 4096)
    tr.release(k * 10 * S + S, 501, a, 4096)

RULES1 = """
[rule keep]
process = big.exe
metric = outstanding
warn = 100MiB

[rule drop]
process = big.exe
metric = outstanding
warn = 150MiB
"""
RULES2 = """
# the same rule, another comment and spacing: its state stays
[rule keep]
process   = big.exe
metric = outstanding
warn = 100MiB

[rule added]
process = big.exe
metric = outstanding
warn = 50MiB
"""
RULES3 = RULES2.replace("warn = 50MiB", "warn = 60MiB")


def rules_in_force(db):
    con = sqlite3.connect(db)
    row = con.execute("SELECT value FROM meta WHERE key = 'alert_rules'").fetchone()
    con.close()
    return sorted(r["name"] for r in json.loads(row[0])) if row else None


folder = os.path.join(os.environ.get("CW_BUILD", "."), "e2e-http", "alerts-reload-files")
os.makedirs(folder, exist_ok=True)
trace = tr.write(os.path.join(folder, "reload.jsonl"))
rules = os.path.join(folder, "reload.rules")
with open(rules, "w") as f:
    f.write(RULES1)
CONFIG = (f"alert_rules = {rules}\nalert_default_rules = no\nalert_log = no\n"
          f"token = {TOKEN}\n")

with Service(trace, name="alerts-reload", config=CONFIG, args=["--speed", "240"],
             wait_done=False) as svc:
    def fired():
        trs = transitions(svc.db)
        return {r["rule"] for r in trs if r["to_state"] == 2} >= {"keep", "drop"} and trs

    before = wait_until(fired, 60, "both rules fire after the replay")
    t.eq("rules in force at start", rules_in_force(svc.db), ["drop", "keep"])
    with open(rules, "w") as f:
        f.write(RULES2)
    svc.proc.send_signal(signal.SIGHUP)

    def reloaded():
        trs = transitions(svc.db)
        return (any(r["rule"] == "drop" and r["reason"] == "rule removed" for r in trs)
                and any(r["rule"] == "added" for r in trs) and trs)

    trs = wait_until(reloaded, 60, "SIGHUP: 'drop' resolves 'rule removed', 'added' fires")
    keep = [r for r in trs if r["rule"] == "keep"]
    t.eq("the unchanged rule keeps its state (no new transition)", len(keep),
         len([r for r in before if r["rule"] == "keep"]))
    t.eq("rules in force after SIGHUP", rules_in_force(svc.db), ["added", "keep"])
    drop = [r for r in trs if r["rule"] == "drop"]
    t.eq("the removed rule's series: fired, then 'rule removed'",
         [(r["to_state"], r["reason"]) for r in drop], [(2, "condition"), (0, "rule removed")])
    # POST /api/reload: 'added' changes (its threshold): resolved and anew.
    with open(rules, "w") as f:
        f.write(RULES3)
    status, _ = svc.get("/api/reload", method="POST",
                        headers={"Authorization": f"Bearer {TOKEN}"})
    t.eq("POST /api/reload answers 200", status, 200)
    trs = wait_until(lambda: len(transitions(svc.db, "added")) >= 3 and transitions(svc.db, "added"),
                     60, "POST /api/reload: the changed rule's series resolves and fires anew")
    t.eq("changed rule: resolved, then fires again under the new text",
         [(r["to_state"], r["reason"]) for r in trs],
         [(2, "condition"), (0, "rule removed"), (2, "condition")])
    log = svc.logtext()
    t.check("no engine failure logged", "alerts: evaluating at" not in log, log[-2000:])

t.done()
