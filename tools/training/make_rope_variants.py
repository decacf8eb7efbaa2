#!/usr/bin/env python3
"""Write the tiny seeded checkpoints of the RoPE / attention-window variants
(issue 27 item 4) and the golden_generation cases over them.

  make_rope_variants.py --out DIR

DIR/<name>/      one checkpoint per VARIANTS entry (make_tiny_llama.build:
                 vocab 512, hidden 64, 2 layers, 4 query / 2 kv heads,
                 head_dim 16), the same seed per family so a variant and its
                 twin differ only in config.json
DIR/cases.yaml   golden_generation cases, one prompt each (token ids), the
                 boundary sweeps at their edges:
                   sliding window w = 8: prompts of w - 1, w, w + 1 tokens and
                   one step (the query at the last position sees w - 1, w, w
                   keys: only the +1 prompt drops a key), and a 20-token prompt
                   with 6 steps
                   yarn: the default band, each band edge just below and just
                   above an integer (floor / ceil flip), the low == high
                   singularity, attention_factor given with mscale keys
                   longrope: max_position_embeddings = original - 1, original,
                   original + 1 (short, short, long factors), and the
                   factor-only form
                   dynamic: the context's last two lengths (seq_len = max - 1
                   and max: NTK starts past max, beyond genfence's context)
DIR/twins.json   [[variant, twin, what]]: the twin is the variant's config as
                 an off-by-one reads it (the band edge on the other integer,
                 the other factor set at the boundary); genfence on the
                 variant must miss transformers on the twin
                 (tests/cli/rope_variants.sh)
DIR/refused.json [[name, message regex]]: configs the loader must refuse
                 (version-dependent meaning)
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_llama  # noqa: E402

W = 8  # the sliding window
DIM, BASE, YARN_POS = 16, 10000.0, 64
ORIG = 32  # longrope's original_max_position_embeddings
DYN_POS = 64  # dynamic NTK's threshold: max_position_embeddings, genfence's context
SHORT = [1.0, 1.05, 1.1, 1.2, 1.35, 1.5, 1.8, 2.0]
LONG = [1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]


def beta_for(x, max_pos=YARN_POS):
    """The rotation count whose YaRN correction dimension is x (the inverse
    of transformers' find_correction_dim)."""
    return max_pos / (2 * math.pi) * math.exp(-x * 2 * math.log(BASE) / DIM)


def yarn(**kw):
    return {"max_position_embeddings": YARN_POS, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, **kw}}


def longrope(max_pos, short=SHORT, long=LONG):
    return {"max_position_embeddings": max_pos, "original_max_position_embeddings": ORIG,
            "rope_scaling": {"rope_type": "longrope", "short_factor": short, "long_factor": long}}


