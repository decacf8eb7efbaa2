#!/usr/bin/env python3
"""Writes the binary and generated entries of the bad-input catalogue
(tests/bad-inputs/model/, tokenizer/, golden/, prompt/) so they can be made
again; the outputs are committed. Needs numpy + safetensors (the venv):

    .venv/bin/python tests/bad-inputs/make_inputs.py
"""
import json, os, shutil, struct, sys
import numpy as np
from safetensors.numpy import save_file

here = os.path.dirname(os.path.abspath(__file__))
V, P, D, L, H = 16, 8, 8, 1, 2
F = 4 * D
CFG = {"model_type": "gpt2", "vocab_size": V, "n_positions": P, "n_embd": D, "n_layer": L,
       "n_head": H, "n_inner": None, "activation_function": "gelu_new",
       "layer_norm_epsilon": 1e-5, "bos_token_id": 15, "eos_token_id": 15}


def tensors():
    rng = np.random.default_rng(0)
    r = lambda *s: (rng.standard_normal(s) * 0.1).astype(np.float32)
    t = {"wte.weight": r(V, D), "wpe.weight": r(P, D),
         "ln_f.weight": np.ones(D, np.float32), "ln_f.bias": r(D)}
    for l in range(L):
        p = f"h.{l}."
        t.update({p + "ln_1.weight": np.ones(D, np.float32), p + "ln_1.bias": r(D),
                  p + "attn.c_attn.weight": r(D, 3 * D), p + "attn.c_attn.bias": r(3 * D),
                  p + "attn.c_proj.weight": r(D, D), p + "attn.c_proj.bias": r(D),
                  p + "ln_2.weight": np.ones(D, np.float32), p + "ln_2.bias": r(D),
                  p + "mlp.c_fc.weight": r(D, F), p + "mlp.c_fc.bias": r(F),
                  p + "mlp.c_proj.weight": r(F, D), p + "mlp.c_proj.bias": r(D)})
    return t


