"""cwservice.py - start `commitwatch run` with its HTTP server for a test.

Shared by the HTTP end-to-end tests (test_api.py, test_metrics.py,
test_dashboard_browser.py). The environment comes from ctest
(tests/CMakeLists.txt): CW_BIN, CW_FIXTURES, CW_BUILD, CW_SOURCE.

    with Service(trace) as svc:
        status, body = svc.get("/api/health")

The service replays `trace` into a fresh database under
$CW_BUILD/e2e-http/<name>/ and keeps serving after the end of input; the
context manager waits until every bucket is stored (or, wait_done=False,
until it answers) and stops it with SIGTERM at the end: a service that does
not exit within 20 s, or exits with anything but 0, fails the test.

The Windows build runs commitwatch.exe the same way under Wine: CW_BIN is
the .exe and CW_BIN_PREFIX the launcher it runs through
(scripts/wine_run.sh); Service(bin=..., prefix=[...]) picks another binary
(a test comparing the two builds runs both). A Windows binary is stopped
with SIGINT instead: Wine turns SIGINT to the wine process into Ctrl+C
(CTRL_C_EVENT), which commitwatch handles as a stop request, whereas
SIGTERM ends the process at once, with no console event (no clean stop
to check). And its requests share one keep-alive connection (KeptClient):
Wine 8's wineserver aborts (server/sock.c, complete_async_poll: "Assertion
`output->count == signaled_count' failed") when a socket poll names a
socket twice and a reset arrives between its checks of the two
(docs/WINDOWS.md). civetweb's select() emulation of poll() does that; the
Windows build has it poll with WSAPoll instead. The kept connection
stays: it spares the prefix a connection's setup and teardown per
request, and the tests make the same requests either way.
"""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cwtest import require, wait_until  # noqa: E402

