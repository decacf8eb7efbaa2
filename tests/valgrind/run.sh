#!/usr/bin/env bash
# make test-valgrind (issue 12, item 8): every unit test and a short
# `genfence run` (the parent, its probes and children: fork is followed)
# under valgrind memcheck. Criterion runs each test in a re-executed child
# and does not pass a child's valgrind exit status on, so the verdict comes
# from the logs: every process writes VALGRIND_DIR/<name>.<pid>.log, and any
# log whose ERROR SUMMARY is not 0 (invalid reads/writes, uninitialised
# values, definite leaks) fails the target, named with the log.
#
# Usage: tests/valgrind/run.sh BUILD_DIR [UNIT_TEST_NAME...]
#   VALGRIND_SKIP  unit tests not run (default: test_llama_vendor, which
#                  loads oneDNN's JIT, and test_cuda_model / test_cuda_host,
#                  which need the CUDA module; valgrind knows neither)
set -euo pipefail
BUILD=${1:?usage: tests/valgrind/run.sh BUILD_DIR [TEST...]}
shift
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "test-valgrind: valgrind not installed (make test-valgrind installs it)" >&2; exit 2; }
SKIP=${VALGRIND_SKIP:-test_llama_vendor test_cuda_model test_cuda_host}
out="$BUILD/valgrind"
rm -rf "$out"
mkdir -p "$out"
vg() { # vg NAME COMMAND...
    local name=$1
    shift
    GF_VG_NAME=$name valgrind --trace-children=yes --child-silent-after-fork=no --leak-check=full \
        --errors-for-leak-kinds=definite --show-leak-kinds=definite --error-exitcode=99 \
        --log-file="$out/%q{GF_VG_NAME}.%p.log" "$@"
}
status=0
tests=("$@")
if [[ ${#tests[@]} -eq 0 ]]; then
    for t in "$BUILD"/tests/test_*; do
        [[ -x $t ]] && tests+=("$(basename "$t")")
    done
fi
for t in "${tests[@]}"; do
    if [[ " $SKIP " == *" $t "* ]]; then
        echo "test-valgrind: skip $t (VALGRIND_SKIP)"
        continue
    fi
    start=$SECONDS
    if vg "$t" "$BUILD/tests/$t" --jobs 1 >"$out/$t.out" 2>&1; then
        echo "test-valgrind: ran  $t ($((SECONDS - start)) s)"
    else
        echo "test-valgrind: FAIL $t (exit status; $out/$t.out)"
        tail -n 20 "$out/$t.out"
        status=1
    fi
done
# a short run: a seeded generation on ref (model load, cached forwards, the
# sampler), EOS rows, the stream decoder, the reports; forked (the parent,
# probes and children; a child's leaks at _exit suppressed, genfence.supp),
# then the same in this one process (--in-process), where every leak counts
filter='^(sampling\.seeded|eos\.rows|stream\..*)$'
for mode in forked in-process; do
    start=$SECONDS
    args=(--no-triangulate -j 2)
    sup=(--suppressions=tests/valgrind/genfence.supp)
    [[ $mode == in-process ]] && args=(--no-triangulate --in-process) && sup=()
    set +e
    vg "run-$mode" "${sup[@]}" "$BUILD/genfence" run cases/generation.yaml --filter "$filter" --backend ref \
        "${args[@]}" --timeout 900 --report-dir "$out/report-$mode" >"$out/run-$mode.out" 2>&1
    rc=$?
    set -e
    if [[ $rc -ne 0 ]]; then
        echo "test-valgrind: FAIL genfence run ($mode): exit $rc ($out/run-$mode.out)"
        tail -n 30 "$out/run-$mode.out"
        status=1
    else
        echo "test-valgrind: ran  genfence run ($mode; cases/generation.yaml, 4 cases: $(tail -n 1 "$out/run-$mode.out"); $((SECONDS - start)) s)"
    fi
done
# the verdict: every process's log
bad=0
for log in "$out"/*.log; do
    [[ -e $log ]] || continue
    if grep -q "ERROR SUMMARY: [1-9]" "$log" || grep -q "Exit program on first error" "$log"; then
        echo "test-valgrind: errors in $log:"
        grep -v "^==[0-9]*== *$" "$log" | head -n 60
        bad=$((bad + 1))
    fi
done
n=$(find "$out" -name '*.log' | wc -l)
if [[ $bad -ne 0 ]]; then
    echo "test-valgrind: $bad of $n process logs report errors"
    status=1
else
    echo "test-valgrind: $n process logs, no errors"
fi
exit $status
