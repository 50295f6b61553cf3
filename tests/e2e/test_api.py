"""test_api.py - every REST endpoint against the real binary, replaying the
MemoryTestApp fixture.

Every figure is compared with an independent reference: refmodel.py, a
Python model of ARCHITECTURE.md's rules run over the same trace (the
service's own `analyze --db` runs the same C function as the API, so it is
no reference; it is only checked to print the same process objects), and
the fixture generator's figures for its key windows. Each comparison also
checks that the reference has something to compare (non-empty, non-zero),
so a check cannot pass on nothing. Also: error paths name their
parameter, a large window works, the security rules hold, and a paced
replay is served, exactly, while it ingests."""

import json
import os
import random
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import (BIN, FIXTURES, MTA, MTA_WINDOWS, Checks, Service,  # noqa: E402
                       analyze_json, require_fixture)
from cwtest import file_text, wait_until  # noqa: E402
import refmodel  # noqa: E402
import stacktags_ref  # noqa: E402

require_fixture()

S = 1_000_000_000
t = Checks()
W = json.load(open(MTA_WINDOWS))
NAME = W["process"]["name"]
T0 = W["t0_ns"]
HEADER, EVENTS = refmodel.read_trace(MTA)
TAG_OF = stacktags_ref.tagger(HEADER["platform"])
# `run` ends the instances still alive at the start of the bucket after its
# last event (DESIGN.md, "End of a run").
ENDED = (EVENTS[-1]["ts"] // S + 1) * S
M = refmodel.Model(EVENTS, TAG_OF, end_run_at=ENDED)
FIGS = ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes", "transient_count",
        "peak_outstanding_bytes", "peak_ns", "outstanding_end_bytes", "events")
IDENT = ("id", "pid", "name", "cmdline", "start_ns", "exit_ns", "tracking_ended_ns")
SERIES_COLS = ("committed_bytes", "commit_count", "decommitted_bytes", "transient_bytes",
               "transient_count", "peak_bytes", "outstanding_total")


def q(path, **params):
    return path + ("?" + urllib.parse.urlencode(params) if params else "")


def by_id(procs):
    return {p["id"]: p for p in procs}


def rel(ns):
    return f"{(ns - T0) / S:g}s"


def check_proc(what, got, want):
    """One process object of the API against the model's figures: every
    field named, its tags by name (one check; a failure shows the fields
    that differ)."""
    # A key the answer lacks is "(missing)": never equal to the model's None.
    g = {k: got.get(k, "(missing)") for k in IDENT + FIGS + ("types",)}
    g["tags"] = {x["tag"]: {k: x[k] for k in x if k != "tag"} for x in got.get("tags", [])}
    w = {k: want[k] for k in IDENT + FIGS + ("types", "tags")}
    bad = {k: {"got": g[k], "want": w[k]} for k in w if g[k] != w[k]}
    t.check(f"{what}: equals the model", not bad, bad)


def check_processes(what, got, want):
    """An /api/processes answer (its processes) against the model's report."""
    t.check(f"{what}: the model reports processes", len(want) > 0, want)
    gmap = {p["id"]: p for p in got}
    t.eq(f"{what}: ids unique", len(gmap), len(got))
    t.eq(f"{what}: the processes (ids)", sorted(gmap), sorted(want))
    for k, w in want.items():
        if k in gmap:
            check_proc(f"{what}: {w['name']} ({w['pid']})", gmap[k], w)


def nonzero_cols(cols):
    return {k: v for k, v in cols.items() if any(v)}


def check_series(what, s, frm, to, step, inst, model=None, require_data=True):
    """/series (inst) or /system/series (None) against the model, every
    step and every column; the model's columns must hold something."""
    model = model or M
    n = (to - frm) // step
    want = model.series(frm, step, n, inst)
    t.eq(f"{what}: window", s["window"], {"from_ns": frm, "to_ns": frm + n * step})
    t.eq(f"{what}: step", s["step_ns"], step)
    t.eq(f"{what}: t", s["t"], [frm + i * step for i in range(n)])
    for c in SERIES_COLS:
        t.eq(f"{what}: {c}", s[c], want[c])
    t.eq(f"{what}: outstanding by tag", nonzero_cols(s["outstanding"]),
         nonzero_cols(want["outstanding"]))
    t.eq(f"{what}: every tag has a column", sorted(s["tags"]), sorted(s["outstanding"]))
    start = sum(v for v in model.outstanding_at(frm, inst).values())
    t.eq(f"{what}: outstanding at from", s["outstanding_start_bytes"], start)
    for c in ("outstanding_total", "committed_bytes", "decommitted_bytes", "peak_bytes"):
        if require_data:
            t.check(f"{what}: the model's {c} is not all zero", any(want[c]), want[c])
    return want


def model_inst(name, pid=None):
    found = [i for i in M.insts if i.name == name and (pid is None or i.pid == pid)]
    if len(found) != 1:
        raise SystemExit(f"FAIL: the fixture has {len(found)} instances of {name}, not one")
    return found[0]


