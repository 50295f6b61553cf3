"""test_config_reload.py - a reload of a bad configuration changes nothing
(docs/DESIGN.md, "Reload"; issue 32 item 6).

A replayed trace is served after its end; the service then gets:

1. SIGHUP with its alert rules file holding a good new rule and a bad one:
   the reload is refused as a whole (the good new rule is not loaded
   either), and the log and /api/health ("config") name the file and the
   bad rule's line;
2. POST /api/reload with the configuration file pointing at another rules
   file and holding a line that is not a setting: 422 naming the
   configuration file and its line, in the reply and in /api/health; the
   rules in force stay those of the start;
3. POST /api/reload with a stack-tag rules file that is not well-formed
   XML: 422 naming it and its line; the stack tags in force stay;
4. POST /api/reload of the repaired configuration: 200, the new rules
   file's rules are in force and the error is cleared.

At the start, by contrast, the same bad rules file loads its good rules,
and /api/health names the bad one.

The rules in force are read from /api/alert-rules (the engine's, as
stored) and the tag rules from /api/tags, before and after each refusal.
"""

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(__file__))
from alerttrace import MiB, S, Trace  # noqa: E402
from cwservice import Checks, Service  # noqa: E402
from cwtest import wait_until  # noqa: E402

t = Checks()
TOKEN = "config-reload-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

tr = Trace()
tr.start(0, 501, "big.exe")
for k in range(1, 60):
    tr.commit(k * S, 501, MiB)

RULES_START = """[rule first]
process = big.exe
metric = outstanding
warn = 100MiB
"""
# A good new rule, then a bad one (line 9: not a size).
RULES_BAD = RULES_START + """
[rule second]
process = big.exe
metric = outstanding
warn = 10MiB

[rule third]
warn = lots
metric = outstanding
"""
BAD_RULE_LINE = RULES_BAD.splitlines().index("warn = lots") + 1
RULES_OTHER = """[rule other]
process = big.exe
metric = outstanding
warn = 20MiB
"""
TAGS = """<Tag Name="">
  <Tag Name="Big"><Entrypoint Module="app.exe" Method="Work"/></Tag>
</Tag>
"""

folder = os.path.join(os.environ.get("CW_BUILD", "."), "e2e-http", "config-reload-files")
os.makedirs(folder, exist_ok=True)
trace = tr.write(os.path.join(folder, "reload.jsonl"))
rules = os.path.join(folder, "start.rules")
other = os.path.join(folder, "other.rules")
tags = os.path.join(folder, "test.stacktags")
for path, text in ((rules, RULES_START), (other, RULES_OTHER), (tags, TAGS)):
    with open(path, "w") as f:
        f.write(text)


def config(rules_path, extra=""):
    return (f"alert_rules = {rules_path}\nalert_default_rules = no\nalert_log = no\n"
            f"token = {TOKEN}\nstacktags = {tags}\n{extra}")


