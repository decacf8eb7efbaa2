#!/usr/bin/env python3
"""Make genfence goldens with Hugging Face transformers on PyTorch (docs/goldens.md).

For every `golden_generation` case it is given, this tool runs each of the
case's prompts alone through the model's transformers class (GPT2LMHeadModel,
LlamaForCausalLM or Qwen2ForCausalLM by config.json's model_type; float32, eval mode, an uncached
full recompute of the whole sequence at every step; prompts encoded by the
`tokenizers` library from the model's tokenizer.json; no code shared with
genfence's C engine) and writes the case's golden (golden/<id>.safetensors, or
its `golden:` path, or --out-dir DIR/<id>.safetensors):

  tokens.<b>   I64 (P_b + N)  prompt + generated tokens of row b
  logits.<b>   F32 (N, V)     the last-position logits at each step, teacher-forced
                              (step k's logits chose tokens.<b>[P_b + k])
  margins.<b>  F64 (N)        the margin of each step's choice: top-1 minus top-2
                              logit when greedy, best minus second raced score when
                              sampled
  __metadata__ format, generator, generator_version, torch_version, ..., model,
               model_hash, case_id, case_hash, created, sampler, seed, rows,
               steps, fp32_spread, data_sha256

fp32_spread is max |float32 - float64| of the logits over every row and step:
the same transformers class in float64, teacher-forced through the golden's
tokens. genfence's tolerance for the golden is max(the case's atol,
GF_GOLDEN_SPREAD_K x fp32_spread) (docs/goldens.md "The tolerance rule").

A case naming any sampler profile or filter key (profile, chain, min_p,
typical_p, the penalties, logit_bias, history, min_new_tokens,
stop_token_ids: docs/sampler.md) is refused (exit 2, the key named): this
maker implements only temperature, top-k and top-p, and a golden made without
the filter would be wrong. Nothing is written when any case is refused.

Greedy steps take the argmax (lowest index on ties). Sampled steps reproduce
genfence's documented draw (docs/random.md, docs/sampler.md) over the float32
logits taken as float64: temperature, top-k, top-p, then the exponential race
with Philox4x32-10 uniforms keyed by (seed, sequence id = row index, step),
implemented independently in tools/reference/gf_random.py.

Hashes, defined once (docs/goldens.md) and computed identically by genfence:
  case hash   = sha256 of the canonical JSON of the case (keys sorted by bytes,
                no whitespace, numbers in shortest round-trip form) without the
                comparison-only top-level keys atol, gate, tags, backends,
                golden, description
  model hash  = sha256 of "<sha256(config.json)>\\n<weights>\\n<sha256(tokenizer.json)>\\n", weights =
                sha256(model.safetensors), or for a sharded checkpoint sha256 of
                "<sha256(index)>\\n" + "<sha256(shard)>\\n" per shard, names in byte order
  data_sha256 = sha256 over every tensor's raw little-endian bytes, tensors in
                byte order of their names

The YAML is read once, by genfence (`genfence list --json`, the C loader);
this tool recomputes every case hash and model hash itself and refuses to
write when either disagrees with genfence's.

Usage:
  tools/reference/golden.py --genfence build/genfence [--filter REGEX] [--out-dir DIR] [CASE_PATHS...]
  tools/reference/golden.py --genfence build/genfence --check-hashes [CASE_PATHS...]
      (no torch needed: recompute every case's hash and every model hash and
       compare them with genfence's; exit 1 on a disagreement)
  tools/reference/golden.py --versions
      (the generator's versions line, no torch import: part of a cached
       golden's address, docs/goldens.md "Goldens on demand")
  tools/reference/golden.py --verify FILE...
      (check a golden's format and data_sha256)
"""
import argparse
import datetime
import hashlib
import json
import math
import os
import platform
import subprocess
import sys

import gf_random

FORMAT = "genfence-golden-1"
HASH_EXCLUDED = ("atol", "gate", "tags", "backends", "golden", "description", "expect_verdict")
NONFINITE = ("NaN", "Infinity", "-Infinity")


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
    """The canonical form genfence hashes (docs/goldens.md). A non-finite float
    in a case tree arrives as {"$float": "NaN"|"Infinity"|"-Infinity"} (JSON
    has no such numbers) and is written as the bare token, as a float is."""
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
        if len(v) == 1 and v.get("$float") in NONFINITE:
            return v["$float"]
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


def weights_hash(model_dir):
    """sha256(model.safetensors); for a sharded checkpoint (no model.safetensors,
    a model.safetensors.index.json) sha256 of "<sha256(index)>\\n" then
    "<sha256(shard)>\\n" per shard its weight_map names, in byte order of the names."""
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(single) or not os.path.isfile(index):
        return sha256_file(single)
    with open(index, encoding="utf-8") as f:
        shards = sorted(set(json.load(f)["weight_map"].values()), key=lambda n: n.encode("utf-8"))
    lines = [sha256_file(index)] + [sha256_file(os.path.join(model_dir, n)) for n in shards]
    return hashlib.sha256("".join(x + "\n" for x in lines).encode("ascii")).hexdigest()


