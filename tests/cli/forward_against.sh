#!/usr/bin/env bash
# genfence forward --against REF: the margin gate (verdict/compare.c) over
# every position of one uncached forward, teacher-forced; the C gate that
# tests/support/check_backend.sh runs for the backend-vs-ref checks. ref
# against itself passes with max |delta| 0; ref-noise (2e-3 of noise on
# every logit) fails on atol, and passes with --atol 1e-2; check_backend.sh
# fails on ref-noise too; bad flags exit 2.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init forward_against
model="$GF_SRC/models/holmes-gpt"
noise="$GF_BUILD/tests/backends/libgenfence_test_faulty_ref_noise.so"
[ -f "$noise" ] || fail "test backend $noise not built"
fw=("$GENFENCE" forward --model "$model" --prompt "Sherlock Holmes")

out=$("${fw[@]}" --against ref) || fail "ref against ref: exit $?: $out"
[[ $out == "ok   ref against ref: 5 positions: 5 steps agree; max |delta| 0 at position 0 "* ]] || fail "ref vs ref: $out"
echo "$out"

rc=0
out=$("${fw[@]}" --backend "$noise" --against ref --out "$tmp/noise.safetensors") || rc=$?
[ "$rc" = 1 ] || fail "ref-noise against ref: exit $rc, expected 1: $out"
[[ $out == "FAIL ref-noise against ref: 5 positions: max |delta| "*" at step 0 exceeds atol 0.0001;"* ]] || fail "ref-noise: $out"
[ -s "$tmp/noise.safetensors" ] || fail "a failed gate did not write --out"
echo "ok   must fail: $out"
out=$("${fw[@]}" --backend "$noise" --against ref --atol 1e-2) || fail "ref-noise at atol 1e-2: exit $?: $out"
echo "$out (--atol 1e-2)"

rc=0
"$GF_SRC/tests/support/check_backend.sh" "$GENFENCE" "$model" "$noise" >"$tmp/check.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$tmp/check.out"; fail "check_backend.sh on ref-noise: exit $rc, expected 1"; }
grep -q '^FAIL ref-noise against ref: .*exceeds atol' "$tmp/check.out" || { cat "$tmp/check.out"; fail "check_backend.sh did not fail on the logits"; }
echo "ok   check_backend.sh fails on ref-noise: $(tail -1 "$tmp/check.out")"

for bad in "--atol -1" "--atol x" "--against no-such-backend"; do
    rc=0
    # shellcheck disable=SC2086
    "${fw[@]}" $bad >"$tmp/bad.out" 2>&1 || rc=$?
    [ "$rc" = 2 ] || { cat "$tmp/bad.out"; fail "'$bad': exit $rc, expected 2"; }
done
rc=0
"$GENFENCE" forward --model "$model" --prompt "Sherlock Holmes" >"$tmp/bad.out" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "neither --out nor --against: exit $rc, expected 2"
echo "ok   bad --atol / --against and a missing --out exit 2"
