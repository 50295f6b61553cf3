#!/usr/bin/env python3
"""bench_all.py - the whole benchmark set as one command, one table
(scripts/bench.sh runs it; docs/BENCHMARKS.md explains each figure).

Runs each benchmark of bench/ with the sizes for this machine, keeps its
whole output in OUT/NAME.log, reads its figures from that output and
prints one table: benchmark, figure, goal, met. A figure it cannot read
(a benchmark that failed, or whose output changed) is an error: the
table says which log to read and the exit status is 1.

    bench/bench_all.py [--quick] [--root] [--only REGEX] [--out DIR] [--markdown FILE] BUILD

--quick: small sizes (a check that every benchmark runs and parses, in a
few minutes; its figures are not the benchmark's). --root: adds the
benchmarks that trace the machine with the perf source (as root): the
source's overhead on other programs, the daemon's memory and the CPU its
kept unwinding state saves.
"""
import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Table:
    def __init__(self):
        self.rows = []  # (bench, figure, value text, goal text, met)
        self.errors = []

    def add(self, bench, figure, value, goal="-", met=None):
        self.rows.append((bench, figure, value, goal, met))

    def fail(self, bench, why):
        self.errors.append(f"{bench}: {why}")
        self.rows.append((bench, "(no figure)", why, "-", False))

    def markdown(self):
        out = ["| benchmark | figure | value | goal | met |", "| --- | --- | ---: | --- | --- |"]
        for b, f, v, g, m in self.rows:
            out.append(f"| {b} | {f} | {v} | {g} | {'-' if m is None else ('yes' if m else 'no')} |")
        return "\n".join(out)


def run(name, cmd, out, env=None, timeout=3600, any_status=False):
    """Runs cmd with its output in OUT/name.log; returns the text, or None
    when it failed (any_status: the text whatever its exit status, for a
    benchmark that is also a test and fails when over its budget)."""
    log = os.path.join(out, name + ".log")
    t = time.monotonic()
    e = dict(os.environ, **(env or {}))
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=e, timeout=timeout,
                               cwd=out)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    took = time.monotonic() - t
    print(f"  {name}: {took:.0f} s" + ("" if rc == 0 else f", exit {rc} (see {log})"),
          file=sys.stderr, flush=True)
    text = open(log).read()
    return text if rc == 0 or (any_status and rc != "timeout") else None


def kv(line):
    return dict(x.split("=", 1) for x in line.split() if "=" in x)


def first(pattern, text):
    m = re.search(pattern, text, re.M)
    return m.group(1) if m else None


def ms(wrk_latency):
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", wrk_latency)
    if not m:
        return None
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]


def n(x):
    return f"{x:,.0f}"


def bench_pipeline(t, b, out, quick):
    events = 1_000_000 if quick else 10_000_000
    exe = os.path.join(b, "bench", "bench_pipeline")
    res = {}
    for mode in ("agg", "store"):
        db = os.path.join(out, "pipeline.db")
        text = run(f"pipeline-{mode}", [exe, "--events", str(events), "--mode", mode, "--db", db],
                   out)
        line = first(r"^(mode=.*)$", text or "")
        if not line:
            t.fail("core pipeline", f"bench_pipeline --mode {mode}: see pipeline-{mode}.log")
            return
        res[mode] = kv(line)
        if mode == "store":
            size = sum(os.path.getsize(db + s) for s in ("", "-wal") if os.path.exists(db + s))
            res["bytes"] = size
    agg, st = res["agg"], res["store"]
    a_cpu = float(agg["events_per_cpu_s"])
    t.add("core pipeline", f"tracker + aggregator, events per CPU-s ({n(events)} events)",
          n(a_cpu), ">= 2,000,000", a_cpu >= 2e6)
    s_eps = float(st["events_per_s"])
    t.add("core pipeline", "+ store writer into SQLite, events/s (wall)", n(s_eps),
          ">= 1,000,000", s_eps >= 1e6)
    ratio = s_eps / float(agg["events_per_s"])
    t.add("core pipeline", "store / in-memory pipeline, same run", f"{ratio:.0%}", ">= 25 %",
          ratio >= 0.25)
    bpe = res["bytes"] / float(st["events"])
    t.add("core pipeline", "database bytes per event (all tables, WAL included)", f"{bpe:.1f}",
          "<= 4", bpe <= 4)
    t.add("core pipeline", "peak RSS with the store, MiB", st["peak_rss_mib"])


