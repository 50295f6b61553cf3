#!/usr/bin/env bash
# daemon_rss.sh - the daemon's memory (docs/BENCHMARKS.md, "Daemon
# memory"). As root:
#
#   bench/daemon_rss.sh [BUILD_DIR] [BIN]     (default: build, BUILD_DIR/commitwatch)
#
# CONFIG=FILE passes --config FILE (e.g. other perf_* caps); SMAPS=1 also
# prints the daemon's largest mappings at each step.
# Starts `commitwatch run --source perf --db ... --listen ...` (traces the
# whole machine), then, one after the other:
#   1. the mmap storm: bench/perf_overhead storm-bare $STORM (default
#      100,000 mmap/munmap pairs of 1 MiB, pages untouched: the most
#      events per second) and storm $TSTORM (pages touched, default 3,000);
#   2. $PROCS (default 1,000) live processes, each mapping and touching
#      1 MiB and then sleeping, held for $HOLD seconds (default 10), then
#      ended.
# After each step it prints the daemon's VmRSS and VmHWM (/proc/PID/status,
# peak since start) and the per-component figures of /api/health
# ("memory"). Prints one summary line per step at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
BIN=${2:-$BUILD/commitwatch}
LOAD=$BUILD/bench/perf_overhead
STORM=${STORM:-100000}
TSTORM=${TSTORM:-3000}
PROCS=${PROCS:-1000}
HOLD=${HOLD:-10}
PORT=${PORT:-18511}
[[ $(id -u) == 0 ]] || { echo "daemon_rss: run as root (system-wide tracing)" >&2; exit 2; }
TMP=$(mktemp -d /tmp/cw-bench-rss.XXXXXX)
PIDS=()
cleanup() {
  [[ ${#PIDS[@]} -gt 0 ]] && kill "${PIDS[@]}" 2>/dev/null || true
  [[ -n ${SVC:-} ]] && { kill -INT "$SVC" 2>/dev/null; wait "$SVC" 2>/dev/null || true; }
  rm -rf "$TMP"
}
trap cleanup EXIT

CONF=()
[[ -n ${CONFIG:-} ]] && CONF=(--config "$CONFIG")
"$BIN" run --source perf --db "$TMP/rss.db" --listen 127.0.0.1:$PORT "${CONF[@]}" 2>"$TMP/daemon.log" &
SVC=$!
for _ in $(seq 300); do grep -q "rundown loaded" "$TMP/daemon.log" && break; sleep 0.1; done
grep -q "rundown loaded" "$TMP/daemon.log" || { cat "$TMP/daemon.log" >&2; exit 1; }
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/api/health" >/dev/null && break; sleep 0.1; done

status() { awk -v k="$1:" '$1 == k {print int($2 / 1024)}' /proc/$SVC/status; }
SUMMARY=""
report() {
  local step=$1
  local rss hwm
  rss=$(status VmRSS); hwm=$(status VmHWM)
  echo "== $step: VmRSS $rss MiB, VmHWM $hwm MiB"
  curl -sf "http://127.0.0.1:$PORT/api/health" | python3 -c '
import json, sys
h = json.load(sys.stdin)
m = h.get("memory")
if m:
    print("   /api/health memory (KiB): " + ", ".join(f"{k} {v // 1024}" for k, v in m.items()))'
  if [[ -n ${SMAPS:-} ]]; then
    echo "   largest mappings (Rss KiB):"
    awk '/^[0-9a-f]+-[0-9a-f]+ /{name=($6==""?"[anon]":$6)" "$2} /^Rss:/{r[name]+=$2}
         END{for(k in r) print r[k], k}' /proc/$SVC/smaps | sort -rn | head -8 | sed 's/^/     /'
  fi
  SUMMARY+="$(printf '%-34s VmRSS %4s MiB  VmHWM %4s MiB' "$step" "$rss" "$hwm")"$'\n'
}
sleep 2
report "idle"
"$LOAD" storm-bare "$STORM" >/dev/null
sleep 2
report "after storm-bare $STORM"
"$LOAD" storm "$TSTORM" >/dev/null
sleep 2
report "after storm $TSTORM"

# $PROCS live processes: each maps and touches 1 MiB, then sleeps.
python3 - "$PROCS" "$HOLD" > "$TMP/procs.pid" <<'PY' &
import mmap, os, signal, sys, time
n, hold = int(sys.argv[1]), float(sys.argv[2])
kids = []
for i in range(n):
    pid = os.fork()
    if pid == 0:
        m = mmap.mmap(-1, 1 << 20)
        for o in range(0, 1 << 20, 4096):
            m[o] = 1
        time.sleep(hold + 60)
        os._exit(0)
    kids.append(pid)
print(" ".join(map(str, kids)), flush=True)
time.sleep(hold)
for k in kids:
    os.kill(k, signal.SIGKILL)
for k in kids:
    os.waitpid(k, 0)
PY
SPAWN=$!
PIDS=("$SPAWN")
for _ in $(seq 600); do [[ -s $TMP/procs.pid ]] && break; sleep 0.1; done
sleep $((HOLD / 2))
report "$PROCS live processes"
wait "$SPAWN"
PIDS=()
sleep 2
report "after they ended"
echo
echo "$SUMMARY"
grep -i "lost" "$TMP/daemon.log" | tail -1 || true
