#!/usr/bin/env bash
# mutants.sh - do the tests catch deliberate bugs? (issue 30, item 4)
#
#   scripts/mutants.sh [NAME...]    run every mutant (or the ones named)
#   scripts/mutants.sh --list       name each mutant and the file it edits
#
# A mutant is a small, exact edit of one source file that plants a known
# bug: scripts/mutants/NAME.patch, a unified diff (its first lines, before
# the diff, say what the bug is). For each mutant, one at a time, in a
# scratch copy of the working tree (tracked and untracked, not ignored,
# files; under ${TMPDIR:-/tmp}, kept between runs so a run rebuilds only
# what changed):
#   1. the patch is applied with `patch --fuzz=0`: a patch that no longer
#      applies exactly (the code moved or changed) FAILS the run (refresh
#      the mutant, see below), and so does one that leaves the file as it
#      was;
#   2. the copy is rebuilt incrementally, as the fast tier builds (ASan +
#      UBSan, -DCW_WERROR=ON, Debug), in one build folder shared by every
#      mutant: a mutant that does not compile FAILS the run (a mutant must
#      compile: fix it);
#   3. the fast tier's Linux tests run, `ctest -L
#      'unit|integration|fuzz-replay' -j2 --stop-on-failure` with the fast
#      tier's counts (CW_TIER=fast, CW_RANDOM_TRACES=500) and
#      CW_CHECKS_QUIET=1: some test must fail. The
#      first failing test is named with the first lines of its output, so
#      a reader can see it failed because of the mutant;
#   4. the file is restored.
# One line per mutant, `mutant NAME: caught by TEST (N s)` or `mutant NAME:
# SURVIVED (N s)` (or DOES NOT APPLY, BUILD FAILED, or ERROR: ctest failed
# without a failed test), then `mutants: N caught, M survived` (and how
# many did not apply, build or test). Exit 1 unless every mutant was
# caught; 2 on a usage error or when the unmutated copy does not build.
# Logs: the scratch folder's logs/ (NAME.patch.log, .build.log, .ctest.log).
#
# The suite is not run unmutated first: the caller (the full tier) runs it
# green before. A mutant that survives is a gap in the tests: add a unit
# test that catches it (and passes without it), do not weaken the mutant.
#
# Adding or refreshing a mutant: copy the file, edit the copy, and
#   diff -u --label a/PATH --label b/PATH PATH edited > scripts/mutants/NAME.patch
# from the repository's root; put a comment of what it breaks above the
# `---` line (patch ignores it).
#
# Environment: CW_MUTANTS_WORK, the scratch folder (default
# ${TMPDIR:-/tmp}/commitwatch-mutants-UID-HASH of this checkout's path);
# CW_MUTANTS_JOBS, build and ctest jobs (default 2). Time: about 2 min for
# the first build of the copy, then each mutant is an incremental build
# and the tests until the first failure.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MUT_DIR=$ROOT/scripts/mutants
JOBS=${CW_MUTANTS_JOBS:-2}

die() {
  echo "mutants.sh: $*" >&2
  exit 2
}

all_names() {
  local p
  for p in "$MUT_DIR"/*.patch; do
    [[ -e $p ]] || continue
    p=${p##*/}
    echo "${p%.patch}"
  done
}

# The files a patch edits (its +++ lines, without the b/ prefix).
patch_files() {
  sed -n 's|^+++ b/\([^[:space:]]*\).*|\1|p' "$1"
}

names=()
list=0
for arg in "$@"; do
  case $arg in
  --list) list=1 ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  -*) die "unknown option $arg (see --help)" ;;
  *)
    [[ -f $MUT_DIR/$arg.patch ]] || die "no mutant $arg (scripts/mutants/$arg.patch); --list names them"
    names+=("$arg")
    ;;
  esac
