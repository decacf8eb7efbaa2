#!/usr/bin/env bash
# Console (issue 11, item 8): option errors name the option (before: "bad
# value '4/3' for 4/3"), an unknown flag is answered in one line (before: the
# whole usage), `list` and `run` agree on a filter that matches nothing (both
# exit 2 with the same words; before: list printed "0 cases", exit 0), and a
# failing run ends with a recap of its failures.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init honest_console
cd "$GF_SRC"
usage_err() { # want (grep -F), args...
    local want=$1 rc
    shift
    set +e
    "$GENFENCE" "$@" >"$tmp/o" 2>"$tmp/e"
    rc=$?
    set -e
    [[ $rc -eq 2 ]] || fail "$*: exit $rc, want 2"
    [[ $(wc -l <"$tmp/e") -eq 1 ]] || { cat "$tmp/e"; fail "$*: $(wc -l <"$tmp/e") lines on stderr, want 1"; }
    grep -qF -- "$want" "$tmp/e" || fail "$*: '$(cat "$tmp/e")' does not say '$want'"
    echo "ok   $*: $(cat "$tmp/e")"
}
usage_err "bad value '4/3' for --shard" run --shard 4/3
usage_err "bad value '0' for -j" run -j 0
usage_err "bad value '0' for -j" run -j0
usage_err "bad value 'x' for --threads" run --threads x
usage_err "bad value '-1' for --timeout" run --timeout -1
usage_err "unknown or incomplete option '--bogus'" run --bogus
usage_err "no case matches the filters" run --filter '^no-such-case$' --no-report
usage_err "no case matches the filters" list --filter '^no-such-case$'

# the recap: every failure again at the end, after the last result line
set +e
"$GENFENCE" run --raw-verdicts cases/detect/faults.yaml --backend "$GF_BUILD/tests/backends/libgenfence_test_faulty_ref_nan.so" \
    --backend "$GF_BUILD/tests/backends/libgenfence_test_faulty_ref_oom.so" --no-report --no-triangulate -j 2 --oversubscribe >"$tmp/out" 2>&1
rc=$?
set -e
cat "$tmp/out"
[[ $rc -eq 1 ]] || fail "failing run: exit $rc"
grep -qx 'failures (4):' "$tmp/out" || fail "no 'failures (4):' recap"
awk '/^failures \(/{r=1; next} r && /^  FAIL +detect\.fault\./{n++} END{exit n==4?0:1}' "$tmp/out" || fail "the recap does not list the 4 failures"
last_result=$(grep -n '^FAIL ' "$tmp/out" | tail -n 1 | cut -d: -f1)
recap=$(grep -n '^failures (' "$tmp/out" | cut -d: -f1)
[[ $recap -gt $last_result ]] || fail "the recap is not after the results"
echo "ok   console: option errors, one-line answers, list = run, failure recap"
