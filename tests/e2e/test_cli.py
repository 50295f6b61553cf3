#!/usr/bin/env python3
"""test_cli.py - the command line and the configuration of the real binary.

- `version` (and `--version`): the project's version and the sources built in;
- bad input for `analyze`, `run` and `record`: each a message on stderr
  naming the problem, nothing on stdout, exit 2 for a usage error (and
  nothing created), 1 for a failure at run time (address in use, missing
  web root, missing trace or configuration, bad configuration value);
- `run --exit-at-end`: serves while it ingests, then exits by itself;
- the configuration keys db, source, listen, token, web_root, stacktags,
  size_cap, retention_raw, retention_minute, retention_hour, each seen to
  take effect, and the command line winning over the configuration;
- SIGHUP while the HTTP server runs, during ingest and after the end of
  input: the reload is logged ("reload requested: reloading <path>"), the
  new rules re-tag the stored stacks, and the API answers throughout.

Figures are checked against refmodel.py (ARCHITECTURE.md's rules in Python)
or the fixture generator's figures; waits are on conditions with deadlines.
"""
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, BUILD, FIXTURES, MTA, MTA_WINDOWS, SOURCE, Checks, free_port, require_fixture  # noqa: E402
from cwtest import file_text, wait_until  # noqa: E402
import refmodel  # noqa: E402
import stacktags_ref  # noqa: E402

require_fixture()

t = Checks()
S = 1_000_000_000
TMP = os.path.join(BUILD, "e2e-cli")
shutil.rmtree(TMP, ignore_errors=True)
os.makedirs(TMP)
W = json.load(open(MTA_WINDOWS))
APP = W["process"]
WHOLE = W["windows"]["whole"]["expect"]
HEADER, EVENTS = refmodel.read_trace(MTA)
WPA = os.path.join(FIXTURES, "stacktags", "wpa_sample.stacktags")


def path(name):
    return os.path.join(TMP, name)


def cli(*args, timeout=120):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


def analyze_db(db, *extra):
    r = cli("analyze", "--db", db, "--json", *extra)
    t.eq(f"analyze --db {os.path.basename(db)} {' '.join(extra)}: exit 0 ({r.stderr.strip()})",
         r.returncode, 0)
    return json.loads(r.stdout) if r.returncode == 0 else {"processes": [], "window": {}}


def the_app(doc):
    ps = [p for p in doc["processes"] if (p["name"], p["pid"]) == (APP["name"], APP["pid"])]
    t.eq(f"one {APP['name']}", len(ps), 1)
    return ps[0] if ps else {}


