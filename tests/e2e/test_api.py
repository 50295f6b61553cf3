"""test_api.py - every REST endpoint against the real binary, replaying the
MemoryTestApp fixture: figures equal `analyze --json` for the same window
(and the fixture's expected numbers), error paths name their parameter,
a large window works, and the security rules hold."""

import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import MTA, MTA_WINDOWS, Checks, Service, analyze_json, require_fixture  # noqa: E402

require_fixture()

S = 1_000_000_000
t = Checks()
W = json.load(open(MTA_WINDOWS))
NAME = W["process"]["name"]


def q(path, **params):
    return path + ("?" + urllib.parse.urlencode(params) if params else "")


def by_id(procs):
    return {p["id"]: p for p in procs}


with Service(MTA, name="api") as svc:
    # ---- health
    st, h = svc.get("/api/health")
    t.eq("health: 200", st, 200)
    for k in ("version", "source", "uptime_s", "events_ingested", "events_lost",
              "drift_corrected_bytes", "db_path", "db_size_bytes", "last_bucket_end_ns"):
        t.check(f"health has {k}", k in h, json.dumps(h))
    t.check("health: events ingested", h["events_ingested"] > 100, h["events_ingested"])
    t.check("health: db size", h["db_size_bytes"] > 0, h["db_size_bytes"])
    first, end = h["first_bucket_ns"], h["last_bucket_end_ns"]
    t.check("health: data range", first <= W["t0_ns"] < end, (first, end))

    # ---- processes == analyze --json, for the fixture's windows and the whole data
    windows = [(n, w["from_ns"], w["to_ns"]) for n, w in W["windows"].items()]
    windows.append(("all", first, end))
    for name, f, to in windows:
        st, r = svc.get(q("/api/processes", **{"from": f, "to": to}))
        t.eq(f"processes {name}: 200", st, 200)
        a = analyze_json(svc.db, f, to)
        t.eq(f"processes {name}: window", r["window"], a["window"])
        t.eq(f"processes {name}: same processes as analyze --json", by_id(r["processes"]), by_id(a["processes"]))
        # Default order: impacting growth, largest first.
        imp = [p["impacting_bytes"] for p in r["processes"]]
        t.eq(f"processes {name}: sorted by impacting", imp, sorted(imp, reverse=True))
        if name in W["windows"]:
            mta = [p for p in r["processes"] if p["name"] == NAME]
            t.eq(f"processes {name}: one {NAME}", len(mta), 1)
            for k, v in W["windows"][name]["expect"].items():
                t.eq(f"processes {name}: {NAME} {k}", mta[0][k], v)

    step = W["windows"]["step"]
    four = W["windows"]["last_four_spikes"]
    st, r = svc.get(q("/api/processes", **{"from": first, "to": end}))
    mta = [p for p in r["processes"] if p["name"] == NAME][0]
    pid_ = mta["id"]

    # Times as RFC 3339 and relative give the same windows.
    rfc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(step["from_ns"] // S))
    st, r2 = svc.get(q("/api/processes", **{"from": rfc, "to": str(step["to_ns"])}))
    t.eq("RFC 3339 from", r2["window"]["from_ns"], step["from_ns"])
    st, r3 = svc.get(q("/api/processes", **{"from": "-10s", "to": "now"}))
    t.eq("relative window ends at the data's end (replay clock)", r3["window"]["to_ns"], end)
    t.eq("relative window is 10 s", r3["window"]["to_ns"] - r3["window"]["from_ns"], 10 * S)
    st, r4 = svc.get("/api/processes")
    t.check("default window: the last hour", st == 200 and r4["window"]["to_ns"] == end, r4.get("window"))

    # sort / limit / name / pid
    for key, field in (("transient", "transient_bytes"), ("size", "size_bytes"),
                       ("peak", "peak_outstanding_bytes"), ("outstanding", "outstanding_end_bytes")):
        st, r = svc.get(q("/api/processes", **{"from": first, "to": end, "sort": key}))
        vals = [p[field] for p in r["processes"]]
        t.eq(f"sort={key}", vals, sorted(vals, reverse=True))
    st, r = svc.get(q("/api/processes", **{"from": first, "to": end, "limit": 1}))
    t.check("limit=1", len(r["processes"]) == 1 and r["total"] >= 2, r["total"])
    st, r = svc.get(q("/api/processes", **{"from": first, "to": end, "name": "memorytest"}))
    t.eq("name filter (case-insensitive)", [p["name"] for p in r["processes"]], [NAME])
    st, r = svc.get(q("/api/processes", **{"from": first, "to": end, "pid": W["process"]["pid"]}))
    t.eq("pid filter", [p["id"] for p in r["processes"]], [pid_])

    # ---- one process
    st, r = svc.get(q(f"/api/processes/{pid_}", **{"from": step["from_ns"], "to": step["to_ns"]}))
    a = by_id(analyze_json(svc.db, step["from_ns"], step["to_ns"])["processes"])[pid_]
    t.eq("process/{id}: 200", st, 200)
    t.eq("process/{id}: equals analyze", r["process"], a)
    t.check("process/{id}: has tags", isinstance(r["process"]["tags"], list) and r["process"]["tags"], r)

    # ---- series
    st, s = svc.get(q(f"/api/processes/{pid_}/series", **{"from": first, "to": end, "step": "1s"}))
    t.eq("series: 200", st, 200)
    n = (end - first) // S
    t.eq("series: one point per step", len(s["t"]), n)
    for k in ("outstanding_total", "committed_bytes", "decommitted_bytes", "transient_bytes",
              "transient_count", "peak_bytes", "commit_count"):
        t.eq(f"series: {k} length", len(s[k]), n)
    a = by_id(analyze_json(svc.db, first, end)["processes"])[pid_]
    t.eq("series: committed bytes add up to Size", sum(s["committed_bytes"]), a["size_bytes"])
    t.eq("series: peak = the window's peak", max(s["peak_bytes"]), a["peak_outstanding_bytes"])
    t.eq("series: last outstanding = outstanding at end", s["outstanding_total"][-1], a["outstanding_end_bytes"])
    tag_sum = [sum(s["outstanding"][tg][i] for tg in s["tags"]) for i in range(n)]
    t.eq("series: tags add up to the total", tag_sum, s["outstanding_total"])
    t.eq("series: ten spikes visible as transients", sum(1 for c in s["transient_count"] if c > 0) >= 10, True)
    # Every 1 s step's end state equals analyze's outstanding at that time.
    for i in (5, 15, 25):
        a_i = by_id(analyze_json(svc.db, first, s["t"][i] + S)["processes"])[pid_]
        t.eq(f"series: outstanding at step {i} end", s["outstanding_total"][i], a_i["outstanding_end_bytes"])
    st, s2 = svc.get(q(f"/api/processes/{pid_}/series", **{"from": first, "to": end}))
    t.check("series: default step", st == 200 and s2["step_ns"] >= S, s2.get("step_ns"))

    # ---- system series
    st, ss = svc.get(q("/api/system/series", **{"from": first, "to": end, "step": "1s"}))
    t.eq("system series: 200", st, 200)
    all_ = analyze_json(svc.db, first, end)["processes"]
    t.eq("system series: last total = sum of processes' outstanding at end",
         ss["outstanding_total"][-1], sum(p["outstanding_end_bytes"] for p in all_))
    t.eq("system series: committed = sum of Size", sum(ss["committed_bytes"]), sum(p["size_bytes"] for p in all_))
    t.check("system series: peak >= outstanding", all(p >= o for p, o in zip(ss["peak_bytes"], ss["outstanding_total"])), "")

    # ---- stacks and the caller tree
    st, sk = svc.get(q(f"/api/processes/{pid_}/stacks", **{"from": four["from_ns"], "to": four["to_ns"]}))
    t.eq("stacks: 200", st, 200)
    a = by_id(analyze_json(svc.db, four["from_ns"], four["to_ns"], stacks=True)["processes"])[pid_]
    t.eq("stacks: tree root Size = process Size", sk["tree"]["size_bytes"], a["size_bytes"])
    t.eq("stacks: tree root impacting", sk["tree"]["impacting_bytes"], a["impacting_bytes"])
    t.eq("stacks: tree root transient count", sk["tree"]["transient_count"], a["transient_count"])
    want = {s_["stack_id"]: s_ for s_ in a["stacks"]}
    for s_ in sk["stacks"]:
        w = want[s_["stack_id"]]
        t.check(f"stacks: stack {s_['stack_id']} equals analyze",
                all(s_[k] == w[k] for k in ("frames", "tag", "size_bytes", "commit_count", "impacting_bytes",
                                             "transient_bytes", "transient_count")), (s_, w))

    def find(node, frame):
        if node.get("frame") == frame:
            return node
        for c in node.get("children", []):
            x = find(c, frame)
            if x:
                return x
        return None

    tb = find(sk["tree"], "MemoryTestApp.exe!ManipulateTemporaryBuffer")
    t.check("stacks: tree has the transient buffer's caller", tb is not None, "")
    if tb:
        t.eq("stacks: its Count is 4", tb["commit_count"], 4)
        t.eq("stacks: its Size is 40 MB", tb["size_bytes"], 40 * 1024 * 1024)
    st, sk2 = svc.get(q(f"/api/processes/{pid_}/stacks", **{"from": four["from_ns"], "to": four["to_ns"], "type": "AIFI"}))
    t.check("stacks type=AIFI: only stacks with AIFI", sk2["stacks"] and all(s_["types"]["AIFI"]["count"] > 0 for s_ in sk2["stacks"]), sk2["stacks"])
    tag0 = sk["stacks"][0]["tag"]
    st, sk3 = svc.get(q(f"/api/processes/{pid_}/stacks", **{"from": four["from_ns"], "to": four["to_ns"], "tag": tag0}))
    t.check("stacks tag=: only that tag", all(s_["tag"] == tag0 for s_ in sk3["stacks"]), tag0)
    st, sk4 = svc.get(q(f"/api/processes/{pid_}/stacks", **{"from": four["from_ns"], "to": four["to_ns"], "sort": "size"}))
    sizes = [s_["size_bytes"] for s_ in sk4["stacks"]]
    t.eq("stacks sort=size", sizes, sorted(sizes, reverse=True))

    # ---- diff (UMDH-style) over the step: +10 MB from main's VirtualAlloc
    st, d = svc.get(q("/api/diff", process=pid_, t1=step["from_ns"], t2=step["to_ns"]))
    t.eq("diff: 200", st, 200)
    t.eq("diff: total delta = impacting", d["bytes_delta"], step["expect"]["impacting_bytes"])
    top = d["stacks"][0]
    t.eq("diff: top stack +10 MB", top["bytes_delta"], 10 * 1024 * 1024)
    t.eq("diff: top stack +1 allocation", top["count_delta"], 1)
    t.check("diff: top stack is main's VirtualAlloc", "MemoryTestApp.exe!main" in top["frames"], top["frames"])
    t.eq("diff: new - old", top["new_bytes"] - top["old_bytes"], top["bytes_delta"])

    # ---- tags, OpenAPI
    st, tg = svc.get("/api/tags")
    t.eq("tags: 200", st, 200)
    names = set()

    def walk(nodes):
        for n_ in nodes:
            names.add(n_["path"])
            walk(n_["children"])

    walk(tg["tags"])
    t.check("tags: every tag of the report is in the tree", {x["tag"] for x in mta["tags"]} <= names, (names, mta["tags"]))
    st, oa = svc.get("/api/openapi.json")
    t.check("openapi: 3.x", st == 200 and oa["openapi"].startswith("3."), oa.get("openapi"))
    for p in ("/api/health", "/api/processes", "/api/processes/{id}", "/api/processes/{id}/series",
              "/api/processes/{id}/stacks", "/api/diff", "/api/system/series", "/api/tags", "/metrics"):
        t.check(f"openapi documents {p}", p in oa["paths"], "")

    # ---- a large window: 30 days back, and the whole 400 days allowed
    st, r = svc.get(q("/api/processes", **{"from": end - 30 * 86400 * S, "to": end}))
    t.check("large window: processes", st == 200 and NAME in [p["name"] for p in r["processes"]], st)
    st, s = svc.get(q(f"/api/processes/{pid_}/series", **{"from": "-399d", "to": "now"}))
    t.check("large window: series picks a step", st == 200 and len(s["t"]) <= 1000, (st, s if st != 200 else len(s["t"])))
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
    t.eq("still healthy after bad input", h2["last_bucket_end_ns"], end)

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
    t.check("uPlot is served", st == 200 and "javascript" in hdrs.get("Content-Type", ""), (st, hdrs.get("Content-Type")))
    st, hdrs, body = svc.request("/js/app.js")
    t.check("ES modules served as JavaScript", st == 200 and "javascript" in hdrs.get("Content-Type", ""), hdrs.get("Content-Type"))

# A token, an access log, and serving while a paced replay ingests.
with Service(MTA, name="api-token", args=["--token", "s3cret", "--speed", "10"], wait_done=False,
             config=None) as svc:
    st, h = svc.get("/api/health")
    t.check("live: serving while ingesting", st == 200 and not h["ingest_done"], h)
    st, _, body = svc.request("/api/health", method="POST")
    t.eq("POST without the token: 401", st, 401)
    st, _, body = svc.request("/api/health", method="POST", headers={"Authorization": "Bearer wrong"})
    t.eq("POST with a wrong token: 401", st, 401)
    st, _, body = svc.request("/api/health", method="POST", headers={"Authorization": "Bearer s3cret"})
    t.eq("POST with the token: 405 (no state-changing endpoint here)", st, 405)
    deadline = time.time() + 30
    while time.time() < deadline and not svc.get("/api/health")[1]["ingest_done"]:
        st, r = svc.get("/api/processes?from=-1h&to=now")
        time.sleep(0.3)
    st, h = svc.get("/api/health")
    t.check("live: ingest completes, events counted", h["ingest_done"] and h["events_ingested"] > 100, h)

log_dir = os.path.join(os.environ.get("CW_BUILD", "."), "e2e-http", "api-log")
os.makedirs(log_dir, exist_ok=True)
access = os.path.join(log_dir, "access.log")
if os.path.exists(access):
    os.remove(access)
with Service(MTA, name="api-log", config=f"access_log = {access}\n") as svc:
    svc.get("/api/health")
    svc.get("/api/tags")
with open(access) as f:
    lines = f.read()
t.check("access log records requests", "/api/tags" in lines, lines[-300:])

t.done()
