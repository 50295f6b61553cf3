#!/usr/bin/env bash
# First paint of the flame graph and of the memory map for a process with
# 100,000 live ranges (issue 14's budget: 1 s), measured by the browser
# tests' drivers in Debian's chromium with the budget set to 1000 ms (and
# the flame graph's whole click -> paint, with the service's answer, which
# the test only prints: under ASan and load that answer takes 10 s and more).
# Usage: bench/first_paint.sh [BUILD]   (default: build; run after a build)
# Prints the drivers' timing lines and each test's verdict; the machine's
# load average first, since these are wall times.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
cd "$BUILD"
CW_FIRST_PAINT_MS=1000 CW_FIRST_PAINT_TOTAL_MS=1000 ctest -R 'e2e_test_(flame|map)_browser$' -V --timeout 900 2>&1 |
  grep -E 'first paint|tests passed|Passed|Failed' | sed -E 's/^[0-9]+: //'
