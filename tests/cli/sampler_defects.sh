#!/usr/bin/env bash
# Issue 34's sampler defects, through genfence run (the loader-side two are
# tests/bad-inputs entries):
#  - vllm's all -inf row: the filters are no-ops and nothing is kept, so a
#    top_k_fence expecting `keep: []` passes (it failed with "kept [0]": the
#    chain returned a one-hot at token 0);
#  - sampler_probs check names carry every non-default field (by the field
#    table), not only profile, T, k and p.
set -uo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?set GF_SRC to the source tree}"
source "$GF_SRC/tests/support/test_lib.sh"
gf_test_init sampler_defects

cat >"$tmp/c.yaml" <<'YAML'
cases:
  - id: d.neginf.fence
    kind: top_k_fence
    logits: [-.inf, -.inf, -.inf, -.inf]
    profile: vllm
    expect:
      - {k: 2, keep: []}
  - id: d.names
    kind: sampler_probs
    probs: [0.5, 0.3, 0.1, 0.06, 0.04]
    expect:
      - {profile: llamacpp, top_k: 3, min_p: 0.1, kept_max: 3}
      - {profile: llamacpp, top_k: 3, min_p: 0.5, repetition_penalty: 1.2, history: [1, 2],
         chain: [penalties, top_k, min_p, temperature], kept_max: 3}
      - {profile: hf, top_k: 3, typical_p: 0.9, min_tokens_to_keep: 2, kept_max: 3}
YAML
rc=0
GENFENCE_ROOT="$GF_SRC" "$GENFENCE" run --backend ref -j 1 --report-dir "$tmp/r" "$tmp/c.yaml" >"$tmp/out" 2>&1 || rc=$?
[ $rc -eq 0 ] || { cat "$tmp/out"; fail "run exited $rc, want 0"; }
grep -q '^pass .*d\.neginf\.fence' "$tmp/out" || { cat "$tmp/out"; fail "the all -inf fence (keep: []) did not pass"; }
for want in \
    'line 12: llamacpp T=1 k=3 p=off min_p=0.1 kept <= 3' \
    'line 13: llamacpp T=1 k=3 p=off chain=[penalties,top_k,min_p,temperature] min_p=0.5 repetition_penalty=1.2 history=[1,2] kept <= 3' \
    'line 15: hf T=1 k=3 p=off typical_p=0.9 min_tokens_to_keep=2 kept <= 3'; do
    grep -qF "\"name\": \"$want\"" "$tmp/r/run.json" || {
        grep -o '"name": "line [^"]*"' "$tmp/r/run.json" | sort -u | head -20
        fail "no check named '$want'"
    }
done
echo "sampler_defects: ok"
