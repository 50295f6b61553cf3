"""refmodel.py - an independent reference model of ARCHITECTURE.md's rules,
for checking what the service stores and serves.

The API and `analyze --db` share one C function (cw_store_report), so
comparing them proves little. This model is written from the contract
alone (../shared/ARCHITECTURE.md "Commit tracking: exact rules", "Windows
of time and the four types"; docs/DESIGN.md "Decisions the architecture
leaves open", "End of a run"), in plain Python over a JSONL trace, with no
code in common with the service:

- per process instance (pid, start): committed byte ranges, each piece
  remembering the commit event (time, stack) that made it; a commit never
  re-attributes bytes already committed; a decommit/release splits pieces
  and its bytes count against the commit that made them; process_exit (and
  a process_start for a pid still alive) releases everything;
- a piece = the bytes of one commit event released by one later event
  (or still committed);
- rundown commits have a = -infinity: outstanding before the trace, never
  in Size or counts;
- optionally the end of a `run`: instances still alive end at `end_run_at`
  (releases and an event there), as the service does when its input ends;
  they did not exit (exit_ns None, tracking_ended_ns = end_run_at), and
  the data ends there: a report's window reaching past it is clipped to it
  (`data_end`; DESIGN.md, "End of a run"); and the same for one instance
  at a time, an event {"op": "tracking_end", "pid", "ts"} (not a trace op:
  where a restart ended what a killed run left open).

Stack tags come from a `tag_of(frames)` callable: tests use
stacktags_ref.tagger(), which reads the .stacktags files itself (not the
binary's `tags explain`, which shares the C matcher: a tagging bug would
agree with itself). All times are Unix ns;
`shift` is added to every event time (a `--rebase-now` replay).
"""

import json
import random

SEC = 10**9
BEFORE = -(2**63)  # rundown commit time
NEVER = 2**63 - 1  # release time of a live piece
TYPES = ("AIFI", "AIFO", "AOFI", "AOFO")


def read_trace(path):
    """(header, [event dict]) of a JSONL v1 trace."""
    with open(path) as f:
        lines = f.read().splitlines()
    return json.loads(lines[0]), [json.loads(ln) for ln in lines[1:] if ln.strip()]


def _addr(v):
    return int(v, 16) if isinstance(v, str) else int(v)


class Rec:
    """One commit event that committed at least one new byte."""

    def __init__(self, inst, a, ts, stack, nbytes):
        self.inst, self.a, self.ts, self.stack, self.bytes = inst, a, ts, stack, nbytes
        self.rundown = a == BEFORE


class Piece:
    def __init__(self, rec, nbytes, f):
        self.rec, self.bytes, self.f = rec, nbytes, f


class Inst:
    def __init__(self, iid, pid, name, cmdline, start, implicit):
        self.id, self.pid, self.name, self.cmdline = iid, pid, name, cmdline
        self.start, self.exit, self.implicit = start, None, implicit
        self.tracking_ended = None  # where the end of a run ended it, alive
        self.ranges = []  # sorted [lo, hi, rec], never overlapping
        self.recs = []  # every Rec, in order
        self.pieces = []  # every Piece (released or live), in order
        # Every event of the instance: (ts, delta) where delta is the
        # change of outstanding the event made, rundown commits aside (they
        # are outstanding "before the trace", so they change nothing then).
        self.events = []

    def key(self):
        """Who it is, for messages: (pid, name, start); two instances may
        share it (events at the same time), ids never do."""
        return (self.pid, self.name, self.start)


