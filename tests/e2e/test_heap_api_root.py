#!/usr/bin/env python3
"""test_heap_api_root.py - the heap drill-down run by the service (issue
31, items 5 and 6): the daemon (`run --source perf`, root) with HTTP and a
token, configured with heap_trace_max_running = 1 and
heap_trace_max_duration = 1m.

- POST /api/processes/{id}/heap-trace of a running tests/programs/heap_truth
  --attach: 202 with the trace's id; the list shows it running, then
  attached; heap_truth then does its known work and exits; the trace ends
  "done"/"exited", and its stored report is exactly the truth (the same
  comparison as `heap --pid`), the 9 blocks allocated before the attach
  counted as unknown frees; format=folded gives the leaking function's
  stack weighted by its outstanding bytes, format=pprof a heap profile
  (`go tool pprof -raw`: inuse_space, inuse_objects, alloc_space,
  alloc_objects, totalling the report's);
- refusals, each with its status and message: no token (401), no such
  instance (404), an exited instance (409), a second trace of a process
  already traced (409, naming the running trace), a second process while
  one runs (429, heap_trace_max_running = 1, and recorded as failed), a
  duration over heap_trace_max_duration (400), bad bodies (400), a trace
  id that does not exist (404), stopping a trace that is not running
  (409);
- POST /api/heap-traces/{id}/stop ends a running trace: "stopped", and
  the process runs on to a clean exit;
- the filters of the list (pid, process) and its newest-first order;
- snapshots every 100 ms (snapshot_every) and GET .../diff: from the start
  to the end, the leak's growth is the truth's.

Never skips: without root or perf it fails, saying why (CI runs as root).
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import Checks, free_port  # noqa: E402
from cwtest import file_text, wait_until  # noqa: E402
from exportcheck import GO, pprof_raw  # noqa: E402
from heaptruth import BIN, TRUTH, mismatches, start_live  # noqa: E402

TOKEN = "heap-test-token"
BEFORE_N = 9


class Api:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def call(self, path, method="GET", body=None, token=TOKEN):
        data = None if body is None else (body if isinstance(body, bytes) else
                                          json.dumps(body).encode())
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                raw = r.read().decode()
                return r.status, (json.loads(raw) if raw.startswith("{") else raw)
        except urllib.error.HTTPError as e:
            raw = e.read().decode()
            return e.code, (json.loads(raw) if raw.startswith("{") else raw)

    def instance(self, pid):
        st, body = self.call(f"/api/processes?pid={pid}&from=-1h")
        procs = body.get("processes", []) if st == 200 else []
        return procs[0]["id"] if procs else None

    def trace(self, tid):
        return self.call(f"/api/heap-traces/{tid}")[1]


def through_commits(body, fn):
    """Commit events (commit_count) of the stacks through heap_truth's fn."""
    frame = "heap_truth!" + fn
    return sum(x["commit_count"] for x in body.get("stacks", []) if frame in x["frames"])


