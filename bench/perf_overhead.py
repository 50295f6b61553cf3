#!/usr/bin/env python3
"""perf_overhead.py - what tracing the whole machine with the perf source
costs the traced programs, and what the daemon costs itself. As root:

    python3 bench/perf_overhead.py [--build build] [--runs 3]

Measures, in one run (fastest of --runs), with bench/perf_overhead.c:
  - malloc churn: bare, under the daemon (`commitwatch run --source perf`),
    under heaptrack;
  - 1 MiB mmap/munmap storm (pages touched; and bare, untouched): bare,
    under the daemon, under a background `perf record -a --call-graph dwarf`
    of the same syscalls;
  - the daemon's CPU and RSS idle (5 s) and during the storm.
Times are CPU seconds (user + system) of the load, the fastest of --runs
(the machine may be shared: other jobs only make runs slower). Prints a Markdown table for docs/BENCHMARKS.md."""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SYSCALLS = ["mmap", "munmap", "mremap", "brk", "mprotect"]


def load(build, mode, n, prefix=()):
    """CPU seconds (user + system) the load used: what tracing costs it,
    including the kernel's work in its syscalls, and much less disturbed
    than elapsed time by other jobs on a shared machine. Under a prefix
    (heaptrack), the whole process tree's time."""
    before = os.times()
    subprocess.run([*prefix, os.path.join(build, "bench", "perf_overhead"), mode, str(n)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = os.times()
    return (after.children_user - before.children_user) + \
        (after.children_system - before.children_system)


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def start_daemon(build, tmp):
    log = open(os.path.join(tmp, "daemon.log"), "w+")
    d = subprocess.Popen([os.path.join(build, "commitwatch"), "run", "--source", "perf", "--no-http", "--db",
                          os.path.join(tmp, "bench.db")], stderr=log)
    for _ in range(300):
        log.seek(0)
        if "rundown loaded" in log.read():
            return d, log
        if d.poll() is not None:
            break
        time.sleep(0.1)
    log.seek(0)
    sys.exit("the daemon did not start:\n" + log.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--churn", type=int, default=20000000)
    ap.add_argument("--storm", type=int, default=3000)
    ap.add_argument("--storm-bare", type=int, default=200000)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("perf_overhead: run as root (system-wide tracing)")
    tmp = tempfile.mkdtemp(prefix="cw-bench-perf-")
    loads = [("churn", "churn", a.churn), ("storm", "storm", a.storm),
             ("bare", "storm-bare", a.storm_bare)]
    times = {}  # key -> list of seconds

    def measure(suffix, prefix=(), which=None):
        for key, mode, n in loads:
            if which and key not in which:
                continue
            times.setdefault(key + suffix, []).append(load(a.build, mode, n, prefix))

    r = {}
    try:
        # Rounds of bare / traced pairs, so that a change in the machine's
        # background load hits both sides alike.
        for i in range(a.runs):
            measure("")
            d, log = start_daemon(a.build, tmp)
            if i == 0:  # the daemon alone, then during each load
                time.sleep(2)
                c0, t0 = proc_cpu(d.pid), time.time()
                time.sleep(5)
                r["idle_cpu"] = 100 * (proc_cpu(d.pid) - c0) / (time.time() - t0)
                r["idle_rss"] = proc_rss_mb(d.pid)
                for key, mode, n in loads[1:]:
                    c0, t0 = proc_cpu(d.pid), time.time()
                    times.setdefault(key + "_d", []).append(load(a.build, mode, n))
                    r[key + "_cpu"] = 100 * (proc_cpu(d.pid) - c0) / (time.time() - t0)
                    r[key + "_rss"] = proc_rss_mb(d.pid)
                measure("_d", which=("churn",))
            else:
                measure("_d")
            time.sleep(1.5)
            d.send_signal(signal.SIGINT)
            d.wait(timeout=120)
            log.seek(0)
            lost = [l for l in log.read().splitlines() if "lost" in l]
            r["lost"] = lost[-1] if lost else "none"
        # heaptrack on the churn (paired with bare runs too).
        if shutil.which("heaptrack"):
            for i in range(a.runs):
                measure("", which=("churn",))
                measure("_h", ("heaptrack", "-o", os.path.join(tmp, f"ht{i}")), which=("churn",))
        # A background perf record of the same syscalls, on the storms.
        if shutil.which("perf"):
            evs = []
            for sc in SYSCALLS:
                evs += ["-e", f"syscalls:sys_enter_{sc}", "-e", f"syscalls:sys_exit_{sc}"]
            for i in range(a.runs):
                measure("", which=("storm", "bare"))
                p = subprocess.Popen(["perf", "record", "-a", "--call-graph", "dwarf", "-o",
                                      os.path.join(tmp, "perf.data"), *evs],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(2)
                measure("_p", which=("storm", "bare"))
                p.send_signal(signal.SIGINT)
                p.wait(timeout=300)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # The fastest run of each: other jobs on a shared machine only slow runs down.
    for k, v in times.items():
        r[k] = min(v)

    def ratio(k, base):
        return f"{r[k] / r[base]:.3f}x" if k in r else "n/a"

    print(f"| load (CPU seconds) | bare | commitwatch daemon | other tool |")
    print(f"| --- | --- | --- | --- |")
    print(f"| malloc churn ({a.churn:,} malloc/free) | {r['churn']:.3f} s | "
          f"{r['churn_d']:.3f} s ({ratio('churn_d', 'churn')}) | heaptrack: "
          f"{r.get('churn_h', 0):.3f} s ({ratio('churn_h', 'churn')}) |")
    print(f"| 1 MiB mmap/touch/munmap storm ({a.storm:,}) | {r['storm']:.3f} s | "
          f"{r['storm_d']:.3f} s ({ratio('storm_d', 'storm')}) | perf record -a --call-graph "
          f"dwarf: {r.get('storm_p', 0):.3f} s ({ratio('storm_p', 'storm')}) |")
    print(f"| 1 MiB mmap/munmap, pages untouched ({a.storm_bare:,}) | {r['bare']:.3f} s | "
          f"{r['bare_d']:.3f} s ({ratio('bare_d', 'bare')}) | perf record: "
          f"{r.get('bare_p', 0):.3f} s ({ratio('bare_p', 'bare')}) |")
    print()
    print(f"| daemon | CPU (% of one core) | RSS |")
    print(f"| --- | --- | --- |")
    print(f"| idle (5 s) | {r['idle_cpu']:.1f} % | {r['idle_rss']:.1f} MiB |")
    print(f"| during the storm | {r['storm_cpu']:.1f} % | {r['storm_rss']:.1f} MiB |")
    print(f"| during the untouched storm | {r['bare_cpu']:.1f} % | {r['bare_rss']:.1f} MiB |")
    print()
    print("runs (s): " + "; ".join(f"{k} " + " ".join(f"{x:.3f}" for x in v)
                                   for k, v in sorted(times.items())))
    print()
    print(f"records lost: {r['lost']}")


if __name__ == "__main__":
    main()
