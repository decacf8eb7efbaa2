#!/usr/bin/env python3
"""Check one genfence backend against ref through the CLI (used by
tests/cli/backend_vs_ref.sh and tests/cli/plugin_build.sh).

    check_backend.py GENFENCE MODEL_DIR BACKEND [--threads 1,2] [--atol 1e-4]

For every prompt (texts, plus a full-context id sequence):
  1. ref decodes 32 greedy tokens;
  2. `genfence forward` runs the prompt + those tokens on ref and on BACKEND
     (teacher-forced: both see the same prefix); max |delta logit| over every
     position must be <= atol;
  3. BACKEND decodes 32 greedy tokens on its own; they must equal ref's, a
     divergence being excused only where ref's top-1 minus top-2 margin at
     that step is below atol (the margin gate).
Then `generate --verify` (cached vs uncached on BACKEND) and `generate
--batch-prompts` (left-padded batch vs single prompts) must pass.
Prints one line per check and the worst delta; exit 0 all passed, 1 not.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file

TEXTS = ["Sherlock Holmes", "It was a dark night and", "My dear Watson, said he, I",
         "\u201cYou have been in Afghanistan, I perceive.\u201d"]
GREEDY = 32


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return p.returncode, p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("genfence")
    ap.add_argument("model")
    ap.add_argument("backend")
    ap.add_argument("--threads", default="1", help="thread counts to run BACKEND with, e.g. 1,2")
    ap.add_argument("--atol", type=float, default=1e-4)
    a = ap.parse_args()
    gf, model, be = a.genfence, a.model, a.backend
    threads = [int(t) for t in a.threads.split(",")]
    cfg = json.load(open(os.path.join(model, "config.json")))
    V, NP = cfg["vocab_size"], cfg.get("n_positions") or cfg["max_position_embeddings"]  # GPT-2 | Llama
    have_tok = os.path.exists(os.path.join(model, "tokenizer.json"))
    fails = 0
    worst = 0.0

    def fail(msg):
        nonlocal fails
        fails += 1
        print("FAIL " + msg)

    prompts = []  # (label, args selecting the prompt)
    if have_tok:
        prompts += [(repr(t), ["--prompt", t]) for t in TEXTS]
    prompts.append(("ids x16", ["--tokens", ",".join(str((7 * i + 3) % V) for i in range(16))]))
    long_ids = [(11 * i + 5) % V for i in range(NP - GREEDY)]
    prompts.append((f"ids x{len(long_ids)}", ["--tokens", ",".join(map(str, long_ids))]))

    with tempfile.TemporaryDirectory() as tmp:
        for label, sel in prompts:
            rc, out, err = run([gf, "generate", "--model", model, *sel, "--temperature", "0", "--no-eos",
                                "--max-new-tokens", str(GREEDY), "--json"])
            if rc != 0:
                fail(f"{label}: ref generate exit {rc}: {err.strip()}")
                continue
            ref = json.loads(out)
            prompt_ids, ref_tok = ref["prompt_tokens"], ref["tokens"]
            full = ",".join(map(str, prompt_ids + ref_tok[:-1]))
            f_ref, f_be = os.path.join(tmp, "ref.safetensors"), os.path.join(tmp, "be.safetensors")
            rc1, _, e1 = run([gf, "forward", "--model", model, "--tokens", full, "--out", f_ref])
            if rc1:
                fail(f"{label}: ref forward exit {rc1}: {e1.strip()}")
                continue
            lr = load_file(f_ref)["logits"].astype(np.float64)
            # ref's margin at each generated step (positions P-1 ...)
            P = len(prompt_ids)
            top2 = np.sort(lr[P - 1:], axis=1)[:, -2:]
            margins = top2[:, 1] - top2[:, 0]
            for t in threads:
                th = ["--threads", str(t)]
                rc2, _, e2 = run([gf, "forward", "--model", model, "--tokens", full, "--out", f_be,
                                  "--backend", be, *th])
                if rc2:
                    fail(f"{label}: {be} forward (threads {t}) exit {rc2}: {e2.strip()}")
                    continue
                lb = load_file(f_be)["logits"].astype(np.float64)
                d = float(np.abs(lr - lb).max()) if lr.shape == lb.shape else float("inf")
                if not np.isfinite(lb).all():
                    d = float("inf")
                worst = max(worst, d)
                rc, out, err = run([gf, "generate", "--model", model, *sel, "--temperature", "0", "--no-eos",
                                    "--max-new-tokens", str(GREEDY), "--json", "--backend", be, *th])
                if rc != 0:
                    fail(f"{label}: {be} generate (threads {t}) exit {rc}: {err.strip()}")
                    continue
                got = json.loads(out)["tokens"]
                div = next((k for k, (x, y) in enumerate(zip(ref_tok, got)) if x != y), -1)
                if div < 0 and len(got) != len(ref_tok):
                    div = min(len(got), len(ref_tok))
                excused = 0 <= div < len(margins) and margins[div] < a.atol
                ok = d <= a.atol and (div < 0 or excused)
                what = ("equal" if div < 0 else f"diverge at {div} (ref margin "
                        f"{margins[min(div, len(margins) - 1)]:.3e}{', excused' if excused else ''})")
                print(f"{'ok  ' if ok else 'FAIL'} {be} threads {t} {label}: {P}+{GREEDY - 1} positions, "
                      f"max |delta logit| {d:.3e} (atol {a.atol:g}), greedy {GREEDY} {what}, "
                      f"min ref margin {margins.min():.4f}")
                fails += not ok

        vsel = ["--prompt", "Sherlock Holmes"] if have_tok else ["--tokens", "1,2,3,4,5"]
        for t in threads:
            th = ["--threads", str(t)]
            rc, out, err = run([gf, "generate", "--model", model, *vsel, "--verify", "--max-new-tokens", "64",
                                "--json", "--backend", be, *th])
            if rc != 0:
                fail(f"{be} threads {t} generate --verify exit {rc}: {out.strip()} {err.strip()}")
            else:
                # tolerate a bare inf/nan (not JSON) where the two sides agree exactly
                v = json.loads(re.sub(r"(?<=: )(-?)(inf|nan)\b",
                                      lambda m: m.group(1) + ("Infinity" if m.group(2) == "inf" else "NaN"),
                                      out))["verify"]
                print(f"ok   {be} threads {t} verify: {v['steps']} steps cached vs uncached, max |delta| "
                      f"{v['max_abs_logit_diff']:.3e}, tokens_equal {v['tokens_equal']}")
            if have_tok:
                rc, out, err = run([gf, "generate", "--model", model, "--batch-prompts",
                                    "Holmes|It was a dark night and|My dear Watson, said he, I",
                                    "--max-new-tokens", "24", "--backend", be, *th])
                if rc != 0:
                    fail(f"{be} threads {t} --batch-prompts exit {rc}: {out.strip()} {err.strip()}")
                else:
                    print(f"ok   {be} threads {t} batch-prompts: left-padded batch equals single prompts")
    print(f"{be}: worst max |delta logit| vs ref {worst:.3e}; {'all passed' if not fails else f'{fails} failed'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
