#!/usr/bin/env bash
# genfence forward on broken Llama-family model directories: each must exit 2
# with a "genfence: <message>" naming the file and the tensor or key. Good
# directories (single file, sharded through model.safetensors.index.json,
# qwen2, F16, BF16) must load and run (exit 0), so every failure below is
# caused by the one thing that differs from a good one.
set -euo pipefail
: "${GENFENCE:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init llama_model_errors

"$GF_PYTHON" - "$tmp" <<'PY'
import json, os, shutil, sys
import numpy as np
from safetensors.numpy import save_file

root = sys.argv[1]
V, D, L, H, HKV, DH, F, P = 16, 8, 2, 2, 1, 4, 12, 32
cfg = {"model_type": "llama", "vocab_size": V, "hidden_size": D, "intermediate_size": F,
       "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": HKV,
       "head_dim": DH, "max_position_embeddings": P, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
       "rope_scaling": None, "tie_word_embeddings": True, "hidden_act": "silu",
       "bos_token_id": 1, "eos_token_id": 2}
rng = np.random.default_rng(0)
def r(*shape):
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)
def tensors(qwen2=False):
    t = {"model.embed_tokens.weight": r(V, D), "model.norm.weight": 1 + r(D)}
    for l in range(L):
        p = f"model.layers.{l}."
        t.update({p + "input_layernorm.weight": 1 + r(D), p + "post_attention_layernorm.weight": 1 + r(D),
                  p + "self_attn.q_proj.weight": r(H * DH, D), p + "self_attn.k_proj.weight": r(HKV * DH, D),
                  p + "self_attn.v_proj.weight": r(HKV * DH, D), p + "self_attn.o_proj.weight": r(D, H * DH),
                  p + "mlp.gate_proj.weight": r(F, D), p + "mlp.up_proj.weight": r(F, D),
                  p + "mlp.down_proj.weight": r(D, F)})
        if qwen2:
            t.update({p + "self_attn.q_proj.bias": r(H * DH), p + "self_attn.k_proj.bias": r(HKV * DH),
                      p + "self_attn.v_proj.bias": r(HKV * DH)})
    return t

