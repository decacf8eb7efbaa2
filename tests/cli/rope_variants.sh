#!/usr/bin/env bash
# The families and RoPE variants people run (issue 27 item 4), each against
# transformers 4.47.1 goldens, with its must-fail twins.
#
# tools/training/make_rope_variants.py writes tiny seeded checkpoints (Mistral
# with sliding_window 8, Qwen2 with use_sliding_window, YaRN at every band
# edge, longrope at original_max_position_embeddings - 1 / 0 / + 1, dynamic
# NTK at the end of the context, ...) and
# golden_generation cases over them; tools/reference/golden.py makes their
# goldens with transformers. Then:
#   1. every case passes the default gate on ref, openblas and onednn (those
#      available; ref always);
#   2. backend twins (tests/backends/faulty_rope.c) fail exactly the cases
#      their fault reaches and pass the rest: the window one key wider fails
#      the sweep's w + 1 prompt and the long one (vllm 3385), one key narrower
#      also the w prompt; the dropped attention factor fails every YaRN case
#      and the longrope cases past the original length (sglang 31232), and
#      passes longrope at original - 1 and original, where the factor is 1;
#   3. loader twins: genfence forward on a variant misses transformers on the
#      same checkpoint read the way an off-by-one reads it (each YaRN band
#      edge on the other integer, longrope's other factor set at the
#      boundary, dynamic NTK's threshold one lower or read as linear) by more
#      than 10x the 1e-4 gate; dynamic NTK's sweep is seq_len = max - 1 and max
#      (the default frequencies, as 4.47.1 computes them there), its + 1 is
#      past genfence's context (exit 2);
#   4. configs whose meaning depends on the transformers version (yarn
#      mscale without attention_factor, qwen2 max_window_layers != 0, a
#      dynamic threshold other than max_position_embeddings) are refused,
#      exit 2, with the reason;
#   5. llamacpp (when available) skips every case with the model's needs
#      named: its backend declares no model_features. A finding, not a
#      measure of llama.cpp.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_PYTHON:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init rope_variants

v="$tmp/v"
"$GF_PYTHON" "$GF_SRC/tools/training/make_rope_variants.py" --out "$v" > /dev/null 2> "$tmp/make.err" ||
    { cat "$tmp/make.err"; fail "make_rope_variants.py failed"; }
"$GF_PYTHON" "$GF_SRC/tools/reference/golden.py" --genfence "$GENFENCE" --out-dir "$v/golden" "$v/cases.yaml" \
    > "$tmp/golden.out" 2> "$tmp/golden.err" || { cat "$tmp/golden.out" "$tmp/golden.err"; fail "golden.py failed"; }
n_cases=$("$GENFENCE" list "$v/cases.yaml" | grep -c '^rope\.')
[[ $n_cases -eq 21 ]] || fail "expected 21 variant cases, genfence list shows $n_cases"
echo "ok   $n_cases variant cases, goldens made by transformers"

# verdicts BACKEND: "verdict case" lines of a run over the variant cases
verdicts() {
    local rc=0
    "$GENFENCE" run "$v/cases.yaml" --golden-dir "$v/golden" --backend "$1" --no-report > "$tmp/run.out" 2>&1 || rc=$?
    awk '/^[^ ]/ && $1 ~ /^(pass|pass-near-tie|FAIL|skip|stale|ERROR|error|crash|timeout)$/ && $2 ~ /^rope\./ {print tolower($1), $2}' \
        "$tmp/run.out" | sort -k2 > "$tmp/verdicts"
    echo "$rc" > "$tmp/rc"
}
all_ids=$("$GENFENCE" list "$v/cases.yaml" | awk '/^rope\./ {print $1}' | sort)

# 1. every variant on every CPU backend that is here
for be in ref openblas onednn; do
    if [ "$be" != ref ] && ! "$GENFENCE" backends 2>/dev/null | grep -E "^$be +available" > /dev/null; then
        echo "skip $be: not available in this build"
        continue
    fi
    verdicts "$be"
    n_pass=$(grep -cE '^(pass|pass-near-tie) ' "$tmp/verdicts" || true)
    if [[ $n_pass -ne $n_cases || $(cat "$tmp/rc") -ne 0 ]]; then
        cat "$tmp/run.out"
        fail "$be: $n_pass of $n_cases variant cases pass (exit $(cat "$tmp/rc"))"
    fi
    echo "ok   $be: all $n_cases variant cases pass the gate against transformers"
done

