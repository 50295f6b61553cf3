#!/usr/bin/env bash
# wine_run.sh - runs a Windows program of the cross build under Wine, in a
# private 64-bit prefix, without a display, stdin from /dev/null; the
# CMAKE_CROSSCOMPILING_EMULATOR of cmake/toolchain-mingw64.cmake, so ctest
# runs every test .exe through it.
#
#   scripts/wine_run.sh PROGRAM.exe [ARGS...]   exit status: the program's exit code mod 256
#   scripts/wine_run.sh --init [--persistent]   create the prefix afresh and boot it; with
#                                               --persistent, start its wineserver for good
#                                               (until --stop)
#   scripts/wine_run.sh --stop                  end the prefix's wineserver and its programs
#
# The prefix is $WINEPREFIX (the Windows build's ctest sets one under the
# build folder and re-creates it once per run, tests/CMakeLists.txt), else
# ${XDG_CACHE_HOME:-~/.cache}/commitwatch/wine64. A prefix that does not
# exist yet is booted before the first program runs. Wine 8 wants the boot
# finished (wineboot -i, then wineserver -w) before anything else starts in
# a new prefix (../shared/WINDOWS.md).
#
# CW_WINE_OWN=1 (with CW_WINE_CHILD=1) makes the prefix the program's
# alone: booted afresh before it, with a persistent wineserver whose
# messages go to PREFIX.wineserver.log, and removed after it (the log too
# when the program passed). tests/CMakeLists.txt gives one to each unit
# test that opens sockets, so that a wineserver abort (below) skips that
# test alone instead of ending every program of the shared prefix.
#
# CW_WINE_STDIN=keep passes the caller's standard input to the program
# instead of /dev/null (a test holds a workload open through a pipe:
# memorytestapp.exe --hold runs until its stdin closes). CW_WINE_CHILD=1
# runs the program as a child and exits 77 when its wineserver crashed
# (the watchdog below).
set -euo pipefail

export WINEPREFIX=${WINEPREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/commitwatch/wine64}
export WINEARCH=win64
export WINEDEBUG=${WINEDEBUG:--all}
# No Mono or Gecko install prompts; no X11 or Wayland windows.
export WINEDLLOVERRIDES="mscoree,mshtml="
unset DISPLAY WAYLAND_DISPLAY

command -v wine >/dev/null || { echo "wine_run: wine not found (scripts/deps.sh --windows)" >&2; exit 127; }

boot() {
  local rc=0
  mkdir -p "$WINEPREFIX"
  # Wine's messages go to a file, shown when the boot fails: one boot of
  # a private prefix, beside other tests, exited 53 within 1.5 s with its
  # output discarded. 53 is the low byte of STATUS_DLL_NOT_FOUND
  # (0xC0000135), which is what a boot exits with when a program it
  # starts cannot load a DLL (docs/WINDOWS.md); the log names the DLL.
  wine wineboot -i </dev/null >/dev/null 2>"$WINEPREFIX.boot.log" || rc=$?
  if ((rc)); then
    echo "wine_run: wineboot -i of $WINEPREFIX failed (exit $rc); Wine said:" >&2
    tail -n 20 "$WINEPREFIX.boot.log" >&2
    exit 1
  fi
  wineserver -w
  rm -f "$WINEPREFIX.boot.log"
  [[ -f $WINEPREFIX/system.reg ]] || { echo "wine_run: wineboot did not create $WINEPREFIX" >&2; exit 1; }
}

case "${1:-}" in
  --init)
    # Only a folder that is a Wine prefix (or empty) is ever removed: one
    # with Wine's registry, or with the dosdevices and drive_c a boot
    # creates first (a boot that was killed leaves those alone).
    if [[ -d $WINEPREFIX ]]; then
      [[ -f $WINEPREFIX/system.reg || -z $(ls -A "$WINEPREFIX") ||
         ( -d $WINEPREFIX/dosdevices && -d $WINEPREFIX/drive_c ) ]] ||
        { echo "wine_run: $WINEPREFIX is not a Wine prefix; not removing it" >&2; exit 1; }
      wineserver -k 2>/dev/null || true
      rm -rf "$WINEPREFIX"
    fi
    boot
    if [[ ${2:-} == --persistent ]]; then
      # A persistent wineserver for the prefix's life (ended by --stop).
      # Debian's wineserver otherwise exits as soon as no program runs
      # (-p0) and the next program starts a new one; a client whose new
      # server fails exits with the server's status and prints nothing
      # (Wine 8's start_server), which is how a test .exe can fail in
      # 0.02 s without running main(). Started after the boot's
      # `wineserver -w`, never before (../shared/WINDOWS.md). The first
      # program of a server starts services.exe and its helpers, which
      # keep that program's standard output and error open as long as the
      # server lives: a first program with /dev/null, here, so that no
      # test's pipe stays open after the test (ctest would wait for it).
      wineserver -p 2>>"$WINEPREFIX.wineserver.log" </dev/null >/dev/null ||
        { echo "wine_run: wineserver -p failed (log: $WINEPREFIX.wineserver.log)" >&2; exit 1; }
      wine cmd /c exit </dev/null >/dev/null 2>&1
      echo "wine_run: prefix $WINEPREFIX ready, with a persistent wineserver ($(wine --version))"
    else
      echo "wine_run: prefix $WINEPREFIX ready ($(wine --version))"
    fi
    exit 0
    ;;
  --stop)
    [[ -d $WINEPREFIX ]] && { wineserver -k 2>/dev/null || true; }
    exit 0
    ;;
  "" | -h | --help)
    sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac

