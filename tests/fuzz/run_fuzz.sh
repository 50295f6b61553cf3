#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time:
# the stack-tag loader, the .etl reader (whole files), the ETW payload
# decoders with XPRESS, the PE export-table reader (--images DIR), the alert
# rules file and the leak score. CI calls this; a crash, leak or invariant failure
# exits nonzero and leaves the input in $BUILD/fuzz-artifacts/.
#
#   tests/fuzz/run_fuzz.sh [SECONDS]      (per target, default 60; needs clang)
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
build=${CW_FUZZ_BUILD:-build-fuzz}
command -v clang >/dev/null || { echo "run_fuzz.sh: clang is needed (apt-get install clang)" >&2; exit 1; }
CC=clang cmake -S . -B "$build" -DCW_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"${CW_JOBS:-$(nproc)}" --target fuzz_stacktags fuzz_etl_reader fuzz_etl_decode fuzz_pe fuzz_etl_seeds \
  fuzz_alert_rules fuzz_leak_score
# The test DLL seeds fuzz_pe where MinGW is installed.
cmake --build "$build" --target cw_pe_fixture >/dev/null 2>&1 || true
mkdir -p "$build/fuzz-artifacts"
common=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$build/fuzz-artifacts/")
# New inputs go to the first directory (the build's corpus); the others
# are read-only seeds.
corpus="$build/fuzz-corpus/stacktags"
mkdir -p "$corpus"
"$build/tests/fuzz/fuzz_stacktags" "${common[@]}" -max_len=16384 -dict=tests/fuzz/stacktags.dict \
  "$corpus" tests/fuzz/seeds service/stacks/rules tests/fixtures/stacktags
corpus="$build/fuzz-corpus/etl-reader"
mkdir -p "$corpus"
"$build/tests/fuzz/fuzz_etl_reader" "${common[@]}" -max_len=65536 "$corpus" "$build/tests/fuzz/etl-seeds"
corpus="$build/fuzz-corpus/etl-decode"
mkdir -p "$corpus"
"$build/tests/fuzz/fuzz_etl_decode" "${common[@]}" -max_len=4096 "$corpus"
corpus="$build/fuzz-corpus/pe"
mkdir -p "$corpus"
pe_seeds=()
[ -d "$build/tests/etlgen/pe" ] && pe_seeds=("$build/tests/etlgen/pe")
"$build/tests/fuzz/fuzz_pe" "${common[@]}" -max_len=16384 "$corpus" "${pe_seeds[@]}"
corpus="$build/fuzz-corpus/alert-rules"
mkdir -p "$corpus"
"$build/tests/fuzz/fuzz_alert_rules" "${common[@]}" -max_len=8192 "$corpus" tests/fuzz/seeds-alerts
corpus="$build/fuzz-corpus/leak-score"
mkdir -p "$corpus"
"$build/tests/fuzz/fuzz_leak_score" "${common[@]}" -max_len=8208 "$corpus"
