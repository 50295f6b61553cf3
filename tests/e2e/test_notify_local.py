"""test_notify_local.py - the channels that stay on the machine (docs/
ALERTS.md, "Delivery"), each against a real receiver:

- journald: a unix datagram socket bound where journald's would be (under
  the notifier's log root), each datagram parsed as the native protocol;
  the structured fields, PRIORITY by severity, MESSAGE_ID by kind;
- the syslog fallback ("auto" with no journald socket): the datagram at
  ROOT/dev/log, priority daemon.warning, the fields as NAME=value;
- the exec hook: the alert JSON on stdin, a program whose path holds spaces
  and ';' (run as one path, no shell), its exit status, the timeout that
  kills it (and what it started) and is recorded as error "timeout"."""

import json
import os
import socket
import stat
import struct
import sys
import tempfile
import time

from notifytool import fingerprint, notice, rows, run

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def parse_journal(data):
    """The journal's native protocol (systemd.io/JOURNAL_NATIVE_PROTOCOL)."""
    fields, i = {}, 0
    while i < len(data):
        nl = data.index(b"\n", i)
        line = data[i:nl]
        if b"=" in line:
            k, v = line.split(b"=", 1)
            i = nl + 1
        else:
            k = line
            (n,) = struct.unpack("<Q", data[nl + 1:nl + 9])
            v = data[nl + 9:nl + 9 + n]
            assert data[nl + 9 + n:nl + 10 + n] == b"\n"
            i = nl + 10 + n
        fields[k.decode()] = v.decode()
    return fields


def bind(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0)
    return s


def drain(s):
    out = []
    while True:
        try:
            out.append(s.recv(65536))
        except BlockingIOError:
            return out


tmp = tempfile.mkdtemp(prefix="cw_notify_local_")

# ---- journald -----------------------------------------------------------------
root = os.path.join(tmp, "root")
js = bind(os.path.join(root, "run/systemd/journal/socket"))
db = os.path.join(tmp, "j.db")
multi = notice(3, process="multi", tag="line one\nline two")
crit = dict(notice(2, severity="critical"), reason="severity rose")
resolved = dict(notice(1), resolved=True, reason="resolved")
p, _ = run(["--db", db, "--log", "auto", "--log-root", root],
           [{"notices": [notice(1), crit, multi, resolved]}])
check(p.returncode == 0, f"cw_notify_send exits 0 ({p.stderr.strip()})")
grams = [parse_journal(d) for d in drain(js)]
check(len(grams) == 4, f"four journal entries ({len(grams)})")
if len(grams) == 4:
    e = grams[0]
    n1 = notice(1)
    check(e["MESSAGE"] == "alert LikelyLeak firing warning: leaky grows", f"MESSAGE {e['MESSAGE']!r}")
    check(e["PRIORITY"] == "4" and grams[1]["PRIORITY"] == "3" and grams[3]["PRIORITY"] == "6",
          "PRIORITY: warning 4, critical 3, resolved 6")
    check(e["SYSLOG_IDENTIFIER"] == "commitwatch", "SYSLOG_IDENTIFIER")
    want = {"COMMITWATCH_ALERTNAME": "LikelyLeak", "COMMITWATCH_PROCESS": "leaky",
            "COMMITWATCH_PID": "4242", "COMMITWATCH_TAG": "heap", "COMMITWATCH_VALUE": "52MiB/h",
            "COMMITWATCH_THRESHOLD": "50MiB/h", "COMMITWATCH_LEAK_SCORE": "0.93",
            "COMMITWATCH_TIME_TO_LIMIT": "7200", "COMMITWATCH_SEVERITY": "warning",
            "COMMITWATCH_STATUS": "firing", "COMMITWATCH_FINGERPRINT": fingerprint(n1["labels"]),
            "COMMITWATCH_SERIES": "1", "COMMITWATCH_RULE": "LikelyLeak"}
    bad = {k: e.get(k) for k in want if e.get(k) != want[k]}
    check(not bad, f"structured fields ({bad or 'all'})")
    ids = [g["MESSAGE_ID"] for g in grams]
    check(len(set(ids)) == 3 and ids[0] == ids[2] and all(len(i) == 32 for i in ids),
          "MESSAGE_ID by kind (firing, severity rose, resolved)")
    check(grams[2]["COMMITWATCH_TAG"] == "line one\nline two", "a value with a newline, binary-safe")
    check(grams[3]["COMMITWATCH_STATUS"] == "resolved", "resolved")