if [[ ${CW_WINE_OWN:-} == 1 ]]; then
  [[ ${CW_WINE_CHILD:-} == 1 ]] || { echo "wine_run: CW_WINE_OWN=1 needs CW_WINE_CHILD=1" >&2; exit 2; }
  rm -f "$WINEPREFIX.wineserver.log"
  "$0" --init --persistent >/dev/null
fi
# The end of a prefix of the program's own (CW_WINE_OWN=1), with the
# program's exit status rc.
own_done() {
  [[ ${CW_WINE_OWN:-} == 1 ]] || return 0
  wineserver -k 2>/dev/null || true
  rm -rf "$WINEPREFIX"
  (($1 == 0)) && rm -f "$WINEPREFIX.wineserver.log"
  return 0
}
if [[ ! -f $WINEPREFIX/system.reg ]]; then
  # Two programs starting at once in a new prefix boot it once.
  mkdir -p "$(dirname "$WINEPREFIX")"
  exec 9>"$WINEPREFIX.lock"
  flock 9
  [[ -f $WINEPREFIX/system.reg ]] || boot
  flock -u 9
  exec 9>&-
fi
# A watchdog beside the program: Wine 8's wineserver aborts now and then
# (server/sock.c, complete_async_poll: "Assertion `output->count ==
# signaled_count' failed"; tests/unit/test_http.c and
# tests/e2e/cwservice.py say what sets it off), and its programs then
# hang until their test's timeout. The watchdog notes the prefix's
# wineserver (the process whose working folder is the prefix's
# server-DEV-INODE folder) when it first sees it; when that process is
# gone, at two looks a second apart, while the program still runs, it
# says so on the program's standard error, with the end of the server's
# log, and ends the program: a failure named at once, not after ctest's
# timeout. The server is known by its pid: another program of the prefix
# starts a new one at once, and the crashed server's programs stay hung
# (a 2026-12-05 run of test_http.exe beside the unit tests hung so).
# With CW_WINE_CHILD=1 (the unit tests, tests/CMakeLists.txt) the program
# runs as this script's child, and a program ended so exits 77: its
# test is shown as skipped, a Wine failure and not its own; otherwise the
# script becomes the program (signals reach it: tests/e2e/cwservice.py
# stops a service with SIGINT) and a program ended so exits 137. The
# watchdog holds none of the program's outputs, so it never delays
# their end.
watchdog() {
  local prog=$1 mark=$2 st server pid=
  st=$(stat -c '%d %i' "$WINEPREFIX") || return 0
  server=server-$(printf '%x-%x' $st)
  while running "$prog"; do
    if [[ -z $pid ]]; then
      pid=$(server_pid "$server")
    elif ! is_server "$pid" "$server"; then
      # Gone at two looks a second apart: one look can miss a live server
      # (the readlink failing on a loaded machine; a CI run killed a
      # program whose server was still there and said nothing).
      sleep 1
      running "$prog" || return 0
      is_server "$pid" "$server" && continue
      {
        echo "wine_run: the prefix's wineserver crashed while the program ran (a Wine bug: docs/WINDOWS.md); stopping the program"
        [[ -f $WINEPREFIX.wineserver.log ]] && tail -n 3 "$WINEPREFIX.wineserver.log"
        [[ -n $mark ]] && echo "wine_run: the program's result is unknown: exit 77 (skipped)"
      } >>"/proc/$prog/fd/2" 2>/dev/null
      [[ -n $mark ]] && : >"$mark"
      kill -KILL "$prog" 2>/dev/null
      return 0
    fi
    sleep 1
  done
}
# The program is there and not a zombie (its exit not yet reaped).
running() {
  [[ -e /proc/$1 ]] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null
}
# Is pid the prefix's wineserver (its working folder the server folder)?
is_server() {
  [[ $(readlink "/proc/$1/cwd" 2>/dev/null) == */"$2" ]]
}
# The pid of the prefix's wineserver, or nothing.
server_pid() {
  local p
  for p in $(pgrep -x 'wineserver|wineserver64'); do
    is_server "$p" "$1" && { echo "$p"; return 0; }
  done
  return 0
}
if [[ ${CW_WINE_CHILD:-} == 1 ]]; then
  mark=$(mktemp "${TMPDIR:-/tmp}/wine_run.XXXXXX")
  rm -f "$mark"
  if [[ ${CW_WINE_STDIN:-} == keep ]]; then
    wine "$@" <&0 &
  else
    wine "$@" </dev/null &
  fi
  prog=$!
  watchdog "$prog" "$mark" </dev/null >/dev/null 2>&1 &
  rc=0
  t0=$SECONDS
  wait "$prog" || rc=$?
  if [[ -f $mark ]]; then
    rm -f "$mark"
    own_done 77
    exit 77
  fi
  # A failure says how the program ended: a test .exe that fails within
  # a fraction of a second with no output at all (a CI run's test_store,
  # 0.12 s) did not reach main(), or crashed (WINEDEBUG=-all keeps Wine
  # quiet); its exit status tells which (0xC0000005 & 255 = 5: an access
  # violation; 53: a DLL not found).
  if ((rc)); then
    echo "wine_run: $1 exited with status $rc after $((SECONDS - t0)) s" >&2
  fi
  own_done "$rc"
  exit "$rc"
fi
watchdog $$ "" </dev/null >/dev/null 2>&1 &
if [[ ${CW_WINE_STDIN:-} == keep ]]; then
  exec wine "$@"
fi
exec wine "$@" </dev/null
