"""exportcheck.py - reading commitwatch's stack exports back (docs/EXPORTS.md),
for test_export.py (the Linux build) and test_win_export.py (commitwatch.exe
under Wine): totals of `analyze --json --stacks` processes, the pprof file
through `go tool pprof -raw` (Debian's golang-go), the speedscope file with
json, folded text as flamegraph.pl splits it. Each check_* records its
checks in a cwservice.Checks.
"""
import json
import os
import re
import shutil
import subprocess

GO = shutil.which("go")
VALUES = ("impacting_bytes", "transient_bytes", "commit_count")
FOLDED_VALUE = {"impacting_bytes": "impacting", "transient_bytes": "transient",
                "commit_count": "count"}


def totals(procs):
    """{value: (total over processes, sum of the stacks' positive values)}."""
    out = {}
    for v in VALUES:
        tot = sum(p[v] for p in procs)
        pos = sum(max(0, s[v]) for p in procs for s in p["stacks"])
        out[v] = (tot, pos)
    return out


def tag_impacting(procs):
    d = {}
    for p in procs:
        for tg in p["tags"]:
            if tg["impacting_bytes"]:
                d[tg["tag"]] = d.get(tg["tag"], 0) + tg["impacting_bytes"]
    return d


def pprof_raw(path):
    """Per sample type totals and impacting per tag, from `go tool pprof -raw`."""
    tmp = os.path.dirname(os.path.abspath(path))
    env = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"),
               PPROF_TMPDIR=os.path.join(tmp, "pprof"))
    p = subprocess.run([GO, "tool", "pprof", "-raw", path], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"go tool pprof -raw {path}: {p.returncode}\n{p.stderr}")
    lines = p.stdout.splitlines()
    head = lines.index("Samples:") + 1
    types = lines[head].replace("[dflt]", "").split()
    tot = [0] * len(types)
    tags, last = {}, None
    for line in lines[head + 1:]:
        m = re.match(r"^\s*(-?\d+(?:\s+-?\d+)*):", line)
        if m:
            last = [int(x) for x in m.group(1).split()]
            for i in range(len(tot)):
                tot[i] += last[i]
            continue
        m = re.search(r"tag:\[(.*?)\]", line)
        if m and last is not None:
            if last[0]:
                tags[m.group(1)] = tags.get(m.group(1), 0) + last[0]
            last = None
        if line.startswith("Locations"):
            break
    return types, tot, tags


PPROF_TYPES = ["impacting_bytes/bytes", "transient_bytes/bytes", "commit_count/count",
               "commit_bytes/bytes"]


def check_pprof(t, name, path, procs):
    types, tot, tags = pprof_raw(path)
    t.eq(f"{name}: pprof sample types", types, PPROF_TYPES)
    want = totals(procs)
    t.check(f"{name}: the reference has figures", want["commit_count"][0] > 0, str(want))
    for i, v in enumerate(VALUES):
        t.eq(f"{name}: pprof total {v}", tot[i], want[v][0])
    t.eq(f"{name}: pprof total commit_bytes", tot[3], sum(p["size_bytes"] for p in procs))
    t.eq(f"{name}: pprof impacting bytes per tag label", tags, tag_impacting(procs))


def check_speedscope(t, name, text, procs, process_frames):
    doc = json.loads(text)
    t.eq(f"{name}: speedscope schema", doc.get("$schema"),
         "https://www.speedscope.app/file-format-schema.json")
    frames = doc["shared"]["frames"]
    profs = doc["profiles"]
    t.eq(f"{name}: speedscope profiles", len(profs), 3)
    want = totals(procs)
    for prof, v in zip(profs, VALUES):
        t.check(f"{name}: speedscope {v} is a sampled profile of whole stacks",
                prof["type"] == "sampled" and len(prof["samples"]) == len(prof["weights"]) and
                all(0 <= i < len(frames) for s in prof["samples"] for i in s))
        t.eq(f"{name}: speedscope total {v}", sum(prof["weights"]), want[v][1])
        t.eq(f"{name}: speedscope endValue {v}", prof["endValue"], want[v][1])
        t.eq(f"{name}: speedscope unit {v}", prof["unit"], "none" if v == "commit_count" else "bytes")
    if process_frames and profs[1]["samples"]:
        roots = {frames[s[0]]["name"] for s in profs[1]["samples"]}
        names = {f"{p['name']} (pid {p['pid']})" for p in procs if not p["folded"]}
        t.check(f"{name}: speedscope root frames are processes", roots <= names | {
            f"{p['name']} ({p['folded']} folded)" for p in procs}, f"{roots} vs {names}")


def folded_sum(text):
    tot, n = 0, 0
    for line in text.splitlines():
        stack, _, val = line.rpartition(" ")
        if not stack or not val.lstrip("-").isdigit():
            raise RuntimeError(f"bad folded line {line!r}")
        tot += int(val)
        n += 1
    return tot, n


def check_folded(t, name, text, procs, value):
    tot, n = folded_sum(text)
    want = totals(procs)[value][1]
    npos = sum(1 for p in procs for s in p["stacks"] if s[value] > 0)
    t.eq(f"{name}: folded total {value}", tot, want)
    t.eq(f"{name}: folded lines {value}", n, npos)
