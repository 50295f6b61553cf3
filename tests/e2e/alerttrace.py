"""alerttrace.py - what the alert engine's end-to-end tests share: writing
JSONL v1 traces of made-up workloads (docs/DESIGN.md; the format of
tests/fixtures/memorytestapp.jsonl), running `commitwatch run` over them
into a database with a configuration and a rules file, and reading the
alert tables back with sqlite3.

    tr = Trace()
    tr.start(0, 101, "leaky.exe")
    a = tr.commit(10 * S, 101, MiB)
    tr.release(20 * S, 101, a, MiB)
    db = run(tmp, "name", [tr], rules_text, extra_config)
    for row in transitions(db): ...
"""

import json
import os
import sqlite3
import subprocess

BIN = os.environ.get("CW_BIN", "commitwatch")
BUILD = os.environ.get("CW_BUILD", ".")

S = 1_000_000_000
MIN = 60 * S
HOUR = 3600 * S
MiB = 1 << 20
# Hour-aligned, so minutes and steps fall on round numbers.
T0 = 1_750_003_200 * S
HEAP = ["app.exe!main", "app.exe!Work", "ntdll.dll!RtlAllocateHeap",
        "ntdll.dll!NtAllocateVirtualMemory"]


class Trace:
    """Events of a made-up workload; times are ns after T0 (or absolute
    with base=0)."""

    def __init__(self, base=T0):
        self.base = base
        self.ev = []
        self.next = {}
        self.seq = 0

    def _add(self, ts, e):
        e["ts"] = self.base + int(ts)
        self.ev.append((e["ts"], self.seq, e))
        self.seq += 1

    def start(self, ts, pid, name):
        self._add(ts, {"op": "process_start", "pid": pid, "name": name})

    def exit(self, ts, pid):
        self._add(ts, {"op": "process_exit", "pid": pid})

    def commit(self, ts, pid, size, stack=HEAP, rundown=False):
        addr = self.next.get(pid, 0x10000000 + pid * 0x100000000)
        self.next[pid] = addr + size + 0x10000
        e = {"op": "commit", "pid": pid, "addr": hex(addr), "size": size,
             "stack": ["(before trace)"] if rundown else stack}
        if rundown:
            e["rundown"] = True
        self._add(ts, e)
        return addr

    def release(self, ts, pid, addr, size):
        self._add(ts, {"op": "release", "pid": pid, "addr": hex(addr), "size": size,
                       "stack": ["app.exe!Free", "ntdll.dll!NtFreeVirtualMemory"]})

    def write(self, path, **header):
        """The trace at path; header: more header fields (commit_limit=N)."""
        with open(path, "w") as f:
            f.write(json.dumps({"format": "commitwatch-trace", "version": 1,
                                "platform": "windows", "pointer_size": 8, **header}) + "\n")
            for _, _, e in sorted(self.ev, key=lambda x: (x[0], x[1])):
                f.write(json.dumps(e) + "\n")
        return path


class Level:
    """Keeps a process's outstanding near a target with chunk-sized
    commits and releases (newest first)."""

    def __init__(self, tr, pid, chunk=MiB):
        self.tr, self.pid, self.chunk, self.live = tr, pid, chunk, []

    def to(self, ts, target):
        while len(self.live) * self.chunk + self.chunk <= target:
            self.live.append(self.tr.commit(ts, self.pid, self.chunk))
        while self.live and len(self.live) * self.chunk > target:
            self.tr.release(ts, self.pid, self.live.pop(), self.chunk)


def config_text(rules_path, extra=""):
    return (f"alert_rules = {rules_path}\nalert_default_rules = no\nalert_log = no\n"
            f"alert_interval = 10s\nalert_step = 1m\n{extra}")


def run(folder, name, trace, rules, extra="", db=None, check=True, header=None):
    """Replays trace (a Trace) into db (default folder/name.db, fresh) with
    the rules text (and the trace's extra header fields); returns (db,
    completed process)."""
    os.makedirs(folder, exist_ok=True)
    tpath = trace.write(os.path.join(folder, f"{name}.jsonl"), **(header or {}))
    rpath = os.path.join(folder, f"{name}.rules")
    with open(rpath, "w") as f:
        f.write(rules)
    cpath = os.path.join(folder, f"{name}.conf")
    with open(cpath, "w") as f:
        f.write(config_text(rpath, extra))
    if db is None:
        db = os.path.join(folder, f"{name}.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
    p = subprocess.run([BIN, "run", "--source", f"replay:{tpath}", "--exit-at-end", "--no-http",
                        "--config", cpath, "--db", db], capture_output=True, text=True,
                       timeout=600)
    if check and p.returncode != 0:
        raise AssertionError(f"commitwatch run failed ({p.returncode}):\n{p.stderr[-3000:]}")
    # The engine writes beside the store writer (WAL, busy timeout): a
    # failed evaluation or save is logged, and must not happen here.
    if check and ("alerts: evaluating at" in p.stderr or "alerts: reading" in p.stderr):
        raise AssertionError(f"the alert engine logged a failure:\n{p.stderr[-3000:]}")
    return db, p


def _rows(db, q, rule, col):
    """Rows of query q (optionally WHERE col = rule) as dicts."""
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    args = ()
    if rule:
        q, args = q.replace(" ORDER BY", f" WHERE {col} = ? ORDER BY"), (rule,)
    rows = [dict(r) for r in con.execute(q, args)]
    con.close()
    return rows


def transitions(db, rule=None):
    """Every transition (of rule, or all) as a dict, in evaluation order."""
    return _rows(db, "SELECT t.id, t.ts_ns, t.from_state, t.to_state, t.severity, t.value,"
                 " t.threshold, t.leak_score, t.ttl_s, t.reason, t.silenced, s.rule, s.key,"
                 " s.process, s.pid, s.tag FROM alert_transitions t"
                 " JOIN alert_series s ON s.id = t.series ORDER BY t.ts_ns, t.id", rule, "s.rule")


def series(db, rule=None):
    """The series rows (of rule, or all) as dicts."""
    return _rows(db, "SELECT * FROM alert_series ORDER BY id", rule, "rule")