BIN = os.environ.get("CW_BIN", "commitwatch")
# The launcher the binary runs through ([] = none; the Windows build's
# ctest gives scripts/wine_run.sh).
PREFIX = [os.environ["CW_BIN_PREFIX"]] if os.environ.get("CW_BIN_PREFIX") else []
FIXTURES = os.environ.get("CW_FIXTURES", os.path.join(os.path.dirname(__file__), "..", "fixtures"))
BUILD = os.environ.get("CW_BUILD", ".")
SOURCE = os.environ.get("CW_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
MTA = os.path.join(FIXTURES, "memorytestapp.jsonl")
MTA_WINDOWS = os.path.join(FIXTURES, "memorytestapp.windows.json")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_browser(modules, also=()):
    """The browser tests' tools: node, Debian's chromium (CW_CHROMIUM) and
    the npm packages `modules` in web/node_modules; `also`: other missing
    prerequisites, described. Fails in CI and skips elsewhere (require)
    when one is missing; returns (node, chromium)."""
    node = shutil.which("node")
    chromium = os.environ.get("CW_CHROMIUM", "/usr/bin/chromium")
    missing = list(also)
    if not node:
        missing.append("node (apt-get install nodejs)")
    if not os.access(chromium, os.X_OK):
        missing.append(f"{chromium} (apt-get install chromium)")
    for mod in modules:
        if not os.path.isdir(os.path.join(SOURCE, "web", "node_modules", mod)):
            missing.append(f"web/node_modules/{mod} (run `npm ci` in web/)")
    require(not missing, "the browser test needs: " + ", ".join(missing))
    return node, chromium


def require_fixture():
    """The MemoryTestApp fixture (tests/fixtures/gen_memorytestapp.py's
    output) must be in the tree: without it the test fails in CI and is
    skipped (exit 77, with the reason) elsewhere (cwtest.require)."""
    missing = [p for p in (MTA, MTA_WINDOWS) if not os.path.exists(p)]
    require(not missing, "fixture not in the tree: " + ", ".join(missing))


class Service:
    def __init__(self, trace, name="svc", args=(), wait_done=True, config=None, bin=None,
                 prefix=None, source=None):
        self.trace = trace
        self.dir = os.path.join(BUILD, "e2e-http", name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.db = os.path.join(self.dir, "commitwatch.db")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.args = list(args)
        self.wait_done = wait_done
        self.config = config
        self.source = source or f"replay:{trace}"  # another source: `trace` is unused
        self.bin = bin or BIN
        self.prefix = PREFIX if prefix is None else list(prefix)
        # Ctrl+C for a Windows program under Wine (see above).
        self.stop_signal = signal.SIGINT if self.bin.endswith(".exe") else signal.SIGTERM
        self.kept = KeptClient(self.port) if self.bin.endswith(".exe") else None
        self.proc = None

    def __enter__(self):
        cmd = self.prefix + [self.bin, "run", "--source", self.source, "--db", self.db,
               "--listen", f"127.0.0.1:{self.port}"] + self.args
        if self.config is not None:
            path = os.path.join(self.dir, "commitwatch.conf")
            with open(path, "w") as f:
                f.write(self.config)
            cmd += ["--config", path]
        self.log = open(os.path.join(self.dir, "service.log"), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"commitwatch run exited with {self.proc.returncode}:\n"
                                   f"{self.logtext()}")
            try:
                status, h = self.get("/api/health")
            except (urllib.error.URLError, http.client.HTTPException, OSError):
                return None
            return status == 200 and (h.get("ingest_done") or not self.wait_done)

        try:
            wait_until(ready, 60, lambda: "the service is ready (ingest done)" if self.wait_done
                       else "the service answers /api/health", interval=0.1)
        except BaseException:
            self.__exit__(*sys.exc_info())
            print(self.logtext(), file=sys.stderr)
            raise
        return self

    def __exit__(self, *exc):
        hung = False
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(self.stop_signal)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                hung = True
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if self.kept:
            self.kept.close()
        sig = signal.Signals(self.stop_signal).name
        if exc[0] is None and hung:
            raise RuntimeError(f"commitwatch run did not exit within 20 s of {sig}:\n"
                               f"{self.logtext()}")
        if exc[0] is None and self.proc and self.proc.returncode != 0:
            raise RuntimeError(f"commitwatch run exited with {self.proc.returncode} "
                               f"(0 expected after {sig}):\n{self.logtext()}")
        return False

    def logtext(self):
        if not self.log.closed:
            self.log.flush()
        with open(os.path.join(self.dir, "service.log")) as f:
            return f.read()

    def request(self, path, method="GET", headers=None):
        """(status, headers, body bytes); never raises on an HTTP status."""
        if self.kept:
            return self.kept.request(path, method, headers)
        req = urllib.request.Request(self.base + path, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def get(self, path, **kw):
        """(status, parsed JSON or text). Integers stay exact (Python ints)."""
        status, headers, body = self.request(path, **kw)
        if headers.get("Content-Type", "").startswith("application/json"):
            return status, json.loads(body)
        return status, body.decode("utf-8", "replace")


class KeptClient:
    """HTTP requests to 127.0.0.1:port over one keep-alive connection,
    opened again when the server closed it (after its keep-alive timeout,
    or a Connection: close answer); a GET that found the kept connection
    closed is sent again once on a new one."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def close(self):
        if self.conn:
            self.conn.close()
        self.conn = None

    def request(self, path, method="GET", headers=None):
        """(status, headers, body bytes); never raises on an HTTP status."""
        for attempt in (1, 2):
            fresh = self.conn is None
            if fresh:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                self.conn.request(method, path, headers=headers or {})
                r = self.conn.getresponse()
                body = r.read()
            except (http.client.HTTPException, OSError):
                self.close()
                if fresh or attempt == 2 or method not in ("GET", "HEAD"):
                    raise
                continue
            if r.will_close:
                self.close()
            return r.status, dict(r.headers), body

    def get(self, path):
        """(status, parsed JSON or text)."""
        status, headers, body = self.request(path)
        if headers.get("Content-Type", "").startswith("application/json"):
            return status, json.loads(body)
        return status, body.decode("utf-8", "replace")


def analyze_json(db, from_ns, to_ns, stacks=False, bin=None, prefix=None):
    """`commitwatch analyze --db DB --from --to --json` parsed."""
    cmd = (PREFIX if prefix is None else list(prefix)) + [bin or BIN, "analyze", "--db", db, "--from", str(from_ns), "--to", str(to_ns), "--json"]
    if stacks:
        cmd.append("--stacks")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def sql_one(db, sql):
    """The first row of a query on a database file, opened read-only."""
    import sqlite3
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchone()
    finally:
        con.close()


def live_db(checks, tmp, procs, minutes, period=5):
    """`procs` live processes for `minutes` (the read-path benchmark's
    generator, bench/busy_trace.py --live; each commits or releases every
    `period` s on average) written to tmp/live.jsonl and replayed by `run`
    into tmp/live.db: (trace, database)."""
    trace, db = os.path.join(tmp, "live.jsonl"), os.path.join(tmp, "live.db")
    with open(trace, "w") as f:
        subprocess.run([sys.executable, os.path.join(SOURCE, "bench", "busy_trace.py"), "--live",
                        str(procs), "-m", str(minutes), "--period", str(period)], stdout=f,
                       check=True, timeout=600)
    checks.cli("run", "--no-http", "--source", "replay:" + trace, "--db", db)
    return trace, db


def serve_db(path, log_path):
    """`commitwatch serve --db path` on a free loopback port, its output
    in log_path, once /api/health answers: (process, base URL). Stop it
    with cwtest.stop()."""
    port = free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(PREFIX + [BIN, "serve", "--db", path, "--listen",
                                          f"127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"

    def health():
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(base + "/api/health", timeout=10) as r:
                return r.status == 200
        except OSError:
            return False

    wait_until(health, 60, f"serve {path}: /api/health answers")
    return proc, base


class Checks:
    """Counts checks and prints the closing line ctest output readers use.

    With CW_CHECKS_QUIET=1 (scripts/test.sh sets it for CI) the ok lines
    are not printed, only the FAIL lines and the closing ones: a failed
    test's output, which ctest prints after its ***Failed line, then
    starts with what failed instead of a thousand ok lines, so the part
    of a CI log one is shown has the failure in it."""

    QUIET = os.environ.get("CW_CHECKS_QUIET") == "1"

    def __init__(self):
        self.passed = self.failed = 0
        self.failures = []  # the names of the failed checks

    def eq(self, name, got, want):
        return self.check(name, got == want, f"got {got!r}, want {want!r}")

    def same_keys(self, name, got, want, keys):
        """Checks that got[k] == want[k] for every k of keys, where a key
        missing from either side fails (naming the side), never compares
        as None == None."""
        missing = [(k, side) for k in keys for side, d in (("got", got), ("want", want))
                   if not isinstance(d, dict) or k not in d]
        if missing:
            return self.check(name, False, f"keys missing: {missing}")
        diff = {k: (got[k], want[k]) for k in keys if got[k] != want[k]}
        return self.check(name, not diff, f"(got, want): {diff}")

    def cli(self, *args, timeout=900):
        """Runs the binary with args, checks that it exits 0 (its stderr's
        end the detail), returns its stdout."""
        p = subprocess.run(PREFIX + [BIN, *args], capture_output=True, text=True,
                           timeout=timeout)
        self.check(f"commitwatch {' '.join(args[:3])} exits 0", p.returncode == 0,
                   p.stderr[-3000:])
        return p.stdout

    def check(self, name, cond, detail=""):
        """Prints ok or FAIL (with detail) for name; returns cond."""
        if cond:
            self.passed += 1
            if not self.QUIET:
                print(f"ok   {name}")
        else:
            self.failed += 1
            self.failures.append(name)
            print(f"FAIL {name}: {detail}")
        sys.stdout.flush()
        return cond

    def done(self):
        for name in self.failures[:20]:
            print(f"failed: {name}")
        if len(self.failures) > 20:
            print(f"failed: ... and {len(self.failures) - 20} more")
        print(f"{self.passed} passed, {self.failed} failed")
        if self.passed + self.failed == 0:
            # A test that made no check proved nothing: a loop over an empty
            # list, or an early return, must not read as a pass.
            print("FAIL no check ran")
            sys.exit(1)
        sys.exit(1 if self.failed else 0)