with Service(trace, name="config-reload", config=config(rules)) as svc:
    conf = os.path.join(svc.dir, "commitwatch.conf")

    def health_config():
        status, h = svc.get("/api/health")
        return h.get("config") if status == 200 else None

    def in_force():
        _, r = svc.get("/api/alert-rules")
        return sorted((x["name"], x["hash"]) for x in r["rules"])

    def tags_in_force():
        _, r = svc.get("/api/tags")
        return r

    c0 = health_config()
    t.check("health has a config block, ok at start", c0 is not None and c0["ok"] is True
            and c0["error"] is None and c0["loaded_by"] == "start", c0)
    rules0 = in_force()
    tags0 = tags_in_force()
    t.eq("rules in force at start", [n for n, _ in rules0], ["first"])

    # 1. SIGHUP, a bad rule beside a good new one.
    with open(rules, "w") as f:
        f.write(RULES_BAD)
    svc.proc.send_signal(signal.SIGHUP)
    c1 = wait_until(lambda: (c := health_config()) and c["loaded_by"] == "reload" and c,
                    30, "SIGHUP: the reload's outcome in /api/health")
    t.eq("SIGHUP, bad rule: refused", c1["ok"], False)
    t.eq("SIGHUP, bad rule: the file", c1["file"], rules)
    t.eq("SIGHUP, bad rule: the line", c1["line"], BAD_RULE_LINE)
    t.check("SIGHUP, bad rule: the error names file:line",
            c1["error"] and c1["error"].startswith(f"{rules}:{BAD_RULE_LINE}:"), c1)
    log = svc.logtext()
    t.check("SIGHUP, bad rule: the log names file:line and says nothing changed",
            f"reload: {rules}:{BAD_RULE_LINE}: rule third:" in log
            and "keeping the running configuration and rules (nothing changed)" in log,
            log[-2000:])
    t.eq("SIGHUP, bad rule: the rules in force are unchanged (the good new one too)",
         in_force(), rules0)
    _, metrics = svc.get("/metrics")
    t.check("SIGHUP, bad rule: /metrics says the last reload failed",
            "\ncommitwatch_config_last_reload_successful 0\n" in metrics, metrics[:600])

    # 2. POST /api/reload, a configuration line that is not a setting (and
    # a change of alert_rules that must not apply).
    bad_conf = config(other, "this is not a setting\n")
    bad_line = bad_conf.splitlines().index("this is not a setting") + 1
    with open(conf, "w") as f:
        f.write(bad_conf)
    status, body = svc.get("/api/reload", method="POST", headers=AUTH)
    t.eq("POST, bad config line: 422", status, 422)
    t.check("POST, bad config line: the reply names file:line and keeps the configuration",
            isinstance(body, dict) and f"{conf}:{bad_line}:" in body.get("error", "")
            and "kept" in body.get("error", ""), body)
    t.eq("POST, bad config line: the reply's config block names the file",
         ((body if isinstance(body, dict) else {}).get("config") or {}).get("file"), conf)
    c2 = health_config()
    t.eq("POST, bad config line: health names the file and line",
         (c2["ok"], c2["file"], c2["line"]), (False, conf, bad_line))
    t.check("POST, bad config line: a newer outcome than SIGHUP's", c2["at_ns"] > c1["at_ns"],
            (c1, c2))
    t.eq("POST, bad config line: the rules in force are unchanged", in_force(), rules0)

    # 3. A stack-tag rules file that is not well-formed XML.
    with open(conf, "w") as f:
        f.write(config(other))
    with open(tags, "w") as f:
        f.write(TAGS.replace("</Tag>\n</Tag>", "</Tag>\n<Tag Name=\"Broken\">\n</Tag>"))
    status, body = svc.get("/api/reload", method="POST", headers=AUTH)
    t.eq("POST, bad stack tags: 422", status, 422)
    c3 = health_config()
    t.eq("POST, bad stack tags: health names the file", (c3["ok"], c3["file"]), (False, tags))
    t.check("POST, bad stack tags: and a line", isinstance(c3["line"], int) and c3["line"] > 0,
            c3)
    t.eq("POST, bad stack tags: the rules in force are unchanged", in_force(), rules0)
    t.eq("POST, bad stack tags: the stack tags in force are unchanged", tags_in_force(), tags0)

    # 4. Repaired: applies and clears the error.
    with open(tags, "w") as f:
        f.write(TAGS)
    status, body = svc.get("/api/reload", method="POST", headers=AUTH)
    t.eq("POST, good config: 200 reloaded", (status, body.get("status")), (200, "reloaded"))
    c4 = health_config()
    t.eq("POST, good config: the error is cleared", (c4["ok"], c4["error"], c4["file"]),
         (True, None, None))
    _, metrics = svc.get("/metrics")
    t.check("POST, good config: /metrics says the last reload succeeded",
            "\ncommitwatch_config_last_reload_successful 1\n" in metrics, metrics[:600])
    now = wait_until(lambda: (r := in_force()) != rules0 and r, 30,
                     "the new rules in /api/alert-rules")
    t.eq("POST, good config: the new rules file is in force", [n for n, _ in now], ["other"])

# At the start, by contrast, a bad rule is warned about and the good ones
# load; /api/health names the bad one all the same.
start_bad = os.path.join(folder, "start-bad.rules")
with open(start_bad, "w") as f:
    f.write(RULES_BAD)
with Service(trace, name="config-reload-start", config=config(start_bad)) as svc:
    _, h = svc.get("/api/health")
    t.eq("start, bad rule: running, health names the file and line",
         {k: h["config"][k] for k in ("ok", "file", "line", "loaded_by")},
         {"ok": False, "file": start_bad, "line": BAD_RULE_LINE, "loaded_by": "start"})
    _, r = svc.get("/api/alert-rules")
    t.eq("start, bad rule: the good rules are in force", sorted(x["name"] for x in r["rules"]),
         ["first", "second"])

t.done()
