#!/usr/bin/env python3
"""test_perf_root.py - the Linux perf source on the real machine, as root.

(a) The oracle: while `commitwatch record` traces the machine, processes
    are started (the MemoryTestApp held at its pause, a Python process with
    threads, a growing realloc (mremap), an mmap, an mprotect'd reservation
    and a forked child, and `sleep`), then stopped (every thread); for
    each, the tracked outstanding commit (`analyze --source replay:TRACE
    --to CAPTURE`) must equal the sum of its smaps VMAs with `ac`, the
    [stack] VMA aside; every other live process must be tracked. Only the
    test's own, stopped processes are compared with smaps: the machine's
    others change their memory while smaps is read.
(b) End to end: the daemon (`run --source perf --db`), with only the
    capabilities of the systemd unit (installer/linux/commitwatch.service's
    CapabilityBoundingSet, applied with setpriv), traces the machine while
    the MemoryTestApp runs as another user (nobody) from a folder only that
    user can read (what CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH are for); `analyze --db` finds its ten 10 MB
    transients under ManipulateTemporaryBuffer, the step as impacting in the
    step window with `main` on its stack, and C-heap growth under
    InnerLoopOperation (tagged C heap once the Linux stack tags exist).
    Those counts are exact only if no perf record was lost: the daemon
    gets the largest rings (16 MiB a CPU) and a queue of 256 MiB, where
    what the machine's other processes make while the daemon is slowed by
    the load waits its turn; if it still lost records (its log says), the
    phase fails saying so, instead of on a count.
(c) Errors: not root, perf_event_paranoid, tracefs not mounted, no syscall
    tracepoints: each gives its message.

With `--queue SIZE` (ctest e2e_test_perf_root_cap) only (b) runs, the
daemon configured with perf_queue_size = SIZE (and rings of 16 MiB a
CPU, which then hold the backlog): a queue so small that
every pass stops at its cap and the merge in time order goes past it
(perf.c, cw_perf__merge_pass), whatever the machine's load; the daemon
must say it did (its log), and (b)'s checks must hold all the same.

It never skips: without root or perf it fails, saying why (CI runs as root).
Each phase runs once: a check that fails fails the test (no second try).
Waits are on conditions with deadlines (processes asleep or stopped, the
daemon's stored end), never sleeps; the workload is found by its pid, as
another test run on the machine may run its own copy at the same time.
"""
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from cwtest import file_text, wait_until  # noqa: E402
from procmem import asleep, proc_state, proc_stopped, smaps_charged  # noqa: E402

BIN = os.environ.get("CW_BIN", "build/commitwatch")
BUILD = os.environ.get("CW_BUILD", "build")
SOURCE = os.environ.get("CW_SOURCE", ".")
APP = os.path.join(BUILD, "tests", "workloads", "memorytestapp")
MB = 1024 * 1024
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def user_process(pid):
    """pid is alive (not a zombie) and has a user address space (not a
    kernel thread): /proc/PID/maps lists something."""
    try:
        if proc_state(pid) == "Z":
            return False
        with open(f"/proc/{pid}/maps") as f:
            return bool(f.readline())
    except OSError:
        return False


def records_lost(text):
    """The perf records a `record` or `run` said it lost (its stderr or
    log: "N records lost so far", "(N perf records lost"): the largest."""
    found = [int(m) for m in re.findall(r"(\d+) (?:perf )?records lost", text)]
    return max(found, default=0)


def stored_end(db):
    """End of the last stored raw bucket of a database being written
    (INT64_MIN while there is none). Read-only."""
    if not os.path.exists(db):
        return -(2**63)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        row = con.execute("SELECT end_ns FROM tiers WHERE tier = 0").fetchone()
    except sqlite3.OperationalError:  # the schema is not written yet
        return -(2**63)
    finally:
        con.close()
    return row[0] if row and row[0] is not None else -(2**63)


def start_record(trace):
    # Ahead of the machine's other processes for the CPU, as the daemon
    # (start_daemon): fewer records lost on a busy machine.
    rec = subprocess.Popen(["nice", "-n", "-10", BIN, "record", "--out", trace],
                           stderr=subprocess.PIPE, text=True)
    lines = []
    deadline = time.time() + 60
    while time.time() < deadline:
        line = rec.stderr.readline()
        if not line:
            break
        lines.append(line)
        if "rundown loaded" in line:
            return rec
    rec.kill()
    raise SystemExit("FAIL: `commitwatch record` did not start:\n" + "".join(lines))