with Service(MTA, name="api") as svc:
    # ---- health
    st, h = svc.get("/api/health")
    t.eq("health: 200", st, 200)
    for k in ("version", "source", "uptime_s", "events_ingested", "events_lost",
              "drift_corrected_bytes", "db_path", "db_size_bytes", "last_bucket_end_ns"):
        t.check(f"health has {k}", k in h, json.dumps(h))
    t.eq("health: every event ingested", h["events_ingested"], len(EVENTS))
    t.eq("health: none lost", h["events_lost"], 0)
    t.check("health: db size", h["db_size_bytes"] > 0, h["db_size_bytes"])
    # Memory per component (docs/DESIGN.md, "Memory"): every one an
    # integer; a replay has no perf source; the tracker and the stacks hold
    # what the trace made; the process's figures are real and ordered.
    m = h.get("memory", {})
    comps = ("perf_rings", "perf_queue", "perf_processes", "unwinder", "tracker", "stacks",
             "alert_series", "store_rollups", "store_caches", "heap_traces", "sqlite", "sqlite_peak",
             "heap_in_use", "heap_other", "resident", "resident_peak")
    t.eq("health: memory has every component", sorted(m), sorted(comps))
    t.check("health: memory figures are non-negative integers",
            all(isinstance(m.get(k), int) and m[k] >= 0 for k in comps), json.dumps(m))
    t.eq("health: no perf source, no perf memory",
         [m.get(k) for k in ("perf_rings", "perf_queue", "perf_processes", "unwinder")],
         [0, 0, 0, 0])
    t.check("health: tracker and stacks counted", m.get("tracker", 0) > 0 and m.get("stacks", 0) > 0,
            json.dumps(m))
    t.check("health: SQLite counted, peak >= now", 0 < m.get("sqlite", 0) <= m.get("sqlite_peak", 0),
            json.dumps(m))
    t.check("health: resident <= peak, more than the heap's counted parts",
            0 < m.get("resident", 0) <= m.get("resident_peak", 0) and
            m["resident"] > m.get("tracker", 0) + m.get("stacks", 0), json.dumps(m))
    first, end = h["first_bucket_ns"], h["data_end_ns"]
    t.eq("health: data from the first event's second", first, EVENTS[0]["ts"] // S * S)
    t.eq("health: stored up to the end of tracking's bucket", h["last_bucket_end_ns"], ENDED + S)
    t.eq("health: the data ends where tracking ended", (end, h["tracking_ended_ns"]), (ENDED, ENDED))
    t.eq("health: ingest done", h["ingest_done"], True)

    # ---- /api/processes == the model, for the fixture's windows, the whole
    # data, and whole-second windows that cut lifetimes (outstanding at
    # their end is not zero: processes are alive there).
    windows = [(n, w["from_ns"], w["to_ns"]) for n, w in W["windows"].items()]
    windows.append(("all", first, end))
    windows += [(f"[{a}s, {b}s)", T0 + a * S, T0 + b * S)
                for a, b in ((0, 1), (1, 2), (0, 15), (2, 16), (13, 17), (16, 20), (16, 31),
                             (20, 21), (29, 32), (0, 20))]
    for name, f, to in windows:
        st, r = svc.get(q("/api/processes", **{"from": f, "to": to}))
        t.eq(f"processes {name}: 200", st, 200)
        t.eq(f"processes {name}: window", r["window"], {"from_ns": f, "to_ns": to})
        want = M.report(f, to)
        check_processes(f"processes {name}", r["processes"], want)
        t.eq(f"processes {name}: total", r["total"], len(want))
        # Default order: impacting growth, largest first, ties by id.
        t.eq(f"processes {name}: sorted by impacting",
             [(-p["impacting_bytes"], p["id"]) for p in r["processes"]],
             sorted((-p["impacting_bytes"], p["id"]) for p in r["processes"]))
        if name in W["windows"]:
            # The generator's own model of the fixture agrees.
            mta = [p for p in r["processes"] if p["name"] == NAME]
            t.eq(f"processes {name}: one {NAME}", len(mta), 1)
            for k, v in W["windows"][name]["expect"].items():
                t.eq(f"processes {name}: {NAME} {k} (generator)", mta[0][k] if mta else None, v)
    # The API's process objects are `analyze --json`'s (README): same text
    # for the same window. (Same C function: a format check, not figures.)
    for name, f, to in windows[:4]:
        st, r = svc.get(q("/api/processes", **{"from": f, "to": to}))
        a = analyze_json(svc.db, f, to)
        t.eq(f"processes {name}: the objects of analyze --json", by_id(r["processes"]),
             by_id(a["processes"]))

    # A fresh database numbers instances 1, 2, ... as they appear, as the
    # model does: ids name the same instances on both sides.
    st, r = svc.get(q("/api/processes", **{"from": first, "to": end}))
    t.eq("ids: instances numbered in the order they appear",
         {p["id"]: (p["pid"], p["name"], p["start_ns"]) for p in r["processes"]},
         {i.id: i.key() for i in M.insts})
    mta_inst = model_inst(NAME, W["process"]["pid"])
    pid_ = mta_inst.id

    # Times as RFC 3339 and relative give the same windows.
    step = W["windows"]["step"]
    four = W["windows"]["last_four_spikes"]
    rfc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(step["from_ns"] // S))
    st, r2 = svc.get(q("/api/processes", **{"from": rfc, "to": str(step["to_ns"])}))
    t.eq("RFC 3339 from", r2["window"]["from_ns"], step["from_ns"])
    st, r3 = svc.get(q("/api/processes", **{"from": "-10s", "to": "now"}))
    t.eq("relative window ends at the data's end (replay clock)", r3["window"]["to_ns"], end)
    t.eq("relative window is 10 s", r3["window"]["to_ns"] - r3["window"]["from_ns"], 10 * S)
    check_processes("relative window -10s", r3["processes"], M.report(end - 10 * S, end))
    st, r4 = svc.get("/api/processes")
    t.eq("default window: the last hour", (st, r4.get("window")),
         (200, {"from_ns": end - 3600 * S, "to_ns": end}))
    check_processes("default window", r4["processes"], M.report(end - 3600 * S, end))

    # ---- past the end of the data: the replay's input ended there, so a
    # window reaching past it is clipped to it with a note, and the
    # instances alive then are shown alive (not exited) with the figures
    # the model gives at that time.
    st, r = svc.get(q("/api/processes", **{"from": first, "to": ENDED + 60 * S}))
    t.eq("past the end: clipped to where tracking ended", (st, r["window"]),
         (200, {"from_ns": first, "to_ns": ENDED}))
    t.check("past the end: a note says so", "tracking ended" in r.get("note", ""), r.get("note"))
    check_processes("past the end", r["processes"], M.report(first, ENDED))
    alive = [p for p in r["processes"] if p["tracking_ended_ns"] is not None]
    t.check("past the end: instances alive at the end, with memory outstanding",
            len(alive) >= 2 and all(p["exit_ns"] is None and p["tracking_ended_ns"] == ENDED
                                    and p["outstanding_end_bytes"] > 0 for p in alive), alive)
    st, r = svc.get(q("/api/processes", **{"from": ENDED, "to": ENDED + 60 * S}))
    t.eq("after the end: no process, a note", (st, r["processes"], "tracking ended" in r.get("note", "")),
         (200, [], True))
    st, s = svc.get(q("/api/system/series", **{"from": first, "to": ENDED + 10 * S, "step": "1s"}))
    t.check("series past the end: a note", "tracking ended" in s.get("note", ""), s.get("note"))
    check_series("system series past the end", s, first, ENDED, S, None)
    st, s = svc.get(q("/api/system/series", **{"from": first, "to": ENDED + 10 * S, "step": "5s"}))
    check_series("system series past the end, 5 s steps", s, first, s["window"]["to_ns"], 5 * S, None)
    t.eq("series past the end, 5 s steps: the last step holds the state at the end",
         s["outstanding_total"][-1], sum(M.outstanding_at(ENDED).values()))

    # sort: in a window that ends while processes are alive, so every key
    # has distinct non-zero values.
    mid = (T0, T0 + 20 * S)
    want = M.report(*mid)
    for skey, field in (("impacting", "impacting_bytes"), ("transient", "transient_bytes"),
                        ("size", "size_bytes"), ("peak", "peak_outstanding_bytes"),
                        ("outstanding", "outstanding_end_bytes")):
        vals = sorted((w[field] for w in want.values()), reverse=True)
        t.check(f"sort={skey}: the model has 3 distinct non-zero values",
                len({v for v in vals if v}) >= 3, vals)
        st, r = svc.get(q("/api/processes", **{"from": mid[0], "to": mid[1], "sort": skey}))
        t.eq(f"sort={skey}: values, largest first, equal the model",
             [p[field] for p in r["processes"]], vals)
        t.eq(f"sort={skey}: ties by id",
             [(-p[field], p["id"]) for p in r["processes"]],
             sorted((-p[field], p["id"]) for p in r["processes"]))
    st, r = svc.get(q("/api/processes", **{"from": first, "to": end, "limit": 1}))
    t.eq("limit=1: one process, total counts all",
         (len(r["processes"]), r["total"]), (1, len(M.report(first, end))))
    st, r = svc.get(q("/api/processes", **{"from": first, "to": end, "name": "memorytest"}))
    t.eq("name filter (case-insensitive)", [p["name"] for p in r["processes"]], [NAME])
    st, r = svc.get(q("/api/processes", **{"from": first, "to": end, "pid": 5120}))
    t.eq("pid filter: both instances of a reused pid",
         sorted(p["name"] for p in r["processes"]), ["cmd.exe", "notepad.exe"])
    # A filtered list is ranked from the cells (cw_store_report_match); the
    # layer parameter takes the full report and filters it: the same list.
    for sort in ("impacting", "transient", "peak"):
        for filt in ({"name": "E"}, {"pid": 5120}, {"name": "no such"}):
            args = {"from": first, "to": end, "sort": sort, "limit": 2, **filt}
            st, a = svc.get(q("/api/processes", **args))
            st2, b = svc.get(q("/api/processes", layer="commit", **args))
            t.eq(f"sort={sort} {filt} limit=2: ranked = full report filtered", (st, a), (st2, b))

    # ---- one process, in windows where it is active, and one where it is not
    for name, f, to in [windows[0], ("[0s, 20s)", T0, T0 + 20 * S), ("[16s, 31s)", T0 + 16 * S,
                                                                    T0 + 31 * S)]:
        want = M.report(f, to)
        for k, w in want.items():
            st, r = svc.get(q(f"/api/processes/{k}", **{"from": f, "to": to}))
            t.eq(f"process/{{id}} {name} {w['name']}: 200", st, 200)
            t.eq(f"process/{{id}} {name} {w['name']}: window", r["window"], {"from_ns": f, "to_ns": to})
            check_proc(f"process/{{id}} {name} {w['name']}", r["process"], w)
    cmd = model_inst("cmd.exe")
    f, to = T0 + 12 * S, T0 + 14 * S
    t.check("cmd.exe is not in [12s, 14s) (it exited at 9 s)", cmd.id not in M.report(f, to), "")
    st, r = svc.get(q(f"/api/processes/{cmd.id}", **{"from": f, "to": to}))
    zero = refmodel.Model.finish_figs(refmodel.Model.empty_figs())
    t.eq("process/{id} outside its life: 200", st, 200)
    t.eq("process/{id} outside its life: who", [r["process"][k] for k in IDENT],
         [cmd.id, cmd.pid, cmd.name, cmd.cmdline, cmd.start, cmd.exit, cmd.tracking_ended])
    t.eq("process/{id} outside its life: zero figures",
         [r["process"][k] for k in ("size_bytes", "commit_count", "impacting_bytes",
                                    "transient_bytes", "transient_count", "types", "events")],
         [zero[k] for k in ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes",
                            "transient_count", "types")] + [0])

    # ---- series: every step, every column, against the model
    for inst in M.insts:
        nm = f"series {inst.name}"
        st, s = svc.get(q(f"/api/processes/{inst.id}/series",
                          **{"from": first, "to": end, "step": "1s"}))
        t.eq(f"{nm}: 200", st, 200)
        # An instance alive at the end may never have released anything.
        check_series(f"{nm} 1s", s, first, end, S, inst, require_data=inst.exit is not None)
        if inst.exit is None:
            t.check(f"{nm}: alive at the end with memory outstanding", s["outstanding_total"][-1] > 0,
                    s["outstanding_total"][-1:])
        t.eq(f"{nm}: who", [s["process"][k] for k in ("pid", "name", "cmdline", "start_ns",
                                                       "exit_ns", "tracking_ended_ns")],
             [inst.pid, inst.name, inst.cmdline, inst.start, inst.exit, inst.tracking_ended])
        t.eq(f"{nm}: peak is exact", s["peak_kind"], "exact")
    want = M.series(first, S, (end - first) // S, mta_inst)
    t.check("series: ten spikes visible as transients",
            sum(1 for c in want["transient_count"] if c > 0) >= 10, want["transient_count"])
    # Coarser steps, and a window that starts with memory outstanding.
    for f, to, stp in ((T0, T0 + 30 * S, 5 * S), (T0 + 16 * S, T0 + 31 * S, S),
                       (T0 + 10 * S, T0 + 30 * S, 10 * S)):
        for inst in (mta_inst, model_inst("svchost.exe")):
            st, s = svc.get(q(f"/api/processes/{inst.id}/series",
                              **{"from": f, "to": to, "step": f"{stp // S}s"}))
            check_series(f"series {inst.name} [{rel(f)}, {rel(to)}) step {stp // S}s", s, f, to,
                         stp, inst)
    st, s2 = svc.get(q(f"/api/processes/{pid_}/series", **{"from": first, "to": end}))
    t.check("series: default step", st == 200 and s2["step_ns"] >= S, s2.get("step_ns"))
    # The endpoints agree with each other, in a window that ends while
    # processes are alive (outstanding at its end is not zero).
    f, to = T0, T0 + 20 * S
    st, r = svc.get(q("/api/processes", **{"from": f, "to": to}))
    procs = {p["id"]: p for p in r["processes"]}
    st, s = svc.get(q(f"/api/processes/{pid_}/series", **{"from": f, "to": to, "step": "1s"}))
    a = procs[pid_]
    t.check("series vs process: outstanding at the end is not zero", a["outstanding_end_bytes"] > 0, a)
    t.eq("series vs process: committed bytes add up to Size", sum(s["committed_bytes"]), a["size_bytes"])
    t.eq("series vs process: commit counts add up to Count", sum(s["commit_count"]), a["commit_count"])
    t.eq("series vs process: peak = the window's peak", max(s["peak_bytes"]), a["peak_outstanding_bytes"])
    t.eq("series vs process: last outstanding = outstanding at the end", s["outstanding_total"][-1],
         a["outstanding_end_bytes"])
    t.eq("series: tags add up to the total",
         [sum(s["outstanding"][tg][i] for tg in s["tags"]) for i in range(len(s["t"]))], s["outstanding_total"])
    st, ss = svc.get(q("/api/system/series", **{"from": f, "to": to, "step": "1s"}))
    t.eq("system series vs processes: last total = their outstanding at the end",
         ss["outstanding_total"][-1], sum(p["outstanding_end_bytes"] for p in procs.values()))
    t.eq("system series vs processes: committed = their Size", sum(ss["committed_bytes"]),
         sum(p["size_bytes"] for p in procs.values()))
    t.check("system series: peak >= outstanding at every step",
            len(ss["peak_bytes"]) == 20 and all(p >= o for p, o in zip(ss["peak_bytes"], ss["outstanding_total"])),
            (ss["peak_bytes"], ss["outstanding_total"]))

    # ---- system series: the machine's totals by tag
    st, ss = svc.get(q("/api/system/series", **{"from": first, "to": end, "step": "1s"}))
    t.eq("system series: 200", st, 200)
    want = check_series("system series 1s", ss, first, end, S, None)
    t.eq("system series: peak is an upper bound", ss["peak_kind"], "upper_bound")
    t.check("system series: the model has several tags",
            len(nonzero_cols(want["outstanding"])) >= 3, sorted(want["outstanding"]))
    for f, to, stp in ((T0, T0 + 30 * S, 5 * S), (T0 + 16 * S, T0 + 31 * S, S)):
        st, ss = svc.get(q("/api/system/series", **{"from": f, "to": to, "step": f"{stp // S}s"}))
        check_series(f"system series [{rel(f)}, {rel(to)}) step {stp // S}s", ss, f, to, stp,
                     None)

    # ---- stacks: every type filter, both sorts, a tag filter, the tree
    def model_stacks(inst, f, to, typ=None, tag=None):
        sf = M.stack_figs(inst, f, to)
        out = {}
        for frames, fg in sf.items():
            ty = fg["types"]
            keep = (typ is None or
                    (typ in refmodel.TYPES and (ty[typ]["count"] > 0 or ty[typ]["bytes"] > 0)) or
                    (typ == "impacting" and fg["impacting_bytes"] != 0) or
                    (typ == "transient" and ty["AIFI"]["count"] > 0))
            tg = M.stack_tag(frames)
            if keep and (tag is None or tg == tag or tg.startswith(tag + "\\")):
                out[frames] = dict(fg, tag=tg)
        return out

    STACK_FIGS = ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes",
                  "transient_count", "types")

    def model_tree(stacks, size_sort):
        """The caller tree of the filtered stacks: children merged by frame,
        sorted by the sort key, then the other, largest first, then frame."""
        def node(frame):
            return {"frame": frame, "stacks": 0, "figs": refmodel.Model.empty_figs(), "kids": {}}

        def add(n, fg):
            n["stacks"] += 1
            n["figs"]["size_bytes"] += fg["size_bytes"]
            n["figs"]["commit_count"] += fg["commit_count"]
            for ty in refmodel.TYPES:
                for k in ("bytes", "count"):
                    n["figs"]["types"][ty][k] += fg["types"][ty][k]

        root = node("(all stacks)")
        for frames, fg in stacks.items():
            add(root, fg)
            n = root
            for fr in frames:
                n = n["kids"].setdefault(fr, node(fr))
                add(n, fg)

        def out(n):
            o = dict(refmodel.Model.finish_figs(n["figs"]), frame=n["frame"], stacks=n["stacks"])
            kids = [out(c) for c in n["kids"].values()]
            k1, k2 = ("size_bytes", "impacting_bytes") if size_sort else ("impacting_bytes",
                                                                          "size_bytes")
            kids.sort(key=lambda c: (-c[k1], -c[k2], c["frame"]))
            if kids or n["frame"] == "(all stacks)":
                o["children"] = kids
            return o

        return out(root)

    def tree_of(node):
        o = {k: node[k] for k in ("frame", "stacks") + STACK_FIGS}
        if "children" in node:
            o["children"] = [tree_of(c) for c in node["children"]]
        return o

    stack_cases = [  # (window, type, tag, sort)
        (four, None, None, None), (four, "AIFI", None, None), (four, "transient", None, "size"),
        (step, "AIFO", None, None), (step, "impacting", None, None), (step, "AOFO", None, "size"),
        ({"from_ns": T0 + 16 * S, "to_ns": T0 + 31 * S}, "AOFI", None, None),
        ({"from_ns": T0 + 16 * S, "to_ns": T0 + 31 * S}, "impacting", None, "size"),
        ({"from_ns": T0 + 16 * S, "to_ns": T0 + 31 * S}, None, None, "size"),
        ({"from_ns": first, "to_ns": end}, None, "Windows Heap", None),
        ({"from_ns": first, "to_ns": end}, None, "VirtualAlloc", "size"),
    ]
    for w, typ, tag, sort in stack_cases:
        params = {"from": w["from_ns"], "to": w["to_ns"]}
        if typ:
            params["type"] = typ
        if tag:
            params["tag"] = tag
        if sort:
            params["sort"] = sort
        what = f"stacks [{rel(w['from_ns'])}, {rel(w['to_ns'])}) type={typ} tag={tag} sort={sort}"
        want = model_stacks(mta_inst, w["from_ns"], w["to_ns"], typ, tag)
        t.check(f"{what}: the model has stacks", len(want) > 0, want)
        st, sk = svc.get(q(f"/api/processes/{pid_}/stacks", **params))
        t.eq(f"{what}: 200", st, 200)
        got = {tuple(s_["frames"]): s_ for s_ in sk["stacks"]}
        t.eq(f"{what}: the stacks", sorted(got), sorted(want))
        t.eq(f"{what}: total", sk["total"], len(want))
        for frames, w_ in want.items():
            g = got.get(frames, {})
            t.eq(f"{what}: {frames[-3:]}", {k: g.get(k) for k in STACK_FIGS + ("tag",)},
                 {k: w_[k] for k in STACK_FIGS + ("tag",)})
        k1 = "size_bytes" if sort == "size" else "impacting_bytes"
        t.eq(f"{what}: sorted by {k1}", [s_[k1] for s_ in sk["stacks"]],
             sorted((s_[k1] for s_ in sk["stacks"]), reverse=True))
        t.eq(f"{what}: caller tree", tree_of(sk["tree"]), model_tree(want, sort == "size"))
        t.eq(f"{what}: process", sk["process"], {"id": pid_, "pid": mta_inst.pid, "name": NAME})

    # The tree and the process agree; the transient buffer's caller holds
    # the four spikes (the generator's story).
    st, sk = svc.get(q(f"/api/processes/{pid_}/stacks", **{"from": four["from_ns"], "to": four["to_ns"]}))
    st, r = svc.get(q(f"/api/processes/{pid_}", **{"from": four["from_ns"], "to": four["to_ns"]}))
    t.eq("stacks vs process: tree root Size, impacting, transient count",
         [sk["tree"][k] for k in ("size_bytes", "impacting_bytes", "transient_count")],
         [r["process"][k] for k in ("size_bytes", "impacting_bytes", "transient_count")])

    def find(node, frame):
        if node.get("frame") == frame:
            return node
        for c in node.get("children", []):
            x = find(c, frame)
            if x:
                return x
        return None

    tb = find(sk["tree"], "MemoryTestApp.exe!ManipulateTemporaryBuffer") or {}
    t.eq("stacks: the transient buffer's caller: Count 4, Size 40 MB",
         (tb.get("commit_count"), tb.get("size_bytes")), (4, 40 * 1024 * 1024))

    # ---- diff (UMDH-style) per stack: old = AOFI + AOFO, new = AIFO + AOFO
    for f, to in ((step["from_ns"], step["to_ns"]), (T0 + 16 * S, T0 + 31 * S), (T0, T0 + 20 * S),
                  (T0 + 2 * S, T0 + 16 * S)):
        what = f"diff [{rel(f)}, {rel(to)})"
        for inst in (mta_inst, model_inst("svchost.exe")):
            rows = M.diff_rows(inst, f, to)
            t.check(f"{what} {inst.name}: the model has rows with a delta",
                    any(r_["bytes_delta"] for r_ in rows.values()), rows)
            st, d = svc.get(q("/api/diff", process=inst.id, t1=f, t2=to))
            t.eq(f"{what} {inst.name}: 200", st, 200)
            got = {tuple(r_["frames"]): {k: v for k, v in r_.items()
                                         if k not in ("frames", "stack_id")} for r_ in d["stacks"]}
            t.eq(f"{what} {inst.name}: per stack", got, rows)
            t.eq(f"{what} {inst.name}: totals",
                 (d["old_bytes"], d["new_bytes"], d["bytes_delta"], d["total"], d["t1_ns"], d["t2_ns"]),
                 (sum(r_["old_bytes"] for r_ in rows.values()),
                  sum(r_["new_bytes"] for r_ in rows.values()),
                  sum(r_["bytes_delta"] for r_ in rows.values()), len(rows), f, to))
            t.check(f"{what} {inst.name}: new - old = delta, per stack",
                    d["stacks"] and all(r_["new_bytes"] - r_["old_bytes"] == r_["bytes_delta"]
                                        for r_ in d["stacks"]), d["stacks"])
            t.eq(f"{what} {inst.name}: largest delta first", [r_["bytes_delta"] for r_ in d["stacks"]],
                 sorted((r_["bytes_delta"] for r_ in d["stacks"]), reverse=True))
    st, d = svc.get(q("/api/diff", process=pid_, t1=step["from_ns"], t2=step["to_ns"]))
    top = d["stacks"][0]
    t.eq("diff step: total delta = the generator's impacting", d["bytes_delta"],
         step["expect"]["impacting_bytes"])
    t.eq("diff step: top stack +10 MB, +1 allocation", (top["bytes_delta"], top["count_delta"]),
         (10 * 1024 * 1024, 1))
    t.check("diff step: top stack is main's VirtualAlloc",
            top["frames"][-3:] == ["MemoryTestApp.exe!main", "KernelBase.dll!VirtualAlloc",
                                   "ntdll.dll!NtAllocateVirtualMemory"], top["frames"])

    # ---- tags: the tree of the stored stacks' tags, the rule files in force
    def tag_paths(nodes, out):
        for n_ in nodes:
            out.append(n_["path"])
            tag_paths(n_["children"], out)
        return out

    want_tags = sorted({M.stack_tag(tuple(e["stack"])) for e in EVENTS if e.get("stack")})
    st, tg = svc.get("/api/tags")
    t.eq("tags: 200", st, 200)
    t.eq("tags: the tags of every stored stack (by stacktags_ref)", sorted(tag_paths(tg["tags"], [])),
         want_tags)
    t.eq("tags: default rules, no files", (tg["rule_files"], tg["default_rules"]), ([], True))
    t.check("tags: a rules hash", isinstance(tg.get("rules_hash"), str) and tg["rules_hash"], tg)
    st, oa = svc.get("/api/openapi.json")
    t.check("openapi: 3.x", st == 200 and oa["openapi"].startswith("3."), oa.get("openapi"))
    for p in ("/api/health", "/api/processes", "/api/processes/{id}", "/api/processes/{id}/series",
              "/api/processes/{id}/stacks", "/api/diff", "/api/system/series", "/api/tags", "/metrics"):
        t.check(f"openapi documents {p}", p in oa["paths"], "")

    # ---- a large window: 30 days back, and the whole 400 days allowed
    st, r = svc.get(q("/api/processes", **{"from": end - 30 * 86400 * S, "to": end}))
    t.eq("large window: processes", (st, sorted(p["id"] for p in r["processes"])),
         (200, sorted(M.report(end - 30 * 86400 * S, end))))
    st, s = svc.get(q(f"/api/processes/{pid_}/series", **{"from": "-399d", "to": "now"}))
    t.check("large window: series picks a step", st == 200 and len(s["t"]) <= 1000,
            (st, s if st != 200 else len(s["t"])))
    st, s = svc.get(q("/api/system/series", **{"from": "-30d", "to": "now", "step": "60s"}))
    t.check("large window: 30 d at 60 s", st == 200 and len(s["t"]) in (43200, 43201), st)

    # ---- errors: 4xx with {"error": "..."} naming the parameter
    cases = [
        (q("/api/processes", **{"from": "now", "to": "-1h"}), 400, "from"),
        (q("/api/processes", **{"from": "yesterday"}), 400, "from"),
        (q("/api/processes", to="2026-13-01T00:00:00Z"), 400, "to"),
        (q("/api/processes", sort="bogus"), 400, "sort"),
        (q("/api/processes", limit="0"), 400, "limit"),
        (q("/api/processes", limit="many"), 400, "limit"),
        (q("/api/processes", colour="red"), 400, "colour"),
        (q("/api/processes", **{"from": "0", "to": "now"}), 400, "from"),
        ("/api/processes?from=1&from=2", 400, "from"),
        ("/api/processes/999999", 404, "id"),
        ("/api/processes/abc", 400, "id"),
        ("/api/processes/0/series", 400, "id"),
        (q(f"/api/processes/{pid_}/series", step="0s"), 400, "step"),
        (q(f"/api/processes/{pid_}/series", step="1500ms"), 400, "step"),
        (q(f"/api/processes/{pid_}/series", **{"from": "-30d", "to": "now", "step": "1s"}), 400, "step"),
        (q(f"/api/processes/{pid_}/stacks", type="leaky"), 400, "type"),
        (q(f"/api/processes/{pid_}/stacks", sort="name"), 400, "sort"),
        ("/api/diff", 400, "process"),
        (q("/api/diff", process=pid_), 400, "t1"),
        (q("/api/diff", process=pid_, t1="now", t2="-1h"), 400, "t1"),
        (q("/api/diff", process="x", t1="-1h", t2="now"), 400, "process"),
        (q("/api/diff", process=999999, t1="-1h", t2="now"), 404, "id"),
        (q("/api/system/series", step="-5s"), 400, "step"),
        ("/api/nothing", 404, "/api/nothing"),
        ("/api/health?verbose=1", 400, "verbose"),
    ]
    for path, want, param in cases:
        st, body = svc.get(path)
        ok = st == want and isinstance(body, dict) and param in body.get("error", "")
        t.check(f"error {path} -> {want} naming {param}", ok, (st, body))

    # Nothing was written by any of it, and the service still answers.
    st, h2 = svc.get("/api/health")
    t.eq("still healthy after bad input", h2["data_end_ns"], end)

    # ---- security and static files
    st, _, body = svc.request("/api/health", method="POST")
    t.check("POST without a token: 405", st == 405 and b"read-only" in body, (st, body))
    st, _, body = svc.request("/api/health", method="DELETE")
    t.eq("DELETE: 405", st, 405)
    st, hdrs, body = svc.request("/api/health", method="HEAD")
    t.check("HEAD: headers only", st == 200 and body == b"", (st, body))
    for path in ("/../CMakeLists.txt", "/%2e%2e/CMakeLists.txt", "/js/../../CMakeLists.txt",
                 "/.gitignore", "/node_modules/uplot/package.json", "/..%2fCMakeLists.txt"):
        st, _, body = svc.request(path)
        t.check(f"no escape from web/: {path}", st == 404 and b"project(" not in body, (st, body[:80]))
    st, _, body = svc.request("/api/processes?name=" + "x" * 5000)
    t.check("long query: 414", st == 414, st)
    st, hdrs, body = svc.request("/")
    t.check("dashboard index", st == 200 and b"commitwatch" in body, st)
    st, hdrs, body = svc.request("/vendor/uplot/uPlot.esm.js")
    t.check("uPlot is served (npm ci in web/)", st == 200 and "javascript" in hdrs.get("Content-Type", ""),
            (st, hdrs.get("Content-Type")))
    st, hdrs, body = svc.request("/js/app.js")
    t.check("ES modules served as JavaScript", st == 200 and "javascript" in hdrs.get("Content-Type", ""),
            hdrs.get("Content-Type"))

# ---- a paced replay, served while it ingests: at every moment the API is
# asked, it answers exactly what the model says of the data stored so far
# (instances alive, their outstanding not zero); a token, other rules.
RULES = os.path.join(FIXTURES, "stacktags", "wpa_sample.stacktags")
TAG_WPA = stacktags_ref.tagger(HEADER["platform"], rules=[RULES])
with Service(MTA, name="api-token", args=["--token", "s3cret", "--speed", "5", "--stacktags", RULES],
             wait_done=False) as svc:
    st, h = svc.get("/api/health")
    t.check("live: serving while ingesting", st == 200 and not h["ingest_done"], h)
    st, _, body = svc.request("/api/health", method="POST")
    t.eq("POST without the token: 401", st, 401)
    st, _, body = svc.request("/api/health", method="POST", headers={"Authorization": "Bearer wrong"})
    t.eq("POST with a wrong token: 401", st, 401)
    st, _, body = svc.request("/api/health", method="POST", headers={"Authorization": "Bearer s3cret"})
    t.eq("POST with the token: 405 (no state-changing endpoint here)", st, 405)

    snapshots = {}

    def snapshot():
        """One consistent look: /api/processes (outstanding first) while no
        bucket was stored (the stored end is the same before and after)
        and tracking had not ended (the end of the run stores the bucket
        that ends the live instances before it sets ingest_done)."""
        st1, h1 = svc.get("/api/health")
        if h1["ingest_done"]:
            return True
        e = h1["last_bucket_end_ns"]
        if e is None or e <= T0 + S or h1["tracking_ended_ns"] is not None:
            return False
        st2, r = svc.get(q("/api/processes", **{"from": T0, "to": e, "sort": "outstanding"}))
        st3, h3 = svc.get("/api/health")
        if (h3["last_bucket_end_ns"] == e and not h3["ingest_done"]
                and h3["tracking_ended_ns"] is None):
            snapshots[e] = r  # one look per stored state
        return False

    wait_until(snapshot, 60, "the paced replay ends (ingest_done)", interval=0.02)
    live = 0
    for e, r in sorted(snapshots.items()):
        model = refmodel.Model([ev for ev in EVENTS if ev["ts"] < e], TAG_WPA)
        want = model.report(T0, e)
        what = f"live at {rel(e)}"
        check_processes(what, r["processes"], want)
        t.eq(f"{what}: sorted by outstanding", [p["outstanding_end_bytes"] for p in r["processes"]],
             sorted((w["outstanding_end_bytes"] for w in want.values()), reverse=True))
        alive = [w for w in want.values() if w["exit_ns"] is None and w["outstanding_end_bytes"] > 0]
        if NAME in [w["name"] for w in alive] and len(alive) >= 2:
            live += 1
    t.check(f"live: at least 3 looks while {NAME} and another process were alive "
            f"({live} of {len(snapshots)})", live >= 3, sorted(snapshots))
    st, h = svc.get("/api/health")
    t.eq("live: ingest completes, every event counted", (h["ingest_done"], h["events_ingested"]),
         (True, len(EVENTS)))
    # /api/tags lists the rule files in force and the tags they give.
    st, tg = svc.get("/api/tags")
    t.eq("tags with --stacktags: the file, not the defaults", (tg["rule_files"], tg["default_rules"]),
         ([RULES], False))
    want_tags = {TAG_WPA(tuple(e["stack"])) for e in EVENTS if e.get("stack")}
    paths = set()
    for tg_ in want_tags:  # a nested tag's parents are nodes of the tree too
        parts = tg_.split("\\")
        paths |= {"\\".join(parts[:i + 1]) for i in range(len(parts))}
    t.check("tags with --stacktags: nested tags", any("\\" in x for x in want_tags), want_tags)
    t.eq("tags with --stacktags: the tree", sorted(tag_paths(tg["tags"], [])), sorted(paths))

# ---- random traces (pid reuse, pids never started, events after exits,
# rundown, overlapping commits, partial decommits, equal times): processes,
# one process, stacks, diff, series and system series against the model.
rand_dir = os.path.join(os.environ.get("CW_BUILD", "."), "e2e-http", "api-random")
os.makedirs(rand_dir, exist_ok=True)
for seed in range(1, 1 + int(os.environ.get("CW_API_RANDOM", "3"))):
    path = os.path.join(rand_dir, f"random{seed}.jsonl")
    refmodel.random_trace(path, seed, HEADER)
    _, evs = refmodel.read_trace(path)
    m = refmodel.Model(evs, TAG_OF, end_run_at=(evs[-1]["ts"] // S + 1) * S)
    rnd = random.Random(seed)
    # Instance by instance: short-lived ones are not folded here
    # (test_fold.py checks folding).
    with Service(path, name=f"api-random{seed}", config="fold_lifetime = 0\n") as svc:
        st, h = svc.get("/api/health")
        first, end = h["first_bucket_ns"], h["data_end_ns"]
        t.eq(f"random {seed}: the data ends where the model's does",
             h["tracking_ended_ns"], m.data_end)
        nsec = (end - first) // S
        wins = [(first, end)] + [tuple(first + x * S for x in sorted(rnd.sample(range(nsec + 1), 2)))
                                 for _ in range(4)]
        for f, to in wins:
            what = f"random {seed} [{(f - first) // S}s, {(to - first) // S}s)"
            st, r = svc.get(q("/api/processes", **{"from": f, "to": to}))
            want = m.report(f, to)
            check_processes(what, r["processes"], want)
            for iid in rnd.sample(sorted(want), min(4, len(want))):
                inst = m.insts[iid - 1]
                st, r = svc.get(q(f"/api/processes/{iid}", **{"from": f, "to": to}))
                check_proc(f"{what} process/{iid}", r["process"], want[iid])
                st, sk = svc.get(q(f"/api/processes/{iid}/stacks", **{"from": f, "to": to}))
                got = {tuple(x["frames"]): {k: x[k] for k in ("size_bytes", "commit_count", "impacting_bytes",
                                                            "transient_bytes", "transient_count", "types", "tag")}
                       for x in sk["stacks"]}
                t.eq(f"{what} stacks/{iid}", got, {fr: {k: v[k] for k in ("size_bytes", "commit_count",
                                                                          "impacting_bytes", "transient_bytes",
                                                                          "transient_count", "types")}
                                                     | {"tag": TAG_OF(fr)}
                                                     for fr, v in m.stack_figs(inst, f, to).items()})
        # Series of six instances with commits (of ~70: most hold nothing).
        busy = [i.id for i in m.insts if i.recs]
        t.check(f"random {seed}: six instances with commits", len(busy) >= 6, busy)
        for iid in rnd.sample(busy, min(6, len(busy))):
            for stp in (1, 2):
                st, s = svc.get(q(f"/api/processes/{iid}/series", **{"from": first, "to": end, "step": f"{stp}s"}))
                frm = s["window"]["from_ns"]
                check_series(f"random {seed} series/{iid} step {stp}s", s, frm, s["window"]["to_ns"], stp * S,
                             m.insts[iid - 1], model=m, require_data=False)
        st, s = svc.get(q("/api/system/series", **{"from": first, "to": end, "step": "1s"}))
        check_series(f"random {seed} system series", s, first, end, S, None, model=m)

log_dir = os.path.join(os.environ.get("CW_BUILD", "."), "e2e-http", "api-log")
os.makedirs(log_dir, exist_ok=True)
access = os.path.join(log_dir, "access.log")
if os.path.exists(access):
    os.remove(access)
with Service(MTA, name="api-log", config=f"access_log = {access}\n") as svc:
    svc.get("/api/health")
    svc.get("/api/tags")
    # civetweb writes the line after answering: wait for it.
    wait_until(lambda: "/api/tags" in file_text(access), 30, "the access log records /api/tags")
lines = file_text(access)
t.check("access log records requests", "GET /api/tags" in lines and "GET /api/health" in lines,
        lines[-300:])

# Without glibc's per-thread caches (platform.h, cw_plat_heap_thread_caches_off):
# `run` executes itself again at its start (the same pid) with
# GLIBC_TUNABLES=glibc.malloc.tcache_count=0, says so in its log, and
# leaves a tcache tunable of the user's alone.
for own in (None, "glibc.malloc.tcache_count=7"):
    saved = os.environ.pop("GLIBC_TUNABLES", None)
    if own:
        os.environ["GLIBC_TUNABLES"] = own
    try:
        with Service(MTA, name="api-heap") as svc:
            st, _ = svc.get("/api/health")
            with open(f"/proc/{svc.proc.pid}/environ", "rb") as f:
                env = f.read()
            log = svc.logtext()
    finally:
        os.environ.pop("GLIBC_TUNABLES", None)
        if saved is not None:
            os.environ["GLIBC_TUNABLES"] = saved
    off = b"glibc.malloc.tcache_count=0" in env and "per-thread caches are off" in log
    if own:
        t.check("a tcache tunable of the user's is left alone", st == 200 and not off and
                own.encode() in env, log[-500:])
    else:
        t.check("run turns glibc's per-thread caches off by an exec of the same pid",
                st == 200 and off, log[-500:])

t.done()
