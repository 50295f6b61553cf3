#!/usr/bin/env python3
"""test_export.py - the stack exports (docs/EXPORTS.md) end to end.

`analyze --format folded|pprof|speedscope` on the MemoryTestApp trace and on
a database, and /api/processes/{id}/stacks?format=..., each read back by a
real reader and its totals compared with `analyze --json --stacks` (or the
API's JSON) of the same window:

  pprof       opened with `go tool pprof -raw` (Debian's golang-go): the
              total of each sample type (impacting_bytes, transient_bytes,
              commit_count) is the processes' total, and the impacting bytes
              per tag label are the JSON's per-tag figures;
  speedscope  parsed with json: one sampled profile per value, whose
              weights add up to the stacks' positive values;
  folded      parsed as flamegraph.pl does (the last space splits the
              value): its lines add up to the stacks' positive values.

Windows: the whole trace, [16 s, 31 s) (where the 10 MB step is released:
a negative impacting stack, which pprof keeps and the flame graph formats
leave out) and the step [14 s, 16 s). Also the refusals of bad options.

Environment (tests/CMakeLists.txt): CW_BIN, CW_FIXTURES, CW_BUILD.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, MTA, MTA_WINDOWS, Checks, Service, require_fixture  # noqa: E402
from cwtest import require  # noqa: E402
from exportcheck import (FOLDED_VALUE, GO, check_folded, check_pprof,  # noqa: E402
                         check_speedscope, folded_sum)

require_fixture()
require(GO, "go (apt-get install golang-go): `go tool pprof` reads the pprof exports")

S = 1_000_000_000
W = json.load(open(MTA_WINDOWS))
T0 = W["t0_ns"]
TMP = tempfile.mkdtemp(prefix="cw_e2e_export_")
t = Checks()


def run(args, ok=True):
    p = subprocess.run([BIN] + args, capture_output=True)
    if ok and p.returncode != 0:
        raise RuntimeError(f"commitwatch {' '.join(args)}: {p.returncode}\n{p.stderr.decode()}")
    return p


def analyze_json(src, win):
    args = ["analyze"] + src + ["--json", "--stacks"] + win
    return json.loads(run(args).stdout)



# ---------------------------------------------------------------- the trace
WINDOWS = [("whole trace", []),
           ("[16s, 31s)", ["--from", str(T0 + 16 * S), "--to", str(T0 + 31 * S)]),
           ("step", ["--from", str(W["windows"]["step"]["from_ns"]),
                     "--to", str(W["windows"]["step"]["to_ns"])])]
negative_seen = False
for wname, win in WINDOWS:
    src = ["--source", "replay:" + MTA]
    procs = analyze_json(src, win)["processes"]
    negative_seen |= any(s["impacting_bytes"] < 0 for p in procs for s in p["stacks"])
    name = f"trace {wname}"
    out = os.path.join(TMP, "trace.pb.gz")
    run(["analyze"] + src + win + ["--format", "pprof", "-o", out])
    check_pprof(t, name, out, procs)
    # pprof on standard output: the same bytes as with -o.
    stdout = run(["analyze"] + src + win + ["--format", "pprof"]).stdout
    t.check(f"{name}: pprof to stdout is the file", stdout == open(out, "rb").read())
    text = run(["analyze"] + src + win + ["--format", "speedscope"]).stdout.decode()
    check_speedscope(t, name, text, procs, True)
    for v, arg in FOLDED_VALUE.items():
        text = run(["analyze"] + src + win + ["--format", "folded", "--value", arg]).stdout.decode()
        check_folded(t, name, text, procs, v)
t.check("a window has a stack with negative impacting bytes (pprof keeps it)", negative_seen)

# Refusals: each names what is wrong, exit status 2.
for args, msg in ((["--format", "svg"], "format: 'svg' is not one of folded, pprof, speedscope"),
                  (["--value", "count"], "--value and -o go with --format"),
                  (["--format", "pprof", "--value", "count"], "--value is for --format folded"),
                  (["--format", "folded", "--value", "size"], "value: 'size' is not one of"),
                  (["--format", "folded", "--json"], "give --json or --format, not both")):
    p = run(["analyze", "--source", "replay:" + MTA] + args, ok=False)
    t.check(f"analyze {' '.join(args)}: exit 2 naming the problem",
            p.returncode == 2 and msg in p.stderr.decode(), p.stderr.decode()[:300])
p = run(["analyze", "--source", "replay:" + MTA, "--format", "folded", "-o",
         os.path.join(TMP, "no", "such", "dir", "x.folded")], ok=False)
t.check("analyze -o into a missing folder: exit 1 naming the file",
        p.returncode == 1 and "cannot create" in p.stderr.decode(), p.stderr.decode())

# ---------------------------------------------------------------- database and API
with Service(MTA, name="export") as svc:
    for wname, f, to in (("[0s, 20s)", T0, T0 + 20 * S), ("[16s, 31s)", T0 + 16 * S, T0 + 31 * S)):
        win = ["--from", str(f), "--to", str(to)]
        procs = analyze_json(["--db", svc.db], win)["processes"]
        name = f"db {wname}"
        out = os.path.join(TMP, "db.pb.gz")
        run(["analyze", "--db", svc.db] + win + ["--format", "pprof", "-o", out])
        check_pprof(t, name, out, procs)
        text = run(["analyze", "--db", svc.db] + win + ["--format", "speedscope"]).stdout.decode()
        check_speedscope(t, name, text, procs, True)
        text = run(["analyze", "--db", svc.db] + win + ["--format", "folded"]).stdout.decode()
        check_folded(t, name, text, procs, "impacting_bytes")

        # The API: one process's stacks, the same window.
        app = max(procs, key=lambda p: p["transient_bytes"])
        pid = app["id"]
        base = f"/api/processes/{pid}/stacks"
        qs = {"from": f, "to": to}
        _, js = svc.get(base + "?" + urllib.parse.urlencode(qs))
        name = f"api {wname}"
        st, hd, body = svc.request(base + "?" + urllib.parse.urlencode(dict(qs, format="pprof")))
        t.eq(f"{name}: pprof status", st, 200)
        t.eq(f"{name}: pprof content type", hd.get("Content-Type"), "application/octet-stream")
        t.check(f"{name}: pprof is an attachment with a file name",
                re.fullmatch(r'attachment; filename="commitwatch-MemoryTestApp.exe-\d+-\d+-\d+\.pb\.gz"',
                             hd.get("Content-Disposition", "")), hd.get("Content-Disposition"))
        path = os.path.join(TMP, "api.pb.gz")
        with open(path, "wb") as fh:
            fh.write(body)
        check_pprof(t, name, path, [app])
        st, hd, body = svc.request(base + "?" + urllib.parse.urlencode(dict(qs, format="speedscope")))
        t.eq(f"{name}: speedscope content type", hd.get("Content-Type"), "application/json")
        check_speedscope(t, name, body.decode(), [app], False)
        for v, arg in FOLDED_VALUE.items():
            st, hd, body = svc.request(base + "?" + urllib.parse.urlencode(
                dict(qs, format="folded", value=arg)))
            t.check(f"{name}: folded {arg} is text", st == 200 and
                    hd.get("Content-Type", "").startswith("text/plain"), f"{st} {hd}")
            check_folded(t, name, body.decode(), [app], v)
        # The stack total of the API's JSON is the process's.
        t.eq(f"{name}: JSON tree total = analyze", js["tree"]["transient_bytes"], app["transient_bytes"])
        # A tag filter applies to the export: the tag's own figures.
        tag = max(app["tags"], key=lambda x: x["transient_bytes"])
        st, hd, body = svc.request(base + "?" + urllib.parse.urlencode(
            dict(qs, format="folded", value="transient", tag=tag["tag"])))
        t.eq(f"{name}: folded of tag {tag['tag']}", folded_sum(body.decode())[0], tag["transient_bytes"])
    # Refusals.
    for params, msg in (({"format": "svg"}, "format: 'svg' is not one of json, folded, pprof, speedscope"),
                        ({"format": "pprof", "value": "count"}, "value: goes with format=folded"),
                        ({"format": "folded", "value": "size"}, "value: 'size' is not one of")):
        st, js = svc.get(base + "?" + urllib.parse.urlencode(params))
        t.check(f"api {params}: 400 naming the parameter",
                st == 400 and msg in js.get("error", ""), f"{st} {js}")
    st, js = svc.get("/api/processes/999999/stacks?format=folded")
    t.eq("api export of an unknown process: 404", st, 404)
    # format=json is the JSON answer.
    st, js = svc.get(base + "?format=json")
    t.check("api format=json is the JSON answer", st == 200 and "tree" in js)
    # The OpenAPI document names the parameter.
    st, doc = svc.get("/api/openapi.json")
    params = [p["name"] for p in doc["paths"]["/api/processes/{id}/stacks"]["get"]["parameters"]]
    t.check("OpenAPI: stacks has format and value", "format" in params and "value" in params, params)

shutil.rmtree(TMP, ignore_errors=True)
t.done()
