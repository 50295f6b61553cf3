#!/usr/bin/env bash
# Replays one fuzz target's committed corpus through its replay build
# (fuzz_<name>_replay, tests/fuzz/replay_main.c): the seed folders and
# flags tests/fuzz/targets.sh gives the target, each input once. ctest
# runs it from the source tree's root (label fuzz-replay).
#
#   tests/fuzz/replay.sh BUILD TARGET
set -euo pipefail
BUILD=$1
t=$2
source tests/fuzz/targets.sh
fuzz_target_args "$t"
exec "$BUILD/tests/fuzz/${t}_replay" "${FUZZ_ARGS[@]}"
