#!/usr/bin/env bash
# http_bench.sh - the HTTP benchmark (docs/BENCHMARKS.md, "HTTP").
#
# 1. Generates 24 h of 1 s data for a long-running process and 20
#    background ones (bench/gen_http_trace.py) and ingests it (--no-http).
# 2. Serves that database while the service ingests a further hour of the
#    same workload, paced at 10x (so buckets are written during the whole
#    measurement), and runs wrk against /api/processes (the last hour),
#    the process's 24 h series, the system series, and /metrics, with 1
#    and with 8 connections: requests/s and p99 latency.
# 3. Times the dashboard's process page, 24 h window, from navigation to
#    a drawn chart (bench/dashboard_time.mjs, chromium + playwright-core).
#
# usage: bench/http_bench.sh [BUILD_DIR]    (default: build)
# Environment: PROCS background processes (default 20; issue 12's goals
# are for 1000), DURATION s per wrk run (10), CONNS ("1 8"), DASHBOARD=0
# skips step 3, BIN the binary to serve with, DATA a folder for the generated day (reused by later runs),
# ONLY a regular expression: the step 2 endpoints whose name matches (e.g. ONLY=metrics).
# Needs: wrk, curl, python3, and for step 3 node, chromium, web/node_modules.
# Loopback only; every wrk run is bounded (DURATION seconds).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
BIN=${BIN:-$BUILD/commitwatch}
PROCS=${PROCS:-20}
OUT=${DATA:-$BUILD/bench-http}
[[ $PROCS == 20 || -n ${DATA:-} ]] || OUT=$BUILD/bench-http-p$PROCS
DURATION=${DURATION:-10}
CONNS=${CONNS:-1 8}
PORT=${PORT:-18499}
T0=1760000000
mkdir -p "$OUT"
cd "$OUT"

if [[ ! -f day.jsonl ]]; then
  python3 "$ROOT/bench/gen_http_trace.py" --start $T0 --seconds 86400 --procs "$PROCS" > day.jsonl
fi
# The live hour starts after the stored day: the end of a replay stores one
# more (1 s) bucket, where the instances still alive end.
python3 "$ROOT/bench/gen_http_trace.py" --start $((T0 + 86401)) --seconds 3600 --procs "$PROCS" > more.jsonl
if [[ ! -f day.db ]]; then
  echo "== ingest 24 h ($(wc -l < day.jsonl) events)"
  s=$(date +%s%N)
  "$BIN" run --source replay:day.jsonl --db day.db.tmp --no-http 2>ingest.log
  mv day.db.tmp day.db
  echo "ingest: $(( ($(date +%s%N) - s) / 1000000 )) ms"
fi
rm -f live.db live.db-wal live.db-shm
cp day.db live.db

"$BIN" run --source replay:more.jsonl --db live.db --listen 127.0.0.1:$PORT --speed 10 2>serve.log &
SVC=$!
trap 'kill $SVC 2>/dev/null; wait $SVC 2>/dev/null || true' EXIT
B=http://127.0.0.1:$PORT
for _ in $(seq 100); do curl -sf "$B/api/health" >/dev/null && break; sleep 0.1; done

FROM=$((T0 * 1000000000))
TO=$(((T0 + 86400) * 1000000000))
ID=$(curl -sf "$B/api/processes?from=$FROM&to=$TO&name=LongRunner" | python3 -c 'import json,sys; print(json.load(sys.stdin)["processes"][0]["id"])')
echo "== service ingesting more.jsonl at 10x; LongRunner.exe is instance $ID"

bench() {
  local name=$1 path=$2 size c
  [[ -z ${ONLY:-} || $name =~ $ONLY ]] || return 0
  size=$(curl -s -o /dev/null -w '%{size_download}' "$B$path")
  for c in $CONNS; do
    wrk -t1 -c"$c" -d"${DURATION}s" --timeout 30s --latency "$B$path" > "wrk-$name-c$c.txt"
    # Let requests still queued in the server finish before the next run.
    sleep 3
    local rps p50 p90 p99
    rps=$(awk '/Requests\/sec/ {print $2}' "wrk-$name-c$c.txt")
    p50=$(awk '$1 == "50%" {print $2}' "wrk-$name-c$c.txt")
    p90=$(awk '$1 == "90%" {print $2}' "wrk-$name-c$c.txt")
    p99=$(awk '$1 == "99%" {print $2}' "wrk-$name-c$c.txt")
    printf '%-26s c=%-2s %9s req/s   p50 %9s   p90 %9s   p99 %9s   (%s bytes)\n' "$name" "$c" \
      "$rps" "$p50" "$p90" "$p99" "$size"
  done
}
echo "== wrk -t1 -d${DURATION}s, connections: $CONNS"
bench health "/api/health"
bench process-series-24h "/api/processes/$ID/series?from=$FROM&to=$TO&step=180s"
bench process-series-24h-auto "/api/processes/$ID/series?from=$FROM&to=$TO"
bench system-series-24h "/api/system/series?from=$FROM&to=$TO"
bench metrics "/metrics"
bench processes-last-hour "/api/processes?from=-1h&to=now"

if [[ ${DASHBOARD:-1} != 0 ]] && command -v node >/dev/null && [[ -d "$ROOT/web/node_modules/playwright-core" ]]; then
  echo "== dashboard: process page, 24 h of 1 s data, navigation to drawn chart"
  node "$ROOT/bench/dashboard_time.mjs" "$B" "$ID" "$FROM" "$TO" 5
fi
# The service's memory after the runs: resident now and at its peak, and
# what SQLite holds (every connection's page cache; the file mapping of
# the read handles is in the resident set only).
echo "service memory: VmRSS $(awk '$1 == "VmRSS:" {print int($2 / 1024)}' /proc/$SVC/status) MiB, VmHWM $(awk '$1 == "VmHWM:" {print int($2 / 1024)}' /proc/$SVC/status) MiB, $(curl -s "$B/api/health" | python3 -c 'import json,sys; m=json.load(sys.stdin).get("memory") or {}; print(", ".join(f"{k} {v // 1048576} MiB" for k, v in m.items() if "sqlite" in k or "heap" in k))')"
echo "still ingesting at the end: $(curl -s "$B/api/health" | python3 -c 'import json,sys; h=json.load(sys.stdin); print(not h["ingest_done"], h["events_ingested"], "events")')"
