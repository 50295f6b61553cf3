#!/usr/bin/env python3
"""test_etl.py - `--source etl:` end to end on .etl files this test writes.

cw_etl_gen (tests/etlgen) writes the MemoryTestApp fixture (seed 002,
tests/fixtures/memorytestapp.jsonl) as the kernel events a Windows trace of
it holds, laid out like the real files: a header buffer, per-CPU buffers
(compressed and not), SYSTEM and PERFINFO headers, 64- and 32-bit pointers,
Process/Thread/Image events, VirtualAlloc/VirtualFree with their stacks as
one StackWalk event, as kernel and user halves, or as stack keys defined
at the end. For each variant:

- `etl info` sees the layout (pointer size, both kinds of buffer, every
  stack joined, VirtualAlloc usable);
- `analyze --source etl:` equals `analyze --source replay:` on the JSONL in
  every per-process figure, for the whole life, the step window and the
  last four spikes (the seed's figures), for every process that had no
  memory before the trace; a trace has no record of memory committed
  before it started (docs/ETW.md), so svchost.exe, which had, is compared
  with the fixture without its rundown lines, as is every other process;
- the stacks are the fixture's, frame by frame, as module!+0xOFFSET (the
  generator's map) with the kernel's frames innermost;
- `record --source etl:` writes a JSONL trace that replays to the same
  report, and `run --source etl:` stores what `analyze --db` gives back.

With `--images DIR` (test_images): cw_etl_gen also writes the trace's
modules as PE images whose exports carry the fixture's function names at
the offsets its frames use ("operator new", "LRPC_ADDRESS::ProcessIO"
included), and KernelBase.dll is a real DLL built by MinGW
(tests/fixtures/pe/kernelbase.c; its exports' RVAs from `objdump -p`, the
generator places the fixture's KernelBase functions there). Then
`analyze --source etl: --images DIR` equals replay: in every per-process
figure *and* tag, and the stacks are the fixture's frame by frame (module
names in lowercase, as the reader names every image; the two kernel frames
named from ntoskrnl.exe's exports, innermost). With only the functions a
real system exports (ntdll's Rtlp*, Ldrp*, Tpp* and the kernel's Mi* left
out, so their frames are named by the export before them, as on a real
system), the default Windows stack tags still give every stack the same
tag: heap, VirtualAlloc and thread stacks are tagged from export names
alone (docs/STACKTAGS.md). `record` and `run` take --images too.

Then the error cases: a file that is not an .etl, a missing one, usage.

Environment: CW_BIN, CW_ETL_GEN, CW_FIXTURES, CW_BUILD (tests/CMakeLists.txt).
"""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import traceback

BIN = os.environ.get("CW_BIN", "commitwatch")
GEN = os.environ.get("CW_ETL_GEN", "cw_etl_gen")
FIX = os.environ.get("CW_FIXTURES", os.path.join(os.path.dirname(__file__), "..", "fixtures"))
TRACE = os.path.join(FIX, "memorytestapp.jsonl")
WIN = json.load(open(os.path.join(FIX, "memorytestapp.windows.json")))
APP = WIN["process"]
MB = 1024 * 1024
TMP = tempfile.mkdtemp(prefix="cw_e2e_etl_")
BUILD = os.environ.get("CW_BUILD", "build")
PE_DIR = os.path.join(BUILD, "tests", "etlgen", "pe")  # the MinGW-built KernelBase.dll

# name: cw_etl_gen options
VARIANTS = {
    "x64-walk-z": ["--ptr", "8", "--stacks", "walk", "--compress", "--cpus", "4",
                   "--buffer-size", "4096"],
    "x86-keys-z": ["--ptr", "4", "--stacks", "keys", "--compress", "--cpus", "8",
                   "--buffer-size", "2048", "--process-version", "3", "--image-version", "2"],
    "x64-split": ["--ptr", "8", "--stacks", "split", "--cpus", "1"],
    "x86-split-z": ["--ptr", "4", "--stacks", "split", "--compress", "--cpus", "2",
                    "--buffer-size", "1024"],
    "x64-keys": ["--ptr", "8", "--stacks", "keys", "--cpus", "3", "--buffer-size", "8192",
                 "--process-version", "3"],
}
WINDOWS = [("whole life", None, None)] + [
    (name, w["from_ns"], w["to_ns"]) for name, w in sorted(WIN["windows"].items())]


