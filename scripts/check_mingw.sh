#!/usr/bin/env bash
# Compiles every portable C file of the service (all of service/ but the
# POSIX platform and the Linux perf source) and the Windows platform layer
# with MinGW-w64, warnings as errors, syntax only: the portable code must
# stay portable. The third-party headers are Debian's (they are the same on
# every OS); a real Windows build of the libraries is a separate step.
#
#   scripts/check_mingw.sh        (needs x86_64-w64-mingw32-gcc)
set -euo pipefail
cd "$(dirname "$0")/.."
CC=${MINGW_CC:-x86_64-w64-mingw32-gcc}
command -v "$CC" >/dev/null || { echo "check_mingw: $CC not found (apt-get install gcc-mingw-w64-x86-64)" >&2; exit 1; }
inc=$(mktemp -d)
trap 'rm -rf "$inc"' EXIT
mkdir -p "$inc/cjson"
for h in sqlite3.h expat.h expat_external.h civetweb.h; do ln -s "/usr/include/$h" "$inc/$h"; done
ln -s /usr/include/cjson/cJSON.h "$inc/cjson/cJSON.h"
# The pprof export: zlib, protobuf-c and the Profile message's C code,
# generated from Debian's profile.proto as the build does (CMakeLists.txt).
mkdir -p "$inc/protobuf-c" "$inc/analysis"
for h in zlib.h zconf.h; do ln -s "/usr/include/$h" "$inc/$h"; done
ln -s /usr/include/protobuf-c/protobuf-c.h "$inc/protobuf-c/protobuf-c.h"
proto=/usr/share/gocode/src/github.com/google/pprof/proto
protoc-c --c_out="$inc/analysis" -I"$proto" "$proto/profile.proto"
flags=(-std=c11 -fsyntax-only -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
       -D__USE_MINGW_ANSI_STDIO=1 -D_WIN32_WINNT=0x0A00 -DCW_VERSION='"check"' -DCW_SOURCE_DATADIR='"."'
       -Iinclude -Iservice -isystem "$inc")
n=0
fail=0
while IFS= read -r f; do
  n=$((n + 1))
  "$CC" "${flags[@]}" "$f" || fail=$((fail + 1))
done < <(find service -name '*.c' ! -path 'service/platform/posix/*' ! -path 'service/sources/perf/*' | sort)
if ((fail)); then
  echo "check_mingw: $fail of $n files fail to compile for Windows" >&2
  exit 1
fi
echo "check_mingw: ok ($n files compile for Windows with -Werror)"
