#!/usr/bin/env python3
"""test_win_msi.py - the Windows installer under Wine, in a private prefix.

    msiexec /i commitwatch-VERSION-x64.msi /qn
        -> %ProgramFiles%\\commitwatch holds commitwatch.exe, web\\ (with
           uPlot), stacktags\\ and tools\\memorytestapp.exe; the service
           "commitwatch" is registered (automatic start, LocalSystem) and
           running (Wine stores no recovery actions: test_win_service); the Event Log source is
           registered; /api/health answers and the dashboard is served from
           the installed web\\; an existing configuration is kept.
    a newer MSI (same UpgradeCode) -> an upgrade in place: one product
           installed, the service running again, the configuration and the
           database kept (the database's first bucket unchanged).
    msiexec /x -> the service, the program's files and the event source are
           gone; %ProgramData%\\commitwatch (configuration, database, log)
           stays.

Wine facts (../shared/WINDOWS.md): a service needs a persistent wineserver;
Wine's msiexec does not wait for a stopping service, so the service is
stopped (and polled until STOPPED) before an upgrade or an uninstall.
In a private prefix (cwwine.PrivatePrefix). Run by the Windows build's
ctest (label wine): CW_BUILD is the Windows build folder, which holds the
MSI (target msi)."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cwtest import require  # noqa: E402
from cwservice import free_port  # noqa: E402
import cwwine  # noqa: E402
from cwwine import BUILD, MEMORYTESTAPP, SOURCE, PrivatePrefix, reg_values, run, sc_state, win_path  # noqa: E402

failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond or not detail else f": {detail}"), flush=True)
    if not cond:
        failures.append(what)
    return cond


def wait_state(env, want, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if sc_state(env) == want:
            return True
        time.sleep(0.5)
    return False


def get(url, timeout=3):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except OSError:
        return None, b""


def wait_health(port, timeout=60, want=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st, body = get(f"http://127.0.0.1:{port}/api/health")
        if st == 200:
            h = json.loads(body)
            if want is None or want(h):
                return h
        time.sleep(0.5)
    return None


def main():
    msi = os.path.join(BUILD, "commitwatch-0.1.0-x64.msi")
    cwwine.require_wine(MEMORYTESTAPP)
    require(os.path.isfile(msi), f"{msi} (the Windows build's target msi)")
    require(shutil.which("wixl") and shutil.which("msiinfo"), "wixl and msiinfo (scripts/deps.sh --windows)")
    with PrivatePrefix("msi") as px:
        env = px.env
        port = free_port()
        # A configuration of our own first: the MSI must keep it.
        conf_dir = px.drive_c("ProgramData", "commitwatch")
        os.makedirs(conf_dir)
        with open(os.path.join(conf_dir, "commitwatch.conf"), "w") as f:
            f.write(f"# the test's own\nsource = rundown\nlisten = 127.0.0.1:{port}\n")

        rc, out, err = run(["msiexec", "/i", win_path(msi), "/qn"], env=env, timeout=300)
        check(rc == 0, "msiexec /i installs", out + err)
        prog = px.drive_c("Program Files", "commitwatch")
        for rel in ("commitwatch.exe", "web/index.html", "web/vendor/uplot/uPlot.esm.js",
                    "stacktags/windows.stacktags", "stacktags/linux.stacktags",
                    "tools/memorytestapp.exe"):
            check(os.path.isfile(os.path.join(prog, *rel.split("/"))), "installed " + rel)
        check(not os.path.exists(os.path.join(prog, "web", "package.json")), "no build files installed")
        conf = open(os.path.join(conf_dir, "commitwatch.conf")).read()
        check(conf.startswith("# the test's own"), "the existing configuration is kept", conf[:200])

        check(wait_state(env, "RUNNING"), "the service runs after the install", sc_state(env))
        svc = reg_values(r"HKLM\SYSTEM\CurrentControlSet\Services\commitwatch", env) or {}
        image = svc.get("ImagePath", ("", ""))[1]
        check("run --config" in image and "--db" in image and "ProgramData" in image,
              "the service runs commitwatch.exe run --config --db", svc)
        check(svc.get("Start") == ("REG_DWORD", "0x2"), "automatic start", svc)
        check(svc.get("ObjectName", ("", ""))[1] == "LocalSystem", "as LocalSystem", svc)
        ev = reg_values(r"HKLM\SYSTEM\CurrentControlSet\Services\EventLog\Application\commitwatch", env) or {}
        check("commitwatch.exe" in ev.get("EventMessageFile", ("", ""))[1] and "TypesSupported" in ev,
              "the Event Log source is registered", ev)

        h = wait_health(port, want=lambda h: h.get("ingest_done"))
        check(h is not None and h["source"] == "rundown" and h["events_ingested"] > 0,
              "/api/health answers: the rundown is stored", h)
        first = h["first_bucket_ns"] if h else None
        st, body = get(f"http://127.0.0.1:{port}/")
        check(st == 200 and b"commitwatch" in body, "the dashboard is served")
        st, _ = get(f"http://127.0.0.1:{port}/vendor/uplot/uPlot.esm.js")
        check(st == 200, "with uPlot")
        log = open(os.path.join(conf_dir, "commitwatch.log"), errors="replace").read()
        check("web root C:\\Program Files\\commitwatch\\web" in log, "from the installed web\\", log[-400:])

        # Upgrade in place: a newer MSI of the same UpgradeCode.
        newer = os.path.join(px.path + ".newer.msi")
        r = subprocess.run([os.path.join(SOURCE, "scripts", "build_msi.sh"), os.path.join(prog, "commitwatch.exe"),
                            "9.9.9", newer], capture_output=True, text=True, timeout=300, cwd=SOURCE)
        check(r.returncode == 0, "a newer MSI builds", r.stderr[-400:])
        rc, out, err = run(["C:\\Program Files\\commitwatch\\commitwatch.exe", "stop"], env=env)
        check(rc == 0 and wait_state(env, "STOPPED"),
              "commitwatch stop stops the service (before msiexec: Wine's does not wait)", out + err)
        rc, out, err = run(["msiexec", "/i", win_path(newer), "/qn"], env=env, timeout=300)
        check(rc == 0, "msiexec /i of the newer MSI upgrades", out + err)
        check(wait_state(env, "RUNNING"), "the service runs after the upgrade", sc_state(env))
        rc, out, _ = run(["reg", "query", r"HKLM\Software\Microsoft\Windows\CurrentVersion\Uninstall"], env=env)
        keys = [l.strip() for l in out.splitlines() if "{" in l]
        products = [reg_values(k, env) or {} for k in keys]
        ours = [v for v in products if "commitwatch" in v.get("DisplayName", ("", ""))[1]]
        check(len(ours) == 1 and ours[0].get("DisplayVersion", ("", ""))[1] == "9.9.9",
              "one commitwatch product, the newer one", ours)
        h2 = wait_health(port, want=lambda h: h.get("ingest_done"))
        check(h2 is not None and h2["first_bucket_ns"] == first, "the database is kept (its first bucket unchanged)",
              (first, h2 and h2["first_bucket_ns"]))
        conf = open(os.path.join(conf_dir, "commitwatch.conf")).read()
        check(conf.startswith("# the test's own"), "the configuration is kept by the upgrade")

        # Uninstall.
        run(["sc", "stop", "commitwatch"], env=env)
        check(wait_state(env, "STOPPED"), "the service stops before msiexec /x")
        rc, out, err = run(["msiexec", "/x", win_path(newer), "/qn"], env=env, timeout=300)
        check(rc == 0, "msiexec /x uninstalls", out + err)
        check(sc_state(env) is None, "the service is gone", sc_state(env))
        check(not os.path.exists(prog), "the program's files are gone",
              os.listdir(prog) if os.path.exists(prog) else "")
        ev = reg_values(r"HKLM\SYSTEM\CurrentControlSet\Services\EventLog\Application\commitwatch", env)
        check(ev is None, "the Event Log source is gone", ev)
        for f in ("commitwatch.conf", "commitwatch.db", "commitwatch.log"):
            check(os.path.isfile(os.path.join(conf_dir, f)), f"%ProgramData%\\commitwatch\\{f} stays")
        os.remove(newer)
    if failures:
        print("test_win_msi: FAILED: " + "; ".join(failures))
        return 1
    print("test_win_msi: every check held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
