#!/usr/bin/env bash
# A long libFuzzer campaign over every target of tests/fuzz/targets.sh,
# one target at a time under `nice -n 19` (a background job on a shared
# machine). Each target runs until RUNS executions (default 10,000,000) or
# SECONDS of wall time (default: no limit), from its committed seeds and
# the campaign's own corpus ($BUILD/campaign-corpus/TARGET, kept between
# campaigns). Writes, per target, its log and a summary line to
# $OUT/summary.txt: executions, seconds, exec/s, the CPU seconds it had
# (user + system; on a shared machine at nice 19 far fewer than the
# seconds) and executions per CPU second, edges covered (libFuzzer's
# cov), features, corpus size, the functions of the target's own sources
# that were reached and not (-print_coverage), and the crash/leak/timeout
# files left in $OUT/artifacts/ (none expected).
#
#   bench/fuzz_campaign.sh [-r RUNS] [-t SECONDS] [-o OUT] [TARGET...]
#
# CW_FUZZ_TIMEOUT (default 20): libFuzzer's -timeout, seconds of wall time
# per input; at nice 19 on a loaded machine an input of 3 s of CPU (a
# 20,000-step alert backtest under ASan) can take longer.
#
# docs/RELIABILITY.md ("Fuzzing") reports the last campaign.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=10000000 secs=0 out=build-fuzz/campaign
while getopts "r:t:o:" o; do
  case $o in
    r) runs=$OPTARG ;;
    t) secs=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n '2,16p' "$0" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
BUILD=${CW_FUZZ_BUILD:-build-fuzz}
[ -x /usr/bin/time ] || { echo "fuzz_campaign: /usr/bin/time is needed (apt-get install time)" >&2; exit 1; }
source tests/fuzz/targets.sh
((${#@})) && FUZZ_TARGETS=("$@")
CW_JOBS=${CW_JOBS:-2} fuzz_build
mkdir -p "$out/artifacts"
summary="$out/summary.txt"
printf '%-17s %12s %8s %8s %7s %10s %6s %7s %7s %11s %s\n' target execs seconds exec/s cpu_s \
  exec/cpu_s cov ft corpus "funcs hit" "findings" >>"$summary"
for t in "${FUZZ_TARGETS[@]}"; do
  corpus="$BUILD/campaign-corpus/${t#fuzz_}"
  mkdir -p "$corpus"
  fuzz_target_args "$t"
  log="$out/$t.log"
  limit=()
  ((secs > 0)) && limit=(-max_total_time="$secs")
  start=$(date +%s)
  before=$(ls "$out/artifacts" | wc -l)
  rc=0
  /usr/bin/time -f '%U %S' -o "$out/$t.cpu" \
    nice -n 19 "$BUILD/tests/fuzz/$t" -runs="$runs" "${limit[@]}" -timeout="${CW_FUZZ_TIMEOUT:-20}" -rss_limit_mb=2048 \
    -print_final_stats=1 -print_coverage=1 -artifact_prefix="$out/artifacts/$t-" \
    "$corpus" "${FUZZ_ARGS[@]}" >"$log" 2>&1 || rc=$?
  took=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  ncorp=$(ls "$corpus" | wc -l)
  # Functions of the project's sources (not the harness, not libraries).
  hit=$(grep -c '^COVERED_FUNC.*/service/' "$log" || true)
  miss=$(grep -c '^UNCOVERED_FUNC.*/service/' "$log" || true)
  # (time's last line: a first one says when the fuzzer exited nonzero)
  cpu=$(tail -1 "$out/$t.cpu" | awk '{printf "%.0f", $1 + $2}')
  percpu='?'
  [[ -n ${execs:-} && $cpu =~ ^[1-9][0-9]*$ ]] && percpu=$((execs / cpu))
  found=$(($(ls "$out/artifacts" | wc -l) - before))
  verdict="none"
  ((found > 0 || rc != 0)) && verdict="$found file(s), exit $rc: see $log"
  printf '%-17s %12s %8s %8s %7s %10s %6s %7s %7s %11s %s\n' "$t" "${execs:-?}" "$took" \
    "${rate:-?}" "$cpu" "$percpu" "${cov:-?}" "${ft:-?}" "$ncorp" "$hit/$((hit + miss))" \
    "$verdict" >>"$summary"
  tail -1 "$summary"
done
