"""procmem.py - what the kernel says of a process's memory, for the tests
that compare it with what commitwatch tracked (test_perf_root.py, the soak:
bench/soak.py and test_soak_root.py)."""


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
    """The state letter of /proc/PID/stat (R, S, T, ...)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def rss_bytes(pid, field="VmRSS"):
    """A resident size of pid's /proc/PID/status, in bytes: VmRSS (all),
    RssAnon (its own memory), RssFile (mapped files)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0
