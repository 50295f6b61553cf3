"""cwwine.py - what the Wine end-to-end tests (test_win_*.py) share: the
Windows build's programs run from Python on the Linux host through
scripts/wine_run.sh, in the ctest run's shared prefix or a private one.

The environment comes from the Windows build's ctest (tests/CMakeLists.txt):
CW_BIN (commitwatch.exe), CW_BIN_PREFIX (scripts/wine_run.sh, the launcher
every .exe runs through), WINEPREFIX (the shared prefix the fixture test
wine_prefix created afresh), CW_MEMORYTESTAPP (memorytestapp.exe),
CW_SCCONTROL (sccontrol.exe), CW_BUILD, CW_FIXTURES, CW_SOURCE and, when the
Windows build was configured with -DCW_LINUX_BUILD=DIR, CW_LINUX_BUILD.

Wine facts the tests rely on (../shared/WINDOWS.md, and checked here):
- the Unix exit status of `wine prog.exe` is the Windows exit code mod 256;
  wine's own output ends lines with CR LF (run() gives LF);
- a Unix absolute path works where Windows wants a path: the current
  drive is Z:, which maps /;
- SIGINT to a console program's wine process reaches it as CTRL_C_EVENT
  (commitwatch stops cleanly, exit 0); SIGTERM ends it at once, with no
  console event (cwservice.Service stops a Wine-hosted run with SIGINT);
- services.exe runs only while the prefix's wineserver does: a prefix
  that hosts a service gets a persistent wineserver (PrivatePrefix), and
  Wine does not wait for a stopped service's process to exit;
- when a prefix's wineserver dies (Wine 8 aborts on an assertion in
  server/sock.c now and then when a program uses sockets: cwservice.py),
  each thread of its programs ends with exit code 0 the next time it
  calls the server (dlls/ntdll/unix/server.c: "the server closed the
  connection; time to die"): a program exits 0 with no output, or hangs
  half-ended. The tests that make many HTTP requests (test_win_api,
  test_win_http_hostile) therefore run in a PrivatePrefix, whose
  wineserver's own messages go to a file printed at its end: the shared
  prefix's other tests do not go down with it (test_win_etw's runs exited
  0 with no output, and test_win_api's service stalled, in one CI run),
  and a failure says whether the server aborted. test_win_rundown's few
  requests stay in the shared prefix, whose processes it walks.
"""

import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from cwtest import require, stop  # noqa: E402

BIN = os.path.abspath(os.environ.get("CW_BIN", "build-win/commitwatch.exe"))
SOURCE = os.path.abspath(os.environ.get("CW_SOURCE", os.path.join(os.path.dirname(__file__),
                                                                  "..", "..")))
WINE_RUN = os.environ.get("CW_BIN_PREFIX") or os.path.join(SOURCE, "scripts", "wine_run.sh")
BUILD = os.path.abspath(os.environ.get("CW_BUILD", "build-win"))
MEMORYTESTAPP = os.environ.get("CW_MEMORYTESTAPP",
                               os.path.join(BUILD, "tests", "workloads", "memorytestapp.exe"))
SCCONTROL = os.environ.get("CW_SCCONTROL", os.path.join(BUILD, "tests", "wine", "sccontrol.exe"))
LINUX_BUILD = os.environ.get("CW_LINUX_BUILD", "")


def require_wine(*programs):
    """Wine, the launcher, the shared prefix and the given .exe files must be
    there: a failure in CI, a skip elsewhere (cwtest.require)."""
    require(shutil.which("wine") and shutil.which("wineserver"), "wine and wineserver on PATH "
            "(scripts/deps.sh --windows)")
    require(os.access(WINE_RUN, os.X_OK), f"the Wine launcher {WINE_RUN}")
    prefix = os.environ.get("WINEPREFIX", "")
    require(prefix and os.path.isfile(os.path.join(prefix, "system.reg")),
            f"the shared Wine prefix WINEPREFIX={prefix!r} (ctest's fixture test wine_prefix "
            "creates it: run the test through ctest)")
    for p in (BIN,) + programs:
        require(os.path.isfile(p), f"{p} (build the Windows build first)")


def win_path(path):
    """The Windows name of a host path (drive Z: maps /)."""
    return "Z:" + os.path.abspath(path).replace("/", "\\")


def _text(b):
    return b.decode("utf-8", "replace").replace("\r\n", "\n") if b is not None else ""


