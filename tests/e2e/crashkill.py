"""crashkill.py - kills `commitwatch run` with SIGKILL at random moments and
restarts it, and copies its database mid-write as a power cut would leave
it; checks after every kill that the database is whole and that what it
holds equals the reference model (refmodel.py) of what was fed, up to its
last stored bucket. Shared by tests/e2e/test_crash_kill.py (CI, bounded)
and bench/crash_kill.py (a longer campaign with the figures).

Each run replays a new segment of a synthetic trace (processes of their
own pids: a long-lived one with rundown, a churner whose pid is reused,
a third that exits) starting at or after the database's stored end, paced
(--speed) so that a run lasts seconds of wall time and hours of trace pass
over the whole campaign: minute rollups, hour rollups and retention
(retention_raw = 3m, retention_minute = 1h, retention_hour = 3h) happen
all the time. The run is killed after a random delay (some during
start-up, most while ingesting). Then:

- PRAGMA integrity_check of the file as the kill left it (opened read-only,
  so the restart recovers the WAL itself);
- loss: the trace time the replay had reached at the kill (from the wall
  time its "ingesting" line appeared and the speed; an upper bound, the
  replay lags its pace on a loaded machine) minus the stored end, in
  seconds and in raw buckets (1 s) begun since the stored end (1: only the
  open bucket). What a kill loses is the open bucket, the closed ones the
  writer has not committed (at most QUEUE, app/writing.c WRITER_QUEUE) and the
  replay's lag; at real-time pace (--speed 1) the writer commits each
  bucket within milliseconds of its close, so a campaign given bound_s
  fails on any kill that lost more (test_crash_kill.py's real-time part:
  the open bucket, the replay's tick and a margin for a loaded machine);
- the segment's windows (the whole stored part and random ones, as the
  database answers them: widened to its tiers' buckets) equal the model of
  the segment cut at the stored end, process by process;
- every few kills, a power cut: the process is stopped (SIGSTOP), the
  database and WAL copied, the process continued; the WAL copy is cut at a
  random point after what was checkpointed or is being checkpointed (the
  frames a power cut may lose with synchronous = NORMAL; a torn last
  frame included) and the copy
  opened: integrity ok, and its contents a prefix that equals the model.

At the end the whole database is compared with the model of every segment
cut at its stored end, on whole-range and random windows.
"""

import json
import os
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
import time
import zlib

import refmodel
import stacktags_ref

SEC = 10**9
MIN = 60 * SEC
HEADER = {"format": "commitwatch-trace", "version": 1, "platform": "windows", "pointer_size": 8}
T0 = 1_699_999_200 * SEC  # a whole hour
FIGS = ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes", "transient_count",
        "peak_outstanding_bytes", "outstanding_end_bytes", "events")
QUEUE = 64  # buckets the writer's queue holds (app/writing.c, WRITER_QUEUE)
CONFIG = ("fold_lifetime = 0\nretention_raw = 3m\nretention_minute = 1h\nretention_hour = 3h\n"
          "log_level = info\n")


class Failure(AssertionError):
    pass


def segment(rnd, i, start, span_s):
    """Events (dicts) of segment i: from `start` over span_s seconds, pids
    1000 * (i + 1) + k."""
    base = 1000 * (i + 1)
    stacks = [["app.exe!main", f"app.exe!work{k}", "KernelBase.dll!VirtualAlloc"] for k in range(3)]
    stacks.append(["app.exe!main", "ntdll.dll!RtlpAllocateHeapInternal",
                   "ntdll.dll!NtAllocateVirtualMemory"])
    page = 4096
    evs = []
    for k in range(3):
        evs.append({"ts": start, "pid": base + k, "op": "process_start", "name": f"seg{k}.exe"})
    evs.append({"ts": start, "pid": base, "op": "commit", "addr": hex(0x7f0000),
                "size": 16 * page, "stack": ["(before trace)"], "rundown": True})
    t = start
    end = start + span_s * SEC
    alive = {base + k: True for k in range(3)}
    while True:
        t += rnd.choice([rnd.randrange(1, 400) * 10**6, SEC, rnd.randrange(SEC)])
        if t >= end:
            break
        pid = base + rnd.randrange(3)
        r = rnd.random()
        if not alive[pid]:
            evs.append({"ts": t, "pid": pid, "op": "process_start", "name": f"seg{pid - base}.exe"})
            alive[pid] = True
            continue
        addr = hex(0x100000 + rnd.randrange(64) * page)
        size = (1 + rnd.randrange(6)) * page
        if r < 0.45:
            evs.append({"ts": t, "pid": pid, "op": "commit", "addr": addr, "size": size,
                        "stack": rnd.choice(stacks)})
        elif r < 0.80:
            evs.append({"ts": t, "pid": pid, "op": rnd.choice(["decommit", "release"]),
                        "addr": addr, "size": size})
        elif r < 0.97 or pid == base:
            evs.append({"ts": t, "pid": pid, "op": "commit", "addr": hex(0x400000 + rnd.randrange(8) * page),
                        "size": page, "stack": stacks[0]})
        else:
            evs.append({"ts": t, "pid": pid, "op": "process_exit"})
            alive[pid] = False
    return evs


