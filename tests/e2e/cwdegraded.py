"""cwdegraded.py - a service whose live source cannot open, for the tests
of the degraded mode (test_degraded.py, test_degraded_browser.py; issue
32, docs/RELIABILITY.md "A source that fails").

    hist = history_db(tmp)              # a Linux database with one process
    with DegradedPerf(tmp, hist.db) as svc:
        svc.get("/api/health")          # "status":"degraded"

history_db replays a small Linux trace (one process, 3 MiB committed, an
hour ago) into tmp/degraded.db. DegradedPerf runs `commitwatch run
--source perf` on it as a user that may not trace the whole machine:
nobody (setpriv, without capabilities) when the test runs as root, else
the test's own user, which needs kernel.perf_event_paranoid >= 1 (a skip,
or a failure in CI, otherwise). perf_event_open is then refused. On exit
it sends SIGTERM and waits (returncode: the exit status)."""

import json
import os
import shutil
import subprocess
import time
import urllib.request

from cwservice import BIN, free_port
from cwtest import require, stop, wait_until

S = 10**9


class History:
    def __init__(self, db, t0):
        self.db, self.t0 = db, t0
        self.name = "degraded-test"
        self.impacting = 3 << 20


def require_unprivileged():
    """The prerequisites of DegradedPerf (require: skip, or fail in CI)."""
    if os.geteuid() == 0:
        require(shutil.which("setpriv"), "setpriv (util-linux) to run the service as nobody")
        return
    with open("/proc/sys/kernel/perf_event_paranoid") as f:
        paranoid = int(f.read())
    require(paranoid >= 1, "kernel.perf_event_paranoid >= 1 (so this user cannot trace the "
            "machine), or running as root (the test drops to nobody)")


def history_db(tmp):
    """A Linux database in tmp (made writable for nobody) holding one
    process's history an hour ago. Raises when the replay fails."""
    os.chmod(tmp, 0o777)
    db = os.path.join(tmp, "degraded.db")
    t0 = (int(time.time()) - 3600) * S
    events = [
        {"format": "commitwatch-trace", "version": 1, "platform": "linux", "pointer_size": 8},
        {"ts": t0, "op": "process_start", "pid": 4242, "name": "degraded-test"},
        {"ts": t0 + 1 * S, "op": "commit", "pid": 4242, "addr": "0x10000000", "size": 1 << 20,
         "stack": ["libc.so.6!malloc"]},
        {"ts": t0 + 3 * S, "op": "commit", "pid": 4242, "addr": "0x20000000", "size": 2 << 20,
         "stack": ["libc.so.6!mmap"]},
    ]
    trace = os.path.join(tmp, "history.jsonl")
    with open(trace, "w") as f:
        f.write("\n".join(json.dumps(e) for e in events) + "\n")
    subprocess.run([BIN, "run", "--source", f"replay:{trace}", "--db", db, "--no-http"],
                   check=True, capture_output=True, text=True, timeout=120)
    for name in os.listdir(tmp):
        os.chmod(os.path.join(tmp, name), 0o666)
    return History(db, t0)


class DegradedPerf:
    def __init__(self, tmp, db, config=None):
        """config: the text of a configuration file to run with."""
        self.tmp, self.db, self.config = tmp, db, config
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.logpath = os.path.join(tmp, "service.log")
        self.returncode = None

    def __enter__(self):
        cmd = [BIN, "run", "--source", "perf", "--db", self.db, "--listen",
               f"127.0.0.1:{self.port}"]
        if self.config is not None:
            path = os.path.join(self.tmp, "commitwatch.conf")
            with open(path, "w") as f:
                f.write(self.config)
            os.chmod(path, 0o644)
            cmd += ["--config", path]
        if os.geteuid() == 0:
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                   "--inh-caps=-all", "--bounding-set=-all"] + cmd
        self.log = open(self.logpath, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=self.tmp)
        wait_until(self.health, 60, "the degraded service answers /api/health")
        return self

    def __exit__(self, *exc):
        stop(self.proc, timeout=20)
        self.returncode = self.proc.returncode
        self.log.close()
        return False

    def logtext(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.logpath) as f:
            return f.read()

    def get(self, path):
        """(status, parsed JSON or text)."""
        with urllib.request.urlopen(self.base + path, timeout=30) as resp:
            body = resp.read()
            if resp.headers.get("Content-Type", "").startswith("application/json"):
                return resp.status, json.loads(body)
            return resp.status, body.decode()

    def health(self):
        """/api/health, or None while it does not answer; raises when the
        service has exited."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"the service exited with {self.proc.returncode}:\n{self.logtext()}")
        try:
            return self.get("/api/health")[1]
        except OSError:
            return None
