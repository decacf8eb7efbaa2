#!/usr/bin/env bash
# One fault model (issue 11, item 3): a backend fault is `fail` in every kind
# (exit 1, never the bad-input `error`, exit 2), the reason naming the slot,
# the call index, the step (generation) and the shapes. The faulty backends
# (tests/backends/faulty.c) and their must-fail cases (cases/detect/faults.yaml):
#   ref-nan         NaN logit in the 2nd forward  (before: error in batch_consistency, exit 2)
#   ref-bad-length  cache_length one too many     (before: pass in both kinds)
#   ref-oom         out of memory in the 2nd forward (before: fail, no call or shapes)
#   ref-noop-reset  cache_reset does nothing         (before: pass; item 4)
#   ref-bad-bytes   cache_bytes below the layout     (before: pass; item 4)
#   ref-no-own-key  a fully padded row comes back NaN (before: pass; item 4)
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init honest_faults
cd "$GF_SRC"
T="$GF_BUILD/tests/backends"
set +e
"$GENFENCE" run --raw-verdicts cases/detect/faults.yaml --backend "$T/libgenfence_test_faulty_ref_nan.so" \
    --backend "$T/libgenfence_test_faulty_ref_bad_length.so" --backend "$T/libgenfence_test_faulty_ref_oom.so" \
    --backend "$T/libgenfence_test_faulty_ref_noop_reset.so" --backend "$T/libgenfence_test_faulty_ref_bad_bytes.so" \
    --backend "$T/libgenfence_test_faulty_ref_no_own_key.so" --backend "$T/libgenfence_test_faulty_ref_half_bytes.so" \
    --no-report --no-triangulate -j 2 --oversubscribe >"$tmp/out" 2>&1
rc=$?
set -e
cat "$tmp/out"
[[ $rc -eq 1 ]] || fail "exit $rc, want 1 (backend faults are failures, not bad input)"
n=$(grep -c '^detect\.fault\.' <("$GENFENCE" list cases/detect/faults.yaml))
[[ $(grep -c '^FAIL .*detect\.fault\.' "$tmp/out") -eq $n ]] || fail "want $n FAIL lines"
reason() { grep -A1 "^FAIL .*$1 " "$tmp/out" | tail -n 1; }
for id in nan.cache nan.batch; do
    reason "detect.fault.$id" | gf_grepq -Eq "forward call #2 \(B [0-9]+, T [0-9]+, (cache length|uncached, keys) [0-9]+\): logit \(row 0, position [0-9]+, token 7\) is NaN" \
        || fail "$id: $(reason "detect.fault.$id")"
done
for id in bad_length.cache bad_length.seeded; do
    reason "detect.fault.$id" | gf_grepq -Eq "forward call #1 \(B 1, T ([0-9]+), cache length 0\): cache_length is [0-9]+ after it; the contract says [0-9]+" \
        || fail "$id: $(reason "detect.fault.$id")"
done
reason detect.fault.bad_length.seeded | gf_grepq -q "generate: prefill of " || fail "the seeded case does not name the generation step"
reason detect.fault.nan.batch | gf_grepq -q "generate: step 1 " || fail "the batch case does not name the step"
for id in oom.cache oom.batch; do
    reason "detect.fault.$id" | gf_grepq -Eq "out of device memory \(injected.*forward call #2 \(B [0-9]+, T [0-9]+, .*\): out of memory" \
        || fail "$id: $(reason "detect.fault.$id")"
done
reason detect.fault.noop_reset | gf_grepq -Eq "cache_reset returned GF_OK but cache_length is [1-9][0-9]* after it; the contract says 0" \
    || fail "noop_reset: $(reason detect.fault.noop_reset)"
reason detect.fault.bad_bytes | gf_grepq -Eq "cache_bytes covers the layout: cache_bytes 64 for \(2, L [0-9]+, B 1, H_kv [0-9]+, (length|max_len) [1-9]" \
    || fail "bad_bytes: $(reason detect.fault.bad_bytes)"
reason detect.fault.half_bytes | gf_grepq -Eq "cache_bytes covers the layout: cache_bytes [0-9]+ for .* elements of kv f32 at 4 bytes" \
    || fail "half_bytes: $(reason detect.fault.half_bytes)"
reason detect.fault.no_own_key | gf_grepq -Eq "own key: a fully padded query row: .*forward call #[0-9]+ \(B 2, T [0-9]+, uncached.*logit \(row 1, .* is NaN" \
    || fail "no_own_key: $(reason detect.fault.no_own_key)"
echo "ok   one fault model: $n backend faults, all fail, exit 1"
