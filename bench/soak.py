#!/usr/bin/env python3
"""soak.py - commitwatch under the live perf source, with many short-lived
processes and long-lived churners, for a long time (issue 13 item 4;
docs/RELIABILITY.md, "Soak"). tests/e2e/test_soak_root.py runs it for
2 minutes in CI with --check.

Run as root (the perf source needs it), niced: the machine is shared.

    nice -n 19 bench/soak.py --minutes 30 --alert-window 2m --out /tmp/soak30 --check
    bench/soak.py --minutes 2 --check          # what CI runs

Phases:
  1. `commitwatch run --source perf` (HTTP on a free loopback port, short
     retention: raw --retention-raw, minutes 5m, hours 10m) starts; the
     churners (tests/workloads/churner: each holds --hold MiB and makes
     mmap/munmap/mprotect/brk/malloc calls all the time from 3 threads)
     start; the spawners run for --prime seconds (caches that fill once
     fill), then --warmup seconds without them: the daemon's RSS and fd
     count there are the baseline.
  2. For --minutes, --spawners spawners (tests/workloads/spawner) start
     --spawn-rate processes a second each (fork/exec/exit, threads, half
     of them taking the pid of a child that just exited).
  3. The spawners stop; --settle seconds later (after the raw tier's
     retention folded the load's seconds) the RSS and fds are the end.
  Every --sample seconds: the daemon's RSS, fd count, /api/health
  (events, lost, drift corrected) and the rows of the processes and
  folded tables. Every --drift-every seconds and at the end: each churner
  is stopped (SIGSTOP: its calls are complete), and once the daemon has
  stored the second it stopped in, its outstanding commit per
  /api/processes?pid= is compared with its /proc/PID/smaps (VMAs charged
  to the commit limit, the [stack] aside: tests/e2e/procmem.py, as
  test_perf_root does); a churner whose check fails while the source
  reported lost events is checked once more.
  4. The daemon stops; a one-process trace 3 hours after the data's end is
     replayed into the same database, so every tier's retention horizon
     passes the soak: the processes and folded rows of ended instances are
     pruned. The rows before and after are counted.

Prints a summary and writes OUT/summary.json, OUT/samples.csv (with the
daemon's memory components, mem_*, and its anonymous pages by mapping,
anon_*: the rss check's report names those that moved), OUT/rss.csv
(the RSS read every --rss-sample seconds) and the daemon's log. The
baseline and end RSS are each the median of the second half of the phase's
readings (warmup; settle); the anonymous RSS's are the floor (the 10th
percentile) of those readings, see quiet_rss. The warmup has the settle's
drift checks (their API reads keep a read handle's caches). --check exits
1 unless: the end anonymous RSS (RssAnon: VmRSS also counts the pages of
the modules the unwinder maps, which come and go with the machine's
processes) is within --rss-tolerance (10 %) of the baseline, the end fd count other than files and civetweb's socketpairs (AF_UNIX) is the baseline's (+4: the bench's own
connections closing; and never
passed it by more than 8; files, the modules the unwinder's cache holds, no
more in the second half than in the first, by half), every drift check
without lost records was 0 bytes and every round of up to 3 attempts per
churner ended at 0, the daemon stored every spawned instance (all of them when no event was lost) and after the
replay no ended instance without a baseline is left, nor any folded row.
"""
import argparse
import ast
import csv
import http.client
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from cwtest import file_text, wait_until  # noqa: E402
from procmem import anon_parts, proc_stopped, rss_bytes, smaps_charged  # noqa: E402

MB = 1024 * 1024
SEC = 1000000000


def shipped_rules(window):
    """The shipped default rules, read from their source
    (service/alerts/defaults.c), with every duration (window, for,
    keep_firing_for, warmup) set to `window`: what --alert-window loads
    instead of them. The alert engine keeps the series of ended instances
    (compacted) while a rule's window can still read them: 6 h for the
    shipped likely_leak, which no bench settles past; with a window
    shorter than --settle, the settle shows whether that memory comes
    back."""
    with open(os.path.join(HERE, "..", "service", "alerts", "defaults.c")) as f:
        src = f.read()
    body = src[src.index("default_rules[] ="):]
    body = body[:body.index('";') + 1]  # to the literal's end (a ';' may be inside it)
    text = "".join(ast.literal_eval(lit) for lit in re.findall(r'"(?:[^"\\]|\\.)*"', body))
    return re.sub(r"^(window|for|keep_firing_for|warmup) = .*$", rf"\1 = {window}", text,
                  flags=re.M)


