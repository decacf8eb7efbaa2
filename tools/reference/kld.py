#!/usr/bin/env python3
"""KL divergence of a backend's next-token distributions from ref's,
teacher-forced over the goldens' token sequences (the measurements behind the
statistical tier's thresholds; docs/llamacpp.md).

    kld.py GENFENCE MODEL_DIR --backend llamacpp:f16 [--backend ...]
           [--golden golden/golden.*.safetensors ...] [--json]

For every sequence tokens.K of every golden file, `genfence forward` runs the
whole sequence (uncached, one pass) on ref and on each backend; at every
position t < T - 1:
  KL(ref || backend) = sum_v p_ref(v) (log p_ref(v) - log p_be(v))  (nats, float64),
  top-1 agreement    = argmax p_ref == argmax p_be,
  |delta p|          = |p_ref(x) - p_be(x)| of the sequence's next token x = tokens[t + 1],
  and, where top-1 differs, the largest top-two logit margin of ref there,
as llama-perplexity --kl-divergence reports them (mean, p99, max KL; top-1 %;
|delta p|). Prints one line per backend (or one JSON object).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def forward(gf, model, backend, tokens, out):
    ids = ",".join(str(int(t)) for t in tokens)
    p = subprocess.run([gf, "forward", "--model", model, "--tokens", ids, "--out", out, "--backend", backend],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"kld.py: forward on {backend} failed ({p.returncode}): {p.stderr.strip()}")
    return load_file(out)["logits"]


def sequences(files):
    for f in files:
        with safe_open(f, "np") as s:
            for k in sorted(k for k in s.keys() if k.startswith("tokens.")):
                yield f"{os.path.basename(f)}:{k}", s.get_tensor(k)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("genfence")
    ap.add_argument("model")
    ap.add_argument("--backend", action="append", required=True)
    ap.add_argument("--golden", nargs="+", default=None,
                    help="golden files (default: golden/golden.*.safetensors beside this tool)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    files = a.golden or sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "golden",
                                                      "golden.*.safetensors")))
    if not files:
        sys.exit("kld.py: no golden files")
    kl = {b: [] for b in a.backend}
    top1 = {b: [] for b in a.backend}
    dp = {b: [] for b in a.backend}
    margin = []
    n_seq = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, toks in sequences(files):
            n_seq += 1
            lr = log_softmax(forward(a.genfence, a.model, "ref", toks, f"{tmp}/ref.st"))[:-1]
            pr = np.exp(lr)
            nxt = toks[1:].astype(np.int64)
            srt = np.sort(lr, axis=1)
            margin.append(srt[:, -1] - srt[:, -2])  # ref's top-two gap in log-probability (= logits)
            for b in a.backend:
                lb = log_softmax(forward(a.genfence, a.model, b, toks, f"{tmp}/be.st"))[:-1]
                kl[b].append((pr * (lr - lb)).sum(axis=1))
                top1[b].append(lr.argmax(1) == lb.argmax(1))
                rows = np.arange(len(nxt))
                dp[b].append(np.abs(pr[rows, nxt] - np.exp(lb[rows, nxt])))
    out = {}
    for b in a.backend:
        k = np.concatenate(kl[b])
        d = np.concatenate(dp[b])
        agree = np.concatenate(top1[b])
        m = np.concatenate(margin)
        out[b] = {"sequences": n_seq, "positions": int(k.size),
                  "kl_mean": float(k.mean()), "kl_p99": float(np.percentile(k, 99)), "kl_max": float(k.max()),
                  "top1_agreement": float(agree.mean()),
                  "top1_disagreements": int((~agree).sum()),
                  "top1_disagree_max_ref_margin": float(m[~agree].max()) if (~agree).any() else None,
                  "dp_mean": float(d.mean()), "dp_p99": float(np.percentile(d, 99)), "dp_max": float(d.max())}
    if a.json:
        print(json.dumps(out, indent=1))
        return
    for b, r in out.items():
        print(f"{b:24s} {r['positions']} positions of {r['sequences']} sequences: KL mean {r['kl_mean']:.3e} "
              f"p99 {r['kl_p99']:.3e} max {r['kl_max']:.3e}; top-1 {100 * r['top1_agreement']:.2f}%; "
              f"|dp| mean {r['dp_mean']:.3e} p99 {r['dp_p99']:.3e} max {r['dp_max']:.3e}"
              + (f"; ref margin <= {r['top1_disagree_max_ref_margin']:.3g} where top-1 differs"
                 if r["top1_disagreements"] else ""))


if __name__ == "__main__":
    main()
