#!/usr/bin/env python3
"""test_check_layers.py - scripts/check_layers.py catches what it is for.

On the real tree and build it passes. Then, on a copy of service/ and
include/ with one violation planted at a time, it must fail and name the
file: SQL outside the store, an OS header outside platform/, a platform
#ifdef in portable code, a public header of a stage above, another stage's
internal header. And on a fake build whose lower library calls a function
of a higher one (two static libraries made here with cc and ar), it must
name the back edge."""
import os
import shutil
import subprocess
import sys
import tempfile

SOURCE = os.environ.get("CW_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("CW_BUILD", "build")
CHECK = os.path.join(SOURCE, "scripts", "check_layers.py")
failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else f": {detail}"), flush=True)
    if not cond:
        failures.append(what)


def run(build, root=None):
    args = [sys.executable, CHECK, build] + (["--root", root] if root else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def planted(tmp, rel, text, expect):
    root = os.path.join(tmp, "tree")
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(os.path.join(SOURCE, "service"), os.path.join(root, "service"))
    shutil.copytree(os.path.join(SOURCE, "include"), os.path.join(root, "include"))
    with open(os.path.join(root, rel), "a") as f:
        f.write(text)
    r = run(BUILD, root)
    check(r.returncode == 1 and expect in r.stdout and rel in r.stdout, f"planted in {rel}: '{expect}'",
          r.stdout[-600:])


def main():
    r = run(BUILD)
    check(r.returncode == 0 and "check_layers: ok" in r.stdout, "the tree and its build pass", r.stdout[-2000:])
    with tempfile.TemporaryDirectory() as tmp:
        planted(tmp, "service/http/http_json.c", "\nstatic void x(void) { sqlite3_close(0); }\n",
                "calls SQLite outside service/store/")
        planted(tmp, "service/track/batch.c", "\n#include <unistd.h>\n", "is an OS header")
        planted(tmp, "service/stacks/stacks.c", "\n#ifdef _WIN32\n#endif\n", "tests a platform macro")
        planted(tmp, "service/track/agg.c", '\n#include "commitwatch/store.h"\n', "a stage above cw_track")
        planted(tmp, "service/analysis/report.c", '\n#include "store/store_internal.h"\n',
                "another stage's internal header")
        planted(tmp, "include/commitwatch/event.h", "\n#include <pthread.h>\n", "a public header includes")

        # A fake build: lib low calls cw_high_fn, defined by lib high above it.
        fake = os.path.join(tmp, "fake")
        os.makedirs(fake)
        with open(os.path.join(fake, "stages.txt"), "w") as f:
            f.write("cw_low base : \ncw_high track : cw_low\ncommitwatch cli : cw_high\n")
        srcs = {"low": "int cw_high_fn(void);\nint cw_low_fn(void) { return cw_high_fn(); }\n",
                "high": "int cw_low_fn(void);\nint cw_high_fn(void) { return 1; }\nint cw_high_2(void) { return cw_low_fn(); }\n"}
        for name, text in srcs.items():
            c = os.path.join(fake, name + ".c")
            with open(c, "w") as f:
                f.write(text)
            o = os.path.join(fake, name + ".o")
            subprocess.run(["cc", "-c", c, "-o", o], check=True)
            subprocess.run(["ar", "rcs", os.path.join(fake, f"libcw_{name}.a"), o], check=True)
        r = run(fake)
        check(r.returncode == 1 and "cw_low calls cw_high_fn, defined in cw_high" in r.stdout,
              "a call from a lower stage to a higher one is a back edge", r.stdout[-600:])
        check("cw_high calls" not in r.stdout, "a call downwards is not", r.stdout[-600:])
    if failures:
        print("test_check_layers: FAILED: " + "; ".join(failures))
        return 1
    print("test_check_layers: every check held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