def start_truth(expect):
    t = subprocess.Popen([TRUTH, "--attach", expect], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    line = t.stdout.readline()
    if line.strip() != "ready":
        t.kill()
        raise SystemExit(f"FAIL: heap_truth did not say ready: {line!r}")
    return t


def main():
    c = Checks()
    if os.geteuid() != 0:
        print("FAIL: the perf source needs root (CI runs this as root)")
        return 1
    if not GO:
        print("FAIL: go (apt-get install golang-go): `go tool pprof` reads the heap profile")
        return 1
    tmp = tempfile.mkdtemp(prefix="cw_heap_api_")
    conf = os.path.join(tmp, "h.conf")
    with open(conf, "w") as f:
        f.write("heap_trace_max_running = 1\nheap_trace_max_duration = 1m\nalert_log = no\n"
                "alert_default_rules = no\n")
    port = free_port()
    run, log = start_live(tmp, port, TOKEN, "--config", conf)
    api = Api(port)
    kids = []
    try:

        # ---- a trace of heap_truth, by the API ----
        expect = os.path.join(tmp, "expect.json")
        t = start_truth(expect)
        kids.append(t)
        wait_until(lambda: api.instance(t.pid), 60, "heap_truth's instance is stored")
        inst = api.instance(t.pid)
        st, body = api.call(f"/api/processes/{inst}/heap-trace", "POST", {"duration": "50s"},
                            token=None)
        c.eq("POST without the token: 401", st, 401)
        st, body = api.call(f"/api/processes/{inst}/heap-trace", "POST", {"duration": "2m"})
        c.eq("a duration over heap_trace_max_duration: 400", st, 400)
        c.check("... saying the most", "at most 60 s" in json.dumps(body), f"{body}")
        st, lst = api.call(f"/api/heap-traces?pid={t.pid}")
        c.check("... and the refusal is recorded", st == 200 and [
            (x["state"], x["duration_ns"]) for x in lst["traces"]] == [("failed", 120 * 10**9)],
            f"{lst}")
        for bad, why in ((b"[1]", "not an object"), (b'{"duration": 5}', "not a string"),
                         (b'{"duration": "soon"}', "not a duration"),
                         (b'{"length": "5s"}', "an unknown field")):
            st, body = api.call(f"/api/processes/{inst}/heap-trace", "POST", bad)
            c.eq(f"a body {why}: 400", st, 400)
        st, body = api.call("/api/processes/99999999/heap-trace", "POST", {})
        c.eq("no such instance: 404", st, 404)

        st, body = api.call(f"/api/processes/{inst}/heap-trace", "POST",
                            {"duration": "50s", "snapshot_every": "100ms"})
        c.eq("POST /api/processes/{id}/heap-trace: 202", st, 202)
        tid = body.get("id") if isinstance(body, dict) else None
        c.check("... with the trace's id and url", tid and body.get("url") ==
                f"/api/heap-traces/{tid}", f"{body}")

        def attached():
            tr = api.trace(tid)
            return tr.get("state") == "running" and tr.get("attached") is True
        wait_until(attached, 30, "the trace shows itself running and attached")
        st, body = api.call(f"/api/processes/{inst}/heap-trace", "POST", {})
        c.eq("a second trace of the same process: 409", st, 409)
        c.check("... naming the running trace", f"/api/heap-traces/{tid}" in body.get("error", ""),
                f"{body}")

        # A second process while one trace runs: the limit (1).
        other = start_truth(os.path.join(tmp, "other.json"))
        kids.append(other)
        wait_until(lambda: api.instance(other.pid), 60, "the second process's instance is stored")
        oinst = api.instance(other.pid)
        st, body = api.call(f"/api/processes/{oinst}/heap-trace", "POST", {})
        c.eq("heap_trace_max_running = 1: a second process's trace is refused (429)", st, 429)
        st, lst = api.call(f"/api/heap-traces?pid={other.pid}")
        rows = lst.get("traces", []) if st == 200 else []
        c.check("... and recorded as failed, saying why",
                len(rows) == 1 and rows[0]["state"] == "failed" and "at once" in rows[0]["error"],
                f"{rows}")

        t.stdin.write("go\n")
        t.stdin.close()
        c.eq("heap_truth ran to its end", t.wait(timeout=60), 0)
        wait_until(lambda: api.trace(tid).get("state") != "running", 60, "the trace ends")
        tr = api.trace(tid)
        c.eq("the trace ended with the process: done", (tr.get("state"), tr.get("end_reason")),
             ("done", "exited"))
        rep = tr.get("report")
        want = json.load(open(expect))
        bad = mismatches(rep, want) if rep else ["no report"]
        c.check("its stored report is the truth program's figures exactly", not bad, f"{bad}")
        c.eq("the frees of the blocks allocated before the attach are unknown frees",
             (tr.get("unknown_frees"), rep and rep.get("unknown_frees")), (BEFORE_N, BEFORE_N))
        c.eq("the row's totals are the report's process totals",
             tr.get("outstanding_bytes"), rep and rep["processes"][0]["totals"]["outstanding_bytes"])
        c.eq("who asked: the API", (tr.get("trigger"), tr.get("process_id"), tr.get("pid")),
             ("api", inst, t.pid))
        st, folded = api.call(f"/api/heap-traces/{tid}?format=folded")
        lines = folded.splitlines() if st == 200 and isinstance(folded, str) else []
        leak = [ln for ln in lines if "heap_truth!" + want["leak"]["function"] in ln]
        c.check("format=folded: the leaking function's stack, weighted by its outstanding bytes",
                leak and sum(int(ln.rsplit(" ", 1)[1]) for ln in leak) ==
                want["leak"]["outstanding_bytes"], f"{lines[:5]}")
        c.check("snapshots were taken every 100 ms while it ran", rep and len(rep["snapshots"]) >= 1,
                f"{rep and len(rep['snapshots'])}")
        st, d = api.call(f"/api/heap-traces/{tid}/diff?a=start&b=end")
        leak = [x for x in d.get("stacks", []) if
                "heap_truth!" + want["leak"]["function"] in x["frames"]] if st == 200 else []
        c.eq("GET .../diff start..end: the leak's growth is the truth's",
             (sum(x["bytes_delta"] for x in leak), sum(x["count_delta"] for x in leak)),
             (want["leak"]["outstanding_bytes"], want["leak"]["outstanding_count"]))
        # ---- the same trace in the store's heap layer (layer 1 cells) ----
        # Its window, in the raw tier's whole seconds: the trace's end
        # releases what it held at the next second, outside it.
        sec = 10**9
        w0 = int(rep["from_ns"]) // sec * sec if rep else 0
        w1 = -(-int(rep["to_ns"]) // sec) * sec if rep else 0
        c.eq("the trace links its whole seconds in the heap layer (layer_url)", tr.get("layer_url"),
             f"/api/processes/{inst}/stacks?layer=heap&from={w0}&to={w1}")
        q = f"/api/processes/{inst}/stacks?layer=heap&from={w0}&to={w1}&limit=100000&tree=0"

        last = {}

        def layer_stored():
            st, b = api.call(q)
            last["answer"] = (st, b)
            return st == 200 and b.get("total", 0) > 0 and b
        got = wait_until(layer_stored, 30, lambda: f"the trace's seconds are in the heap layer "
                         f"({q}: {str(last.get('answer'))[:600]})")

        def through(fn):
            frame = "heap_truth!" + fn
            xs = [x for x in got["stacks"] if frame in x["frames"]]
            return (sum(x["size_bytes"] for x in xs), sum(x["commit_count"] for x in xs),
                    sum(x["types"]["AIFO"]["bytes"] for x in xs),
                    sum(x["types"]["AIFO"]["count"] for x in xs))
        lk, ch = want["leak"], want["churn"]
        c.eq("heap layer, the trace's window: the leak's bytes and blocks still live at its end",
             through(lk["function"])[2:], (lk["outstanding_bytes"], lk["outstanding_count"]))
        c.eq("... the churn's allocations, all freed in the window (AIFI, none live)",
             (through(ch["function"])[:2], through(ch["function"])[2]),
             ((ch["alloc_bytes"], ch["alloc_count"]), 0))
        st, fo = api.call(q + "&format=folded")
        lines = fo.splitlines() if st == 200 and isinstance(fo, str) else []
        c.check("heap layer as a flame graph's input (format=folded): the leak's stack",
                any("heap_truth!" + lk["function"] in ln for ln in lines), f"{st} {lines[:3]}")

        def past_end():
            """The leak's (AIFI, AIFO) bytes in a window a second past the end."""
            st, past = api.call(q.replace(f"to={w1}", f"to={w1 + sec}"))
            xs = [x for x in past.get("stacks", []) if "heap_truth!" + lk["function"] in
                  x["frames"]] if st == 200 else []
            return (sum(x["types"]["AIFI"]["bytes"] for x in xs),
                    sum(x["types"]["AIFO"]["bytes"] for x in xs))
        try:
            wait_until(lambda: past_end()[0] > 0, 30, "the trace's end is in the heap layer")
        except Exception as e:  # the check below says what was found
            print(f"  ({e})")
        c.eq("a window past the trace's end: its live blocks were released there, as at the end "
             "of tracking (AIFI, none live)", past_end(), (lk["outstanding_bytes"], 0))
        st, body = api.call(f"/api/processes/{inst}/stacks?layer=stack")
        c.eq("a layer that does not exist: 400", st, 400)
        st, com = api.call(f"/api/processes/{inst}/stacks?from={w0}&to={w1}&limit=100000&tree=0")
        c.check("the commit layer's figures of that window hold no heap block (the churn's "
                "%d allocations are not commits)" % ch["alloc_count"],
                st == 200 and through_commits(com, ch["function"]) < ch["alloc_count"],
                f"{st} {com.get('total') if isinstance(com, dict) else com}")
        st, _ = api.call(f"/api/heap-traces/{tid}/diff?a=999")
        c.eq("GET .../diff of a point that does not exist: 400", st, 400)
        req = urllib.request.Request(f"{api.base}/api/heap-traces/{tid}?format=pprof")
        with urllib.request.urlopen(req, timeout=30) as resp:
            pb = os.path.join(tmp, "heap.pb.gz")
            open(pb, "wb").write(resp.read())
        types, tot, _ = pprof_raw(pb)
        c.eq("format=pprof: a heap profile go tool pprof reads, inuse_space the default",
             types, ["inuse_space/bytes", "inuse_objects/count", "alloc_space/bytes",
                     "alloc_objects/count"])
        tt = rep["totals"] if rep else {}
        c.eq("... its totals are the report's", tot,
             [tt.get("outstanding_bytes"), tt.get("outstanding_count"), tt.get("alloc_bytes"),
              tt.get("alloc_count")])
        st, _ = api.call(f"/api/heap-traces/{tid}?format=svg")
        c.eq("an unknown format: 400", st, 400)
        # Once its exit is stored; before, the trace starts and fails on
        # its thread ("no process"), recorded as such.
        wait_until(lambda: (api.call(f"/api/processes/{inst}")[1].get("process") or {})
                   .get("exit_ns"), 60,
                   "heap_truth's exit is stored")
        st, body = api.call(f"/api/processes/{inst}/heap-trace", "POST", {})
        c.eq("an exited instance: 409", st, 409)

        # ---- stop: the trace ends, the process runs on ----
        st, body = api.call(f"/api/processes/{oinst}/heap-trace", "POST", {"duration": "50s"})
        c.eq("the limit is free again once the first trace ended: 202", st, 202)
        sid = body.get("id") if isinstance(body, dict) else None
        wait_until(lambda: api.trace(sid).get("attached") is True, 30, "the second trace attaches")
        st, body = api.call(f"/api/heap-traces/{sid}/stop", "POST", {})
        c.eq("POST /api/heap-traces/{id}/stop: 200", st, 200)
        wait_until(lambda: api.trace(sid).get("state") != "running", 30, "the stopped trace ends")
        tr = api.trace(sid)
        c.eq("it is stored as stopped", (tr.get("state"), tr.get("end_reason")),
             ("stopped", "stopped"))
        st, _ = api.call(f"/api/heap-traces/{sid}/stop", "POST", {})
        c.eq("stopping a trace that is not running: 409", st, 409)
        other.stdin.write("go\n")
        other.stdin.close()
        c.eq("the process runs on untraced to a clean exit", other.wait(timeout=60), 0)

        # ---- the list ----
        st, lst = api.call("/api/heap-traces")
        ids = [x["id"] for x in lst.get("traces", [])] if st == 200 else []
        c.check("the list is newest first and holds every trace", ids == sorted(ids, reverse=True)
                and tid in ids and sid in ids, f"{ids}")
        st, lst = api.call(f"/api/heap-traces?process={inst}")
        mine = lst.get("traces", []) if st == 200 else []
        c.check("filtered by instance: its trace and its recorded refusals, nothing else",
                tid in [x["id"] for x in mine] and sid not in [x["id"] for x in mine] and
                all(x["process_id"] == inst for x in mine) and
                all(x["state"] == "failed" for x in mine if x["id"] != tid),
                f"{[(x['id'], x['state']) for x in mine]}")
        st, _ = api.call("/api/heap-traces/99999")
        c.eq("no such trace: 404", st, 404)
        st, _ = api.call("/api/heap-traces?limit=0")
        c.eq("a bad limit: 400", st, 400)
        st, doc = api.call("/api/openapi.json")
        c.check("the OpenAPI document lists the heap endpoints",
                all(p in doc.get("paths", {}) for p in
                    ("/api/processes/{id}/heap-trace", "/api/heap-traces",
                     "/api/heap-traces/{id}", "/api/heap-traces/{id}/stop")))
        run.send_signal(signal.SIGINT)
        c.eq("the service stops cleanly", run.wait(timeout=120), 0)
    finally:
        for k in kids:
            if k.poll() is None:
                k.kill()
        if run.poll() is None:
            run.kill()
    text = file_text(log.name)
    c.check("the log says each trace started and ended",
            f"heap trace {tid} of process" in text and "ended (exited)" in text, text[-2000:])
    c.check("... and, at the stop, what the heap layer stored and dropped",
            "seconds of the heap layer stored, 0 dropped" in text, text[-2000:])
    # The same window from the stored file, by the CLI.
    out = subprocess.run([BIN, "analyze", "--db", os.path.join(tmp, "h.db"), "--layer", "heap",
                          "--from", str(w0), "--to", str(w1), "--json", "--stacks"],
                         capture_output=True, text=True)
    procs = [p for p in json.loads(out.stdout)["processes"] if p["id"] == inst] \
        if out.returncode == 0 else []
    # From the trace's start nothing is outstanding before: impacting = AIFO.
    live = sum(s["impacting_bytes"] for p in procs for s in p["stacks"]
               if "heap_truth!" + lk["function"] in s["frames"])
    c.eq("analyze --db --layer heap: the leak's bytes live at the trace's end (impacting)",
         (out.returncode, live), (0, lk["outstanding_bytes"]))
    return c.done()


if __name__ == "__main__":
    sys.exit(main())
