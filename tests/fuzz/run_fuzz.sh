#!/usr/bin/env bash
# Builds the stack-tag loader's libFuzzer target with clang and runs it for
# a bounded time. CI calls this; a crash, leak or invariant failure exits
# nonzero and leaves the input in $BUILD/fuzz-artifacts/.
#
#   tests/fuzz/run_fuzz.sh [SECONDS]      (default 60; needs clang)
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
build=${CW_FUZZ_BUILD:-build-fuzz}
command -v clang >/dev/null || { echo "run_fuzz.sh: clang is needed (apt-get install clang)" >&2; exit 1; }
CC=clang cmake -S . -B "$build" -DCW_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_stacktags
corpus="$build/fuzz-corpus/stacktags"
mkdir -p "$corpus" "$build/fuzz-artifacts"
# New inputs go to the first directory (the build's corpus); the others
# are read-only seeds: a few odd inputs, the default rules, the fixtures.
exec "$build/tests/fuzz/fuzz_stacktags" -max_total_time="$secs" -max_len=16384 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -dict=tests/fuzz/stacktags.dict \
  -artifact_prefix="$build/fuzz-artifacts/" "$corpus" tests/fuzz/seeds service/stacks/rules tests/fixtures/stacktags
