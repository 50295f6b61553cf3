#!/usr/bin/env bash
# Builds commitwatch for Windows with MinGW-w64 and runs every test .exe
# under Wine, from a clean clone: installs what is missing (MinGW-w64, Wine,
# tcl, dpkg-dev, with apt-get), builds the Windows libraries from Debian's
# pinned sources (scripts/deps.sh --windows, into ~/.cache/commitwatch/win-deps;
# skipped when built), configures build-win/ with cmake/toolchain-mingw64.cmake and
# warnings as errors, builds, checks that commitwatch.exe imports system DLLs
# only and links reproducibly, then runs ctest, each test through
# scripts/wine_run.sh in a fresh private Wine prefix (build-win/wine-prefix).
# ctest's summary is the last thing printed; the exit status is ctest's.
#
#   scripts/test_windows.sh [CTEST_ARGS...]     (e.g. -R test_store)
#
# Environment: CW_WIN_DEPS (library prefix, default
# ~/.cache/commitwatch/win-deps),
# CW_BUILD_WIN (build folder, default build-win), JOBS (default nproc),
# CW_LINUX_BUILD (a Linux build folder: test_win_api compares the two
# builds' answers on the same traces).
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS=$(realpath -m "${CW_WIN_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/commitwatch/win-deps}")
BUILD=${CW_BUILD_WIN:-build-win}
JOBS=${JOBS:-$(nproc)}
HOST=x86_64-w64-mingw32
t0=$(date +%s)
step() { echo "== test_windows: $* ($(($(date +%s) - t0)) s)"; }

step "dependencies"
CW_WIN_DEPS=$DEPS scripts/deps.sh --windows

step "configure $BUILD"
cmake -S . -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-mingw64.cmake \
  -DCW_WIN_DEPS="$DEPS" -DCW_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  ${CW_LINUX_BUILD:+-DCW_LINUX_BUILD="$(realpath "$CW_LINUX_BUILD")"} >/dev/null

step "build"
cmake --build "$BUILD" -j"$JOBS"

step "check commitwatch.exe"
exe=$BUILD/commitwatch.exe
# Only DLLs every Windows has: a static build (no libgcc, winpthread or
# third-party DLL beside it).
dlls=$($HOST-objdump -p "$exe" | awk '/DLL Name:/ { print $3 }' | sort -u | xargs)
for d in $dlls; do
  case "${d,,}" in
    kernel32.dll | msvcrt.dll | ws2_32.dll | advapi32.dll | user32.dll | shell32.dll | ole32.dll | \
      tdh.dll | psapi.dll | dbghelp.dll | bcrypt.dll) ;;
    *) echo "test_windows: $exe imports $d, which is not a system DLL (imports: $dlls)" >&2; exit 1 ;;
  esac
done
# Sockets are polled with WSAPoll: Wine 8's wineserver aborts on select()
# calls that name a socket in two sets, as civetweb's poll() emulation did
# (cmake/civetweb_wsapoll.h).
ws2=$($HOST-objdump -p "$exe" | awk '/DLL Name:/ { d = tolower($3) } d == "ws2_32.dll" && /^\t[0-9a-f]+\t/ { print $NF }' | sort | xargs)
[[ " $ws2 " == *" WSAPoll "* && " $ws2 " != *" select "* ]] ||
  { echo "test_windows: $exe must import WSAPoll and not select from ws2_32.dll (imports: $ws2)" >&2; exit 1; }
# Reproducible: linking again gives the same bytes (no time stamp).
cp "$exe" "$BUILD/commitwatch.exe.first"
rm "$exe"
cmake --build "$BUILD" --target commitwatch >/dev/null
cmp "$exe" "$BUILD/commitwatch.exe.first" ||
  { echo "test_windows: two links of $exe differ" >&2; exit 1; }
rm "$BUILD/commitwatch.exe.first"
echo "test_windows: $exe: $(stat -c %s "$exe") bytes, imports $dlls, links reproducibly"

step "ctest under Wine"
cd "$BUILD"
# Every test has a time limit (tests/CMakeLists.txt) and runs once: a test
# that fails fails the run (docs/TESTING.md, "No retries").
exec ctest --output-on-failure --timeout 900 -j"$JOBS" "$@"
