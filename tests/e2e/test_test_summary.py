#!/usr/bin/env python3
"""test_test_summary.py - scripts/test_summary.py, the tiers' last word:
from JUnit files it counts passes, failures and skips (a skip is not a
pass; a test not run for a failed fixture is a failure), quotes each
failed test's telling lines (so a report that shows only the end of the
log still says why), and exits non-zero on any failure or when nothing
ran."""
import os
import subprocess
import sys
import tempfile

SOURCE = os.path.realpath(os.environ.get("CW_SOURCE", "."))
SUMMARY = os.path.join(SOURCE, "scripts", "test_summary.py")

CASES = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="t" tests="4">
<testcase name="t_ok" status="run" time="1.5"><system-out>fine</system-out></testcase>
<testcase name="t_bad" status="fail" time="2.0"><failure message="Failed"/><system-out>noise 1
ok   the unit has PrivateTmp=yes
cwtest.WaitTimeout: timed out after 30 s waiting until the service stores pid 125's commit
noise 2</system-out></testcase>
<testcase name="t_skip" status="notrun" time="0"><skipped message="Disabled"/><system-out>SKIP: missing prerequisite: wine</system-out></testcase>
<testcase name="t_nofix" status="notrun" time="0"><skipped message="Disabled"/><system-out>Failed test dependencies: wine_init</system-out></testcase>
</testsuite>
"""

failures = []


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else f"\n{detail}"), flush=True)
    if not ok:
        failures.append(what)


def summary(folder):
    return subprocess.run([sys.executable, SUMMARY, folder, "--tier", "full", "--seconds", "75"],
                          capture_output=True, text=True, timeout=60)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "asan.xml"), "w") as f:
            f.write(CASES)
        with open(os.path.join(tmp, "stages.tsv"), "w") as f:
            f.write("build\tpassed\t30\nfuzz\tpassed\t20\nmutants\tfailed\t9\n")
        r = summary(tmp)
        out = r.stdout
        last = out.strip().splitlines()[-1] if out.strip() else ""
        check(r.returncode == 1, "a failure makes the summary fail", out + r.stderr)
        check(last == "2 passed, 3 failed, 1 skipped",
              "the last line counts: t_ok and fuzz passed; t_bad, t_nofix, mutants failed; "
              "t_skip skipped; a passed build is not counted", out)
        check("SKIP asan: t_skip: SKIP: missing prerequisite: wine" in out, "a skip says why", out)
        check("FAIL asan: t_nofix" in out, "not run for a failed fixture is a failure", out)
        check("      | cwtest.WaitTimeout: timed out after 30 s" in out and "noise 1" not in out,
              "a failed test's telling line is quoted, its noise is not", out)
        check("full tier time: 1 min 15 s" in out, "the tier's time", out)
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "asan.xml"), "w") as f:
            f.write(CASES.replace('status="fail"', 'status="run"').replace('<failure message="Failed"/>', "")
                    .replace("Failed test dependencies: wine_init", "SKIP: no display"))
        r = summary(tmp)
        check(r.returncode == 0 and r.stdout.strip().endswith("2 passed, 0 failed, 2 skipped"),
              "no failure: exit 0, skips still counted apart", r.stdout + r.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        r = summary(tmp)
        check(r.returncode == 1 and "FAIL: no test ran" in r.stdout, "nothing ran: a failure", r.stdout)
    if failures:
        print("test_test_summary: FAILED: " + "; ".join(failures))
        return 1
    print("test_test_summary: every check held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