class Fail(Exception):
    pass


def eq(a, b, what):
    if a != b:
        raise Fail(f"{what}: {a!r} != {b!r}")


def run(*args, ok=True, timeout=300):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)
    if ok and p.returncode != 0:
        raise Fail(f"commitwatch {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p


def analyze(source, frm=None, to=None, stacks=False):
    args = ["analyze", "--source", source, "--json"] if source else ["analyze", "--json"]
    if frm is not None:
        args += ["--from", str(frm), "--to", str(to)]
    if stacks:
        args.append("--stacks")
    return json.loads(run(*args).stdout)


def analyze_db(db, frm, to):
    return json.loads(run("analyze", "--db", db, "--json", "--from", str(frm), "--to",
                          str(to)).stdout)


def generate(name):
    out = os.path.join(TMP, name + ".etl")
    mp = os.path.join(TMP, name + ".map.json")
    p = subprocess.run([GEN, TRACE, out, "--map", mp, *VARIANTS[name]], capture_output=True,
                       text=True, timeout=120)
    if p.returncode != 0:
        raise Fail(f"cw_etl_gen {name}: {p.stderr}")
    return out, json.load(open(mp))


def without_rundown():
    path = os.path.join(TMP, "norundown.jsonl")
    with open(TRACE) as f, open(path, "w") as o:
        for line in f:
            if '"rundown":true' not in line.replace(" ", ""):
                o.write(line)
    return path


def rundown_pids():
    pids = set()
    with open(TRACE) as f:
        next(f)
        for line in f:
            e = json.loads(line)
            if e.get("rundown"):
                pids.add(e["pid"])
    return pids


def figures(p):
    """A process's figures, without what names stacks (tags, stacks: their
    frames differ by design) and the database's row id."""
    return {k: v for k, v in p.items() if k not in ("tags", "stacks", "id")}


def by_process(doc):
    out = {}
    for p in doc["processes"]:
        key = (p["pid"], p["name"], p["start_ns"])
        if key in out:
            raise Fail(f"two reports of {key}")
        out[key] = p
    return out


def same_figures(a, b, what, only=None, skip=()):
    pa, pb = by_process(a), by_process(b)
    keys = set(pa) | set(pb)
    if only is not None:
        keys = {k for k in keys if only(k)}
    for k in sorted(keys):
        if k not in pa or k not in pb:
            raise Fail(f"{what}: process {k} only in {'etl' if k in pb else 'replay'}")
        fa = {x: v for x, v in figures(pa[k]).items() if x not in skip}
        fb = {x: v for x, v in figures(pb[k]).items() if x not in skip}
        eq(fb, fa, f"{what}: {k}")
    return len(keys)


def check_info(name, path):
    d = json.loads(run("etl", "info", path, "--json").stdout)
    ptr = 4 if name.startswith("x86") else 8
    eq(d["header"]["pointer_size"], ptr, f"{name}: pointer size")
    f = d["file_stats"]
    if "-z" in name:
        eq(f["buffers_compressed"] > 0 and f["buffers_compressed"] < f["buffers"], True,
           f"{name}: compressed and plain buffers ({f['buffers_compressed']} of {f['buffers']})")
    else:
        eq(f["buffers_compressed"], 0, f"{name}: no compressed buffer")
    eq((f["buffers_unreadable"], f["reordered"], f["truncated"]), (0, 0, False),
       f"{name}: buffers read in order")
    s = d["stacks"]
    eq((s["orphaned"], s["unresolved"]), (0, 0), f"{name}: every stack joined")
    eq(s["frames_in_images"], s["frames"], f"{name}: every frame in an image")
    v = d["virtual_alloc"]
    eq(v["usable"], True, f"{name}: usable")
    eq(d["skipped"], 0, f"{name}: nothing skipped")
    names = sorted({p["name"] for p in d["processes"]})
    eq(names, ["MemoryTestApp.exe", "cmd.exe", "notepad.exe", "svchost.exe"], f"{name}: processes")


def check_figures(name, path):
    pre = rundown_pids()
    eq(pre, {1044}, "the fixture's processes with memory from before the trace")
    bare = without_rundown()
    for wname, frm, to in WINDOWS:
        etl = analyze(f"etl:{path}", frm, to)
        n = same_figures(analyze(f"replay:{TRACE}", frm, to), etl, f"{name}, {wname}",
                         only=lambda k: k[0] not in pre)
        eq(n >= 2, True, f"{name}, {wname}: processes compared")
        same_figures(analyze(f"replay:{bare}", frm, to), etl, f"{name}, {wname} (no rundown)")
        if frm is not None:
            app = [p for p in etl["processes"] if p["pid"] == APP["pid"]]
            exp = WIN["windows"][wname]["expect"]
            for k in ("size_bytes", "commit_count", "impacting_bytes", "transient_bytes",
                      "transient_count", "types"):
                eq(app[0][k], exp[k], f"{name}, {wname}: the seed's {k}")
    # The seed in words: a 10 MB step, ten transient 10 MB buffers.
    step = [p for p in analyze(f"etl:{path}", WIN["windows"]["step"]["from_ns"],
                               WIN["windows"]["step"]["to_ns"])["processes"]
            if p["pid"] == APP["pid"]][0]
    eq(step["impacting_bytes"], 10 * MB, f"{name}: the step")


def stack_table(doc, convert, tags=True):
    """(pid, start, frames as convert() gives them) -> the stack's figures
    (and tag); convert() returning None leaves a stack out."""
    out = {}
    for p in doc["processes"]:
        for s in p["stacks"]:
            fr = convert(s["frames"])
            if fr is None:
                continue
            out[(p["pid"], p["start_ns"], tuple(fr))] = (
                s["tag"] if tags else None, s["size_bytes"], s["commit_count"],
                s["impacting_bytes"], s["transient_bytes"], s["transient_count"])
    return out


def check_stacks(name, path, mp):
    frames, kernel = mp["frames"], mp["kernel"]
    bare = without_rundown()

    def mapped(fr):
        if fr == ["(before trace)"] or not fr:
            return None
        return [frames[f] for f in fr] + kernel

    # Without names, tags differ by design (frames match module-only rules).
    want = stack_table(analyze(f"replay:{bare}", stacks=True), mapped, tags=False)
    got = stack_table(analyze(f"etl:{path}", stacks=True), lambda fr: fr or None, tags=False)
    eq(len(want) > 10, True, f"{name}: stacks to compare")
    eq(got, want, f"{name}: stacks, frame by frame")


def check_record_and_run(name, path):
    rec = os.path.join(TMP, name + ".jsonl")
    run("record", "--source", f"etl:{path}", "--out", rec)
    a, b = analyze(f"etl:{path}", stacks=True), analyze(f"replay:{rec}", stacks=True)
    eq(b, a, f"{name}: record --source etl: then replay")
    with open(rec) as f:
        eq("commit_limit" in json.loads(f.readline()), False,
           f"{name}: record --source etl: writes no commit limit (the .etl has none)")
    db = os.path.join(TMP, name + ".db")
    p = run("run", "--source", f"etl:{path}", "--db", db, "--no-http", "--exit-at-end")
    # The limit rules are not evaluated against this machine's limit
    # (docs/ALERTS.md, "Time to limit"): said once.
    eq(p.stderr.count("an .etl does not carry the machine's commit limit"), 1,
       f"{name}: run --source etl: says once that no limit rule is evaluated")
    with sqlite3.connect(db) as c:
        eq(c.execute("SELECT value FROM meta WHERE key = 'commit_limit'").fetchone(), ("none",),
           f"{name}: the database records that the machine's limit is unknown")
    for wname, frm, to in WINDOWS[1:]:
        # A database records where tracking ended for every instance still
        # alive when the run ended (docs/DESIGN.md, "End of a run"); a
        # trace read directly never ends tracking. The figures are equal.
        x, y = analyze(f"etl:{path}", frm, to), analyze_db(db, frm, to)
        same_figures(x, y, f"{name}, {wname}: run --db then analyze --db",
                     skip=("tracking_ended_ns",))
        ends = {p["tracking_ended_ns"] for p in y["processes"]} - {None}
        eq(len(ends) <= 1 and all(p["exit_ns"] is None for p in y["processes"]
                                  if p["tracking_ended_ns"] is not None), True,
           f"{name}, {wname}: one end of tracking, and no exit for those it ended")


def test_variants():
    for name in VARIANTS:
        path, mp = generate(name)
        check_info(name, path)
        check_figures(name, path)
        check_stacks(name, path, mp)
        if name in ("x64-walk-z", "x86-keys-z"):
            check_record_and_run(name, path)
        print(f"  {name}: ok", flush=True)


KERNEL = ["ntoskrnl.exe!NtAllocateVirtualMemory", "ntoskrnl.exe!MiAllocateVirtualMemory"]
# What a real ntdll/ntoskrnl does not export: named by the export before them.
INTERNAL = ["Rtlp", "Ldrp", "Tpp", "Mi"]


def real_dll_rvas():
    """KernelBase.dll's exports as objdump -p lists them: {name: rva}, or
    None without MinGW (the real-DLL part is then skipped, said)."""
    txt = os.path.join(PE_DIR, "KernelBase.objdump.txt")
    if not os.path.exists(txt):
        return None
    slots, names, part = {}, {}, 0
    for line in open(txt):
        if "Export Address Table -- Ordinal Base" in line:
            part = 1
        elif "[Ordinal/Name Pointer] Table" in line:
            part = 2
        elif part == 1 and (m := re.match(r"\s*\[\s*(\d+)\] \+base\[\s*\d+\] ([0-9a-f]+) Export", line)):
            slots[int(m.group(1))] = int(m.group(2), 16)
        elif part == 2 and (m := re.match(r"\s*\[\s*(\d+)\] (\S+)", line)):
            names[int(m.group(1))] = m.group(2)
        elif part == 2 and line.strip() == "":
            part = 0
    return {names[i]: slots[i] for i in names if i in slots}


def generate_with_images(name, hide=()):
    out = os.path.join(TMP, f"{name}-img.etl")
    images = os.path.join(TMP, f"{name}-images" + ("-exports" if hide else ""))
    os.makedirs(images, exist_ok=True)
    args = [GEN, TRACE, out, "--images", images, *VARIANTS[name]]
    for h in hide:
        args += ["--hide", h]
    rvas = real_dll_rvas()
    if rvas is not None:
        # The fixture's KernelBase functions where the real DLL exports them.
        for fn in ("VirtualAlloc", "VirtualFree", "CreateRemoteThreadEx"):
            args += ["--rva", f"KernelBase.dll!{fn}={rvas[fn]:#x}"]
        # Loaded at its own size: --images names only an image of the file's.
        txt = open(os.path.join(PE_DIR, "KernelBase.objdump.txt")).read()
        size = int(re.search(r"SizeOfImage\s+([0-9a-fA-F]+)", txt).group(1), 16)
        args += ["--size", f"KernelBase.dll={size:#x}"]
        shutil.copy(os.path.join(PE_DIR, "KernelBase.dll"), os.path.join(images, "KernelBase.dll"))
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise Fail(f"cw_etl_gen {name} --images: {p.stderr}")
    return out, images, rvas is not None


def lower_module(frame):
    mod, _, fn = frame.partition("!")
    return mod.lower() + "!" + fn


def check_images(name):
    path, images, real = generate_with_images(name)
    bare = without_rundown()
    for wname, frm, to in WINDOWS:
        etl = analyze(f"etl:{path}", frm, to)
        named = json.loads(run("analyze", "--source", f"etl:{path}", "--images", images, "--json",
                               *(["--from", str(frm), "--to", str(to)] if frm is not None
                                 else [])).stdout)
        # Figures as without --images; tags now as the fixture's.
        same_figures(etl, named, f"{name} --images, {wname}: figures")
        want = {(p["pid"], p["start_ns"]): p["tags"] for p in analyze(f"replay:{bare}", frm, to)["processes"]}
        got = {(p["pid"], p["start_ns"]): p["tags"] for p in named["processes"]}
        eq(got, want, f"{name} --images, {wname}: tags per process")
    doc = json.loads(run("analyze", "--source", f"etl:{path}", "--images", images, "--json",
                         "--stacks").stdout)
    want = stack_table(analyze(f"replay:{bare}", stacks=True),
                       lambda fr: None if fr == ["(before trace)"] or not fr
                       else [lower_module(f) for f in fr] + KERNEL)
    got = stack_table(doc, lambda fr: fr or None)
    eq(len(want) > 10, True, f"{name} --images: stacks to compare")
    eq(got, want, f"{name} --images: stacks frame by frame, with their tags")
    tags = {t["tag"] for p in doc["processes"] for t in p["tags"]}
    eq({"Windows Heap", "VirtualAlloc", "Thread Stack"} <= tags, True,
       f"{name} --images: heap, VirtualAlloc and thread-stack tags ({sorted(tags)})")
    if real:
        kb = [f for k in got for f in k[2] if f.startswith("kernelbase.dll!")]
        # (VirtualFree is on free stacks only, which no report lists.)
        eq(sorted(set(kb)), ["kernelbase.dll!CreateRemoteThreadEx", "kernelbase.dll!VirtualAlloc"],
           f"{name} --images: frames named by the MinGW-built KernelBase.dll")
    return path, images, doc, real


def check_exports_only(name):
    """Only what a real system exports: internal functions are named by the
    export before them; the default tags still match the fixture's."""
    path, images, _ = generate_with_images(name, INTERNAL)
    bare = without_rundown()
    doc = json.loads(run("analyze", "--source", f"etl:{path}", "--images", images, "--json",
                         "--stacks").stdout)
    frames = {f for p in doc["processes"] for s in p["stacks"] for f in s["frames"]}
    for f in frames:
        fn = f.partition("!")[2]
        eq(any(fn.startswith(h) for h in INTERNAL), False, f"{name} exports only: {f} is not exported")
    eq(any("+0x" in f and not f.partition("!")[2].startswith("+") for f in frames), True,
       f"{name} exports only: internal functions named Export+0xNN")
    want = {(p["pid"], p["start_ns"]): p["tags"] for p in analyze(f"replay:{bare}")["processes"]}
    got = {(p["pid"], p["start_ns"]): p["tags"] for p in doc["processes"]}
    eq(got, want, f"{name} exports only: tags per process")
    want = {k[:2] + (len(k[2]),): v for k, v in stack_table(
        analyze(f"replay:{bare}", stacks=True),
        lambda fr: None if fr == ["(before trace)"] or not fr else list(fr) + KERNEL).items()}
    got = {k[:2] + (len(k[2]),): v for k, v in stack_table(doc, lambda fr: fr or None).items()}
    eq(sorted(got.values()), sorted(want.values()), f"{name} exports only: every stack's tag")


def test_images():
    if real_dll_rvas() is None:
        print("  (no MinGW: KernelBase.dll written by the generator, not built by a linker)")
    for name in ("x64-walk-z", "x86-keys-z"):
        path, images, doc, real = check_images(name)
        check_exports_only(name)
        print(f"  {name} --images: ok{' (with the MinGW-built KernelBase.dll)' if real else ''}",
              flush=True)
    # record and run take it too.
    rec = os.path.join(TMP, "img.jsonl")
    run("record", "--source", f"etl:{path}", "--images", images, "--out", rec)
    eq(analyze(f"replay:{rec}", stacks=True), doc, "record --images then replay")
    db = os.path.join(TMP, "img.db")
    run("run", "--source", f"etl:{path}", "--images", images, "--db", db, "--no-http",
        "--exit-at-end")
    got = {(p["pid"], p["start_ns"]): p["tags"] for p in analyze_db(db, *WINDOWS[1][1:])["processes"]}
    want = {(p["pid"], p["start_ns"]): p["tags"]
            for p in json.loads(run("analyze", "--source", f"etl:{path}", "--images", images,
                                    "--json", "--from", str(WINDOWS[1][1]), "--to",
                                    str(WINDOWS[1][2])).stdout)["processes"]}
    eq(got, want, "run --images then analyze --db: tags")
    # The configuration key `images` (README "Configuration"), without
    # --images: the same frames as --images, and not those of no images.
    def frames_of(db):
        d = json.loads(run("analyze", "--db", db, "--json", "--stacks").stdout)
        return sorted({f for p in d["processes"] for st in p.get("stacks", []) for f in st["frames"]})
    conf = os.path.join(TMP, "img.conf")
    with open(conf, "w") as f:
        f.write(f"images = {images}\n")
    os.chmod(conf, 0o600)
    for key, extra in (("conf", ["--config", conf]), ("none", [])):
        kdb = os.path.join(TMP, f"img-{key}.db")
        run("run", "--source", f"etl:{path}", *extra, "--db", kdb, "--no-http", "--exit-at-end")
        if key == "conf":
            eq(frames_of(kdb), frames_of(db), "config images = DIR: the frames --images gives")
        else:
            eq(frames_of(kdb) != frames_of(db), True, "without images: other frames")
    # Errors: a folder that is not there, another source.
    p = run("analyze", "--source", f"etl:{path}", "--images", os.path.join(TMP, "none"), ok=False)
    eq((p.returncode, "not a folder" in p.stderr), (1, True), f"a missing folder ({p.stderr.strip()})")
    p = run("analyze", "--source", f"replay:{TRACE}", "--images", images, ok=False)
    eq((p.returncode, "--images is for --source etl" in p.stderr), (2, True),
       f"--images with replay: ({p.stderr.strip()})")


def test_errors():
    bad = os.path.join(TMP, "not.etl")
    with open(bad, "w") as f:
        f.write("not an event trace\n" * 10)
    for args in (["etl", "info", bad], ["analyze", "--source", f"etl:{bad}"]):
        p = run(*args, ok=False)
        eq(p.returncode, 1, f"{args}: exit status")
        eq("not an .etl file" in p.stderr and "offset" in p.stderr and bad in p.stderr, True,
           f"{args}: the message names the file and offset ({p.stderr.strip()})")
    p = run("etl", "info", os.path.join(TMP, "none.etl"), ok=False)
    eq((p.returncode, "cannot open" in p.stderr), (1, True), "a missing file")
    eq(run("etl", ok=False).returncode, 2, "etl without a subcommand")
    eq(run("etl", "frobnicate", ok=False).returncode, 2, "an unknown subcommand")
    eq(run("etl", "info", ok=False).returncode, 2, "etl info without a file")
    eq(run("etl", "info", bad, "--bogus", ok=False).returncode, 2, "an unknown option")
    p = run("analyze", "--source", "etl:", ok=False)
    eq(p.returncode != 0, True, "etl: without a file")
    p = run("run", "--source", f"etl:{bad}", "--speed", "2", "--no-http", ok=False)
    eq(p.returncode, 2, "--speed with an etl source is a usage error")


def main():
    failed = 0
    for t in (test_variants, test_images, test_errors):
        try:
            t()
            print(f"ok   {t.__name__}", flush=True)
        except Exception:
            failed += 1
            print(f"FAIL {t.__name__}", flush=True)
            traceback.print_exc()
    shutil.rmtree(TMP, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
