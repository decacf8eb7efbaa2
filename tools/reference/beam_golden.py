#!/usr/bin/env python3
"""Beam-search goldens made with Hugging Face transformers on PyTorch (docs/cases.md "beam_search").

For every `beam_search` case it is given, this tool runs the case's prompt
through the model's transformers class (reference.load_model: float32, eval
mode; the prompt encoded by the `tokenizers` library from tokenizer.json) with

  model.generate(input_ids, num_beams=K, do_sample=False, length_penalty=LP,
                 early_stopping=ES, num_return_sequences=R, max_new_tokens=N,
                 eos_token_id=EOS, pad_token_id=EOS, use_cache=False,
                 output_scores=True, return_dict_in_generate=True)

and writes the case's golden (golden/beam/<id>.safetensors, or its `golden:`
path, or --out-dir DIR/<id>.safetensors):

  tokens.<r>   I64 (P + n_r)  returned sequence r, prompt included, HF's
                              padding cut off (a finished one keeps its EOS)
  scores       F64 (R)        HF's sequence_scores (float32, widened exactly)
  __metadata__ format "genfence-beam-golden-1", generator, generator_version,
               torch_version, ..., model, model_hash, case_id, case_hash,
               created, beam (the canonical JSON of the search's parameters),
               rows, data_sha256, fault (only with --fault)

Hashes and data_sha256 as golden.py defines them (docs/goldens.md); the tool
recomputes every case and model hash and refuses to write when genfence's
disagree.

--fault generated-len-plus-one makes the golden of a wrong beam search on
purpose, for a must-fail case (cases/detect/beam_search.yaml): transformers'
BeamHypotheses.add is wrapped so that every hypothesis's generated_len is one
more than HF's (the length penalty's denominator off by one). Only cases
whose id starts with "detect." take it.

Usage:
  tools/reference/beam_golden.py --genfence build/genfence [--filter REGEX] [--out-dir DIR] [--fault F] [CASES...]
  tools/reference/beam_golden.py --verify FILE...
"""
import argparse
import datetime
import os
import sys

import golden as G

FORMAT = "genfence-beam-golden-1"
EARLY = {"false": False, "true": True, "never": "never"}


def beam_params(case, eos):
    es = case.get("early_stopping", False)
    es = {False: "false", True: "true"}.get(es, es)
    return {
        "num_beams": int(case["num_beams"]),
        "length_penalty": float(case.get("length_penalty", 1.0)),
        "early_stopping": str(es),
        "num_return_sequences": int(case.get("num_return_sequences", 1)),
        "max_new_tokens": int(case.get("max_new_tokens", 16)),
        "eos_id": int(eos),
    }


def write(path, tensors, meta):
    import numpy as np
    from safetensors.numpy import save_file
    tensors = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    meta = dict(meta, format=FORMAT, rows=str(len([k for k in tensors if k.startswith("tokens.")])))
    meta["data_sha256"] = G.data_sha256(tensors)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    save_file(tensors, path + ".tmp", metadata=meta)
    os.replace(path + ".tmp", path)


def verify(path):
    from safetensors import safe_open
    with safe_open(path, framework="numpy") as f:
        meta = dict(f.metadata() or {})
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    if meta.get("data_sha256") != G.data_sha256(tensors):
        raise ValueError(f"{path}: data_sha256 mismatch")
    return meta


def plus_one_fault():
    """BeamHypotheses.add with generated_len + 1 (a must-fail golden)."""
    from transformers.generation import beam_search as bs
    orig = bs.BeamHypotheses.add

    def add(self, hyp, sum_logprobs, beam_indices=None, generated_len=None):
        return orig(self, hyp, sum_logprobs, beam_indices, None if generated_len is None else generated_len + 1)

    bs.BeamHypotheses.add = add


def no_fsdp_probe():
    """generate() asks whether the model is FSDP-managed by importing
    torch.distributed.fsdp, which Debian's torch 1.13 cannot import under
    Python 3.11 (a dataclass ValueError); nothing here is distributed, so the
    answer is False without the import. The search itself is untouched."""
    import transformers.generation.utils as gu
    gu.is_fsdp_managed_module = lambda module: False


