# targets.sh - the libFuzzer targets and how each one runs, for
# tests/fuzz/run_fuzz.sh (CI, bounded) and bench/fuzz_campaign.sh (a long
# campaign). Sourced from the source tree's root with BUILD set.
#
#   FUZZ_TARGETS               every target, in the order CI runs them
#   fuzz_target_args NAME      sets FUZZ_ARGS: -max_len, -dict and the
#                              read-only seed folders (after the corpus)
FUZZ_TARGETS=(fuzz_stacktags fuzz_etl_reader fuzz_etl_decode fuzz_pe fuzz_alert_rules
              fuzz_leak_score fuzz_trace fuzz_config fuzz_http fuzz_batch fuzz_cells)

fuzz_target_args() {
  case "$1" in
    fuzz_stacktags) FUZZ_ARGS=(-max_len=16384 -dict=tests/fuzz/stacktags.dict tests/fuzz/seeds
                               service/stacks/rules tests/fixtures/stacktags) ;;
    fuzz_etl_reader) FUZZ_ARGS=(-max_len=65536 "$BUILD/tests/fuzz/etl-seeds") ;;
    fuzz_etl_decode) FUZZ_ARGS=(-max_len=4096 tests/fuzz/seeds-etl-decode) ;;
    # The test DLL (MinGW-built, where MinGW is installed) seeds the PE reader.
    fuzz_pe) FUZZ_ARGS=(-max_len=16384)
             [ -d "$BUILD/tests/etlgen/pe" ] && FUZZ_ARGS+=("$BUILD/tests/etlgen/pe") ;;
    fuzz_alert_rules) FUZZ_ARGS=(-max_len=8192 tests/fuzz/seeds-alerts) ;;
    fuzz_leak_score) FUZZ_ARGS=(-max_len=8216 tests/fuzz/seeds-leak-score) ;;
    fuzz_batch) FUZZ_ARGS=(-max_len=4096 tests/fuzz/seeds-batch) ;;
    fuzz_cells) FUZZ_ARGS=(-max_len=4096 tests/fuzz/seeds-cells) ;;
    fuzz_trace) FUZZ_ARGS=(-max_len=16384 -dict=tests/fuzz/trace.dict tests/fuzz/seeds-trace) ;;
    fuzz_config) FUZZ_ARGS=(-max_len=8192 -dict=tests/fuzz/config.dict tests/fuzz/seeds-config) ;;
    # Leaks: the harness runs LeakSanitizer every 1,024 requests (and at
    # exit) instead of after nearly every input (fuzz_http.c).
    fuzz_http) FUZZ_ARGS=(-max_len=4096 -detect_leaks=0 -dict=tests/fuzz/http.dict
                          tests/fuzz/seeds-http) ;;
    *) echo "targets.sh: no fuzz target $1" >&2; return 1 ;;
  esac
}

# Configures and builds the targets in $BUILD with clang.
fuzz_build() {
  command -v clang >/dev/null || { echo "fuzz: clang is needed (apt-get install clang)" >&2; return 1; }
  CC=clang cmake -S . -B "$BUILD" -DCW_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" -j"${CW_JOBS:-$(nproc)}" --target "${FUZZ_TARGETS[@]}" fuzz_etl_seeds
  # The test DLL seeds fuzz_pe where MinGW is installed.
  cmake --build "$BUILD" --target cw_pe_fixture >/dev/null 2>&1 || true
}
