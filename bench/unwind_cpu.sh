#!/usr/bin/env bash
# unwind_cpu.sh - what the perf source's kept unwinding state buys
# (docs/BENCHMARKS.md, "Daemon memory"). As root:
#
#   bench/unwind_cpu.sh KEEP PROCS [SECONDS] [BIN]
#
# Starts `commitwatch run --source perf --no-http` with
# perf_unwind_processes = KEEP, then PROCS python3 churners at once, each
# mapping, touching and unmapping 64 KiB five calls deep (about 1,000
# times a second, for SECONDS, default 20). When PROCS is more than KEEP,
# every sample of a process whose state was dropped builds it again (the
# worst case of the cap: the processes take turns). Prints the daemon's
# CPU seconds over the churn, its VmHWM, the events it stored and its
# log's lines about lost records.
set -euo pipefail

KEEP=${1:?KEEP}
PROCS=${2:?PROCS}
SECS=${3:-20}
BIN=${4:-build/commitwatch}
[[ $(id -u) == 0 ]] || { echo "unwind_cpu: run as root (system-wide tracing)" >&2; exit 2; }
TMP=$(mktemp -d /tmp/cw-bench-unwind.XXXXXX)
PIDS=()
SVC=
cleanup() {
  [[ ${#PIDS[@]} -gt 0 ]] && kill "${PIDS[@]}" 2>/dev/null || true
  [[ -n $SVC ]] && { kill -INT "$SVC" 2>/dev/null; wait "$SVC" 2>/dev/null || true; }
  rm -rf "$TMP"
}
trap cleanup EXIT

echo "perf_unwind_processes = $KEEP" >"$TMP/c.conf"
"$BIN" run --source perf --db "$TMP/db" --no-http --config "$TMP/c.conf" 2>"$TMP/log" &
SVC=$!
for _ in $(seq 300); do grep -q "rundown loaded" "$TMP/log" && break; sleep 0.1; done
grep -q "rundown loaded" "$TMP/log" || { cat "$TMP/log" >&2; exit 1; }

ticks() { awk '{print $14 + $15}' "/proc/$SVC/stat"; }
t0=$(ticks)
for _ in $(seq "$PROCS"); do
  python3 - "$SECS" <<'PY' &
import mmap, sys, time
end = time.time() + float(sys.argv[1])
def f(d):
    if d:
        return f(d - 1)
    m = mmap.mmap(-1, 1 << 16)
    m[0] = 1
    m.close()
n = 0
while time.time() < end:
    f(5)
    n += 1
    if n % 50 == 0:
        time.sleep(0.05)
PY
  PIDS+=($!)
done
wait "${PIDS[@]}"
PIDS=()
t1=$(ticks)
hwm=$(awk '$1 == "VmHWM:" {print int($2 / 1024)}' "/proc/$SVC/status")
kill -INT "$SVC"
wait "$SVC" || true
SVC=
hz=$(getconf CLK_TCK)
stored=$(grep -o "[0-9]* events stored" "$TMP/log" | tail -1 || true)
printf 'perf_unwind_processes %s, %s churners, %s s: daemon CPU %.1f s, VmHWM %s MiB, %s, %s lost-record lines\n' \
  "$KEEP" "$PROCS" "$SECS" "$(echo "($t1 - $t0) / $hz" | bc -l)" "$hwm" "${stored:-? events stored}" \
  "$(grep -c lost "$TMP/log" || true)"
