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
from cwservice import free_port, Checks  # noqa: E402
import cwwine  # noqa: E402
from cwwine import BUILD, MEMORYTESTAPP, SOURCE, PrivatePrefix, reg_values, run, sc_state, win_path  # noqa: E402

t = Checks()


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
        t.check("msiexec /i installs", rc == 0, out + err)
        prog = px.drive_c("Program Files", "commitwatch")
        for rel in ("commitwatch.exe", "web/index.html", "web/vendor/uplot/uPlot.esm.js",
                    "stacktags/windows.stacktags", "stacktags/linux.stacktags",
                    "tools/memorytestapp.exe"):
            t.check("installed " + rel, os.path.isfile(os.path.join(prog, *rel.split("/"))))
        t.check("no build files installed", not os.path.exists(os.path.join(prog, "web", "package.json")))
        conf = open(os.path.join(conf_dir, "commitwatch.conf")).read()
        t.check("the existing configuration is kept", conf.startswith("# the test's own"), conf[:200])

        t.check("the service runs after the install", wait_state(env, "RUNNING"), sc_state(env))
        svc = reg_values(r"HKLM\SYSTEM\CurrentControlSet\Services\commitwatch", env) or {}
        image = svc.get("ImagePath", ("", ""))[1]
        t.check("the service runs commitwatch.exe run --config --db",
              "run --config" in image and "--db" in image and "ProgramData" in image, svc)
        t.check("automatic start", svc.get("Start") == ("REG_DWORD", "0x2"), svc)
        t.check("as LocalSystem", svc.get("ObjectName", ("", ""))[1] == "LocalSystem", svc)
        ev = reg_values(r"HKLM\SYSTEM\CurrentControlSet\Services\EventLog\Application\commitwatch", env) or {}
        t.check("the Event Log source is registered",
              "commitwatch.exe" in ev.get("EventMessageFile", ("", ""))[1] and "TypesSupported" in ev, ev)

        h = wait_health(port, want=lambda h: h.get("ingest_done"))
        t.check("/api/health answers: the rundown is stored",
              h is not None and h["source"] == "rundown" and h["events_ingested"] > 0, h)
        first = h["first_bucket_ns"] if h else None
        st, body = get(f"http://127.0.0.1:{port}/")
        t.check("the dashboard is served", st == 200 and b"commitwatch" in body)
        st, _ = get(f"http://127.0.0.1:{port}/vendor/uplot/uPlot.esm.js")
        t.check("with uPlot", st == 200)
        log = open(os.path.join(conf_dir, "commitwatch.log"), errors="replace").read()
        t.check("from the installed web\\", "web root C:\\Program Files\\commitwatch\\web" in log, log[-400:])

        # Upgrade in place: a newer MSI of the same UpgradeCode.
        newer = os.path.join(px.path + ".newer.msi")
        r = subprocess.run([os.path.join(SOURCE, "scripts", "build_msi.sh"), os.path.join(prog, "commitwatch.exe"),
                            "9.9.9", newer], capture_output=True, text=True, timeout=300, cwd=SOURCE)
        t.check("a newer MSI builds", r.returncode == 0, r.stderr[-400:])
        rc, out, err = run(["C:\\Program Files\\commitwatch\\commitwatch.exe", "stop"], env=env)
        t.check("commitwatch stop stops the service (before msiexec: Wine's does not wait)",
              rc == 0 and wait_state(env, "STOPPED"), out + err)
        rc, out, err = run(["msiexec", "/i", win_path(newer), "/qn"], env=env, timeout=300)
        t.check("msiexec /i of the newer MSI upgrades", rc == 0, out + err)
        t.check("the service runs after the upgrade", wait_state(env, "RUNNING"), sc_state(env))
        rc, out, _ = run(["reg", "query", r"HKLM\Software\Microsoft\Windows\CurrentVersion\Uninstall"], env=env)
        keys = [l.strip() for l in out.splitlines() if "{" in l]
        products = [reg_values(k, env) or {} for k in keys]
        ours = [v for v in products if "commitwatch" in v.get("DisplayName", ("", ""))[1]]
        t.check("one commitwatch product, the newer one",
              len(ours) == 1 and ours[0].get("DisplayVersion", ("", ""))[1] == "9.9.9", ours)
        h2 = wait_health(port, want=lambda h: h.get("ingest_done"))
        t.check("the database is kept (its first bucket unchanged)", h2 is not None and h2["first_bucket_ns"] == first,
              (first, h2 and h2["first_bucket_ns"]))
        conf = open(os.path.join(conf_dir, "commitwatch.conf")).read()
        t.check("the configuration is kept by the upgrade", conf.startswith("# the test's own"))

        # Uninstall.
        run(["sc", "stop", "commitwatch"], env=env)
        t.check("the service stops before msiexec /x", wait_state(env, "STOPPED"))
        rc, out, err = run(["msiexec", "/x", win_path(newer), "/qn"], env=env, timeout=300)
        t.check("msiexec /x uninstalls", rc == 0, out + err)
        t.check("the service is gone", sc_state(env) is None, sc_state(env))
        t.check("the program's files are gone", not os.path.exists(prog),
              os.listdir(prog) if os.path.exists(prog) else "")
        ev = reg_values(r"HKLM\SYSTEM\CurrentControlSet\Services\EventLog\Application\commitwatch", env)
        t.check("the Event Log source is gone", ev is None, ev)
        for f in ("commitwatch.conf", "commitwatch.db", "commitwatch.log"):
            t.check(f"%ProgramData%\\commitwatch\\{f} stays", os.path.isfile(os.path.join(conf_dir, f)))
        os.remove(newer)
    if t.failures:
        print("test_win_msi: FAILED: " + "; ".join(t.failures))
    t.done()  # exits 1 on a failure, or when no check ran


if __name__ == "__main__":
    sys.exit(main())
