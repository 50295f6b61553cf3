"""test_stacks_api.py - the machine's stacks, /api/stacks (the overview's
flame graph), against the real binary replaying the MemoryTestApp
fixture, and the flame graph's front-end packages served under /vendor/.

/api/stacks must hold every process's stacks of the window, exactly as
/api/processes/{id}/stacks gives them (same figures, frames and tags),
each naming its process, in the same order rules (impacting or size
desc), with the type and tag filters, the limit and tree=0 (no tree) of the
per-process route, and a caller tree whose first level is the process names (the
instances of a name merged) and whose figures are the sums of the
stacks'. Bad input names its parameter. The OpenAPI text describes it."""

import json
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import MTA, MTA_WINDOWS, Checks, Service, require_fixture  # noqa: E402

require_fixture()

t = Checks()
W = json.load(open(MTA_WINDOWS))
FIGS = ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes", "transient_count", "types")


def q(path, **params):
    return path + ("?" + urllib.parse.urlencode(params) if params else "")


def figs(o):
    return {k: o[k] for k in FIGS}


def add(acc, o):
    for k in FIGS:
        if k == "types":
            ty = acc.setdefault("types", {})
            for name, v in o["types"].items():
                x = ty.setdefault(name, {"bytes": 0, "count": 0})
                x["bytes"] += v["bytes"]
                x["count"] += v["count"]
        else:
            acc[k] = acc.get(k, 0) + o[k]


