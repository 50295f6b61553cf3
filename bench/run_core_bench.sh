#!/bin/sh
# run_core_bench.sh - the core pipeline benchmark (docs/BENCHMARKS.md,
# "Core pipeline").
#
# (a) the whole path: `commitwatch run --source replay:FILE --db X --no-http` on a
#     generated JSONL trace (parse + intern + track + aggregate + store),
#     and `commitwatch analyze` on it (parse + track + exact analysis);
# (b) the pipeline alone, no JSON: bench_pipeline drives tracker +
#     aggregator (+ store writer) with the same workload built in memory.
# For each: events/s and peak RSS (GNU time's "Maximum resident set size"
# for (a), getrusage in bench_pipeline for (b)). Each figure is the best of
# RUNS runs, because a shared machine only ever makes things slower.
#
# usage: bench/run_core_bench.sh [BUILD_DIR]
# environment: EVENTS (10000000), PROCS (1000), STACKS (300), RUNS (3),
#              WORK (a directory for the trace and databases; /tmp/cw-bench)
set -eu

BUILD=${1:-build}
EVENTS=${EVENTS:-10000000}
PROCS=${PROCS:-1000}
STACKS=${STACKS:-300}
RUNS=${RUNS:-3}
WORK=${WORK:-/tmp/cw-bench}
CW=$BUILD/commitwatch
GEN=$BUILD/bench/cw_gen_trace
PIPE=$BUILD/bench/bench_pipeline
TIME=/usr/bin/time

for f in "$CW" "$GEN" "$PIPE"; do
    [ -x "$f" ] || { echo "run_core_bench: $f not built (cmake --build $BUILD)" >&2; exit 1; }
done
[ -x "$TIME" ] || { echo "run_core_bench: needs GNU time ($TIME; apt-get install time)" >&2; exit 1; }
mkdir -p "$WORK"

# calc EXPR: arithmetic with awk (bc is not on every machine).
calc() { awk "BEGIN { print $1 }"; }
TRACE=$WORK/trace-$EVENTS-$PROCS-$STACKS.jsonl

echo "# commitwatch core benchmark, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# machine: $(nproc) CPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# workload: $EVENTS events, $PROCS processes, $STACKS stacks (bench/gen_core.h)"

if [ ! -s "$TRACE" ]; then
    start=$(date +%s.%N)
    "$GEN" --events "$EVENTS" --procs "$PROCS" --stacks "$STACKS" --out "$TRACE"
    end=$(date +%s.%N)
    echo "# generated $TRACE ($(du -h "$TRACE" | cut -f1)) in $(calc "$end - $start") s"
fi

# best_of CMD...: runs CMD RUNS times under GNU time; prints
# "wall_s cpu_s rss_mib" of the run with the least CPU time.
best_of() {
    best=""
    i=0
    while [ $i -lt "$RUNS" ]; do
        i=$((i + 1))
        rm -f "$WORK/run.db" "$WORK/run.db-wal" "$WORK/run.db-shm"
        if ! "$TIME" -f "%e %U %S %M" -o "$WORK/time.out" "$@" >/dev/null 2>"$WORK/err.out"; then
            echo "FAILED: $* : $(tail -1 "$WORK/err.out")" >&2
            echo "n/a n/a n/a"
            return 0
        fi
        read -r secs user sys kib <"$WORK/time.out"
        cpu=$(calc "$user + $sys")
        if [ -z "$best" ] || [ "$(calc "$cpu < $best")" = 1 ]; then
            best=$cpu
            best_wall=$secs
            best_rss=$kib
        fi
    done
    echo "$best_wall $best $(awk "BEGIN { printf \"%.1f\", $best_rss / 1024 }")"
}

rate() { # events seconds
    if [ "$2" = "n/a" ]; then echo "n/a"; else awk "BEGIN { printf \"%d\", $1 / $2 }"; fi
}

echo
echo "| path | wall s | events/s (wall) | CPU s | events/CPU-s | peak RSS (MiB) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
set -- $(best_of "$CW" run --source "replay:$TRACE" --db "$WORK/run.db" --no-http)
echo "| (a) \`run --source replay --db\` | $1 | $(rate "$EVENTS" "$1") | $2 | $(rate "$EVENTS" "$2") | $3 |"
set -- $(best_of "$CW" analyze --source "replay:$TRACE" --json)
echo "| (a) \`analyze --source replay --json\` | $1 | $(rate "$EVENTS" "$1") | $2 | $(rate "$EVENTS" "$2") | $3 |"

# (b): the core thread's CPU is what "one core" means; the store writer's
# CPU (its own thread) is reported beside it.
field() { echo "$2" | sed "s/.* $1=\([-0-9.]*\).*/\1/"; }
for burst in 1 8; do
    for mode in track agg store; do
        best=""
        i=0
        while [ $i -lt "$RUNS" ]; do
            i=$((i + 1))
            line=$("$PIPE" --mode "$mode" --events "$EVENTS" --procs "$PROCS" --stacks "$STACKS" \
                --burst "$burst" --db "$WORK/pipe.db" 2>"$WORK/err.out") || {
                echo "FAILED: bench_pipeline --mode $mode: $(tail -1 "$WORK/err.out")" >&2
                line=""
                break
            }
            eps=$(field events_per_cpu_s "$line")
            if [ -z "$best" ] || [ "$eps" -gt "$best" ]; then
                best=$eps
                bestline=$line
            fi
        done
        if [ -z "$best" ]; then
            echo "| (b) pipeline $mode, burst $burst | n/a | n/a | n/a | n/a | n/a |"
            continue
        fi
        extra=""
        [ "$mode" = store ] && extra=" (+ writer thread $(field writer_cpu_s "$bestline") s CPU)"
        echo "| (b) pipeline $mode, burst $burst | $(field seconds "$bestline") |" \
            "$(field events_per_s "$bestline") | $(field core_cpu_s "$bestline")$extra |" \
            "$best | $(field peak_rss_mib "$bestline") |"
    done
done
rm -f "$WORK/run.db" "$WORK/run.db-wal" "$WORK/run.db-shm" "$WORK/pipe.db" "$WORK/pipe.db-wal" \
    "$WORK/pipe.db-shm" "$WORK/time.out" "$WORK/err.out"
echo
echo "# (b) modes: track = tracker only; agg = + bucket aggregator; store = + store writer"
echo "# thread into SQLite. burst = mean run of consecutive events from one process (1 ="
echo "# uniformly random over all processes, the worst case for caches)."
