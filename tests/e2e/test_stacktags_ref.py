#!/usr/bin/env python3
"""test_stacktags_ref.py - stacktags_ref.py (the tests' own reading of the
.stacktags files) agrees with `commitwatch tags explain` on every stack
the e2e tests tag through it, and on frames made from every rule of the
default and fixture files, so the reference the other tests compare the
service with is a second implementation that agrees where it should.

For each rule set (the Windows and Linux defaults, wpa_sample.stacktags,
wpa_sample + override): the stacks of the MemoryTestApp fixture,
refmodel.random_trace's, crashkill's and test_metrics'; per rule, a frame
matching it (wildcards filled in) in one of the variants the rules allow
(upper-case module, extension dropped or added, a full path, a +0x offset,
an unsymbolized frame) or must refuse (function case changed); and pairs
and triples of those frames in both orders (priority, then the frame
nearest the allocating call). Tag, deciding frame and rule must all agree.

Then the other way: the comparison can fail. The binary given a rule set
with one entrypoint moved to the wrong tag, or one priority changed,
disagrees with the reference on the stacks that rule decides.
"""

import json
import os
import random
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(__file__))
from cwservice import BIN, FIXTURES, MTA, Checks  # noqa: E402
import stacktags_ref  # noqa: E402

t = Checks()
rnd = random.Random(30)
WPA = os.path.join(FIXTURES, "stacktags", "wpa_sample.stacktags")
OVERRIDE = os.path.join(FIXTURES, "stacktags", "override.stacktags")


def explain(platform, rules, frames):
    args = [BIN, "tags", "explain", "--json", "--platform", platform, "--stack", ";".join(frames)]
    for r in rules:
        args += ["--rules", r]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"tags explain {frames}: exit {p.returncode}: {p.stderr}")
    return json.loads(p.stdout)


def reference(ref, frames):
    """The reference's answer in explain's JSON shape."""
    tag, i, rule = ref.explain(tuple(frames))
    return {"tag": tag, "frame": i,
            "rule": None if rule is None else {"tag": "\\".join(rule.path),
                                               "priority": ref.priority(rule.path),
                                               "module": rule.module_pattern,
                                               "method": rule.method_pattern or None}}


def fill(pattern, filler):
    return pattern.replace("*", filler)


def rule_frames(ref):
    """Per rule, a frame that should match it (a variant the rules allow)
    and, for rules with a literal part in the method, one that should not."""
    out = []
    for k, r in enumerate(ref.rules):
        mod = fill(r.module_pattern, "zq")
        fn = fill(r.method_pattern, "Zq") if r.method_pattern else "AnyFunction"
        v = k % 6
        if v == 1:
            mod = mod.upper()
        elif v == 2:
            mod = mod[:-4] if mod.lower().endswith(stacktags_ref.WIN_EXTS) else mod
        elif v == 3:
            mod = "C:\\Windows\\System32\\" + mod
        elif v == 4:
            fn += "+0x1f"
        elif v == 5 and not r.method_pattern:
            fn = "0x7ff81234"
        out.append(f"{mod}!{fn}")
        if (k % 2 == 0 and r.method_pattern and r.method_pattern.strip("*")
                and r.method_pattern.swapcase() != r.method_pattern):
            out.append(f"{mod}!{fill(r.method_pattern.swapcase(), 'Zq')}")
    return out


def fixture_stacks():
    st = set()
    for line in open(MTA):
        e = json.loads(line)
        if "stack" in e:
            st.add(tuple(e["stack"]))
    # refmodel.random_trace's default stacks, crashkill's, test_metrics'.
    st |= {("app.exe!main", f"app.exe!f{i}", "KernelBase.dll!VirtualAlloc") for i in range(2)}
    st.add(("app.exe!main", "ntdll.dll!RtlpAllocateHeapInternal", "ntdll.dll!NtAllocateVirtualMemory"))
    st.add(("app.exe!main", "app.exe!work0", "KernelBase.dll!VirtualAlloc"))
    st.add(("app0.dll!f", "KernelBase.dll!VirtualAlloc"))
    st |= {("(before trace)",), ("x.exe!main", "(fork)"), ("(exec image)",), ()}
    # Frames without '!' (a module with an empty function), and '*' on both.
    st |= {("ntoskrnl.exe",), ("x.exe!main", "NTOSKRNL"), ("gdi32",), ("app!v8::internal::Heap::X",),
           ("chrome.dll!v8::internal::NewSpace::Grow+0x10",), ("C:/apps/coreclr.dll!WKS::gc_heap",)}
    return st