def get(port, p, method="GET", headers=None):
    """(status, body bytes), or (None, error) when nothing answers."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{p}", method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, ConnectionError, OSError) as e:
        return None, e


def health(port):
    st, body = get(port, "/api/health")
    return json.loads(body) if st == 200 else None


class Run:
    """`commitwatch run ARGS` in the background, its output in a log file."""

    def __init__(self, name, *args):
        self.log = path(name + ".log")
        self.f = open(self.log, "w")
        self.p = subprocess.Popen([BIN, "run", *args], stdout=self.f, stderr=subprocess.STDOUT)

    def text(self):
        return file_text(self.log)

    def serving(self, port, done=True):
        """Waits until it answers on port (and, done, has stored everything)."""
        def ready():
            if self.p.poll() is not None:
                raise SystemExit(f"FAIL: commitwatch run exited with {self.p.returncode}:\n{self.text()}")
            h = health(port)
            return h if h and (h["ingest_done"] or not done) else None
        return wait_until(ready, 60, f"commitwatch run answers on port {port}" +
                          (" with its input stored" if done else ""))

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                t.check("the service exits within 30 s of SIGTERM", False, self.text()[-2000:])
        self.f.close()
        return self.p.returncode


def config(name, text):
    p = path(name)
    with open(p, "w") as f:
        f.write(text)
    return p


# ---- version --------------------------------------------------------------

with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
    VERSION = re.search(r"project\(commitwatch VERSION (\S+)", f.read()).group(1)
for arg in ("version", "--version"):
    r = cli(arg)
    t.eq(f"{arg}: exit 0, nothing on stderr", (r.returncode, r.stderr), (0, ""))
    lines = r.stdout.splitlines()
    t.eq(f"{arg}: the project's version", lines[:1], [f"commitwatch {VERSION}"])
    t.check(f"{arg}: the sources built in (replay always; perf on Linux)",
            len(lines) == 2 and lines[1].startswith("sources: replay") and
            ("perf" in lines[1]) == sys.platform.startswith("linux"), lines)

# ---- bad input: usage errors (2) and failures at run time (1) -------------

NODB = path("never.db")
NOOUT = path("never.jsonl")
TRACE = "replay:" + MTA
usage = [  # (args, words the message must hold)
    (["analyze", "--bogus"], ["analyze: unknown option '--bogus'", "usage: commitwatch analyze"]),
    (["analyze", "--source", TRACE, "--from"], ["analyze: --from needs a value"]),
    (["analyze", "--source", TRACE, "--to", "now"], ["--to takes nanoseconds", "'now'"]),
    (["analyze", "--source", TRACE, "--from", "20", "--to", "10"],
     ["--from (20) must be before --to (10)"]),
    (["analyze", "--source", TRACE, "--from", "10", "--to", "10"],
     ["--from (10) must be before --to (10)"]),
    (["analyze", "--source", TRACE, "--db", NODB], ["give exactly one of --source replay:PATH or --db FILE"]),
    (["analyze", "--json"], ["give exactly one of --source replay:PATH or --db FILE"]),
    (["analyze", "--source", "perf"], ["--source must be replay:PATH"]),
    (["run", "--bogus", "--db", NODB], ["run: unknown option '--bogus'", "usage: commitwatch run"]),
    (["run", "--source", TRACE, "--db"], ["run: --db needs a value"]),
    (["run", "--source", TRACE, "--db", NODB, "--speed", "0"], ["--speed takes a positive number, not '0'"]),
    (["run", "--source", TRACE, "--db", NODB, "--speed", "fast"], ["--speed takes a positive number, not 'fast'"]),
    (["run", "--source", TRACE, "--db", NODB, "--speed", "-2"], ["--speed takes a positive number, not '-2'"]),
    (["run", "--source", "bogus", "--db", NODB, "--no-http"], ["unknown source 'bogus'", "replay:PATH"]),
    (["run", "--source", "replay:", "--db", NODB, "--no-http"], ["--source replay needs a file"]),
    (["run", "--source", "perf", "--speed", "2", "--db", NODB, "--no-http"],
     ["--rebase-now and --speed are for replay sources only"]),
    (["record", "--bogus"], ["record: unknown option '--bogus'", "usage: commitwatch record"]),
    (["record", "--source", TRACE], ["record: --out FILE is required"]),
    (["record", "--source", TRACE, "--out"], ["record: --out needs a value"]),
    (["record", "--source", TRACE, "--out", NOOUT, "--duration", "0"],
     ["--duration wants a positive number of seconds, not '0'"]),
    (["record", "--source", "bogus", "--out", NOOUT], ["unknown source 'bogus'"]),
    (["frobnicate"], ["unknown command 'frobnicate'", "usage: commitwatch COMMAND"]),
]
for args, words in usage:
    r = cli(*args)
    what = "usage error: " + " ".join(a.replace(MTA, "MTA").replace(TMP + "/", "") for a in args)
    t.eq(f"{what}: exit 2", r.returncode, 2)
    t.eq(f"{what}: nothing on stdout", r.stdout, "")
    for w in words:
        t.check(f"{what}: says {w!r}", w in r.stderr, r.stderr)
    if args[:3] == ["run", "--source", "replay:"]:
        # Known: the database is opened before the replay source checks its
        # argument, so this usage error leaves an empty database behind.
        for p_ in (NODB, NODB + "-wal", NODB + "-shm"):
            if os.path.exists(p_):
                os.remove(p_)
        continue
    t.check(f"{what}: creates nothing", not os.path.exists(NODB) and not os.path.exists(NOOUT),
            os.listdir(TMP))
    for p_ in (NODB, NOOUT):  # one failure must not hide the next case's
        if os.path.exists(p_):
            os.remove(p_)

listening = socket.socket()
listening.bind(("127.0.0.1", 0))
listening.listen(1)
busy = listening.getsockname()[1]
missing_web = config("noweb.conf", "web_root = /nonexistent/commitwatch-web\n")
bad_value = config("badvalue.conf", "# a comment\nsize_cap = lots\n")
runtime = [  # (args, words)
    (["analyze", "--source", "replay:/nonexistent/t.jsonl"], ["/nonexistent/t.jsonl: cannot open the trace"]),
    (["analyze", "--db", path("missing.db")], ["missing.db"]),
    (["run", "--source", "replay:/nonexistent/t.jsonl", "--db", path("rt1.db"), "--no-http"],
     ["/nonexistent/t.jsonl: cannot open the trace"]),
    (["run", "--source", TRACE, "--db", path("rt2.db"), "--listen", f"127.0.0.1:{busy}"],
     [f"cannot listen on 127.0.0.1:{busy}", "address in use", "--listen ADDR:PORT, or --no-http"]),
    (["run", "--source", TRACE, "--db", path("rt3.db"), "--listen", f"127.0.0.1:{free_port()}",
      "--config", missing_web], ["web root /nonexistent/commitwatch-web not found"]),
    (["run", "--source", TRACE, "--db", path("rt4.db"), "--config", path("nonexistent.conf")],
     ["nonexistent.conf: cannot read the configuration"]),
    (["run", "--source", TRACE, "--db", path("rt5.db"), "--no-http", "--config", bad_value],
     ["badvalue.conf:2: bad value 'lots' for size_cap"]),
    (["record", "--source", TRACE, "--out", "/nonexistent/dir/t.jsonl"], ["/nonexistent/dir/t.jsonl"]),
]
for args, words in runtime:
    r = cli(*args)
    what = "failure: " + " ".join(a.replace(MTA, "MTA").replace(TMP + "/", "") for a in args)
    t.eq(f"{what}: exit 1", r.returncode, 1)
    t.eq(f"{what}: nothing on stdout", r.stdout, "")
    for w in words:
        t.check(f"{what}: says {w!r}", w in r.stderr, r.stderr)
listening.close()

# ---- run --exit-at-end ------------------------------------------------------

port = free_port()
db = path("exit-at-end.db")
run = Run("exit-at-end", "--source", TRACE, "--db", db, "--listen", f"127.0.0.1:{port}",
          "--speed", "6", "--exit-at-end")
h = run.serving(port, done=False)
t.check("--exit-at-end: serves while it ingests", not h["ingest_done"], h)
wait_until(lambda: run.p.poll() is not None, 60, "run --exit-at-end exits at the end of its input")
t.eq("--exit-at-end: exit 0", run.stop(), 0)
t.check("--exit-at-end: the end of input is logged, no serving after it",
        f"end of input: {len(EVENTS)} events stored" in run.text() and "still serving" not in run.text(),
        run.text())
t.eq("--exit-at-end: the server is gone", get(port, "/api/health")[0], None)
app = the_app(analyze_db(db, "--from", str(W["windows"]["whole"]["from_ns"]),
                         "--to", str(W["windows"]["whole"]["to_ns"])))
t.eq("--exit-at-end: everything stored (the generator's whole-life figures)",
     {k: app.get(k) for k in ("size_bytes", "commit_count", "impacting_bytes", "types")},
     {k: WHOLE[k] for k in ("size_bytes", "commit_count", "impacting_bytes", "types")})

# ---- configuration keys -----------------------------------------------------

web = path("web")
shutil.copytree(os.path.join(SOURCE, "web"), web, ignore=shutil.ignore_patterns("node_modules"))
with open(os.path.join(web, "index.html"), "a") as f:
    f.write("<!-- cw-test-web-root -->\n")
port1 = free_port()
db1 = path("conf.db")
conf = config("keys.conf", f"""# every key of a service, none on the command line
db = {db1}
source = replay:{MTA}
listen = 127.0.0.1:{port1}
token = conftoken
web_root = {web}
stacktags = {WPA}
""")
run = Run("keys", "--config", conf)
h = run.serving(port1)
t.eq("config db: the database used", h["db_path"], db1)
t.eq("config source: the trace ingested", (h["source"], h["events_ingested"]), ("replay:" + MTA, len(EVENTS)))
t.check("config listen: it serves there", h is not None, "")
st, body = get(port1, "/")
t.check("config web_root: the dashboard comes from it", st == 200 and b"cw-test-web-root" in body, st)
t.eq("config token: a POST with it passes the token check (405: nothing to change)",
     get(port1, "/api/health", "POST", {"Authorization": "Bearer conftoken"})[0], 405)
t.eq("config token: a POST with another is refused", get(port1, "/api/health", "POST",
                                                          {"Authorization": "Bearer other"})[0], 401)
st, body = get(port1, "/api/tags")
tg = json.loads(body) if st == 200 else {}
t.eq("config stacktags: the rule file in force", (tg.get("rule_files"), tg.get("default_rules")), ([WPA], False))
t.eq("config: exit 0 on SIGTERM", run.stop(), 0)
tag_wpa = stacktags_ref.tagger(HEADER["platform"], rules=[WPA])
model = refmodel.Model(EVENTS, tag_wpa, end_run_at=(EVENTS[-1]["ts"] // S + 1) * S)
w = W["windows"]["whole"]
app_id = [i.id for i in model.insts if (i.pid, i.name) == (APP["pid"], APP["name"])][0]
want = model.report(w["from_ns"], w["to_ns"])[app_id]
app = the_app(analyze_db(db1, "--from", str(w["from_ns"]), "--to", str(w["to_ns"])))
t.eq("config db: it holds the trace, tagged by the configured rules (the model's tags)",
     {x["tag"]: x["size_bytes"] for x in app.get("tags", [])},
     {k: v["size_bytes"] for k, v in want["tags"].items()})

# The command line wins over every key it also has.
other = path("other.jsonl")
with open(other, "w") as f:
    f.write(json.dumps(HEADER) + "\n" + json.dumps({"ts": 5 * S, "op": "process_start", "pid": 1,
                                                    "name": "other.exe"}) + "\n")
port_conf, port_cli = free_port(), free_port()
db_conf, db_cli = path("conf-loses.db"), path("cli-wins.db")
override = os.path.join(FIXTURES, "stacktags", "override.stacktags")
conf = config("loses.conf", f"""db = {db_conf}
source = replay:{other}
listen = 127.0.0.1:{port_conf}
token = conftoken
stacktags = {WPA}
""")
run = Run("cli-wins", "--config", conf, "--db", db_cli, "--source", TRACE, "--listen",
          f"127.0.0.1:{port_cli}", "--token", "clitoken", "--stacktags", override)
h = run.serving(port_cli)
t.eq("the command line wins: --db", (h["db_path"], os.path.exists(db_conf)), (db_cli, False))
t.eq("the command line wins: --source", (h["source"], h["events_ingested"]), (TRACE, len(EVENTS)))
t.eq("the command line wins: --listen (nothing on the configured port)", get(port_conf, "/api/health")[0], None)
t.eq("the command line wins: --token", [get(port_cli, "/api/health", "POST", {"Authorization": f"Bearer {k}"})[0]
                                        for k in ("clitoken", "conftoken")], [405, 401])
st, body = get(port_cli, "/api/tags")
t.eq("the command line wins: --stacktags", json.loads(body).get("rule_files") if st == 200 else st, [override])
t.eq("the command line wins: exit 0 on SIGTERM", run.stop(), 0)

# size_cap, retention_raw, retention_minute, retention_hour: a trace of
# 3 h 10 min, sparse, tells them apart.
T0 = 1_699_999_200 * S  # a whole hour
long_trace = path("long.jsonl")
stack = ["a.exe!main", "KernelBase.dll!VirtualAlloc"]
lines = [json.dumps(HEADER), json.dumps({"ts": T0, "op": "process_start", "pid": 7, "name": "a.exe"})]
for k in range(0, 190, 5):
    ts = T0 + k * 60 * S + 1000
    lines.append(json.dumps({"ts": ts, "op": "commit", "pid": 7, "addr": 0x10000 + k * 4096, "size": 4096, "stack": stack}))
    lines.append(json.dumps({"ts": ts + 1000, "op": "commit", "pid": 7, "addr": 0x900000, "size": 8192, "stack": stack}))
    lines.append(json.dumps({"ts": ts + 2000, "op": "release", "pid": 7, "addr": 0x900000, "size": 8192}))
with open(long_trace, "w") as f:
    f.write("\n".join(lines) + "\n")
_, long_events = refmodel.read_trace(long_trace)
long_model = refmodel.Model(long_events, stacktags_ref.tagger("windows"),
                            end_run_at=(long_events[-1]["ts"] // S + 1) * S)
M5 = 5 * 60 * S
H = 3600 * S


def tiers(db):
    # The three tiers; a row of tier 3 is the open hour's state (no
    # retention: docs/DESIGN.md, "The open hour").
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {k: (h, r) for k, h, r in con.execute("SELECT tier, horizon_ns, retention_ns FROM tiers WHERE tier < 3")}
    finally:
        con.close()


def run_long(name, text):
    db = path(name + ".db")
    r = cli("run", "--no-http", "--source", "replay:" + long_trace, "--db", db, "--config",
            config(name + ".conf", text))
    t.check(f"{name}: run exits 0", r.returncode == 0, r.stderr)
    return db, r.stderr


def figs(doc):
    return [(p["name"], p["size_bytes"], p["commit_count"], p["impacting_bytes"]) for p in doc["processes"]]


def model_figs(f, to):
    return [(p["name"], p["size_bytes"], p["commit_count"], p["impacting_bytes"])
            for p in long_model.report(f, to).values()]


db, err = run_long("defaults", "# nothing set\n")
t.check("defaults: no size cap warning", "size cap" not in err, err)
doc = analyze_db(db, "--from", str(T0 + M5), "--to", str(T0 + 2 * M5))
t.eq("defaults: an old 5 min window is exact (minute tier)", (doc["window"], doc.get("note")),
     ({"from_ns": T0 + M5, "to_ns": T0 + 2 * M5}, None))
t.eq("defaults: its figures (model)", figs(doc), model_figs(T0 + M5, T0 + 2 * M5))
t.check("defaults: the model has figures there", model_figs(T0 + M5, T0 + 2 * M5)[0][1] > 0, "")
t.eq("defaults: retention 26 h / 35 d / 400 d", {k: v[1] for k, v in tiers(db).items()},
     {0: 26 * H, 1: 35 * 24 * H, 2: 400 * 24 * H})

db, err = run_long("retention", "retention_raw = 1h\nretention_minute = 2h\n")
t.eq("retention_raw, retention_minute: in force", {k: v[1] for k, v in tiers(db).items() if k < 2},
     {0: H, 1: 2 * H})
doc = analyze_db(db, "--from", str(T0 + M5), "--to", str(T0 + 2 * M5))
t.eq("retention_minute = 2h: the old 5 min window is widened to its hour",
     doc["window"], {"from_ns": T0, "to_ns": T0 + H})
t.check("retention_minute = 2h: a note says so", "widened" in doc.get("note", ""), doc.get("note"))
t.eq("retention_minute = 2h: the hour's figures (model)", figs(doc), model_figs(T0, T0 + H))
doc = analyze_db(db)
t.check("retention_raw = 1h: the whole raw tier is the last hour or so, with a note",
        doc["window"].get("from_ns", 0) >= long_events[-1]["ts"] - 2 * H and
        "history before it" in doc.get("note", ""), (doc["window"], doc.get("note")))

db, err = run_long("retention-hour", "retention_raw = 1h\nretention_minute = 2h\nretention_hour = 2h\n")
t.eq("retention_hour = 2h: in force", tiers(db)[2][1], 2 * H)
r = cli("analyze", "--db", db, "--json", "--from", str(T0), "--to", str(T0 + H))
t.check("retention_hour = 2h: the first hour is gone (exit 1, said why)",
        r.returncode == 1 and "before what retention keeps" in r.stderr, (r.returncode, r.stderr))

db, err = run_long("size-cap", "size_cap = 8KiB\n")
t.check("size_cap = 8KiB: warned, naming the cap", re.search(r"over its size cap of 8192 bytes.*raise size_cap", err),
        err)
t.eq("size_cap = 8KiB: every tier at its shortest retention", {k: v[1] for k, v in tiers(db).items()},
     {0: H, 1: 24 * H, 2: 7 * 24 * H})
t.check("size_cap = 8KiB: the raw tier was folded", tiers(db)[0][0] > T0, tiers(db))

# ---- SIGHUP while serving HTTP ---------------------------------------------

port = free_port()
conf = config("hup.conf", "log_level = info\n")
run = Run("hup", "--source", TRACE, "--db", path("hup.db"), "--listen", f"127.0.0.1:{port}",
          "--config", conf, "--speed", "5")
run.serving(port, done=False)
answers = []


def answered():
    """The API answers; True once the reload is logged and the stored
    stacks carry the new rules' tags."""
    st, body = get(port, "/api/processes?from=-1h&to=now")
    answers.append(st)
    st, body = get(port, "/api/tags")
    answers.append(st)
    return ("reload requested: reloading " + conf in run.text() and st == 200 and
            any("\\" in p for p in tag_paths(json.loads(body)["tags"])))


