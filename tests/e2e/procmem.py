"""procmem.py - what the kernel says of a process's memory, for the tests
that compare it with what commitwatch tracked (test_perf_root.py, the soak:
bench/soak.py and test_soak_root.py)."""
import os


def smaps_vmas(pid):
    """pid's VMAs from /proc/PID/smaps, each a dict: "name" (the path or
    [heap], [stack], ...; "" for anonymous), "size" (bytes), "flags" (the
    VmFlags line's two-letter flags) and "anon" (Anonymous: bytes)."""
    vmas = []
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and "-" in parts[0] and ":" in parts[3]:
                a, b = parts[0].split("-")
                vmas.append({"name": parts[5] if len(parts) > 5 else "",
                             "size": int(b, 16) - int(a, 16), "flags": set(), "anon": 0})
            elif vmas and parts and parts[0] == "VmFlags:":
                vmas[-1]["flags"] = set(parts[1:])
            elif vmas and parts and parts[0] == "Anonymous:":
                vmas[-1]["anon"] = int(parts[1]) * 1024
    return vmas


def smaps_charged(pid):
    """Sum of the sizes of pid's VMAs with `ac` (charged to the commit
    limit), [stack] aside: what the tracker counts as outstanding."""
    return sum(v["size"] for v in smaps_vmas(pid) if "ac" in v["flags"] and v["name"] != "[stack]")


def asleep(pid):
    """pid's main thread is blocked in nanosleep / clock_nanosleep."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            return "nanosleep" in f.read()
    except OSError:
        return False


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
    for v in smaps_vmas(pid):
        parts["heap" if v["name"] == "[heap]" else "other"] += v["anon"]
    return parts
