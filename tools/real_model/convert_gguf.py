#!/usr/bin/env python3
"""Convert a GGUF checkpoint to a Hugging Face directory genfence reads
(config.json, model.safetensors in float32, tokenizer.json), with transformers
(from_pretrained(..., gguf_file=); needs the `gguf` package).

transformers 4.47's GGUF tokenizer export gets the special tokens of
SmolLM2-135M-Instruct wrong (checked, and printed on every run):
  - eos: it writes <|im_start|> (id 1) as eos_token; the GGUF's own
    tokenizer.ggml.eos_token_id is 2 (<|im_end|>), the token the instruct
    model ends its turn with;
  - bos: it adds a TemplateProcessing post-processor that prepends
    <|im_start|> to every encoding, while the GGUF says
    tokenizer.ggml.add_bos_token = false.
This tool takes bos/eos/unk/pad ids and add_bos_token from the GGUF's metadata
and writes them into config.json, tokenizer_config.json and tokenizer.json
(the post-processor prepends bos only when add_bos_token is true).

--hub-layout replaces the exported pre-tokenizer/decoder (plain ByteLevel)
with the layout SmolLM2's Hugging Face repository ships: Sequence[Digits
(individual), ByteLevel] and a ByteLevel decoder, as
tests/support/tokenizer_families.py does.

Usage: convert_gguf.py GGUF OUT_DIR [--hub-layout]
"""
import json
import os
import shutil
import sys
import tempfile


def gguf_meta(path):
    import gguf
    r = gguf.GGUFReader(path)

    def scalar(key):
        f = r.fields.get(key)
        if f is None or not f.data:
            return None
        v = f.parts[f.data[0]]
        return v.tolist()[0] if hasattr(v, "tolist") else v

    toks = r.fields["tokenizer.ggml.tokens"]
    def tok(i):
        return bytes(toks.parts[toks.data[i]]).decode("utf-8")

    m = {k: scalar("tokenizer.ggml." + k) for k in
         ("bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id", "add_bos_token")}
    m["tok"] = tok
    return m


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    hub = "--hub-layout" in sys.argv[1:]
    if len(args) != 2:
        sys.stderr.write(__doc__)
        return 2
    src, out = args
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

    meta = gguf_meta(src)
    d, name = os.path.split(os.path.abspath(src))
    tokz = AutoTokenizer.from_pretrained(d, gguf_file=name)
    # from_pretrained(gguf_file=) wants accelerate for the weights; the same
    # transformers reader (load_gguf_checkpoint: dequantize, un-permute q/k)
    # into a float32 model built from the GGUF's config needs none
    from transformers import AutoConfig
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    config = AutoConfig.from_pretrained(d, gguf_file=name)
    config.torch_dtype = torch.float32
    model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    state = load_gguf_checkpoint(os.path.join(d, name), return_tensors=True)["tensors"]
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not (config.tie_word_embeddings and k == "lm_head.weight")]
    if missing or unexpected:
        sys.stderr.write(f"convert_gguf.py: {src}: missing {missing[:5]}, unexpected {unexpected[:5]}\n")
        return 1
    if config.tie_word_embeddings:
        model.tie_weights()
    model.eval()
    tmp = tempfile.mkdtemp(dir=os.path.dirname(os.path.abspath(out)) or ".")
    try:
        model.save_pretrained(tmp, safe_serialization=True, max_shard_size="4GB")
        tokz.save_pretrained(tmp)
        fix_tokens(tmp, meta, tokz, hub)
        for f in os.listdir(tmp):
            if f not in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                         "special_tokens_map.json", "generation_config.json"):
                os.remove(os.path.join(tmp, f))
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.chmod(tmp, 0o755)
        os.rename(tmp, out)
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp)
    print(f"{out}: written")
    return 0


def fix_tokens(d, meta, tokz, hub):
    bos, eos = meta["bos_token_id"], meta["eos_token_id"]
    unk, pad = meta["unknown_token_id"], meta["padding_token_id"]
    add_bos = bool(meta["add_bos_token"])
    tok = meta["tok"]
    print(f"GGUF metadata: bos {bos} {tok(bos)!r}, eos {eos} {tok(eos)!r}, add_bos_token {add_bos}")
    print(f"transformers' export: bos {tokz.bos_token_id} {tokz.bos_token!r}, "
          f"eos {tokz.eos_token_id} {tokz.eos_token!r}")
    if tokz.eos_token_id != eos:
        print(f"  fixed: eos {tokz.eos_token_id} -> {eos}")
    if tokz.bos_token_id != bos:
        print(f"  fixed: bos {tokz.bos_token_id} -> {bos}")

    cfg_path = os.path.join(d, "config.json")
    cfg = json.load(open(cfg_path))
    cfg["bos_token_id"], cfg["eos_token_id"] = bos, eos
    if pad is not None:
        cfg["pad_token_id"] = pad
    # save_pretrained records the temporary folder it loaded from; kept, it
    # would make every conversion's model hash (config.json is in it) its own,
    # so no calibrated null or cached golden could ever be found again
    cfg.pop("_name_or_path", None)
    json.dump(cfg, open(cfg_path, "w"), indent=2, sort_keys=True)
    gpath = os.path.join(d, "generation_config.json")
    if os.path.exists(gpath):
        g = json.load(open(gpath))
        g["bos_token_id"], g["eos_token_id"] = bos, eos
        if pad is not None:
            g["pad_token_id"] = pad
        json.dump(g, open(gpath, "w"), indent=2, sort_keys=True)

    special = {"bos_token": tok(bos), "eos_token": tok(eos)}
    if unk is not None:
        special["unk_token"] = tok(unk)
    if pad is not None:
        special["pad_token"] = tok(pad)
    tc_path = os.path.join(d, "tokenizer_config.json")
    tc = json.load(open(tc_path))
    tc.update(special)
    tc["add_bos_token"] = add_bos
    for k in ("bos_token_id", "eos_token_id"):
        tc.pop(k, None)
    json.dump(tc, open(tc_path, "w"), indent=2, ensure_ascii=False)
    json.dump(special, open(os.path.join(d, "special_tokens_map.json"), "w"), indent=2, ensure_ascii=False)

    tj_path = os.path.join(d, "tokenizer.json")
    j = json.load(open(tj_path, encoding="utf-8"))
    if add_bos:
        j["post_processor"] = {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": tok(bos), "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}}],
                               "pair": [{"SpecialToken": {"id": tok(bos), "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}},
                                        {"SpecialToken": {"id": tok(bos), "type_id": 1}},
                                        {"Sequence": {"id": "B", "type_id": 1}}],
                               "special_tokens": {tok(bos): {"id": tok(bos), "ids": [bos], "tokens": [tok(bos)]}}}
    else:
        if j.get("post_processor"):
            print("  fixed: the exported post-processor prepended bos; add_bos_token is false, removed")
        j["post_processor"] = None
    if hub:
        j["normalizer"] = None
        j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
        j["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    with open(tj_path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)


if __name__ == "__main__":
    sys.exit(main())
