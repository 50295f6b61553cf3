"""test_alerts_trace_limit.py - a replay forecasts against the trace's
commit limit, never this machine's (docs/ALERTS.md, "Time to limit";
issue 32 item 4).

One trace of a machine whose committed memory grows by 1 GiB a minute
for two hours (60 GiB/h: on this machine's limit the shipped
`commit_limit` rule would fire within minutes) is replayed with the
shipped default rules:

- without a "commit_limit" in the header: the rule has no value, so not
  one transition, and the log says once why;
- with "commit_limit": 160 GiB in the header: the rule fires, and its
  time to limit at each transition is (160 GiB - the series' outstanding
  at that instant) / 60 GiB/h, within 1 %, from 10 minutes on (this
  machine's limit is far from 160 GiB);
- the header field is checked like the others: 0 and a negative value
  are errors naming the field.
"""

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))
from alerttrace import BUILD, MIN, S, Trace, run, transitions  # noqa: E402
from cwservice import Checks  # noqa: E402

t = Checks()
TMP = os.path.join(BUILD, "e2e-alerts-trace-limit")
shutil.rmtree(TMP, ignore_errors=True)
os.makedirs(TMP)
GiB = 1 << 30
LIMIT = 160 * GiB
RATE = 60 * GiB  # per hour

tr = Trace()
tr.start(0, 301, "grower.exe")
# Half a minute past each minute, so every step boundary sees whole ones.
commits = [k * MIN + 30 * S for k in range(120)]
for ts in commits:
    tr.commit(ts, 301, GiB)
T0 = tr.base


def outstanding_at(ts_abs):
    """The machine's (this one process's) committed bytes before ts."""
    return GiB * sum(1 for c in commits if tr.base + c < ts_abs)


EXTRA = "alert_default_rules = yes\n"

# Without a header limit: not evaluated.
db, p = run(TMP, "nolimit", tr, "", EXTRA)
trs = transitions(db, "commit_limit")
t.eq("no header limit: no commit_limit transition", [(r["to_state"], r["ttl_s"]) for r in trs], [])
t.check("no header limit: the log says why, once",
        p.stderr.count("the trace's header has no \"commit_limit\"") == 1, p.stderr[-2000:])

# With the header's limit: fires, computed against it.
db, p = run(TMP, "limit", tr, "", EXTRA, header={"commit_limit": LIMIT})
trs = transitions(db, "commit_limit")
t.check("header limit: commit_limit fires", any(r["to_state"] == 2 for r in trs), trs)
t.check("header limit: the log names it", f"commit limit, {LIMIT} bytes" in p.stderr,
        p.stderr[-2000:])
# (The first minutes' slope rests on a few points: from 10 min on it is exact.)
late = [r for r in trs if r["ts_ns"] - T0 >= 10 * MIN]
t.check("header limit: transitions after 10 min to check", len(late) >= 2, trs)
for r in late:
    want = (LIMIT - outstanding_at(r["ts_ns"])) / RATE * 3600
    t.check(f"header limit: time to limit at {(r['ts_ns'] - T0) / MIN:.0f} min "
            f"({r['reason']}) against the header's limit",
            r["ttl_s"] is not None and abs(r["ttl_s"] - want) <= 0.01 * want,
            (r["ttl_s"], want))

# The header field's checks.
for bad, what in ((0, "above 0"), (-1, "must not be negative")):
    db, p = run(TMP, f"bad{bad}", tr, "", EXTRA, header={"commit_limit": bad}, check=False)
    t.check(f"commit_limit {bad}: refused naming the field",
            p.returncode != 0 and "commit_limit" in p.stderr and what in p.stderr, p.stderr[-500:])

t.done()
