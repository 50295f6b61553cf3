#!/usr/bin/env python3
"""check_layers.py - the architecture's rules, checked on the tree and a build.

    scripts/check_layers.py BUILD_DIR [--root TREE]

Reads the stage graph CMake wrote (BUILD_DIR/stages.txt: "lib dirs... :
deps...") and fails (exit 1, one line per violation) when:

  1. a file outside service/store/ calls sqlite3_* or includes sqlite3.h
     (the store owns every SQL statement);
  2. a file outside service/platform/ and the OS event sources
     (service/sources/perf, service/sources/heap, service/sources/etw) includes a header that is
     neither standard C nor the library its stage is allowed (expat in
     stacks, cJSON in analysis/http/app/cli, SQLite in store, civetweb in
     http), or tests _WIN32 / __linux__ / __APPLE__ / __unix__;
  3. a stage's library has an undefined cw_ symbol defined by a stage that
     is not below it (nm of the static libraries): a back edge;
  4. a file includes a public header whose functions live in a stage that
     is not its own or below it, or another stage's internal header.

--root checks another tree than the one this script is in (its test,
tests/e2e/test_check_layers.py, plants violations in a copy).
Standard library only; runs wherever the build ran (nm from binutils).
"""

import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
if "--root" in sys.argv:
    i = sys.argv.index("--root")
    ROOT = os.path.abspath(sys.argv[i + 1])
    del sys.argv[i:i + 2]
SERVICE = os.path.join(ROOT, "service")
INCLUDE = os.path.join(ROOT, "include", "commitwatch")

STD_HEADERS = {
    "assert.h", "complex.h", "ctype.h", "errno.h", "fenv.h", "float.h", "inttypes.h",
    "iso646.h", "limits.h", "locale.h", "math.h", "setjmp.h", "stdalign.h", "stdarg.h",
    "stdatomic.h", "stdbool.h", "stddef.h", "stdint.h", "stdio.h", "stdlib.h",
    "stdnoreturn.h", "string.h", "tgmath.h", "time.h", "uchar.h", "wchar.h", "wctype.h",
}
# Third-party headers, and the stages (folders) allowed to use them.
LIB_HEADERS = {
    "expat.h": {"stacks"},
    "cjson/cJSON.h": {"analysis", "alerts", "notify", "http", "app", "cli"},
    "sqlite3.h": {"store"},
    "civetweb.h": {"http", "notify"},
    "zlib.h": {"analysis", "store"},  # the pprof export's gzip; the journal's CRC-32
}
OS_FOLDERS = ("platform/", "sources/perf/", "sources/heap/", "sources/etw/")
INTARGET = "platform/posix/intarget/"
INTARGET_USERS = ("sources/heap/preload/",)
PLATFORM_MACROS = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b.*\b(_WIN32|_WIN64|__linux__|__APPLE__|__unix__)\b")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def rel(path):
    return os.path.relpath(path, ROOT)


def c_files(top, exts=(".c", ".h")):
    for d, _, files in os.walk(top):
        for f in sorted(files):
            if f.endswith(exts):
                yield os.path.join(d, f)


def read_stages(build):
    """{lib: (dirs, deps)} and {dir: lib} from stages.txt."""
    stages, dir_lib = {}, {}
    with open(os.path.join(build, "stages.txt")) as f:
        for line in f:
            if ":" not in line:
                continue
            left, right = line.split(":", 1)
            words = left.split()
            lib, dirs = words[0], words[1:]
            stages[lib] = (dirs, right.split())
            for d in dirs:
                dir_lib[d] = lib
    return stages, dir_lib


def closure(stages):
    """{lib: set of libs it may use, itself included}."""
    memo = {}

    def below(lib):
        if lib not in memo:
            memo[lib] = {lib}
            for dep in stages.get(lib, ((), ()))[1]:
                memo[lib] |= below(dep)
        return memo[lib]

    return {lib: below(lib) for lib in stages}


def stage_of(path, dir_lib):
    """The library of a service/ file: the longest matching stage folder."""
    r = os.path.relpath(path, SERVICE).replace(os.sep, "/")
    best = None
    for d, lib in dir_lib.items():
        if r.startswith(d + "/") and (best is None or len(d) > len(best[0])):
            best = (d, lib)
    # Platform folders other than the one built still belong to the platform.
    if best is None and r.startswith("platform/"):
        return "cw_platform"
    return best[1] if best else None


