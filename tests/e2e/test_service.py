#!/usr/bin/env python3
"""test_service.py - `commitwatch install | uninstall | start | stop` (Linux).

The unit the binary writes is installer/linux/commitwatch.service with the
binary's path filled in; `install --root DIR` writes the unit, a default
configuration and the state directory under DIR.

Then the real commands, never a silent no-op:
- where systemd is PID 1: the real install, start (the service runs and
  answers /api/health), stop and uninstall, as root; the machine is left as
  it was (a commitwatch.service already installed fails the test rather
  than being replaced);
- elsewhere (a container): the exact "systemd is not running" behaviour:
  install writes the files and exits 1 saying it cannot enable the
  service, uninstall removes the unit and exits 1, start and stop exit 1.
  As root this runs in a private mount namespace with copy-on-write
  overlays on /etc and /var/lib, so the real paths are written without
  touching the machine; without root, install says it needs root.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cwtest import require, wait_until  # noqa: E402

BIN = os.path.abspath(os.environ.get("CW_BIN", "build/commitwatch"))
SOURCE = os.environ.get("CW_SOURCE", ".")
UNIT = "/etc/systemd/system/commitwatch.service"
CONF = "/etc/commitwatch/commitwatch.conf"
STATE = "/var/lib/commitwatch"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)


def template():
    with open(os.path.join(SOURCE, "installer", "linux", "commitwatch.service")) as f:
        return f.read().replace("@COMMITWATCH@", os.path.realpath(BIN))


def no_systemd_message(cmd, did):
    """The exact message of a service command where systemd is not PID 1."""
    with open("/proc/1/comm") as f:
        init = f.read().strip()
    verb = {"install": "enabled", "uninstall": "disabled", "start": "started", "stop": "stopped"}[cmd]
    return (f"commitwatch {cmd}: systemd is not running on this machine (PID 1 is '{init}', as in a "
            f"container), so the service cannot be {verb} here. {did}"
            f"Run the daemon directly instead: commitwatch run --source perf --db {STATE}/commitwatch.db\n")


def staged():
    """--print-unit and --root: files only, never systemctl."""
    unit_text = template()
    r = run("install", "--print-unit")
    check(r.returncode == 0 and r.stdout == unit_text,
          "the printed unit is installer/linux/commitwatch.service with the binary's path")
    for key in ("ProtectSystem=strict", "ReadWritePaths=/var/lib/commitwatch", "PrivateTmp=yes",
                "NoNewPrivileges=yes", "CapabilityBoundingSet=CAP_PERFMON",
                "--db /var/lib/commitwatch/commitwatch.db", "ExecReload=/bin/kill -HUP $MAINPID"):
        check(key in r.stdout, "the unit has " + key)
    with tempfile.TemporaryDirectory() as root:
        r = run("install", "--root", root)
        check(r.returncode == 0, "install --root writes files: " + r.stderr.strip())
        unit = os.path.join(root, UNIT[1:])
        conf = os.path.join(root, CONF[1:])
        check(os.path.isfile(unit) and open(unit).read() == unit_text, "the unit file is written")
        check(os.path.isfile(conf) and os.path.getsize(conf) > 0, "a default configuration is written")
        check(os.path.isdir(os.path.join(root, STATE[1:])), "the state directory exists")
        with open(conf, "a") as f:
            f.write("\n# mine\n")
        r = run("install", "--root", root)
        check("kept" in r.stdout and open(conf).read().endswith("# mine\n"),
              "a second install keeps the configuration")
        r = run("uninstall", "--root", root)
        check(r.returncode == 0 and not os.path.exists(unit) and os.path.exists(conf),
              "uninstall --root removes the unit, keeps the configuration")
    r = run("start", "--bogus")
    check(r.returncode == 2 and "unexpected argument '--bogus'" in r.stderr,
          "a bad argument is a usage error (exit 2): " + r.stderr.strip().splitlines()[0])


def without_systemd_inside():
    """Runs inside a private mount namespace whose /etc and /var/lib are
    overlays: the real commands write the real paths, on the overlay."""
    had_conf = os.path.exists(CONF)
    r = run("install")
    check(r.returncode == 1, f"install without systemd exits 1 (got {r.returncode})")
    check(r.stderr == no_systemd_message(
        "install", "The unit file and the configuration were written; on a machine with systemd, "
                   "`commitwatch install` enables it. "),
          "install says systemd is not running, what it wrote, what to run: " + r.stderr.strip())
    want = [f"wrote {UNIT}", f"kept {CONF}" if had_conf else f"wrote {CONF} (default configuration)",
            f"database: {STATE}/commitwatch.db"]
    check(r.stdout.splitlines() == want, f"install prints what it wrote: {r.stdout!r}")
    check(os.path.isfile(UNIT) and open(UNIT).read() == template(), f"{UNIT} is written")
    check(os.path.isfile(CONF) and os.path.getsize(CONF) > 0, f"{CONF} is written")
    check(os.path.isdir(STATE), f"{STATE} exists")
    for cmd in ("start", "stop"):
        r = run(cmd)
        check(r.returncode == 1 and r.stderr == no_systemd_message(cmd, "") and r.stdout == "",
              f"{cmd} without systemd exits 1 saying so: " + r.stderr.strip())
    r = run("uninstall")
    check(r.returncode == 1, f"uninstall without systemd exits 1 (got {r.returncode})")
    check(r.stderr == no_systemd_message("uninstall", "The unit file was removed. "),
          "uninstall says systemd is not running and that the unit was removed: " + r.stderr.strip())
    check(r.stdout == f"removed {UNIT} (kept {CONF} and {STATE})\n", f"uninstall prints: {r.stdout!r}")
    check(not os.path.exists(UNIT) and os.path.isfile(CONF), "the unit is gone, the configuration kept")


def without_systemd():
    if os.geteuid() != 0:
        # Not root: the real paths cannot be written, and install says so.
        r = run("install")
        check(r.returncode == 1 and "cannot create directories" in r.stderr and "run as root" in r.stderr,
              "install as a user says it needs root: " + r.stderr.strip())
        for cmd in ("start", "stop"):
            r = run(cmd)
            check(r.returncode == 1 and r.stderr == no_systemd_message(cmd, ""),
                  f"{cmd} without systemd exits 1 saying so: " + r.stderr.strip())
        return
    require(shutil.which("unshare") and shutil.which("mount"), "unshare and mount (util-linux)")
    before = {p: os.path.exists(p) for p in (UNIT, CONF, STATE)}
    with tempfile.TemporaryDirectory(prefix="cw-svc-") as tmp:
        mounts = []
        for d in ("/etc", "/var/lib"):
            up, wk = os.path.join(tmp, d.strip("/").replace("/", "_")), os.path.join(tmp, "w" + d.replace("/", "_"))
            os.makedirs(up)
            os.makedirs(wk)
            mounts.append(f"mount -t overlay overlay -o lowerdir={d},upperdir={up},workdir={wk} {d}")
        script = " && ".join(mounts) + f" && exec {sys.executable} {os.path.abspath(__file__)} --inside"
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                           capture_output=True, text=True, timeout=120, env=os.environ)
        print(r.stdout, end="", flush=True)
        check(r.returncode == 0 and "FAIL" not in r.stdout,
              "the commands in a private mount namespace: " + (r.stderr.strip()[-2000:] or "ok"))
        check(r.stdout.count("ok   ") >= 10, "the namespace ran its checks")
    check({p: os.path.exists(p) for p in (UNIT, CONF, STATE)} == before,
          "the machine's /etc and /var/lib are untouched")


def free_port():
    with socket.socket() as s_:
        s_.bind(("127.0.0.1", 0))
        return s_.getsockname()[1]


def systemctl(*args):
    return subprocess.run(["systemctl", *args], capture_output=True, text=True, timeout=120)


def heap_trace_under_unit(listen, token):
    """The heap drill-down works inside the unit's sandbox (ptrace through
    its seccomp filter, the interposer's copy in /run/commitwatch that the
    traced process sees, not the unit's private /tmp): a process that
    allocates is traced for 2 s through the API, and its trace ends done,
    with events, no error."""
    work = subprocess.Popen([sys.executable, "-c",
                             "import sys, time\n"
                             "print('ready', flush=True)\n"
                             "keep = []\n"
                             "for i in range(400):\n"
                             "    keep.append(bytearray(4000))\n"
                             "    time.sleep(0.02)\n"], stdout=subprocess.PIPE, text=True)
    work.stdout.readline()

    def api(path, body=None):
        req = urllib.request.Request(f"http://{listen}{path}", method="POST" if body else "GET",
                                     data=json.dumps(body).encode() if body else None,
                                     headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=10) as h:
            return json.loads(h.read())

    def instance():
        try:
            procs = api(f"/api/processes?pid={work.pid}&from=-2m").get("processes", [])
        except (OSError, ValueError):
            return None
        return procs[0]["id"] if procs else None

    try:
        inst = wait_until(instance, 30, f"the service stores pid {work.pid}")
        tid = api(f"/api/processes/{inst}/heap-trace", {"duration": "2s"})["id"]
        tr = wait_until(lambda: (lambda t: t if t["state"] != "running" else None)(
            api(f"/api/heap-traces/{tid}")), 30, "the heap trace under the unit ends")
        check(tr["state"] == "done" and not tr.get("error") and tr.get("events", 0) > 0,
              "a heap trace works under the unit (ptrace, the interposer's copy in "
              f"/run/commitwatch): {tr['state']}, {tr.get('events')} events, "
              f"{tr.get('error')}")
    finally:
        work.kill()
        work.wait()


def with_systemd():
    """The real thing, as root: install, start, stop, uninstall."""
    require(os.geteuid() == 0, "root, to install a system service")
    if os.path.exists(UNIT):
        check(False, f"{UNIT} already exists: this test will not replace an installed service")
        return
    created = [p for p in (CONF, os.path.dirname(CONF), STATE) if not os.path.exists(p)]
    try:
        r = run("install")
        check(r.returncode == 0 and "enabled commitwatch.service" in r.stdout,
              "install enables the service: " + (r.stderr.strip() or r.stdout.strip()))
        check(os.path.isfile(UNIT) and open(UNIT).read() == template(), f"{UNIT} is the template")
        check(systemctl("is-enabled", "commitwatch.service").stdout.strip() == "enabled",
              "systemctl says it is enabled")
        # Where the service will listen: a free port when this test wrote
        # the configuration, else what the machine's configuration says.
        listen, token = "127.0.0.1:8470", None
        if CONF in created:
            listen, token = f"127.0.0.1:{free_port()}", "unit-heap-token"
            with open(CONF, "a") as f:
                f.write(f"\nlisten = {listen}\ntoken = {token}\n")
        else:
            for line in open(CONF):
                k, _, v = line.split("#")[0].partition("=")
                if k.strip() == "listen" and v.strip():
                    listen = v.strip()
        r = run("start")
        check(r.returncode == 0, "start exits 0: " + r.stderr.strip())
        wait_until(lambda: systemctl("is-active", "commitwatch.service").stdout.strip() == "active", 30,
                   "systemctl says commitwatch.service is active")

        def health():
            try:
                with urllib.request.urlopen(f"http://{listen}/api/health", timeout=5) as h:
                    return h.status == 200 and b'"source":"perf"' in h.read()
            except OSError:
                return False

        wait_until(health, 60, f"the installed service answers /api/health on {listen} "
                               "with source perf")
        check(True, "the started service traces with perf and serves its API")
        # Tracing works inside the unit's sandbox (capabilities, seccomp,
        # read-only system): a process that commits 48 MiB is stored with
        # them, from its syscalls and its smaps.
        work = subprocess.Popen([sys.executable, "-c",
                                 "import mmap, sys, time\n"
                                 "time.sleep(1.5)\n"
                                 "m = mmap.mmap(-1, 48 << 20)\n"
                                 "m.write(b'x' * (48 << 20))\n"
                                 "print('committed', flush=True)\n"
                                 "time.sleep(4)\n"], stdout=subprocess.PIPE, text=True)
        work.stdout.readline()

        def stored():
            try:
                url = f"http://{listen}/api/processes?pid={work.pid}&from=-2m"
                with urllib.request.urlopen(url, timeout=5) as h:
                    doc = json.loads(h.read())
            except (OSError, ValueError):
                return None
            procs = doc.get("processes", []) if isinstance(doc, dict) else doc
            sizes = [p.get("size_bytes", 0) for p in procs if p.get("pid") == work.pid]
            return sizes if sizes and max(sizes) >= 48 << 20 else None

        sizes = wait_until(stored, 30, f"the service stores pid {work.pid}'s 48 MiB commit")
        check(bool(sizes), f"a process's commits are traced under the unit: {sizes}")
        work.wait(timeout=30)
        if token:
            heap_trace_under_unit(listen, token)
        r = run("stop")
        check(r.returncode == 0, "stop exits 0: " + r.stderr.strip())
        wait_until(lambda: systemctl("is-active", "commitwatch.service").stdout.strip() in
                   ("inactive", "failed"), 30, "commitwatch.service stops")
        check(systemctl("is-active", "commitwatch.service").stdout.strip() == "inactive",
              "it stopped cleanly (inactive, not failed)")
        r = run("uninstall")
        check(r.returncode == 0 and not os.path.exists(UNIT), "uninstall removes the unit: " + r.stderr.strip())
        check(systemctl("cat", "commitwatch.service").returncode != 0, "systemd no longer knows the unit")
    finally:
        if os.path.exists(UNIT):
            systemctl("disable", "--now", "commitwatch.service")
            os.remove(UNIT)
            systemctl("daemon-reload")
        for p in created:
            if os.path.isdir(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.exists(p):
                os.remove(p)


def main():
    if not sys.platform.startswith("linux"):
        print("FAIL: this test is for Linux")
        return 1
    if sys.argv[1:] == ["--inside"]:
        without_systemd_inside()
        return 1 if failures else 0
    staged()
    if os.path.isdir("/run/systemd/system"):
        print("== systemd is PID 1: the real install, start, stop, uninstall", flush=True)
        with_systemd()
    else:
        print("== systemd is not running: the commands say so", flush=True)
        without_systemd()
    if failures:
        print("test_service: FAILED: " + "; ".join(failures))
        return 1
    print("test_service: every check held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
