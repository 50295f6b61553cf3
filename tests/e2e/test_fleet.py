"""test_fleet.py - a fleet on loopback: Debian's Prometheus scrapes three
commitwatch instances, evaluates the shipped rules
(contrib/prometheus/commitwatch.rules.yml) and sends the leak alert to
Debian's Alertmanager, which delivers it to a webhook receiver here.

The instances replay made-up traces in real time (--rebase-now --speed 1),
so their /metrics change live:
  leaker   leaky.exe commits 4 MiB a second: the leak;
  steady   steady.exe holds 64 MiB from its first event, churn.exe commits
           and releases 8 MiB every second (under 32 MiB);
  young    young.exe grows 2 MiB a second to 24 MiB, then holds it.
The alert delivered names the leaker's instance and leaky.exe (pid, id,
tag, the link to its page); no other instance has an alert pending or
firing once Prometheus has evaluated the rules over at least 15 scrapes of
every instance. Scrape and evaluation every second; the rules' `for:` and
`keep_firing_for:` are shortened in the test's copy, their expressions are
the shipped ones (checked). Every wait has a deadline; loopback only;
temporary folders and free ports; every process started is stopped."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from alerttrace import MiB, S, Trace
from cwservice import Checks, Service, free_port
from cwtest import file_text, require, stop, wait_until
from promcheck import RULES, require_promtool, rules_exprs

PROMETHEUS = shutil.which("prometheus")
AM = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
require(PROMETHEUS, "prometheus (apt-get install prometheus; scripts/deps.sh --test)")
require(AM, "prometheus-alertmanager (apt-get install prometheus-alertmanager; "
        "scripts/deps.sh --test)")
require_promtool()

DURATION = 900 * S  # each trace's length: far longer than the test


def leaker_trace():
    tr = Trace()
    tr.start(0, 101, "leaky.exe")
    for i in range(1, DURATION // S):
        tr.commit(i * S, 101, 4 * MiB)
    return tr


def steady_trace():
    tr = Trace()
    tr.start(0, 201, "steady.exe")
    for _ in range(64):
        tr.commit(0, 201, MiB)
    tr.start(0, 202, "churn.exe")
    for i in range(1, DURATION // S):
        a = tr.commit(i * S, 202, 8 * MiB)
        tr.release(i * S + S // 2, 202, a, 8 * MiB)
    return tr


def young_trace():
    tr = Trace()
    tr.start(0, 301, "young.exe")
    for i in range(1, 13):
        tr.commit(i * S, 301, 2 * MiB)
    tr.exit(DURATION, 301)
    return tr


class Hook(BaseHTTPRequestHandler):
    """Alertmanager's webhook: keeps every notification's JSON."""
    received = []
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with Hook.lock:
            Hook.received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def test_rules(tmp):
    """The shipped rules with short `for:` and `keep_firing_for:`; the
    expressions unchanged."""
    out = []
    for line in open(RULES).read().splitlines():
        stripped = line.lstrip()
        if stripped.startswith("for:"):
            line = line[:len(line) - len(stripped)] + "for: 3s"
        elif stripped.startswith("keep_firing_for:"):
            line = line[:len(line) - len(stripped)] + "keep_firing_for: 1s"
        out.append(line)
    path = os.path.join(tmp, "commitwatch.rules.yml")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return path


c = Checks()
tmp = tempfile.mkdtemp(prefix="cw_fleet_")
procs = []
hook = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
threading.Thread(target=hook.serve_forever, daemon=True).start()


def start(cmd, name):
    log = open(os.path.join(tmp, name + ".log"), "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    procs.append((name, p))
    return p


def stop_all():
    for name, p in reversed(procs):
        c.check(f"{name} stops on SIGTERM within 20 s", stop(p) is not None, "killed")


def tail(name):
    return file_text(os.path.join(tmp, name + ".log"))[-3000:]


rules = test_rules(tmp)
c.check("the test's rules have the shipped expressions", rules_exprs(rules) == rules_exprs(RULES),
        "the substitution changed an expression")

traces = {"leaker": leaker_trace(), "steady": steady_trace(), "young": young_trace()}
paths = {n: t.write(os.path.join(tmp, n + ".jsonl")) for n, t in traces.items()}
services = {n: Service(paths[n], name=f"fleet_{n}", args=["--rebase-now", "--speed", "1"],
                       wait_done=False) for n in traces}
ok = False
try:
    for s in services.values():
        s.__enter__()
    inst = {n: f"127.0.0.1:{s.port}" for n, s in services.items()}

    # steady.exe has its 64 MiB from its first event: wait until it shows,
    # so that Prometheus' first sample of it is the level it keeps.
    def metrics(n):
        with urllib.request.urlopen(services[n].base + "/metrics", timeout=10) as r:
            return r.read().decode()
    steady_line = ('commitwatch_process_outstanding_bytes{process="steady.exe",pid="201",'
                   f'id="1",tag="Windows Heap"}} {64 * MiB}')
    wait_until(lambda: steady_line in metrics("steady").splitlines(), 60,
               f"steady.exe's 64 MiB are in /metrics ({steady_line})")

    am_port, prom_port = free_port(), free_port()
    with open(os.path.join(tmp, "alertmanager.yml"), "w") as f:
        f.write("route:\n  receiver: hook\n  group_by: [alertname, instance, process]\n"
                "  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\n"
                "receivers:\n  - name: hook\n    webhook_configs:\n"
                f"      - url: http://127.0.0.1:{hook.server_address[1]}/\n"
                "        send_resolved: true\n")
    start([AM, f"--config.file={tmp}/alertmanager.yml", f"--storage.path={tmp}/am",
           f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="],
          "alertmanager")
    targets = ", ".join(f"'{a}'" for a in inst.values())
    with open(os.path.join(tmp, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                f"rule_files:\n  - {rules}\n"
                "alerting:\n  alertmanagers:\n    - static_configs:\n"
                f"        - targets: ['127.0.0.1:{am_port}']\n"
                "scrape_configs:\n  - job_name: commitwatch\n    static_configs:\n"
                f"      - targets: [{targets}]\n")
    start([PROMETHEUS, f"--config.file={tmp}/prometheus.yml", f"--storage.tsdb.path={tmp}/tsdb",
           f"--web.listen-address=127.0.0.1:{prom_port}"], "prometheus")
    prom = f"http://127.0.0.1:{prom_port}"

    def ready(url):
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False
    for name, url in (("alertmanager", f"http://127.0.0.1:{am_port}"), ("prometheus", prom)):
        wait_until(lambda: ready(url) or (dict(procs)[name].poll() is not None and
                                          sys.exit(f"{name} exited:\n{tail(name)}")),
                   60, f"{name} answers /-/ready")

    def query(q):
        r = get_json(prom + "/api/v1/query?" + urllib.parse.urlencode({"query": q}))
        return r["data"]["result"]

    # The leak alert arrives at the webhook.
    def leak_delivered():
        with Hook.lock:
            return [a for n in Hook.received for a in n.get("alerts", [])
                    if a["labels"].get("alertname") == "CommitwatchLikelyLeak"
                    and a["status"] == "firing"]
    got = wait_until(leak_delivered, 120, lambda: "the leak alert reaches the webhook "
                     f"(Prometheus' alerts: {query('ALERTS')})", interval=0.2)
    a = got[0]
    ident = [l for l in metrics("leaker").splitlines()
             if l.startswith('commitwatch_process_outstanding_bytes{process="leaky.exe"')]
    m = re.search(r'[{,]id="(\d+)"', ident[0]) if ident else None
    pid_id = m.group(1) if m else "?"
    want = {"instance": inst["leaker"], "process": "leaky.exe", "pid": "101", "id": pid_id,
            "job": "commitwatch", "severity": "warning", "source": "commitwatch"}
    c.same_keys("the delivered alert names the leaking instance and process", a["labels"], want,
                list(want))
    c.check("the alert has a stack tag", bool(a["labels"].get("tag")), a["labels"])
    c.eq("the alert links to the process's page on its instance",
         a["annotations"].get("dashboard_url"), f"http://{inst['leaker']}/#/process/{pid_id}")
    c.check("the alert's summary names the process and instance",
            "leaky.exe (pid 101) on " + inst["leaker"] in a["annotations"].get("summary", ""),
            a["annotations"])

    # Every instance scraped and evaluated long enough for a false alert
    # to be firing (for: 3 s), then: alerts of the leaker only.
    wait_until(lambda: len(query("count_over_time(commitwatch_outstanding_bytes[10m]) >= 15")) == 3,
               120, lambda: "15 scrapes of every instance "
               f"({query('count_over_time(commitwatch_outstanding_bytes[10m])')})", interval=0.2)
    for n, proc in (("steady", "steady.exe"), ("young", "young.exe")):
        c.check(f"Prometheus has {proc} of {n}",
                len(query(f'commitwatch_process_outstanding_bytes{{instance="{inst[n]}",process="{proc}"}}')) == 1,
                query("commitwatch_process_outstanding_bytes"))
    alerts = query('ALERTS{alertstate=~"pending|firing"}')
    c.check("no instance but the leaker has an alert pending or firing",
            all(x["metric"].get("instance") == inst["leaker"] for x in alerts), alerts)
    c.check("the leaker's only alert is the leak of leaky.exe",
            {(x["metric"]["alertname"], x["metric"].get("process")) for x in alerts} ==
            {("CommitwatchLikelyLeak", "leaky.exe")}, alerts)
    with Hook.lock:
        delivered = [x for n in Hook.received for x in n.get("alerts", [])]
    c.check("the webhook got no alert of another instance or process",
            all(x["labels"].get("instance") == inst["leaker"] and
                x["labels"].get("process") == "leaky.exe" for x in delivered), delivered)
    top = query("fleet:commitwatch_top_growing_processes:deriv1h")
    top.sort(key=lambda x: -float(x["value"][1]))
    c.check("the fastest growing process of the fleet is leaky.exe on the leaker",
            bool(top) and top[0]["metric"].get("process") == "leaky.exe" and
            top[0]["metric"].get("instance") == inst["leaker"], top)
    ok = True
finally:
    stop_all()
    for s in services.values():
        if s.proc is not None:
            s.__exit__(None, None, None)
    hook.shutdown()
    hook.server_close()
    if not ok:
        for name, _ in procs:
            print(f"--- {name} log:\n{tail(name)}", file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