def write_trace(path, evs):
    with open(path, "w") as f:
        f.write(json.dumps(HEADER) + "\n")
        for ev in evs:
            f.write(json.dumps(ev) + "\n")


def tiers(db):
    """{tier: (start, horizon, end)} of the file's three tiers (not the
    open hour's row, tier 3), read-only."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return {k: (s, h, e) for k, s, h, e in
                con.execute("SELECT tier, start_ns, horizon_ns, end_ns FROM tiers WHERE tier < 3")}
    except sqlite3.OperationalError as e:
        if "readonly" not in str(e):
            return None  # killed before the schema was committed
    finally:
        con.close()
    # The WAL index must be rebuilt, which a read-only handle cannot do:
    # read a copy (the next run recovers the original itself).
    d = db + ".tiers"
    os.makedirs(d, exist_ok=True)
    try:
        shutil.copyfile(db, os.path.join(d, "c.db"))
        if os.path.exists(db + "-wal"):
            shutil.copyfile(db + "-wal", os.path.join(d, "c.db-wal"))
        con = sqlite3.connect(os.path.join(d, "c.db"), timeout=30)
        try:
            return {k: (s, h, e) for k, s, h, e in
                    con.execute("SELECT tier, start_ns, horizon_ns, end_ns FROM tiers WHERE tier < 3")}
        except sqlite3.OperationalError:
            return None
        finally:
            con.close()
    finally:
        shutil.rmtree(d)


def integrity(db, ro=True):
    """PRAGMA integrity_check. Read-only (ro) leaves the WAL for the next
    run to recover; when a read-only connection cannot (the WAL index
    must be rebuilt: "attempt to write a readonly database"), the check
    runs on a copy of the file and its WAL."""
    uri = f"file:{db}?mode=ro" if ro else f"file:{db}"
    con = sqlite3.connect(uri, uri=True, timeout=30)
    try:
        return con.execute("PRAGMA integrity_check").fetchall()
    except sqlite3.OperationalError as e:
        if not ro or "readonly" not in str(e):
            raise
    finally:
        con.close()
    d = db + ".check"
    os.makedirs(d, exist_ok=True)
    copy = os.path.join(d, "copy.db")
    shutil.copyfile(db, copy)
    if os.path.exists(db + "-wal"):
        shutil.copyfile(db + "-wal", copy + "-wal")
    try:
        return integrity(copy, ro=False)
    finally:
        shutil.rmtree(d)


def stored_end(t):
    if not t or t[0][2] == -(2**63):
        return None
    return t[0][2]


def fnv1a(data, h=1469598103934665603):
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def journal_end(db):
    """The end of the buckets the pending-batch journal beside db holds
    (service/store/journal.c: DB-pending.0 and .1, records of a 40-byte
    header, magic "CWJ2", payload length, sequence, bucket, width and the
    CRC-32 of the header's first 32 bytes and the payload, then the batch;
    an older build's "CWJ1" records carry FNV-1a instead), read as the next
    run will: whole records, in sequence up to the first gap. None when it
    holds none."""
    recs = []
    for k in range(2):
        try:
            with open(f"{db}-pending.{k}", "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue
        off = 0
        while len(data) - off >= 40:
            magic, n, seq, bucket, width, csum = struct.unpack_from("<IIQqqQ", data, off)
            if magic not in (0x324A5743, 0x314A5743) or n > len(data) - off - 40:
                break
            if magic == 0x324A5743:
                sum_ = zlib.crc32(data[off + 40:off + 40 + n], zlib.crc32(data[off:off + 32]))
            else:
                sum_ = fnv1a(data[off + 40:off + 40 + n], fnv1a(data[off:off + 32]))
            if sum_ != csum:
                break
            recs.append((seq, bucket + width))
            off += 40 + n
    recs.sort()
    end = None
    for i, (seq, e) in enumerate(recs):
        if i and seq != recs[i - 1][0] + 1:
            break
        end = e if end is None else max(end, e)
    return end


class Campaign:
    def __init__(self, binary, tmp, kills, seed=1, speed=120, span_s=900, max_delay=2.0,
                 powercut_every=5, log=print, min_delay=0.06, bound_s=None, stall_every=0,
                 stall_s=3.5):
        """Kills land uniformly in [min_delay, max_delay] s after the start
        (one in six in [0, 0.06): start-up). bound_s: the most trace time
        (s) a kill while ingesting may lose, or None to only report it.
        stall_every: every so many runs, the writer is held back for the
        stall_s seconds before the kill (another connection holds the
        database's write lock, as a `sqlite3` shell's open transaction
        would): the closed buckets queue up for it, and only the journal
        keeps them."""
        self.bin, self.tmp, self.kills, self.speed = binary, tmp, kills, speed
        self.span_s, self.max_delay, self.powercut_every = span_s, max_delay, powercut_every
        self.min_delay, self.bound_s = min_delay, bound_s
        self.stall_every, self.stall_s = stall_every, stall_s
        os.makedirs(tmp, exist_ok=True)
        self.rnd = random.Random(seed)
        self.log = log
        self.db = os.path.join(tmp, "crash.db")
        self.conf = os.path.join(tmp, "crash.conf")
        with open(self.conf, "w") as f:
            f.write(CONFIG)
        self.tag_of = stacktags_ref.tagger("windows")
        self.kept = []  # every segment's events before its run's stored end
        # (stored end, pids, segment) of instances a killed run left open
        # that no restart has ended yet.
        self.open_left = []
        self.stats = {"kills": 0, "startup_kills": 0, "ingest_kills": 0, "rollup_runs": 0,
                      "hour_rollup_runs": 0, "retention_runs": 0, "lost_s": [], "lost_buckets": [],
                      "bound_tested": 0, "integrity": 0, "windows": 0, "powercuts": 0,
                      "powercut_windows": 0, "wall_s": 0.0, "ended_open": 0, "stalls": 0,
                      "journal_kills": 0, "journal_buckets": 0, "recovered_runs": 0,
                      "recovered_windows": 0, "empty_windows": 0}
        # (events, start, the end the journal brings it to, pids, segment)
        # of the last segment, while its journal's part waits for a run.
        self.pending = None

    # ---- checks

    def analyze(self, db, frm=None, to=None):
        args = [self.bin, "analyze", "--db", db, "--json"]
        if frm is not None:
            args += ["--from", str(frm), "--to", str(to)]
        p = subprocess.run(args, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise Failure(f"analyze --db {db} {frm} {to}: exit {p.returncode}: {p.stderr}")
        return json.loads(p.stdout)

    def compare(self, db, model, frm, to, pids, what):
        """analyze --db on [frm, to) (as the database widens it) against the
        model on the window it answered, for the processes whose pid is in
        pids (None: all). Returns 1 when the window held data (an instance
        with a figure not 0) and equals the model: a verified exact window;
        0 when it was empty on both sides (nothing was verified: counted in
        stats["empty_windows"], not as an exact window); raises Failure when
        they differ."""
        doc = self.analyze(db, frm, to)
        w = doc["window"]
        want = {}
        for p in model.report(w["from_ns"], w["to_ns"]).values():
            if pids is None or p["pid"] in pids:
                want[(p["pid"], p["start_ns"])] = p
        got = {(p["pid"], p["start_ns"]): p for p in doc["processes"]
               if pids is None or p["pid"] in pids}
        if set(want) != set(got):
            raise Failure(f"{what} [{w['from_ns'] - T0}, {w['to_ns'] - T0}): instances differ: "
                          f"model only {sorted(set(want) - set(got))}, db only "
                          f"{sorted(set(got) - set(want))} (note: {doc.get('note')})")
        for key, m in want.items():
            g = got[key]
            a = {k: m[k] for k in FIGS}
            b = {k: g[k] for k in FIGS}
            a["types"] = m["types"]
            b["types"] = {t: {"bytes": g["types"][t]["bytes"], "count": g["types"][t]["count"]}
                          for t in refmodel.TYPES}
            a["tags"] = {t: v for t, v in m["tags"].items()
                         if any(v.values())}
            b["tags"] = {t["tag"]: {k: t[k] for k in ("size_bytes", "commit_count", "impacting_bytes",
                                                      "transient_bytes", "transient_count")}
                         for t in g.get("tags", []) if any(t[k] for k in ("size_bytes", "commit_count",
                                                                           "impacting_bytes", "transient_bytes",
                                                                           "transient_count"))}
            if a != b:
                diff = {k: (a[k], b[k]) for k in a if a[k] != b[k]}
                raise Failure(f"{what} [{w['from_ns'] - T0}, {w['to_ns'] - T0}) process {key}: "
                              f"model != db: {diff} (note: {doc.get('note')})")
        if not any(m[k] for m in want.values() for k in FIGS):
            self.stats["empty_windows"] += 1
            return 0
        return 1

    def check_segment(self, db, evs, start, end, pids, what, extra=()):
        """The segment's part in db ([start, end)) against its model (of its
        events before end, and extra)."""
        if end is None or end <= start:
            return 0
        model = refmodel.Model([e for e in evs if e["ts"] < end] + list(extra), self.tag_of)
        n = self.compare(db, model, start, end, pids, what + " whole")
        secs = (end - start) // SEC
        for _ in range(3):
            if secs < 2:
                break
            a, b = sorted(self.rnd.sample(range(secs + 1), 2))
            n += self.compare(db, model, start + a * SEC, start + b * SEC, pids, what)
        return n

    def check_ended(self, k, started, err_lines):
        """The instances earlier killed runs left open: ended by a later
        run before it stored anything (cw_store_end_open), at the end of
        the data they were left at, as a stop would have: by every run that
        got to ingesting (maybe by one killed earlier in its start-up).
        Those ended go into the model as "tracking_end" events.
        Instances that only the pending-batch journal held are not in the
        database until a run has stored the journal's buckets: a run killed
        in its start-up before that leaves them waiting, as open ones."""
        still = []
        for at, pids, seg in self.open_left:
            with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as c:
                rows = c.execute(
                    "SELECT pid, exit_ns, tracking_ended_ns FROM processes WHERE pid IN (%s)"
                    % ",".join("?" * len(pids)), pids).fetchall()
            open_rows = [r for r in rows if r[1] is None and r[2] is None]
            ended = [r for r in rows if r[1] is None and r[2] == at]
            # (Earlier instances of a reused pid have other rows.)
            unstored = sorted(set(pids) - {r[0] for r in open_rows + ended})
            if (open_rows or unstored) and started:
                raise Failure(f"run {k} ingested, but segment {seg}'s instances left open at "
                              f"{(at - T0) / SEC} s are still open: {open_rows}, or not stored: "
                              f"{unstored}")
            if not open_rows and not unstored:
                if len(ended) != len(pids):
                    raise Failure(f"segment {seg}'s instances left open at {(at - T0) / SEC} s "
                                  f"were not ended there: {rows}")
                if started and not any("did not stop" in line for line in err_lines):
                    # Ended by this run: open at the previous check.
                    raise Failure(f"run {k} ended segment {seg}'s open instances without "
                                  f"saying so in its log: {''.join(err_lines)[-1500:]}")
                self.kept.extend({"ts": at, "pid": p, "op": "tracking_end"} for p in pids)
                self.stats["ended_open"] += len(pids)
            else:
                still.append((at, pids, seg))
        self.open_left = still

    # ---- a power cut

    def powercut(self, proc, seg_evs, seg_start, pids, k):
        """Stops the process, copies the database and its WAL, continues it;
        cuts the WAL copy after the checkpointed frames; checks the copy."""
        d = os.path.join(self.tmp, f"cut{k}")
        os.makedirs(d, exist_ok=True)
        cdb = os.path.join(d, "crash.db")
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            shutil.copyfile(self.db, cdb)
            wal = self.db + "-wal"
            have_wal = os.path.exists(wal) and os.path.getsize(wal) > 32
            if have_wal:
                shutil.copyfile(wal, cdb + "-wal")
                with open(self.db + "-shm", "rb") as f:
                    shm = f.read(136)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        cut_note = "no WAL"
        if have_wal:
            # WalIndexHdr: mxFrame at 16, page size at 14 (u16; 1 = 64 KiB);
            # WalCkptInfo at 96: nBackfill, then at 128 nBackfillAttempted
            # (native byte order). A checkpoint under way has synced the
            # WAL up to nBackfillAttempted and may have copied any of
            # those frames into the file: they cannot be lost.
            mx = struct.unpack_from("=I", shm, 16)[0]
            backfill = max(struct.unpack_from("=I", shm, 96)[0],
                           struct.unpack_from("=I", shm, 128)[0])
            psz = struct.unpack_from("=H", shm, 14)[0]
            psz = 65536 if psz == 1 else psz
            frame = 24 + psz
            keep = self.rnd.randint(backfill, mx) if mx >= backfill else mx
            size = 32 + keep * frame + (self.rnd.randrange(frame) if self.rnd.random() < 0.5 else 0)
            size = min(size, os.path.getsize(cdb + "-wal"))
            with open(cdb + "-wal", "r+b") as f:
                f.truncate(size)
            cut_note = f"WAL cut to frame {keep} of {mx} (checkpointed {backfill})"
        res = integrity(cdb, ro=False)
        if res != [("ok",)]:
            raise Failure(f"power cut {k} ({cut_note}): integrity_check {res}")
        end = stored_end(tiers(cdb))
        self.stats["powercuts"] += 1
        self.stats["powercut_windows"] += self.check_segment(cdb, seg_evs, seg_start, end, pids,
                                                             f"power cut {k} ({cut_note})")
        shutil.rmtree(d)

    def settle(self):
        """A last run that is not killed, of no events: it stores what the
        last kill left in the journal (and ends the instances left open),
        so the final check sees it. Returns the stored end."""
        trace = os.path.join(self.tmp, "empty.jsonl")
        write_trace(trace, [])
        p = subprocess.run([self.bin, "run", "--no-http", "--exit-at-end", "--source",
                            "replay:" + trace, "--db", self.db, "--config", self.conf],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise Failure(f"the settling run failed (exit {p.returncode}): {p.stderr[-2000:]}")
        lines = p.stderr.splitlines(keepends=True)
        if not any("are stored now from its pending-batch journal" in ln for ln in lines):
            raise Failure(f"the settling run did not store the journal's buckets: "
                          f"{p.stderr[-2000:]}")
        self.stats["recovered_runs"] += 1
        end = stored_end(tiers(self.db))
        if end is None or end < self.pending[2]:
            raise Failure(f"the settling run stored up to {end}, not the journal's end "
                          f"{self.pending[2]}")
        self.check_ended(self.kills, True, lines)
        p, self.pending = self.pending, None
        self.check_recovered(p)
        return end

    def check_recovered(self, pending):
        """The last segment's part that only the journal held, stored by a
        restart, against its model (with the instances that restart ended
        at its end: a window widened to a tier's bucket sees them)."""
        pevs, pstart, pend, ppids, pseg = pending
        ended = [e for e in self.kept if e["op"] == "tracking_end" and e["ts"] == pend
                 and e["pid"] in ppids]
        self.stats["recovered_windows"] += self.check_segment(
            self.db, pevs, pstart, pend, ppids, f"segment {pseg} with its journal", ended)

    # ---- the campaign

    def run(self):
        t_begin = time.monotonic()
        end = None
        for k in range(self.kills):
            # At least a bucket after the stored end: the restart ends what
            # the killed run left open in the bucket at that end.
            start = (end if end is not None else T0) + self.rnd.randrange(1, 3) * SEC \
                + self.rnd.randrange(SEC)
            evs = segment(self.rnd, k, start, self.span_s)
            pids = {e["pid"] for e in evs}
            trace = os.path.join(self.tmp, "seg.jsonl")
            write_trace(trace, evs)
            before = tiers(self.db) if os.path.exists(self.db) else None
            ingest_at = []

            proc = subprocess.Popen([self.bin, "run", "--no-http", "--exit-at-end", "--source",
                                     "replay:" + trace, "--db", self.db, "--config", self.conf,
                                     "--speed", str(self.speed)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            err_lines = []

            def reader():
                for line in proc.stderr:
                    if "ingesting from" in line and not ingest_at:
                        ingest_at.append(time.monotonic())
                    err_lines.append(line)

            th = threading.Thread(target=reader, daemon=True)
            th.start()
            t_start = time.monotonic()
            # One kill in six during start-up (open, migrations, re-tagging).
            delay = (self.rnd.uniform(0.0, 0.06) if self.rnd.random() < 1 / 6
                     else self.rnd.uniform(self.min_delay, self.max_delay))
            stall = self.stall_every and k % self.stall_every == self.stall_every - 1
            if stall:  # late enough that the stall is while ingesting
                delay = self.rnd.uniform(self.stall_s + 1.0, self.stall_s + 2.5)
            if self.powercut_every and k % self.powercut_every == self.powercut_every - 1:
                time.sleep(self.rnd.uniform(0.1, delay))
                if proc.poll() is None and ingest_at:
                    self.powercut(proc, evs, start, pids, k)
            lock = None
            if stall:
                time.sleep(max(0.0, delay - self.stall_s - (time.monotonic() - t_start)))
                if ingest_at and proc.poll() is None:
                    # The writer's next BEGIN IMMEDIATE waits for this one
                    # (its busy timeout, 5 s, is longer than the stall).
                    lock = sqlite3.connect(self.db, timeout=30, isolation_level=None)
                    lock.execute("BEGIN IMMEDIATE")
                    self.stats["stalls"] += 1
            time.sleep(max(0.0, delay - (time.monotonic() - t_start)))
            kill_at = time.monotonic()
            proc.kill()
            rc = proc.wait()
            if lock:
                lock.execute("ROLLBACK")
                lock.close()
            th.join(10)
            if rc != -signal.SIGKILL:
                raise Failure(f"run {k} was not killed (exit {rc}; it ended before the kill): "
                              f"{''.join(err_lines)[-2000:]}")
            self.stats["kills"] += 1
            res = integrity(self.db)
            if res != [("ok",)]:
                raise Failure(f"kill {k}: integrity_check {res}")
            self.stats["integrity"] += 1
            after = tiers(self.db)
            end_db = stored_end(after)
            if any("are stored now from its pending-batch journal" in line for line in err_lines):
                self.stats["recovered_runs"] += 1
            recovered = None
            if self.pending and end_db is not None and end_db >= self.pending[2]:
                recovered, self.pending = self.pending, None
            # What the next run stores first (the journal's buckets beyond
            # the database's end) is what this one kept.
            end = end_db
            jend = journal_end(self.db)
            if jend is not None and (end is None or jend > end):
                if jend > start:  # this run's (else the last one's, not yet stored)
                    self.stats["journal_kills"] += 1
                    self.stats["journal_buckets"] += (jend - max(end or start, start)) // SEC
                    self.pending = (evs, start, jend, pids, k)
                end = jend
            if ingest_at:
                self.stats["ingest_kills"] += 1
                reached = start + int((kill_at - ingest_at[0]) * self.speed * SEC)
                reached = min(reached, evs[-1]["ts"])
                # Lost: from the stored end (or the segment's first bucket,
                # when none of it was stored) to where the pace had got.
                base = end if end is not None and end > start else start - start % SEC
                lost = max(0.0, (reached - base) / SEC)
                buckets = -(-(reached - base) // SEC) if reached > base else 0
                # Faster than real time, a stall fills the writer's queue
                # and the replay waits for it: the pace no longer says
                # where it got, so such kills are not in the figures.
                if not (lock and self.speed > 1):
                    self.stats["lost_s"].append(lost)
                    self.stats["lost_buckets"].append(buckets)
                # An upper bound (the replay may lag its pace on a loaded
                # machine, then it had reached less). What a kill may lose
                # by design is the open bucket and the closed ones not yet
                # committed (at most QUEUE); that what was stored is whole
                # and exact is checked below.
                if self.bound_s is not None and reached - start > self.bound_s * SEC:
                    self.stats["bound_tested"] += 1  # it could have lost more
                if self.bound_s is not None and lost > self.bound_s:
                    raise Failure(f"kill {k} after {kill_at - t_start:.2f} s at --speed "
                                  f"{self.speed}: {lost:.3f} s of trace lost ({buckets} buckets: "
                                  f"reached {(reached - T0) / SEC:.3f} s, stored to "
                                  f"{(base - T0) / SEC:.3f} s), more than the bound "
                                  f"{self.bound_s} s")
            else:
                self.stats["startup_kills"] += 1
            if before and after:
                if after[1][2] > before[1][2]:
                    self.stats["rollup_runs"] += 1
                if after[2][2] > before[2][2]:
                    self.stats["hour_rollup_runs"] += 1
                if after[0][1] > before[0][1]:
                    self.stats["retention_runs"] += 1
            self.check_ended(k, bool(ingest_at), err_lines)
            if recovered:  # the journal's part of the last segment is stored now
                self.check_recovered(recovered)
            kept = [e for e in evs if end is not None and e["ts"] < end]
            self.kept.extend(kept)
            alive = {}
            for e in kept:
                if e["op"] == "process_start":
                    alive[e["pid"]] = True
                elif e["op"] == "process_exit":
                    alive[e["pid"]] = False
            if any(alive.values()):
                self.open_left.append((end, sorted(p for p, a in alive.items() if a), k))
            self.stats["windows"] += self.check_segment(self.db, evs, start, end_db, pids,
                                                        f"kill {k}")
            self.log(f"kill {k}: after {kill_at - t_start:.2f} s "
                     f"({'ingesting' if ingest_at else 'starting'}{', writer stalled' if lock else ''}"
                     f"), stored to {(end_db - T0) / SEC if end_db else None} s"
                     + (f", journal to {(end - T0) / SEC} s" if end != end_db else "")
                     + f", {len(kept)} events kept"
                     + (f", lost {lost:.3f} s ({buckets} buckets)" if ingest_at else ""))
        if self.pending:
            end = self.settle()
        # The whole database against the model of everything kept.
        model = refmodel.Model(self.kept, self.tag_of)
        # A restart killed after it ended what the run before left open,
        # before storing anything of its own: the data ends there.
        if end is not None and any(e["op"] == "tracking_end" and e["ts"] == end - SEC
                                   for e in self.kept):
            model.data_end = end - SEC
        doc = self.analyze(self.db)
        w = doc["window"]
        self.stats["windows"] += self.compare(self.db, model, w["from_ns"], w["to_ns"], None,
                                              "final whole")
        lo, hi = w["from_ns"], w["to_ns"]
        for _ in range(12):
            unit = self.rnd.choice([SEC, MIN])
            a = lo + self.rnd.randrange(max(1, (hi - lo) // unit)) * unit
            b = min(hi, a + self.rnd.randrange(1, 30) * unit)
            if b > a:
                self.stats["windows"] += self.compare(self.db, model, a, b, None, "final")
        self.stats["wall_s"] = time.monotonic() - t_begin
        self.stats["trace_hours"] = ((end or T0) - T0) / 3600 / SEC
        return self.stats


def quantile(values, f):
    v = sorted(values)
    return v[min(len(v) - 1, int(f * len(v)))] if v else 0


def summary(st):
    lost, nb = st["lost_s"], st["lost_buckets"]
    q = lambda f: quantile(lost, f)  # noqa: E731
    b = lambda f: quantile(nb, f)  # noqa: E731
    one = sum(1 for x in nb if x <= 1)
    return (f"{st['kills']} kills ({st['startup_kills']} during start-up, {st['ingest_kills']} while "
            f"ingesting), integrity_check ok {st['integrity']} times; runs with a minute rollup "
            f"{st['rollup_runs']}, an hour rollup {st['hour_rollup_runs']}, raw retention "
            f"{st['retention_runs']}; trace time lost per kill (s): median {q(0.5):.2f}, p90 "
            f"{q(0.9):.2f}, max {q(1.0):.2f}; raw buckets lost per kill: median {b(0.5)}, p90 "
            f"{b(0.9)}, max {b(1.0)} (only the open bucket: {one} of {len(nb)}); "
            + (f"{st['bound_tested']} could have lost more than the bound; "
               if st.get("bound_tested") else "")
            + f"{st['windows']} windows with data equal the model ({st.get('empty_windows', 0)} "
            "empty ones not counted); "
            f"{st.get('ended_open', 0)} instances left open by a kill ended by the restart; "
            f"{st['powercuts']} power cuts, {st['powercut_windows']} of their windows equal; "
            f"writer stalled before {st.get('stalls', 0)} kills; {st.get('journal_kills', 0)} kills "
            f"left {st.get('journal_buckets', 0)} closed buckets in the journal, stored by "
            f"{st.get('recovered_runs', 0)} restarts ({st.get('recovered_windows', 0)} windows "
            f"equal); "
            f"{st.get('trace_hours', 0):.2f} h of trace in {st['wall_s']:.0f} s")


if __name__ == "__main__":
    sys.exit("use tests/e2e/test_crash_kill.py or bench/crash_kill.py")
