#!/usr/bin/env python3
"""Write a tiny random Llama-family checkpoint (seeded) for tests.

  make_tiny_llama.py --out DIR [--family llama|qwen2|mistral] [--rope-scaling none|linear|llama3]
                     [--dtype f32|f16|bf16] [--shard-kb N] [--untied] [--seed S]
                     [--config JSON]

Architecture: vocab 512 (DIR gets models/holmes-gpt/tokenizer.json so text
prompts work), hidden 64, 2 layers, 4 query heads, 2 key/value heads,
head_dim 16, intermediate 96, max_position_embeddings 256, rope_theta 10000.
Weights are transformers' random init with the RMSNorm weights and (qwen2)
q/k/v biases randomised too, so every tensor matters. --shard-kb N saves
through save_pretrained(max_shard_size=N KB): model.safetensors.index.json
plus shards. --dtype f16/bf16 stores the weights in that dtype (genfence and
the reference both convert them to float32). --config JSON is merged into
the config's keyword arguments last (e.g. '{"sliding_window": 8}' for
mistral, '{"use_sliding_window": true, "sliding_window": 8,
"max_window_layers": 0}' for qwen2, '{"rope_scaling": {"rope_type": "yarn",
"factor": 4.0}}', '{"max_position_embeddings": 64}'); mistral is Llama's
shape with MistralConfig's sliding_window (default here: none).
Prints the model directory.
"""
import argparse
import json
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.join(HERE, "..", "..", "models", "holmes-gpt", "tokenizer.json")


def build(family="llama", rope_scaling="none", seed=0, untied=False, extra=None):
    from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                              Qwen2ForCausalLM)
    rs = None
    if rope_scaling == "linear":
        rs = {"rope_type": "linear", "factor": 2.0}
    elif rope_scaling == "llama3":
        # original context 32: wavelengths of head_dim 16 fall on all three
        # sides (kept, blended, divided by factor)
        rs = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 32}
    common = dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=rs, tie_word_embeddings=not untied,
                  bos_token_id=511, eos_token_id=511, initializer_range=0.08)
    common.update(extra or {})
    torch.manual_seed(seed)
    if family == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    elif family == "mistral":
        mc = {"sliding_window": None, **common}
        mc.pop("rope_scaling")  # MistralConfig (4.47.1) has none
        model = MistralForCausalLM(MistralConfig(head_dim=16, **mc))
    else:
        model = LlamaForCausalLM(LlamaConfig(head_dim=16, **common))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
            elif name.endswith(".bias"):
                p.normal_(0.0, 0.3)
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", choices=["llama", "qwen2", "mistral"], default="llama")
    ap.add_argument("--config", default="{}", help="JSON merged into the config's keyword arguments")
    ap.add_argument("--rope-scaling", choices=["none", "linear", "llama3"], default="none")
    ap.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    ap.add_argument("--shard-kb", type=int, default=0)
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    model = build(a.family, a.rope_scaling, a.seed, a.untied, json.loads(a.config))
    model = model.to({"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[a.dtype])
    save(model, a.out, a.shard_kb)
    print(a.out)
    return 0


def save(model, out, shard_kb=0):
    """save_pretrained (safetensors, sharded with shard_kb), no
    generation_config.json, holmes-gpt's tokenizer.json."""
    kw = {"max_shard_size": f"{shard_kb}KB"} if shard_kb else {}
    model.save_pretrained(out, safe_serialization=True, **kw)
    gc = os.path.join(out, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    shutil.copy(TOKENIZER, os.path.join(out, "tokenizer.json"))


if __name__ == "__main__":
    sys.exit(main())
