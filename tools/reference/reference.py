#!/usr/bin/env python3
"""Reference logits / greedy decoding for a Hugging Face model directory.

Loads DIR with transformers.GPT2LMHeadModel, LlamaForCausalLM or
Qwen2ForCausalLM (by config.json's model_type) .from_pretrained (float32, eval
mode, torch.no_grad) and DIR/tokenizer.json with tokenizers.Tokenizer.from_file.

CLI:
  reference.py --model DIR (--tokens 1,2,3 | --text TEXT) --out FILE.safetensors [--greedy N] [--json]
  reference.py --model DIR --texts-file PROMPTS.json --out PREFIX [--greedy N] [--crop]
  reference.py --model DIR --card [--card-steps 64] [--prompt "Sherlock Holmes"]

--out writes (safetensors.torch.save_file):
  logits         F32 (T, V)   logits of the prompt at every position
  tokens         I64 (T)      the prompt tokens
  and with --greedy N additionally:
  greedy_tokens  I64 (N)      argmax continuation
  greedy_logits  F32 (N, V)   the last-position logits at each greedy step
                              (row k produced greedy_tokens[k])
  greedy_margins F32 (N)      top1 - top2 logit at each greedy step
  metadata: generator "transformers <ver> / torch <ver>", model (dir),
  greedy_mode "uncached full recompute", plus prompt info.

Greedy decoding is an UNCACHED FULL RECOMPUTE: at each step the whole sequence
so far is run through the model (no past_key_values) and the argmax of the
last position is appended (ties -> lowest id, torch.argmax). prompt + N must
fit in n_positions.

With --greedy N (or --json) a JSON object is printed to stdout:
  {"prompt_tokens": [...], "greedy_tokens": [...], "margins": [...], "text": "<decoded continuation>"}

--card prints the model-quality check: greedy and sampled (temperature 0.8,
top-k 40, top-p 0.95, torch.Generator seeded 1337, filters applied in that
order, as HF does) continuations of the prompt and the smallest greedy margin.

Importable: load_model, load_tokenizer, forward_logits, greedy, sample, card.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

DEFAULT_PROMPT = "Sherlock Holmes"


def versions():
    import transformers
    return f"transformers {transformers.__version__} / torch {torch.__version__}"


MODEL_CLASSES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                 "mistral": "MistralForCausalLM"}


def model_type(model_dir):
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        return json.load(f).get("model_type")


def load_model(model_dir):
    """The model_type's *ForCausalLM in float32 eval mode (weights stored as
    F16/BF16 are converted to float32, as genfence does)."""
    import transformers
    mt = model_type(model_dir)
    if mt not in MODEL_CLASSES:
        raise SystemExit(f"{model_dir}: model_type {mt!r} not supported (supported: {', '.join(MODEL_CLASSES)})")
    cls = getattr(transformers, MODEL_CLASSES[mt])
    model = cls.from_pretrained(model_dir, torch_dtype=torch.float32)
    model.float().eval()
    return model


def n_positions(model):
    c = model.config
    return c.n_positions if hasattr(c, "n_positions") else c.max_position_embeddings


def load_tokenizer(model_dir):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))


def _check_len(model, n):
    npos = n_positions(model)
    if n > npos:
        raise ValueError(f"sequence length {n} exceeds n_positions {npos}")
    if n < 1:
        raise ValueError("need at least one token")


@torch.no_grad()
def forward_logits(model, ids):
    """Logits at every position: np.float32 array (T, V)."""
    ids = [int(i) for i in ids]
    _check_len(model, len(ids))
    x = torch.tensor([ids], dtype=torch.long)
    return model(input_ids=x, use_cache=False).logits[0].float().numpy().astype(np.float32)


def _margin(row):
    top2 = np.partition(row, -2)[-2:]
    return float(top2.max() - top2.min())


@torch.no_grad()
def greedy(model, ids, n):
    """N greedy steps by uncached full recompute.
    Returns (tokens list[int], margins list[float], step_logits np.float32 (N, V))."""
    seq = [int(i) for i in ids]
    _check_len(model, len(seq) + n - 1 if n else len(seq))
    toks, margins, rows = [], [], []
    for _ in range(n):
        row = model(input_ids=torch.tensor([seq], dtype=torch.long), use_cache=False).logits[0, -1].float()
        t = int(torch.argmax(row).item())
        r = row.numpy().astype(np.float32)
        toks.append(t)
        margins.append(_margin(r))
        rows.append(r)
        seq.append(t)
    V = model.config.vocab_size
    return toks, margins, (np.stack(rows) if rows else np.zeros((0, V), np.float32))


@torch.no_grad()
def sample(model, ids, n, temperature=0.8, top_k=40, top_p=0.95, seed=1337):
    """Sampled continuation (uncached full recompute). Per step: logits/temperature,
    keep top_k, then nucleus top_p (smallest prefix of the sorted distribution whose
    cumulative probability reaches top_p, at least one token), softmax over the kept
    tokens, torch.multinomial with a torch.Generator seeded `seed`."""
    g = torch.Generator().manual_seed(seed)
    seq = [int(i) for i in ids]
    _check_len(model, len(seq) + n - 1 if n else len(seq))
    out = []
    for _ in range(n):
        row = model(input_ids=torch.tensor([seq], dtype=torch.long), use_cache=False).logits[0, -1].float()
        row = row / temperature
        k = min(top_k, row.numel())
        kth = torch.topk(row, k).values[-1]
        row = row.masked_fill(row < kth, float("-inf"))
        sorted_logits, sorted_idx = torch.sort(row, descending=True)
        cum = torch.softmax(sorted_logits, -1).cumsum(-1)
        remove = cum > top_p
        remove[1:] = remove[:-1].clone()   # keep the token that crosses top_p
        remove[0] = False
        row[sorted_idx[remove]] = float("-inf")
        probs = torch.softmax(row, -1)
        t = int(torch.multinomial(probs, 1, generator=g).item())
        out.append(t)
        seq.append(t)
    return out


def decode(tok, ids):
    return tok.decode([int(i) for i in ids], skip_special_tokens=False)


def card(model_dir, prompt=DEFAULT_PROMPT, steps=64, seed=1337):
    model, tok = load_model(model_dir), load_tokenizer(model_dir)
    ids = tok.encode(prompt).ids
    g_toks, g_margins, _ = greedy(model, ids, steps)
    s_toks = sample(model, ids, steps, 0.8, 40, 0.95, seed)
    i_min = int(np.argmin(g_margins))
    return {
        "prompt": prompt,
        "prompt_tokens": ids,
        "greedy_tokens": g_toks,
        "greedy_text": decode(tok, g_toks),
        "min_greedy_margin": g_margins[i_min],
        "min_greedy_margin_step": i_min,
        "sampled_tokens": s_toks,
        "sampled_text": decode(tok, s_toks),
        "sampling": {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "seed": seed,
                     "rng": "torch.Generator().manual_seed(seed), torch.multinomial"},
        "generator": versions(),
        "n_params": sum(p.numel() for p in model.parameters()),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="Hugging Face gpt2/llama/qwen2 directory (with tokenizer.json)")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--tokens", help="comma-separated token ids")
    src.add_argument("--text", help="prompt text (encoded with DIR/tokenizer.json, no special tokens added)")
    src.add_argument("--texts-file", help="a JSON list of prompt texts: writes OUT.<i>.safetensors and "
                                          "OUT.<i>.json (the summary) per prompt, one model load")
    ap.add_argument("--out", help="output .safetensors")
    ap.add_argument("--greedy", type=int, default=0, metavar="N")
    ap.add_argument("--crop", action="store_true",
                    help="keep only the first n_positions - N prompt tokens so prompt + greedy N fit the context")
    ap.add_argument("--json", action="store_true", help="print the JSON summary even without --greedy")
    ap.add_argument("--card", action="store_true", help="print the model-quality check as JSON")
    ap.add_argument("--card-steps", type=int, default=64)
    ap.add_argument("--prompt", default=DEFAULT_PROMPT, help="prompt for --card")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave default)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    if args.card:
        print(json.dumps(card(args.model, args.prompt, args.card_steps), ensure_ascii=False, indent=1))
        return 0
    if args.tokens is None and args.text is None and args.texts_file is None:
        ap.error("one of --tokens, --text or --texts-file is required")
    if not args.out:
        ap.error("--out is required")

    model = load_model(args.model)
    tok = load_tokenizer(args.model)
    if args.texts_file:
        with open(args.texts_file, encoding="utf-8") as f:
            texts = json.load(f)
        for i, text in enumerate(texts):
            result = run_one(model, tok, args, tok.encode(text).ids, {"text": text}, f"{args.out}.{i}.safetensors")
            with open(f"{args.out}.{i}.json", "w", encoding="utf-8") as f:
                json.dump(result, f, ensure_ascii=False)
        return 0
    if args.tokens is not None:
        ids = [int(t) for t in args.tokens.replace(" ", "").split(",") if t != ""]
        src = {"tokens": args.tokens}
    else:
        ids = tok.encode(args.text).ids
        src = {"text": args.text}
    result = run_one(model, tok, args, ids, src, args.out)
    if args.greedy or args.json:
        print(json.dumps(result, ensure_ascii=False))
    return 0


def run_one(model, tok, args, ids, src, out):
    """Forward (and --greedy) one prompt into `out`; returns the JSON summary."""
    if args.crop:
        ids = ids[:max(1, n_positions(model) - max(args.greedy - 1, 0))]
    V = model.config.vocab_size
    bad = [i for i in ids if not 0 <= i < V]
    if bad:
        raise SystemExit(f"reference.py: token ids out of range [0,{V}): {bad}")
    logits = forward_logits(model, ids)
    tensors = {"logits": torch.from_numpy(logits).contiguous(),
               "tokens": torch.tensor(ids, dtype=torch.int64)}
    meta = {"generator": versions(), "model": args.model, "prompt": json.dumps(src, ensure_ascii=False)}
    result = {"prompt_tokens": ids}
    if args.greedy:
        g_toks, g_margins, g_rows = greedy(model, ids, args.greedy)
        tensors["greedy_tokens"] = torch.tensor(g_toks, dtype=torch.int64)
        tensors["greedy_logits"] = torch.from_numpy(g_rows).contiguous()
        tensors["greedy_margins"] = torch.tensor(g_margins, dtype=torch.float32)
        meta["greedy_mode"] = "uncached full recompute"
        meta["greedy_steps"] = str(args.greedy)
        result.update({"greedy_tokens": g_toks, "margins": g_margins, "text": decode(tok, g_toks)})
    from safetensors.torch import save_file
    save_file(tensors, out, metadata=meta)
    return result

if __name__ == "__main__":
    sys.exit(main())
