#!/usr/bin/env bash
# Installs what is missing, builds commitwatch and runs the service on an
# embedded SQLite file with the dashboard on http://127.0.0.1:8470.
# With no live source available (not root, or not Linux), it replays the
# bundled MemoryTestApp example as if it were happening now.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
DB=${CW_DB:-commitwatch.db}
if [[ $(id -u) -eq 0 && -z "${CW_REPLAY:-}" ]] && ./build/commitwatch version | grep -q perf; then
  exec ./build/commitwatch run --source perf --db "$DB" "$@"
fi
exec ./build/commitwatch run --source "replay:${CW_REPLAY:-examples/memorytestapp.jsonl}" --rebase-now --speed 1 --db "$DB" "$@"
