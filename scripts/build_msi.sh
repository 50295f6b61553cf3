#!/usr/bin/env bash
# build_msi.sh - the Windows installer: stages commitwatch.exe, the
# dashboard (web/ with uPlot from web/node_modules), the default stack
# tags and the tools, lists them for WiX with wixl-heat, and builds
# commitwatch-VERSION-x64.msi with wixl (msitools) from
# installer/windows/commitwatch.wxs. CMake's `msi` target of the Windows
# build runs it; the tests run it again with another VERSION to check an
# upgrade in place.
#
#   [CW_MSI_MANUFACTURER=NAME] scripts/build_msi.sh EXE VERSION OUT.msi [TOOL.exe...]
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 3 ]] || { echo "usage: scripts/build_msi.sh EXE VERSION OUT.msi [TOOL.exe...]" >&2; exit 2; }
exe=$1 version=$2 out=$3
shift 3
for t in wixl wixl-heat; do
  command -v "$t" >/dev/null || { echo "build_msi: $t not found (apt-get install wixl)" >&2; exit 1; }
done
[[ -f web/node_modules/uplot/dist/uPlot.esm.js ]] ||
  { echo "build_msi: web/node_modules/uplot is missing (cd web && npm ci)" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$exe" "$stage/commitwatch.exe"
mkdir -p "$stage/stacktags" "$stage/tools"
(cd web && find . -path ./node_modules -prune -o -type f ! -name 'package*.json' ! -name .gitignore -print |
  while read -r f; do mkdir -p "$stage/web/$(dirname "$f")" && cp "$f" "$stage/web/$f"; done)
# The front-end packages (CMakeLists.txt's CW_WEB_VENDORS, http_static.c's vendors).
for pkg in uplot d3-flame-graph d3-array d3-dispatch d3-selection d3-color d3-interpolate \
           d3-ease d3-timer d3-transition d3-format d3-time d3-time-format d3-scale d3-hierarchy; do
  mkdir -p "$stage/web/vendor/$pkg"
  cp -r web/node_modules/$pkg/dist/. web/node_modules/$pkg/LICENSE "$stage/web/vendor/$pkg/"
done
cp service/stacks/rules/*.stacktags "$stage/stacktags/"
for t in "$@"; do cp "$t" "$stage/tools/"; done
# The payload's components, one per file, with ids that follow the paths
# (so they stay equal from one build to the next, as upgrades want).
(cd "$stage" && find web stacktags tools -type f | LC_ALL=C sort |
  wixl-heat -p "" --directory-ref INSTALLDIR --component-group Payload --var var.StageDir --win64) \
  > "$stage/payload.wxs"
# wixl takes sources relative to where it runs: from the stage, as ".".
src=$PWD
case $out in /*) ;; *) out=$PWD/$out ;; esac
# The Manufacturer (Add or Remove Programs' publisher): CW_MSI_MANUFACTURER,
# which the build sets from CW_MAINTAINER (cmake/msi.cmake).
manufacturer=${CW_MSI_MANUFACTURER:-commitwatch developers}
(cd "$stage" && wixl -a x64 -D Version="$version" -D Manufacturer="$manufacturer" -D StageDir=. -D Win64=yes -o "$out" \
  "$src/installer/windows/commitwatch.wxs" payload.wxs)
echo "build_msi: $out ($(du -h "$out" | cut -f1))"
