#!/usr/bin/env python3
"""genfence bench's workload in PyTorch (transformers' GPT2LMHeadModel /
LlamaForCausalLM, fp32, eval, no grad): a 16-token prompt, 100 greedy tokens
with the KV cache (prefill and decode timed apart), one warm-up, the median of
5; a prefill of 128 tokens; a decode step of B = 8 rows over a 16-token cache.
Prints one JSON object shaped like one entry of `genfence bench --json`'s
"backends" (the fields bench/compare.py reads). A tool for people: bench/compare.sh."""
import argparse
import json
import statistics
import sys
import time

import torch
import transformers

PROMPT, PREFILL, ROWS, STEPS = 16, 128, 8, 16


def shape_config(name):
    if name == "gpt2-small":
        return transformers.GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    if name == "llama-small":
        return transformers.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                                        num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
                                        max_position_embeddings=2048, tie_word_embeddings=False)
    sys.exit(f"torch_bench: unknown shape {name!r} (gpt2-small, llama-small)")


def load(args):
    if args.shape:
        torch.manual_seed(1)
        model = transformers.AutoModelForCausalLM.from_config(shape_config(args.shape))
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32)
    return model.float().eval()


def generate(model, prompt, new_tokens):
    """Greedy with the cache; returns (prefill_s, decode_s per token, total_s)."""
    t0 = time.perf_counter()
    out = model(input_ids=prompt, use_cache=True)
    past, tok = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
    t_first = time.perf_counter()
    for _ in range(new_tokens - 1):
        out = model(input_ids=tok, past_key_values=past, use_cache=True)
        past, tok = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
    t_end = time.perf_counter()
    return t_first - t0, (t_end - t_first) / (new_tokens - 1), t_end - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--model")
    g.add_argument("--shape")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--new-tokens", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load(args)
    V = model.config.vocab_size
    n_pos = getattr(model.config, "n_positions", None) or model.config.max_position_embeddings
    prompt = torch.tensor([[(1 + 37 * i) % V for i in range(PROMPT)]])
    runs = []
    with torch.no_grad():
        for r in range(args.repeats + 1):
            res = generate(model, prompt, args.new_tokens)
            if r:
                runs.append(res)
        pre = statistics.median(x[0] for x in runs)
        dec = statistics.median(x[1] for x in runs)
        tot = statistics.median(x[2] for x in runs)
        T = min(PREFILL, n_pos)
        long = torch.tensor([[(7 + 131 * i) % V for i in range(T)]])
        pre_long, bat = [], []
        for r in range(args.repeats + 1):
            t0 = time.perf_counter()
            model(input_ids=long, use_cache=True)
            t1 = time.perf_counter()
            rows = torch.tensor([[(7 + 131 * (b * PROMPT + i)) % V for i in range(PROMPT)] for b in range(ROWS)])
            past = model(input_ids=rows, use_cache=True).past_key_values
            t2 = time.perf_counter()
            for s in range(STEPS):
                step = torch.tensor([[(7 + 131 * (b * STEPS + s)) % V] for b in range(ROWS)])
                past = model(input_ids=step, past_key_values=past, use_cache=True).past_key_values
            t3 = time.perf_counter()
            if r:
                pre_long.append(t1 - t0)
                bat.append((t3 - t2) / STEPS)
    row = {
        "backend": "pytorch", "ok": True, "error": None, "dtype": "f32", "threads": torch.get_num_threads(),
        "library": f"PyTorch {torch.__version__}, transformers {transformers.__version__}",
        "cached": {"new_tokens": args.new_tokens, "seconds": tot, "tokens_per_s": args.new_tokens / tot,
                   "prefill_ms": pre * 1e3, "prefill_ms_per_token": pre * 1e3 / PROMPT,
                   "decode_ms_per_token": dec * 1e3, "decode_tokens_per_s": 1 / dec},
        "prefill": {"tokens": T, "ms": statistics.median(pre_long) * 1e3,
                    "tokens_per_s": T / statistics.median(pre_long)},
        "batched_decode": {"rows": ROWS, "ms": statistics.median(bat) * 1e3,
                           "tokens_per_s": ROWS / statistics.median(bat)},
    }
    json.dump(row, sys.stdout)
    print()


if __name__ == "__main__":
    main()
