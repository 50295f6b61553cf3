#!/usr/bin/env python3
"""End-to-end: `commitwatch tags check` and `commitwatch tags explain`.

Runs the real binary (env CW_BIN) against the default rule files, the
WPA-format fixtures (env CW_FIXTURES) and bad input; checks text and JSON
output and exit codes."""
import json
import os
import subprocess
import sys
import tempfile

BIN = os.environ.get("CW_BIN", "build/commitwatch")
FIX = os.path.join(os.environ.get("CW_FIXTURES", "tests/fixtures"), "stacktags")
checks = 0


def run(*args, env=None):
    e = dict(os.environ)
    e.pop("CW_STACKTAGS_DIR", None)
    if env:
        e.update(env)
    p = subprocess.run([BIN, *args], capture_output=True, text=True, env=e, timeout=60)
    return p.returncode, p.stdout, p.stderr


def check(cond, what, *context):
    global checks
    checks += 1
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        for c in context:
            print("  ", c, file=sys.stderr)
        sys.exit(1)


def expect(args, code, out_has=(), err_has=(), env=None):
    rc, out, err = run(*args, env=env)
    check(rc == code, f"{args}: exit {rc}, expected {code}", out, err)
    for s in out_has:
        check(s in out, f"{args}: stdout lacks {s!r}", out, err)
    for s in err_has:
        check(s in err, f"{args}: stderr lacks {s!r}", out, err)
    return out, err


def explain_json(*args):
    rc, out, err = run("tags", "explain", "--json", *args)
    check(rc == 0, f"explain {args}: exit {rc}", err)
    lines = out.strip().splitlines()
    check(len(lines) == 1, "explain --json prints one line", out)
    return json.loads(lines[0])


HEAP = ";".join([
    "ntdll!RtlUserThreadStart", "kernel32!BaseThreadInitThunk", "MemoryTestApp!main",
    "MemoryTestApp!InnerLoopOperation", "ucrtbase!_malloc_base", "ntdll!RtlAllocateHeap",
    "ntdll!RtlpAllocateHeapInternal", "ntdll!NtAllocateVirtualMemory",
])
DIRECT = "MemoryTestApp!main;KernelBase!VirtualAlloc;ntdll!NtAllocateVirtualMemory"
GLIBC = "app!main;libc.so.6!malloc;libc.so.6!_int_malloc;libc.so.6!sysmalloc;libc.so.6!__brk"
THREAD = "app!main;libc.so.6!pthread_create@@GLIBC_2.34;libc.so.6!allocate_stack;libc.so.6!__mmap64"


