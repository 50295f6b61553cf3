#!/usr/bin/env python3
"""test_win_export.py - the stack exports of commitwatch.exe under Wine
(docs/EXPORTS.md): the Windows build links protobuf-c's runtime and zlib
cross-built from Debian's sources (scripts/deps_windows.sh).

`commitwatch.exe analyze --format pprof|speedscope|folded` on the
MemoryTestApp trace: the pprof file opened with `go tool pprof -raw` on the
host, its totals per sample type and per tag those of the same .exe's
`analyze --json --stacks`; the speedscope and folded totals likewise. The
exports written to standard output are the files' bytes (stdout is put in
binary mode: no "\\r\\n" in a gzipped profile or in folded text).
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BUILD, FIXTURES, Checks  # noqa: E402
from cwtest import require  # noqa: E402
import cwwine  # noqa: E402
from cwwine import BIN, WINE_RUN, cw, win_path  # noqa: E402
from exportcheck import (FOLDED_VALUE, GO, check_folded, check_pprof,  # noqa: E402
                         check_speedscope)

cwwine.require_wine()
require(GO, "go (apt-get install golang-go): `go tool pprof` reads the pprof exports")
t = Checks()
MTA = os.path.join(FIXTURES, "memorytestapp.jsonl")
out_dir = os.path.join(BUILD, "e2e-wine", "export")
os.makedirs(out_dir, exist_ok=True)
SRC = ["--source", "replay:" + win_path(MTA)]


def raw_stdout(args):
    """commitwatch.exe ARGS: its standard output's bytes, as written."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.run([WINE_RUN, BIN] + args, stdout=out, stderr=err,
                           stdin=subprocess.DEVNULL, timeout=120)
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            raise RuntimeError(f"commitwatch.exe {' '.join(args)}: {p.returncode}\n"
                               f"{err.read().decode('utf-8', 'replace')}")
        return out.read()


rc, text, err = cw("analyze", *SRC, "--json", "--stacks")
t.eq("analyze --json --stacks exits 0", rc, 0)
procs = json.loads(text)["processes"]

pb = os.path.join(out_dir, "mta.pb.gz")
rc, _, err = cw("analyze", *SRC, "--format", "pprof", "-o", win_path(pb))
t.check("analyze --format pprof -o exits 0", rc == 0, err)
check_pprof(t, "exe", pb, procs)
t.check("pprof to stdout is the file's bytes (binary stdout)",
        raw_stdout(["analyze"] + SRC + ["--format", "pprof"]) == open(pb, "rb").read())

ss = raw_stdout(["analyze"] + SRC + ["--format", "speedscope"])
check_speedscope(t, "exe", ss.decode("utf-8"), procs, True)
for v, arg in FOLDED_VALUE.items():
    folded = raw_stdout(["analyze"] + SRC + ["--format", "folded", "--value", arg])
    t.check(f"folded {arg}: LF line ends", b"\r" not in folded)
    check_folded(t, "exe", folded.decode("utf-8"), procs, v)
t.done()
