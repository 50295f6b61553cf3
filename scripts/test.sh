#!/usr/bin/env bash
# Installs what is missing, builds commitwatch with warnings as errors and
# runs the unit and integration (end-to-end) tests under AddressSanitizer +
# UndefinedBehaviorSanitizer (any sanitizer report fails), runs each
# libFuzzer target of tests/fuzz/targets.sh for 40 s, the unit tests under
# valgrind memcheck,
# checks the architecture's rules (scripts/check_layers.py: SQL only in the
# store, OS code only in platform/ and the OS sources, no call to a stage
# above; scripts/check_mingw.sh: the portable code compiles for Windows),
# builds and tests the Windows build under Wine (scripts/test_windows.sh),
# then runs every Linux test with ctest (its summary is the last thing
# printed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
JOBS=$(nproc)
# The end-to-end tests' checks (tests/e2e/cwservice.py, Checks) print only
# what failed, so a failed test's output begins with its failures.
export CW_CHECKS_QUIET=1
cmake -S . -B build-asan -DCW_WERROR=ON -DCW_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$JOBS"
# The unit tests and the end-to-end tests (label integration: they run
# this build's commitwatch, CW_BIN; and the full-disk test, as root)
# under ASan + UBSan (not the perf, soak and .deb tests, nor the unit under
# systemd, which traces with perf under a seccomp filter without ptrace,
# which LeakSanitizer uses: they run in the plain build below). A report must fail
# CI even from a child whose exit status a test does not check (a command
# expected to fail, a service killed on purpose): ASan and LSan reports
# are also written to files (log_path), and UBSan's (GCC's libubsan
# ignores log_path; -fno-sanitize-recover makes it abort) are looked for
# in every test's output (LastTest.log) and the services' logs.
san_logs=$PWD/build-asan/sanitizer-logs
rm -rf "$san_logs" build-asan/e2e-* && mkdir -p "$san_logs"
rc=0
(cd build-asan &&
 ASAN_OPTIONS="detect_leaks=1:log_path=$san_logs/asan" UBSAN_OPTIONS="print_stacktrace=1" \
 ctest -L 'unit|integration|linux-root' -E 'perf_root|soak_root|deb_root|systemd_root' \
       --output-on-failure \
       --timeout 900 -j"$JOBS") || rc=$?
found=$(ls "$san_logs"; grep -rlsE "runtime error:|ERROR: (Address|Leak)Sanitizer" \
        build-asan/Testing/Temporary/LastTest.log build-asan/e2e-* || true)
if [[ -n $found ]]; then
  echo "test.sh: sanitizer reports under ASan + UBSan:" >&2
  for f in $found; do
    [[ -f $f ]] || f=$san_logs/$f
    echo "== $f" >&2
    grep -m 40 -A 30 -E "runtime error:|ERROR: (Address|Leak)Sanitizer" "$f" | head -n 60 >&2 || true
  done
  rc=1
fi
((rc == 0)) || exit "$rc"
# The libFuzzer targets for a bounded time each (clang): 40 s each for the
# ten targets of tests/fuzz/targets.sh, after their committed seeds.
tests/fuzz/run_fuzz.sh 40
cmake -S . -B build -DCW_WERROR=ON -DCW_VALGRIND=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$JOBS"
# Every unit test under valgrind memcheck (label valgrind; the random
# tests with CW_RANDOM_TRACES=100), on this build without sanitizers.
(cd build && ctest -L valgrind --output-on-failure --timeout 1800 -j"$JOBS")
python3 scripts/check_layers.py build
scripts/check_mingw.sh
# The Windows build, cross-compiled with MinGW-w64: its unit tests and the
# Wine end-to-end tests (service, MSI, rundown, API against this Linux
# build) under Wine. Before the Linux ctest, whose summary CI reads.
CW_LINUX_BUILD=build scripts/test_windows.sh
cd build && ctest -LE valgrind --output-on-failure --timeout 900
