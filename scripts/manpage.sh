#!/usr/bin/env bash
# manpage.sh - write commitwatch(1) from the binary's own help texts with
# help2man: `commitwatch --help` and `--version` for the synopsis, then one
# section per command from `commitwatch COMMAND --help`. The package build
# runs it (cmake/package.cmake); help2man dates the page by
# SOURCE_DATE_EPOCH when it is set.
#
#   scripts/manpage.sh BINARY OUT.1
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: scripts/manpage.sh BINARY OUT.1" >&2; exit 2; }
bin=$1 out=$2
include=$(mktemp)
trap 'rm -f "$include"' EXIT
{
  echo "[COMMANDS IN DETAIL]"
  # The commands as `commitwatch --help` lists them (two spaces, a name).
  for cmd in $("$bin" --help | sed -n 's/^  \([a-z]\+\) .*/\1/p'); do
    [[ $cmd == version ]] && continue
    echo ".SS \"commitwatch $cmd\""
    echo ".nf"
    # Each command's usage text, verbatim; a leading dot or quote would be
    # a roff request.
    "$bin" "$cmd" --help 2>&1 | sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/" || true
    echo ".fi"
  done
  echo "[FILES]"
  echo ".TP"
  echo "/etc/commitwatch/commitwatch.conf"
  echo "the service's configuration (the packaged default: \\fBcommitwatch install --print-config\\fR)"
  echo ".TP"
  echo "/var/lib/commitwatch/commitwatch.db"
  echo "the service's database"
  echo ".TP"
  echo "/usr/share/commitwatch"
  echo "the dashboard (web/) and the default stack tags (stacktags/)"
} > "$include"
help2man --no-info --no-discard-stderr --section 1 \
  --name "continuous, system-wide memory-commit monitoring" \
  --include "$include" --output "$out" "$bin"
