#!/usr/bin/env python3
"""test_service_systemd_root.py - the hardened unit under a real systemd.

Build machines and CI run in containers whose PID 1 is not systemd, so
test_service.py there checks only the "systemd is not running" answers.
This test boots a real systemd (the machine's own, systemd 252) as PID 1
of a systemd-nspawn container over the machine's root (--volatile=yes: a
tmpfs root, /usr from the machine read-only, so nothing of the machine is
written) and runs test_service.py inside it, where it takes its real path:
`commitwatch install` writes and enables the unit, `start` starts it, the
service answers /api/health with the perf source, a process's 48 MiB
commit is stored (tracing works inside the unit's sandbox: its capability
bounding set, seccomp filter, read-only system), even while a process of
the machine outside the container floods the tracepoints (its records
reach the service with pid 0 and are dropped), `stop` leaves it
inactive (not failed), `uninstall` removes it.

The container keeps every capability the machine gives (so the unit's
CapabilityBoundingSet= is what limits the service) and allows
perf_event_open through nspawn's own seccomp filter, which leaves it out
by default (the service then says that a filter refused the call).

The service runs the build as installed: `cmake --install BUILD --prefix
/opt/commitwatch` (the binary and its data, the dashboard and the default
stack tags, which it finds beside itself in ../share/commitwatch) into a
staging folder (DESTDIR) bound at /opt/commitwatch in the container. Not
the checkout: the container sees none of the machine but /usr, and the
unit's PrivateTmp= would hide a checkout under /tmp (CI's clone) anyway,
so the source tree's stack tags compiled into the binary are never found
there, wherever the checkout is. The checkout (test_service.py and the unit
template it compares with) is bound at /opt/cw-test-src for the test alone.

Needs root, systemd-nspawn (package systemd-container), nsenter
(util-linux), cmake and a merged /usr; fails (never skips) in CI without
them.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from cwtest import require  # noqa: E402

BIN = os.path.realpath(os.environ.get("CW_BIN", "build/commitwatch"))
SOURCE = os.path.realpath(os.environ.get("CW_SOURCE", "."))
BUILD = os.path.realpath(os.environ.get("CW_BUILD", os.path.dirname(BIN)))
PREFIX = "/opt/commitwatch"  # where the container sees the installed build


# A process outside the container: mmap and munmap in a loop (about 300 000
# calls a second on one core), until killed.
FLOOD = "import mmap\nwhile True:\n    mmap.mmap(-1, 1 << 16).close()\n"


def stage_install(stage):
    """The build installed for PREFIX into stage (DESTDIR): bin/commitwatch
    and share/commitwatch/{web,stacktags}; the binary under test is the one
    installed. Returns the installed binary's path on this machine."""
    r = subprocess.run(["cmake", "--install", BUILD, "--prefix", PREFIX, "--component", "Unspecified"],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "DESTDIR": stage})
    if r.returncode != 0:
        raise SystemExit(f"FAIL: cmake --install {BUILD}: {r.stdout[-1500:]}{r.stderr[-1500:]}")
    root = stage + PREFIX
    installed = os.path.join(root, "bin", "commitwatch")
    if os.path.realpath(BIN) != os.path.join(BUILD, "commitwatch"):
        shutil.copy2(BIN, installed)  # CW_BIN from elsewhere: that binary, the build's data
    for need in ("bin/commitwatch", "share/commitwatch/stacktags/linux.stacktags",
                 "share/commitwatch/web/index.html"):
        if not os.path.isfile(os.path.join(root, need)):
            raise SystemExit(f"FAIL: cmake --install did not install {PREFIX}/{need}")
    return root