def write(name, c, t, shards=None, index_edit=None):
    d = os.path.join(root, name)
    os.makedirs(d)
    json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=1)
    if not shards:
        save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        return d
    names = sorted(t)
    wm = {}
    for k in range(shards):
        fn = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: t[n] for i, n in enumerate(names) if i % shards == k}
        save_file(part, os.path.join(d, fn), metadata={"format": "pt"})
        wm.update({n: fn for n in part})
    idx = {"metadata": {"total_size": 0}, "weight_map": wm}
    if index_edit:
        index_edit(idx)
    json.dump(idx, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    return d

base = tensors()
write("good", cfg, base)
write("good_sharded", cfg, base, shards=3)
write("good_qwen2", dict(cfg, model_type="qwen2", head_dim=None, num_attention_heads=2), tensors(qwen2=True))
write("good_untied", dict(cfg, tie_word_embeddings=False), dict(base, **{"lm_head.weight": r(V, D)}))
write("good_f16", cfg, {k: v.astype(np.float16) for k, v in base.items()})
import torch
from safetensors.torch import save_file as save_torch
d = write("good_bf16", cfg, base)
save_torch({k: torch.from_numpy(v).to(torch.bfloat16) for k, v in base.items()}, os.path.join(d, "model.safetensors"))

# tensors
write("missing_k_proj", cfg, {k: v for k, v in base.items() if k != "model.layers.1.self_attn.k_proj.weight"})
write("kv_heads_mismatch", dict(cfg, num_key_value_heads=2), base)    # k_proj is (4, 8), config wants (8, 8)
write("head_dim_mismatch", dict(cfg, head_dim=2), base)
write("extra_layer", dict(cfg, num_hidden_layers=1), base)
write("qwen2_no_bias", dict(cfg, model_type="qwen2", head_dim=None), base)
write("untied_no_head", dict(cfg, tie_word_embeddings=False), base)
write("int_weight", cfg, dict(base, **{"model.norm.weight": np.arange(D, dtype=np.int32)}))
# sharding
write("shard_missing", cfg, base, shards=2,
      index_edit=lambda i: i["weight_map"].update({"model.norm.weight": "model-00009-of-00009.safetensors"}))
write("shard_wrong_map", cfg, base, shards=2,
      index_edit=lambda i: i["weight_map"].update({"model.norm.weight": "model-00001-of-00002.safetensors"
                                                   if i["weight_map"]["model.norm.weight"].startswith("model-00002")
                                                   else "model-00002-of-00002.safetensors"}))
write("shard_unlisted", cfg, base, shards=2,
      index_edit=lambda i: i["weight_map"].pop("model.layers.0.mlp.up_proj.weight"))
write("shard_path_escape", cfg, base, shards=2,
      index_edit=lambda i: i["weight_map"].update({"model.norm.weight": "../x.safetensors"}))
write("shard_no_weight_map", cfg, base, shards=2, index_edit=lambda i: i.pop("weight_map"))
d = write("both_single_and_index", cfg, base, shards=2)
save_file(base, os.path.join(d, "model.safetensors"))
# config
write("rope_dynamic", dict(cfg, rope_scaling={"rope_type": "dynamic"}), base)
write("rope_yarn_mscale", dict(cfg, rope_scaling={"rope_type": "yarn", "factor": 4.0, "mscale": 1.0}), base)
write("rope_linear_no_factor", dict(cfg, rope_scaling={"rope_type": "linear"}), base)
write("rope_llama3_partial", dict(cfg, rope_scaling={"rope_type": "llama3", "factor": 8.0}), base)
write("odd_head_dim", dict(cfg, head_dim=3), base)
write("gqa_not_divisible", dict(cfg, num_attention_heads=3, num_key_value_heads=2), base)
write("hidden_act_gelu", dict(cfg, hidden_act="gelu"), base)
write("attention_bias", dict(cfg, attention_bias=True), base)
write("qwen2_sliding", dict(cfg, model_type="qwen2", head_dim=None, use_sliding_window=True), tensors(qwen2=True))
c = dict(cfg); del c["hidden_size"]
write("no_hidden_size", c, base)
PY

failures=0
run_case() {
    local name=$1 want_rc=$2
    shift 2
    local dir="$tmp/$name" rc=0 out="$tmp/$name.out.safetensors"
    "$GENFENCE" forward --model "$dir" --tokens 1,2,3 --out "$out" >"$tmp/$name.stdout" 2>"$tmp/$name.stderr" || rc=$?
    local err bad=""
    err=$(cat "$tmp/$name.stderr")
    [[ $rc -eq $want_rc ]] || bad="exit status $rc, expected $want_rc"
    if [[ $want_rc -eq 2 ]]; then
        [[ "$err" == *"genfence: "* ]] || bad="${bad:+$bad; }stderr lacks the 'genfence: ' prefix"
        for sub in "$@"; do
            [[ "$err" == *"$sub"* ]] || bad="${bad:+$bad; }stderr lacks '$sub'"
        done
    else
        [[ -s "$out" ]] || bad="${bad:+$bad; }no output file"
    fi
    if [[ -n "$bad" ]]; then
        failures=$((failures + 1))
        echo "FAIL $name: $bad"; sed 's/^/    /' "$tmp/$name.stderr"
    else
        echo "ok   $name: exit $rc${err:+ -- $err}"
    fi
}

for g in good good_sharded good_qwen2 good_untied good_f16 good_bf16; do run_case $g 0; done
# F16 / BF16 / shards give the same logits as the F32 single file (the values are rounded in F16/BF16,
# so those are compared loosely; the sharded one must be bit-identical)
"$GF_PYTHON" - "$tmp" <<'PY' || failures=$((failures + 1))
import sys
import numpy as np
from safetensors.numpy import load_file
t = sys.argv[1]
g = load_file(f"{t}/good.out.safetensors")["logits"]
s = load_file(f"{t}/good_sharded.out.safetensors")["logits"]
assert np.array_equal(g, s), "sharded logits differ from the single-file ones"
for n, tol in (("good_f16", 5e-2), ("good_bf16", 2e-1)):
    d = float(np.abs(load_file(f"{t}/{n}.out.safetensors")["logits"] - g).max())
    assert 0 < d < tol, f"{n}: max |delta| {d} vs F32 (want (0, {tol}))"
    print(f"ok   {n}: max |delta| vs F32 {d:.2e}")
print("ok   good_sharded: logits identical to the single file")
PY
run_case missing_k_proj 2 "missing_k_proj/model.safetensors: tensor 'layers.1.self_attn.k_proj.weight' missing" \
    "'model.layers.1.self_attn.k_proj.weight'" "num_hidden_layers = 2"
run_case kv_heads_mismatch 2 "kv_heads_mismatch/model.safetensors: tensor 'model.layers.0.self_attn.k_proj.weight': shape [4, 8]" \
    "(num_key_value_heads*head_dim, hidden_size) = [8, 8]"
run_case head_dim_mismatch 2 "tensor 'model.layers.0.self_attn.q_proj.weight': shape [8, 8]" "= [4, 8]"
run_case extra_layer 2 "tensor 'model.layers.1." "num_hidden_layers = 1"
run_case qwen2_no_bias 2 "qwen2_no_bias/model.safetensors: tensor 'layers.0.self_attn.q_proj.bias' missing"
run_case untied_no_head 2 "tensor 'lm_head.weight' missing" "tie_word_embeddings to false"
run_case int_weight 2 "tensor 'model.norm.weight' has dtype I32"
run_case shard_missing 2 "shard_missing/model.safetensors.index.json names shard 'model-00009-of-00009.safetensors'" \
    "model.norm.weight" "No such file"
run_case shard_wrong_map 2 "shard_wrong_map/model.safetensors.index.json: tensor 'model.norm.weight' is mapped to shard" \
    "which does not contain it"
run_case shard_unlisted 2 "shard_unlisted/model.safetensors.index.json: shard 'model-0000" \
    "holds tensor 'model.layers.0.mlp.up_proj.weight', which the weight_map does not list"
run_case shard_path_escape 2 "weight_map entry 'model.norm.weight' must name a shard file in the model directory" \
    "'../x.safetensors'"
run_case shard_no_weight_map 2 "shard_no_weight_map/model.safetensors.index.json: expected an object with a non-empty 'weight_map'"
run_case both_single_and_index 2 "both model.safetensors and model.safetensors.index.json are present"
run_case rope_dynamic 2 "rope_dynamic/config.json: rope_scaling (dynamic) is missing 'factor'"
run_case rope_yarn_mscale 2 "rope_yarn_mscale/config.json: rope_scaling (yarn) has 'mscale' but no 'attention_factor'"
run_case rope_linear_no_factor 2 "rope_linear_no_factor/config.json: rope_scaling (linear) is missing 'factor'"
run_case rope_llama3_partial 2 "rope_llama3_partial/config.json: rope_scaling (llama3) is missing 'low_freq_factor'"
run_case odd_head_dim 2 "odd_head_dim/config.json: head dimension 3 must be even"
run_case gqa_not_divisible 2 "gqa_not_divisible/config.json: num_attention_heads 3 is not a multiple of num_key_value_heads 2"
run_case hidden_act_gelu 2 "hidden_act_gelu/config.json: hidden_act 'gelu' is not supported for llama (supported: silu)"
run_case attention_bias 2 "attention_bias/config.json: attention_bias true"
run_case qwen2_sliding 2 "qwen2_sliding/config.json: use_sliding_window true with max_window_layers 28 (the default)"
run_case no_hidden_size 2 "no_hidden_size/config.json: missing required key 'hidden_size'"

if [[ $failures -ne 0 ]]; then
    echo "llama_model_errors: $failures case(s) failed"
    exit 1
fi
echo "llama_model_errors: all cases passed"