def bench_etl(t, b, out, quick):
    events = 1_000_000 if quick else 5_000_000
    exe = os.path.join(b, "bench", "bench_etl")
    etl = os.path.join(out, "bench.etl")
    for mode, reuse in (("decode", []), ("store", ["--reuse"])):
        text = run(f"etl-{mode}", [exe, "--events", str(events), "--etl", etl, "--mode", mode,
                                   "--db", os.path.join(out, "etl.db")] + reuse, out)
        line = first(r"^(mode=.*)$", text or "")
        if not line:
            t.fail("ETW .etl source", f"bench_etl --mode {mode}: see etl-{mode}.log")
            return
        r = kv(line)
        what = "decode (read, decompress, merge, join stacks)" if mode == "decode" else \
            "the whole path into SQLite"
        t.add("ETW .etl source", f"{what}, VirtualAlloc/Free per s", n(float(r["valloc_per_s"])))
    os.remove(etl)


def bench_tagging(t, b, out, quick):
    text = run("tagging", [os.path.join(b, "bench", "bench_tagging"), "--stacks",
                           "50000" if quick else "500000"], out)
    v = first(r"^tag stacks:\s+(\d+) stacks/s", text or "")
    if not v:
        t.fail("stack tagging", "see tagging.log")
        return
    t.add("stack tagging", "distinct 30-frame stacks tagged per s, one core (Windows rules)",
          n(int(v)), ">= 500,000", int(v) >= 500_000)


def bench_alerts(t, b, out, quick):
    procs = "100" if quick else "1000"
    text = run("alerts", [os.path.join(b, "bench", "bench_alerts"), "--mode", "eval", "--procs",
                          procs, "--tags", "10", "--evals", "5"], out)
    v = first(r"^eval all rules .*?: ([\d.]+) ms CPU per evaluation", text or "")
    if not v:
        t.fail("alert engine", "see alerts.log")
        return
    t.add("alert engine", f"one evaluation of the shipped rules, {procs} x 10 series, 6 h, ms CPU",
          v)


def bench_http(t, b, out, quick):
    if not shutil.which("wrk"):
        t.fail("HTTP", "wrk is not installed (apt-get install wrk)")
        return
    env = {"PROCS": "20" if quick else "1000", "DURATION": "3" if quick else "10", "CONNS": "1",
           "DATA": os.path.join(out, "http-data"), "DASHBOARD": "1"}
    text = run("http", ["bash", os.path.join(ROOT, "bench", "http_bench.sh"), b], out, env)
    if not text:
        t.fail("HTTP", "see http.log")
        return
    goals = [("processes-last-hour", "/api/processes (last hour)", 50),
             ("process-series-24h-auto", "a process's 24 h series", 50),
             ("system-series-24h", "the machine's 24 h series", 100),
             ("metrics", "/metrics", 100)]
    for key, what, goal in goals:
        p99 = first(rf"^{key}\s+c=1 .* p99\s+(\S+)", text)
        v = ms(p99) if p99 else None
        if v is None:
            t.fail("HTTP", f"no p99 for {key}: see http.log")
            continue
        t.add("HTTP", f"{what}, p99 ms, one client, {env['PROCS']} processes, 24 h, ingesting",
              f"{v:.1f}", f"< {goal}", v < goal)
    med = first(r"^median: (\d+) ms", text)
    if med:
        t.add("HTTP", "dashboard: 24 h process chart, navigation to drawn chart, median ms", med,
              "< 1000", int(med) < 1000)
    else:
        t.fail("HTTP", "no dashboard timing (node, chromium, web/node_modules): see http.log")


def bench_short(t, b, out, quick):
    minutes = "2" if quick else "10"
    text = run("short-lived", [sys.executable, os.path.join(ROOT, "bench", "short_trace.py"),
                               "-m", minutes, "-o", out, os.path.join(b, "commitwatch")], out)
    m = re.search(r"^\S+commitwatch\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)",
                  text or "", re.M)
    if not m:
        t.fail("short-lived processes", "see short-lived.log")
        return
    mbmin, analyze = float(m.group(2)), float(m.group(6)) * 1000
    what = f"{minutes} min of four churners and 30 short processes a second, replayed"
    t.add("short-lived processes", f"database MB per minute ({what})", f"{mbmin:.2f}", "<= 0.5",
          mbmin <= 0.5)
    t.add("short-lived processes", "whole-window report (analyze --db), median ms",
          f"{analyze:.0f}", "< 200", analyze < 200)


def bench_pictures(t, b, out, quick):
    text = run("pictures", ["bash", os.path.join(ROOT, "bench", "first_paint.sh"), b], out,
               any_status=True)
    # The driver's timing line, or the test's FAIL line when over budget.
    flame = first(r"^(?:FAIL )?big: .*?(\d+(?:, \d+)+) ms", text or "")
    mp = first(r"100k-range first paint \(fetch\+parse\+layout\+draw\), 5 loads: ([^;]+);",
               text or "")
    if not flame or not mp:
        t.fail("pictures", "no first-paint timing (chromium, web/node_modules): see pictures.log")
        return
    f = [int(x) for x in flame.replace(" ", "").split(",") if x]
    m = [float(x.split()[0]) for x in mp.split(",")]
    t.add("pictures", "flame graph of 100,000 live ranges, click to first paint, best ms",
          str(min(f)), "< 1000", min(f) < 1000)
    t.add("pictures", "memory map of 100,000 live ranges, first paint, best of 5 ms",
          f"{min(m):.0f}", "< 1000", min(m) < 1000)