def unit_caps():
    """The capability names (CAP_...) of the systemd unit's bounding set."""
    unit = os.path.join(SOURCE, "installer", "linux", "commitwatch.service")
    for line in open(unit):
        if line.startswith("CapabilityBoundingSet="):
            return line.split("=", 1)[1].split()
    raise SystemExit(f"FAIL: no CapabilityBoundingSet= in {unit}")


CAP_BITS = {"CAP_DAC_READ_SEARCH": 2, "CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21,
            "CAP_IPC_LOCK": 14, "CAP_PERFMON": 38}


def cap_eff(pid):
    """The effective capability mask of a process."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return -1


def start_daemon(db, log, *extra, caps=None):
    """Starts `run --source perf --no-http --db db EXTRA...` with its stderr
    in log (a file open for writing) and returns it once its rundown is
    loaded; fails (SystemExit) if it exits first. caps: run it as root with
    only these capabilities (a list of CAP_ names), as the unit does."""
    prefix = []
    if caps is not None:
        keep = ",".join("+" + c[4:].lower() for c in caps)
        prefix = ["setpriv", "--bounding-set", "-all" + ("," + keep if keep else ""),
                  "--inh-caps", "-all"]
    # Ahead of the machine's other processes for the CPU (nice -10): on a
    # busy machine they would otherwise starve the daemon while they make
    # records (every mmap of theirs is one, with an 8 KiB stack copy)
    # faster than it unwinds them, until its rings overflow.
    run = subprocess.Popen(["nice", "-n", "-10"] + prefix +
                           [BIN, "run", "--source", "perf", "--no-http", "--db", db, *extra],
                           stderr=log)

    def rundown_loaded():
        if run.poll() is not None:
            raise SystemExit(f"FAIL: the daemon exited with {run.returncode}:\n"
                             f"{file_text(log.name)}")
        return "rundown loaded" in file_text(log.name)

    try:
        wait_until(rundown_loaded, 60, "the daemon loaded its rundown")
    except BaseException:
        if run.poll() is None:
            run.kill()
        raise
    return run


def stop(proc):
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, err


# Three images of bash within a few ms, each forking (a command
# substitution) and growing its heap (a glob) right after its exec, the
# last one exec'ing sleep: the exec snapshot read after the first exec
# shows a later image, and must wait for its time (procs.c, pend_apply;
# a fork applied it early, and the first image's brk() then committed the
# distance between two images' heaps, hundreds of GB).
CHAIN = ("x=$(echo 1); y=(/usr/lib/*/*); exec bash -c 'x=$(echo 2); y=(/usr/lib/*/*); "
         "exec bash -c \"x=\\$(echo 3); y=(/usr/lib/*/*); exec sleep $0\"' ")

PY_CHILD = r"""
import ctypes, mmap, os, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
keep = [bytearray(n) for n in (100, 5000, 200000, 3 << 20)]
grow = bytearray(1 << 20)
for i in range(20):
    grow += bytearray(1 << 20)               # realloc of an mmapped chunk: mremap
m = mmap.mmap(-1, 4 << 20); m[0:10] = b"x" * 10
# A thread-stack-like reservation: PROT_NONE, then part made writable.
r = libc.mmap(None, 8 << 20, 0, 0x22, -1, 0)
libc.mprotect(ctypes.c_void_p(r + 4096), (8 << 20) - 4096, 3)
# A NORESERVE arena: never charged, even when made writable.
a = libc.mmap(None, 64 << 20, 0, 0x22 | 0x4000, -1, 0)
libc.mprotect(ctypes.c_void_p(a), 1 << 20, 3)
ev = threading.Event()
threads = [threading.Thread(target=ev.wait) for _ in range(3)]
[t.start() for t in threads]
pid = os.fork()
if pid == 0:
    c = bytearray(2 << 20)
    time.sleep(300)
    os._exit(0)