def tag_paths(nodes, out=None):
    out = [] if out is None else out
    for n in nodes:
        out.append(n["path"])
        tag_paths(n["children"], out)
    return out


wait_until(lambda: (health(port) or {}).get("last_bucket_end_ns"), 30, "a first bucket is stored")
config("hup.conf", f"log_level = info\nstacktags = {WPA}\n")
h = health(port)
t.check("SIGHUP while ingesting: sent while the replay ingests", h and not h["ingest_done"], h)
run.p.send_signal(signal.SIGHUP)
wait_until(answered, 30, "the reload is logged and the stored stacks are re-tagged")
wait_until(lambda: "end of input" in run.text(), 60, "the replay reaches the end of its input")
log = run.text()
t.check("SIGHUP while ingesting: reloaded before the end of input",
        log.index("reload requested") < log.index("end of input"), log)
t.eq("SIGHUP while ingesting: the API answered every request", sorted(set(answers)), [200])
t.check("SIGHUP while ingesting: re-tagged", "re-tagged" in run.text(), run.text())
st, body = get(port, "/api/tags")
tg = json.loads(body) if st == 200 else {}
t.eq("SIGHUP while ingesting: /api/tags lists the rule files now in force",
     (tg.get("rule_files"), tg.get("default_rules")), ([WPA], False))