def run(args, env=None, timeout=120, input=None):
    """Runs `wine_run.sh args...` to its end: (exit code, stdout, stderr),
    line ends LF. env: extra environment (WINEPREFIX of a private prefix).
    The output goes to temporary files, not pipes: a program may start one
    that outlives it and inherits its handles (msiexec starts the service,
    a first program starts services.exe), and a pipe would then never see
    its end."""
    e = dict(os.environ, **(env or {}))
    if input is not None:
        e["CW_WINE_STDIN"] = "keep"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([WINE_RUN] + list(args), env=e, stdout=out, stderr=err,
                             stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
        try:
            p.communicate(input.encode() if input is not None else None, timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise
        out.seek(0)
        err.seek(0)
        return p.returncode, _text(out.read()), _text(err.read())


def cw(*args, **kw):
    """commitwatch.exe ARGS...: (exit code, stdout, stderr)."""
    return run([BIN] + list(args), **kw)


def spawn(args, env=None, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
          stderr=subprocess.STDOUT):
    """Starts `wine_run.sh args...` in the background (a subprocess.Popen).
    stdin=subprocess.PIPE keeps the program's standard input open (the
    launcher passes it on)."""
    e = dict(os.environ, **(env or {}))
    if stdin == subprocess.PIPE:
        e["CW_WINE_STDIN"] = "keep"
    return subprocess.Popen([WINE_RUN] + list(args), env=e, stdin=stdin, stdout=stdout,
                            stderr=stderr)


def ctrl_c(proc, timeout=30):
    """Stops a Wine-hosted console program with Ctrl+C (SIGINT to its wine
    process, which Wine delivers as CTRL_C_EVENT); its exit code, or None
    when it had to be killed after `timeout` seconds."""
    return stop(proc, signal.SIGINT, timeout)


def sc_state(env=None):
    """`sc query commitwatch`: its STATE name ("RUNNING", "STOPPED", ...),
    or None when the service does not exist (sc exits 1)."""
    rc, out, err = run(["sc", "query", "commitwatch"], env=env)
    m = re.search(r"STATE\s*:\s*\d+\s+(\w+)", out)
    return m.group(1) if rc == 0 and m else None


def wmic_processes(env=None):
    """{pid: image name} of the prefix's processes, from `wmic process get`
    (Wine's WMI: a listing apart from the Toolhelp snapshot commitwatch
    walks). wmic writes UTF-16."""
    e = dict(os.environ, **(env or {}))
    p = subprocess.run([WINE_RUN, "wmic", "process", "get", "Name,ProcessId"], env=e,
                       capture_output=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"wmic process get failed ({p.returncode}): {_text(p.stderr)}")
    text = p.stdout.decode("utf-16", "replace")
    out = {}
    for line in text.splitlines()[1:]:
        m = re.match(r"^(.*?)\s+(\d+)\s*$", line)
        if m:
            out[int(m.group(2))] = m.group(1)
    return out


REG_LINE = re.compile(r"^    (.*?)    (REG_\w+)    ?(.*)$")


def reg_values(key, env=None):
    """`reg query KEY`: {name: (type, data)} of its values, or None when the
    key does not exist."""
    rc, out, err = run(["reg", "query", key], env=env)
    if rc != 0:
        return None
    vals = {}
    for line in out.splitlines():
        m = REG_LINE.match(line)
        if m:
            vals[m.group(1)] = (m.group(2), m.group(3))
    return vals


class PrivatePrefix:
    """A Wine prefix of the test's own under $CW_BUILD/wine-e2e/NAME, created
    afresh (wine_run.sh --init), with a persistent wineserver started after
    the boot (so services.exe, and a service it starts, outlive each
    command); at the end its wineserver and programs are ended and the
    folder removed.

        with PrivatePrefix("service") as px:
            run([...], env=px.env)
    """

    def __init__(self, name, services_debug=None):
        """services_debug: WINEDEBUG channels for services.exe (e.g.
        "fixme+service"), whose messages then go to self.services_log."""
        self.path = os.path.join(BUILD, "wine-e2e", name)
        self.env = {"WINEPREFIX": self.path}
        self.services_debug = services_debug
        self.services_log = self.path + ".services.log"
        self.server_log = self.path + ".wineserver.log"

    def drive_c(self, *parts):
        return os.path.join(self.path, "drive_c", *parts)

    def __enter__(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        rc, out, err = run(["--init"], env=self.env, timeout=300)
        if rc != 0:
            raise RuntimeError(f"wine_run.sh --init of {self.path} failed ({rc}): {out}{err}")
        # After the boot (wineserver -w), never before it: a server started
        # first left two services.exe (WINDOWS.md).
        e = dict(os.environ, **self.env)
        with open(self.server_log, "w") as log:
            subprocess.run(["wineserver", "-p"], env=e, check=True, timeout=60, stderr=log)
        if self.services_debug:
            # The first program of a new wineserver starts services.exe,
            # which inherits its WINEDEBUG and stderr: a file (a pipe would
            # never see EOF), read by the test.
            with open(self.services_log, "w") as log:
                subprocess.run([WINE_RUN, "sc", "query", "eventlog"], timeout=120,
                               env=dict(e, WINEDEBUG="-all," + self.services_debug),
                               stdout=subprocess.DEVNULL, stderr=log)
        return self

    def server_said(self):
        """What the prefix's wineserver wrote (an abort's assertion)."""
        try:
            with open(self.server_log, errors="replace") as f:
                return f.read().strip()
        except OSError:
            return ""

    def __exit__(self, *exc):
        run(["--stop"], env=self.env, timeout=60)
        e = dict(os.environ, **self.env)
        subprocess.run(["wineserver", "-w"], env=e, timeout=60)
        said = self.server_said()
        if said:
            print(f"the wineserver of prefix {self.path} said (a failure above may be its "
                  f"abort, not commitwatch's):\n{said[-2000:]}", file=sys.stderr)
        shutil.rmtree(self.path, ignore_errors=True)
        if os.path.exists(self.server_log):
            os.remove(self.server_log)
        if os.path.exists(self.services_log):
            os.remove(self.services_log)
        return False


def own_prefix(name):
    """Runs the rest of the calling test in a PrivatePrefix of its own: sets
    WINEPREFIX for every later run(), cw(), spawn() and wmic_processes(),
    and ends the prefix at exit. For a test that needs nothing of the
    shared prefix: a Wine 8 wineserver abort there (WINDOWS.md, set off by
    other tests' sockets) ends every program of the prefix, and a test
    beside it then fails for nothing it did."""
    px = PrivatePrefix(name)
    px.__enter__()
    os.environ.update(px.env)
    atexit.register(px.__exit__, None, None, None)
    return px
