#!/usr/bin/env bash
# genfence forward (ref backend) against Hugging Face transformers on PyTorch,
# for every family: holmes-gpt (GPT2LMHeadModel), holmes-llama
# (LlamaForCausalLM) and tiny seeded random checkpoints generated here
# (tools/training/make_tiny_llama.py): qwen2 (Qwen2ForCausalLM, q/k/v biases, untied
# lm_head, F32), llama with rope_scaling llama3 stored BF16 in shards
# (model.safetensors.index.json), llama with rope_scaling linear stored F16.
# Per model and prompt: max |delta logit| <= 1e-4 at every position (the long
# prompt reaches positions past 64 and past 128 where the context allows) and
# identical greedy tokens (a divergence is excused only where the transformers
# margin is below 1e-4); a left-padded greedy batch equals each prompt alone.
# Negative control: the llama3 checkpoint with rope_scaling removed from
# config.json must MISS the bound (so the comparison can fail).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init forward_vs_transformers
mk() { "$GF_PYTHON" "$GF_SRC/tools/training/make_tiny_llama.py" --out "$tmp/$1" "${@:2}" > /dev/null; }
mk qwen2 --family qwen2 --untied --seed 3
mk llama3-bf16-sharded --rope-scaling llama3 --dtype bf16 --shard-kb 40 --seed 4
mk linear-f16 --rope-scaling linear --dtype f16 --seed 5
cp -r "$tmp/llama3-bf16-sharded" "$tmp/control-no-scaling"
"$GF_PYTHON" - "$tmp/control-no-scaling/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["rope_scaling"] = None; json.dump(c, open(sys.argv[1], "w"))
PY
n_shards=$(ls "$tmp/llama3-bf16-sharded"/model-*.safetensors | wc -l)
[ "$n_shards" -ge 3 ] || { echo "expected >= 3 shards, got $n_shards"; exit 1; }

long=$(head -c 2200 "$GF_SRC/../shared/data/sherlock-holmes-canon.txt" | tail -c 560 | tr -d '\r')
prompts=("Sherlock Holmes" "It was a dark night and" "My dear Watson, said he, I"
         "“You have been in Afghanistan, I perceive.”" "The £5 note—quite genuine—lay on the table."
         "$long")
models=("$GF_SRC/models/holmes-gpt")
[ -d "$GF_SRC/models/holmes-llama" ] && models+=("$GF_SRC/models/holmes-llama")
models+=("$tmp/qwen2" "$tmp/llama3-bf16-sharded" "$tmp/linear-f16" "$tmp/control-no-scaling")
list="$tmp/list.txt"
: > "$list"
"$GF_PYTHON" -c 'import json, sys; json.dump(sys.argv[2:], open(sys.argv[1], "w"))' "$tmp/prompts.json" "${prompts[@]}"
for model in "${models[@]}"; do
    name=$(basename "$model")
    [ "$name" = control-no-scaling ] || "$GF_PYTHON" "$GF_SRC/tools/reference/reference.py" --model "$model" \
        --texts-file "$tmp/prompts.json" --out "$tmp/ref.$name" --greedy 16 --crop --threads 1
    i=0
    for p in "${prompts[@]}"; do
        tag="$name.$i"
        if [ "$name" = control-no-scaling ]; then
            reftag="llama3-bf16-sharded.$i" # transformers on the real checkpoint
        else
            reftag=$tag # written above: ref.<name>.<i>.safetensors / .json
        fi
        toks=$("$GF_PYTHON" -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompt_tokens"])))' "$tmp/ref.$reftag.json")
        "$GENFENCE" forward --model "$model" --tokens "$toks" --out "$tmp/gf.$tag.safetensors"
        "$GENFENCE" generate --model "$model" --tokens "$toks" --temperature 0 --max-new-tokens 16 --no-eos \
            --json > "$tmp/gen.$tag.json"
        echo "$name $tag $reftag" >> "$list"
        i=$((i + 1))
    done
    if [ "$name" != control-no-scaling ]; then
        "$GENFENCE" generate --model "$model" --batch-prompts "Holmes|${prompts[2]}|${prompts[4]}" \
            --max-new-tokens 16 --no-eos --json > "$tmp/batch.$name.json" || true
        echo "$name batch -" >> "$list"
    fi
done
"$GF_PYTHON" - "$tmp" "$list" <<'PY'
import json, sys
import numpy as np
from safetensors.numpy import load_file
tmp, listing = sys.argv[1], sys.argv[2]
bad, worst, control = 0, {}, []
for line in open(listing):
    name, tag, reftag = line.split()
    if tag == "batch":
        j = json.load(open(f"{tmp}/batch.{name}.json"))
        ok = bool(j.get("batch_consistent", {}).get("passed"))
        print(f"{name}: left-padded greedy batch of 3 (cached and uncached) == each prompt alone -> {'ok' if ok else 'FAIL'}")
        bad += not ok
        continue
    ref, gf = load_file(f"{tmp}/ref.{reftag}.safetensors"), load_file(f"{tmp}/gf.{tag}.safetensors")
    if not np.array_equal(ref["tokens"], gf["tokens"]):
        print(f"{tag}: token ids differ"); bad += 1; continue
    d = float(np.abs(ref["logits"].astype(np.float64) - gf["logits"]).max())
    if name == "control-no-scaling":
        control.append(d)
        continue
    worst[name] = max(worst.get(name, 0.0), d)
    rj, gj = json.load(open(f"{tmp}/ref.{tag}.json")), json.load(open(f"{tmp}/gen.{tag}.json"))
    want, got, margins = rj["greedy_tokens"], gj["tokens"], rj["margins"]
    div = next((k for k, (a, b) in enumerate(zip(want, got)) if a != b), -1)
    if len(got) != len(want) and div < 0:
        div = min(len(got), len(want))
    ok_tokens = div < 0 or (div < len(margins) and margins[div] < 1e-4)
    status = "ok" if d <= 1e-4 and ok_tokens else "FAIL"
    print(f"{tag}: {len(ref['tokens'])} tokens, max |delta logit| {d:.3e}, greedy {len(want)} "
          f"{'equal' if div < 0 else f'diverge at {div} (margin {margins[div]:.3e})'}, "
          f"min margin {min(margins):.4f} -> {status}")
    bad += status != "ok"
for name, d in worst.items():
    print(f"worst max |delta logit| {name}: {d:.3e} (bound 1e-4)")
cmax = max(control)
print(f"negative control (llama3 checkpoint read without its rope_scaling): max |delta| {cmax:.3e} "
      f"-> {'ok (misses the bound)' if cmax > 1e-3 else 'FAIL (the check cannot see rope scaling)'}")
bad += cmax <= 1e-3
print(f"{'failed' if bad else 'passed'}: {bad} failure(s)")
sys.exit(1 if bad else 0)
PY
