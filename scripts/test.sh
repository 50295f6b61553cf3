#!/usr/bin/env bash
# The test tiers (docs/TESTING.md). Installs what is missing, builds with
# warnings as errors and runs the tests; every test runs once, and a test
# that fails on its first run fails the tier.
#
#   scripts/test.sh           the fast tier (minutes; before every commit):
#       the build under ASan + UBSan (build-asan/) and in it every unit
#       test, the end-to-end tests (label integration), each fuzz target's
#       committed corpus replayed once (fuzz-replay) and the architecture
#       checks (e2e_test_check_layers); the MinGW-w64 build (build-win/)
#       and its unit tests under Wine.
#   scripts/test.sh --full    the full tier (CI, .ci/run): the fast tier's
#       tests and, in the same ctest runs, the long end-to-end tests (slow),
#       the root-only tests (linux-root) and the Wine end-to-end tests (the
#       service, the MSI, the rundown, the API); then a plain build
#       (build/) for what cannot run under ASan: valgrind memcheck of every
#       unit test, the perf, soak, .deb and systemd tests (plain), the
#       browser tests and the benchmarks' smoke runs; timed fuzzing with
#       libFuzzer (tests/fuzz/run_fuzz.sh, clang, build-fuzz/); and the
#       mutation check (scripts/mutants.sh).
#
# Output: ctest's lines per test (with its time; a failed test's output
# right after its line), then scripts/test_summary.py over every stage:
# the failures, the skips (never counted as passes), the slowest ten and
# the tier's time; its last line is "N passed, N failed, N skipped".
# Exit status 0 only when nothing failed.
#
# Environment: CW_TEST_JOBS (ctest's parallel tests, default nproc),
# CW_WIN_DEPS (the Windows libraries; default: a cache shared by clones,
# scripts/deps.sh --windows).
set -uo pipefail
cd "$(dirname "$0")/.."

full=0
case "${1:-}" in
  --full) full=1 ;;
  "") ;;
  -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: scripts/test.sh [--full]" >&2; exit 2 ;;
esac
tier=$([[ $full == 1 ]] && echo full || echo fast)
JOBS=${CW_TEST_JOBS:-$(nproc)}
t0=$(date +%s)
results=$PWD/build-test-results
rm -rf "$results" && mkdir -p "$results"
# The tests' random case counts by tier (tests/e2e/cwtest.py, tier_count;
# the unit tests' random traces).
export CW_TIER=$tier
((full)) || export CW_RANDOM_TRACES=${CW_RANDOM_TRACES:-500}
# The end-to-end tests' checks (tests/e2e/cwservice.py, Checks) print only
# what failed, so a failed test's output begins with its failures.
export CW_CHECKS_QUIET=1

step() { echo "== test.sh ($tier): $* ($(($(date +%s) - t0)) s)"; }
# A stage that is not a ctest run (a build, the fuzzing, the mutants):
# its outcome and time are counted by the summary like a test's.
stage() {
  local name=$1 s=$(date +%s) rc=0
  shift
  step "$name"
  "$@" || rc=$?
  printf '%s\t%s\t%s\n' "$name" "$([[ $rc == 0 ]] && echo passed || echo failed)" \
    "$(($(date +%s) - s))" >>"$results/stages.tsv"
  return "$rc"
}
summary() {
  python3 scripts/test_summary.py "$results" --tier "$tier" --seconds "$(($(date +%s) - t0))"
  exit $?
}

stage deps scripts/deps.sh --test || summary
# The root-only tests trace the machine through its tracefs, which a fresh
# machine may not have mounted yet (the service mounts it when it starts
# tracing, but test_degraded_perf_root points the service elsewhere first
# and needs the machine's to be there). A mount that fails is a failed
# stage; the tests that need tracefs then say what is missing.
tracefs() {
  [[ -e /sys/kernel/tracing/events || -e /sys/kernel/debug/tracing/events ]] ||
    mount -t tracefs nodev /sys/kernel/tracing
}
if ((full)) && [[ $EUID == 0 ]]; then stage tracefs tracefs || true; fi
stage deps-windows scripts/deps.sh --windows || summary

