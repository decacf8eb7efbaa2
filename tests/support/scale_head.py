#!/usr/bin/env python3
"""Copy a GPT-2 model directory with its LayerNorms scaled: logits and
attention scores in the thousands, where a softmax that skips the max
subtraction overflows (exp(710) = inf in double, exp(89) in float).

    scale_head.py SRC DST [--ln-f 500] [--shift 0] [--ln-1 0]

--ln-f S multiplies transformer.ln_f's weight and bias by S (every logit is a
dot product with LN_f's output, so the logits scale by S); --ln-1 A
multiplies every layer's ln_1 weight and bias by A (q and k both grow about
A-fold, the attention scores about A^2-fold). --shift C adds C to every
logit and leaves their differences (the distribution) alone: embedding
channel 0 becomes 1 for every token (wte is tied to the head) and LN_f's
channel 0 the constant C (weight 0, bias C), so logit_v = sum over the other
channels + C; the model computes something else, but golden-free checks and
a golden blessed at test time do not mind. config.json and tokenizer.json
are copied as they are. Pure Python (struct, array): no numpy or torch, so a
test can make the variant at run time into its own folder; nothing large is
committed. Only F32 tensors can be scaled.
"""
import argparse
import array
import json
import os
import shutil
import struct
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--ln-f", type=float, default=500.0)
    ap.add_argument("--ln-1", type=float, default=0.0, help="0: ln_1 unchanged")
    ap.add_argument("--shift", type=float, default=0.0, help="added to every logit")
    a = ap.parse_args()
    if sys.byteorder != "little":
        sys.exit("scale_head: safetensors data is little-endian; this host is not")
    with open(os.path.join(a.src, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = bytearray(f.read())
    scaled = []
    for name, t in header.items():
        if name == "__metadata__":
            continue
        base = name.split(".")
        factor = 0.0
        if name.endswith("wte.weight") and a.shift:
            lo, hi = t["data_offsets"]
            D = t["shape"][1]
            v = array.array("f")
            v.frombytes(bytes(data[lo:hi]))
            for i in range(0, len(v), D):  # channel 0 of every token's embedding
                v[i] = 1.0
            data[lo:hi] = v.tobytes()
            scaled.append(name)
            continue
        if name.endswith(("ln_f.weight", "ln_f.bias")):
            factor = a.ln_f
        elif a.ln_1 and len(base) >= 3 and base[-2] == "ln_1":
            factor = a.ln_1
        if not factor:
            continue
        if t["dtype"] != "F32":
            sys.exit(f"scale_head: {name} is {t['dtype']}, only F32 is scaled")
        lo, hi = t["data_offsets"]
        v = array.array("f")
        v.frombytes(bytes(data[lo:hi]))
        for i in range(len(v)):
            v[i] *= factor
        if a.shift and name.endswith("ln_f.weight"):
            v[0] = 0.0
        if a.shift and name.endswith("ln_f.bias"):
            v[0] = a.shift
        data[lo:hi] = v.tobytes()
        scaled.append(name)
    if not any(s.endswith("ln_f.weight") for s in scaled):
        sys.exit("scale_head: no ln_f.weight in the model (a GPT-2 checkpoint is expected)")
    os.makedirs(a.dst, exist_ok=True)
    for f in ("config.json", "tokenizer.json"):
        if os.path.exists(os.path.join(a.src, f)):
            shutil.copy(os.path.join(a.src, f), os.path.join(a.dst, f))
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(os.path.join(a.dst, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.write(data)
    print(f"scale_head: {a.dst}: changed {len(scaled)} tensors (ln_f x {a.ln_f:g}, logits + {a.shift:g}, "
          f"ln_1 x {a.ln_1:g})")


if __name__ == "__main__":
    main()