def run_case(model, tok, case, eos):
    import numpy as np
    import torch
    prompt = case.get("prompt")
    ids = list(tok.encode(prompt).ids) if prompt is not None else [int(i) for i in case["prompt_tokens"]]
    bp = beam_params(case, eos)
    with torch.no_grad():
        out = model.generate(torch.tensor([ids], dtype=torch.long), num_beams=bp["num_beams"], do_sample=False,
                             length_penalty=bp["length_penalty"], early_stopping=EARLY[bp["early_stopping"]],
                             num_return_sequences=bp["num_return_sequences"], max_new_tokens=bp["max_new_tokens"],
                             eos_token_id=eos if eos >= 0 else None, pad_token_id=eos if eos >= 0 else 0,
                             use_cache=False, output_scores=True, return_dict_in_generate=True,
                             attention_mask=torch.ones((1, len(ids)), dtype=torch.long))
    tensors = {}
    P = len(ids)
    for r, row in enumerate(out.sequences.tolist()):
        n = len(row)
        if eos >= 0 and eos in row[P:]:  # a finished hypothesis: keep its EOS, cut the padding after it
            n = P + row[P:].index(eos) + 1
        tensors[f"tokens.{r}"] = np.array(row[:n], dtype=np.int64)
    tensors["scores"] = out.sequences_scores.double().numpy()
    return tensors, bp


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genfence", help="the genfence binary (reads the YAML)")
    ap.add_argument("--out-dir", default=None)
    ap.add_argument("--filter", default=None)
    ap.add_argument("--fault", choices=["generated-len-plus-one"], default=None)
    ap.add_argument("--verify", nargs="+", metavar="FILE")
    ap.add_argument("paths", nargs="*")
    a = ap.parse_args(argv)
    if a.verify:
        rc = 0
        for f in a.verify:
            try:
                m = verify(f)
                print(f"beam_golden.py: {f}: ok ({m.get('generator')} {m.get('generator_version')}, {m.get('rows')} rows)")
            except Exception as e:  # noqa: BLE001
                print(f"beam_golden.py: {e}", file=sys.stderr)
                rc = 1
        return rc
    if not a.genfence:
        ap.error("--genfence is required")
    entries = G.list_cases(a.genfence, a.paths, kind="beam_search", regex=a.filter)
    if not entries:
        print("beam_golden.py: no beam_search cases", file=sys.stderr)
        return 2
    bad = G.check_hashes(entries)
    for what, mine, theirs in bad:
        print(f"beam_golden.py: {what}: my hash {mine} != genfence's {theirs}; refusing to write", file=sys.stderr)
    if bad:
        return 2
    if a.fault and any(not e["id"].startswith("detect.") for e in entries):
        print("beam_golden.py: --fault makes wrong goldens: only for detect.* cases", file=sys.stderr)
        return 2
    import json
    import torch
    import reference
    torch.set_num_threads(1)
    no_fsdp_probe()
    if a.fault:
        plus_one_fault()
    ver = G.versions()
    loaded = {}
    for e in entries:
        case, d = e["case"], e["model_dir"]
        if d not in loaded:
            loaded[d] = (reference.load_model(d), reference.load_tokenizer(d))
        model, tok = loaded[d]
        with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
            cfg_eos = json.load(f).get("eos_token_id")
        eos = int(case["eos_id"]) if case.get("eos_id") is not None else (cfg_eos if isinstance(cfg_eos, int) else -1)
        tensors, bp = run_case(model, tok, case, eos)
        meta = {
            "generator": "transformers", **ver,
            "model": case["model"], "model_hash": e["model_hash"],
            "case_id": case["id"], "case_hash": e["case_hash"],
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "beam": G.canonical_json(bp),
            "decoding": "generate(num_beams, do_sample=False, use_cache=False), " + type(model).__name__ + ", float32",
            "generator_versions": G.versions_line()[0] or "",
        }
        if a.fault:
            meta["fault"] = a.fault + ": BeamHypotheses.add's generated_len + 1 (a must-fail golden)"
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        out = (os.path.join(a.out_dir, case["id"] + ".safetensors") if a.out_dir else
               os.path.join(root, case["golden"]) if case.get("golden") else
               os.path.join(root, "golden", "beam", case["id"] + ".safetensors"))
        write(out, tensors, meta)
        print(f"beam_golden.py: wrote {out}: {bp}, scores {[round(float(x), 6) for x in tensors['scores']]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
