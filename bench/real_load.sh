#!/bin/bash
# real_load.sh - commitwatch against real programs nobody here wrote
# (issue 12, docs/BENCHMARKS.md "Short-lived processes").
#
# Starts redis-server (with redis-benchmark writing and FLUSHALL emptying
# it), python3 and node churning memory, a long-lived sqlite3 with a
# 200 MB page cache filling and emptying a table, and a shell spawning
# about 30 short-lived processes a second; traces them with
# `commitwatch run --source perf` for N minutes, then prints per binary:
# database MB per minute, process instances (and how many were folded),
# and the time of the whole-window `analyze --db` (median of 3).
#
# Several binaries (e.g. main's and a branch's) trace the same load at
# once, each into its own database, so they see the very same programs.
#
# Usage (as root: the perf source needs it):
#   bench/real_load.sh [-m MINUTES] [-o DIR] [-c CONFIG] BINARY [BINARY...]
#   bench/real_load.sh -m 3 build-old/commitwatch build/commitwatch
# Missing programs are installed with apt-get (redis-server nodejs
# sqlite3). The daemons run with --no-http; CONFIG (optional) is passed
# to every binary that is not the first, e.g. to try fold settings.
set -euo pipefail

minutes=10
out=""
config=""
while getopts "m:o:c:h" opt; do
    case $opt in
    m) minutes=$OPTARG ;;
    o) out=$OPTARG ;;
    c) config=$OPTARG ;;
    *) sed -n '2,22p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-m MINUTES] [-o DIR] [-c CONFIG] BINARY [BINARY...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$0: run as root (the perf source needs it)" >&2; exit 2; }
case $minutes in '' | *[!0-9.]*) echo "$0: -m takes minutes, e.g. 3" >&2; exit 2 ;; esac
for b in "$@"; do [ -x "$b" ] || { echo "$0: $b is not an executable" >&2; exit 2; }; done

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-benchmark >/dev/null || need+=(redis-tools)
command -v node >/dev/null || need+=(nodejs)
command -v sqlite3 >/dev/null || need+=(sqlite3)
[ -x /usr/bin/python3 ] || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" >/dev/null
fi