def folded_instances(con, sql):
    """(group, pid, start_ns) of every instance in the runs of folded
    that sql selects as (grp, first_ns, n, data): the encoding of
    schema/010_folded_runs.sql (service/store/store_fold.c)."""
    def varint(b, i):
        v = shift = 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7F) << shift
            shift += 7
            if c < 0x80:
                return v, i

    def unzigzag(u):
        return (u >> 1) ^ -(u & 1)

    out = []
    for grp, start, n, data in con.execute(sql):
        i, pid = 1, 0  # data[0] is the format, 1
        for _ in range(n):
            d, i = varint(data, i)
            z, i = varint(data, i)
            _, i = varint(data, i)  # exit - start
            pages, i = varint(data, i)
            if pages & 1:
                _, i = varint(data, i)  # bytes' remainder
            start += d
            pid += unzigzag(z)
            out.append((grp, pid, start))
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def quiet_rss(samples, phase, key="rss", q=0.5):
    """The daemon's RSS (key) in a phase without the spawners: the q
    quantile of the phase's second half (readings in time order: the full
    samples and the RSS readings of every --rss-sample seconds). The
    machine's other processes come and go (the perf source sees them all),
    so one sample says little. q = 0.1 is the floor the checks compare:
    what the records waiting in the perf queue add (0 - 8 MiB, with the
    backlog of that second) only ever adds, and the queue's chunks go back
    to the kernel when it drains (recpool.c), so the floor is the memory
    the daemon keeps, which a leak or a cache kept at its peak raises."""
    rss = [s[key] for s in samples if s["phase"] == phase]
    rss = sorted(rss[len(rss) // 2:])
    return rss[min(len(rss) - 1, int(len(rss) * q))] if rss else 0


def memory_moves(samples):
    """The daemon's memory by component (/api/health's "memory") and its
    anonymous pages by mapping (procmem.anon_parts): the median of the
    second half of the warmup's and of the settle's full samples, for the
    report of the rss check: {name: (baseline, end)}."""
    keys = sorted({k for s in samples for k in s if k.startswith(("mem_", "anon_"))})
    out = {}
    for k in keys:
        v = [quiet_rss([s for s in samples if s.get(k) is not None], ph, k)
             for ph in ("warmup", "settle")]
        out[k] = tuple(v)
    return out


class Soak:
    def __init__(self, a):
        self.a = a
        self.out = a.out or tempfile.mkdtemp(prefix="cw-soak-")
        os.makedirs(self.out, exist_ok=True)
        self.db = os.path.join(self.out, "soak.db")
        if os.path.exists(self.db):  # its rows and stacks would count in this run's figures
            raise SystemExit(f"FAIL: {self.db} exists (an earlier run's): give a new --out")
        for f in (self.db, self.db + "-wal", self.db + "-shm"):
            if os.path.exists(f):
                os.remove(f)
        self.port = free_port()
        self.conf = os.path.join(self.out, "soak.conf")
        with open(self.conf, "w") as f:
            f.write(f"retention_raw = {a.retention_raw}\nretention_minute = 5m\n"
                    f"retention_hour = 10m\nlisten = 127.0.0.1:{self.port}\n")
            if a.alert_window:
                rules = os.path.join(self.out, "soak.rules")
                with open(rules, "w") as r:
                    r.write(shipped_rules(a.alert_window))
                f.write(f"alert_default_rules = no\nalert_rules = {rules}\n")
        self.samples = []
        self.rss_ticks = []  # the RSS alone, every --rss-sample seconds
        self.drift = []
        self.drift_rounds = 0
        self.churners = []
        self.spawners = []
        self.spawn_stats = []
        self.run = None
        self.t0 = time.monotonic()
        self.phase = "start"
        self.memory = {}  # /api/health's memory figures at the last sample
        self.spawner_seen = set()  # the spawners' children stored at any sample

    # ---- the daemon ---------------------------------------------------------
    def start_daemon(self):
        self.log = open(os.path.join(self.out, "run.log"), "w+", buffering=1)
        nice = self.a.daemon_nice - os.nice(0)  # root may lower it: the load stays niced
        wrap = self.a.wrap.split() if self.a.wrap else []
        self.run = subprocess.Popen(wrap + [self.a.bin, "run", "--source", "perf", "--db", self.db,
                                            "--config", self.conf], stderr=self.log,
                                    preexec_fn=lambda: os.nice(nice))
        self.pid = self.run.pid

        def loaded():
            if self.run.poll() is not None:
                raise SystemExit(f"FAIL: the daemon exited with {self.run.returncode}:\n"
                                 f"{file_text(self.log.name)}")
            return "rundown loaded" in file_text(self.log.name)

        wait_until(loaded, 120, "the daemon loaded its rundown")
        if wrap:
            self.pid = self.daemon_pid()
        wait_until(lambda: self.get("/api/health") is not None, 60, "the API answers")

    def daemon_pid(self):
        """Under --wrap (a profiler): the daemon is a descendant of the
        wrapper; its RSS and fds are what the checks measure."""
        exe = os.path.realpath(self.a.bin)

        def ppid(pid):
            return int(file_text(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[1])

        for d in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{d}/exe") != exe:
                    continue
                p = int(d)
                while p > 1 and p != self.run.pid:
                    p = ppid(p)
                if p == self.run.pid:
                    return int(d)
            except (OSError, IndexError, ValueError):
                continue
        raise SystemExit("FAIL: --wrap: no process of the daemon's binary found")

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            return json.loads(body) if r.status == 200 else None
        except (OSError, ValueError):
            return None
        finally:
            c.close()

    def stored_end(self):
        h = self.get("/api/health") or {}
        return h.get("last_bucket_end_ns") or -(2**63)

    def spawner_seen_now(self, con):
        """Adds the spawners' children stored now (instances by id: the
        daemon numbers them in order; folded ones by their key) to those
        seen at earlier samples: retention prunes ended instances while the
        bench runs (the hour tier's horizon passes an hour's start 10 min
        after it), so the rows at the end are not all that were stored."""
        self.spawner_seen.update(r[0] for r in con.execute(
            "SELECT id FROM processes WHERE name = 'spawner' AND pid != 0"))
        self.spawner_seen.update((g, start, pid) for g, pid, start in folded_instances(
            con, "SELECT f.grp, f.first_ns, f.n, f.data FROM folded f JOIN processes g "
            "ON g.id = f.grp WHERE g.name = 'spawner'"))
        return {"spawner_instances_seen": len(self.spawner_seen)}

    def rows(self):
        """processes rows (instances, groups), folded rows, and the instances
        of the spawners' children stored (unfolded + folded)."""
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=30)
        try:
            q = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
            pids = [r[0] for r in con.execute("SELECT pid FROM processes WHERE pid != 0")]
            pids += [pid for _, pid, _ in folded_instances(
                con, "SELECT grp, first_ns, n, data FROM folded")]
            return {
                "processes": q("SELECT count(*) FROM processes"),
                "groups": q("SELECT count(*) FROM processes WHERE pid = 0"),
                "folded": q("SELECT coalesce(sum(n), 0) FROM folded"),
                "spawner_instances":
                    q("SELECT count(*) FROM processes WHERE name = 'spawner' AND pid != 0") +
                    q("SELECT coalesce(sum(f.n), 0) FROM folded f JOIN processes g "
                      "ON g.id = f.grp WHERE g.name = 'spawner'"),
                "pids_reused_stored": len(pids) - len(set(pids)),
            } | self.spawner_seen_now(con)
        except sqlite3.OperationalError:
            return {}
        finally:
            con.close()

    def fd_kinds(self):
        """The daemon's fds by kind (what they point to, numbers aside).
        AF_UNIX sockets are "socket-unix": the daemon has none of its own
        but civetweb's socketpairs, whose number follows the state of its
        worker threads (12 idle, 8 after a few requests), not the load."""
        try:
            with open(f"/proc/{self.pid}/net/unix") as f:
                unix = {ln.split()[6] for ln in list(f)[1:] if len(ln.split()) > 6}
        except OSError:
            unix = set()
        kinds = {}
        d = f"/proc/{self.pid}/fd"
        for fd in os.listdir(d):
            try:
                t = os.readlink(os.path.join(d, fd))
            except OSError:
                continue
            k = t.split(":[")[0] if ":[" in t else (t if not t.startswith("/") else
                                                   os.path.dirname(t) or t)
            if k == "socket" and t[len("socket:["):-1] in unix:
                k = "socket-unix"
            kinds[k] = kinds.get(k, 0) + 1
        return kinds

    def sample(self):
        h = self.get("/api/health") or {}
        s = {"t": round(time.monotonic() - self.t0, 1), "phase": self.phase,
             "rss": rss_bytes(self.pid), "rss_anon": rss_bytes(self.pid, "RssAnon")}
        kinds = self.fd_kinds()
        s.update({"fds": sum(kinds.values()),
                  "fds_files": sum(v for k, v in kinds.items() if k.startswith("/")),
                  "fds_unix": kinds.get("socket-unix", 0),
                  "events": h.get("events_ingested"), "lost": h.get("events_lost"),
                  "drift_corrected": h.get("drift_corrected_bytes"),
                  "db_bytes": h.get("db_size_bytes"),
                  "heap": (h.get("memory") or {}).get("heap_in_use")})
        self.memory = h.get("memory") or {}
        # Where the memory is, for a check that fails: the daemon's own
        # account (/api/health) and the anonymous pages by mapping.
        s.update({"mem_" + k: v for k, v in self.memory.items()})
        try:
            s.update({"anon_" + k: v for k, v in anon_parts(self.pid).items()})
        except OSError:
            pass
        s.update(self.rows())
        self.samples.append(s)
        print(f"[{s['t']:7.1f}s {self.phase:6}] rss {s['rss'] / MB:6.1f} MiB  anon "
              f"{s['rss_anon'] / MB:6.1f} MiB  fds {s['fds']}  "
              f"events {s['events']}  lost {s['lost']}  processes {s.get('processes')}  "
              f"folded {s.get('folded')}", flush=True)
        return s

    # ---- the load -----------------------------------------------------------
    def start_churners(self):
        for _ in range(self.a.churners):
            p = subprocess.Popen([os.path.join(self.a.workloads, "churner"), "--hold",
                                  str(self.a.hold), "--rate", str(self.a.churn_rate)],
                                 stdout=subprocess.PIPE, text=True)
            line = p.stdout.readline()
            if not line.startswith("ready"):
                raise SystemExit(f"FAIL: the churner did not start ({line!r})")
            self.churners.append(p)

    def start_spawners(self):
        for _ in range(self.a.spawners):
            self.spawners.append(subprocess.Popen(
                [os.path.join(self.a.workloads, "spawner"), "--rate", str(self.a.spawn_rate)],
                stdout=subprocess.PIPE, text=True))

    def stop_spawners(self):
        for p in self.spawners:
            p.send_signal(signal.SIGTERM)
        for p in self.spawners:
            out, _ = p.communicate(timeout=120)
            self.spawn_stats.append(json.loads(out.strip().splitlines()[-1]))
        self.spawners = []

    def check_drift(self, label):
        """Stops each churner, waits until the daemon stored the second it
        stopped in, compares the API's outstanding with smaps. A check
        during which the kernel dropped records (the source then
        resynchronises from smaps) is not clean: up to 3 attempts (a
        round) for a clean one or a 0 (a 0 with records lost meanwhile
        is still the daemon's figure equal to smaps)."""
        for p in self.churners:
            self.drift_rounds += 1
            for attempt in range(1, 4):
                lost0 = (self.get("/api/health") or {}).get("events_lost", 0)
                os.kill(p.pid, signal.SIGSTOP)
                try:
                    wait_until(lambda: proc_stopped(p.pid), 30, "every thread of the churner stopped")
                    stopped = time.time_ns()
                    want = smaps_charged(p.pid)
                    wait_until(lambda: self.stored_end() > stopped + SEC, 120,
                               "the daemon stored the second the churner stopped in")
                    # A short window, from the stop: one from before the raw
                    # tier's retention is answered from the minute tier, so
                    # up to a minute before the stop (the window's end is the
                    # last minute stored), which the churner has changed.
                    r = self.get(f"/api/processes?pid={p.pid}"
                                 f"&from={stopped - 2 * SEC}&to={stopped + SEC}") or {}
                    procs = r.get("processes", r) if isinstance(r, dict) else r
                    got = [x["outstanding_end_bytes"] for x in procs
                           if x.get("pid") == p.pid and x.get("exit_ns") is None]
                    if len(got) != 1:  # say what the daemon has of that pid
                        w = self.get(f"/api/processes?pid={p.pid}&from=-10m") or {}
                        here = [(x.get("id"), x.get("exit_ns")) for x in procs]
                        known = [(x.get("id"), x.get("name"), x.get("start_ns"), x.get("exit_ns"))
                                 for x in w.get("processes", [])]
                        print(f"drift: pid {p.pid} in the window {r.get('window')}: {here}; "
                              f"in the last 10 min: {known}", flush=True)
                    to_ns = (r.get("window") or {}).get("to_ns") if isinstance(r, dict) else None
                    if to_ns is None or to_ns < stopped:
                        raise SystemExit(f"FAIL: the API's window for the drift check ends "
                                         f"before the churner stopped: {r.get('window')}")
                finally:
                    os.kill(p.pid, signal.SIGCONT)
                lost = (self.get("/api/health") or {}).get("events_lost", 0) - lost0
                d = {"t": round(time.monotonic() - self.t0, 1), "label": label, "pid": p.pid,
                     "smaps": want, "api": got[0] if len(got) == 1 else got,
                     "drift": got[0] - want if len(got) == 1 else None, "lost": lost,
                     "attempt": attempt, "clean": lost == 0 and len(got) == 1,
                     "round": self.drift_rounds}
                print(f"drift [{label}] churner {p.pid}: api {d['api']} smaps {want} "
                      f"-> {d['drift']} bytes (events lost meanwhile: {lost})", flush=True)
                self.drift.append(d)
                if d["clean"] or d["drift"] == 0:
                    break

    def wait_phase(self, seconds, drift_label=None):
        end = time.monotonic() + seconds
        next_drift = time.monotonic() + self.a.drift_every
        while time.monotonic() < end:
            if self.run.poll() is not None:
                raise SystemExit(f"FAIL: the daemon exited with {self.run.returncode}:\n"
                                 f"{file_text(self.log.name)[-2000:]}")
            self.sample()
            if drift_label and time.monotonic() >= next_drift:
                self.check_drift(drift_label)
                next_drift = time.monotonic() + self.a.drift_every
            # The RSS alone every --rss-sample seconds until the next full
            # sample: the medians of a phase are then of tens of readings
            # (the perf queue alone swings RssAnon by up to 8 MiB).
            nxt = min(end, time.monotonic() + self.a.sample)
            while time.monotonic() < nxt:
                time.sleep(max(0, min(self.a.rss_sample, nxt - time.monotonic())))
                self.rss_tick()

    def rss_tick(self):
        try:
            self.rss_ticks.append({"t": round(time.monotonic() - self.t0, 1), "phase": self.phase,
                                   "rss": rss_bytes(self.pid),
                                   "rss_anon": rss_bytes(self.pid, "RssAnon")})
        except OSError:
            pass

    # ---- pruning by retention -----------------------------------------------
    def replay_later(self):
        """Replays one short process 3 h after the data's end into the
        database: every tier's horizon passes the soak."""
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        end = con.execute("SELECT end_ns FROM tiers WHERE tier = 0").fetchone()[0]
        con.close()
        t = end + 3 * 3600 * SEC
        trace = os.path.join(self.out, "later.jsonl")
        with open(trace, "w") as f:
            f.write('{"format":"commitwatch-trace","version":1,"platform":"linux",'
                    '"pointer_size":8}\n')
            for i, ev in enumerate([
                    {"op": "process_start", "pid": 4242, "name": "later", "cmdline": "later"},
                    {"op": "commit", "pid": 4242, "addr": "0x10000", "size": 65536,
                     "stack": ["later!main"]},
                    {"op": "release", "pid": 4242, "addr": "0x10000", "size": 65536},
                    {"op": "process_exit", "pid": 4242}]):
                f.write(json.dumps(dict(ts=t + i * SEC, **ev)) + "\n")
        r = subprocess.run([self.a.bin, "run", "--source", "replay:" + trace, "--db", self.db,
                            "--config", self.conf, "--no-http"],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise SystemExit(f"FAIL: the replay 3 h later failed ({r.returncode}): {r.stderr}")

    def left_unpruned(self):
        """Ended instances (and groups) that every tier's horizon passed and
        that no tier keeps a baseline of: retention must have pruned them."""
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            h = con.execute("SELECT min(horizon_ns) FROM tiers WHERE tier < 3").fetchone()[0]
            return con.execute(
                "SELECT count(*) FROM processes p WHERE coalesce(exit_ns, tracking_ended_ns) < ? "
                "AND NOT EXISTS (SELECT 1 FROM commit_cells c WHERE c.bucket = ? AND c.proc = p.id)",
                (h, -(2**63))).fetchone()[0], con.execute(
                "SELECT count(*) FROM processes p WHERE coalesce(exit_ns, tracking_ended_ns) < ? "
                "AND EXISTS (SELECT 1 FROM commit_cells c WHERE c.bucket = ? AND c.proc = p.id)",
                (h, -(2**63))).fetchone()[0]
        finally:
            con.close()

    # ---- the whole run -------------------------------------------------------
    def go(self):
        a = self.a
        self.start_daemon()
        self.start_churners()
        if a.prime:
            # The caches that fill once (stacks, the unwinder's, SQLite's,
            # malloc's arenas of each thread) fill before the baseline.
            self.phase = "prime"
            self.start_spawners()
            self.wait_phase(a.prime)
            self.stop_spawners()
        self.phase = "warmup"
        # The settle's drift checks read the API every --drift-every
        # seconds, which keeps one read handle's caches warm (DESIGN,
        # "Memory": a handle idle 30 s drops them). The same here, so the
        # baseline is taken as the end will be: the same churners, the
        # same reads.
        if a.drift_every:
            self.check_drift("warmup")
        self.wait_phase(a.warmup, "warmup" if a.drift_every else None)
        base = self.samples[-1]
        base_fds = self.fd_kinds()
        base_mem = self.memory
        self.phase = "load"
        self.start_spawners()
        self.wait_phase(a.minutes * 60, "load")
        self.stop_spawners()
        self.phase = "settle"
        self.wait_phase(a.settle, "settle")
        end = self.sample()
        end_fds = self.fd_kinds()
        end_mem = self.memory
        self.check_drift("end")
        for p in self.churners:
            p.kill()
            p.wait()
        os.kill(self.pid, signal.SIGINT)
        rc = self.run.wait(timeout=600 if a.wrap else 120)
        before = self.rows()
        self.replay_later()
        after = self.rows()
        left, with_baseline = self.left_unpruned()
        stats = self.spawn_stats[a.spawners:] if a.prime else self.spawn_stats  # the load's
        spawned = sum(s["spawned"] for s in stats)
        load = [s for s in self.samples if s["phase"] in ("load", "settle")]
        ticks = [s for s in self.rss_ticks if s["phase"] in ("load", "settle")]
        readings = sorted(self.samples + self.rss_ticks, key=lambda x: x["t"])
        during = [s for s in self.samples if s["phase"] == "load"]
        first = [s for s in self.samples if s["phase"] == "warmup"] + during[:len(during) // 2]
        second = during[len(during) // 2:] + [s for s in self.samples if s["phase"] == "settle"]
        summary = {
            "command": " ".join(sys.argv),
            "minutes": a.minutes,
            "load": {"spawners": a.spawners, "spawn_rate": a.spawn_rate, "churners": a.churners,
                     "hold_mib": a.hold, "churn_rate": a.churn_rate},
            "spawned": spawned,
            "exec": sum(s["exec"] for s in stats),
            "pids_reused": sum(s["reused"] for s in stats),
            "pids_forced": sum(s["forced"] for s in stats),
            "threads_spawner": sum(s["threads"] for s in stats),
            "spawn_failed": sum(s["failed"] for s in stats),
            "spawned_prime": sum(s["spawned"] for s in self.spawn_stats) - spawned,
            "spawner_instances_stored": before.get("spawner_instances_seen"),
            "spawner_instances_at_end": before.get("spawner_instances"),
            "pids_reused_stored": before.get("pids_reused_stored"),
            "events": end["events"], "events_lost": end["lost"],
            "drift_corrected_bytes": end["drift_corrected"],
            "rss_baseline": quiet_rss(readings, "warmup"),
            "rss_peak": max(s["rss"] for s in load + ticks),
            "rss_end": quiet_rss(readings, "settle"),
            "rss_anon_baseline": quiet_rss(readings, "warmup", "rss_anon", 0.1),
            "rss_anon_peak": max(s["rss_anon"] for s in load + ticks),
            "rss_anon_end": quiet_rss(readings, "settle", "rss_anon", 0.1),
            "rss_anon_baseline_median": quiet_rss(readings, "warmup", "rss_anon"),
            "rss_anon_end_median": quiet_rss(readings, "settle", "rss_anon"),
            "fds_baseline": base["fds"], "fds_max": max(s["fds"] for s in self.samples),
            "fds_end": end["fds"],
            "memory_baseline": base_mem, "memory_end": end_mem,
            "memory_moves": memory_moves(self.samples),
            "fd_kinds_baseline": base_fds, "fd_kinds_end": end_fds,
            "fds_other_baseline": base["fds"] - base["fds_files"] - base["fds_unix"],
            "fds_other_max": max(x["fds"] - x["fds_files"] - x["fds_unix"] for x in self.samples),
            "fds_other_end": end["fds"] - end["fds_files"] - end["fds_unix"],
            "fds_unix_baseline": base["fds_unix"],
            "fds_unix_max": max(x["fds_unix"] for x in self.samples),
            "fds_unix_end": end["fds_unix"],
            "fds_files_max_first_half": max(x["fds_files"] for x in first),
            "fds_files_max_second_half": max(x["fds_files"] for x in second),
            "db_bytes_end": end["db_bytes"],
            "rows_before_replay": before, "rows_after_replay": after,
            "rows_pruned": {"processes": before["processes"] - after["processes"] + 1,
                            "folded": before["folded"] - after["folded"]},
            "rows_peak": {"processes": max(s.get("processes", 0) for s in self.samples),
                          "folded": max(s.get("folded", 0) for s in self.samples)},
            "ended_left_unpruned": left, "ended_kept_with_baseline": with_baseline,
            "drift_checks": len(self.drift),
            "drift_checks_clean": sum(d["clean"] for d in self.drift),
            "drift_bytes_clean": [d["drift"] for d in self.drift if d["clean"]],
            "drift_bytes_with_loss": [d["drift"] for d in self.drift if not d["clean"]],
            "drift_rounds": self.drift_rounds,
            # rounds whose last attempt gave 0 (clean or not)
            "drift_rounds_zero": sum(1 for r in range(1, self.drift_rounds + 1)
                                     if [d["drift"] for d in self.drift if d["round"] == r][-1:]
                                     == [0]),
            "run_exit": rc,
        }
        with open(os.path.join(self.out, "summary.json"), "w") as f:
            json.dump({"summary": summary, "drift": self.drift}, f, indent=1)
        with open(os.path.join(self.out, "samples.csv"), "w", newline="") as f:
            keys = sorted({k for s in self.samples for k in s})
            w = csv.DictWriter(f, keys)
            w.writeheader()
            w.writerows(self.samples)
        with open(os.path.join(self.out, "rss.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, ["t", "phase", "rss", "rss_anon"])
            w.writeheader()
            w.writerows(self.rss_ticks)
        print(json.dumps(summary, indent=1), flush=True)
        print(f"(files in {self.out})", flush=True)
        return summary

    def cleanup(self):
        for p in self.spawners + self.churners:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except OSError:
                    pass
                p.kill()
                p.wait()
        if self.run and self.run.poll() is None:
            self.run.kill()
            self.run.wait()


def verdict(s, tol):
    """The --check conditions: a list of (name, ok, what)."""
    spawned = s["spawned"] + s["spawned_prime"]
    stored = s["spawner_instances_stored"] or 0
    return [
        ("exit", s["run_exit"] == 0, f"the daemon exits 0 on SIGINT ({s['run_exit']})"),
        # RssAnon: the daemon's own memory. VmRSS adds the pages of the
        # modules the unwinder maps (libdw, perf_unwind_processes of the
        # machine's processes, whichever they are): reported, not checked.
        ("rss", s["rss_anon_end"] <= s["rss_anon_baseline"] * (1 + tol),
         f"anonymous RSS back to its baseline within {tol:.0%}: floor (10th percentile) "
         f"at the baseline {s['rss_anon_baseline'] / MB:.1f} MiB, peak "
         f"{s['rss_anon_peak'] / MB:.1f} MiB, floor at the end {s['rss_anon_end'] / MB:.1f} MiB "
         f"(medians {s['rss_anon_baseline_median'] / MB:.1f} and "
         f"{s['rss_anon_end_median'] / MB:.1f} MiB; VmRSS medians {s['rss_baseline'] / MB:.1f} "
         f"and {s['rss_end'] / MB:.1f}, peak {s['rss_peak'] / MB:.1f} MiB)" +
         "".join(f"; {k} {a / MB:.2f} -> {b / MB:.2f}"
                 for k, (a, b) in sorted(s.get("memory_moves", {}).items())
                 if k not in ("mem_perf_rings", "mem_resident", "mem_resident_peak",
                              "mem_sqlite_peak") and abs(b - a) >= 0.05 * MB)),
        # Files are the modules the unwinder's cache of perf_unwind_processes
        # processes holds open (libdw): bounded, not constant. The rest
        # (perf events, sockets, pipes, the database) must come back.
        # (+4 at the end: the connections of the bench's own requests, closing;
        # +16 at most during the load, which a busy machine keeps open longer.)
        ("fds", s["fds_other_end"] <= s["fds_other_baseline"] + 4 and
         s["fds_other_max"] <= s["fds_other_baseline"] + 16 and
         s["fds_files_max_second_half"] <= 1.5 * s["fds_files_max_first_half"] + 16,
         f"no fd growth: {s['fds_baseline']} at the baseline, {s['fds_max']} at most, "
         f"{s['fds_end']} at the end; other than files and civetweb's socketpairs "
         f"{s['fds_other_baseline']} -> {s['fds_other_end']} (at most {s['fds_other_max']}); "
         f"socketpairs {s['fds_unix_baseline']} -> {s['fds_unix_end']} (at most "
         f"{s['fds_unix_max']}); files (the unwinder's modules) "
         f"at most {s['fds_files_max_first_half']} in the first half, "
         f"{s['fds_files_max_second_half']} in the second"),
        # Every check without lost records 0, and every round (up to 3
        # attempts) ends with a 0: records lost just before a check are
        # corrected by the next resync, which a later attempt sees.
        ("drift", all(d == 0 for d in s["drift_bytes_clean"]) and s["drift_rounds"] > 0 and
         s["drift_rounds_zero"] == s["drift_rounds"],
         f"zero drift on the churners against smaps: {s['drift_rounds_zero']} of "
         f"{s['drift_rounds']} rounds ended at 0; {s['drift_bytes_clean']} in the "
         f"{s['drift_checks_clean']} checks without lost records (with records lost meanwhile: "
         f"{s['drift_bytes_with_loss']})"),
        ("pids", s["pids_reused"] > 0, f"pids were reused ({s['pids_reused']})"),
        # Records the kernel dropped (a busy machine) lose the starts of
        # some short processes for good: only a run without loss must
        # store them all.
        ("stored", stored >= spawned if not s["events_lost"] else True,
         f"every spawned process is stored: {stored} instances named spawner for {spawned} "
         f"spawned (stored at any sample; {s.get('spawner_instances_at_end')} left at the end, "
         f"the others pruned by retention)" + (f" (not required: {s['events_lost']} records lost)"
                       if s["events_lost"] else "")),
        ("pruned", s["ended_left_unpruned"] == 0 and s["rows_after_replay"]["folded"] == 0,
         f"retention pruned every ended instance without a baseline: "
         f"{s['rows_pruned']['processes']} processes rows and {s['rows_pruned']['folded']} folded "
         f"rows pruned, {s['ended_left_unpruned']} left, {s['ended_kept_with_baseline']} kept "
         f"with a baseline, {s['rows_after_replay']['folded']} folded rows left"),
    ]


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=30, help="length of the load (default 30)")
    p.add_argument("--not-required", default="", type=lambda v: set(filter(None, v.split(","))),
                   help="checks (rss, drift, fds, pids, stored, pruned, exit) reported but not "
                        "failing --check (for a check known to fail, while it is being fixed)")
    p.add_argument("--bin", default=os.environ.get("CW_BIN", "build/commitwatch"))
    p.add_argument("--workloads", default=os.path.join(os.environ.get("CW_BUILD", "build"),
                                                       "tests", "workloads"))
    p.add_argument("--out", help="folder of the database, log and results (default: a new one)")
    p.add_argument("--churners", type=int, default=2)
    p.add_argument("--hold", type=int, default=32, help="MiB each churner holds (default 32)")
    p.add_argument("--churn-rate", type=int, default=200, help="calls/s per churner")
    p.add_argument("--spawners", type=int, default=1)
    p.add_argument("--spawn-rate", type=float, default=15, help="processes/s per spawner")
    p.add_argument("--retention-raw", default="2m")
    p.add_argument("--prime", type=float, default=120,
                   help="seconds of the spawners' load before the warmup (0: none)")
    p.add_argument("--warmup", type=float, default=60,
                   help="seconds without spawners before the baseline")
    p.add_argument("--settle", type=float, default=180,
                   help="seconds after the load before the end RSS (past the raw retention)")
    p.add_argument("--sample", type=float, default=10)
    p.add_argument("--rss-sample", type=float, default=1,
                   help="seconds between readings of the daemon's RSS (the medians of a phase)")
    p.add_argument("--drift-every", type=float, default=120)
    p.add_argument("--daemon-nice", type=int, default=0,
                   help="the daemon's niceness (default 0, the load keeps the script's)")
    p.add_argument("--wrap", help="a command the daemon runs under (a heap profiler: "
                   "'heaptrack -o /tmp/cw'); RSS and fds are the daemon's own")
    p.add_argument("--alert-window",
                   help="load the shipped default alert rules with this window (and for, "
                        "keep_firing_for, warmup) instead of theirs (6 h and 1 h), e.g. 2m: "
                        "the alert engine keeps ended instances' series while a window can "
                        "read them, so only a window shorter than --settle lets the rss check "
                        "see that memory come back (docs/RELIABILITY.md, \"Soak\")")
    p.add_argument("--rss-tolerance", type=float, default=0.10)
    p.add_argument("--check", action="store_true", help="exit 1 unless every property held")
    return p.parse_args(argv)


def main(argv=None):
    a = parse(argv)
    if os.geteuid() != 0:
        print("FAIL: the soak needs root (system-wide perf tracing)", flush=True)
        return 1
    for path in (a.bin, os.path.join(a.workloads, "churner"), os.path.join(a.workloads, "spawner")):
        if not os.access(path, os.X_OK):
            print(f"FAIL: {path} is not built", flush=True)
            return 1
    soak = Soak(a)
    # SIGTERM (a timeout) ends it through the cleanup below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("soak: terminated"))
    try:
        s = soak.go()
    finally:
        soak.cleanup()
    if not a.check:
        return 0
    failed = False
    for name, ok, what in verdict(s, a.rss_tolerance):
        if not ok and name in a.not_required:
            print("NOT HELD (an open defect, docs/RELIABILITY.md \"Soak\"; reported, not "
                  "required by --not-required) " + what, flush=True)
            continue
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        failed |= not ok
    if not a.out and not failed:
        shutil.rmtree(soak.out, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
