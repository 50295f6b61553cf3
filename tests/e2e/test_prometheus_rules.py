"""test_prometheus_rules.py - the shipped Prometheus rules
(contrib/prometheus/commitwatch.rules.yml): `promtool check rules` accepts
them, their unit tests (commitwatch.rules.test.yml: input series, expected
samples and alerts with their links) pass under `promtool test rules`,
every metric they read is one commitwatch's real /metrics serves (the
service run on the fixture) or one they record, and the unit tests catch
each deliberate bug of MUTANTS (a copy of the rules with the bug must fail
them). Needs Debian's promtool (package prometheus)."""

import os
import shutil
import subprocess
import tempfile

from cwservice import Checks
from promcheck import (RULES, RULES_TEST, expr_metric_names, require_promtool, rules_exprs,
                       served_metric_names)

# (what it breaks, text in the rules, its replacement): each must make
# `promtool test rules` fail. The first occurrence is replaced, or, for
# text starting with "ALERT-WIDE ", every occurrence in the leak alert.
MUTANTS = [
    ("the leak's min_outstanding (32 MiB)", ">= 32 * 1024 * 1024", ">= 0"),
    ("the leak's min_impacting_rate (10 MiB/h)", "* 3600 >= 10 * 1024 * 1024", "* 3600 >= 0"),
    ("the leak still growing over 30 min", "[30m]) > 0", "[30m]) >= 0"),
    ("the leak's exclusion of process=\"other\"",
     'ALERT-WIDE commitwatch_process_outstanding_bytes{process!="other"}',
     "commitwatch_process_outstanding_bytes"),
    ("the leak's link to the process page", "/#/process/{{ $labels.id }}",
     "/#/process/{{ $labels.pid }}"),
    ("the source_down condition", "commitwatch_source_up == 0", "commitwatch_source_up == 2"),
    ("the critical time to limit (2 h)", "< 2 * 3600\n", "< 1 * 3600\n"),
    ("the events lost window", "commitwatch_events_lost_total[10m]", "commitwatch_events_lost_total[1m]"),
]

promtool = require_promtool()
c = Checks()


def run(*args, cwd=None):
    p = subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, cwd=cwd)
    return p.returncode, p.stdout + p.stderr


rc, out = run("check", "rules", RULES)
c.check("promtool check rules accepts the rules", rc == 0 and "SUCCESS" in out, out)
rc, out = run("test", "rules", os.path.basename(RULES_TEST), cwd=os.path.dirname(RULES_TEST))
c.check("promtool test rules: the unit tests pass", rc == 0 and "SUCCESS" in out, out)

exprs = rules_exprs()
c.check("the rules file has its rules", len(exprs) >= 10, f"{len(exprs)}: {sorted(exprs)}")
served = served_metric_names(name="prometheus_rules")
c.check("/metrics serves the per-process family",
        "commitwatch_process_outstanding_bytes" in served, sorted(served))
recorded = {n for n in exprs if ":" in n}
for name, expr in exprs.items():
    used = expr_metric_names(expr)
    c.check(f"{name}: reads a metric", bool(used), expr)
    unknown = used - served - recorded
    c.check(f"{name}: every metric it reads is served by /metrics or recorded here",
            not unknown, f"unknown: {sorted(unknown)}")

text = open(RULES).read()
tmp = tempfile.mkdtemp(prefix="cw_rules_mut_")
try:
    shutil.copy(RULES_TEST, tmp)
    for what, old, new in MUTANTS:
        if old.startswith("ALERT-WIDE "):
            old = old[len("ALERT-WIDE "):]
            at = text.index("- alert: CommitwatchLikelyLeak")
            end = text.index("- alert:", at + 1)
            mutated = text[:at] + text[at:end].replace(old, new) + text[end:]
        else:
            mutated = text.replace(old, new, 1)
        c.check(f"mutant '{what}': its text is in the rules", mutated != text, repr(old))
        with open(os.path.join(tmp, os.path.basename(RULES)), "w") as f:
            f.write(mutated)
        rc, out = run("test", "rules", os.path.basename(RULES_TEST), cwd=tmp)
        c.check(f"mutant '{what}': the unit tests catch it", rc != 0 and "FAILED" in out,
                f"exit {rc}:\n{out[-1500:]}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