def bench_perf_overhead(t, b, out, quick):
    args = ["--runs", "3", "--churn", "5000000", "--storm", "1000", "--storm-bare", "50000"] \
        if quick else []
    text = run("perf-overhead", [sys.executable, os.path.join(ROOT, "bench", "perf_overhead.py"),
                                 "--build", b] + args, out)
    rows = {"malloc churn": ("small-block malloc churn, traced / bare", 1.02),
            "1 MiB mmap/touch/munmap storm": ("1 MiB mmap storm, traced / bare", 1.15)}
    for key, (what, goal) in rows.items():
        m = re.search(rf"^\| {re.escape(key)} .*?\(([\d.]+)x\)", text or "", re.M)
        if not m:
            t.fail("Linux perf source", f"no ratio for {key}: see perf-overhead.log")
            continue
        v = float(m.group(1))
        t.add("Linux perf source", what, f"{v:.2f}x", f"<= {goal}x", v <= goal)


def bench_daemon_rss(t, b, out, quick):
    env = {"STORM": "20000", "PROCS": "200"} if quick else {}
    text = run("daemon-rss", ["bash", os.path.join(ROOT, "bench", "daemon_rss.sh"), b], out, env)
    found = False
    for line in (text or "").splitlines():
        m = re.match(r"^(.+?)\s+VmRSS\s+(\d+) MiB\s+VmHWM\s+(\d+) MiB$", line)
        if m and not line.startswith("=="):
            found = True
            hwm = int(m.group(3))
            t.add("daemon memory", f"peak RSS after: {m.group(1).strip()}, MiB", str(hwm), "<= 64",
                  hwm <= 64)
    if not found:
        t.fail("daemon memory", "see daemon-rss.log")


def bench_unwind_cpu(t, b, out, quick):
    """What the kept unwinding state buys: the daemon's CPU with 12 busy
    processes, 16 states kept (the default) against 8."""
    secs = "5" if quick else "15"
    cpu = {}
    for keep in ("16", "8"):
        text = run(f"unwind-cpu-{keep}", ["bash", os.path.join(ROOT, "bench", "unwind_cpu.sh"), keep,
                                          "12", secs, os.path.join(b, "commitwatch")], out)
        m = re.search(r"daemon CPU ([0-9.]+) s, VmHWM (\d+) MiB, (\d+) events stored", text or "")
        if not m:
            t.fail("unwinding state", f"see unwind-cpu-{keep}.log")
            return
        cpu[keep] = float(m.group(1))
        t.add("unwinding state", f"12 busy processes, {keep} states kept: daemon CPU s, VmHWM MiB, events",
              f"{m.group(1)}, {m.group(2)}, {m.group(3)}")
    if cpu["16"] > 0:
        t.add("unwinding state", "daemon CPU, 8 kept / 16 kept", f"{cpu['8'] / cpu['16']:.2f}x")


STEPS = [("pipeline", bench_pipeline, False), ("etl", bench_etl, False),
         ("tagging", bench_tagging, False), ("alerts", bench_alerts, False),
         ("http", bench_http, False), ("pictures", bench_pictures, False),
         ("short", bench_short, False),
         ("perf-overhead", bench_perf_overhead, True), ("daemon-rss", bench_daemon_rss, True),
         ("unwind-cpu", bench_unwind_cpu, True)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--root", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("--out")
    ap.add_argument("--markdown", help="also write the table, with its date and command, here")
    a = ap.parse_args()
    b = os.path.abspath(a.build)
    out = os.path.abspath(a.out or os.path.join(b, "bench-all"))
    os.makedirs(out, exist_ok=True)
    if a.root and os.geteuid() != 0:
        sys.exit("bench_all: --root needs root (the perf source traces the machine)")
    t = Table()
    started = datetime.datetime.now(datetime.timezone.utc)
    load0 = open("/proc/loadavg").read().split()[:3]
    t0 = time.monotonic()
    for name, fn, root in STEPS:
        if root and not a.root:
            continue
        if a.only and not re.search(a.only, name):
            continue
        fn(t, b, out, a.quick)
    took = time.monotonic() - t0
    head = (f"{started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, load average "
            f"{' '.join(load0)} at the start, {took / 60:.0f} min"
            f"{', --quick (sizes for a check, not figures)' if a.quick else ''}")
    text = f"{head}\n\n{t.markdown()}\n"
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    for e in t.errors:
        print("bench_all: " + e, file=sys.stderr)
    print(f"logs: {out}", file=sys.stderr)
    sys.exit(1 if t.errors else 0)


main()
