#!/usr/bin/env python3
"""test_summary.py - the closing report of scripts/test.sh over every stage
of a tier: the ctest runs' JUnit files (asan.xml, wine.xml, plain.xml) and
the stages that are not ctest runs (stages.tsv: name, passed|failed,
seconds; installs and builds count only when they fail).

    scripts/test_summary.py RESULTS_DIR [--tier fast|full] [--seconds N]

Prints, failures first: every failed test or stage, every skipped test
with its reason (a skip is never a pass), the ten slowest tests, the
counts per stage and the tier's time; the last line is the plain closing
line "N passed, N failed, N skipped". Exit status 1 when anything failed,
or when no test ran at all (a tier that ran nothing proved nothing)."""

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

STAGES = ("asan", "wine", "plain")
SETUP = ("deps", "build", "windows-build")


TELLING = re.compile(r"FAIL|Fail|ERROR|[Ee]rror:|[Aa]ssert|Traceback|Timeout|timed out|"
                     r"Sanitizer|Unhandled|Exception")


def fail_lines(out, n=12):
    """The last n lines of a failed test's output that say why (a FAIL,
    an error, an assertion, a traceback, a sanitizer report), else its
    last n lines: the summary is the end of the log, the part a CI report
    shows when it shows only the end."""
    lines = [ln.rstrip() for ln in out.splitlines() if ln.strip()]
    telling = [ln for ln in lines if TELLING.search(ln)]
    return [ln[:300] for ln in (telling or lines)[-n:]]


def junit_cases(path):
    """[(name, status, seconds, message, why)] of a ctest --output-junit
    file; status is passed, failed or skipped; why is a failed test's
    telling output lines (fail_lines)."""
    cases = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        status = tc.get("status", "run")
        if tc.find("failure") is not None or tc.find("error") is not None:
            st = "failed"
        elif tc.find("skipped") is not None or status in ("notrun", "disabled"):
            st = "skipped"
        else:
            st = "passed"
        msg = ""
        for child in ("failure", "skipped", "error"):
            el = tc.find(child)
            if el is not None:
                msg = el.get("message") or (el.text or "")
        # ctest's JUnit keeps a skipped test's output in system-out: the
        # test's own SKIP line says why.
        out = tc.findtext("system-out") or ""
        if st == "skipped":
            why = [ln for ln in out.splitlines() if "SKIP" in ln]
            msg = why[0].strip() if why else msg
            # Not run because a fixture it needs failed: a failure (the
            # fixture's own is listed too), not a skip.
            if "dependenc" in msg.lower() or "dependenc" in out.lower():
                st = "failed"
        why = fail_lines(out) if st == "failed" else []
        cases.append((tc.get("name"), st, float(tc.get("time") or 0), msg.strip(), why))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--tier", default="fast")
    ap.add_argument("--seconds", type=int, default=None)
    a = ap.parse_args()

    rows = []  # (stage, name, status, seconds, message)
    for stage in STAGES:
        path = os.path.join(a.results, stage + ".xml")
        if os.path.exists(path):
            rows += [(stage, *c) for c in junit_cases(path)]
    tsv = os.path.join(a.results, "stages.tsv")
    if os.path.exists(tsv):
        with open(tsv) as f:
            for ln in f:
                name, status, secs = ln.rstrip("\n").split("\t")
                # Installing and building are no tests: counted only
                # when they fail (nothing after them could run).
                if status == "passed" and name.startswith(SETUP):
                    continue
                rows.append(("stage", name, status, float(secs), "", []))

    failed = [r for r in rows if r[2] == "failed"]
    skipped = [r for r in rows if r[2] == "skipped"]
    passed = [r for r in rows if r[2] == "passed"]
    tests = [r for r in rows if r[0] != "stage"]

    print(f"\n== test summary ({a.tier} tier)")
    if failed:
        print(f"FAILED ({len(failed)}):")
        for stage, name, _, secs, msg, why in failed:
            print(f"  FAIL {stage}: {name} ({secs:.1f} s){': ' + msg[:200] if msg else ''}")
            for ln in why:
                print(f"      | {ln}")
    if skipped:
        print(f"SKIPPED ({len(skipped)}; a skip is not a pass):")
        for stage, name, _, _, msg, _ in skipped:
            print(f"  SKIP {stage}: {name}{': ' + msg[:200] if msg else ''}")
    print("slowest tests:")
    for stage, name, _, secs, _, _ in sorted(tests, key=lambda r: -r[3])[:10]:
        print(f"  {secs:7.1f} s  {stage}: {name}")
    for stage in STAGES + ("stage",):
        mine = [r for r in rows if r[0] == stage]
        if mine:
            n = {s: sum(1 for r in mine if r[2] == s) for s in ("passed", "failed", "skipped")}
            label = "other stages" if stage == "stage" else f"ctest {stage}"
            print(f"  {label}: {n['passed']} passed, {n['failed']} failed, {n['skipped']} skipped")
    if a.seconds is not None:
        print(f"{a.tier} tier time: {a.seconds // 60} min {a.seconds % 60} s")
    if not tests:
        print("FAIL: no test ran")
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 1 if failed or not tests else 0


if __name__ == "__main__":
    sys.exit(main())
