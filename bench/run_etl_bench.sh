#!/bin/sh
# run_etl_bench.sh - `--source etl:` speed (docs/ETW.md, "Speed"): writes a
# trace of EVENTS VirtualAlloc/VirtualFree events with stacks once, then
# measures decode, decode + track and the whole path into SQLite with
# bench_etl, each RUNS times (the best run counts: a shared machine only
# ever makes things slower), and `commitwatch run --source etl:` for the
# real command's wall time.
#
# usage: bench/run_etl_bench.sh [BUILD_DIR]
# environment: EVENTS (10000000), FORM (walk or keys), RUNS (3), WORK (/tmp/cw-bench)
set -eu
BUILD=${1:-build}
EVENTS=${EVENTS:-10000000}
FORM=${FORM:-walk}
RUNS=${RUNS:-3}
WORK=${WORK:-/tmp/cw-bench}
B=$BUILD/bench/bench_etl
[ -x "$B" ] || { echo "run_etl_bench: $B not built" >&2; exit 1; }
mkdir -p "$WORK"
ETL=$WORK/etl-$EVENTS-$FORM.etl
echo "# commitwatch .etl benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $EVENTS events, stacks as $FORM"
[ -f "$ETL" ] || "$B" --events "$EVENTS" --stack-form "$FORM" --etl "$ETL" --mode decode >/dev/null
for mode in decode track store; do
    i=0
    while [ $i -lt "$RUNS" ]; do
        "$B" --events "$EVENTS" --stack-form "$FORM" --etl "$ETL" --reuse --mode $mode \
             --db "$WORK/etl-bench.db" 2>/dev/null
        i=$((i + 1))
    done
done
rm -f "$WORK/etl-run.db" "$WORK/etl-run.db-wal"
/usr/bin/time -f "run --source etl: wall_s=%e user_s=%U sys_s=%S max_rss_kib=%M" \
    "$BUILD/commitwatch" run --source "etl:$ETL" --db "$WORK/etl-run.db" --no-http --exit-at-end 2>&1 |
    grep -E "wall_s|events stored"
