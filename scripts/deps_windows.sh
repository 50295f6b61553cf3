#!/usr/bin/env bash
# Builds the Windows (x86_64-w64-mingw32) static libraries commitwatch links
# to, SQLite, civetweb, cJSON, expat, protobuf-c's runtime and zlib (the
# pprof export), from Debian bookworm's *source*
# packages at pinned versions (Debian's security patches applied by
# dpkg-source), into a prefix: PREFIX/include, PREFIX/lib/lib*.a. Called by
# `scripts/deps.sh --windows`, which installs the tools first.
#
#   scripts/deps_windows.sh [PREFIX]     (default: $CW_WIN_DEPS, else
#                                        ~/.cache/commitwatch/win-deps, shared by clones)
#
# Sources come from `apt-get source PKG=VERSION` (a deb-src entry for
# bookworm is added when root and missing) or else from Debian's pool; the
# SHA-256 of every tarball and .dsc is pinned below and checked before
# anything is unpacked. Idempotent: a library whose stamp (version and
# flags) matches is not rebuilt. Nothing of the sources is ever committed.
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=$(realpath -m "${1:-${CW_WIN_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/commitwatch/win-deps}}")
SRC=$PREFIX/src
HOST=x86_64-w64-mingw32
CC=${MINGW_CC:-$HOST-gcc}
AR=${MINGW_AR:-$HOST-ar}
MIRROR=${CW_DEBIAN_MIRROR:-http://deb.debian.org}
JOBS=$(nproc)

# ---- the pins ---------------------------------------------------------------
# package version pool-folder, then "sha256 file" of each file of the .dsc.
declare -A VERSION=(
  [sqlite3]=3.40.1-2+deb12u2
  [civetweb]=1.15+dfsg-4
  [cjson]=1.7.15-1+deb12u4
  [expat]=2.5.0-1+deb12u2
  [protobuf-c]=1.4.1-1
  [zlib]=1:1.2.13.dfsg-1
)
PINS="
ee3459ae9d00939741c7708fc1b8ce1bde12d8c3fb1dfa005bbbc8651d884e23 sqlite3_3.40.1-2+deb12u2.dsc
aaa776260ab4dc976db34aa7891819484c8676b5b2783123ebc6301e2ca5d655 sqlite3_3.40.1.orig.tar.xz
a5e95a18d1b59729278860559ded78751b9163ffb5bb906c5cd24c015f71d5fd sqlite3_3.40.1.orig-www.tar.xz
0843bc12e4364076477935ce313a6d0796fd899a989ff18ebb6545540e10e4ca sqlite3_3.40.1-2+deb12u2.debian.tar.xz
141ee6bf528e8f33e8a32b5607917609774e80cf842240cffd50e0399755baaf civetweb_1.15+dfsg-4.dsc
ec372e9737bc820118bbb735f46a07d41f795814ca0f38bc6e67048e7a460f33 civetweb_1.15+dfsg.orig.tar.xz
2fe67d05a15be93764398275372f41f6228b17497b23d04f149482ffde7b3fb8 civetweb_1.15+dfsg-4.debian.tar.xz
764c2de141d680f4fb4cada30c526dacaa30ead061b9b9c34f2b81e2df0f8439 cjson_1.7.15-1+deb12u4.dsc
5308fd4bd90cef7aa060558514de6a1a4a0819974a26e6ed13973c5f624c24b2 cjson_1.7.15.orig.tar.gz
afd19a970966cf534ff1e9ec077d710a5e7e78eb4ec9b499c8bdc32e55da12cb cjson_1.7.15-1+deb12u4.debian.tar.xz
6fc87dbd01f49999ed368cfb37c08d35e41348dda2281d60642f3aa14cb77e32 expat_2.5.0-1+deb12u2.dsc
ab00ee05c7067fd10a35c5d2a4922ebba746ddd50ff83b79c828da17bbdf1757 expat_2.5.0.orig.tar.gz
7e29f5db5067e55193540089ed0f3ec9676704cf79dcea81a9bfb9f49435ae53 expat_2.5.0-1+deb12u2.debian.tar.xz
480082f3a320b6d718a8a218191168be9ab19e8115994739ee11e954498848e4 protobuf-c_1.4.1-1.dsc
4cc4facd508172f3e0a4d3a8736225d472418aee35b4ad053384b137b220339f protobuf-c_1.4.1.orig.tar.gz
7b303d1f1fb995fd242681db40f1415f368d14fe877b3c832ad1ca67b7db8096 protobuf-c_1.4.1-1.debian.tar.xz
3fa1e6b2fc525062aa88207dda52fed8e045373c809d362fe8a2bfbf7cf515a8 zlib_1.2.13.dfsg-1.dsc
71feb7947e3c00ef125f83b79a4e529bde31171e5babe48b391f06758d1ab0a1 zlib_1.2.13.dfsg.orig.tar.bz2
f66cf3d4f2d7defcd4d1fd1fb0a11ee39f1e01b42ec7d059c9dc5c1695133c44 zlib_1.2.13.dfsg-1.debian.tar.xz
"

# ---- the compile options ----------------------------------------------------
# The same -O2 as Debian's builds; -ffile-prefix-map keeps the prefix's path
# out of the objects.
BASE_CFLAGS="-O2 -fno-strict-aliasing -ffile-prefix-map=$PREFIX=. -D__USE_MINGW_ANSI_STDIO=1 -D_WIN32_WINNT=0x0602"
# SQLite: Debian's Linux options that change what the service sees
# (debian/rules): thread-safe (the writer and each HTTP worker have their
# own connection; Win32 mutexes), secure delete (freed pages are zeroed, as
# on Linux), URI file names, the schema retry count. WAL, incremental
# vacuum and mmap are on by default. Debian's extras the service does not
# use (FTS3, R-Tree, column metadata, sessions, soundex, ...) are left out.
SQLITE_DEFS=(-DSQLITE_THREADSAFE=1 -DSQLITE_SECURE_DELETE -DSQLITE_USE_URI=1 -DSQLITE_MAX_SCHEMA_RETRY=25)
# civetweb: no TLS or CGI; MinGW's C library has no clock_gettime. Caching
# stays as on Linux: NO_CACHING would drop the static_file_max_age option
# the service sets (service/http/http.c), and mg_start would refuse it
# (64-bit MinGW has timegm as _mkgmtime, which is what NO_CACHING avoids).
# poll() is WSAPoll (cmake/civetweb_wsapoll.h says why), not civetweb's
# emulation over select().
CIVETWEB_POLL_H=$PWD/cmake/civetweb_wsapoll.h
CIVETWEB_DEFS=(-DNO_SSL -DNO_CGI -DMUST_IMPLEMENT_CLOCK_GETTIME -DNDEBUG -DHAVE_POLL)
# expat: static, with the hand-written configuration below.
EXPAT_DEFS=(-DXML_STATIC -DHAVE_EXPAT_CONFIG_H)

log() { echo "deps-windows: $*"; }
die() { echo "deps-windows: $*" >&2; exit 1; }

command -v "$CC" >/dev/null || die "$CC not found (scripts/deps.sh --windows installs it)"
command -v dpkg-source >/dev/null || die "dpkg-source not found (apt-get install dpkg-dev)"
mkdir -p "$SRC" "$PREFIX/include/cjson" "$PREFIX/lib" "$PREFIX/stamps"

pin_of() { awk -v f="$1" '$2 == f { print $1 }' <<<"$PINS"; }
files_of() { awk -v p="$1_" 'index($2, p) == 1 { print $2 }' <<<"$PINS"; }

# 0 when every pinned file of the package is in $SRC with its checksum.
have_files() {
  local f
  for f in $(files_of "$1"); do
    [[ -f $SRC/$f ]] && [[ $(sha256sum "$SRC/$f" | cut -d' ' -f1) == "$(pin_of "$f")" ]] || return 1
  done
}

# deb-src for bookworm (and its security suite), when root and missing.
ensure_deb_src() {
  [[ $(id -u) -eq 0 ]] || return 0
  # (grep reads all: with pipefail, an early exit of grep -q would fail apt-cache)
  apt-cache showsrc sqlite3 2>/dev/null | grep '^Version: ' >/dev/null && return 0
  log "adding deb-src entries for bookworm main (/etc/apt/sources.list.d/commitwatch-deb-src.sources)"
  cat >/etc/apt/sources.list.d/commitwatch-deb-src.sources <<EOF
Types: deb-src
URIs: $MIRROR/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: $MIRROR/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt-get update -qq || true
}

# Downloads PKG's .dsc and tarballs into $SRC: apt-get source when apt knows
# the pinned version, else Debian's pool (main, then the security archive).
fetch() {
  local pkg=$1 ver=${VERSION[$1]} f url ok
  have_files "$pkg" && return 0
  if apt-cache showsrc "$pkg" 2>/dev/null | grep -Fx "Version: $ver" >/dev/null; then
    log "$pkg $ver: apt-get source"
    (cd "$SRC" && apt-get source -qq --download-only "$pkg=$ver" >/dev/null 2>&1) || true
  fi
  for f in $(files_of "$pkg"); do
    [[ -f $SRC/$f && $(sha256sum "$SRC/$f" | cut -d' ' -f1) == "$(pin_of "$f")" ]] && continue
    ok=0
    for url in "$MIRROR/debian/pool/main/${pkg:0:1}/$pkg/$f" \
               "$MIRROR/debian-security/pool/updates/main/${pkg:0:1}/$pkg/$f"; do
      log "$pkg: downloading $url"
      if curl -fsSL --retry 3 -o "$SRC/$f.part" "$url"; then
        mv "$SRC/$f.part" "$SRC/$f"
        ok=1
        break
      fi
    done
    rm -f "$SRC/$f.part"
    ((ok)) || die "$pkg $ver: cannot download $f (is the mirror $MIRROR reachable?)"
  done
  # Every file checked against its pin, whatever brought it.
  for f in $(files_of "$pkg"); do
    local got
    got=$(sha256sum "$SRC/$f" | cut -d' ' -f1)
    [[ $got == "$(pin_of "$f")" ]] ||
      die "$f: SHA-256 $got is not the pinned $(pin_of "$f"); delete it and run again"
  done
}

# Unpacks PKG with Debian's patches into $SRC/PKG (fresh); prints the path.
# The files were checked against the pins, so gpgv's "no public key" (no
# Debian keyring here) is only noise: it goes to a log with the rest.
unpack() {
  local pkg=$1 ver=${VERSION[$1]}
  rm -rf "${SRC:?}/$pkg"
  # (file names carry no epoch: zlib's "1:")
  (cd "$SRC" && dpkg-source -x "${pkg}_${ver#*:}.dsc" "$pkg" >"$pkg.unpack.log" 2>&1) ||
    die "$pkg: dpkg-source -x failed (see $SRC/$pkg.unpack.log)"
  echo "$SRC/$pkg"
}

# The stamp of a built library: its version and the flags it was built with.
stamp_ok() { [[ -f $PREFIX/lib/lib$1.a && -f $PREFIX/stamps/$1 && $(cat "$PREFIX/stamps/$1") == "$2" ]]; }

# Compiles the given .c files (after the flags, separated by --) and
# archives them into lib$name.a, deterministically.
build_lib() {
  local name=$1 dir=$2
  shift 2
  local flags=() srcs=() seen=0 s objs=()
  for s in "$@"; do
    if [[ $s == -- ]]; then seen=1; elif ((seen)); then srcs+=("$s"); else flags+=("$s"); fi
  done
  local obj=$dir/obj-$name
  rm -rf "$obj" && mkdir -p "$obj"
  for s in "${srcs[@]}"; do
    objs+=("$obj/$(basename "${s%.c}").o")
    # shellcheck disable=SC2086
    "$CC" $BASE_CFLAGS "${flags[@]}" -c "$s" -o "${objs[-1]}" &
  done
  wait
  for s in "${objs[@]}"; do [[ -f $s ]] || die "lib$name: compiling $(basename "$s" .o).c failed"; done
  rm -f "$PREFIX/lib/lib$name.a"
  "$AR" rcsD "$PREFIX/lib/lib$name.a" "${objs[@]}"
}

# ---- SQLite -----------------------------------------------------------------
build_sqlite() {
  local stamp="${VERSION[sqlite3]} $BASE_CFLAGS ${SQLITE_DEFS[*]}"
  stamp_ok sqlite3 "$stamp" && { log "sqlite3 ${VERSION[sqlite3]}: up to date"; return; }
  fetch sqlite3
  local dir
  dir=$(unpack sqlite3)
  log "sqlite3 ${VERSION[sqlite3]}: generating the amalgamation (native configure, tclsh)"
  command -v tclsh >/dev/null || die "tclsh not found (apt-get install tcl)"
  mkdir -p "$dir/bld"
  (cd "$dir/bld" && ../configure --disable-tcl >configure.log 2>&1 && make -j"$JOBS" sqlite3.c >make.log 2>&1) ||
    die "sqlite3: generating sqlite3.c failed (see $dir/bld/*.log)"
  log "sqlite3: compiling with MinGW"
  build_lib sqlite3 "$dir" "${SQLITE_DEFS[@]}" -- "$dir/bld/sqlite3.c"
  cp "$dir/bld/sqlite3.h" "$dir/bld/sqlite3ext.h" "$PREFIX/include/"
  echo "$stamp" >"$PREFIX/stamps/sqlite3"
}

# ---- civetweb ---------------------------------------------------------------
build_civetweb() {
  local stamp="${VERSION[civetweb]} $BASE_CFLAGS ${CIVETWEB_DEFS[*]} $(sha256sum <"$CIVETWEB_POLL_H")"
  stamp_ok civetweb "$stamp" && { log "civetweb ${VERSION[civetweb]}: up to date"; return; }
  fetch civetweb
  local dir
  dir=$(unpack civetweb)
  log "civetweb ${VERSION[civetweb]}: compiling with MinGW"
  build_lib civetweb "$dir" "${CIVETWEB_DEFS[@]}" -include "$CIVETWEB_POLL_H" -I"$dir/include" -- "$dir/src/civetweb.c"
  cp "$dir/include/civetweb.h" "$PREFIX/include/"
  echo "$stamp" >"$PREFIX/stamps/civetweb"
}

# ---- cJSON ------------------------------------------------------------------
build_cjson() {
  local stamp="${VERSION[cjson]} $BASE_CFLAGS"
  stamp_ok cjson "$stamp" && { log "cjson ${VERSION[cjson]}: up to date"; return; }
  fetch cjson
  local dir
  dir=$(unpack cjson)
  log "cjson ${VERSION[cjson]}: compiling with MinGW"
  build_lib cjson "$dir" -- "$dir/cJSON.c"
  cp "$dir/cJSON.h" "$PREFIX/include/cjson/"
  echo "$stamp" >"$PREFIX/stamps/cjson"
}

# ---- expat ------------------------------------------------------------------
# expat's own CMake fails on Debian's patched tree (a patch tests
# `#if XML_DTD == 1`, the generated header defines XML_DTD empty), so its
# configuration header is written here.
build_expat() {
  local stamp="${VERSION[expat]} $BASE_CFLAGS ${EXPAT_DEFS[*]}"
  stamp_ok expat "$stamp" && { log "expat ${VERSION[expat]}: up to date"; return; }
  fetch expat
  local dir
  dir=$(unpack expat)
  cat >"$dir/expat/lib/expat_config.h" <<'EOF'
/* expat_config.h - written by scripts/deps_windows.sh for MinGW-w64. */
#ifndef EXPAT_CONFIG_H
#define EXPAT_CONFIG_H 1
#define BYTEORDER 1234
#define HAVE_STDINT_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STRING_H 1
#define HAVE_INTTYPES_H 1
#define HAVE_SYS_TYPES_H 1
#define HAVE_SYS_STAT_H 1
#define STDC_HEADERS 1
#define PACKAGE "expat"
#define PACKAGE_NAME "expat"
#define PACKAGE_VERSION "2.5.0"
#define XML_CONTEXT_BYTES 1024
#define XML_DTD 1
#define XML_NS 1
#endif
EOF
  log "expat ${VERSION[expat]}: compiling with MinGW"
  build_lib expat "$dir" "${EXPAT_DEFS[@]}" -I"$dir/expat/lib" -- \
    "$dir/expat/lib/xmlparse.c" "$dir/expat/lib/xmlrole.c" "$dir/expat/lib/xmltok.c"
  cp "$dir/expat/lib/expat.h" "$dir/expat/lib/expat_external.h" "$PREFIX/include/"
  echo "$stamp" >"$PREFIX/stamps/expat"
}

# ---- protobuf-c (the runtime) ----------------------------------------------
# The pprof export's serializer: one C file; the message code is generated
# at build time by the host's protoc-c (protobuf-c-compiler, the same
# version), so only the runtime is built here.
build_protobuf_c() {
  local stamp="${VERSION[protobuf-c]} $BASE_CFLAGS"
  stamp_ok protobuf-c "$stamp" && { log "protobuf-c ${VERSION[protobuf-c]}: up to date"; return; }
  fetch protobuf-c
  local dir
  dir=$(unpack protobuf-c)
  log "protobuf-c ${VERSION[protobuf-c]}: compiling the runtime with MinGW"
  build_lib protobuf-c "$dir" -I"$dir" -- "$dir/protobuf-c/protobuf-c.c"
  mkdir -p "$PREFIX/include/protobuf-c"
  cp "$dir/protobuf-c/protobuf-c.h" "$PREFIX/include/protobuf-c/"
  echo "$stamp" >"$PREFIX/stamps/protobuf-c"
}

# ---- zlib -------------------------------------------------------------------
# The pprof export's gzip: the library's sources as win32/Makefile.gcc
# compiles them (gz* too: a whole zlib, though the export only deflates).
# bookworm's release, the Linux build's zlib1g; +deb12u1 changes only
# minizip (CVE-2023-45853), which is not built here.
build_zlib() {
  local stamp="${VERSION[zlib]} $BASE_CFLAGS"
  stamp_ok z "$stamp" && { log "zlib ${VERSION[zlib]}: up to date"; return; }
  fetch zlib
  local dir f srcs=()
  dir=$(unpack zlib)
  for f in adler32 compress crc32 deflate gzclose gzlib gzread gzwrite infback inffast inflate \
           inftrees trees uncompr zutil; do
    srcs+=("$dir/$f.c")
  done
  log "zlib ${VERSION[zlib]}: compiling with MinGW"
  build_lib z "$dir" -I"$dir" -- "${srcs[@]}"
  cp "$dir/zlib.h" "$dir/zconf.h" "$PREFIX/include/"
  echo "$stamp" >"$PREFIX/stamps/z"
}

ensure_deb_src
build_cjson
build_expat
build_civetweb
build_sqlite
build_protobuf_c
build_zlib
log "ok: $PREFIX/lib: $(cd "$PREFIX/lib" && echo lib*.a)"