def container_init(nspawn, timeout=60):
    """The pid (on this machine) of the container's systemd, once booted."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if nspawn.poll() is not None:
            raise SystemExit(f"FAIL: systemd-nspawn exited {nspawn.returncode}: "
                             f"{nspawn.stdout.read()[-3000:]}")
        kids = subprocess.run(["pgrep", "-P", str(nspawn.pid)], capture_output=True,
                              text=True).stdout.split()
        for k in kids:
            try:
                with open(f"/proc/{k}/comm") as f:
                    if f.read().strip() == "systemd":
                        return int(k)
            except OSError:
                pass
        time.sleep(0.2)
    raise SystemExit("FAIL: the container's systemd did not start in time")


def inside(pid, *cmd, timeout=120, env=()):
    return subprocess.run(["nsenter", "-t", str(pid), "-a", "env", *env, *cmd],
                          capture_output=True, text=True, timeout=timeout)


def main():
    require(os.geteuid() == 0, "root (to boot a systemd container)")
    require(shutil.which("systemd-nspawn"), "systemd-nspawn (apt-get install systemd-container)")
    require(shutil.which("nsenter"), "nsenter (util-linux)")
    require(os.path.islink("/bin") or os.path.realpath("/bin") == "/usr/bin",
            "a merged /usr (nspawn --volatile=yes boots from /usr alone)")
    require(os.path.isfile("/lib/systemd/systemd"), "systemd installed")
    # The container has /usr only: the test runs on the system's Python.
    require(os.path.isfile("/usr/bin/python3"), "/usr/bin/python3 (python3)")
    require(shutil.which("cmake"), "cmake (to install the build)")
    require(os.path.isfile(os.path.join(BUILD, "cmake_install.cmake")),
            f"the build folder {BUILD} (CW_BUILD), to install it")
    name = f"cw-svc-{os.getpid()}"
    stage = tempfile.mkdtemp(prefix="cw-sysd-install-")
    try:
        root = stage_install(stage)
        return boot(name, root)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def boot(name, root):
    # Under /opt in the container (the unit's PrivateTmp= would hide /tmp
    # from the service): the installed build, and the checkout for the test.
    src_in = "/opt/cw-test-src"
    binds = [f"--bind-ro={root}:{PREFIX}", f"--bind-ro={SOURCE}:{src_in}"]
    bin_in = PREFIX + "/bin/commitwatch"
    nspawn = subprocess.Popen(
        ["systemd-nspawn", "--quiet", "--register=no", "--keep-unit", "--directory=/",
         "--volatile=yes", "--capability=all", "--system-call-filter=perf_event_open",
         "--console=pipe", f"--machine={name}", *binds, "--boot",
         # Only what a service needs (basic.target): not the machine's
         # other enabled services, which would start in its network.
         "systemd.unit=basic.target"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    failed = True
    try:
        pid = container_init(nspawn)
        # systemctl answers once systemd listens on its private socket.
        deadline = time.monotonic() + 60
        while True:
            r = inside(pid, "systemctl", "is-system-running", "--wait", timeout=120)
            state = r.stdout.strip()
            if state or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        # "degraded": units of the machine's own that cannot run in a
        # container (or without their configuration) failed; not ours.
        print(f"container {name}: systemd is PID 1 ({state})", flush=True)
        if state not in ("running", "degraded"):
            print(f"FAIL: the container did not boot: {state} {r.stderr}")
            return 1
        # Meanwhile a process of this machine, outside the container's PID
        # namespace, maps and unmaps as fast as it can: the service sees
        # its records with pid 0 and must drop them cheaply, or it falls
        # behind and loses the container's own records.
        flood = subprocess.Popen([sys.executable, "-c", FLOOD], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL)
        try:
            r = inside(pid, "/usr/bin/python3", os.path.join(src_in, "tests", "e2e", "test_service.py"),
                       env=(f"CW_BIN={bin_in}", f"CW_SOURCE={src_in}", "CI=true"), timeout=300)
        finally:
            flood.kill()
            flood.wait()
        print(r.stdout, end="")
        j = inside(pid, "journalctl", "-u", "commitwatch", "--no-pager", "-n", "40")
        if r.returncode != 0 or "== systemd is PID 1" not in r.stdout or \
                "ok   a process's commits are traced under the unit" not in r.stdout:
            print(f"FAIL: test_service.py under systemd: exit {r.returncode}\n{r.stderr[-3000:]}\n"
                  f"journal of commitwatch.service:\n{j.stdout}")
            return 1
        if "records of tasks outside this PID namespace dropped" not in j.stdout:
            print("FAIL: the service did not count the host's records it dropped (pid 0)\n"
                  f"journal of commitwatch.service:\n{j.stdout}")
            return 1
        print("ok   the host's records (pid 0 in the container) were dropped and counted")
        failed = False
        print("test_service_systemd_root: the unit held under a real systemd")
        return 0
    finally:
        try:
            if nspawn.poll() is None:
                p = container_init(nspawn, 5)
                inside(p, "systemctl", "poweroff", timeout=30)
                nspawn.wait(timeout=60)
        except (subprocess.TimeoutExpired, SystemExit):
            nspawn.send_signal(signal.SIGKILL)
            nspawn.wait(timeout=30)
        if failed and nspawn.stdout:
            print("container console (last lines):\n" + nspawn.stdout.read()[-2000:])


if __name__ == "__main__":
    sys.exit(main())
