#!/usr/bin/env bash
# The real-model tooling (tools/real_model/, docs/real_model.md) on a tiny
# model, so `make test` checks what `make real-model` runs without the
# download (make real-model itself is not part of make test):
#   1. tests/support/make_tiny_gguf.py writes models/holmes-llama as a
#      llama.cpp-style GGUF whose metadata says bos 510, eos 511,
#      add_bos_token false;
#   2. tools/real_model/convert_gguf.py turns it back with transformers:
#      config.json must carry the GGUF's eos 511 and bos 510 (transformers'
#      export alone writes eos 510, the bug it fixes), tokenizer.json no
#      bos-prepending post-processor, and genfence's logits on the result
#      must equal holmes-llama's (F32 round trip, q/k un-permuted);
#   3. tools/real_model/real_model.sh on it (GF_REAL_MODEL, a two-case
#      template, ref): goldens from transformers with their fp32_spread, the
#      run passes; a golden case's atol_rule is recorded.
# Skipped, saying why, without the gguf / transformers packages or the
# trained holmes-llama weights.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init real_model_tools
src="$GF_SRC/models/holmes-llama"
[[ -f $src/model.safetensors ]] || { echo "real_model_tools: SKIP: models/holmes-llama has no weights"; exit 0; }
"$GF_PYTHON" -c "import gguf, transformers, torch" 2>/dev/null ||
    { echo "real_model_tools: SKIP: $GF_PYTHON lacks gguf, transformers or torch"; exit 0; }
export HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error TQDM_DISABLE=1

"$GF_PYTHON" "$GF_SRC/tests/support/make_tiny_gguf.py" "$src" "$tmp/tiny.gguf" 510 511
"$GF_PYTHON" "$GF_SRC/tools/real_model/convert_gguf.py" "$tmp/tiny.gguf" "$tmp/hf" | tee "$tmp/conv.out"
grep -q "fixed: eos 510 -> 511" "$tmp/conv.out" || fail "the converter did not report fixing transformers' eos"
"$GF_PYTHON" - "$tmp/hf" <<'PY' || fail "the converted directory's special tokens"
import json, os, sys
d = sys.argv[1]
c = json.load(open(os.path.join(d, "config.json")))
assert (c["bos_token_id"], c["eos_token_id"]) == (510, 511), (c["bos_token_id"], c["eos_token_id"])
t = json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))
assert t.get("post_processor") is None, t.get("post_processor")
tc = json.load(open(os.path.join(d, "tokenizer_config.json")))
assert tc["eos_token"] == "<|endoftext|>" and tc["add_bos_token"] is False, tc
PY
toks=5,100,200,300,400,17,42
"$GENFENCE" forward --model "$src" --tokens $toks --out "$tmp/a.safetensors" >/dev/null
"$GENFENCE" forward --model "$tmp/hf" --tokens $toks --out "$tmp/b.safetensors" >/dev/null
"$GF_PYTHON" - "$tmp/a.safetensors" "$tmp/b.safetensors" <<'PY' || fail "the converted model's logits differ from holmes-llama's"
import sys
import numpy as np
from safetensors.numpy import load_file
a, b = (load_file(p)["logits"] for p in sys.argv[1:])
d = float(np.abs(a.astype(np.float64) - b).max())
print(f"converted vs original: max |delta| {d:.3g} over {a.shape}")
assert a.shape == b.shape and d <= 1e-5, d
PY

cat >"$tmp/cases.yaml" <<'YAML'
cases:
  - id: cache.tiny
    kind: cache_equals_recompute
    model: @MODEL@
    prompt: "Sherlock Holmes"
    steps: 6
  - id: golden.greedy.tiny
    kind: golden_generation
    model: @MODEL@
    golden: @GOLDEN@/golden.greedy.tiny.safetensors
    prompts: ["Sherlock Holmes"]
    max_new_tokens: 6
YAML
rc=0
GF_REAL_CACHE="$tmp/cache" GF_REAL_MODEL="$tmp/hf" GF_REAL_CASES="$tmp/cases.yaml" GF_REAL_BACKENDS=ref \
    "$GF_SRC/tools/real_model/real_model.sh" "$GENFENCE" "$GF_PYTHON" >"$tmp/run.out" 2>&1 || rc=$?
cat "$tmp/run.out"
[[ $rc -eq 0 ]] || fail "real_model.sh exited $rc"
grep -Eq '^pass +golden\.greedy\.tiny \[ref\]' "$tmp/run.out" || fail "the golden case did not pass on ref"
grep -Eq '^pass +cache\.tiny \[ref\]' "$tmp/run.out" || fail "the cache case did not pass on ref"
"$GF_PYTHON" - "$tmp/cache/reports/run.json" "$tmp/cache/golden/golden.greedy.tiny.safetensors" <<'PY' || fail "atol_rule / fp32_spread"
import json, sys
from safetensors import safe_open
spread = float(safe_open(sys.argv[2], "np").metadata()["fp32_spread"])
assert 0 < spread < 1e-4, spread
r = [r for r in json.load(open(sys.argv[1]))["results"] if r["id"] == "golden.greedy.tiny"][0]
rule = r["metrics"]["atol_rule"]
assert abs(rule["fp32_spread"] - spread) <= 1e-12 and rule["spread_k"] == 8 and rule["atol_fp32"] == max(1e-4, 8 * spread), rule
print(f"fp32_spread {spread:.3g}, atol {rule['atol_fp32']:.3g}: {rule['rule']}")
PY
echo "ok   real-model tooling: GGUF -> HF with the GGUF's special tokens, goldens and a run on the result"
