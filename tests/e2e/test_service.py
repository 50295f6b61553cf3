#!/usr/bin/env python3
"""test_service.py - `commitwatch install | uninstall | start | stop` (Linux).

The unit the binary writes is installer/linux/commitwatch.service with the
binary's path filled in; `install --root DIR` writes the unit, a default
configuration and the state directory under DIR; where systemd is not PID 1
the commands say so and exit 1. Needs no root."""
import os
import subprocess
import sys
import tempfile

BIN = os.path.abspath(os.environ.get("CW_BIN", "build/commitwatch"))
SOURCE = os.environ.get("CW_SOURCE", ".")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)


def main():
    if not sys.platform.startswith("linux"):
        print("FAIL: this test is for Linux")
        return 1
    with open(os.path.join(SOURCE, "installer", "linux", "commitwatch.service")) as f:
        template = f.read()
    real = os.path.realpath(BIN)
    r = run("install", "--print-unit")
    check(r.returncode == 0 and r.stdout == template.replace("@COMMITWATCH@", real),
          "the printed unit is installer/linux/commitwatch.service with the binary's path")
    for key in ("ProtectSystem=strict", "ReadWritePaths=/var/lib/commitwatch", "PrivateTmp=yes",
                "NoNewPrivileges=yes", "CapabilityBoundingSet=CAP_PERFMON",
                "--db /var/lib/commitwatch/commitwatch.db", "ExecReload=/bin/kill -HUP $MAINPID"):
        check(key in r.stdout, "the unit has " + key)
    with tempfile.TemporaryDirectory() as root:
        r = run("install", "--root", root)
        check(r.returncode == 0, "install --root writes files: " + r.stderr.strip())
        unit = os.path.join(root, "etc/systemd/system/commitwatch.service")
        conf = os.path.join(root, "etc/commitwatch/commitwatch.conf")
        check(os.path.isfile(unit) and open(unit).read() == template.replace("@COMMITWATCH@", real),
              "the unit file is written")
        check(os.path.isfile(conf) and os.path.getsize(conf) > 0, "a default configuration is written")
        check(os.path.isdir(os.path.join(root, "var/lib/commitwatch")), "the state directory exists")
        with open(conf, "a") as f:
            f.write("\n# mine\n")
        r = run("install", "--root", root)
        check("kept" in r.stdout and open(conf).read().endswith("# mine\n"),
              "a second install keeps the configuration")
        r = run("uninstall", "--root", root)
        check(r.returncode == 0 and not os.path.exists(unit) and os.path.exists(conf),
              "uninstall --root removes the unit, keeps the configuration")
    if not os.path.isdir("/run/systemd/system"):
        for cmd in ("start", "stop"):
            r = run(cmd)
            check(r.returncode == 1 and "systemd is not running" in r.stderr,
                  f"{cmd} without systemd says so: " + r.stderr.strip())
    else:
        r = run("start", "--bogus")
        check(r.returncode == 2, "a bad argument is a usage error")
    if failures:
        print("test_service: FAILED: " + "; ".join(failures))
        return 1
    print("test_service: every check held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