def model(name, cfg=None, t=None, raw=None, config_text=None):
    d = os.path.join(here, "model", name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(config_text if config_text is not None else json.dumps(cfg or CFG, indent=1) + "\n")
    if raw is not None:
        open(os.path.join(d, "model.safetensors"), "wb").write(raw)
    elif t is not None:
        save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    return d


def raw_of(t):
    """safetensors bytes of t, and (header dict, data) to edit."""
    p = os.path.join(here, ".tmp.safetensors")
    save_file(t, p)
    b = open(p, "rb").read()
    os.remove(p)
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def pack(hdr, data):
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def main():
    # ---- weights and config ----
    model("n_layer_1e6", dict(CFG, n_layer=1000000), tensors())
    t = tensors(); t["wte.weight"][3, 5] = np.nan
    model("nan_weight", t=t)
    t = tensors(); t["h.0.mlp.c_fc.bias"][7] = np.inf
    model("inf_bias", t=t)
    t = tensors(); w = t["ln_f.weight"].astype(np.float16); w[2] = np.float16(np.inf) * -1; t["ln_f.weight"] = w
    model("f16_neg_inf", t=t)
    t = tensors(); b = t["h.0.ln_1.bias"].astype(np.float64); b[4] = 1e300; t["h.0.ln_1.bias"] = b
    model("f64_beyond_float", t=t)
    good = pack(*raw_of(tensors()))
    model("hdr_len_2_63", raw=struct.pack("<Q", 1 << 63) + good[8:])
    model("hdr_past_eof", raw=struct.pack("<Q", len(good)) + good[8:])
    model("truncated", raw=good[:-64])
    model("tiny_file", raw=b"\x10\x00\x00")
    hdr, data = raw_of(tensors())
    hdr["ln_f.bias"]["data_offsets"] = hdr["ln_f.weight"]["data_offsets"]
    model("overlap", raw=pack(hdr, data))
    hdr, data = raw_of(tensors()); hdr["wte.weight"]["dtype"] = "I32"
    model("int_dtype", raw=pack(hdr, data))
    hdr, data = raw_of(tensors()); hdr["wte.weight"]["dtype"] = "F8_E9"
    model("unknown_dtype", raw=pack(hdr, data))
    hdr, data = raw_of(tensors()); hdr["wte.weight"]["shape"] = [1 << 40, 1 << 40]
    model("numel_overflow", raw=pack(hdr, data))
    hdr, data = raw_of(tensors()); hdr["wte.weight"]["shape"] = [16, -8]
    model("negative_dim", raw=pack(hdr, data))
    body = b'{"wte.weight": [1, 2'
    body += b" " * (-len(body) % 8)
    model("header_not_json", raw=struct.pack("<Q", len(body)) + body)
    model("shape_mismatch", dict(CFG, vocab_size=17), tensors())
    t = tensors(); del t["h.0.ln_2.bias"]
    model("missing_tensor", t=t)
    t = tensors(); t["h.1.ln_1.weight"] = np.ones(D, np.float32)
    model("extra_layer", t=t)
    model("config_not_json", t=tensors(), config_text='{"model_type": "gpt2", "vocab_size": 16,\n')
    model("config_negative_vocab", dict(CFG, vocab_size=-16), tensors())
    model("config_heads_not_dividing", dict(CFG, n_head=3), tensors())
    model("config_n_embd_huge", dict(CFG, n_embd=2147483646), tensors())
    model("config_bert", dict(CFG, model_type="bert"), tensors())
    model("config_nan_token", t=tensors(), config_text=json.dumps(CFG).replace('1e-05', 'NaN'))
    model("vocab_over_cap", dict(CFG, vocab_size=(1 << 24) + 1), tensors())  # GENFENCE_MAX_VOCAB's default
    model("tensor_over_cap", t=tensors())  # valid; bad_inputs.sh loads it under GENFENCE_MAX_TENSOR_BYTES=256

    # ---- tokenizers ----
    tk = os.path.join(here, "tokenizer")
    os.makedirs(tk, exist_ok=True)
    base = json.load(open(os.path.join(here, "..", "..", "models", "holmes-gpt", "tokenizer.json")))
    def tok(name, edit):
        j = json.loads(json.dumps(base))
        edit(j)
        open(os.path.join(tk, name), "w").write(json.dumps(j))
    open(os.path.join(tk, "not_json.json"), "w").write('{"model": {"type": "BPE", "vocab": {"a": 0}')
    tok("wordpiece.json", lambda j: j["model"].update(type="WordPiece"))
    def huge(j):
        j["model"]["vocab"]["Holmesian"] = 2000000000
    tok("huge_id.json", huge)
    def dup(j):
        j["model"]["vocab"]["zz"] = 5
    tok("duplicate_id.json", dup)
    def bad_merge(j):
        j["model"]["merges"].insert(0, "Qx9 zz8")
    tok("merge_unknown_token.json", bad_merge)
    def added(j):
        j["added_tokens"][0]["id"] = 99999
    tok("added_token_id_out_of_range.json", added)
    tok("empty_vocab.json", lambda j: (j["model"].update(vocab={}, merges=[]), j.update(added_tokens=[])))
    tok("normalizer_unsupported.json", lambda j: j.update(normalizer={"type": "Precompiled", "precompiled_charsmap": ""}))

    # ---- goldens (each a directory: case.yaml naming golden.safetensors) ----
    import hashlib
    seed = os.path.join(here, "..", "fuzz", "corpus", "golden", "two_rows.safetensors")
    b = open(seed, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    ghdr, gdata = json.loads(b[8:8 + n]), b[8 + n:]
    def golden(name, hdr, data, note):
        d = os.path.join(here, "golden", name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        open(os.path.join(d, "golden.safetensors"), "wb").write(pack(hdr, data))
        open(os.path.join(d, "case.yaml"), "w").write(
            "# %s\ncases:\n  - id: bad.golden.%s\n    kind: golden_generation\n    model: models/holmes-gpt\n"
            "    prompts: [\"Holmes\"]\n    max_new_tokens: 2\n    golden: tests/bad-inputs/golden/%s/golden.safetensors\n"
            % (note, name, name))
    def resha(hdr, data):
        h = hashlib.sha256()
        for k in sorted(k for k in hdr if k != "__metadata__"):
            a, e = hdr[k]["data_offsets"]
            h.update(data[a:e])
        hdr["__metadata__"]["data_sha256"] = h.hexdigest()
    cp = lambda: json.loads(json.dumps(ghdr))
    a, e = ghdr["logits.0"]["data_offsets"]
    golden("tampered_data", cp(), gdata[:a] + bytes([gdata[a] ^ 0x40]) + gdata[a + 1:],
           "one byte of logits.0 changed, data_sha256 not: the reader recomputes it")
    h = cp(); h["__metadata__"]["format"] = "genfence-golden-0"
    golden("wrong_format", h, gdata, "an unknown format tag")
    h = cp(); del h["__metadata__"]["data_sha256"]
    golden("no_data_sha256", h, gdata, "metadata without data_sha256")
    h = cp(); d = bytearray(gdata); a, e = h["tokens.0"]["data_offsets"]
    d[a:a + 8] = struct.pack("<q", 7); resha(h, bytes(d))
    golden("token_out_of_range", h, bytes(d), "token 7 in a golden of V 4 (data_sha256 updated)")
    h = cp(); h["logits.0"]["dtype"] = "F16"; h["logits.0"]["shape"] = [2, 8]; resha(h, gdata)
    golden("wrong_dtype", h, gdata, "logits.0 as F16")

    # ---- over-long prompts (holmes-gpt: 128 positions) ----
    pr = os.path.join(here, "prompt")
    os.makedirs(pr, exist_ok=True)
    for n in ("generate", "batch", "forward"):
        open(os.path.join(pr, f"over_long_{n}.txt"), "w").write("Holmes " * 200)


if __name__ == "__main__":
    main()
