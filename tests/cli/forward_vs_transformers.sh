#!/usr/bin/env bash
# genfence forward (ref backend) against Hugging Face transformers on PyTorch:
# max |delta logit| <= 1e-4 at every position, and identical greedy tokens
# (a divergence is excused only where the transformers margin is below 1e-4).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_PYTHON:?}"
model="$GF_SRC/models/holmes-gpt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prompts=("Sherlock Holmes" "It was a dark night and" "My dear Watson, said he, I"
         "“You have been in Afghanistan, I perceive.”" "The £5 note—quite genuine—lay on the table.")
i=0
for p in "${prompts[@]}"; do
    "$GF_PYTHON" "$GF_SRC/tools/reference.py" --model "$model" --text "$p" --out "$tmp/ref$i.safetensors" \
        --greedy 32 --threads 1 > "$tmp/ref$i.json"
    "$GENFENCE" forward --model "$model" --prompt "$p" --out "$tmp/gf$i.safetensors"
    "$GENFENCE" generate --model "$model" --prompt "$p" --temperature 0 --max-new-tokens 32 --no-eos --json \
        > "$tmp/gen$i.json"
    i=$((i + 1))
done
"$GF_PYTHON" - "$tmp" "$i" <<'PY'
import json, sys
import numpy as np
from safetensors.numpy import load_file
tmp, n = sys.argv[1], int(sys.argv[2])
bad = 0
worst = 0.0
for i in range(n):
    ref, gf = load_file(f"{tmp}/ref{i}.safetensors"), load_file(f"{tmp}/gf{i}.safetensors")
    if not np.array_equal(ref["tokens"], gf["tokens"]):
        print(f"prompt {i}: token ids differ: transformers {ref['tokens'].tolist()} genfence {gf['tokens'].tolist()}")
        bad += 1
        continue
    d = float(np.abs(ref["logits"].astype(np.float64) - gf["logits"]).max())
    worst = max(worst, d)
    rj = json.load(open(f"{tmp}/ref{i}.json"))
    gj = json.load(open(f"{tmp}/gen{i}.json"))
    want, got, margins = rj["greedy_tokens"], gj["tokens"], rj["margins"]
    div = next((k for k, (a, b) in enumerate(zip(want, got)) if a != b), -1)
    if len(got) != len(want) and div < 0:
        div = min(len(got), len(want))
    ok_tokens = div < 0 or (div < len(margins) and margins[div] < 1e-4)
    status = "ok" if d <= 1e-4 and ok_tokens else "FAIL"
    print(f"prompt {i}: {len(ref['tokens'])} tokens, max |delta logit| {d:.3e}, greedy 32 "
          f"{'equal' if div < 0 else f'diverge at {div} (margin {margins[div]:.3e})'}, "
          f"min margin {min(margins):.4f} -> {status}")
    bad += status != "ok"
print(f"worst max |delta logit| {worst:.3e} (bound 1e-4)")
print(f"{n - bad} passed, {bad} failed")
sys.exit(1 if bad else 0)
PY
