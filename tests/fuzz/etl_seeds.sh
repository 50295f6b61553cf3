#!/usr/bin/env bash
# Writes the fuzz seeds of the .etl reader into DIR: the MemoryTestApp
# fixture as .etl files in small buffers (every layout cw_etl_gen knows),
# and links to the small real traces of ../shared/data/etl when present
# (links, not copies: those files stay where they are).
#
#   tests/fuzz/etl_seeds.sh CW_ETL_GEN FIXTURE.jsonl DIR
set -euo pipefail
gen=$1 fixture=$2 dir=$3
mkdir -p "$dir"
i=0
for layout in "--ptr 8 --stacks walk --compress --cpus 2" "--ptr 4 --stacks keys --compress --cpus 3" \
              "--ptr 8 --stacks split --cpus 1" "--ptr 4 --stacks split --process-version 3 --image-version 2"; do
  # shellcheck disable=SC2086
  "$gen" "$fixture" "$dir/memorytestapp-$i.etl" --buffer-size 1024 $layout
  i=$((i + 1))
done
data="$(cd "$(dirname "$0")/../.." && pwd)/../shared/data/etl"
for f in perfview-SelfDescribingSingleEvent.etl; do
  if [ -f "$data/$f" ]; then ln -sf "$data/$f" "$dir/$f"; fi
done
touch "$dir/stamp"
