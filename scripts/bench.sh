#!/usr/bin/env bash
# bench.sh - every benchmark of bench/ on this machine, one table
# (bench/bench_all.py runs them and reads their figures; docs/BENCHMARKS.md
# explains each). Builds build/ (RelWithDebInfo, as the full tier's plain
# build) first, installs what the benchmarks need (scripts/deps.sh --test).
#
#   scripts/bench.sh [--quick] [--root] [--only REGEX] [--readme]
#
# --quick   small sizes: a check that every benchmark runs (minutes), not figures
# --root    adds the perf source's overhead and the daemon's memory (as root)
# --readme  writes the table, with its date, into README.md's "Benchmarks"
#           section (between its bench-table markers)
# The logs of every benchmark stay in build/bench-all/. Exit status 1 when
# a benchmark failed or printed no figure. Wall times vary with the
# machine's load (printed with the table): compare ratios of one run.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
args=() readme=0
for a in "$@"; do
  case $a in
    --readme) readme=1 ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$a") ;;
  esac
done
scripts/deps.sh --test >/dev/null
cmake -S . -B build -DCW_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$JOBS" >/dev/null
table=build/bench-all/table.md
mkdir -p build/bench-all
rc=0
python3 bench/bench_all.py build --markdown "$table" "${args[@]}" || rc=$?
if ((readme)); then
  python3 - "$table" <<'PY'
import re, sys
table = open(sys.argv[1]).read().strip()
readme = open("README.md").read()
begin, end = "<!-- bench-table: scripts/bench.sh --readme writes what follows -->", "<!-- bench-table end -->"
if begin not in readme or end not in readme:
    sys.exit("bench.sh: README.md has no bench-table markers")
body = f"`scripts/bench.sh`, {table}"
readme = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: f"{begin}\n{body}\n{end}", readme, flags=re.S)
open("README.md", "w").write(readme)
print("bench.sh: README.md's table updated", file=sys.stderr)
PY
fi
exit $rc
