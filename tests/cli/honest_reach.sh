#!/usr/bin/env bash
# Not exercised is not pass (issue 11, item 2). Kinds that reach no slot of
# a backend run once, on the engine, reported as [engine]; per backend only
# where the backend has the slot they test; the summary's "tested:" line
# counts what each backend was actually tested on.
#   - ref (no sample slot): the sampler kinds, stream_decode and
#     left_padding_positions are [engine] runs, never "pass [ref]" (before:
#     every one of them was "pass [ref]");
#   - a plugin with a sample slot that is wrong (example-bad-sample, a faulty
#     test backend: expected verdict fail): the sampler kinds run on it and
#     fail; stream_decode and left_padding_positions still run once on the
#     engine, not on it.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init honest_reach
cd "$GF_SRC"
kinds=(--kind top_k_fence --kind stream_decode --kind left_padding_positions)
n_cases=$("$GENFENCE" list "${kinds[@]}" | grep -c '^[a-z]')

"$GENFENCE" run --backend ref "${kinds[@]}" --no-report >"$tmp/out" || { cat "$tmp/out"; fail "ref run exited $?"; }
cat "$tmp/out"
! grep -q '\[ref\]' "$tmp/out" || fail "a kind that reaches no slot of ref is reported as a run on ref"
[[ $(grep -c '^pass .*\[engine\]' "$tmp/out") -eq $n_cases ]] || fail "want $n_cases [engine] passes"
grep -qx "tested: ref on 0 cases; the engine alone on $n_cases (kinds that reach no slot of these backends)" "$tmp/out" \
    || fail "the tested: line"

bad="$GF_BUILD/tests/backends/libgenfence_test_example_bad_sample.so"
set +e
"$GENFENCE" run --backend ref --backend "$bad" "${kinds[@]}" --no-report >"$tmp/out"
rc=$?
set -e
cat "$tmp/out"
[[ $rc -eq 1 ]] || fail "the bad sample slot: exit $rc, want 1"
grep -q '^FAIL .*top_k\.fence \[example-bad-sample\]' "$tmp/out" || fail "top_k.fence did not run (and fail) on the slot"
[[ $(grep -Ec '^(pass|FAIL) .*top_k\.fence ' "$tmp/out") -eq 2 ]] || fail "top_k.fence: want one run on the slot, one on the engine (for ref)"
grep -Eq '^pass .*(stream|left_padding)\..*\[example-bad-sample\]' "$tmp/out" \
    && fail "a kind that reaches no slot is reported as a pass of the plugin"
n_slot=$("$GENFENCE" list --kind top_k_fence | grep -c '^[a-z]') # the top_k_fence cases reach the slot
grep -Eq "^tested: ref on 0 cases, example-bad-sample on $n_slot cases?; the engine alone on $n_cases " "$tmp/out" \
    || fail "the tested: line with the plugin"
echo "ok   not exercised is not pass"