out=${out:-$(mktemp -d /tmp/cw_real_load.XXXXXX)}
mkdir -p "$out"
pids=()
daemons=()
cleanup() {
    for p in "${daemons[@]}"; do kill -INT "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

# ---- the daemons first, so the load's processes start while traced ----
i=0
for b in "$@"; do
    i=$((i + 1))
    db="$out/run$i.db"
    rm -f "$db" "$db-wal" "$db-shm"
    extra=()
    [ $i -gt 1 ] && [ -n "$config" ] && extra=(--config "$config")
    "$b" run --source perf --no-http --db "$db" "${extra[@]}" 2>"$out/run$i.log" &
    daemons+=($!)
done
for i in $(seq 1 $#); do
    for _ in $(seq 1 120); do
        grep -q "rundown loaded" "$out/run$i.log" 2>/dev/null && break
        kill -0 "${daemons[$((i - 1))]}" 2>/dev/null || { cat "$out/run$i.log" >&2; exit 1; }
        sleep 0.5
    done
done

# ---- the load ----
port=$((20000 + RANDOM % 20000))
redis-server --port "$port" --save "" --appendonly no --dir "$out" >/dev/null &
pids+=($!)
sleep 1
# Writes values of 1-16 KiB over 200,000 keys, emptied every 20 s.
(while :; do redis-benchmark -p "$port" -q -t set,lpush -d 8192 -r 200000 -n 200000 \
    -c 4 >/dev/null 2>&1 || sleep 1; done) &
pids+=($!)
(while :; do sleep 20; redis-cli -p "$port" flushall >/dev/null 2>&1 || true; done) &
pids+=($!)

/usr/bin/python3 -c '
import random, time
keep = []
while True:
    for _ in range(200):
        keep.append(bytearray(random.choice((64, 4096, 70000, 300000, 2 << 20))))
    while len(keep) > 400:
        keep.pop(random.randrange(len(keep)))
    time.sleep(0.05)
' &
pids+=($!)

node -e '
let keep = [];
setInterval(() => {
  for (let i = 0; i < 200; i++) keep.push(Buffer.alloc([64, 4096, 70000, 300000, 2 << 20][i % 5]));
  for (let i = 0; i < 50; i++) keep.push(new Array(5000).fill(i));
  while (keep.length > 500) keep.splice(Math.floor(Math.random() * keep.length), 1);
}, 50);
' &
pids+=($!)

# sqlite3 with a 200 MB cache, a table filled with 40 MB and emptied (a
# recursive CTE: generate_series is an extension older shells lack).
(echo "PRAGMA cache_size = -200000; CREATE TABLE t(x BLOB);"
 while :; do
     echo "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 10000)"
     echo " INSERT INTO t SELECT randomblob(4000) FROM c;"
     echo "DELETE FROM t WHERE rowid % 3 = 0;"
     sleep 2
     echo "DELETE FROM t;"
 done) | sqlite3 "$out/load.sqlite" >/dev/null 2>&1 &
pids+=($!)

# A shell spawning ~30 short-lived processes a second: three `true` per
# tenth of a second (each is two instances: the fork, then the exec); the
# wait is bash's own `read -t`, which spawns nothing.
(exec 9<> <(:); while :; do /bin/true; /bin/true; /bin/true; read -t 0.1 -u 9 || :; done) &
pids+=($!)

secs=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
echo "load running for $minutes min (loadavg $(cut -d' ' -f1-3 /proc/loadavg)); output in $out" >&2
sleep "$secs"
echo "loadavg at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${daemons[@]}"; do kill -INT "$p" 2>/dev/null || true; done
for p in "${daemons[@]}"; do wait "$p" || echo "daemon $p exited with $?" >&2; done
daemons=()
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()

# ---- the figures ----
printf "%-34s %7s %8s %8s %10s %10s %9s %11s\n" binary minutes "DB MB" "MB/min" instances \
    "folded" "analyze s" "lost/events"
i=0
for b in "$@"; do
    i=$((i + 1))
    db="$out/run$i.db"
    bytes=$(stat -c %s "$db")
    [ -f "$db-wal" ] && bytes=$((bytes + $(stat -c %s "$db-wal")))
    inst=$(sqlite3 "$db" "SELECT count(*) FROM processes")
    folded=$(sqlite3 "$db" "SELECT coalesce(sum(n), 0) FROM folded" 2>/dev/null ||
             sqlite3 "$db" "SELECT count(*) FROM folded" 2>/dev/null || echo 0)
    groups=$(sqlite3 "$db" "SELECT count(*) FROM processes WHERE folded IS NOT NULL" 2>/dev/null || echo 0)
    times=()
    for _ in 1 2 3; do
        s=$(date +%s.%N)
        "$b" analyze --db "$db" >/dev/null
        e=$(date +%s.%N)
        times+=("$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f", e - s }')")
    done
    med=$(printf "%s\n" "${times[@]}" | sort -n | sed -n 2p)
    lines=$("$b" analyze --db "$db" | grep -c "types:" || true)
    lost=$(sqlite3 "$db" "SELECT lost_events || '/' || events_total FROM losses ORDER BY rowid DESC LIMIT 1")
    printf "%-34s %7s %8.2f %8.3f %10s %10s %9s %11s\n" "$b" "$minutes" \
        "$(awk -v b="$bytes" 'BEGIN { print b / 1e6 }')" \
        "$(awk -v b="$bytes" -v m="$minutes" 'BEGIN { print b / 1e6 / m }')" \
        "$((inst - groups + folded))" "$folded/$groups" "$med" "${lost:-0/0}"
    echo "  report lines: $lines; analyze times: ${times[*]}; db: $db" >&2
done
