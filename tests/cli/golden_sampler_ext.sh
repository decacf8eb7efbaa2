#!/usr/bin/env bash
# A golden of a case with a sampler profile and filters (golden_generation
# with profile/chain/min_p/...): `genfence bless` records the whole sampler in
# the golden's "sampler" metadata (the profile, chain and every filter, not
# only temperature/top_k/top_p/seed), the golden passes on the backend that
# made it, and changing one filter (min_p, a logit bias, the chain) makes it
# stale (exit 1, the case hash named), never a silent pass. A case without
# profile or filters still records exactly the four plain keys, as every
# golden made before profiles.
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?set GF_SRC}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init golden_sampler_ext
if [[ ! -f "$GF_SRC/models/holmes-gpt/model.safetensors" ]]; then
  echo "golden_sampler_ext: models/holmes-gpt is not trained; nothing to check"
  exit 0
fi

# case FILE MIN_P BIAS CHAIN: the filtered case, and a plain one beside it
case_file() {
  cat >"$1" <<YAML
cases:
  - id: gext.filters
    kind: golden_generation
    model: $GF_SRC/models/holmes-gpt
    prompts: ["Sherlock Holmes", "My dear Watson"]
    max_new_tokens: 8
    temperature: 0.8
    seed: 7
    profile: llamacpp
    chain: $4
    top_k: 40
    min_p: $2
    logit_bias: {$3: -.inf}
    repetition_penalty: 1.1
    atol: 1.0e-4
  - id: gext.plain
    kind: golden_generation
    model: $GF_SRC/models/holmes-gpt
    prompts: ["Sherlock Holmes"]
    max_new_tokens: 8
    temperature: 0.8
    seed: 7
    atol: 1.0e-4
YAML
}
# run FILE -> $out, $rc
run() { set +e; "$GENFENCE" run "$1" --backend ref --golden-dir "$tmp/gold" --no-report >"$tmp/out" 2>&1; rc=$?; set -e; out=$(cat "$tmp/out"); }

case_file "$tmp/c.yaml" 0.05 13 "[penalties, top_k, min_p, temperature]"
set +e
"$GENFENCE" bless --backend ref --out-dir "$tmp/gold" "$tmp/c.yaml" >"$tmp/bout" 2>&1
rc=$?
set -e
[[ $rc == 0 ]] || { cat "$tmp/bout"; fail "bless: exit $rc"; }

# the recorded sampler: every extension field for the filtered case, the four plain keys otherwise
"$PY" - "$tmp/gold/gext.filters.safetensors" "$tmp/gold/gext.plain.safetensors" <<'PY' || fail "the golden's sampler metadata"
import json, struct, sys
def meta(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))["__metadata__"]
s = json.loads(meta(sys.argv[1])["sampler"])
want = {"profile": "llamacpp", "chain": ["penalties", "top_k", "min_p", "temperature"], "min_p": 0.05,
        "typical_p": None, "repetition_penalty": 1.1, "top_k": 40, "top_p": None, "temperature": 0.8, "seed": 7,
        "logit_bias": {"13": float("-inf")}, "min_tokens_to_keep": 1, "penalty_last_n": -1}
for k, v in want.items():
    assert k in s and s[k] == v, (k, s.get(k), v, s)
p = json.loads(meta(sys.argv[2])["sampler"])
assert sorted(p) == ["seed", "temperature", "top_k", "top_p"], p
print("ok   the golden records the profile, chain and filters; a plain case the four plain keys")
PY

run "$tmp/c.yaml"
[[ $rc == 0 ]] || { echo "$out"; fail "the blessed goldens do not pass on ref (exit $rc)"; }
grep -q '^total: 2 passed, 0 failed, 0 skipped$' <<<"$out" || { echo "$out"; fail "round trip summary"; }
echo "ok   both blessed goldens pass on ref"

# one filter changed at a time: the filtered golden is stale, the plain one still passes
stale() { # what MIN_P BIAS CHAIN
  case_file "$tmp/e.yaml" "$2" "$3" "$4"
  run "$tmp/e.yaml"
  [[ $rc == 1 ]] || { echo "$out"; fail "$1: exit $rc, want 1 (stale)"; }
  grep -Eq '^STALE +gext\.filters \[ref\]' <<<"$out" || { echo "$out"; fail "$1: gext.filters not stale"; }
  grep -q 'is stale: case hash' <<<"$out" || { echo "$out"; fail "$1: the stale reason names no case hash"; }
  grep -Eq '^pass +gext\.plain \[ref\]' <<<"$out" || { echo "$out"; fail "$1: gext.plain did not pass"; }
  echo "ok   $1 changed: the golden is stale"
}
stale "min_p" 0.1 13 "[penalties, top_k, min_p, temperature]"
stale "logit_bias" 0.05 14 "[penalties, top_k, min_p, temperature]"
stale "chain" 0.05 13 "[penalties, min_p, top_k, temperature]"
echo "golden_sampler_ext: ok"
