#!/usr/bin/env bash
# The protocol's sample message end to end (docs/protocol.md, "sample"): the
# exec module's sample slot, called with no model as genfence's sampler-only
# cases call it, draws exactly genfence's tokens through a client that
# implements docs/sampler.md (tests/backends/exec/sampler_client.py); the
# same client returning the race's runner-up is caught; a client without a
# sampler gives the table no slot.
set -euo pipefail
: "${GF_SRC:?set GF_SRC}" "${GF_BUILD:?set GF_BUILD}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init exec_sample
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
CHECK="$GF_BUILD/tests/backends/exec_sample_check"
MOD="$GF_BUILD/backends/libgenfence_backend_exec.so"
[[ -x "$CHECK" && -f "$MOD" ]] || fail "$CHECK or $MOD not built"
SC="$PY $GF_SRC/tests/backends/exec/sampler_client.py"

out=$("$CHECK" "$MOD" "$SC") || fail "good sampler: $out"
echo "$out"
grep -Eq "^exec_sample_check: [0-9]+ calls, [0-9]+ rows, 0 mismatches" <<<"$out" || fail "good sampler: $out"

set +e
out=$("$CHECK" "$MOD" "$SC --bad"); rc=$?
set -e
echo "$out"
[[ $rc == 1 ]] || fail "runner-up sampler: exit status $rc, expected 1"
grep -q "difference: trial" <<<"$out" || fail "runner-up sampler: no difference reported"

set +e
out=$("$CHECK" "$MOD" "$GF_BUILD/tools/echo_ref"); rc=$?
set -e
echo "$out"
[[ $rc == 1 ]] && grep -q "no sample slot after info" <<<"$out" || fail "echo_ref: $out (exit $rc)"
echo "exec_sample: ok"