D = 1e-3
# name: (family, config, seed)
VARIANTS = {
    "mistral.w8": ("mistral", {"sliding_window": W}, 21),
    "qwen2.w8": ("qwen2", {"use_sliding_window": True, "sliding_window": W, "max_window_layers": 0}, 22),
    "yarn.default": ("llama", yarn(), 23),  # band [0, 3]: beta_fast's edge clamped at 0
    "yarn.low-below": ("llama", yarn(beta_fast=beta_for(1 - D), beta_slow=beta_for(4.5)), 23),  # [0, 5]
    "yarn.low-above": ("llama", yarn(beta_fast=beta_for(1 + D), beta_slow=beta_for(4.5)), 23),  # [1, 5]
    "yarn.high-below": ("llama", yarn(beta_fast=beta_for(0.5), beta_slow=beta_for(4 - D)), 23),  # [0, 4]
    "yarn.high-above": ("llama", yarn(beta_fast=beta_for(0.5), beta_slow=beta_for(4 + D)), 23),  # [0, 5]
    "yarn.singular": ("llama", yarn(beta_fast=beta_for(2.5), beta_slow=beta_for(1.5)), 23),  # [2, 2]: + 0.001
    "yarn.attention-factor": ("llama", yarn(attention_factor=1.3, mscale=0.707, mscale_all_dim=0.707), 23),
    "longrope.orig-minus1": ("llama", longrope(ORIG - 1), 24),
    "longrope.orig": ("llama", longrope(ORIG), 24),
    "longrope.orig-plus1": ("llama", longrope(ORIG + 1), 24),
    "dynamic.f3.3": ("llama", {"max_position_embeddings": DYN_POS,
                               "rope_scaling": {"rope_type": "dynamic", "factor": 3.3}}, 26),
    "longrope.factor": ("llama", {"rope_scaling": {"rope_type": "longrope", "factor": 2.0, "short_factor": SHORT,
                                                   "long_factor": LONG}}, 24),
}
# twins: the variant's config as an off-by-one reads it
TWINS = {
    "twin.yarn.low-above-as-below": ("llama", yarn(beta_fast=beta_for(1 - D), beta_slow=beta_for(4.5)), 23),
    "twin.yarn.high-below-as-above": ("llama", yarn(beta_fast=beta_for(0.5), beta_slow=beta_for(4 + D)), 23),
    "twin.longrope.orig-as-long": ("llama", longrope(ORIG, short=LONG), 24),
    "twin.longrope.orig-plus1-as-short": ("llama", longrope(ORIG + 1, long=SHORT), 24),
    "twin.dynamic.threshold-minus1": ("llama", {"max_position_embeddings": DYN_POS - 1,
                                                "rope_scaling": {"rope_type": "dynamic", "factor": 3.3}}, 26),
    "twin.dynamic.as-linear": ("llama", {"max_position_embeddings": DYN_POS,
                                         "rope_scaling": {"rope_type": "linear", "factor": 3.3}}, 26),
}
TWIN_PAIRS = [
    ["yarn.low-above", "twin.yarn.low-above-as-below", "YaRN low edge floor(1 + 1e-3) read as 0"],
    ["yarn.low-below", "yarn.low-above", "YaRN low edge floor(1 - 1e-3) read as 1"],
    ["yarn.high-below", "twin.yarn.high-below-as-above", "YaRN high edge ceil(4 - 1e-3) read as 5"],
    ["yarn.high-above", "yarn.high-below", "YaRN high edge ceil(4 + 1e-3) read as 4"],
    ["longrope.orig", "twin.longrope.orig-as-long", "longrope at max_position == original: long factors (>= for >)"],
    ["longrope.orig-plus1", "twin.longrope.orig-plus1-as-short", "longrope one past original: short factors (> read as >=+1)"],
    ["dynamic.f3.3", "twin.dynamic.threshold-minus1", "dynamic NTK scaled from seq_len = max_position_embeddings (>= for >)"],
    ["dynamic.f3.3", "twin.dynamic.as-linear", "dynamic NTK read as linear scaling"],
]
REFUSED = {
    "refused.yarn-mscale": ("llama", yarn(mscale=0.707, mscale_all_dim=0.707), "mscale.*attention_factor"),
    "refused.dynamic-original": ("llama", {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0,
                                                            "original_max_position_embeddings": 128}},
                                 "dynamic.*original_max_position_embeddings differs"),
    "refused.qwen2-max-window-layers": ("qwen2", {"use_sliding_window": True, "sliding_window": W,
                                                  "max_window_layers": 1}, "max_window_layers 1"),
}


def ids(n):
    return [(37 * i + 11) % 500 + 1 for i in range(n)]


def cases_for(name):
    if name.endswith(".w8"):
        out = [(f"rope.{name}.p{W + k}", ids(W + k), 1) for k in (-1, 0, 1)]
        return out + [(f"rope.{name}.long", ids(20), 6)]
    if name.startswith("yarn."):
        return [(f"rope.{name}", ids(40), 4)]
    if name.startswith("dynamic."):  # the context's last two lengths: seq_len max - 1 and max
        return [(f"rope.{name}.p{DYN_POS + k}", ids(DYN_POS + k), 1) for k in (-1, 0)]
    return [(f"rope.{name}", ids(24), 4)]


def twin_len(variant):
    return 40 if variant.startswith("yarn") else DYN_POS if variant.startswith("dynamic") else 24


def save(path, family, cfg, seed):
    model = make_tiny_llama.build(family, "none", seed, family == "qwen2", cfg)
    make_tiny_llama.save(model, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    for name, (fam, cfg, seed) in {**VARIANTS, **TWINS}.items():
        save(os.path.join(out, name), fam, cfg, seed)
    for name, (fam, cfg, _) in REFUSED.items():
        save(os.path.join(out, name), fam, cfg, 25)
    lines = ["# made by tools/training/make_rope_variants.py: the RoPE / sliding-window variants, goldens by",
             "# tools/reference/golden.py (transformers), judged at the default gate", "cases:"]
    for name in VARIANTS:
        for cid, toks, steps in cases_for(name):
            lines += [f"  - id: {cid}", "    kind: golden_generation", "    tags: [golden, rope]",
                      f"    model: {json.dumps(os.path.join(out, name))}",
                      f"    prompts: [{json.dumps(toks)}]", f"    max_new_tokens: {steps}",
                      "    atol: 1.0e-4", "    gate: {abs: 1.0e-4, ulps: 4}"]
    with open(os.path.join(out, "cases.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "twins.json"), "w") as f:
        json.dump([[os.path.join(out, v), os.path.join(out, t), w, ids(twin_len(v))] for v, t, w in TWIN_PAIRS], f,
                  indent=1)
    with open(os.path.join(out, "refused.json"), "w") as f:
        json.dump([[os.path.join(out, n), r] for n, (_, _, r) in REFUSED.items()], f, indent=1)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