def nm_symbols(lib_path):
    """(defined, undefined) global cw_ symbols of a static library."""
    out = subprocess.run(["nm", "-g", "--defined-only", lib_path], capture_output=True, text=True, check=True).stdout
    defined = {l.split()[-1] for l in out.splitlines() if len(l.split()) == 3 and l.split()[-1].startswith("cw_")}
    out = subprocess.run(["nm", "-g", "--undefined-only", lib_path], capture_output=True, text=True, check=True).stdout
    undefined = {l.split()[-1] for l in out.splitlines() if l.split() and l.split()[-1].startswith("cw_")}
    return defined, undefined


def find_lib(build, lib):
    for d, _, files in os.walk(build):
        if "lib%s.a" % lib in files:
            return os.path.join(d, "lib%s.a" % lib)
    return None


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    build = sys.argv[1]
    stages, dir_lib = read_stages(build)
    allowed = closure(stages)
    allowed["commitwatch"] = allowed.get("commitwatch", set()) | {"commitwatch"}
    errors = []

    # 3. Symbols: who defines what, and who needs what.
    owner, needs = {}, {}
    for lib in stages:
        if lib == "commitwatch":
            continue
        path = find_lib(build, lib)
        if not path:
            errors.append("%s: lib%s.a not found in %s (build first)" % (lib, lib, build))
            continue
        defined, undefined = nm_symbols(path)
        for s in defined:
            owner[s] = lib
        needs[lib] = undefined - defined
    for lib, syms in sorted(needs.items()):
        for s in sorted(syms):
            o = owner.get(s)
            if o and o not in allowed[lib]:
                errors.append("%s calls %s, defined in %s, a stage above it (or beside it)" % (lib, s, o))

    # Public headers belong to the stage that defines their functions.
    header_stage = {}
    for h in c_files(INCLUDE, (".h",)):
        text = open(h, encoding="utf-8").read()
        libs = {owner[n] for n in re.findall(r"\b(cw_[a-z0-9_]+)\s*\(", text) if n in owner}
        name = "commitwatch/" + os.path.basename(h)
        if libs:
            # The lowest stage that defines one of them owns the header
            # (a header may declare callbacks implemented higher up).
            header_stage[name] = min(libs, key=lambda l: len(allowed[l]))

    for path in c_files(SERVICE):
        r = rel(path).replace(os.sep, "/")
        sub = os.path.relpath(path, SERVICE).replace(os.sep, "/")
        folder = sub.split("/")[0]
        lib = stage_of(path, dir_lib) or ("commitwatch" if folder == "cli" else None)
        os_code = sub.startswith(OS_FOLDERS)
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        for n, line in enumerate(lines, 1):
            where = "%s:%d" % (r, n)
            if folder != "store" and re.search(r"\bsqlite3_[a-z_0-9]+\s*\(", line):
                errors.append("%s: calls SQLite outside service/store/ (add a query to the store)" % where)
            m = INCLUDE_RE.match(line)
            if m:
                kind, inc = m.groups()
                if kind == "<":
                    if inc in LIB_HEADERS:
                        if folder not in LIB_HEADERS[inc] and not os_code:
                            errors.append("%s: <%s> is not for service/%s/" % (where, inc, folder))
                    elif inc not in STD_HEADERS and not os_code:
                        errors.append("%s: <%s> is an OS header: it belongs in service/platform/" % (where, inc))
                else:
                    if inc.startswith("commitwatch/"):
                        hs = header_stage.get(inc)
                        if hs and lib and hs not in allowed.get(lib, {lib}):
                            errors.append("%s: includes %s of %s, a stage above %s" % (where, inc, hs, lib))
                    else:
                        top = inc.split("/")[0]
                        # platform/posix/intarget/ is no stage's: code built into a
                        # library that runs inside a traced process (the heap
                        # interposer, under sources/heap/preload/) includes it.
                        in_target = inc.startswith(INTARGET) and sub.startswith(INTARGET_USERS)
                        if top != folder and not (folder == "platform" and top == "platform") and \
                                not in_target and not inc.startswith(sub.rsplit("/", 1)[0] + "/"):
                            errors.append("%s: includes %s, another stage's internal header" % (where, inc))
            if not os_code and PLATFORM_MACROS.match(line):
                errors.append("%s: tests a platform macro: platform code belongs in service/platform/" % where)

    for h in c_files(INCLUDE, (".h",)):
        with open(h, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if m and m.group(1) == "<" and m.group(2) not in STD_HEADERS:
                    errors.append("%s:%d: a public header includes <%s>" % (rel(h), n, m.group(2)))
                if PLATFORM_MACROS.match(line):
                    errors.append("%s:%d: a public header tests a platform macro" % (rel(h), n))

    for e in errors:
        print("check_layers: " + e)
    if errors:
        print("check_layers: %d violation(s)" % len(errors))
        return 1
    print("check_layers: ok (%d stages, %d symbols, %d public headers)" % (len(stages), len(owner), len(header_stage)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