class Model:
    def __init__(self, events, tag_of, end_run_at=None, shift=0):
        self.tag_of = tag_of
        self.insts = []
        self.live = {}
        self.nevents = 0
        self.first_ts = self.last_ts = None
        # The end of the data when a run ended tracking with instances alive
        # (the service stores that only then); None otherwise.
        self.data_end = None
        for ev in events:
            self._apply(ev, shift)
        if end_run_at is not None:
            for inst in list(self.live.values()):
                self._end(inst, end_run_at, tracking=True)
                self.data_end = end_run_at
        for inst in self.live.values():
            for rec, rem in self._remaining(inst).items():
                inst.pieces.append(Piece(rec, rem, NEVER))
        self.all_pieces = [p for i in self.insts for p in i.pieces]
        self.all_recs = [r for i in self.insts for r in i.recs]

    # ---- tracking

    def _new(self, pid, ts, name=None, cmdline=None):
        implicit = name is None
        inst = Inst(len(self.insts) + 1, pid, f"pid {pid}" if implicit else name, cmdline, ts,
                    implicit)
        self.insts.append(inst)
        self.live[pid] = inst
        return inst

    def _remaining(self, inst):
        rem = {}
        for lo, hi, rec in inst.ranges:
            rem[rec] = rem.get(rec, 0) + hi - lo
        return rem

    def _end(self, inst, ts, tracking=False):
        released = 0
        for rec, rem in sorted(self._remaining(inst).items(), key=lambda x: inst.recs.index(x[0])):
            inst.pieces.append(Piece(rec, rem, ts))
            released += rem
        inst.ranges = []
        if tracking:
            inst.tracking_ended = ts
        else:
            inst.exit = ts
        inst.events.append((ts, -released))
        del self.live[inst.pid]

    def _apply(self, ev, shift):
        ts = ev["ts"] + shift
        self.nevents += 1
        if self.first_ts is None:
            self.first_ts = ts
        self.last_ts = ts
        op, pid = ev["op"], ev["pid"]
        inst = self.live.get(pid)
        if op == "process_start":
            if inst:
                self._end(inst, ts)
            inst = self._new(pid, ts, ev["name"], ev.get("cmdline"))
            inst.events.append((ts, 0))
            return
        if op == "tracking_end":
            # Not a trace op: where a later run ended an instance a killed
            # run left open (the store's cw_store_end_open), as a stop does.
            if inst:
                self._end(inst, ts, tracking=True)
            return
        if inst is None:
            inst = self._new(pid, ts)
        if op == "process_exit":
            self._end(inst, ts)
            return
        lo, size = _addr(ev["addr"]), ev["size"]
        hi = lo + size
        delta = 0
        if size > 0 and op == "commit":
            gaps, cur = [], lo
            for a, b, _ in inst.ranges:
                if b <= cur or a >= hi:
                    continue
                if a > cur:
                    gaps.append((cur, a))
                cur = max(cur, b)
            if cur < hi:
                gaps.append((cur, hi))
            new = sum(b - a for a, b in gaps)
            if new:
                rundown = bool(ev.get("rundown"))
                rec = Rec(inst, BEFORE if rundown else ts, ts, tuple(ev.get("stack") or ()), new)
                inst.recs.append(rec)
                inst.ranges = sorted(inst.ranges + [[a, b, rec] for a, b in gaps],
                                     key=lambda r: r[0])
                if not rundown:
                    delta = new
        elif size > 0 and op in ("decommit", "release"):
            keep, removed = [], {}
            for a, b, rec in inst.ranges:
                if b <= lo or a >= hi:
                    keep.append([a, b, rec])
                    continue
                removed[rec] = removed.get(rec, 0) + min(b, hi) - max(a, lo)
                if a < lo:
                    keep.append([a, lo, rec])
                if b > hi:
                    keep.append([hi, b, rec])
            inst.ranges = keep
            for rec in sorted(removed, key=inst.recs.index):
                inst.pieces.append(Piece(rec, removed[rec], ts))
                delta -= removed[rec]
        inst.events.append((ts, delta))

    # ---- figures

    def stack_tag(self, stack):
        return self.tag_of(stack)

    @staticmethod
    def piece_type(p, t0, t1):
        a, f = p.rec.a, p.f
        if a >= t1:
            return None
        if a >= t0:
            return "AIFI" if f < t1 else "AIFO"
        if f < t0:
            return None
        return "AOFI" if f < t1 else "AOFO"

    @staticmethod
    def empty_figs():
        return {"size_bytes": 0, "commit_count": 0,
                "types": {t: {"bytes": 0, "count": 0} for t in TYPES}}

    @staticmethod
    def finish_figs(f):
        f["impacting_bytes"] = f["types"]["AIFO"]["bytes"] - f["types"]["AOFI"]["bytes"]
        f["transient_bytes"] = f["types"]["AIFI"]["bytes"]
        f["transient_count"] = f["types"]["AIFI"]["count"]
        return f

    def stack_figs(self, inst, t0, t1):
        """{frames tuple: figures} of inst's stacks with anything in [t0, t1)."""
        out = {}
        for r in inst.recs:
            if not r.rundown and t0 <= r.a < t1:
                f = out.setdefault(r.stack, self.empty_figs())
                f["size_bytes"] += r.bytes
                f["commit_count"] += 1
        for p in inst.pieces:
            k = self.piece_type(p, t0, t1)
            if k:
                f = out.setdefault(p.rec.stack, self.empty_figs())
                f["types"][k]["bytes"] += p.bytes
                f["types"][k]["count"] += 1
        return {s: self.finish_figs(f) for s, f in out.items()}

    def diff_rows(self, inst, t0, t1, tag_of=None):
        """/api/diff's rows for inst between t0 and t1, by frames tuple: what
        was outstanding at t0 (old) and at t1 (new) per stack, stacks with
        neither left out. tag_of: the tag of a stack (default stack_tag)."""
        tag_of = tag_of or self.stack_tag
        rows = {}
        for frames, fg in self.stack_figs(inst, t0, t1).items():
            ty = fg["types"]
            ob, oc = ty["AOFI"]["bytes"] + ty["AOFO"]["bytes"], ty["AOFI"]["count"] + ty["AOFO"]["count"]
            nb, nc = ty["AIFO"]["bytes"] + ty["AOFO"]["bytes"], ty["AIFO"]["count"] + ty["AOFO"]["count"]
            if ob or nb:
                rows[frames] = {"bytes_delta": nb - ob, "count_delta": nc - oc, "new_bytes": nb,
                                "new_count": nc, "old_bytes": ob, "old_count": oc,
                                "tag": tag_of(frames)}
        return rows

    def clip(self, t0, t1):
        """[t0, t1) as the service answers it: clipped to the end of the
        data (None when the window starts at or after it)."""
        if self.data_end is None or t1 <= self.data_end:
            return t0, t1
        return (t0, self.data_end) if t0 < self.data_end else None

    def report(self, t0, t1, stacks=False):
        """The processes reported for [t0, t1), by instance id (1, 2, ...
        in the order instances appear, as a fresh database numbers them):
        the figures of `analyze --json` (tags; stacks as {frames: figs}).
        A window past the end of the data is clipped to it (clip())."""
        out = {}
        w = self.clip(t0, t1)
        if w is None:
            return out
        t0, t1 = w
        for inst in self.insts:
            sf = self.stack_figs(inst, t0, t1)
            nev = sum(1 for ts, _ in inst.events if t0 <= ts < t1)
            out_t0 = sum(f["types"]["AOFI"]["bytes"] + f["types"]["AOFO"]["bytes"]
                         for f in sf.values())
            if not (nev > 0 or (out_t0 > 0 and inst.start < t1)):
                continue
            p = self.empty_figs()
            for f in sf.values():
                p["size_bytes"] += f["size_bytes"]
                p["commit_count"] += f["commit_count"]
                for t in TYPES:
                    for k in ("bytes", "count"):
                        p["types"][t][k] += f["types"][t][k]
            self.finish_figs(p)
            # Peak: outstanding at t0, then after every event in the window
            # (rundown counts as outstanding from before the trace); the
            # first time reached, never before the instance started.
            cur = best = out_t0
            best_ns = t0
            for ts, d in inst.events:
                if t0 <= ts < t1:
                    cur += d
                    if cur > best:
                        best, best_ns = cur, ts
            p["peak_outstanding_bytes"] = best
            p["peak_ns"] = max(best_ns, inst.start)
            p["outstanding_end_bytes"] = p["types"]["AIFO"]["bytes"] + p["types"]["AOFO"]["bytes"]
            p["events"] = nev
            p.update(id=inst.id, pid=inst.pid, name=inst.name, cmdline=inst.cmdline,
                     start_ns=inst.start, exit_ns=inst.exit,
                     tracking_ended_ns=inst.tracking_ended)
            tags = {}
            for s, f in sf.items():
                tg = tags.setdefault(self.tag_of(s), {"size_bytes": 0, "commit_count": 0,
                                                     "impacting_bytes": 0, "transient_bytes": 0,
                                                     "transient_count": 0})
                for k in tg:
                    tg[k] += f[k]
            p["tags"] = tags
            if stacks:
                p["stacks"] = sf
            out[inst.id] = p
        return out

    @staticmethod
    def _there(p, t):
        """Piece p's commit is in the state at t: made before t, or rundown
        of an instance started before t (a restart's rundown finds what the
        previous run's instances held: it never reaches back before its
        instance, so nothing counts twice)."""
        return p.rec.inst.start < t if p.rec.rundown else p.rec.a < t

    def outstanding_at(self, t, inst=None):
        """{(inst id, tag): bytes} outstanding at t: the state after every
        event before t (rundown: committed before the trace, but not before
        its instance started); zeros left out."""
        out = {}
        for p in (inst.pieces if inst else self.all_pieces):
            if self._there(p, t) and p.f >= t:
                k = (p.rec.inst.id, self.tag_of(p.rec.stack))
                out[k] = out.get(k, 0) + p.bytes
        return {k: v for k, v in out.items() if v}

    def series(self, frm, step, n, inst=None):
        """Per step i of [frm + i*step, frm + (i+1)*step): the columns of
        /api/processes/{id}/series (inst) or /api/system/series (None).
        frm and step are whole seconds. Nothing at or after the end of
        the data counts (the service clips there: the step that holds it
        shows the state at it)."""
        insts = [inst] if inst else self.insts
        recs = [r for i in insts for r in i.recs]
        pieces = [p for i in insts for p in i.pieces]
        dend = NEVER if self.data_end is None else self.data_end
        ends = [min(frm + (i + 1) * step, dend) for i in range(n)]

        def idx(t):
            return (t - frm) // step if frm <= t < frm + n * step and t < dend else None

        cols = {k: [0] * n for k in ("committed_bytes", "commit_count", "decommitted_bytes",
                                     "transient_bytes", "transient_count")}
        outs = {}
        for r in recs:
            i = None if r.rundown else idx(r.a)
            if i is not None:
                cols["committed_bytes"][i] += r.bytes
                cols["commit_count"][i] += 1
        for p in pieces:
            tag = self.tag_of(p.rec.stack)
            col = outs.setdefault(tag, [0] * n)
            for i, e in enumerate(ends):
                if self._there(p, e) and p.f >= e:
                    col[i] += p.bytes
            i = idx(p.f) if p.f != NEVER else None
            if i is not None:
                cols["decommitted_bytes"][i] += p.bytes
                if not p.rec.rundown and idx(p.rec.a) == i:
                    cols["transient_bytes"][i] += p.bytes
                    cols["transient_count"][i] += 1
        # Peak: per instance and 1 s bucket, the highest outstanding at any
        # instant of the bucket (its start included); a step's peak is the
        # highest, over its buckets, of those summed over the instances
        # (exact for one instance; for the system the documented upper
        # bound, as instances peak at different instants).
        nb = n * step // SEC
        bpeak = [0] * nb
        for one in insts:
            cur = sum(p.bytes for p in one.pieces if self._there(p, frm) and p.f >= frm)
            # Rundown of an instance that starts in the window: there from
            # the bucket of its start on (under that bucket's peak).
            later = one.start >= frm
            rundown = sum(r.bytes for r in one.recs if r.rundown)
            evs, k = one.events, 0
            while k < len(evs) and evs[k][0] < frm:
                k += 1
            for b in range(nb):
                if later and one.start < frm + (b + 1) * SEC:
                    cur += rundown
                    later = False
                best, end = cur, min(frm + (b + 1) * SEC, dend)
                while k < len(evs) and evs[k][0] < end:
                    cur += evs[k][1]
                    best = max(best, cur)
                    k += 1
                bpeak[b] += best
        per = step // SEC
        peak = [max(bpeak[i * per:(i + 1) * per]) for i in range(n)]
        cols["outstanding"] = outs
        cols["outstanding_total"] = [sum(c[i] for c in outs.values()) for i in range(n)]
        cols["peak_bytes"] = peak
        return cols

    def counters(self, until):
        """The /metrics counters by tag over everything before `until`:
        committed bytes and commit events (rundown left out), decommitted
        bytes, and transient bytes and pieces (committed and released
        within the same UTC minute)."""
        m = 60 * 10**9
        c = {k: {} for k in ("committed", "events", "decommitted", "transient", "pieces")}

        def add(kind, tag, v):
            c[kind][tag] = c[kind].get(tag, 0) + v

        for r in self.all_recs:
            if not r.rundown and r.a < until:
                add("committed", self.tag_of(r.stack), r.bytes)
                add("events", self.tag_of(r.stack), 1)
        for p in self.all_pieces:
            if p.f < until:
                tag = self.tag_of(p.rec.stack)
                add("decommitted", tag, p.bytes)
                same = not p.rec.rundown and p.rec.a // m == p.f // m
                add("transient", tag, p.bytes if same else 0)
                add("pieces", tag, 1 if same else 0)
        return c


