#!/usr/bin/env python3
"""Make genfence goldens with Hugging Face transformers on PyTorch.

For every `golden_generation` case it is given, this tool runs the case's
prompts through GPT2LMHeadModel (float32, uncached full recompute at every
step, no code shared with genfence's C engine) and writes golden/<id>.safetensors:

  tokens.<b>   I64 (P_b + N_b)  prompt + generated tokens of row b (a row stops at EOS)
  logits.<b>   F32 (N_b, V)     last-position logits at each step, teacher-forced
                                (step k's logits produced tokens.<b>[P_b + k])
  margins.<b>  F64 (N_b)        top-1 minus top-2 of the scores that chose each token:
                                raw logits when greedy, raced scores when sampled
  __metadata__ format, generator, generator_version, torch_version, model_hash,
               case_hash, case_id, created, sampler (JSON), seed, rows

Sampled goldens reproduce genfence's documented draw (docs/random.md): the
exponential race with Philox4x32-10 uniforms keyed by the seed, counter
(i/4, step, sequence id), the sequence id being the row index; implemented
independently in tools/gf_random.py.

Hashes (docs/goldens.md), defined once and computed identically by genfence:
  case hash  = sha256 of the canonical JSON of the case (keys sorted, no
               whitespace, numbers in shortest round-trip form), without the
               comparison-only keys (atol, gate, tags, backends, golden, description)
  model hash = sha256 of "<sha256(config.json)>\\n<sha256(model.safetensors)>\\n<sha256(tokenizer.json)>\\n"

Usage:
  tools/golden.py --genfence build/genfence [--out-dir golden] [--filter REGEX] [CASE_FILES...]
The case files are parsed by `genfence list --json` (one YAML reading, the
C loader's); this tool recomputes each case's hash itself and refuses to
write if it disagrees with genfence's.
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gf_random  # noqa: E402

FORMAT = "genfence-golden-1"
HASH_EXCLUDED = ("atol", "gate", "tags", "backends", "golden", "description")


# ---- canonical JSON and hashes ---------------------------------------------

def _canon_float(x):
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    for p in range(1, 18):
        s = "%.*g" % (p, x)
        if float(s) == x:
            break
    if not any(c in s for c in ".en"):
        s += ".0"
    return s


def _canon_str(s):
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif o < 0x20:
            out.append("\\u%04x" % o)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def canonical_json(v):
    """The canonical form genfence hashes (docs/goldens.md)."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _canon_float(v)
    if isinstance(v, str):
        return _canon_str(v)
    if isinstance(v, list):
        return "[" + ",".join(canonical_json(x) for x in v) + "]"
    if isinstance(v, dict):
        keys = sorted(v.keys(), key=lambda k: k.encode("utf-8"))
        return "{" + ",".join(_canon_str(k) + ":" + canonical_json(v[k]) for k in keys) + "}"
    raise TypeError(f"cannot canonicalise {type(v).__name__}")


def case_hash(case):
    body = {k: v for k, v in case.items() if k not in HASH_EXCLUDED}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_hash(model_dir):
    parts = [sha256_file(os.path.join(model_dir, n)) for n in ("config.json", "model.safetensors", "tokenizer.json")]
    return hashlib.sha256("".join(p + "\n" for p in parts).encode("ascii")).hexdigest()


# ---- the golden run ----------------------------------------------------------

def sampler_of(case):
    t = float(case.get("temperature", 0.0))
    return {
        "temperature": t,
        "top_k": case.get("top_k"),
        "top_p": case.get("top_p"),
        "seed": int(case.get("seed", 0)),
    }


def golden_rows(model, tok, case, repo):
    """Per row: (tokens, logits (N, V), margins (N))."""
    import torch
    s = sampler_of(case)
    eos = case.get("eos_id")
    n_new = int(case["max_new_tokens"])
    rows = []
    for b, prompt in enumerate(case["prompts"]):
        ids = list(tok.encode(prompt).ids) if isinstance(prompt, str) else [int(i) for i in prompt]
        seq = list(ids)
        logits_rows, margins = [], []
        for step in range(n_new):
            with torch.no_grad():
                row = model(input_ids=torch.tensor([seq], dtype=torch.long), use_cache=False).logits[0, -1]
            r = row.float().numpy().astype(np.float32)
            if s["temperature"] == 0:
                t, _, margin, _ = gf_random.greedy([float(x) for x in r])
            else:
                t, _, margin, _ = gf_random.sample([float(x) for x in r], s["temperature"], s["seed"], b, step,
                                                   s["top_k"], s["top_p"])
            logits_rows.append(r)
            margins.append(margin)
            seq.append(int(t))
            if eos is not None and t == eos:
                break
        rows.append((np.array(seq, dtype=np.int64), np.stack(logits_rows), np.array(margins, dtype=np.float64)))
    return rows


def write_golden(path, rows, meta):
    from safetensors.numpy import save_file
    tensors = {}
    for b, (toks, logits, margins) in enumerate(rows):
        tensors[f"tokens.{b}"] = toks
        tensors[f"logits.{b}"] = logits
        tensors[f"margins.{b}"] = margins
    tmp = path + ".tmp"
    save_file(tensors, tmp, metadata=meta)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genfence", required=True, help="the genfence binary (parses the YAML)")
    ap.add_argument("--out-dir", default="golden")
    ap.add_argument("--filter", default=None, help="only case ids matching this regex")
    ap.add_argument("paths", nargs="*", default=["cases"])
    a = ap.parse_args(argv)
    repo = os.path.dirname(HERE)
    listing = subprocess.run([a.genfence, "list", "--json", *a.paths], check=True, capture_output=True, text=True)
    cases = [c for c in json.loads(listing.stdout)["cases"] if c["kind"] == "golden_generation"]
    if a.filter:
        cases = [c for c in cases if re.search(a.filter, c["id"])]
    if not cases:
        print("golden.py: no golden_generation cases", file=sys.stderr)
        return 2
    import torch
    import transformers
    sys.path.insert(0, HERE)
    import reference
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    os.makedirs(a.out_dir, exist_ok=True)
    for entry in cases:
        case = entry["case"]
        h = case_hash(case)
        if entry.get("case_hash") != h:
            print(f"golden.py: case {case['id']}: my hash {h} != genfence's {entry.get('case_hash')}", file=sys.stderr)
            return 2
        model_dir = os.path.join(repo, case["model"])
        model, tok = reference.load_model(model_dir), reference.load_tokenizer(model_dir)
        rows = golden_rows(model, tok, case, repo)
        meta = {
            "format": FORMAT,
            "generator": "transformers",
            "generator_version": transformers.__version__,
            "torch_version": torch.__version__,
            "model": case["model"],
            "model_hash": model_hash(model_dir),
            "case_id": case["id"],
            "case_hash": h,
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "sampler": json.dumps(sampler_of(case), sort_keys=True),
            "seed": str(sampler_of(case)["seed"]),
            "rows": str(len(rows)),
        }
        out = os.path.join(a.out_dir, case["id"] + ".safetensors")
        write_golden(out, rows, meta)
        mins = min(float(m.min()) for _, _, m in rows)
        print(f"golden.py: wrote {out}: {len(rows)} rows, {sum(len(m) for _, _, m in rows)} steps, "
              f"smallest margin {mins:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
