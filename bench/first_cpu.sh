#!/bin/bash
# first_cpu.sh - the CPU time of a fresh `serve`'s first request: a
# steadier figure than its wall time on a shared VM without hardware
# counters (docs/BENCHMARKS.md, "Read path").
#
#   bench/first_cpu.sh BINARY DB URLPATH [N]
#
# N times (default 5): starts BINARY serve on DB, waits for /api/health,
# attaches `perf stat -e task-clock` (user and kernel time of every
# thread), sends the one request and stops; prints the N CPU times in ms
# and their median. Needs perf (Debian: linux-perf) and curl.
set -euo pipefail
[[ $# -ge 3 ]] || { sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 2; }
bin=$1 db=$2 url=$3 n=${4:-5} port=${FIRST_CPU_PORT:-18590}
for tool in perf curl; do
  command -v "$tool" >/dev/null || { echo "first_cpu.sh: $tool is missing" >&2; exit 1; }
done
out=$(mktemp)
srv='' st=''
trap 'kill $st $srv 2>/dev/null && wait $st $srv 2>/dev/null; rm -f "$out"' EXIT
ms=()
for _ in $(seq "$n"); do
  "$bin" serve --db "$db" --listen "127.0.0.1:$port" 2>/dev/null &
  srv=$!
  for _ in $(seq 200); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/api/health" && break
    sleep 0.05
  done
  perf stat -x, -e task-clock -p "$srv" -o "$out" &
  st=$!
  sleep 0.2
  curl -sf -o /dev/null "http://127.0.0.1:$port$url" || { echo "first_cpu.sh: $url failed" >&2; exit 1; }
  sleep 0.1
  kill -INT "$st"
  wait "$st" || true
  kill "$srv"
  wait "$srv" 2>/dev/null || true
  srv='' st=''
  v=$(awk -F, '/task-clock/ {print $1}' "$out")
  [[ -n $v ]] || { echo "first_cpu.sh: perf stat gave no task-clock" >&2; exit 1; }
  ms+=("$v")
done
printf '%s\n' "${ms[@]}" | sort -n | awk '{v[NR] = $1; printf "%.2f ", $1}
  END {printf "\nmedian %.2f ms CPU\n", v[int((NR + 1) / 2)]}'
