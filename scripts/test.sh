#!/usr/bin/env bash
# Installs what is missing, builds commitwatch with warnings as errors and
# runs the unit and integration tests under AddressSanitizer +
# UndefinedBehaviorSanitizer, fuzzes the stack-tag loader, the .etl reader
# and the ETW decoders for 40 s each,
# checks the architecture's rules (scripts/check_layers.py: SQL only in the
# store, OS code only in platform/ and the OS sources, no call to a stage
# above; scripts/check_mingw.sh: the portable code compiles for Windows),
# builds and tests the Windows build under Wine (scripts/test_windows.sh),
# then runs every Linux test with ctest (its summary is the last thing
# printed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
JOBS=$(nproc)
cmake -S . -B build-asan -DCW_WERROR=ON -DCW_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$JOBS"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest -L 'unit|integration' --output-on-failure --timeout 900 -j"$JOBS")
# The libFuzzer targets for a bounded time each (clang).
tests/fuzz/run_fuzz.sh 40
cmake -S . -B build -DCW_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$JOBS"
python3 scripts/check_layers.py build
scripts/check_mingw.sh
# The Windows build, cross-compiled with MinGW-w64: its unit tests and the
# Wine end-to-end tests (service, MSI, rundown, API against this Linux
# build) under Wine. Before the Linux ctest, whose summary CI reads.
CW_LINUX_BUILD=build scripts/test_windows.sh
cd build && ctest --output-on-failure --timeout 900
