#!/usr/bin/env bash
# Declared dtype governs tolerances (issue 11, item 5): a case's atol is a
# floor for fp32 scaled by the backend's declared compute dtype, ULP(dtype) /
# ULP(fp32) (fp32, fp64 x1; fp16, tf32 x8192; bf16 x65536), so
#   - ref-bf16 (tests/backends/faulty.c: ref's logits rounded to bfloat16,
#     declared bf16) passes the goldens (before: fail, max |delta| over the
#     fixed 1e-4);
#   - ref-bf16-as-fp32 (the same rounding, declared fp32) still fails, the
#     reason naming the scaled atol (cases/detect/dtype.yaml, expect fail).
# The sampled goldens' gate scales the same way (issue 26, item 3): in
# golden.sampled.batch bf16 rounding moves a token across the top-p
# boundary (row 1, step 41: 354 enters the nucleus and wins the race); the
# boundary lies 4.4e-4 from moving, inside bf16's gate, so ref-bf16 passes it
# (pass-near-tie, recorded in boundary_excused) and ref-bf16-as-fp32, at
# fp32's gate, still fails it.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init honest_dtype
cd "$GF_SRC"
[[ -f models/holmes-gpt/model.safetensors ]] || { echo "honest_dtype: models/holmes-gpt not trained: the goldens need it"; exit 0; }
T="$GF_BUILD/tests/backends"
sel=(cases/golden.yaml --filter '^golden\.(greedy\.(sherlock|batch)|sampled\.(sherlock|batch))$')

"$GENFENCE" run "${sel[@]}" --backend "$T/libgenfence_test_faulty_ref_bf16.so" --report-dir "$tmp/h" >"$tmp/out" 2>&1 \
    || { cat "$tmp/out"; fail "the honest bf16 backend did not pass the goldens"; }
cat "$tmp/out"
grep -Eq '^  backend ref-bf16 ' "$tmp/out" || fail "ref-bf16 did not run"
[[ $(grep -Ec '^pass(-near-tie)? .*\[ref-bf16\]' "$tmp/out") -eq 4 ]] || fail "want 4 golden passes on ref-bf16"
"${GF_PYTHON:-python3}" - "$tmp/h/run.json" <<'PY' || fail "the report does not carry the scaled atol"
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["results"]:
    assert r["dtype"] == "bf16", r["dtype"]
    s = json.dumps(r["metrics"])
    assert '"atol": 6.5536' in s and '"atol_case": 0.0001' in s, (r["id"], s[:400])
    if r["id"] == "golden.sampled.batch":
        b = r["metrics"]["boundary_excused"]
        assert any(e["row"] == 1 and e["step"] == 41 for e in b), b
PY

set +e
"$GENFENCE" run --raw-verdicts cases/golden.yaml cases/detect/dtype.yaml \
    --filter '^(golden\.(greedy\.(sherlock|batch)|sampled\.(sherlock|batch))|detect\.dtype\.bf16_as_fp32)$' --backend "$T/libgenfence_test_faulty_ref_bf16_as_fp32.so" --no-report >"$tmp/out" 2>&1
rc=$?
set -e
cat "$tmp/out"
[[ $rc -eq 1 ]] || fail "bf16 declared fp32: exit $rc, want 1"
[[ $(grep -c '^FAIL .*\[ref-bf16-as-fp32\]' "$tmp/out") -eq 5 ]] || fail "want 5 failures on ref-bf16-as-fp32"
grep -Eq "exceeds atol 0.0001$" "$tmp/out" || fail "the reason does not name the fp32 atol"
! grep -q "x 65536 for bf16" "$tmp/out" || fail "an fp32 declaration got the bf16 atol"
echo "ok   the declared dtype scales atol: honest bf16 passes, bf16 declared fp32 fails"