done
((${#names[@]})) || mapfile -t names < <(all_names)
((${#names[@]})) || die "no mutants in $MUT_DIR"

if ((list)); then
  for n in "${names[@]}"; do
    desc=$(sed -n '/^--- /q; s/^# \{0,1\}//p' "$MUT_DIR/$n.patch" | sed -n 1p)
    printf '%-22s %-36s %s\n' "$n" "$(patch_files "$MUT_DIR/$n.patch" | paste -sd ' ')" "$desc"
  done
  exit 0
fi

for tool in git patch cmake ctest cmp flock; do
  command -v "$tool" >/dev/null || die "$tool is missing (scripts/deps.sh --test installs the build's tools)"
done

hash=$(printf '%s' "$ROOT" | cksum | cut -d' ' -f1)
WORK=${CW_MUTANTS_WORK:-${TMPDIR:-/tmp}/commitwatch-mutants-$(id -u)-$hash}
SRC=$WORK/src
BUILD=$WORK/build
LOGS=$WORK/logs
mkdir -p "$SRC" "$LOGS"
exec 9>"$WORK/lock"
flock -n 9 || die "another mutants.sh run holds $WORK (CW_MUTANTS_WORK sets another folder)"

# The copy: every file of the working tree that git would commit, copied
# only when its content differs (a fresh mtime, so the build sees it),
# and the copy's files that are no longer in the tree removed.
sync_tree() {
  local f n=0
  local -A want=()
  while IFS= read -r -d '' f; do
    [[ -f $ROOT/$f ]] || continue # deleted in the working tree
    want[$f]=1
    if ! cmp -s "$ROOT/$f" "$SRC/$f"; then
      mkdir -p "$SRC/$(dirname "$f")"
      rm -f "$SRC/$f"
      cp --preserve=mode "$ROOT/$f" "$SRC/$f"
      n=$((n + 1))
    fi
  done < <(git -C "$ROOT" ls-files -z --cached --others --exclude-standard)
  while IFS= read -r -d '' f; do
    f=${f#"$SRC"/}
    [[ -n ${want[$f]-} ]] || rm -f "$SRC/$f"
  done < <(find "$SRC" -path "$SRC/web/node_modules" -prune -o -type f -print0)
  # What the tests need beside the tracked files: the dashboard's npm
  # packages (git ignores web/node_modules; scripts/deps.sh installs them),
  # copied as they are (the HTTP server serves no file whose real path
  # leaves web/), and ../shared (the real .etl traces of test_etl_real),
  # linked. Without them those tests fail whatever the mutant.
  local nm=web/node_modules
  if [[ -d $ROOT/$nm ]]; then
    if ! cmp -s "$ROOT/$nm/.package-lock.json" "$SRC/$nm/.package-lock.json"; then
      rm -rf "${SRC:?}/$nm"
      cp -a "$ROOT/$nm" "$SRC/$nm"
    fi
  else
    echo "mutants.sh: warning: no $ROOT/$nm (scripts/deps.sh --test installs it): the dashboard's tests will fail" >&2
  fi
  if [[ -d $ROOT/../shared ]]; then
    ln -sfn "$(cd "$ROOT/.." && pwd)/shared" "$WORK/shared"
  else
    rm -f "$WORK/shared"
  fi
  echo "mutants.sh: copy of the working tree in $SRC ($n files updated)"
}

# Puts a mutated file back as the working tree has it (a fresh mtime).
restore() {
  local f
  for f in "$@"; do
    rm -f "$SRC/$f"
    cp --preserve=mode "$ROOT/$f" "$SRC/$f"
  done
}
mutated=()
on_exit() {
  ((${#mutated[@]} == 0)) || restore "${mutated[@]}"
}
trap on_exit EXIT

sync_tree
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  cmake -S "$SRC" -B "$BUILD" "${gen[@]}" -DCW_WERROR=ON -DCW_SANITIZE=ON \
    -DCMAKE_BUILD_TYPE=Debug >"$LOGS/configure.log" 2>&1 ||
    { tail -n 30 "$LOGS/configure.log" >&2; die "configuring the copy failed ($LOGS/configure.log)"; }
fi
t=$SECONDS
if ! nice cmake --build "$BUILD" -j"$JOBS" >"$LOGS/build-base.log" 2>&1; then
  grep -m 20 -E 'error|Error' "$LOGS/build-base.log" >&2 || tail -n 30 "$LOGS/build-base.log" >&2
  die "the unmutated copy does not build ($LOGS/build-base.log)"
fi
echo "mutants.sh: unmutated copy built in $((SECONDS - t)) s; ${#names[@]} mutant(s)"

caught=0 survived=0 broken=0
start=$SECONDS
for name in "${names[@]}"; do
  patchf=$MUT_DIR/$name.patch
  log=$LOGS/$name
  t=$SECONDS
  mapfile -t files < <(patch_files "$patchf")
  if ((${#files[@]} == 0)); then
    echo "mutant $name: DOES NOT APPLY (no +++ b/FILE line in $patchf)"
    broken=$((broken + 1))
    continue
  fi
  mutated=("${files[@]}")
  if ! patch -d "$SRC" -p1 --fuzz=0 --forward --batch --no-backup-if-mismatch -r - \
    <"$patchf" >"$log.patch.log" 2>&1; then
    echo "mutant $name: DOES NOT APPLY (the code moved: refresh $patchf)"
    sed 's/^/    /' "$log.patch.log"
    restore "${files[@]}"
    mutated=()
    broken=$((broken + 1))
    continue
  fi
  same=()
  for f in "${files[@]}"; do
    cmp -s "$ROOT/$f" "$SRC/$f" && same+=("$f")
  done
  if ((${#same[@]})); then
    echo "mutant $name: DOES NOT APPLY (${same[*]} unchanged after the patch)"
    restore "${files[@]}"
    mutated=()
    broken=$((broken + 1))
    continue
  fi
  if ! nice cmake --build "$BUILD" -j"$JOBS" >"$log.build.log" 2>&1; then
    echo "mutant $name: BUILD FAILED ($((SECONDS - t)) s; a mutant must compile: fix $patchf)"
    grep -m 10 -E 'error:' "$log.build.log" | sed 's/^/    /' || true
    restore "${files[@]}"
    mutated=()
    broken=$((broken + 1))
    continue
  fi
  # Tests start in the order CMake declares them, the unit tests first
  # (the quick ones, which catch most mutants): without these files ctest
  # would start the slowest tests of the last run, and its failed ones,
  # first.
  rm -f "$BUILD"/Testing/Temporary/CTestCostData.txt "$BUILD"/Testing/Temporary/LastTestsFailed*.log
  rc=0
  # e2e_test_design_tree is left out: it compares docs/DESIGN.md's tree
  # with the folders git knows, and the copy is not a git checkout, so as
  # root or in CI (where a missing prerequisite fails) it failed whatever
  # the mutant, and a mutant no other test caught counted as caught.
  (cd "$BUILD" && CW_CHECKS_QUIET=1 CW_TIER=fast CW_RANDOM_TRACES=500 nice ctest -L 'unit|integration|fuzz-replay' \
    -E '^e2e_test_design_tree$' -j"$JOBS" --timeout 600 \
    --stop-on-failure --output-on-failure >"$log.ctest.log" 2>&1) || rc=$?
  restore "${files[@]}"
  mutated=()
  secs=$((SECONDS - t))
  # The first test ctest reports as not passed (Failed, Timeout, a
  # signal; a test skipped for a missing prerequisite, exit 77, is not a
  # failure, and --stop-on-failure goes on past it).
  first=$(grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*' "$log.ctest.log" |
    grep -m 1 -v '\*\*\*Skipped' || true)
  if ((rc == 0)); then
    echo "mutant $name: SURVIVED ($secs s)"
    survived=$((survived + 1))
    continue
  fi
  if [[ -z $first || $first == *'Not Run'* ]]; then
    # Not a test that caught the mutant: ctest itself, or a test program
    # missing. Not counted as caught.
    echo "mutant $name: ERROR ($secs s; ctest exit $rc without a failed test: $log.ctest.log)"
    { [[ -n $first ]] && echo "$first"; tail -n 5 "$log.ctest.log"; } | sed 's/^/    /'
    broken=$((broken + 1))
    continue
  fi
  test=$(sed -E 's/^.*Test +#[0-9]+: ([^ ]+) .*/\1/' <<<"$first")
  how=$(sed -E 's/^.*\*\*\*//; s/ +[0-9.]+ sec$//' <<<"$first")
  echo "mutant $name: caught by $test ($secs s)"
  # Its output (--output-on-failure prints it after its line; the tests
  # print what failed first: the unit tests' assertions, the end-to-end
  # checks with CW_CHECKS_QUIET=1): its first lines. (Not `head`: it
  # stops reading, the sed before it dies of SIGPIPE, and under pipefail
  # the assignment's failure ended the script after a long test output.)
  why=$(sed -E -n "/Test +#[0-9]+: $test /,/^ *([0-9]+\/[0-9]+ Test |Start +[0-9]+:|[0-9]+% tests)/p" \
    "$log.ctest.log" | sed -E '1d; /^ *([0-9]+\/[0-9]+ Test |Start +[0-9]+:|[0-9]+% tests)/d; /^\s*$/d' |
    sed -n 1,4p | cut -c1-300)
  echo "    $how: ${why//$'\n'/$'\n'    }"
  caught=$((caught + 1))
done
echo "mutants: $caught caught, $survived survived$( ((broken)) && echo ", $broken did not apply, build or test") ($((SECONDS - start)) s)"
((survived == 0 && broken == 0))
