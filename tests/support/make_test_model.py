#!/usr/bin/env python3
"""A random GPT-2 in Hugging Face layout for the backend tests, numpy only.

    make_test_model.py OUT_DIR [--seed N] [--std S] [--tokenizer PATH]
        [--vocab V] [--n-embd D] [--n-head H] [--n-layer L] [--n-positions P]

Writes OUT_DIR/config.json and OUT_DIR/model.safetensors (F32, tied head;
by default vocab 512, 128 positions, 128 wide, 4 layers, 4 heads: the
holmes-gpt shape; the shape options are for tools/llamacpp_amx_sweep.py)
and copies the tokenizer if given. The tests use models/holmes-gpt when it is
there and this otherwise. Weights are N(0, std) (std 0.1 by default, larger
than GPT-2's 0.02 so logits spread over several nats and the 1e-4 bar means
something); LayerNorm weights are 1 + N(0, std), biases N(0, std).
"""
import argparse
import json
import os
import shutil

import numpy as np
from safetensors.numpy import save_file


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--std", type=float, default=0.1)
    ap.add_argument("--tokenizer")
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--n-positions", type=int, default=128)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    a = ap.parse_args()
    V, P, D, L, H = a.vocab, a.n_positions, a.n_embd, a.n_layer, a.n_head
    if min(V, P, D, L, H) < 1 or D % H:
        ap.error(f"bad shape: vocab {V}, positions {P}, n_embd {D}, layers {L}, heads {H} (n_embd % n_head must be 0)")
    F = 4 * D
    rng = np.random.default_rng(a.seed)

    def w(*shape):
        return (rng.standard_normal(shape) * a.std).astype(np.float32)

    t = {"wte.weight": w(V, D), "wpe.weight": w(P, D),
         "ln_f.weight": 1 + w(D), "ln_f.bias": w(D)}
    for i in range(L):
        p = f"h.{i}."
        t[p + "ln_1.weight"] = 1 + w(D)
        t[p + "ln_1.bias"] = w(D)
        t[p + "attn.c_attn.weight"] = w(D, 3 * D)
        t[p + "attn.c_attn.bias"] = w(3 * D)
        t[p + "attn.c_proj.weight"] = w(D, D)
        t[p + "attn.c_proj.bias"] = w(D)
        t[p + "ln_2.weight"] = 1 + w(D)
        t[p + "ln_2.bias"] = w(D)
        t[p + "mlp.c_fc.weight"] = w(D, F)
        t[p + "mlp.c_fc.bias"] = w(F)
        t[p + "mlp.c_proj.weight"] = w(F, D)
        t[p + "mlp.c_proj.bias"] = w(D)
    os.makedirs(a.out, exist_ok=True)
    save_file(t, os.path.join(a.out, "model.safetensors"), metadata={"format": "pt"})
    cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V,
           "n_positions": P, "n_embd": D, "n_layer": L, "n_head": H, "n_inner": None,
           "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
           "bos_token_id": V - 1, "eos_token_id": V - 1, "tie_word_embeddings": True}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if a.tokenizer:
        shutil.copy(a.tokenizer, os.path.join(a.out, "tokenizer.json"))


if __name__ == "__main__":
    main()
