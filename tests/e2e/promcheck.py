"""promcheck.py - what the tests of contrib/ (the Prometheus rules, the
Grafana dashboard, the fleet test) share: Debian's promtool, the metric
names commitwatch's real /metrics serves, and the metric names a PromQL
expression reads.

    promtool = require_promtool()
    served = served_metric_names()          # starts commitwatch on the fixture
    names = expr_metric_names('sum(rate(x_total{a="b"}[5m])) by (a)')  # {"x_total"}
    errors = check_exprs_parse({"name": "expr", ...})  # promtool check rules
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request

from cwservice import MTA, SOURCE, Service, require_fixture
from cwtest import require

RULES = os.path.join(SOURCE, "contrib", "prometheus", "commitwatch.rules.yml")
RULES_TEST = os.path.join(SOURCE, "contrib", "prometheus", "commitwatch.rules.test.yml")
DASHBOARD = os.path.join(SOURCE, "contrib", "grafana", "commitwatch.json")

# PromQL words that are not metric names.
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
            "group_right", "offset", "bool", "inf", "nan", "atan2"}


def require_promtool():
    """promtool's path: fails in CI (CI installs it: scripts/deps.sh
    --test), skips with the reason elsewhere (cwtest.require)."""
    p = shutil.which("promtool")
    require(p, "promtool (apt-get install prometheus; scripts/deps.sh --test)")
    return p


def served_metric_names(trace=MTA, name="promcheck", args=()):
    """The metric family names commitwatch's /metrics serves (the # TYPE
    lines and the samples) over a replay of trace (default: the fixture)."""
    require_fixture()
    with Service(trace, name=name, args=args) as svc:
        with urllib.request.urlopen(svc.base + "/metrics", timeout=30) as r:
            text = r.read().decode()
    names = set()
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) ", line) or re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", line)
        if m:
            names.add(m.group(1))
    return names


def expr_metric_names(expr):
    """The metric names a PromQL expression reads: the identifiers left
    once strings, label matchers, ranges, grouping clauses and function
    calls are taken out (Grafana's $variables too)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    e = re.sub(r"\$\{[^}]*\}|\$\w+", "x", e)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word = m.group(0)
        after = e[m.end():].lstrip()
        if after.startswith("(") or word.lower() in KEYWORDS:
            continue
        # A number's exponent or a duration (5m, 1e3) starts with a digit: not matched here.
        prev = e[m.start() - 1] if m.start() else " "
        if prev.isdigit() or prev == ".":
            continue
        names.add(word)
    return names


def check_exprs_parse(promtool, exprs):
    """Parses each expression (a dict name -> PromQL) with promtool, as
    recording rules of a temporary rules file (this promtool has no
    offline `query` parser). Returns promtool's output, "" when all
    parse."""
    d = tempfile.mkdtemp(prefix="cw_promcheck_")
    try:
        path = os.path.join(d, "exprs.rules.yml")
        with open(path, "w") as f:
            f.write("groups:\n  - name: exprs\n    rules:\n")
            for i, (name, expr) in enumerate(exprs.items()):
                # JSON strings are YAML strings: any quote or backslash is safe.
                f.write(f"      - record: expr_{i}\n        expr: {json.dumps(expr)}\n"
                        f"        labels: {{from: {json.dumps(name)}}}\n")
        p = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True,
                           timeout=60)
        return "" if p.returncode == 0 else (p.stdout + p.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def rules_exprs(path=RULES):
    """{rule name: expression} of a rules file: its `expr:` lines as
    written, one line or a `|` block (no YAML library needed); a name
    used twice gets "#2"."""
    out = {}
    name = None
    lines = open(path).read().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\s*- (record|alert): (\S+)", line)
        if m:
            name = m.group(2)
        m = re.match(r"(\s*)expr: (.*)", line)
        if m:
            if m.group(2).strip() == "|":
                block = []
                i += 1
                while i < len(lines) and (not lines[i].strip() or
                                          len(lines[i]) - len(lines[i].lstrip()) > len(m.group(1))):
                    block.append(lines[i].strip())
                    i += 1
                expr = " ".join(block)
                i -= 1
            else:
                expr = m.group(2)
            key = name
            k = 2
            while key in out:
                key = f"{name}#{k}"
                k += 1
            out[key] = expr
        i += 1
    return out
