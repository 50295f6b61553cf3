#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time
# (tests/fuzz/targets.sh lists them): the stack-tag loader, the .etl
# reader (whole files), the ETW payload decoders with XPRESS, the PE
# export-table reader (--images DIR), the alert rules file, the leak
# score, the JSONL trace (replay source, tracker, exact analyzer, writer
# round trip), the configuration file, HTTP requests through the real
# server and its handlers, and the journal's batch bytes. Each starts by running its committed seeds
# (regression inputs included). CI calls this; a crash, leak or invariant
# failure exits nonzero and leaves the input in $BUILD/fuzz-artifacts/.
# Then tests/fuzz/signal_check.py: fuzz_http stops when signalled during
# its leak check.
#
#   tests/fuzz/run_fuzz.sh [SECONDS]      (per target, default 60; needs clang)
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
BUILD=${CW_FUZZ_BUILD:-build-fuzz}
source tests/fuzz/targets.sh
fuzz_build
mkdir -p "$BUILD/fuzz-artifacts"
common=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$BUILD/fuzz-artifacts/")
for t in "${FUZZ_TARGETS[@]}"; do
  # New inputs go to the first directory (the build's corpus); the others
  # are read-only seeds.
  corpus="$BUILD/fuzz-corpus/${t#fuzz_}"
  mkdir -p "$corpus"
  fuzz_target_args "$t"
  echo "== $t (${secs} s)"
  "$BUILD/tests/fuzz/$t" "${common[@]}" "$corpus" "${FUZZ_ARGS[@]}"
done
# fuzz_http stops on SIGINT and SIGTERM even in the middle of its leak
# check (which once hung it), twice each.
if [[ " ${FUZZ_TARGETS[*]} " == *" fuzz_http "* ]]; then
  echo "== fuzz_http: signals during its leak check"
  python3 tests/fuzz/signal_check.py "$BUILD/tests/fuzz/fuzz_http" 2
fi
