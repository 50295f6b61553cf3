"""test_alerts_api.py - the alert endpoints of the REST API and /metrics
against the real binary (docs/ALERTS.md, "API and metrics").

The service replays the MemoryTestApp fixture with a token; then
tests/alertfill (cw_alert_fill, the store's own alertdb.h functions, as
the alert engine writes them) stores two evaluations of alert state
beside the running service: rules in force, four series (firing critical,
firing warning on the machine, pending with a process name that needs
escaping, and a resolved one), their transitions and a silence; and
notification attempts are inserted into the notifications table. Every
endpoint is checked against what was written: listings and their filters
and order, one series with its transitions, leak-score components and
forecast, the transitions of all series, the rules with their counts, a
backtest of a rule over the stored history (what the engine's evaluation
says of the replayed process), the silence round trip (create, list,
expire) with every refusal (401 without the token, 400 bad JSON and
fields, 413 big body, 404 unknown ids and rules, 405 other methods),
reload, the OpenAPI paths, and the /metrics families with their escaping.

Then the real engine: a rule file whose rule fires on the replayed
process; the API serves the series and transitions the engine stored, a
backtest of the rule over the same history gives the same transitions,
/metrics lists the firing series, and POST /api/reload puts a rule added
to the file in force."""

import json
import os
import re
import sqlite3
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import MTA, Checks, Service, require_fixture  # noqa: E402
from cwtest import require, wait_until  # noqa: E402
from alertdoc import (BIG_TEXT, SIL_START, CONFIG, DETAIL, E1, E2, FILL, LEAK_TEXT, NAME, RULES, S, T0,  # noqa: E402
                      W, WEIRD, fill, fill_doc, proc_id)

require_fixture()
require(FILL and os.path.exists(FILL), "cw_alert_fill (tests/alertfill) is not built: CW_ALERT_FILL")

t = Checks()
TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

def q(path, **params):
    return path + ("?" + urllib.parse.urlencode(params) if params else "")


def call(svc, path, method="GET", body=None, headers=None, raw=None):
    """(status, headers, parsed JSON or text) of a request with a body."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = dict(headers or {})
    if data is not None:
        h["Content-Type"] = "application/json"
    req = urllib.request.Request(svc.base + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            st, hd, b = r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        st, hd, b = e.code, dict(e.headers), e.read()
    if hd.get("Content-Type", "").startswith("application/json"):
        return st, hd, json.loads(b)
    return st, hd, b.decode("utf-8", "replace")


def err_says(what, got, status, *words):
    """A 4xx/5xx in the API's error shape whose message has every word."""
    st, _, body = got
    msg = body.get("error", "") if isinstance(body, dict) else str(body)
    t.check(f"{what}: {status} saying {', '.join(words)}",
            st == status and all(w in msg for w in words), (st, body))


