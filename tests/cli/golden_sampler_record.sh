#!/usr/bin/env bash
# The golden's sampler record (docs/goldens.md), checked twice over:
# 1. golden_generation compares the golden's stored "sampler" metadata with
#    the case's sampler field by field, beside the case hash: a committed
#    golden whose record was edited (temperature changed; a filter key added;
#    a field removed) reads stale (exit 1) naming the field, though its case
#    hash, model hash and data_sha256 still match; the untouched golden passes.
# 2. tools/reference/golden.py implements no sampler profile or filter key, so
#    it refuses a case naming one (min_p; profile; logit_bias) with exit 2 and a
#    message naming the key, writing nothing; the plain case beside it in the
#    same file is written once the filtered case is filtered out.
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?set GF_SRC}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init golden_sampler_record
if [[ ! -f "$GF_SRC/models/holmes-gpt/model.safetensors" ]]; then
  echo "golden_sampler_record: models/holmes-gpt is not trained; nothing to check"
  exit 0
fi
"$PY" -c 'import safetensors, numpy' 2>/dev/null || fail "$PY lacks safetensors/numpy (run tools/setup.sh)"
G="$PY $GF_SRC/tools/reference/golden.py"

# ---- 1. an edited sampler record is stale, naming the field ----
R="$tmp/root"
mkdir -p "$R/cases" "$R/golden" "$R/models"
: >"$R/CMakeLists.txt"
ln -s "$GF_SRC/models/holmes-gpt" "$R/models/holmes-gpt"
cp "$GF_SRC/cases/golden.yaml" "$R/cases/golden.yaml"
cp "$GF_SRC/golden/golden.sampled.sherlock.safetensors" "$tmp/orig.safetensors"
export GENFENCE_ROOT="$R"
cd "$R"
run() { set +e; "$GENFENCE" run cases/golden.yaml --filter '^golden\.sampled\.sherlock$' --backend ref --no-report >"$tmp/out" 2>&1; rc=$?; set -e; out=$(cat "$tmp/out"); }
# edit EXPR: the golden's sampler record s (a dict) edited by the Python statement EXPR
edit() {
  cp "$tmp/orig.safetensors" golden/golden.sampled.sherlock.safetensors
  "$PY" - "$GF_SRC/tools/reference" golden/golden.sampled.sherlock.safetensors "$1" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import golden
t, m = golden.read_golden(sys.argv[2])
s = json.loads(m["sampler"])
exec(sys.argv[3])
m["sampler"] = golden.canonical_json(s)
golden.write_golden(sys.argv[2], t, m)
PY
  $G --verify golden/golden.sampled.sherlock.safetensors >/dev/null || fail "the edited golden should verify (only metadata changed)"
}

edit 'pass'
run
[[ $rc == 0 ]] || { echo "$out"; fail "the golden, record rewritten unchanged, should pass (exit $rc)"; }

# stale CASE FIELD: the golden edited by CASE reads stale naming FIELD
stale() {
  edit "$1"
  run
  [[ $rc == 1 ]] || { echo "$out"; fail "record edited by '$1': exit $rc, expected 1"; }
  grep -q '^STALE ' <<<"$out" || { echo "$out"; fail "record edited by '$1': no stale line"; }
  grep -q "sampler record differs from the case's: '$2'" <<<"$out" || { echo "$out"; fail "record edited by '$1': '$2' not named"; }
  grep -q 'case hash [0-9a-f]* in the golden' <<<"$out" && { echo "$out"; fail "record edited by '$1': the case hash should still match"; }
  echo "ok   record edited by $1: stale naming '$2'"
}
stale 's["temperature"] = 0.5' temperature
stale 's["min_p"] = 0.05' min_p
stale 'del s["top_p"]' top_p
stale 's["seed"] = s["seed"] + 1' seed
echo "$out" | grep -m1 'is stale: its sampler record'

# ---- 2. golden.py refuses a filtered case, naming the key ----
cd "$GF_SRC"
unset GENFENCE_ROOT
cat >"$tmp/f.yaml" <<YAML
cases:
  - id: gpy.filtered
    kind: golden_generation
    model: $GF_SRC/models/holmes-gpt
    prompts: ["Sherlock Holmes"]
    max_new_tokens: 4
    temperature: 0.8
    seed: 7
    min_p: 0.05
  - id: gpy.profiled
    kind: golden_generation
    model: $GF_SRC/models/holmes-gpt
    prompts: ["Sherlock Holmes"]
    max_new_tokens: 4
    profile: seed
    logit_bias: {13: -1.0}
  - id: gpy.plain
    kind: golden_generation
    model: $GF_SRC/models/holmes-gpt
    prompts: ["Sherlock Holmes"]
    max_new_tokens: 4
YAML
mkdir -p "$tmp/gold"
set +e; $G --genfence "$GENFENCE" --out-dir "$tmp/gold" "$tmp/f.yaml" >"$tmp/out" 2>&1; rc=$?; set -e
out=$(cat "$tmp/out")
[[ $rc == 2 ]] || { echo "$out"; fail "golden.py on filtered cases: exit $rc, expected 2"; }
grep -q "case gpy.filtered: sampler key 'min_p' .*not implemented by this maker" <<<"$out" || { echo "$out"; fail "min_p not named"; }
grep -q "case gpy.profiled: sampler keys 'profile', 'logit_bias' " <<<"$out" || { echo "$out"; fail "profile, logit_bias not named"; }
grep -q "gpy.plain" <<<"$out" && { echo "$out"; fail "the plain case should not be refused"; }
[[ -z $(ls -A "$tmp/gold") ]] || fail "golden.py wrote $(ls "$tmp/gold") though it refused"
echo "ok   golden.py refuses the filtered cases (exit 2):"
echo "$out" | sed 's/^/       /'
if "$PY" -c 'import torch, transformers' 2>/dev/null; then
  $G --genfence "$GENFENCE" --out-dir "$tmp/gold" --filter '^gpy\.plain$' "$tmp/f.yaml" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "golden.py on the plain case"; }
  [[ -f "$tmp/gold/gpy.plain.safetensors" ]] || fail "the plain case's golden was not written"
  set +e; "$GENFENCE" run "$tmp/f.yaml" --filter '^gpy\.plain$' --backend ref --golden-dir "$tmp/gold" --no-report >"$tmp/out" 2>&1; rc=$?; set -e
  [[ $rc == 0 ]] || { cat "$tmp/out"; fail "the plain case's transformers golden should pass on ref (exit $rc)"; }
  echo "ok   golden.py writes the plain case, which passes on ref"
else
  echo "skip the plain case's golden: $PY lacks torch/transformers"
fi
echo "golden_sampler_record: ok"
