#!/usr/bin/env bash
# The project's own catalogue of planted bugs (issue 32 item 3), each run
# through the default suite as a user runs it: `genfence run` and nothing
# else (for a mutant of examples/plugin, `genfence run --backend PLUGIN.so`,
# the default suite on the plugin). Not in CI: it is slow (a rebuild and a
# default suite per mutant, ten suites per harmless variant).
#
#   tests/mutants/run.sh [--build DIR] [--only GLOB] [--seeds N] [--full-seeds]
#                        [--exitfirst] [--tsv FILE] [--work DIR]
#
# Each tests/mutants/<area>/<name>.patch is a unified diff (-p1, against the
# repository root) whose first line is `# mutant: WHAT` (a bug: the suite
# must fail it) or `# harmless: WHAT` (a refactor: the suite must pass it).
# The tree is copied (without .git and build folders) into WORK/tree
# (default ${TMPDIR:-/tmp}/genfence-mutants), configured once into the build
# folder (default WORK/build; --build DIR reuses one), and every mutant is
# applied there, built incrementally (only what it touched), run, reverted.
#
#   mutant   exit 1: caught; exit 0: missed; anything else, or a failed
#            build or patch: error (a broken mutant, to be fixed)
#   harmless run with GENFENCE_SEED_SHIFT = each of the seeds (keys.h: the
#            seeds of sampling_distribution, speculative_sampling and
#            seeded_reproducibility shifted): exit 0 on every one:
#            harmless-ok, else harmless-failing; error as above. The first
#            seed runs the whole default suite; the others run the cases the
#            shift changes (--kind of those three kinds: every other case of
#            the suite draws nothing from the shift and would run again
#            unchanged); --full-seeds runs the whole suite on every seed.
#
# The seeds: the unmutated tree is run first with shifts 0, 1, 2 ... (the
# same way) and the first N shifts (--seeds, default 10) on which it passes
# are the ones every harmless variant runs on. A shift the unmutated tree
# fails is printed (baseline-fails): the statistical tier's own false
# failures (alpha 1e-3 per chi-square case), not a variant's.
#
# --exitfirst adds -x to each mutant's run (it stops at the first failure:
# the same exit status, sooner); harmless variants always run whole.
# --only GLOB keeps the patches whose path under tests/mutants/ matches
# (e.g. 'engine/*', '*/harmless_*'). The table goes to stdout, the TSV to
# --tsv (default WORK/mutants.tsv): area, name, type, outcome, exit
# statuses, seconds, what.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${TMPDIR:-/tmp}/genfence-mutants
BUILD=
ONLY='*'
SEEDS=10
EXITFIRST=0
FULL_SEEDS=0
TSV=
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --exitfirst) EXITFIRST=1; shift ;;
    --full-seeds) FULL_SEEDS=1; shift ;;
    --tsv) TSV=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -h|--help) sed -n '2,44p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $SEEDS =~ ^[0-9]+$ && $SEEDS -ge 1 ]] || { echo "run.sh: --seeds needs an integer >= 1" >&2; exit 2; }
BUILD=${BUILD:-$WORK/build}
TSV=${TSV:-$WORK/mutants.tsv}
TREE=$WORK/tree
mkdir -p "$WORK" "$BUILD" || exit 2
LOG=$WORK/logs
mkdir -p "$LOG"

# the patches, in a stable order
mapfile -t PATCHES < <(cd "$SRC/tests/mutants" && find . -name '*.patch' | sed 's|^\./||' | LC_ALL=C sort)
SEL=()
for p in "${PATCHES[@]}"; do
  # shellcheck disable=SC2053
  [[ $p == $ONLY ]] && SEL+=("$p")