print(pid, flush=True)
time.sleep(300)
"""


def test_oracle(tmp):
    print("== (a) the oracle: tracked outstanding == smaps `ac`", flush=True)
    trace = os.path.join(tmp, "oracle.jsonl")
    rec = start_record(trace)
    procs = []
    try:
        app = subprocess.Popen([APP, "--seconds", "2", "--pause", "--delay", "300"],
                               stdout=subprocess.DEVNULL)
        procs.append(app)
        py = subprocess.Popen([sys.executable, "-c", PY_CHILD], stdout=subprocess.PIPE, text=True)
        procs.append(py)
        child = int(py.stdout.readline())
        slp = subprocess.Popen(["sleep", "300"])
        procs.append(slp)
        chains = [subprocess.Popen(["bash", "-c", CHAIN + "0"]) for _ in range(8)]
        for c in chains:
            c.wait()
        chain = subprocess.Popen(["bash", "-c", CHAIN + "300"])
        procs.append(chain)
        wait_until(lambda: file_text(f"/proc/{chain.pid}/comm").strip() == "sleep", 60,
                   "the exec chain reached its last image")
        # Quiescent: the workload stopped itself at its pause, the others
        # sleep in nanosleep (their last memory calls are made); then they
        # are stopped, every thread of them, so that nothing of theirs
        # changes while smaps is read (Python's threads wait on a futex,
        # not in nanosleep: stopped, they cannot wake).
        wait_until(lambda: proc_stopped(app.pid) and
                   all(asleep(p) for p in (py.pid, child, slp.pid, chain.pid)), 60,
                   "the workload is paused and the other processes sleep")
        for p in (py.pid, child, slp.pid, chain.pid):
            os.kill(p, signal.SIGSTOP)
        wait_until(lambda: all(proc_stopped(p)
                               for p in (app.pid, py.pid, child, slp.pid, chain.pid)), 60,
                   "every thread of the test's processes is stopped")
        pids = {"memorytestapp (paused)": app.pid, "python (threads, mremap, mprotect)": py.pid,
                "python's forked child": child, "sleep": slp.pid,
                "an exec chain's last image (sleep)": chain.pid}
        want = {k: smaps_charged(p) for k, p in pids.items()}
        # Every other process with a user address space (kernel threads
        # have none): the source sees them all. Their smaps is not read:
        # they change their memory while it is, more so on a busy machine.
        others = [int(d) for d in os.listdir("/proc")
                  if d.isdigit() and int(d) not in pids.values() and int(d) != rec.pid
                  and user_process(int(d))]
        # Every call before this moment is in the trace: record drains the
        # perf rings when it stops.
        capture = time.time_ns()
        rc, err = stop(rec)
        check(rc == 0, f"record exits 0 (stderr: {err.strip()[-300:]})")
        lost = records_lost(err)
        if lost:
            # The resync from smaps at the stop corrects every process;
            # stopped ones exactly. Said, in case a check fails below.
            print(f"note: record lost {lost} perf records (load {os.getloadavg()[0]:.1f}); "
                  f"processes were resynchronised from smaps", flush=True)
        out = subprocess.run([BIN, "analyze", "--source", "replay:" + trace, "--json", "--to",
                              str(capture)], capture_output=True, text=True)
        check(out.returncode == 0, "analyze reads the recorded trace: " + out.stderr.strip())
        report = json.loads(out.stdout) if out.returncode == 0 else {"processes": []}
        # What this test's python had mapped but not charged when tracing
        # started (its libraries' read-only segments, ...) is reserved
        # address space, stacked "(before trace)", with no rundown flag
        # (the trace format has it on commits only).
        mine = []
        with open(trace) as f:
            for ln in f:
                if '"reserve"' in ln:
                    e = json.loads(ln)
                    if e["pid"] == os.getpid() and e.get("stack") == ["(before trace)"]:
                        mine.append(e)
        # No commit of the exec chains is larger than a shell's memory.
        chain_pids = {c.pid for c in chains} | {chain.pid}
        huge = []
        with open(trace) as f:
            for ln in f:
                if '"commit"' in ln:
                    e = json.loads(ln)
                    if e.get("op") == "commit" and e["pid"] in chain_pids and e["size"] > 256 * MB:
                        huge.append((e["pid"], e["size"], e.get("stack", [])[-2:]))
        check(not huge, f"the exec chains commit no range over 256 MB (got {huge[:3]}, "
              f"{len(huge)} in all)")
        check(mine and all("rundown" not in e for e in mine),
              f"the rundown reserves this test's uncharged mappings ({len(mine)} ranges, "
              f"{sum(e['size'] for e in mine)} bytes), not flagged rundown")
        for what, pid in pids.items():
            got = [p["outstanding_end_bytes"] for p in report["processes"]
                   if p["pid"] == pid and p["exit_ns"] is None]
            check(got == [want[what]],
                  f"{what} (pid {pid}): tracked {got} == smaps ac {want[what]}" +
                  (f" (record lost {lost} perf records, load {os.getloadavg()[0]:.1f})"
                   if lost else ""))
        check(want["memorytestapp (paused)"] >= 20 * MB, "the paused workload holds >= 20 MB")
        live = {p["pid"] for p in report["processes"] if p["exit_ns"] is None}
        # Those that still run now ran at the capture (a zombie has ended).
        missing = [p for p in others if p not in live and user_process(p)]
        check(others and not missing, f"every other live process is tracked ({len(others)}; missing "
              f"{[(p, file_text(f'/proc/{p}/comm').strip()) for p in missing]})")
        os.kill(child, signal.SIGKILL)
    finally:
        for p in procs:
            p.kill()
        if rec.poll() is None:
            rec.kill()


def stacks_with(proc, frame):
    return [s for s in proc.get("stacks", []) if any(frame in f for f in s.get("frames", []))]


QUEUE = None  # --queue SIZE: the daemon's perf_queue_size (main)


def check_files_mapped_once(daemon, db):
    """The unwinder opens a file once for every process that maps it
    (unwind.c): with four python3 processes being unwound, the daemon maps
    the interpreter's executable once, not once per process."""
    code = ("import mmap, sys, time\n"
            "def grow():\n    m = mmap.mmap(-1, 1 << 20); m[0] = 1; return m\n"
            "m = grow(); print('ok', flush=True); sys.stdin.read()")
    kids = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True) for _ in range(4)]
    try:
        for k in kids:
            k.stdout.readline()
        grown = time.time_ns()
        wait_until(lambda: stored_end(db) > grown, 120, "the python3 processes' calls are stored")
        exe = os.path.realpath(sys.executable)
        with open(f"/proc/{daemon}/maps") as f:
            maps = [line for line in f if line.rstrip().endswith(" " + exe)]
        check(len(maps) == 1, f"the daemon maps {exe}, which 4 processes it unwinds run, once "
              f"({len(maps)} mappings)")
    finally:
        for k in kids:
            k.stdin.close()
            k.wait(timeout=30)