def random_trace(path, seed, header, nev=300, span_s=12, stacks=None, minute_edges=False):
    """Writes a random trace (v1 JSONL, `header` first: a dict or its JSON
    text) that tries the rules' corners: pid reuse, pids never started,
    events after exits, rundown, overlapping commits, partial decommits,
    equal times and times on bucket edges (whole seconds; whole minutes too
    with minute_edges). Returns (t0, end): the trace's first whole hour and
    where `run` ends the instances alive at the end (the start of the
    bucket after the last event)."""
    rnd = random.Random(seed)
    t0 = 1_699_999_200 * SEC
    page = 4096
    if stacks is None:
        stacks = [["app.exe!main", f"app.exe!f{i}", "KernelBase.dll!VirtualAlloc"] for i in range(3)]
        stacks.append(["app.exe!main", "ntdll.dll!RtlpAllocateHeapInternal",
                       "ntdll.dll!NtAllocateVirtualMemory"])

    def when():
        if minute_edges:
            return rnd.choice([t0 + rnd.randrange(span_s) * SEC,
                               t0 + rnd.randrange(span_s // 60 + 1) * 60 * SEC,
                               t0 + rnd.randrange(span_s * SEC)])
        return rnd.choice([t0 + rnd.randrange(span_s) * SEC, t0 + rnd.randrange(span_s * SEC)])

    times = sorted(when() for _ in range(nev))
    lines = [header if isinstance(header, str) else json.dumps(header)]
    for i, ts in enumerate(times):
        pid = rnd.choice([100, 104, 108])
        r = rnd.random()
        addr = hex(0x10000 + rnd.randrange(32) * page)
        size = (1 + rnd.randrange(8)) * page
        if i < 6:
            ev = ({"op": "commit", "addr": addr, "size": size, "stack": ["(before trace)"], "rundown": True}
                  if i % 2 else {"op": "process_start", "name": f"p{pid}.exe"})
        elif r < 0.40:
            ev = {"op": "commit", "addr": addr, "size": size, "stack": rnd.choice(stacks)}
        elif r < 0.70:
            ev = {"op": rnd.choice(["decommit", "release"]), "addr": addr, "size": size}
        elif r < 0.75:
            ev = {"op": "reserve", "addr": addr, "size": size}
        elif r < 0.85:
            ev = {"op": "process_start", "name": rnd.choice(["a.exe", "b.exe"])}
        else:
            ev = {"op": "process_exit"}
        lines.append(json.dumps({"ts": ts, "pid": pid, **ev}))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return t0, (times[-1] // SEC + 1) * SEC