with Service(MTA, name="stacks-api") as svc:
    for name, win in (("whole", W["windows"]["whole"]), ("step", W["windows"]["step"])):
        f, to = win["from_ns"], win["to_ns"]
        st, procs = svc.get(q("/api/processes", **{"from": f, "to": to, "limit": 100000}))
        t.eq(f"{name}: /api/processes answers", st, 200)
        st, m = svc.get(q("/api/stacks", **{"from": f, "to": to, "limit": 100000}))
        t.eq(f"{name}: /api/stacks answers", st, 200)
        t.eq(f"{name}: its window is the processes' window", m["window"], procs["window"])
        t.eq(f"{name}: it counts the window's processes", m["processes"], len(procs["processes"]))
        want = {}
        for p in procs["processes"]:
            st, one = svc.get(q(f"/api/processes/{p['id']}/stacks", **{"from": f, "to": to, "limit": 100000}))
            for s in one["stacks"]:
                want[(p["id"], s["stack_id"])] = dict(s, process_id=p["id"], process=p["name"])
        got = {(s["process_id"], s["stack_id"]): s for s in m["stacks"]}
        t.check(f"{name}: the reference has stacks of several processes",
                len({k[0] for k in want}) > 1, f"{len(want)} stacks")
        t.eq(f"{name}: total is the number of stacks", m["total"], len(want))
        t.eq(f"{name}: every process's stacks, each naming its process, as the per-process route gives them",
             got, want)
        # The machine's stacks as a file: folded by transient bytes, every
        # stack with a positive value once, under its process's root frame.
        st, hdrs, body = svc.request(q("/api/stacks", **{"from": f, "to": to, "format": "folded",
                                                          "value": "transient"}))
        t.eq(f"{name}: /api/stacks?format=folded answers", st, 200)
        t.check(f"{name}: as a download named for the machine",
                "commitwatch-machine-" in hdrs.get("Content-Disposition", ""), hdrs.get("Content-Disposition"))
        lines = body.decode().splitlines()
        t.eq(f"{name}: folded: one line per stack with transient bytes",
             len(lines), sum(1 for s in want.values() if s["transient_bytes"] > 0))
        t.eq(f"{name}: folded: its total is the stacks' transient bytes",
             sum(int(ln.rsplit(" ", 1)[1]) for ln in lines),
             sum(s["transient_bytes"] for s in want.values() if s["transient_bytes"] > 0))
        t.check(f"{name}: folded: each stack under its process's root frame",
                all(ln.split(";", 1)[0].split(" (pid ")[0] in {p["name"] for p in procs["processes"]}
                    for ln in lines), lines[:2])
        keys = [s["impacting_bytes"] for s in m["stacks"]]
        t.eq(f"{name}: sorted by impacting bytes, largest first", keys, sorted(keys, reverse=True))
        tree = m["tree"]
        root = {}
        for s in m["stacks"]:
            add(root, s)
        t.eq(f"{name}: the tree's root has the stacks' sums", figs(tree), figs(root))
        t.eq(f"{name}: the tree's root counts the stacks", tree["stacks"], len(want))
        by_name = {}
        for s in m["stacks"]:
            add(by_name.setdefault(s["process"], {}), s)
        first = {c["frame"]: figs(c) for c in tree["children"]}
        t.eq(f"{name}: the tree's first level is the process names, with their stacks' sums", first, by_name)
        # Below a process name: its stacks' frames, as in its own caller tree.
        mta = next(c for c in tree["children"] if c["frame"] == W["process"]["name"])
        pid = next(p["id"] for p in procs["processes"] if p["name"] == W["process"]["name"])
        st, own = svc.get(q(f"/api/processes/{pid}/stacks", **{"from": f, "to": to, "limit": 1}))
        t.eq(f"{name}: below MemoryTestApp.exe, its own caller tree", mta.get("children"), own["tree"].get("children"))

    whole = W["windows"]["whole"]
    f, to = whole["from_ns"], whole["to_ns"]
    st, tr = svc.get(q("/api/stacks", **{"from": f, "to": to, "type": "transient", "sort": "size", "limit": 100000}))
    t.check("type=transient: only stacks with transient pieces", tr["stacks"] and all(s["transient_count"] > 0 for s in tr["stacks"]),
            json.dumps(tr["stacks"][:2]))
    sizes = [s["size_bytes"] for s in tr["stacks"]]
    t.eq("sort=size: largest size first", sizes, sorted(sizes, reverse=True))
    mtb = [s for s in tr["stacks"] if "MemoryTestApp.exe!ManipulateTemporaryBuffer" in s["frames"]]
    t.eq("type=transient: ManipulateTemporaryBuffer's stacks carry 100 MB (the seed)",
         sum(s["transient_bytes"] for s in mtb), 100 * 1024 * 1024)
    st, lim = svc.get(q("/api/stacks", **{"from": f, "to": to, "limit": 2}))
    st, alls = svc.get(q("/api/stacks", **{"from": f, "to": to, "limit": 100000}))
    t.eq("limit=2: two stacks listed, the first two", lim["stacks"], alls["stacks"][:2])
    t.eq("limit=2: total and tree still count them all", (lim["total"], lim["tree"]), (alls["total"], alls["tree"]))
    st, nt = svc.get(q("/api/stacks", **{"from": f, "to": to, "limit": 100000, "tree": 0}))
    t.eq("tree=0: the same stacks, no tree", (nt["stacks"], nt["total"], "tree" in nt), (alls["stacks"], alls["total"], False))
    st, pt = svc.get(q(f"/api/processes/{pid}/stacks", **{"from": f, "to": to, "tree": 0}))
    st, pw = svc.get(q(f"/api/processes/{pid}/stacks", **{"from": f, "to": to}))
    t.eq("tree=0 (one process): the same stacks, no tree", (pt["stacks"], "tree" in pt, "tree" in pw), (pw["stacks"], False, True))
    tag = alls["stacks"][0]["tag"]
    st, tg = svc.get(q("/api/stacks", **{"from": f, "to": to, "tag": tag, "limit": 100000}))
    t.check(f"tag={tag}: only its stacks", tg["stacks"] and all(s["tag"] == tag or s["tag"].startswith(tag + "\\") for s in tg["stacks"]))
    for path, word in ((q("/api/stacks", type="leaks"), "type"), (q("/api/stacks", sort="name"), "sort"),
                       (q("/api/stacks", limit="0"), "limit"), (q("/api/stacks", pid="1"), "pid"),
                       (q("/api/stacks", **{"from": "yesterday"}), "from"), (q("/api/stacks", tree="no"), "tree"),
                       (q(f"/api/processes/{pid}/stacks", tree="2"), "tree")):
        st, body = svc.get(path)
        t.check(f"{path}: 400 naming {word}", st == 400 and word in body.get("error", ""), f"{st} {body}")
    st, oa = svc.get("/api/openapi.json")
    t.check("the OpenAPI text describes /api/stacks with the per-process route's parameters",
            "/api/stacks" in oa["paths"] and
            [p["name"] for p in oa["paths"]["/api/stacks"]["get"]["parameters"]] ==
            [p["name"] for p in oa["paths"]["/api/processes/{id}/stacks"]["get"]["parameters"] if p["name"] != "id"])

    # The flame graph's packages (web/node_modules after `npm ci`).
    for path in ("/vendor/d3-flame-graph/d3-flamegraph.umd.min.js", "/vendor/d3-flame-graph/d3-flamegraph.css",
                 "/vendor/d3-selection/d3-selection.min.js", "/vendor/d3-hierarchy/d3-hierarchy.min.js"):
        st, hdrs, body = svc.request(path)
        t.check(f"{path}: served", st == 200 and len(body) > 500, f"{st} {len(body)}")
    st, hdrs, body = svc.request("/vendor/d3-flame-graph/../package.json")
    t.eq("/vendor/d3-flame-graph/../package.json: refused", st, 404)
    st, hdrs, body = svc.request("/vendor/playwright-core/index.js")
    t.eq("/vendor/playwright-core/...: not a shipped package", st, 404)
t.done()