def model_hash(model_dir):
    parts = [sha256_file(os.path.join(model_dir, "config.json")), weights_hash(model_dir),
             sha256_file(os.path.join(model_dir, "tokenizer.json"))]
    return hashlib.sha256("".join(p + "\n" for p in parts).encode("ascii")).hexdigest()


GENERATOR_FILES = ("golden.py", "reference.py", "gf_random.py")


def versions_line():
    """One line naming the generator's versions without importing torch
    (importlib.metadata), and the sha256 of this maker's own sources: the
    generator part of a cached golden's address (genfence run --model,
    docs/goldens.md "Goldens on demand"). None and what is missing when the
    packages are not installed."""
    from importlib import metadata
    missing, parts = [], []
    for pkg in ("transformers", "torch", "tokenizers", "safetensors", "numpy"):
        try:
            parts.append(f"{pkg} {metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            missing.append(pkg)
    if missing:
        return None, missing
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for n in GENERATOR_FILES:
        h.update(open(os.path.join(here, n), "rb").read())
    return ", ".join(parts) + f", makers {h.hexdigest()[:16]}", []


def data_sha256(tensors):
    """sha256 over each tensor's raw little-endian bytes, tensors in byte order of their names."""
    import numpy as np
    h = hashlib.sha256()
    for name in sorted(tensors, key=lambda n: n.encode("utf-8")):
        a = np.ascontiguousarray(tensors[name])
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        h.update(a.tobytes())
    return h.hexdigest()


# ---- reading and writing goldens ------------------------------------------

def read_golden(path, verify=True):
    """(tensors {name: np.ndarray}, metadata {str: str}); with verify, the format
    tag and data_sha256 are checked (ValueError naming both digests)."""
    from safetensors import safe_open
    tensors = {}
    with safe_open(path, framework="numpy") as f:
        meta = dict(f.metadata() or {})
        for k in f.keys():
            tensors[k] = f.get_tensor(k)
    if verify:
        if meta.get("format") != FORMAT:
            raise ValueError(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")
        got = data_sha256(tensors)
        if meta.get("data_sha256") != got:
            raise ValueError(f"{path}: data_sha256 mismatch: the metadata says {meta.get('data_sha256')}, "
                             f"the tensor data hashes to {got}")
    return tensors, meta


def write_golden(path, tensors, meta):
    """Write tensors with meta plus format, rows, steps and data_sha256 (atomic)."""
    import numpy as np
    from safetensors.numpy import save_file
    tensors = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    rows = len([k for k in tensors if k.startswith("tokens.")])
    meta = dict(meta)
    meta["format"] = FORMAT
    meta["rows"] = str(rows)
    steps = {int(tensors[f"margins.{b}"].shape[0]) for b in range(rows)}
    if len(steps) == 1:
        meta["steps"] = str(steps.pop())
    meta["data_sha256"] = data_sha256(tensors)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    save_file(tensors, tmp, metadata=meta)
    os.replace(tmp, path)


# ---- the golden run ----------------------------------------------------------

def sampler_of(case):
    """The case's sampler keys with genfence's defaults (greedy, top-k/top-p off, seed 0)."""
    top_k, top_p = case.get("top_k"), case.get("top_p")
    return {
        "temperature": float(case.get("temperature") if case.get("temperature") is not None else 0.0),
        "top_k": int(top_k) if top_k is not None else None,
        "top_p": float(top_p) if top_p is not None else None,
        "seed": int(case.get("seed") if case.get("seed") is not None else 0),
    }


# The sampler profile / filter keys (harness/kit/keys.c k_sampler_ext_keys,
# docs/sampler.md). This maker implements none of them: a case naming any one
# (even at a value that filters nothing: genfence then records the whole
# extension in the golden's sampler) is refused, never made wrong. The list
# genfence prints (`genfence list --kinds`, "sampler keys:") is added to it.
SAMPLER_EXT_KEYS = ("profile", "chain", "min_p", "typical_p", "repetition_penalty", "frequency_penalty",
                    "presence_penalty", "penalty_last_n", "min_tokens_to_keep", "logit_bias", "history",
                    "history_prompt", "min_new_tokens", "stop_token_ids")


def sampler_ext_keys(genfence):
    """SAMPLER_EXT_KEYS plus those genfence names for golden_generation."""
    keys = list(SAMPLER_EXT_KEYS)
    p = subprocess.run([genfence, "list", "--kinds"], capture_output=True, text=True)
    kind = None
    for line in p.stdout.splitlines():
        if line and not line[0].isspace():
            kind = line.split()[0]
        elif kind == "golden_generation" and line.strip().startswith("sampler keys:"):
            listed = line.strip()[len("sampler keys:"):].split("(")[0]
            keys += [k.strip() for k in listed.split(",") if k.strip() and k.strip() not in keys]
    return keys


def unsupported_sampler_keys(case, keys):
    """The case's sampler profile / filter keys this maker does not implement, in the order given."""
    return [k for k in keys if k in case]


def golden_row(model, prompt_ids, n_new, s, seq):
    """One prompt alone: (tokens int64 (P + N), logits float32 (N, V), margins float64 (N))."""
    import numpy as np
    import torch
    import reference
    n_pos = reference.n_positions(model)
    if len(prompt_ids) + n_new - 1 > n_pos:
        raise ValueError(f"{len(prompt_ids)} prompt tokens + {n_new} new - 1 exceed the model's {n_pos} positions")
    seq_ids = list(prompt_ids)
    rows, margins = [], []
    for step in range(n_new):
        with torch.no_grad():
            out = model(input_ids=torch.tensor([seq_ids], dtype=torch.long), use_cache=False)
        r = out.logits[0, -1].float().numpy().astype(np.float32)
        vals = [float(x) for x in r]  # float32 -> float64, exactly
        if s["temperature"] == 0:
            tok, _, margin, _ = gf_random.greedy(vals)
        else:
            tok, _, margin, _ = gf_random.sample(vals, s["temperature"], s["seed"], seq, step, s["top_k"], s["top_p"])
        if tok < 0:
            raise ValueError(f"step {step}: nothing to sample")
        rows.append(r)
        margins.append(margin)
        seq_ids.append(int(tok))
    return (np.array(seq_ids, dtype=np.int64), np.stack(rows).astype(np.float32),
            np.array(margins, dtype=np.float64))


def fp32_spread(model64, rows):
    """max |float32 logits - float64 logits| over every row and step: the
    generator's own float32 rounding error on this model, from the same
    transformers class in float64, teacher-forced through the row's tokens
    (one full-sequence forward). docs/goldens.md "The tolerance rule"."""
    import numpy as np
    import torch
    spread = 0.0
    for toks, logits, n_new in rows:
        P = len(toks) - n_new
        with torch.no_grad():
            out = model64(input_ids=torch.tensor([list(toks[:-1])], dtype=torch.long), use_cache=False)
        l64 = out.logits[0, P - 1:].numpy()
        spread = max(spread, float(np.abs(logits.astype(np.float64) - l64).max()))
    return spread


def list_cases(genfence, paths, kind=None, regex=None):
    cmd = [genfence, "list", "--json"]
    if kind:
        cmd += ["--kind", kind]
    if regex:
        cmd += ["--filter", regex]
    cmd += list(paths)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise SystemExit(f"golden.py: `{' '.join(cmd)}` failed with status {p.returncode}")
    return json.loads(p.stdout)


def check_hashes(entries):
    """[(what, mine, genfence's)] for every disagreement."""
    bad = []
    models = {}
    for e in entries:
        mine = case_hash(e["case"])
        if mine != e.get("case_hash"):
            bad.append((f"case {e['id']}", mine, e.get("case_hash")))
        d = e.get("model_dir")
        if d and e.get("model_hash") is not None:
            if d not in models:
                models[d] = model_hash(d)
            if models[d] != e["model_hash"]:
                bad.append((f"model {d} (case {e['id']})", models[d], e["model_hash"]))
        elif d and (os.path.isfile(os.path.join(d, "model.safetensors")) or
                    os.path.isfile(os.path.join(d, "model.safetensors.index.json"))):
            bad.append((f"model {d} (case {e['id']})", "readable", "genfence could not hash it"))
    return bad


def versions():
    import numpy
    import safetensors
    import tokenizers
    import torch
    import transformers
    return {
        "generator_version": transformers.__version__,
        "torch_version": torch.__version__,
        "tokenizers_version": tokenizers.__version__,
        "safetensors_version": safetensors.__version__,
        "numpy_version": numpy.__version__,
        "python_version": platform.python_version(),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genfence", help="the genfence binary (reads the YAML)")
    ap.add_argument("--out-dir", default=None, help="write DIR/<id>.safetensors (default: each case's golden)")
    ap.add_argument("--filter", default=None, help="only case ids matching this POSIX extended regex")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--check-hashes", action="store_true",
                    help="compare every case hash and model hash with genfence's; write nothing")
    ap.add_argument("--versions", action="store_true",
                    help="print the generator's versions line (no torch import); exit 3 naming what is missing")
    ap.add_argument("--verify", nargs="+", metavar="FILE", help="check goldens' format and data_sha256")
    ap.add_argument("paths", nargs="*", help="case files or directories (default: genfence's default suite)")
    a = ap.parse_args(argv)

    if a.versions:
        line, missing = versions_line()
        if line is None:
            print(f"missing Python packages: {', '.join(missing)} (in {sys.executable})")
            return 3
        print(line)
        return 0
    if a.verify:
        rc = 0
        for f in a.verify:
            try:
                t, m = read_golden(f)
                print(f"golden.py: {f}: ok ({m.get('generator')} {m.get('generator_version')}, "
                      f"{m.get('rows')} rows, data_sha256 {m['data_sha256']})")
            except Exception as e:  # noqa: BLE001
                print(f"golden.py: {e}", file=sys.stderr)
                rc = 1
        return rc
    if not a.genfence:
        ap.error("--genfence is required")

    if a.check_hashes:
        entries = list_cases(a.genfence, a.paths, regex=a.filter)
        bad = check_hashes(entries)
        for what, mine, theirs in bad:
            print(f"golden.py: {what}: mine {mine}, genfence's {theirs}", file=sys.stderr)
        n_models = len({e["model_dir"] for e in entries if e.get("model_hash")})
        print(f"golden.py: {len(entries)} case hashes and {n_models} model hash(es) checked, "
              f"{len(bad)} disagreement(s)")
        return 1 if bad else 0

    entries = list_cases(a.genfence, a.paths, kind="golden_generation", regex=a.filter)
    if not entries:
        print("golden.py: no golden_generation cases", file=sys.stderr)
        return 2
    for e in entries:
        if not e.get("model_hash"):
            print(f"golden.py: case {e['id']}: genfence cannot read the model {e.get('model_dir')}", file=sys.stderr)
            return 2
    bad = check_hashes(entries)
    if bad:
        for what, mine, theirs in bad:
            print(f"golden.py: {what}: my hash {mine} != genfence's {theirs}; refusing to write", file=sys.stderr)
        return 2
    ext_keys = sampler_ext_keys(a.genfence)
    refused = [(e["id"], unsupported_sampler_keys(e["case"], ext_keys)) for e in entries]
    refused = [(i, ks) for i, ks in refused if ks]
    for cid, ks in refused:
        print(f"golden.py: case {cid}: sampler key{'s' if len(ks) > 1 else ''} {', '.join(repr(k) for k in ks)} "
              f"(profile/filter, docs/sampler.md) not implemented by this maker: its golden would be wrong; "
              f"refusing to write (make it with `genfence bless --backend NAME`, or drop the key)", file=sys.stderr)
    if refused:
        return 2

    import torch
    import reference
    torch.set_num_threads(max(1, a.threads))
    ver = versions()
    loaded = {}
    for e in entries:
        case = e["case"]
        model_dir = e["model_dir"]
        if model_dir not in loaded:
            import copy
            m = reference.load_model(model_dir)
            loaded[model_dir] = (m, reference.load_tokenizer(model_dir), copy.deepcopy(m).double().eval())
        model, tok, model64 = loaded[model_dir]
        s = sampler_of(case)
        n_new = int(case.get("max_new_tokens", 64))
        tensors = {}
        for b, prompt in enumerate(case["prompts"]):
            ids = list(tok.encode(prompt).ids) if isinstance(prompt, str) else [int(i) for i in prompt]
            if not ids:
                raise SystemExit(f"golden.py: {e['id']}: prompt {b} encodes to no tokens")
            toks, logits, margins = golden_row(model, ids, n_new, s, b)
            tensors[f"tokens.{b}"], tensors[f"logits.{b}"], tensors[f"margins.{b}"] = toks, logits, margins
        spread = fp32_spread(model64, [(tensors[f"tokens.{b}"], tensors[f"logits.{b}"], n_new)
                                       for b in range(len(case["prompts"]))])
        meta = {
            "generator": "transformers",
            **ver,
            "model": case["model"],
            "model_hash": e["model_hash"],
            "case_id": case["id"],
            "case_hash": e["case_hash"],
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "sampler": canonical_json(s),
            "seed": str(s["seed"]),
            "decoding": "each prompt alone, uncached full recompute (" + type(model).__name__ + ", float32)",
            "fp32_spread": "%.6g" % spread,
            "generator_versions": versions_line()[0] or "",
        }
        out = os.path.join(a.out_dir, case["id"] + ".safetensors") if a.out_dir else e["golden"]
        write_golden(out, tensors, meta)
        rows = len(case["prompts"])
        mins = min(float(tensors[f"margins.{b}"].min()) for b in range(rows))
        print(f"golden.py: wrote {out}: {rows} row{'s' if rows != 1 else ''} x {n_new} steps, "
              f"smallest margin {mins:.4g}, fp32 spread {spread:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
