#!/usr/bin/env bash
# heap_reader.sh - what the heap model costs the reader an event, on a real
# program's stream (docs/BENCHMARKS.md, "Heap drill-down overhead").
#
#   bench/heap_reader.sh [--work N] [--rounds R] [--before BENCH_HEAP_LAYER]
#
# 1. Builds build-evdump/ (RelWithDebInfo, -DCW_HEAP_EV_DUMP: the reader
#    writes every event it gives the model to $CW_HEAP_EV_DUMP; no other
#    build has that code).
# 2. Traces bench/heap_overhead.py's python3 workload (PYTHONMALLOC=malloc,
#    N iterations, 30,000 by default: about 10 M events) with that build's
#    `commitwatch heap --`, recording the stream.
# 3. Applies the stream to a heap model R times (5 by default) with this
#    tree's bench_heap_layer --trace (the model alone: tracker, analyzer,
#    no ring, no stacks) and, with --before, with another build's binary
#    of the same event layout, alternated: the best of each, and their
#    ratio. The machine is shared: compare within one run.
# The recording is left in build-evdump/events.bin (56 bytes an event).
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=30000 ROUNDS=5 BEFORE=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --work) WORK=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --before) BEFORE=$2; shift 2 ;;
    *) echo "heap_reader.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -z "$BEFORE" || -x "$BEFORE" ]] || { echo "heap_reader.sh: $BEFORE: not a program" >&2; exit 2; }
B=build-evdump
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS=-DCW_HEAP_EV_DUMP >/dev/null
cmake --build "$B" -j"$(nproc)" --target commitwatch cw_heap_preload bench_heap_layer >/dev/null
python3 -c 'import sys; sys.path.insert(0, "bench"); import heap_overhead; print(heap_overhead.WORK)' \
  > "$B/work.py"
rm -f "$B/events.bin"
echo | CW_HEAP_EV_DUMP="$B/events.bin" PYTHONMALLOC=malloc \
  "$B/commitwatch" heap -- /usr/bin/python3 "$B/work.py" "$WORK" >/dev/null
n=$(( $(stat -c %s "$B/events.bin") / 56 ))
echo "heap_reader: $n events recorded ($WORK iterations), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
best() { sort -n | head -1; }
after=() before=()
for ((r = 0; r < ROUNDS; r++)); do
  after+=("$("$B/bench/bench_heap_layer" --trace "$B/events.bin" --rounds 1 | awk '/model alone/ {print $3}')")
  [[ -n "$BEFORE" ]] &&
    before+=("$("$BEFORE" --trace "$B/events.bin" --rounds 1 | awk '/model alone/ {print $3}')")
done
a=$(printf '%s\n' "${after[@]}" | best)
echo "  this tree: ${after[*]} ns an event (best $a)"
if [[ -n "$BEFORE" ]]; then
  b=$(printf '%s\n' "${before[@]}" | best)
  echo "  before:    ${before[*]} ns an event (best $b)"
  echo "  this tree / before: $(python3 -c "print(f'{$a / $b:.2f}')")"
fi