def main():
    # --help everywhere, usage errors exit 2.
    expect(["tags", "--help"], 0, out_has=["tags check", "tags explain"])
    expect(["tags", "check", "--help"], 0, out_has=["usage: commitwatch tags check"])
    expect(["tags", "explain", "--help"], 0, out_has=["--stack", "--rules", "--json", "--platform"])
    expect(["tags"], 2, err_has=["usage"])
    expect(["tags", "frobnicate"], 2, err_has=["unknown command 'frobnicate'"])
    expect(["tags", "explain"], 2, err_has=["--stack is required"])
    expect(["tags", "explain", "--stack", "a!b", "--bogus"], 2, err_has=["unexpected argument '--bogus'"])
    expect(["tags", "explain", "--platform", "beos", "--stack", "a!b"], 2,
           err_has=["--platform must be windows or linux"])
    expect(["tags", "explain", "--stack", "a!b;;c!d"], 2, err_has=["frame 1 is empty"])
    expect(["tags", "check", "--frob"], 2, err_has=["unknown option '--frob'"])

    # check: the defaults and the fixtures print the tree.
    out, _ = expect(["tags", "check", "--platform", "windows"], 0,
                    out_has=["Windows Heap  [priority 10]", "VirtualAlloc  [priority 0]",
                             "Thread Stack  [priority 40]", 'Module="ntdll.dll" Method="RtlpAllocateHeap*"',
                             "ok: 1 file, 11 tags"])
    for tag in ["Windows Heap", "VirtualAlloc", "GDI", "Thread Stack", "Managed Heap", "CLR JIT Compile",
                "V8 JS Heap", "JScript Heap", "MSHTML Heap", "Video Memory", "DX Warp"]:
        check(f"\n{tag}  [priority" in "\n" + out, f"windows defaults have tag {tag}", out)
    out, _ = expect(["tags", "check", "--platform", "linux"], 0, out_has=["ok: 1 file, 12 tags"])
    for tag in ["C heap (glibc malloc)", "C heap (jemalloc)", "C heap (tcmalloc)", "C heap (mimalloc)",
                "Thread Stack", "Loader", "JVM Heap", "V8 JS Heap", "Go Runtime", "Python obmalloc",
                "Direct mmap", "Direct brk"]:
        check(f"\n{tag}  [priority" in "\n" + out, f"linux defaults have tag {tag}", out)
    sample = os.path.join(FIX, "wpa_sample.stacktags")
    override = os.path.join(FIX, "override.stacktags")
    out, _ = expect(["tags", "check", sample, override], 0,
                    out_has=["Memory  [priority 0]", "    Heap  [priority 5]",
                             "        Low Fragmentation  [priority 5, inherited]",
                             "Startup  [priority 50]", "Crypto  [priority 7]",
                             'Module="ucrtbase.dll" Method="malloc"', "ok: 2 files, 7 tags"])
    check("RtlpAllocateHeap*" not in out, "the later file replaced Heap's entrypoints", out)

    # check: errors and warnings.
    expect(["tags", "check", os.path.join(FIX, "malformed.stacktags")], 1,
           err_has=["malformed.stacktags:4:5: malformed XML: mismatched tag"])
    expect(["tags", "check", sample, "/nonexistent.stacktags"], 1,
           err_has=["/nonexistent.stacktags: cannot open"])
    with tempfile.TemporaryDirectory() as d:
        warn = os.path.join(d, "warn.stacktags")
        with open(warn, "w") as f:
            f.write('<Tag Name="">\n <Tag Name="A" Color="x">\n  <Entrypoint Module="a"/>\n'
                    '  <Note/>\n  <Note/>\n </Tag>\n</Tag>\n')
        _, err = expect(["tags", "check", warn], 0, out_has=["A  [priority 0]"],
                        err_has=["warn.stacktags:2: unknown attribute Color on <Tag>",
                                 "warn.stacktags:4: unknown element <Note>"])
        check(err.count("<Note>") == 1, "an unknown element is warned about once", err)
        bad = os.path.join(d, "bad.stacktags")
        with open(bad, "w") as f:
            f.write('<Tag Name="">\n  <Tag Name="A" Priority="high"/>\n</Tag>\n')
        expect(["tags", "check", bad], 1, err_has=['bad.stacktags:2:3: Priority "high"'])
        # A CW_STACKTAGS_DIR without the platform's file falls through to the next place.
        expect(["tags", "check", "--platform", "linux"], 0, out_has=["Direct brk"],
               env={"CW_STACKTAGS_DIR": d})

    # explain: text.
    out, _ = expect(["tags", "explain", "--platform", "windows", "--stack", HEAP], 0,
                    out_has=["tag: Windows Heap", "decided by frame 6: ntdll!RtlpAllocateHeapInternal",
                             'rule: tag "Windows Heap", priority 10, Module="ntdll.dll" Method="RtlpAllocateHeap*"',
                             ">   6  ntdll!RtlpAllocateHeapInternal"])
    expect(["tags", "explain", "--platform", "windows", "--stack", "app!main;app!f"], 0,
           out_has=["tag: Other", "no frame matches a rule"])

    # explain: JSON, exactly the documented shape.
    j = explain_json("--platform", "windows", "--stack", HEAP)
    check(j == {"tag": "Windows Heap", "frame": 6,
                "rule": {"tag": "Windows Heap", "priority": 10, "module": "ntdll.dll",
                         "method": "RtlpAllocateHeap*"}}, "heap growth JSON", j)
    j = explain_json("--platform", "windows", "--stack", DIRECT)
    check(j["tag"] == "VirtualAlloc" and j["frame"] == 2 and j["rule"]["priority"] == 0, "direct VirtualAlloc", j)
    j = explain_json("--platform", "windows", "--stack", "app!main;app!f")
    check(j == {"tag": "Other", "frame": None, "rule": None}, "Other JSON", j)
    j = explain_json("--platform", "linux", "--stack", GLIBC)
    check(j["tag"] == "C heap (glibc malloc)" and j["frame"] == 3, "glibc malloc -> brk", j)
    j = explain_json("--platform", "linux", "--stack", THREAD)
    check(j["tag"] == "Thread Stack" and j["frame"] == 2, "pthread_create -> mmap", j)
    j = explain_json("--platform", "linux", "--stack", "app!main;ntoskrnl.exe!x")
    check(j["tag"] == "Other", "linux rules do not know Windows frames", j)
    j = explain_json("--platform", "windows", "--stack", "app!main; ntoskrnl.exe!MiAllocateVirtualMemory ")
    check(j["rule"] == {"tag": "VirtualAlloc", "priority": 0, "module": "ntoskrnl.exe", "method": None},
          "module-only rule has method null; frames are trimmed", j)
    j = explain_json("--platform", "windows", "--stack", "app!main;(before trace)")
    check(j == {"tag": "(before trace)", "frame": 1, "rule": None}, "pseudo-frame", j)

    # explain: --rules replaces the defaults; several files load in order.
    j = explain_json("--rules", sample, "--stack", DIRECT)
    check(j["tag"] == "Memory\\VirtualAlloc" and j["rule"]["priority"] == -1, "--rules", j)
    j = explain_json("--rules", sample, "--rules", override, "--stack",
                     "app!mainCRTStartup;ntdll!RtlAllocateHeap")
    check(j["tag"] == "Startup" and j["frame"] == 0, "--rules twice: the later file overrides", j)
    expect(["tags", "explain", "--rules", os.path.join(FIX, "malformed.stacktags"), "--stack", DIRECT], 1,
           err_has=["malformed.stacktags:4:5"])

    # The default lookup: $CW_STACKTAGS_DIR first.
    rc, out, _ = run("tags", "explain", "--json", "--platform", "linux", "--stack", "app!main;libc.so.6!mmap",
                     env={"CW_STACKTAGS_DIR": os.path.join(FIX, "defaults")})
    check(rc == 0 and json.loads(out)["tag"] == "From Env Dir", "CW_STACKTAGS_DIR", out)

    print(f"{checks} checks passed")


if __name__ == "__main__":
    main()
