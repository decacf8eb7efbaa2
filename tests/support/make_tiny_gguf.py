#!/usr/bin/env python3
"""Write a Llama-architecture GGUF (F32) from a small Hugging Face llama
directory, the way llama.cpp's convert script lays one out (q/k rows permuted
per head, the GPT-2 BPE vocabulary as tokenizer.ggml.*), for
tests/cli/real_model_tools.sh: tools/real_model/convert_gguf.py must turn it
back into the same model.

The special tokens written are chosen to differ from the directory's
config.json (bos BOS_ID, eos EOS_ID, add_bos_token false), so the test sees
the converter take them from the GGUF's metadata.

Usage: make_tiny_gguf.py HF_DIR OUT.gguf BOS_ID EOS_ID
"""
import json
import os
import sys

import numpy as np


def permute(w, n_head):
    # llama.cpp's conversion/llama.py permute(): halves -> adjacent pairs
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def main():
    if len(sys.argv) != 5:
        sys.stderr.write(__doc__)
        return 2
    src, out, bos, eos = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    import gguf
    from safetensors.numpy import load_file
    cfg = json.load(open(os.path.join(src, "config.json")))
    tj = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    w = load_file(os.path.join(src, "model.safetensors"))
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]

    g = gguf.GGUFWriter(out, "llama")
    g.add_name("tiny")
    g.add_context_length(cfg["max_position_embeddings"])
    g.add_embedding_length(cfg["hidden_size"])
    g.add_block_count(cfg["num_hidden_layers"])
    g.add_feed_forward_length(cfg["intermediate_size"])
    g.add_head_count(nh)
    g.add_head_count_kv(nkv)
    g.add_rope_dimension_count(cfg["hidden_size"] // nh)
    g.add_rope_freq_base(cfg["rope_theta"])
    g.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    g.add_vocab_size(cfg["vocab_size"])

    vocab = tj["model"]["vocab"]
    for a in tj.get("added_tokens", []):
        vocab.setdefault(a["content"], a["id"])
    toks = [None] * cfg["vocab_size"]
    for t, i in vocab.items():
        if i < len(toks):
            toks[i] = t
    special = {a["id"] for a in tj.get("added_tokens", []) if a.get("special")}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    g.add_tokenizer_model("gpt2")
    g.add_tokenizer_pre("default")
    g.add_token_list([t if t is not None else f"[PAD{i}]" for i, t in enumerate(toks)])
    g.add_token_types([gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL for i in range(len(toks))])
    g.add_token_merges(merges)
    g.add_bos_token_id(bos)
    g.add_eos_token_id(eos)
    g.add_add_bos_token(False)

    def t(name, arr):
        g.add_tensor(name, np.ascontiguousarray(arr.astype(np.float32)))

    t("token_embd.weight", w["model.embed_tokens.weight"])
    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}."
        t(f"blk.{L}.attn_norm.weight", w[p + "input_layernorm.weight"])
        t(f"blk.{L}.attn_q.weight", permute(w[p + "self_attn.q_proj.weight"], nh))
        t(f"blk.{L}.attn_k.weight", permute(w[p + "self_attn.k_proj.weight"], nkv))
        t(f"blk.{L}.attn_v.weight", w[p + "self_attn.v_proj.weight"])
        t(f"blk.{L}.attn_output.weight", w[p + "self_attn.o_proj.weight"])
        t(f"blk.{L}.ffn_norm.weight", w[p + "post_attention_layernorm.weight"])
        t(f"blk.{L}.ffn_gate.weight", w[p + "mlp.gate_proj.weight"])
        t(f"blk.{L}.ffn_up.weight", w[p + "mlp.up_proj.weight"])
        t(f"blk.{L}.ffn_down.weight", w[p + "mlp.down_proj.weight"])
    t("output_norm.weight", w["model.norm.weight"])
    if not cfg.get("tie_word_embeddings") and "lm_head.weight" in w:
        t("output.weight", w["lm_head.weight"])
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()
    print(f"{out}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