def corpus(ref, platform):
    frames = rule_frames(ref)
    stacks = {(f,) for f in frames}
    stacks |= {("caller.exe!main", f) for f in frames[::8]}
    for _ in range(12):
        a, b = rnd.sample(frames, 2)
        stacks |= {(a, b), (b, a)}
    for _ in range(5):
        stacks.add(tuple(rnd.sample(frames, 3)))
    if platform == "windows":
        stacks |= fixture_stacks()
    else:
        stacks |= {("bash!main", "libc.so.6!malloc"), ("python3!main", "libc.so.6!mmap64"),
                   ("a.out!main", "ld-linux-x86-64.so.2!_dl_map_object"), ("(before trace)",)}
    return sorted(stacks)


SETS = [("windows", "windows defaults", []), ("linux", "linux defaults", []),
        ("windows", "wpa_sample", [WPA]), ("windows", "wpa_sample + override", [WPA, OVERRIDE])]
for platform, name, rules in SETS:
    ref = stacktags_ref.Rules(rules or [stacktags_ref.default_rules(platform)])
    stacks = corpus(ref, platform)
    with ThreadPoolExecutor(2) as ex:
        got = list(ex.map(lambda s: explain(platform, rules, s), stacks))
    differ = [(s, g, reference(ref, s)) for s, g in zip(stacks, got) if g != reference(ref, s)]
    t.check(f"{name}: the reference agrees with tags explain on all {len(stacks)} stacks "
            "(tag, deciding frame, rule)", not differ, differ[:3])
    tags = {reference(ref, s)["tag"] for s in stacks}
    every = {"\\".join(r.path) for r in ref.rules}
    t.check(f"{name}: the corpus reaches every tag that has rules ({len(every)})", every <= tags,
            sorted(every - tags))
    t.check(f"{name}: most stacks match a rule",
            sum(reference(ref, s)["tag"] != "Other" for s in stacks) > len(stacks) // 2)

# ---- the comparison can fail: the binary on a wrong rule set, the
# reference on the right one.
ref = stacktags_ref.Rules([stacktags_ref.default_rules("windows")])
src = open(stacktags_ref.default_rules("windows")).read()
moved = ('<Entrypoint Module="ntdll.dll" Method="RtlCreateUserStack*"/>',
         "ntdll.dll!RtlCreateUserStack")
with tempfile.TemporaryDirectory() as d:
    # The Thread Stack rule moved into Windows Heap: a wrong rule decides.
    wrong = os.path.join(d, "wrong-tag.stacktags")
    body = src.replace("    " + moved[0] + "\n", "")
    body = body.replace('<Tag Name="Windows Heap" Priority="10">',
                        '<Tag Name="Windows Heap" Priority="10">\n    ' + moved[0], 1)
    t.check("the mutation moved the rule", body != src and body.count(moved[0]) == 1)
    open(wrong, "w").write(body)
    s = ("app.exe!main", moved[1], "ntdll.dll!NtAllocateVirtualMemory")
    t.check("a rule under the wrong tag: tags explain and the reference disagree",
            explain("windows", [wrong], s) != reference(ref, s),
            (explain("windows", [wrong], s), reference(ref, s)))
    # Innermost/outermost: VirtualAlloc and its heap caller at equal
    # priority; the reference picks the last frame, so a binary picking
    # the first would be seen. Emulated with priorities swapped.
    prio = os.path.join(d, "wrong-priority.stacktags")
    open(prio, "w").write(src.replace('<Tag Name="Windows Heap" Priority="10">',
                                      '<Tag Name="Windows Heap" Priority="-1">', 1))
    s = ("app.exe!main", "ntdll.dll!RtlAllocateHeap", "ntdll.dll!NtAllocateVirtualMemory")
    t.check("a wrong priority: tags explain and the reference disagree",
            explain("windows", [prio], s)["tag"] != reference(ref, s)["tag"],
            (explain("windows", [prio], s), reference(ref, s)))
t.done()
