#!/usr/bin/env python3
"""test_file_perms.py - files the service takes orders from are refused
when others can write them (docs/RELIABILITY.md, "Least privilege").

The real binary, as a user would run it:
- `run --config FILE` with FILE group- or world-writable exits 1 with a
  message naming the file, its mode and the fix (chmod go-w); with mode
  0644 it starts;
- an alert_rules file (named by that configuration) that is world-writable
  is refused the same way: the log says so and its rules are not loaded;
  chmod go-w and SIGHUP (reload) loads them;
- as root, a configuration owned by another user (nobody) is refused,
  naming the uid and `chown root` (skipped, with the reason, when not root
  and outside CI: only root can give a file away).
"""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, BUILD, MTA, Checks, require_fixture  # noqa: E402
from cwtest import in_ci, wait_until  # noqa: E402

require_fixture()
t = Checks()
DIR = os.path.join(BUILD, "e2e-file-perms")
os.makedirs(DIR, exist_ok=True)
CONF = os.path.join(DIR, "commitwatch.conf")
RULES = os.path.join(DIR, "rules.conf")
DB = os.path.join(DIR, "cw.db")


def run_once(*extra):
    for f in (DB, DB + "-wal", DB + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    return subprocess.run([BIN, "run", "--source", "replay:" + MTA, "--no-http", "--db", DB,
                           "--config", CONF, *extra], capture_output=True, text=True, timeout=120)


with open(CONF, "w") as f:
    f.write("retention_raw = 26h\n")
for mode, who in ((0o664, "its group"), (0o666, "every user"), (0o646, "every user")):
    os.chmod(CONF, mode)
    r = run_once()
    t.check(f"config mode {mode:04o}: refused", r.returncode == 1 and
            f"{CONF}: refusing the configuration: it is writable by {who} (mode {mode:04o}" in r.stderr
            and f"chmod go-w {CONF}" in r.stderr, r.stderr[-600:])
os.chmod(CONF, 0o644)
r = run_once()
t.check("config mode 0644: runs", r.returncode == 0, r.stderr[-600:])

# Alert rules named by the configuration: refused and not loaded, then
# loaded by a reload once fixed.
with open(RULES, "w") as f:
    f.write("[rule big_commit]\nmetric = outstanding\nwarn = 1TiB\n")
os.chmod(RULES, 0o666)
with open(CONF, "w") as f:
    f.write(f"alert_rules = {RULES}\nalert_default_rules = no\n")
os.chmod(CONF, 0o644)
log = open(os.path.join(DIR, "reload.log"), "w+")
for f in (DB, DB + "-wal", DB + "-shm"):
    if os.path.exists(f):
        os.remove(f)
p = subprocess.Popen([BIN, "run", "--source", "replay:" + MTA, "--db", DB, "--config", CONF,
                      "--listen", "127.0.0.1:0"], stdout=log, stderr=subprocess.STDOUT)


def logtext():
    log.flush()
    with open(log.name) as f:
        return f.read()


try:
    want = f"{RULES}: refusing the alert rules: it is writable by every user (mode 0666"
    wait_until(lambda: want in logtext(), 60, "the log refuses the world-writable rules")
    t.check("rules mode 0666: refused, and its rules not loaded",
            "its rules are not loaded" in logtext(), logtext()[-600:])
    os.chmod(RULES, 0o644)
    p.send_signal(signal.SIGHUP)
    wait_until(lambda: "rule(s) in force" in logtext().split(want)[-1], 60,
               "the reload loads the fixed rules")
    t.check("rules fixed (0644): the reload loads them, without refusing them again",
            logtext().count(want) == 1 and "alerts: 1 rule(s) in force" in logtext(), logtext()[-600:])
finally:
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    log.close()

if os.geteuid() == 0:
    os.chmod(CONF, 0o644)
    os.chown(CONF, 65534, 65534)
    r = run_once()
    t.check("as root, a config owned by nobody: refused", r.returncode == 1 and
            "belongs to uid 65534" in r.stderr and f"chown root {CONF}" in r.stderr, r.stderr[-600:])
    os.chown(CONF, 0, 0)
elif in_ci():
    t.check("the ownership check needs root (CI runs as root)", False)
else:
    print("SKIP the ownership check: only root can give a file to another user")
t.done()
