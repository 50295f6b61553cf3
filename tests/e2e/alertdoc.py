"""alertdoc.py - the alert state the alert API and dashboard tests store
(through tests/alertfill, cw_alert_fill) beside a service replaying the
MemoryTestApp fixture: three rules in force, four series over two
evaluations (the fixture's process firing critical with its detail, the
machine firing warning, a pending series whose process name needs
escaping, a resolved one), their transitions and a silence.

    doc = fill_doc(proc)   # proc: the fixture process's instance id
    ids = fill(svc, doc)   # {"series": [...], "transitions": [...], "silences": [...]}
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import MTA_WINDOWS  # noqa: E402

S = 1_000_000_000
W = json.load(open(MTA_WINDOWS))
T0 = W["t0_ns"]
NAME = W["process"]["name"]
WEIRD = 'db"weird\nname\\x'  # a process name with a quote, a newline and a backslash
FILL = os.environ.get("CW_ALERT_FILL", "")

LEAK_TEXT = ("[rule leak]\nmetric = leak_score\nprocess = *.exe, !svchost.exe\n"
             "warn = 0.7\ncrit = 0.9\nfor = 5m\n# a comment\nsummary = {process} leaks\n")
TTL_TEXT = "[rule ttl]\nmetric = time_to_limit\ngroup_by = machine\nwarn = < 48h\n"
BIG_TEXT = (f"[rule big]\nmetric = outstanding\nprocess = {NAME}\ngroup_by = name\n"
            "tag_by = all\nwarn = 1MiB\n")
RULES = [
    {"name": "leak", "file": "/etc/commitwatch/alerts.rules", "line": 1, "hash": "aa", "text": LEAK_TEXT},
    {"name": "ttl", "file": "/etc/commitwatch/alerts.rules", "line": 10, "hash": "bb", "text": TTL_TEXT},
    {"name": "big", "file": "/etc/commitwatch/big.rules", "line": 1, "hash": "cc", "text": BIG_TEXT},
]
E1, E2 = T0 + 10 * S, T0 + 20 * S
# Silences live in wall-clock time (the engine applies those active now,
# even beside a replay): the stored one started an hour ago, whole seconds.
SIL_START = (time.time_ns() // S - 3600) * S
DETAIL = {"labels": {"alertname": "leak", "process": NAME, "severity": "critical"},
          "summary": f"{NAME} leaks",
          "leak": {"score": 0.93, "slope": 1048576.0, "slope_lo": 900000.0, "slope_hi": 1200000.0,
                   "mk_z": 4.2, "mk_p": 0.0001, "floor_slope": 1000000.0, "stay_share": 0.8,
                   "plateau": 1.0, "points": 60},
          "forecast": {"median_s": 7200.0, "upper_s": 5400.0, "headroom": 8589934592,
                       "source": "CommitLimit", "advisory": True},
          "values": {"t": [E1, E2], "v": [0.8, 0.93]}}


def fill_doc(PROC):
    """The alert state, with the fixture process's series on instance PROC."""
    return {
        "rules": RULES,
        "evaluations": [
            {"eval_ns": E1,
             "series": [
                 {"rule": "leak", "rule_hash": "aa", "key": f"instance:{PROC}|Heap", "process": NAME, "proc": PROC,
                  "pid": W["process"]["pid"], "tag": "Heap", "state": 1, "severity": 0, "active_since": E1,
                  "value": 0.8, "threshold": 0.7, "leak_score": 0.8, "ttl_s": 9000.0},
                 {"rule": "ttl", "rule_hash": "bb", "key": "machine|*", "state": 2, "severity": 1,
                  "active_since": E1, "firing_since": E1, "value": 100000.0, "threshold": 172800.0,
                  "ttl_s": 100000.0},
                 {"rule": "leak", "rule_hash": "aa", "key": "instance:9|Other", "process": WEIRD, "proc": 9,
                  "pid": 77, "tag": "Other", "state": 1, "severity": 0, "active_since": E1 - 5 * S,
                  "value": 0.75, "threshold": 0.7, "leak_score": 0.75, "ttl_s": "inf"},
                 {"rule": "leak", "rule_hash": "aa", "key": "instance:3|Heap", "process": "old.exe",
                  "proc": 3, "pid": 33, "tag": "Heap", "state": 2, "severity": 1, "active_since": T0,
                  "firing_since": T0, "value": 0.9, "threshold": 0.7, "leak_score": 0.9}],
             "transitions": [
                 {"row": 0, "ts_ns": E1, "from": 0, "to": 1, "severity": 0, "value": 0.8,
                  "threshold": 0.7, "reason": "condition"},
                 {"row": 1, "ts_ns": E1, "from": 0, "to": 2, "severity": 1, "value": 100000.0,
                  "threshold": 172800.0, "reason": "condition", "silenced": True},
                 {"row": 2, "ts_ns": E1 - 5 * S, "from": 0, "to": 1, "severity": 0, "value": 0.75,
                  "threshold": 0.7, "reason": "condition"}]},
            {"eval_ns": E2,
             "series": [
                 {"ref": 0, "rule": "leak", "rule_hash": "aa", "key": f"instance:{PROC}|Heap", "process": NAME,
                  "proc": PROC, "pid": W["process"]["pid"], "tag": "Heap", "state": 2, "severity": 2,
                  "active_since": E1, "firing_since": E2, "value": 0.93, "threshold": 0.9,
                  "leak_score": 0.93, "ttl_s": 7200.0, "detail": DETAIL},
                 {"ref": 3, "rule": "leak", "rule_hash": "aa", "key": "instance:3|Heap", "process": "old.exe",
                  "proc": 3, "pid": 33, "tag": "Heap", "state": 0, "severity": 0, "value": 0.9,
                  "threshold": 0.7, "leak_score": 0.9}],
             "transitions": [
                 {"row": 0, "ts_ns": E2, "from": 1, "to": 2, "severity": 2, "value": 0.93,
                  "threshold": 0.9, "leak_score": 0.93, "ttl_s": 7200.0, "reason": "for elapsed"},
                 {"row": 1, "ts_ns": E2, "from": 2, "to": 0, "severity": 1, "value": 0.9,
                  "threshold": 0.7, "reason": "process exited"}]},
        ],
        "silences": [
            {"matchers": [{"name": "rule", "value": "ttl", "isRegex": False, "isEqual": True}],
             "starts_ns": SIL_START, "ends_ns": SIL_START + 86400 * S, "created_by": "ops",
             "comment": "known", "created_ns": SIL_START}],
    }

CONFIG = "alert_default_rules = no\n"


def proc_id(svc):
    """The instance id of the fixture's process in svc's database."""
    st, r = svc.get(f"/api/processes?from={T0}&to={T0 + 3600 * S}&name={NAME}")
    return r["processes"][0]["id"]


def fill(svc, doc):
    """Stores doc with cw_alert_fill into svc's database; the ids it gave."""
    path = os.path.join(svc.dir, "alerts.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    out = subprocess.run([FILL, svc.db, path], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"cw_alert_fill failed: {out.stderr}")
    return json.loads(out.stdout)