def test_daemon(tmp):
    print("== (b) end to end: the daemon and the MemoryTestApp" +
          (f", perf_queue_size = {QUEUE}" if QUEUE else ""), flush=True)
    db = os.path.join(tmp, "e2e.db")
    log = open(os.path.join(tmp, "run.log"), "w+", buffering=1)
    caps = unit_caps()
    # The largest rings (16 MiB a CPU: the source's most; beyond
    # perf_event_mlock_kb, CAP_IPC_LOCK) and, unless --queue sets it, a
    # queue of 256 MiB: the machine's other processes make records too,
    # and while the load slows the daemon's unwinding they wait there, in
    # order, instead of overflowing the rings (records lost: the workload's
    # calls would then be "(resync)", and its exact counts gone). Past a
    # --queue cap the backlog waits in the rings, where a sample keeps its
    # whole stack copy (8 KiB; about 500 bytes queued).
    ncpu = os.sysconf("SC_NPROCESSORS_CONF")
    conf = os.path.join(tmp, "perf.conf")
    with open(conf, "w") as f:
        f.write(f"perf_queue_size = {QUEUE or '256MiB'}\n"
                f"perf_ring_size = {16 * min(max(ncpu, 1), 16)}MiB\n")
    os.chmod(tmp, 0o755)  # the daemon reads it with the unit's capabilities
    os.chmod(conf, 0o644)
    extra = ["--config", conf]
    run = start_daemon(db, log, *extra, caps=caps)
    try:
        want = sum(1 << CAP_BITS[c] for c in caps)
        check(cap_eff(run.pid) == want, f"the daemon runs with the unit's capabilities only "
              f"({' '.join(caps)}): CapEff {cap_eff(run.pid):#x}, want {want:#x}")
        # The workload runs as nobody, from a folder only nobody can read.
        os.chmod(tmp, 0o755)
        home = os.path.join(tmp, "nobody")
        os.makedirs(home, exist_ok=True)
        app_bin = os.path.join(home, "memorytestapp")
        shutil.copy(APP, app_bin)
        for path in (app_bin, home):
            os.chown(path, 65534, 65534)
            os.chmod(path, 0o700)
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
        # The workload is found by its pid: another test run on the machine
        # may run its own copy at the same time (the daemon sees them all).
        app = subprocess.Popen(nobody + [app_bin, "--seconds", "6", "--objects", "100", "--delay",
                                         "500"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        app_out, _ = app.communicate(timeout=120)
        app_done = time.time_ns()
        check(app.returncode == 0, "the workload runs")
        step_ns = int(app_out.split("step_ns=")[1].split()[0])
        # The bucket of the workload's exit is stored: every event before it
        # was processed (a tick promises nothing older comes). On a busy
        # machine the daemon may have a backlog in its queue to work off.
        wait_until(lambda: stored_end(db) > app_done, 300,
                   "the daemon stores the second the workload exited in")
        if not QUEUE:
            check_files_mapped_once(run.pid, db)
        rc, _ = stop(run)
    finally:
        if run.poll() is None:
            run.kill()
    log.seek(0)
    text = log.read()
    check(rc == 0, "run exits 0 on SIGINT: " + text.strip()[-400:])
    if QUEUE:
        # "perf: N drains stopped at the queue's cap, M records merged past it"
        cut = [ln for ln in text.splitlines() if "drains stopped at the queue's cap" in ln]
        n = int(cut[-1].split("perf: ")[1].split()[0]) if cut else 0
        check(n > 0, f"the queue reached its cap: {cut[-1].strip() if cut else 'no cap line'}")
    # Every record is needed for the exact counts below: with records lost
    # they would fail as mismatches that do not say why.
    lost = records_lost(text)
    check(lost == 0, "the daemon lost no perf record" + (
          f" (it lost {lost}; load {os.getloadavg()[0]:.1f}: the machine made records faster "
          f"than the daemon processed them, and its queue and rings were full; the workload's "
          f"counts are then not exact, so they are not checked)" if lost else ""))
    if lost:
        return

    def analyze(*extra):
        out = subprocess.run([BIN, "analyze", "--db", db, "--json", "--stacks", *extra],
                             capture_output=True, text=True)
        check(out.returncode == 0, "analyze --db " + " ".join(extra) + ": " + out.stderr.strip())
        procs = json.loads(out.stdout)["processes"] if out.returncode == 0 else []
        return [p for p in procs if p["name"] == "memorytestapp" and p["pid"] == app.pid]

    whole = analyze()
    check(len(whole) == 1, f"the workload is found once ({len(whole)})")
    if not whole:
        return
    w = whole[0]
    tr = stacks_with(w, "ManipulateTemporaryBuffer")
    # What a failure below needs to say: the workload's stacks, by size.
    seen = "; ".join(f"{x['commit_count']} x {x['size_bytes']} B [{x.get('tag', '')}] "
                     f"{' > '.join(x['frames'][-4:])}"
                     for x in sorted(w.get("stacks", []), key=lambda x: -x["size_bytes"])[:6])
    check(sum(s["commit_count"] for s in tr) == 10,
          f"ten commits under ManipulateTemporaryBuffer ({sum(s['commit_count'] for s in tr)}; "
          f"the workload's largest stacks: {seen})")
    check(sum(s["transient_count"] for s in tr) == 10 and
          sum(s["transient_bytes"] for s in tr) == 100 * MB,
          f"ten 10 MB transients under ManipulateTemporaryBuffer "
          f"({sum(s['transient_count'] for s in tr)}, {sum(s['transient_bytes'] for s in tr)} B)")
    check(tr and all(any("Operation1" in f for f in s["frames"]) for s in tr),
          "their stacks go through Operation1")
    heap = [s for s in stacks_with(w, "InnerLoopOperation")
            if any("brk" in f or "morecore" in f for f in s["frames"])]
    check(sum(s["size_bytes"] for s in heap) >= 256 * 1024,
          "C heap growth (brk) under InnerLoopOperation")
    # The Linux default rules ship with the binary: the tag is always checked.
    r = subprocess.run([BIN, "tags", "check", "--platform", "linux"], capture_output=True, text=True)
    check(r.returncode == 0 and "C heap (glibc malloc)" in r.stdout,
          "the Linux default stack tags are installed, with C heap (glibc malloc): " +
          (r.stderr.strip() or (r.stdout.strip().splitlines() or [""])[-1]))
    check(heap and all(s["tag"].startswith("C heap") for s in heap),
          "that growth is tagged C heap: " + ", ".join(s["tag"] for s in heap))

    sec = 1000000000
    frm = (step_ns // sec - 1) * sec
    win = analyze("--from", str(frm), "--to", str(frm + 3 * sec))
    check(len(win) == 1, "the workload is in the step window")
    if not win:
        return
    s = win[0]
    # A transient (10 MB for about 100 ms, every 600 ms) can straddle an
    # edge of the 3 s window, whatever the timing: committed before it and
    # freed inside (AOFI, -10 MB) or committed inside and freed after
    # (AIFO, +10 MB). Those are counted apart, and must be exactly that.
    tr = [x for x in s["stacks"] if any("ManipulateTemporaryBuffer" in f for f in x["frames"])]
    tr_imp = sum(x["impacting_bytes"] for x in tr)
    check(tr_imp in (-10 * MB, 0, 10 * MB),
          f"the transients in the step window: each whole, or one 10 MB piece cut at an edge "
          f"({tr_imp} bytes impacting)")
    rest = s["impacting_bytes"] - tr_imp
    check(10 * MB <= rest < 11 * MB,
          f"the step is impacting in its window: {rest} bytes (transients aside)")
    step = [x for x in s["stacks"] if x["impacting_bytes"] == 10 * MB and x not in tr]
    check(len(step) == 1 and any(f.endswith("!main") for f in step[0]["frames"]) and
          not any("Operation1" in f or "SettleMemory" in f for f in step[0]["frames"]),
          "the step's stack holds main (and neither Operation1 nor SettleMemory)")


def run_cmd(cmd, env=None):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_errors(tmp):
    print("== (c) errors, each with its fix", flush=True)
    out = os.path.join(tmp, "x.jsonl")
    binary = os.path.join(tmp, "commitwatch")  # where nobody can run it
    shutil.copy(BIN, binary)
    os.chmod(tmp, 0o755)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
    r = run_cmd(nobody + [binary, "record", "--out", "/dev/null", "--duration", "1"])
    check(r.returncode != 0 and "not root" in r.stderr and "CAP_PERFMON" in r.stderr and
          "run as root" in r.stderr, "unprivileged: " + r.stderr.strip())

    with open("/proc/sys/kernel/perf_event_paranoid") as f:
        saved = f.read().strip()
    try:
        with open("/proc/sys/kernel/perf_event_paranoid", "w") as f:
            f.write("3")
        r = run_cmd(nobody + [binary, "record", "--out", "/dev/null", "--duration", "1"])
        check(r.returncode != 0 and "perf_event_paranoid = 3" in r.stderr and
              "perf_event_paranoid=-1" in r.stderr, "paranoid 3: " + r.stderr.strip())
    finally:
        with open("/proc/sys/kernel/perf_event_paranoid", "w") as f:
            f.write(saved)

    # tracefs unmounted, in a private mount namespace: root mounts it and says so.
    script = ("umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug/tracing 2>/dev/null; "
              "umount /sys/kernel/debug 2>/dev/null; "
              "test -e /sys/kernel/tracing/events && { echo still mounted; exit 3; }; "
              f"exec {binary} record --out {out} --duration 1")
    r = run_cmd(["unshare", "-m", "--propagation", "private", "sh", "-c", script])
    check(r.returncode == 0 and "mounted it at /sys/kernel/tracing" in r.stderr,
          "tracefs not mounted: " + r.stderr.strip())

    # A kernel without syscall tracepoints: a tracefs without events/syscalls.
    fake = os.path.join(tmp, "fake-tracefs")
    os.makedirs(os.path.join(fake, "events", "sched"), exist_ok=True)
    env = dict(os.environ, CW_TRACEFS=fake)
    r = run_cmd([binary, "record", "--out", out, "--duration", "1"], env=env)
    check(r.returncode != 0 and "no syscall tracepoints" in r.stderr and
          "CONFIG_FTRACE_SYSCALLS" in r.stderr, "no syscall tracepoints: " + r.stderr.strip())


def main():
    if os.geteuid() != 0:
        print("FAIL: test_perf_root needs root (system-wide perf tracing); CI runs it as root")
        return 1
    if not os.path.exists("/proc/sys/kernel/perf_event_paranoid"):
        print("FAIL: this kernel has no perf events (/proc/sys/kernel/perf_event_paranoid)")
        return 1
    for path in (BIN, APP):
        if not os.access(path, os.X_OK):
            print(f"FAIL: {path} is not built")
            return 1
    global QUEUE
    args = sys.argv[1:]
    if args[:1] == ["--queue"] and len(args) == 2:
        QUEUE = args[1]
    elif args:
        print("usage: test_perf_root.py [--queue SIZE]")
        return 2
    tmp = tempfile.mkdtemp(prefix="cw-perf-")
    try:
        if QUEUE:
            test_daemon(tmp)
        else:
            test_oracle(tmp)
            test_daemon(tmp)
            test_errors(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("test_perf_root: FAILED: " + "; ".join(failures))
        return 1
    print("test_perf_root: every check held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
