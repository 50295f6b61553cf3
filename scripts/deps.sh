#!/usr/bin/env bash
# Installs, from Debian's packages, whatever commitwatch needs to build,
# run and test that this machine lacks. Idempotent; needs root (or sudo).
#
#   scripts/deps.sh              build and run on Linux
#   scripts/deps.sh --test       ... and the full test suite
#   scripts/deps.sh --windows    ... and the Windows cross build under Wine:
#                                MinGW-w64, Wine, and the Windows static
#                                libraries (scripts/deps_windows.sh) in
#                                ~/.cache/commitwatch/win-deps (or $CW_WIN_DEPS:
#                                one build serves every clone)
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config git python3 sqlite3
  libsqlite3-dev libcjson-dev libexpat1-dev libcivetweb-dev libdw-dev libelf-dev
  libc6-dbg valgrind
  # The .deb's man page, written from the binary's help texts (cmake/package.cmake).
  help2man
  # The pprof export: protobuf-c (its runtime and protoc-c, which generates
  # the C code of pprof's profile.proto, read from pprof's package) and zlib.
  libprotobuf-c-dev protobuf-c-compiler golang-github-google-pprof-dev zlib1g-dev
)
# Extra packages for the full test suite (browser, metrics, fuzzing, benchmarks).
if [[ "${1:-}" == "--test" ]]; then
  # golang-go: `go tool pprof` opens the pprof exports and the pushed profiles
  # (tests/e2e/test_export.py, test_profile_push.py).
  PKGS+=(golang-go)
  PKGS+=(clang chromium prometheus prometheus-alertmanager wrk heaptrack linux-perf util-linux procps gcc-mingw-w64-x86-64 dpkg-dev)
  # heaptrack: test_heap_heaptrack.py compares the heap report with its own,
  # and the heap benchmarks run it beside commitwatch.
  PKGS+=(lintian) # test_deb_root.py: Debian's checks on the .deb
  PKGS+=(libfaketime) # test_wall_steps.py: wall-clock steps under a running service
  PKGS+=(systemd-container) # test_service_systemd_root.py: the unit under a real systemd (nspawn)
  # Node.js may come from elsewhere than Debian (this image ships its own);
  # take Debian's only when there is none.
  command -v node >/dev/null || PKGS+=(nodejs)
  command -v npm >/dev/null || PKGS+=(npm)
fi
# The Windows cross build: the compiler, Wine to run the tests, wixl for
# the MSI, and what building the libraries from Debian's sources needs
# (dpkg-source, tclsh for SQLite's amalgamation, curl for Debian's pool).
if [[ "${1:-}" == "--windows" ]]; then
  PKGS+=(gcc-mingw-w64-x86-64 binutils-mingw-w64-x86-64 wine wine64 tcl dpkg-dev xz-utils curl wixl msitools)
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  echo "deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The dashboard's pinned front-end packages (uPlot), from the npm registry.
if [[ -f web/package.json ]] && command -v npm >/dev/null && [[ ! -d web/node_modules ]]; then
  (cd web && npm ci --no-audit --no-fund --loglevel=error)
fi
if [[ "${1:-}" == "--windows" ]]; then
  "$(dirname "$0")/deps_windows.sh" "${CW_WIN_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/commitwatch/win-deps}"
fi
