"""test_grafana_dashboard.py - the shipped Grafana dashboard
(contrib/grafana/commitwatch.json): a provisionable dashboard (uid, no
numeric id, a Prometheus datasource variable every panel uses) with the
`host` and `process` variables; every PromQL expression of its panels and
variables parses (promtool, Grafana's $variables replaced by sample
values) and reads only metrics commitwatch's real /metrics serves (the
service run on the fixture, its header given a commit_limit so that the
machine's commit and limit are served); the per-process panels link each series to
the process's page on its commitwatch. The checker is checked too: a
misspelt metric and a broken expression must be caught."""

import json
import os
import re

from cwservice import BUILD, MTA, Checks, require_fixture
from promcheck import (DASHBOARD, check_exprs_parse, expr_metric_names, require_promtool,
                       served_metric_names)

# Grafana's variables, replaced by values of their kind before parsing.
VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h", "${datasource}": "x",
        "$host": ".+", "$process": ".+"}
PROCESS_LINK = "http://${__field.labels.instance}/#/process/${__field.labels.id}"

promtool = require_promtool()
c = Checks()
dash = json.load(open(DASHBOARD))


def substitute(expr):
    for k in sorted(VARS, key=len, reverse=True):
        expr = expr.replace(k, VARS[k])
    return expr


# Provisionable: Grafana's file provider wants a uid and no numeric id.
c.check("the dashboard has a uid", bool(dash.get("uid")), dash.get("uid"))
c.check("the dashboard has no numeric id", dash.get("id") is None, dash.get("id"))
variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
c.check("variables datasource, host and process", {"datasource", "host", "process"} <= set(variables),
        sorted(variables))
c.check("the datasource variable is Prometheus's",
        variables.get("datasource", {}).get("query") == "prometheus", variables.get("datasource"))

exprs = {}
for v in variables.values():
    if v.get("type") != "query":
        continue
    q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", q)
    c.check(f"variable {v['name']}: a label_values() query", bool(m), q)
    if m:
        exprs[f"variable {v['name']}"] = m.group(1)
panels = dash.get("panels", [])
for p in panels:
    c.check(f"panel '{p['title']}': the datasource variable",
            p.get("datasource", {}).get("uid") == "${datasource}", p.get("datasource"))
    for t in p.get("targets", []):
        exprs[f"panel '{p['title']}' {t['refId']}"] = t["expr"]
c.check("the panels have expressions", len(exprs) >= 8, sorted(exprs))

# Every expression parses.
out = check_exprs_parse(promtool, {k: substitute(e) for k, e in exprs.items()})
c.check("every expression parses (promtool check rules)", out == "", out)

# Every metric is served by /metrics: the fixture with a commit limit in
# its header (a replay's machine commit and limit are the trace's).
require_fixture()
with open(MTA) as f:
    lines = f.read().splitlines(True)
header = json.loads(lines[0])
header["commit_limit"] = 64 << 30
limited = os.path.join(BUILD, "e2e-grafana-limited.jsonl")
with open(limited, "w") as f:
    f.write(json.dumps(header) + "\n" + "".join(lines[1:]))
served = served_metric_names(trace=limited, name="grafana_dashboard")
used_all = set()
for name, e in exprs.items():
    used = expr_metric_names(e)
    used_all |= used
    c.check(f"{name}: reads a metric", bool(used), e)
    c.check(f"{name}: every metric it reads is served by /metrics", used <= served,
            f"not served: {sorted(used - served)}")
for want in ("commitwatch_outstanding_bytes", "commitwatch_process_outstanding_bytes",
             "commitwatch_events_lost_total", "commitwatch_source_up",
             "commitwatch_alert_time_to_limit_seconds", "commitwatch_machine_commit_bytes",
             "commitwatch_machine_commit_limit_bytes"):
    c.check(f"the dashboard shows {want}", want in used_all, sorted(used_all))

# The host and process variables filter; each per-process panel links to
# the process's page on its commitwatch.
for p in panels:
    text = " ".join(t["expr"] for t in p.get("targets", []))
    c.check(f"panel '{p['title']}': filtered by $host", 'instance=~"$host"' in text, text)
    if "commitwatch_process_outstanding_bytes" in text:
        links = [l.get("url") for l in p["fieldConfig"]["defaults"].get("links", [])]
        c.check(f"panel '{p['title']}': links each process to its commitwatch page",
                PROCESS_LINK in links, links)
c.check("a panel filters by $process",
        any('process=~"$process"' in t["expr"] for p in panels for t in p.get("targets", [])), "")

# The checker catches what it is for.
c.check("self-check: a misspelt metric is caught",
        expr_metric_names('sum(rate(commitwatch_event_lost_total{instance=~"x"}[5m])) by (instance)')
        - served == {"commitwatch_event_lost_total"}, "")
c.check("self-check: a broken expression fails to parse",
        check_exprs_parse(promtool, {"broken": "sum(rate(commitwatch_outstanding_bytes[5m])"}) != "",
        "")
c.done()
