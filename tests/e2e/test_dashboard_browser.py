"""test_dashboard_browser.py - the dashboard in a real browser: Debian's
chromium driven by playwright-core (web/node_modules, from `npm ci` in
web/). The checks are in dashboard_browser.mjs; this file starts the
services it drives:

- main: the MemoryTestApp fixture, fully ingested (figures known from the
  seed: the 10 MB step, the last four spikes);
- live: the same fixture paced at real time (`--rebase-now --speed 1`),
  still ingesting while the overview's 5 s refresh is watched;
- range: a small synthetic trace spanning 55 minutes (early.exe in the
  first minute, late.exe in the last five), so the overview's range
  selector changes what is listed;
- alerts: the fixture again, with a token, and alert state stored beside
  it by tests/alertfill (alertdoc.py): the Alerts page, the overview's
  badges and leak scores, the process chart's alert periods.

A missing prerequisite (node, chromium, web/node_modules) fails the test
in CI (CI set in the environment, or running as root) and skips it (exit
77) elsewhere. Screenshots: $CW_BUILD/screenshots/."""

import contextlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BUILD, MTA, MTA_WINDOWS, SOURCE, Service, require_fixture  # noqa: E402
import alertdoc  # noqa: E402
import cwbrowser  # noqa: E402

require_fixture()


node, chromium, shots = cwbrowser.prerequisites(
    modules=("playwright-core", "uplot"),
    extra=[(not (alertdoc.FILL and os.path.exists(alertdoc.FILL)),
            "cw_alert_fill (tests/alertfill; CW_ALERT_FILL)")])

# The range service's trace: 55 minutes with a process at each end.
T0 = 1750000000000000000
MIN = 60 * 10**9
RANGE_SPEC = {
    "t0_ns": T0,
    "early": {"name": "early.exe", "pid": 100, "start_ns": T0, "exit_ns": T0 + MIN},
    "late": {"name": "late.exe", "pid": 200, "start_ns": T0 + 50 * MIN},
    "end_ns": T0 + 55 * MIN,
}


def write_range_trace(path):
    stack_e = ["early.exe!main", "KernelBase.dll!VirtualAlloc", "ntdll.dll!NtAllocateVirtualMemory"]
    stack_l = ["late.exe!main", "KernelBase.dll!VirtualAlloc", "ntdll.dll!NtAllocateVirtualMemory"]
    ev = [
        {"format": "commitwatch-trace", "version": 1, "platform": "windows", "pointer_size": 8},
        {"ts": T0, "op": "process_start", "pid": 100, "name": "early.exe"},
        {"ts": T0 + 10**9, "op": "commit", "pid": 100, "addr": "0x100000", "size": 1 << 20, "stack": stack_e},
        {"ts": T0 + MIN, "op": "process_exit", "pid": 100},
        {"ts": T0 + 50 * MIN, "op": "process_start", "pid": 200, "name": "late.exe"},
        {"ts": T0 + 50 * MIN + 10**9, "op": "commit", "pid": 200, "addr": "0x200000", "size": 2 << 20, "stack": stack_l},
        {"ts": T0 + 55 * MIN, "op": "decommit", "pid": 200, "addr": "0x200000", "size": 1 << 20, "stack": stack_l},
    ]
    with open(path, "w") as f:
        for e in ev:
            f.write(json.dumps(e) + "\n")


gen_dir = os.path.join(BUILD, "e2e-http", "browser-gen")
os.makedirs(gen_dir, exist_ok=True)
range_trace = os.path.join(gen_dir, "range.jsonl")
range_spec = os.path.join(gen_dir, "range.json")
write_range_trace(range_trace)
with open(range_spec, "w") as f:
    json.dump(RANGE_SPEC, f)

with contextlib.ExitStack() as stack:
    main = stack.enter_context(Service(MTA, name="browser"))
    rng = stack.enter_context(Service(range_trace, name="browser-range"))
    alerts = stack.enter_context(Service(MTA, name="browser-alerts", args=["--token", "s3cret"],
                                         config=alertdoc.CONFIG))
    proc = alertdoc.proc_id(alerts)
    alert_ids = alertdoc.fill(alerts, alertdoc.fill_doc(proc))
    alert_spec = os.path.join(gen_dir, "alerts.json")
    with open(alert_spec, "w") as f:
        json.dump({"ids": alert_ids, "proc": proc, "token": "s3cret", "name": alertdoc.NAME,
                   "e1": alertdoc.E1, "e2": alertdoc.E2}, f)
    # Last, so its replay has as much of its 32 s left as possible when
    # the browser gets to it (the live checks come first).
    live = stack.enter_context(Service(MTA, name="browser-live", wait_done=False,
                                       args=["--rebase-now", "--speed", "1"]))
    env = dict(os.environ, CW_URL=main.base, CW_LIVE_URL=live.base, CW_RANGE_URL=rng.base,
               CW_RANGE_SPEC=range_spec, CW_ALERTS_URL=alerts.base, CW_ALERTS_SPEC=alert_spec, CW_WINDOWS=MTA_WINDOWS, CW_SHOTS=shots,
               CW_SOURCE=SOURCE, CW_CHROMIUM=chromium)
    cwbrowser.run_driver(node, "dashboard_browser.mjs", env, 180, shots, "failure.png")