check([r["result"] for r in rows(db)] == ["ok"] * 4 and rows(db)[0]["channel"] == "log",
      "each write recorded, channel log")
js.close()
os.unlink(os.path.join(root, "run/systemd/journal/socket"))

# Nothing listening: an error row, not a crash.
p, _ = run(["--db", db, "--log", "journald", "--log-root", root], [{"notices": [notice(1)]}])
r = rows(db)[-1]
check(p.returncode == 0 and r["result"] == "error" and "journald" in r["detail"],
      f"no journald: recorded as an error ({r['detail']})")

# ---- syslog fallback ---------------------------------------------------------------
ss = bind(os.path.join(root, "dev/log"))
p, _ = run(["--log", "auto", "--log-root", root], [{"notices": [notice(1)]}])
grams = drain(ss)
check(len(grams) == 1, f"one syslog datagram ({len(grams)})")
if grams:
    g = grams[0].decode()
    check(g.startswith("<28>"), f"priority daemon.warning <28> ({g[:5]})")
    check(" commitwatch[" in g and "]: alert LikelyLeak firing warning: leaky grows" in g,
          f"ident[pid]: message ({g[:90]})")
    check(" COMMITWATCH_PROCESS=leaky COMMITWATCH_PID=4242 " in g, "fields as NAME=value")
ss.close()

# ---- exec ---------------------------------------------------------------------------
hookdir = os.path.join(tmp, "hook dir; touch SHELLRAN")
os.makedirs(hookdir)
hook = os.path.join(hookdir, "my hook;echo x.py")
out = os.path.join(tmp, "hook-out")
with open(hook, "w") as f:
    f.write(f"""#!{sys.executable}
import json, os, sys, time
data = sys.stdin.read()
a = json.loads(data)
with open({out!r}, "a") as f:
    f.write(json.dumps(a) + "\\n")
labels = a["labels"]
if labels["process"] == "slow":
    child = os.fork()
    if child:
        open({out!r} + ".pid", "w").write(str(child))
    if child == 0:
        time.sleep(30)
        open({out!r} + ".grandchild", "w").write("survived")
        os._exit(0)
    time.sleep(30)
sys.exit(3 if labels["process"] == "fails" else 0)
""")
os.chmod(hook, stat.S_IRWXU)
db = os.path.join(tmp, "x.db")
t0 = time.monotonic()
p, secs = run(["--db", db, "--exec", hook, "--exec-timeout-ms", "1500"],
              [{"notices": [notice(1), notice(2, process="fails"), notice(3, process="slow")]}])
check(p.returncode == 0, f"cw_notify_send exits 0 ({p.stderr.strip()})")
got = [json.loads(line) for line in open(out)] if os.path.exists(out) else []
check(len(got) == 3, f"the hook ran three times ({len(got)})")
if got:
    a = got[0]
    n1 = notice(1)
    check(a["status"] == "firing" and a["labels"] == n1["labels"] and
          a["annotations"] == n1["annotations"] and a["fingerprint"] == fingerprint(n1["labels"]) and
          a["endsAt"] == "0001-01-01T00:00:00Z" and a["generatorURL"] == n1["generator_url"],
          "the alert JSON on stdin (the webhook's alert object)")
check(not os.path.exists(os.path.join(tmp, "SHELLRAN")) and
      not any(n.startswith("SHELLRAN") for n in os.listdir(".")), "no shell interpreted the path")
rs = [(r["series"], r["result"], r["detail"]) for r in rows(db)]
check(rs == [(1, "ok", None), (2, "error", "exit status 3"), (3, "error", "timeout")],
      f"exit status and timeout recorded ({rs})")
check(1.4 < secs < 10, f"killed at the timeout ({secs:.1f} s)")


def alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()
    except OSError:
        return False


gpid = int(open(out + ".pid").read()) if os.path.exists(out + ".pid") else 0
check(gpid and not alive(gpid), f"what it started was killed too (pid {gpid})")

# A path that is not a file is refused at start.
p, _ = run(["--exec", os.path.join(tmp, "nope")], [{"notices": []}])
check(p.returncode == 1 and "alert_exec" in p.stderr, f"a missing program refused ({p.stderr.strip()})")

if failures:
    print(f"FAILED: {len(failures)}: {failures}")
    sys.exit(1)
print("all passed")
