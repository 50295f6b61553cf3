#!/usr/bin/env python3
"""signal_check.py - fuzz_http must stop on SIGINT or SIGTERM even when
the signal comes during its periodic leak check.

The harness runs LeakSanitizer every LEAK_EVERY requests
(__lsan_do_recoverable_leak_check). The check holds the allocator's locks
and stops the other threads (ptrace: their state is 't'). libFuzzer's
SIGINT/SIGTERM handler prints its statistics and coverage, which
allocates: run on the thread that holds those locks, it waited for itself
forever (a campaign run of 2026-12-02 (6) hung so). This starts the
target on its seeds, waits until the world is stopped for a leak check,
sends the signal and requires the target to exit with libFuzzer's "run
interrupted" line within the limit, ROUNDS times per signal.

  tests/fuzz/signal_check.py FUZZ_HTTP_BINARY [ROUNDS] (from the checkout)

Exit 0 if every round stopped; 1 with the round that hung (the process is
killed) or that never reached a leak check.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

WAIT_CHECK = 240   # seconds to reach a leak check (1,024 requests)
WAIT_EXIT = 60     # seconds to exit once signalled


def world_stopped(pid):
    """True if a thread of pid other than the main one is in tracing stop."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return False
    for tid in tids:
        if int(tid) == pid:
            continue
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if state == "t":
            return True
    return False


def one_round(binary, sig, rnd):
    with tempfile.TemporaryDirectory(prefix="cw-sigcheck-") as tmp:
        corpus = os.path.join(tmp, "corpus")
        os.mkdir(corpus)
        log_path = os.path.join(tmp, "log")
        with open(log_path, "w") as log:
            p = subprocess.Popen(
                [binary, "-max_len=4096", "-detect_leaks=0", "-timeout=60",
                 "-print_final_stats=1", "-print_coverage=1",
                 "-dict=tests/fuzz/http.dict", corpus, "tests/fuzz/seeds-http"],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + WAIT_CHECK
        seen = False
        while time.monotonic() < deadline and p.poll() is None:
            if world_stopped(p.pid):
                seen = True
                break
            time.sleep(0.0005)
        if not seen:
            p.kill()
            p.wait()
            with open(log_path) as f:
                tail = f.read()[-2000:]
            print(f"signal_check: round {rnd}: no leak check within {WAIT_CHECK} s "
                  f"(exit {p.returncode}):\n{tail}", file=sys.stderr)
            return False
        os.kill(p.pid, sig)
        try:
            rc = p.wait(timeout=WAIT_EXIT)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            print(f"signal_check: round {rnd}: {signal.Signals(sig).name} during a leak "
                  f"check: no exit within {WAIT_EXIT} s (hung; killed)", file=sys.stderr)
            return False
        with open(log_path) as f:
            text = f.read()
        if "run interrupted" not in text:
            print(f"signal_check: round {rnd}: exit {rc} without libFuzzer's 'run "
                  f"interrupted':\n{text[-2000:]}", file=sys.stderr)
            return False
        print(f"signal_check: round {rnd}: {signal.Signals(sig).name} during a leak check: "
              f"exit {rc}")
        return True


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    ok = True
    for sig in (signal.SIGINT, signal.SIGTERM):
        for r in range(rounds):
            ok = one_round(binary, sig, r + 1) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