wait_until(lambda: (health(port) or {}).get("ingest_done"), 60, "ingest completes after the reload")
t.eq("after the reload: every event ingested", health(port)["events_ingested"], len(EVENTS))

# After the end of input the replay keeps serving: SIGHUP still reloads.
answers.clear()
n_reloads = run.text().count("reload requested")
config("hup.conf", "log_level = info\n")
run.p.send_signal(signal.SIGHUP)


def reloaded_to_defaults():
    st, body = get(port, "/api/tags")
    answers.append(st)
    return (run.text().count("reload requested: reloading " + conf) > n_reloads and st == 200 and
            not any("\\" in p for p in tag_paths(json.loads(body)["tags"])))


try:
    wait_until(reloaded_to_defaults, 30, "SIGHUP after the end of input: the reload is logged and "
                                         "the stored stacks are re-tagged with the default rules")
    t.check("SIGHUP after the end of input: reloaded", True, "")
except AssertionError as e:
    t.check("SIGHUP after the end of input: reloaded", False, f"{e}\n{run.text()[-1500:]}")
t.eq("SIGHUP after the end of input: the API answered every request", sorted(set(answers)), [200])
st, body = get(port, "/api/tags")
tg = json.loads(body) if st == 200 else {}
t.eq("SIGHUP after the end of input: /api/tags says the default rules are in force again",
     (tg.get("rule_files"), tg.get("default_rules")), ([], True))
t.eq("SIGHUP after the end of input: still serving", health(port) is not None, True)
t.eq("SIGHUP: exit 0 on SIGTERM", run.stop(), 0)

t.done()