# ---- the sanitizer build: the unit, end-to-end and fuzz-replay tests ----
asan_build() {
  cmake -S . -B build-asan -DCW_WERROR=ON -DCW_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null &&
    cmake --build build-asan -j"$JOBS"
}
stage build-asan asan_build || summary
# A sanitizer report must fail the tier even from a child whose exit status
# a test does not check (a command expected to fail, a service killed on
# purpose): ASan and LSan reports are also written to files (log_path);
# UBSan's (GCC's libubsan ignores log_path; -fno-sanitize-recover makes it
# abort) are looked for in every test's output (LastTest.log) and in the
# services' logs.
asan_ctest() {
  local labels='unit|integration|fuzz-replay' san_logs=$PWD/build-asan/sanitizer-logs rc=0
  ((full)) && labels+='|slow|linux-root'
  rm -rf "$san_logs" build-asan/e2e-* && mkdir -p "$san_logs"
  (cd build-asan &&
    ASAN_OPTIONS="detect_leaks=1:log_path=$san_logs/asan" UBSAN_OPTIONS="print_stacktrace=1" \
      ctest -L "$labels" -LE plain --output-on-failure --timeout 900 -j"$JOBS" \
      --output-junit "$results/asan.xml") || rc=$?
  local found
  found=$(ls "$san_logs"; grep -rlsE "runtime error:|ERROR: (Address|Leak)Sanitizer" \
    build-asan/Testing/Temporary/LastTest.log build-asan/e2e-* || true)
  if [[ -n $found ]]; then
    echo "test.sh: FAIL: sanitizer reports under ASan + UBSan:" >&2
    for f in $found; do
      [[ -f $f ]] || f=$san_logs/$f
      echo "== $f" >&2
      grep -m 40 -A 30 -E "runtime error:|ERROR: (Address|Leak)Sanitizer" "$f" | head -n 60 >&2 || true
    done
    printf 'sanitizer-reports\tfailed\t0\n' >>"$results/stages.tsv"
  fi
  return "$rc"
}
# ---- the Windows build under Wine, beside the sanitizer build's tests ----
# Fast: its unit tests and commitwatch.exe's own checks; full: also the
# end-to-end tests (e2e_test_win_*), which compare answers with the
# sanitizer build's commitwatch. It runs while the ASan tests run (they
# wait on services and sockets much of the time, and use about one of the
# two CPUs), its output kept in build-test-results/wine.log and printed
# after theirs.
win_stage() {
  local args=(--output-junit "$results/wine.xml") s=$(date +%s)
  ((full)) || args+=(-E '^e2e_')
  CW_LINUX_BUILD=build-asan scripts/test_windows.sh "${args[@]}" >"$results/wine.log" 2>&1 ||
    [[ -f $results/wine.xml ]] || printf 'windows-build\tfailed\t%s\n' "$(($(date +%s) - s))" >>"$results/stages.tsv"
}
step "scripts/test_windows.sh, in the background (build-test-results/wine.log)"
win_stage &
win_pid=$!
step "ctest build-asan"
asan_ctest
wait "$win_pid"
step "scripts/test_windows.sh: its output"
cat "$results/wine.log"

((full)) || summary

# ---- full tier: the plain build ----
plain_build() {
  cmake -S . -B build -DCW_WERROR=ON -DCW_VALGRIND=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
    cmake --build build -j"$JOBS"
}
if stage build plain_build; then
  step "ctest build (valgrind, plain, browser, bench)"
  (cd build && ctest -L 'valgrind|plain|browser|bench' --output-on-failure --timeout 1800 \
    -j"$JOBS" --output-junit "$results/plain.xml")
fi
# ---- full tier: exploration and mutants ----
stage fuzz-explore tests/fuzz/run_fuzz.sh "${CW_FUZZ_SECONDS:-20}"
stage mutants scripts/mutants.sh
summary