# 2. backend twins: exactly these cases fail, every other one passes
expect_fails() { # fault stem, the failing case ids (a regex over the ids)
    local so="$GF_BUILD/tests/backends/libgenfence_test_$1.so" want got
    verdicts "$so"
    want=$(echo "$all_ids" | grep -E "$2" || true)
    got=$(awk '$1 == "fail" {print $2}' "$tmp/verdicts")
    if [ "$want" != "$got" ] || [ "$(cat "$tmp/rc")" -ne 1 ] ||
        [ "$(grep -cE '^(pass|pass-near-tie|fail) ' "$tmp/verdicts")" -ne "$n_cases" ]; then
        cat "$tmp/run.out"
        fail "$1: failing cases differ (exit $(cat "$tmp/rc")); want: $(echo $want); got: $(echo $got)"
    fi
    echo "ok   $1 fails exactly: $(echo $got)"
}
expect_fails rope_window_wide '\.w8\.(p9|long)$'
expect_fails rope_window_narrow '\.w8\.(p8|p9|long)$'
expect_fails rope_no_mscale '^rope\.(yarn\..*|longrope\.orig-plus1|longrope\.factor)$'

# 3. loader twins: genfence on the variant vs transformers on itself and on
# the off-by-one reading (one Python process: torch is imported once)
"$GF_PYTHON" - "$GENFENCE" "$GF_SRC" "$v/twins.json" "$tmp" <<'PY' || fail "a loader twin"
import json, os, subprocess, sys
import numpy as np
import torch
from safetensors.numpy import load_file
genfence, src, twins, tmp = sys.argv[1:5]
sys.path.insert(0, os.path.join(src, "tools", "reference"))
import reference  # noqa: E402
def hf(model, toks):
    with torch.no_grad():
        return reference.load_model(model)(input_ids=torch.tensor([toks])).logits[0].numpy().astype(np.float64)
bad = 0
for model, twin, what, toks in json.load(open(twins)):
    out = os.path.join(tmp, "gf.safetensors")
    subprocess.run([genfence, "forward", "--model", model, "--tokens", ",".join(map(str, toks)), "--out", out],
                   check=True)
    gf = load_file(out)["logits"].astype(np.float64)
    own, off = np.abs(gf - hf(model, toks)).max(), np.abs(gf - hf(twin, toks)).max()
    ok = own <= 1e-4 and off > 1e-3
    bad += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {what}: genfence vs transformers {own:.2e} (<= 1e-4), "
          f"vs the off-by-one reading {off:.2e} (> 1e-3)")
sys.exit(1 if bad else 0)
PY

# dynamic NTK's +1 edge: seq_len = max_position_embeddings + 1, where 4.47.1
# starts scaling, is past genfence's context: refused as bad input
rc=0
"$GENFENCE" forward --model "$v/dynamic.f3.3" --tokens "$(seq -s, 1 65)" --out "$tmp/x.safetensors" \
    > "$tmp/ctx.out" 2>&1 || rc=$?
[[ $rc -eq 2 ]] && gf_grepq -q "65 tokens exceed the model's 64 positions" < "$tmp/ctx.out" ||
    { cat "$tmp/ctx.out"; fail "dynamic at seq_len max + 1: exit $rc, want 2 naming the context"; }
echo "ok   dynamic NTK at seq_len = max_position_embeddings + 1: outside the context (exit 2)"

# 4. refused configs: exit 2 and the reason
while IFS=$'\t' read -r model why; do
    rc=0
    "$GENFENCE" forward --model "$model" --tokens 1,2,3 --out "$tmp/x.safetensors" > "$tmp/refused.out" 2>&1 || rc=$?
    [[ $rc -eq 2 ]] || { cat "$tmp/refused.out"; fail "$(basename "$model"): exit $rc, want 2"; }
    gf_grepq -qE "config.json: .*$why" < "$tmp/refused.out" ||
        { cat "$tmp/refused.out"; fail "$(basename "$model"): the message does not say /$why/"; }
    echo "ok   $(basename "$model") refused: $(head -c 160 "$tmp/refused.out")..."
done < <("$GF_PYTHON" -c '
import json, sys
for m, r in json.load(open(sys.argv[1])):
    print(m, r, sep="\t")' "$v/refused.json")

# 5. llamacpp: every case skipped, the needs named (a finding)
if "$GENFENCE" backends 2>/dev/null | grep -E "^llamacpp +available" > /dev/null; then
    verdicts llamacpp
    n_skip=$(grep -c '^skip ' "$tmp/verdicts" || true)
    [[ $n_skip -eq $n_cases ]] || { cat "$tmp/run.out"; fail "llamacpp: $n_skip of $n_cases skipped"; }
    gf_grepq -q "does not implement what .* needs: sliding-window attention" < "$tmp/run.out" ||
        fail "llamacpp: the skip does not name the sliding window"
    echo "ok   llamacpp: all $n_cases skipped, the model's needs named"
else
    echo "skip llamacpp: not available in this build"
fi
echo "passed"