with Service(MTA, name="alerts-api", args=["--token", TOKEN], config=CONFIG) as svc:
    PROC = proc_id(svc)
    FILL_DOC = fill_doc(PROC)
    ids = fill(svc, FILL_DOC)
    A, B, C, D = ids["series"][:4]
    t.eq("the second evaluation kept the first one's ids", ids["series"][4:], [A, D])
    SIL0 = ids["silences"][0]
    # Notification attempts, as the notifier records them (schema 004).
    db = sqlite3.connect(svc.db, timeout=10)
    db.executemany("INSERT INTO notifications(ts_ns, channel, series, transition, attempt, result,"
                   " detail) VALUES (?, ?, ?, NULL, ?, ?, NULL)",
                   [(E2, "webhook", A, 1, "error"), (E2, "webhook", A, 2, "ok"),
                    (E2, "webhook", B, 1, "ok"), (E2, "exec", A, 1, "dropped")])
    db.commit()
    db.close()

    # ---- GET /api/alerts ---------------------------------------------------------
    st, a = svc.get("/api/alerts")
    t.eq("alerts: 200", st, 200)
    t.eq("alerts: active by default, firing first, then severity", [x["id"] for x in a["alerts"]], [A, B, C])
    t.eq("alerts: total", a["total"], 3)
    t.eq("alerts: evaluated_ns", a["evaluated_ns"], E2)
    t.eq("alerts: evaluations", a["evaluations"], 2)
    x = a["alerts"][0]
    want = {"id": A, "rule": "leak", "key": f"instance:{PROC}|Heap", "process": NAME, "proc": PROC,
            "pid": W["process"]["pid"], "tag": "Heap", "state": "firing", "severity": "critical",
            "active_since_ns": E1, "firing_since_ns": E2, "false_since_ns": None, "updated_ns": E2,
            "value": 0.93, "threshold": 0.9, "leak_score": 0.93, "time_to_limit_s": 7200,
            "labels": DETAIL["labels"], "summary": DETAIL["summary"]}
    # (missing) for a key the answer lacks: false_since_ns None must be there.
    t.eq("alerts: the firing series' fields", {k: x.get(k, "(missing)") for k in want}, want)
    y = a["alerts"][1]
    t.eq("alerts: the machine's series", (y["rule"], y["process"], y["pid"], y["tag"], y["state"],
                                          y["severity"], y["leak_score"]),
         ("ttl", None, None, None, "firing", "warning", None))
    t.eq("alerts: an infinite time to limit is null", a["alerts"][2]["time_to_limit_s"], None)
    t.eq("alerts: the name is kept as is", a["alerts"][2]["process"], WEIRD)
    t.check("alerts: the list has no detail", "leak_score_components" not in x and "detail" not in x, x)

    for params, want_ids in [({"state": "all"}, [A, B, C, D]), ({"state": "pending"}, [C]),
                             ({"state": "firing"}, [A, B]), ({"state": "inactive"}, [D]),
                             ({"state": "active"}, [A, B, C]), ({"severity": "critical"}, [A]),
                             ({"severity": "warning", "state": "all"}, [B]),
                             ({"rule": "ttl"}, [B]), ({"rule": "leak"}, [A, C]),
                             ({"process": "Memory*"}, [A]), ({"process": "db*"}, [C]),
                             ({"process": "*.exe", "state": "all"}, [A, D]), ({"tag": "Heap"}, [A]),
                             ({"tag": "Heap", "state": "all"}, [A, D]), ({"limit": "1"}, [A]),
                             ({"rule": "nope"}, [])]:
        st, a = svc.get(q("/api/alerts", **params))
        t.eq(f"alerts {params}", (st, [x["id"] for x in a["alerts"]]), (200, want_ids))
    err_says("alerts: a bad state", call(svc, q("/api/alerts", state="burning")), 400, "state", "burning")
    err_says("alerts: a bad severity", call(svc, q("/api/alerts", severity="high")), 400, "severity")
    err_says("alerts: a bad limit", call(svc, q("/api/alerts", limit="0")), 400, "limit")
    err_says("alerts: an unknown parameter", call(svc, q("/api/alerts", color="red")), 400, "color")

    # ---- GET /api/alerts/{id} -----------------------------------------------------
    st, one = svc.get(f"/api/alerts/{A}")
    t.eq("alert: 200", st, 200)
    t.eq("alert: the series", (one["alert"]["id"], one["alert"]["state"]), (A, "firing"))
    t.eq("alert: leak-score components", one["alert"].get("leak_score_components"), DETAIL["leak"])
    t.eq("alert: forecast", one["alert"].get("forecast"), DETAIL["forecast"])
    t.eq("alert: values", one["alert"].get("values"), DETAIL["values"])
    tr = one["transitions"]
    t.eq("alert: its transitions, newest first",
         [(x["ts_ns"], x["from"], x["to"], x["severity"], x["reason"]) for x in tr],
         [(E2, "pending", "firing", "critical", "for elapsed"), (E1, "inactive", "pending", "none", "condition")])
    t.eq("alert: a transition's figures", (tr[0]["value"], tr[0]["threshold"], tr[0]["leak_score"],
                                          tr[0]["time_to_limit_s"], tr[0]["silenced"], tr[0]["series"]),
         (0.93, 0.9, 0.93, 7200, False, A))
    st, one = svc.get(f"/api/alerts/{D}")
    t.eq("alert: the resolved series and its reason",
         (one["alert"]["state"], [x["reason"] for x in one["transitions"]]), ("inactive", ["process exited"]))
    err_says("alert: unknown id", call(svc, "/api/alerts/999999"), 404, "999999")
    err_says("alert: a bad id", call(svc, "/api/alerts/abc"), 400, "id")

    # ---- GET /api/alert-transitions -------------------------------------------------
    st, h = svc.get("/api/alert-transitions")
    t.eq("transitions: 200 and all five", (st, len(h["transitions"])), (200, 5))
    t.check("transitions: newest first",
            [x["ts_ns"] for x in h["transitions"]] == sorted([x["ts_ns"] for x in h["transitions"]], reverse=True),
            h["transitions"])
    by = {(x["series"], x["reason"]): x for x in h["transitions"]}
    x = by.get((D, "process exited"), {})
    t.eq("transitions: with their series' rule, process, pid, tag",
         (x.get("rule"), x.get("process"), x.get("pid"), x.get("tag")), ("leak", "old.exe", 33, "Heap"))
    t.eq("transitions: silenced kept", by.get((B, "condition"), {}).get("silenced"), True)
    st, h = svc.get(q("/api/alert-transitions", **{"from": str(E1), "to": str(E2)}))
    t.eq("transitions: a window [from, to)", sorted(x["series"] for x in h["transitions"]), sorted([A, B]))
    st, h = svc.get(q("/api/alert-transitions", limit="2"))
    t.eq("transitions: a limit", len(h["transitions"]), 2)
    err_says("transitions: from after to",
             call(svc, q("/api/alert-transitions", **{"from": str(E2), "to": str(E1)})), 400, "from")

    # ---- GET /api/alert-rules ---------------------------------------------------------
    st, r = svc.get("/api/alert-rules")
    t.eq("rules: 200, the three in force", (st, [x["name"] for x in r["rules"]]), (200, ["leak", "ttl", "big"]))
    lk = r["rules"][0]
    t.eq("rules: file, line, hash, text",
         (lk["file"], lk["line"], lk["hash"], lk["text"]), (RULES[0]["file"], 1, "aa", LEAK_TEXT))
    t.eq("rules: counts of active series", [(x["active"], x["pending"], x["firing"]) for x in r["rules"]],
         [(2, 1, 1), (1, 0, 1), (0, 0, 0)])
    t.eq("rules: fields", lk["fields"], {"metric": "leak_score", "process": "*.exe, !svchost.exe",
                                          "warn": "0.7", "crit": "0.9", "for": "5m",
                                          "summary": "{process} leaks"})
    t.eq("rules: evaluation progress", (r["evaluated_ns"], r["evaluations"]), (E2, 2))

    # ---- backtest ----------------------------------------------------------------------
    bt = q("/api/alert-rules/big/backtest", **{"from": str(T0), "to": str(T0 + 60 * S), "interval": "10s"})
    st, _, b = call(svc, bt)
    t.eq("backtest: 200", st, 200)
    if st == 200:
        t.eq("backtest: rule, window, interval, evaluations",
             (b["rule"], b["window"], b["interval_ns"], b["evaluations"] > 0),
             ("big", {"from_ns": T0, "to_ns": T0 + 60 * S}, 10 * S, True))
        fired = [s for s in b["series"] if s["process"] == NAME
                 and any(x["to"] == "firing" for x in s["transitions"])]
        t.check(f"backtest: {NAME} (over 1 MiB outstanding) fires", fired, b)
        t.check("backtest: transitions inside the window",
                all(T0 <= x["ts_ns"] < T0 + 60 * S for s in b["series"] for x in s["transitions"]), b)
    else:
        print(b)
    err_says("backtest: unknown rule", call(svc, "/api/alert-rules/nope/backtest"), 404, "nope")
    err_says("backtest: over 7 days",
             call(svc, q("/api/alert-rules/big/backtest", **{"from": str(T0), "to": str(T0 + 8 * 86400 * S)})),
             400, "7 days")
    err_says("backtest: interval under 10 s", call(svc, q("/api/alert-rules/big/backtest", interval="1s")),
             400, "interval")
    err_says("backtest: too many evaluations",
             call(svc, q("/api/alert-rules/big/backtest", interval="10s",
                         **{"from": str(T0), "to": str(T0 + 6 * 86400 * S)})), 400, "evaluations")
    err_says("backtest: unknown parameter", call(svc, q("/api/alert-rules/big/backtest", step="1m")),
             400, "step")

    # ---- silences -----------------------------------------------------------------------
    st, s = svc.get("/api/silences")
    t.eq("silences: the stored one", (st, [x["id"] for x in s["silences"]]), (200, [SIL0]))
    x = s["silences"][0]
    t.eq("silences: Alertmanager's fields",
         (x["matchers"], x["startsAt"], x["createdBy"], x["comment"], x["status"]["state"]),
         (FILL_DOC["silences"][0]["matchers"],
          time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(SIL_START // S)), "ops", "known", "active"))
    good = {"matchers": [{"name": "alertname", "value": "leak"},
                         {"name": "process", "value": "Memory.*", "isRegex": True, "isEqual": True}],
            "endsAt": "+2h", "createdBy": "test", "comment": "maintenance"}
    err_says("silence POST without the token", call(svc, "/api/silences", "POST", good), 401, "Authorization")
    err_says("silence POST with a wrong token",
             call(svc, "/api/silences", "POST", good, {"Authorization": "Bearer nope"}), 401, "Bearer")
    err_says("silence POST, bad JSON", call(svc, "/api/silences", "POST", raw=b"{matchers:", headers=AUTH),
             400, "JSON")
    err_says("silence POST, no body", call(svc, "/api/silences", "POST", headers=AUTH), 400, "body")
    for what, patch, word in [("no matchers", {"matchers": []}, "matchers"),
                              ("a matcher without a name", {"matchers": [{"value": "x"}]}, "matchers[0].name"),
                              ("isRegex not a bool", {"matchers": [{"name": "a", "value": "b", "isRegex": 1}]}, "isRegex"),
                              ("no endsAt", {"endsAt": None}, "endsAt"),
                              ("a bad endsAt", {"endsAt": "tomorrow"}, "endsAt"),
                              ("ends before it starts", {"startsAt": "+3h", "endsAt": "+2h"}, "after startsAt"),
                              ("ends in the past", {"startsAt": "-3h", "endsAt": "-2h"}, "past"),
                              ("no createdBy", {"createdBy": ""}, "createdBy"),
                              ("no comment", {"comment": None}, "comment"),
                              ("an unknown field", {"id": "x"}, "unknown field")]:
        body = {k: v for k, v in {**good, **patch}.items() if v is not None}
        err_says(f"silence POST, {what}", call(svc, "/api/silences", "POST", body, AUTH), 400, word)
    big = dict(good, comment="x" * 70000)
    err_says("silence POST, a body over 64 KiB", call(svc, "/api/silences", "POST", big, AUTH), 413, "65536")
    st, _, made = call(svc, "/api/silences", "POST", good, AUTH)
    t.check("silence POST: 200 with its id", st == 200 and isinstance(made.get("id"), int) and made["id"] > SIL0,
            (st, made))
    SIL1 = made.get("id")
    st, s = svc.get("/api/silences")
    got = {x["id"]: x for x in s["silences"]}
    t.eq("silences: newest first", [x["id"] for x in s["silences"]], [SIL1, SIL0])
    x = got.get(SIL1, {})
    t.eq("silences: matchers stored with their defaults", x.get("matchers"),
         [{"name": "alertname", "value": "leak", "isRegex": False, "isEqual": True},
          {"name": "process", "value": "Memory.*", "isRegex": True, "isEqual": True}])
    t.eq("silences: two hours from now, active", (x.get("ends_ns", 0) - x.get("starts_ns", 0),
                                                  x.get("status", {}).get("state")), (7200 * S, "active"))
    t.check("silences: in wall-clock time beside a replay (as the engine applies them)",
            abs(x.get("starts_ns", 0) - time.time_ns()) < 60 * S, (x.get("starts_ns"), time.time_ns()))
    st, s = svc.get(q("/api/silences", state="expired"))
    t.eq("silences: none expired yet", s["silences"], [])
    err_says("silence DELETE without the token", call(svc, f"/api/silences/{SIL1}", "DELETE"), 401, "Authorization")
    st, _, dl = call(svc, f"/api/silences/{SIL1}", "DELETE", headers=AUTH)
    t.eq("silence DELETE: 200", (st, dl.get("id")), (200, SIL1))
    st, s = svc.get(q("/api/silences", state="expired"))
    t.eq("silences: expired after DELETE", [x["id"] for x in s["silences"]], [SIL1])
    t.check("silences: deleted_ns set", s["silences"] and s["silences"][0]["deleted_ns"] == dl.get("deleted_ns"), s)
    st, s = svc.get(q("/api/silences", state="active"))
    t.eq("silences: the other still active", [x["id"] for x in s["silences"]], [SIL0])
    st, _, _ = call(svc, f"/api/silences/{SIL1}", "DELETE", headers=AUTH)
    t.eq("silence DELETE twice: 200", st, 200)
    err_says("silence DELETE, unknown id", call(svc, "/api/silences/999999", "DELETE", headers=AUTH), 404, "999999")
    err_says("silences: a bad state", call(svc, q("/api/silences", state="gone")), 400, "state")
    st, hd, _ = call(svc, "/api/silences", "PUT", good, AUTH)
    t.eq("silences PUT: 405 with Allow", (st, hd.get("Allow")), (405, "GET, HEAD, POST"))
    st, hd, _ = call(svc, "/api/alerts", "POST", good, AUTH)
    t.eq("alerts POST: 405 with Allow", (st, hd.get("Allow")), (405, "GET, HEAD"))
    err_says("GET with a body", call(svc, "/api/alerts", "GET", {"a": 1}), 413, "body")

    # ---- OpenAPI ------------------------------------------------------------------------
    st, oa = svc.get("/api/openapi.json")
    for p, methods in [("/api/alerts", ["get"]), ("/api/alerts/{id}", ["get"]),
                       ("/api/alert-transitions", ["get"]), ("/api/alert-rules", ["get"]),
                       ("/api/alert-rules/{name}/backtest", ["get"]), ("/api/silences", ["get", "post"]),
                       ("/api/silences/{id}", ["delete"]), ("/api/reload", ["post"])]:
        t.check(f"openapi documents {p} {methods}", all(m in oa["paths"].get(p, {}) for m in methods),
                list(oa["paths"].get(p, {})))
    t.check("openapi: the older paths kept", "/api/processes" in oa["paths"] and "/metrics" in oa["paths"], "")
    t.check("openapi: the alert schemas", all(k in oa["components"]["schemas"] for k in ("Alert", "Silence")), "")

    # ---- /metrics -----------------------------------------------------------------------
    st, m = svc.get("/metrics")
    t.eq("metrics: 200", st, 200)
    lines = m.splitlines()
    al = sorted(x for x in lines if x.startswith("commitwatch_alerts{"))
    pid = W["process"]["pid"]
    esc = 'db\\"weird\\nname\\\\x'
    t.eq("metrics: commitwatch_alerts, pending and firing only", al, sorted([
        f'commitwatch_alerts{{alertname="leak",process="{NAME}",pid="{pid}",tag="Heap",alertstate="firing",severity="critical"}} 1',
        'commitwatch_alerts{alertname="ttl",process="",pid="",tag="",alertstate="firing",severity="warning"} 1',
        f'commitwatch_alerts{{alertname="leak",process="{esc}",pid="77",tag="Other",alertstate="pending",severity="none"}} 1']))
    t.eq("metrics: leak score gauges", sorted(x for x in lines if x.startswith("commitwatch_alert_leak_score{")),
         sorted([f'commitwatch_alert_leak_score{{alertname="leak",process="{NAME}",pid="{pid}",tag="Heap"}} 0.93',
                 f'commitwatch_alert_leak_score{{alertname="leak",process="{esc}",pid="77",tag="Other"}} 0.75']))
    t.eq("metrics: time to limit gauges (not the infinite one)",
         sorted(x for x in lines if x.startswith("commitwatch_alert_time_to_limit_seconds{")),
         sorted([f'commitwatch_alert_time_to_limit_seconds{{alertname="leak",process="{NAME}",pid="{pid}",tag="Heap"}} 7200',
                 'commitwatch_alert_time_to_limit_seconds{alertname="ttl",process="",pid="",tag=""} 100000']))
    t.eq("metrics: notifications by channel and result",
         sorted(x for x in lines if x.startswith("commitwatch_alert_notifications_total{")),
         sorted(['commitwatch_alert_notifications_total{channel="webhook",result="ok"} 2',
                 'commitwatch_alert_notifications_total{channel="webhook",result="error"} 1',
                 'commitwatch_alert_notifications_total{channel="exec",result="dropped"} 1']))
    t.check("metrics: evaluations counter", "commitwatch_alert_evaluations_total 2" in lines, "")
    for fam, typ in [("commitwatch_alerts", "gauge"), ("commitwatch_alert_leak_score", "gauge"),
                     ("commitwatch_alert_time_to_limit_seconds", "gauge"),
                     ("commitwatch_alert_notifications_total", "counter"),
                     ("commitwatch_alert_evaluations_total", "counter")]:
        t.check(f"metrics: HELP and TYPE of {fam}",
                any(x.startswith(f"# HELP {fam} ") for x in lines) and f"# TYPE {fam} {typ}" in lines, "")
    t.check("metrics: every sample line parses",
            all(re.match(r'^[a-z_]+(\{([a-z_]+="([^"\\]|\\.)*",?)*\})? -?[0-9.e+]+$', x)
                for x in lines if x and not x.startswith("#")), "")

    # ---- reload (last: a wired reload rewrites the rules in force) ----------------------
    err_says("reload without the token", call(svc, "/api/reload", "POST"), 401, "Authorization")
    st, _, rl = call(svc, "/api/reload", "POST", headers=AUTH)
    t.eq("reload: 200 reloaded (the service's reload hook)", (st, rl.get("status")), (200, "reloaded"))
    st, hd, _ = call(svc, "/api/reload", "GET")
    t.eq("reload GET: 405", (st, hd.get("Allow")), (405, "POST"))

# The real engine: a rule file whose rule fires on the replayed process.
# What the API serves is what the engine stored, and a backtest of the
# rule over the same history gives the same transitions.
rules_dir = os.path.join(os.environ.get("CW_BUILD", "."), "e2e-http")
os.makedirs(rules_dir, exist_ok=True)
rules_path = os.path.join(rules_dir, "alerts-api-engine.rules")
with open(rules_path, "w") as f:
    f.write(BIG_TEXT)
with Service(MTA, name="alerts-api-engine", args=["--token", TOKEN],
             config=f"alert_default_rules = no\nalert_rules = {rules_path}\nalert_interval = 10s\n") as svc:
    try:
        found = wait_until(lambda: svc.get(q("/api/alerts", state="all", rule="big"))[1]["alerts"], 30,
                           "the engine stores the rule's series")
    except Exception as e:  # noqa: BLE001
        found = []
        t.check("engine: the rule's series stored", False, e)
    st, r = svc.get("/api/alert-rules")
    t.eq("engine: the rule in force, as the engine recorded it",
         [(x["name"], x["file"], x["line"], x["fields"].get("metric"), x["fields"].get("warn")) for x in r["rules"]],
         [("big", rules_path, 1, "outstanding", "1MiB")])
    t.check("engine: evaluations counted", r["evaluations"] > 0 and r["evaluated_ns"] is not None, r)
    mine = [a for a in found if a["process"] == NAME]
    t.eq("engine: one series of the process (grouped by name, tags summed)",
         [(a["key"], a["tag"], a["pid"]) for a in mine], [(f"name:{NAME}|*", None, None)])
    if mine:
        st, one = svc.get(f"/api/alerts/{mine[0]['id']}")
        stored = [(x["ts_ns"], x["from"], x["to"], x["severity"], x["reason"]) for x in reversed(one["transitions"])]
        t.check("engine: the series fired (warning: over 1 MiB)",
                any(x[2] == "firing" and x[3] == "warning" for x in stored), stored)
        t.eq("engine: its state is its last transition's", one["alert"]["state"], stored[-1][2] if stored else None)
        st, h = svc.get("/api/health")
        end = -(-h["data_end_ns"] // (10 * S)) * (10 * S) + 10 * S
        st, bt = svc.get(q("/api/alert-rules/big/backtest", **{"from": str(T0), "to": str(end), "interval": "10s"}))
        bs = [x for x in bt.get("series", []) if x["key"] == mine[0]["key"]]
        got = [(x["ts_ns"], x["from"], x["to"], x["severity"], x["reason"]) for x in (bs[0]["transitions"] if bs else [])]
        t.eq("engine: a backtest over the same history gives the stored transitions", got, stored)
        st, m = svc.get("/metrics")
        want = (f'commitwatch_alerts{{alertname="big",process="{NAME}",pid="",tag="",alertstate="firing",'
                f'severity="warning"}} 1')
        t.eq("engine: commitwatch_alerts has the series while it fires",
             [x for x in m.splitlines() if x.startswith("commitwatch_alerts{")],
             [want] if one["alert"]["state"] == "firing" else [])
        ev = re.search(r"^commitwatch_alert_evaluations_total (\d+)$", m, re.M)
        t.check("engine: commitwatch_alert_evaluations_total counts its saves", ev and int(ev.group(1)) >= 1,
                ev and ev.group(0))
    # POST /api/reload reaches the engine: a rule added to the file is in force.
    with open(rules_path, "a") as f:
        f.write("\n" + BIG_TEXT.replace("[rule big]", "[rule big2]").replace("1MiB", "2MiB"))
    st, _, rl = call(svc, "/api/reload", "POST", headers=AUTH)
    t.eq("engine: reload 200", (st, rl.get("status")), (200, "reloaded"))
    try:
        wait_until(lambda: [x["name"] for x in svc.get("/api/alert-rules")[1]["rules"]] == ["big", "big2"], 15,
                   "the engine records the reloaded rules")
        t.check("engine: after POST /api/reload the added rule is in force", True)
    except Exception as e:  # noqa: BLE001 - the wait's message is the detail
        t.check("engine: after POST /api/reload the added rule is in force", False, e)

# Without a token nothing changes: POST is refused as before.
with Service(MTA, name="alerts-api-ro", config=CONFIG) as svc:
    st, _, b = call(svc, "/api/silences", "POST", {"matchers": []})
    t.check("no token: POST /api/silences is 405 read-only", st == 405 and "read-only" in b.get("error", ""), b)
    st, s = svc.get("/api/alerts")
    t.eq("no token: GET /api/alerts of an empty table", (st, s["alerts"], s["evaluated_ns"]), (200, [], None))
    st, s = svc.get("/api/silences")
    t.eq("no token: GET /api/silences, none", (st, s["silences"]), (200, []))
    st, r = svc.get("/api/alert-rules")
    t.eq("no token: GET /api/alert-rules, none stored", (st, r["rules"]), (200, []))
    st, m = svc.get("/metrics")
    t.check("no token: /metrics has the alert families, empty",
            "# TYPE commitwatch_alerts gauge" in m and "commitwatch_alerts{" not in m, "")

t.done()
