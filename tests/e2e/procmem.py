"""procmem.py - what the kernel says of a process's memory, for the tests
that compare it with what commitwatch tracked (test_perf_root.py, the soak:
bench/soak.py and test_soak_root.py)."""
import os


def smaps_charged(pid):
    """Sum of the sizes of pid's VMAs with `ac` (charged to the commit
    limit), [stack] aside: what the tracker counts as outstanding."""
    total, size, name = 0, 0, ""
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and "-" in parts[0] and ":" in parts[3]:
                a, b = parts[0].split("-")
                size = int(b, 16) - int(a, 16)
                name = parts[5] if len(parts) > 5 else ""
            elif line.startswith("VmFlags:") and " ac" in line and name != "[stack]":
                total += size
    return total


def proc_state(pid):
    """The state letter of /proc/PID/stat (R, S, T, ...); pid may be
    "PID/task/TID" for a thread."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def proc_stopped(pid):
    """Whether every thread of pid is stopped (state T). After SIGSTOP the
    main thread may show T while another thread still finishes a call
    (an munmap, say): its memory is final only once all of them stop."""
    states = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            states.append(proc_state(f"{pid}/task/{tid}"))
        except OSError:  # a thread that exited meanwhile
            continue
    return bool(states) and all(st == "T" for st in states)


def rss_bytes(pid, field="VmRSS"):
    """A resident size of pid's /proc/PID/status, in bytes: VmRSS (all),
    RssAnon (its own memory), RssFile (mapped files)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def anon_parts(pid):
    """pid's anonymous resident bytes (smaps' Anonymous) by where they
    are: "heap" (the [heap] mapping: glibc's main arena) and "other" (the
    other arenas, malloc's blocks of 256 KiB and more, the perf queue's
    chunks, thread stacks: adjacent anonymous mappings are merged by the
    kernel, so their sizes tell nothing apart; /api/health's perf_queue
    gives the chunks)."""
    parts = {"heap": 0, "other": 0}
    kind = "other"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            p = line.split()
            if len(p) >= 5 and "-" in p[0] and ":" in p[3]:
                kind = "heap" if len(p) > 5 and p[5] == "[heap]" else "other"
            elif p and p[0] == "Anonymous:":
                parts[kind] += int(p[1]) * 1024
    return parts