done
[[ ${#SEL[@]} -gt 0 ]] || { echo "run.sh: no patch matches '$ONLY'" >&2; exit 2; }

# the scratch tree: the working tree as it is (git's tracked and untracked,
# not ignored files; uncommitted edits included), copied by content: a file
# that differs (one a previous, interrupted run left mutated) is rewritten,
# so it is newer than its object and rebuilt
python3 - "$SRC" "$TREE" <<'PY' || { echo "run.sh: cannot copy the tree to $TREE" >&2; exit 2; }
import os, shutil, subprocess, sys
src, dst = sys.argv[1:3]
files = subprocess.run(["git", "-C", src, "ls-files", "-co", "--exclude-standard", "-z"], check=True,
                       capture_output=True).stdout.decode().split("\0")
for f in filter(None, files):
    s, d = os.path.join(src, f), os.path.join(dst, f)
    if not os.path.isfile(s) or os.path.islink(s):
        continue
    with open(s, "rb") as a:
        data = a.read()
    if os.path.isfile(d):
        with open(d, "rb") as b:
            if b.read() == data:
                continue
    os.makedirs(os.path.dirname(d), exist_ok=True)
    with open(d, "wb") as b:  # a new mtime: newer than its object, so rebuilt
        b.write(data)
    shutil.copymode(s, d)
PY
[[ -e $WORK/shared || ! -e $SRC/../shared ]] || ln -s "$(cd "$SRC/../shared" && pwd)" "$WORK/shared"

TARGETS=(genfence genfence_backend_openblas genfence_backend_onednn genfence_backend_cuda genfence_backend_exec
         genfence_echo_ref genfence_test_example_plugin)
build() {
  cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}" >"$1" 2>&1
}
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  echo "configuring $BUILD (once)"
  cmake -S "$TREE" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$LOG/configure.log" 2>&1 ||
    { echo "run.sh: configure failed: $LOG/configure.log" >&2; exit 2; }
fi
echo "building the unmutated tree"
build "$LOG/build-base.log" || { echo "run.sh: the unmutated tree does not build: $LOG/build-base.log" >&2; exit 2; }
GF=$BUILD/genfence
PLUGIN=$BUILD/tests/backends/libgenfence_test_example_plugin.so

# the suite as a user runs it; $1 the area, $2 the log, $3 extra flags
suite() {
  local args=(run)
  [[ $1 == plugin ]] && args+=(--backend "$PLUGIN")
  # shellcheck disable=SC2206
  args+=($3)
  (cd "$TREE" && timeout 3600 "$GF" "${args[@]}") >"$2" 2>&1
}

# one seed of a harmless variant (or the baseline): $1 area, $2 log, $3 the
# seed's rank (0: the first); the whole suite on the first seed
SEEDED_KINDS="--kind sampling_distribution --kind speculative_sampling --kind seeded_reproducibility"
seeded() {
  local flags=""
  [[ $3 -gt 0 && $FULL_SEEDS == 0 ]] && flags=$SEEDED_KINDS
  suite "$1" "$2" "$flags"
}

# the baseline: which seed shifts the unmutated tree passes (default backends
# and the plugin), the first SEEDS of them kept
need_seeds=0 need_plugin=0
for p in "${SEL[@]}"; do
  if head -1 "$SRC/tests/mutants/$p" | grep -q '^# harmless:'; then
    need_seeds=1
    [[ ${p%%/*} == plugin ]] && need_plugin=1
  fi
done
GOOD_SEEDS=()
BASE_FAILS=()
if [[ $need_seeds == 1 ]]; then
  s=0
  while [[ ${#GOOD_SEEDS[@]} -lt $SEEDS && $s -lt $((SEEDS * 3)) ]]; do
    GENFENCE_SEED_SHIFT=$s seeded default "$LOG/base-seed$s.log" "${#GOOD_SEEDS[@]}"; r1=$?
    r2=0
    [[ $need_plugin == 1 ]] && { GENFENCE_SEED_SHIFT=$s seeded plugin "$LOG/base-plugin-seed$s.log" "${#GOOD_SEEDS[@]}"; r2=$?; }
    if [[ $r1 == 0 && $r2 == 0 ]]; then
      GOOD_SEEDS+=("$s")
    else
      BASE_FAILS+=("$s")
      echo "baseline-fails: seed shift $s (exit $r1 default, $r2 plugin): $(grep -h -m3 '^  FAIL' "$LOG/base-seed$s.log" "$LOG/base-plugin-seed$s.log" 2>/dev/null | tr -s ' ' | tr '\n' ';')"
    fi
    s=$((s + 1))
  done
  echo "seed shifts: ${GOOD_SEEDS[*]} (unmutated fails: ${BASE_FAILS[*]:-none})"
fi

printf 'area\tname\ttype\toutcome\texits\tseconds\twhat\n' >"$TSV"
declare -A COUNT=()
t_all=$(date +%s)
for p in "${SEL[@]}"; do
  area=${p%%/*}
  name=$(basename "$p" .patch)
  head1=$(head -1 "$SRC/tests/mutants/$p")
  type=${head1#\# }
  type=${type%%:*}
  what=${head1#*: }
  t0=$(date +%s)
  outcome=error
  exits=-
  tag=${p//\//_}
  if [[ $type != mutant && $type != harmless ]]; then
    exits="no header"
  elif ! (cd "$TREE" && patch -p1 --batch --silent --fuzz=0 --reject-file=- <"$SRC/tests/mutants/$p") >"$LOG/$tag.patch.log" 2>&1; then
    exits="patch failed"
  else
    if ! build "$LOG/$tag.build.log"; then
      exits="build failed"
    elif [[ $type == mutant ]]; then
      flags=""
      [[ $EXITFIRST == 1 ]] && flags="-x"
      suite "$area" "$LOG/$tag.run.log" "$flags"
      rc=$?
      exits=$rc
      case $rc in 1) outcome=caught ;; 0) outcome=missed ;; *) outcome=error ;; esac
    else
      outcome=harmless-ok
      exits=""
      rank=0
      for s in "${GOOD_SEEDS[@]}"; do
        GENFENCE_SEED_SHIFT=$s seeded "$area" "$LOG/$tag.seed$s.log" "$rank"
        rc=$?
        rank=$((rank + 1))
        exits+="${exits:+,}$rc"
        if [[ $rc == 1 ]]; then outcome=harmless-failing; elif [[ $rc != 0 ]]; then outcome=error; break; fi
      done
    fi
    (cd "$TREE" && patch -R -p1 --batch --silent --fuzz=0 --reject-file=- <"$SRC/tests/mutants/$p") >>"$LOG/$tag.patch.log" 2>&1 ||
      { echo "run.sh: cannot revert $p in $TREE" >&2; exit 2; }
  fi
  secs=$(($(date +%s) - t0))
  COUNT[$outcome]=$((${COUNT[$outcome]:-0} + 1))
  printf '%-9s %-34s %-8s %-16s %-22s %4ss  %s\n' "$area" "$name" "$type" "$outcome" "$exits" "$secs" "$what"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$area" "$name" "$type" "$outcome" "$exits" "$secs" "$what" >>"$TSV"
done
# the tree as it was, and its build (the next run starts from it)
build "$LOG/build-base.log" >/dev/null 2>&1

caught=${COUNT[caught]:-0} missed=${COUNT[missed]:-0}
echo
echo "totals: caught $caught, missed $missed, error ${COUNT[error]:-0}, harmless-ok ${COUNT[harmless-ok]:-0}, harmless-failing ${COUNT[harmless-failing]:-0}"
[[ $((caught + missed)) -gt 0 ]] &&
  awk -v c="$caught" -v m="$missed" 'BEGIN { printf "caught: %.1f%% of %d mutants that ran\n", 100 * c / (c + m), c + m }'
[[ $need_seeds == 1 ]] && echo "seed shifts: ${GOOD_SEEDS[*]}; the unmutated tree fails: ${BASE_FAILS[*]:-none}"
echo "wall: $(($(date +%s) - t_all)) s for the mutants (the baseline before); TSV: $TSV; logs: $LOG"
