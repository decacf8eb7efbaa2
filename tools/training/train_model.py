#!/usr/bin/env python3
"""Train the holmes toy models on the Sherlock Holmes canon: holmes-gpt (GPT-2,
≈0.87M parameters, --arch gpt2, the default) or holmes-llama (Llama with 4 query
heads / 2 key-value heads, ≈0.79M parameters, --arch llama).

Data: the corpus is split into sections on runs of 3+ blank lines (129
sections); section i (0-based) is VALIDATION iff i % 20 == 10 (6 sections,
~3.2% of the bytes), the rest is TRAIN; empty sections are dropped. Each
section is encoded with models/holmes-gpt/tokenizer.json and the sections are
joined with <|endoftext|> (id 511) between them, giving one train stream and
one validation stream.

Training: random 128-token windows of the train stream (inputs t[s:s+128],
targets t[s+1:s+129]), AdamW (betas 0.9/0.95, weight decay 0.1 on >=2-D
weights, grad clip 1.0), linear warmup over the first --warmup steps then a
cosine decay to 10% of the peak LR driven by the fraction of the wall-time
budget used (so the schedule always finishes inside --minutes). Dropout 0.

Validation loss = mean token cross-entropy over ALL non-overlapping 128-token
windows of the validation stream (fixed set). "Eval train loss" = the same on
a fixed set of 256 train windows (seeded), logged alongside.

Checkpoints (model + optimizer + step + elapsed time + RNG states) go to
train/ckpt.pt every --ckpt-seconds (atomic replace); --resume continues from
it. Log: train/log.txt. At the end: model.save_pretrained(--out,
safe_serialization=True) -> config.json + model.safetensors.

Usage:
  nohup .venv/bin/python tools/training/train_model.py --arch llama --minutes 25 --threads 1 \
        --train-dir train/llama > train/llama-stdout.txt 2>&1 &
  nohup .venv/bin/python tools/training/train_model.py --minutes 25 > train/stdout.txt 2>&1 &
  nohup .venv/bin/python tools/training/train_model.py --minutes 25 --resume >> train/stdout.txt 2>&1 &
"""
import argparse
import math
import os
import random
import time

import holmes_common as hc

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

# Training window per architecture. holmes-llama trains on 256-token windows
# (max_position_embeddings 256): positions past 64 and past 128 (the GPT's limit)
# are then in-distribution, so forward checks and the RoPE sliding-window cases
# there measure the backend, not an untrained region of the model.
ARCH_CTX = {"gpt2": 128, "llama": 256}
CTX = 128


def make_config(arch="gpt2"):
    if arch == "llama":
        return LlamaConfig(
            vocab_size=512, hidden_size=128, intermediate_size=344, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32, hidden_act="silu",
            max_position_embeddings=ARCH_CTX["llama"], rms_norm_eps=1e-5, rope_theta=10000.0,
            tie_word_embeddings=True, attention_bias=False, mlp_bias=False, attention_dropout=0.0,
            bos_token_id=hc.EOT_ID, eos_token_id=hc.EOT_ID, initializer_range=0.02,
        )
    return GPT2Config(
        vocab_size=512, n_positions=CTX, n_embd=128, n_layer=4, n_head=4,
        activation_function="gelu_new", bos_token_id=hc.EOT_ID, eos_token_id=hc.EOT_ID,
        tie_word_embeddings=True, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )


def encode_stream(tok, sections):
    out = []
    for i, enc in enumerate(tok.encode_batch(sections)):
        if i:
            out.append(hc.EOT_ID)
        out.extend(enc.ids)
    return torch.tensor(out, dtype=torch.long)


def batch_loss(model, x, y):
    logits = model(input_ids=x).logits
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


@torch.no_grad()
def eval_windows(model, stream, starts, bs=64, ctx=None):
    ctx = ctx or CTX
    model.eval()
    tot, n = 0.0, 0
    for i in range(0, len(starts), bs):
        s = starts[i:i + bs]
        x = torch.stack([stream[j:j + ctx] for j in s])
        y = torch.stack([stream[j + 1:j + 1 + ctx] for j in s])
        logits = model(input_ids=x).logits
        tot += F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum").item()
        n += y.numel()
    model.train()
    return tot / n


def lr_at(step, frac, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    frac = min(max(frac, 0.0), 1.0)
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * frac)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", choices=sorted(ARCH_CTX), default="gpt2")
    ap.add_argument("--data", default=os.path.relpath(hc.DEFAULT_DATA))
    ap.add_argument("--tokenizer", default=os.path.join(os.path.relpath(hc.DEFAULT_MODEL_DIR), "tokenizer.json"))
    ap.add_argument("--out", default=None, help="default models/holmes-gpt or models/holmes-llama")
    ap.add_argument("--train-dir", default="train")
    ap.add_argument("--minutes", type=float, default=25.0, help="wall-time budget of the training loop")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2.5e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-seconds", type=float, default=90.0)
    ap.add_argument("--ckpt-seconds", type=float, default=120.0)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args()
    global CTX
    CTX = ARCH_CTX[args.arch]
    if args.out is None:
        args.out = os.path.relpath(os.path.join(hc.REPO_ROOT, "models", "holmes-" + ("gpt" if args.arch == "gpt2" else "llama")))

    torch.set_num_threads(args.threads)
    os.makedirs(args.train_dir, exist_ok=True)
    ckpt_path = os.path.join(args.train_dir, "ckpt.pt")
    log_f = open(os.path.join(args.train_dir, "log.txt"), "a", buffering=1)

    def log(msg):
        line = time.strftime("%Y-%m-%d %H:%M:%S ") + msg
        print(line, flush=True)
        log_f.write(line + "\n")

    corpus = hc.read_corpus(args.data)
    train_secs, val_secs = hc.train_val_sections(corpus)
    tok = Tokenizer.from_file(args.tokenizer)
    assert tok.get_vocab_size() == 512 and tok.token_to_id(hc.EOT) == hc.EOT_ID
    train_ids = encode_stream(tok, train_secs)
    val_ids = encode_stream(tok, val_secs)
    val_starts = list(range(0, len(val_ids) - CTX - 1, CTX))
    val_starts128 = list(range(0, len(val_ids) - 128 - 1, 128))  # comparable with holmes-gpt
    g_fixed = torch.Generator().manual_seed(args.seed + 1)
    train_eval_starts = torch.randint(0, len(train_ids) - CTX - 1, (256,), generator=g_fixed).tolist()

    torch.manual_seed(args.seed)
    random.seed(args.seed)
    model = (LlamaForCausalLM if args.arch == "llama" else GPT2LMHeadModel)(make_config(args.arch))
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(args.seed)
    step, elapsed = 0, 0.0
    budget = args.minutes * 60.0

    if args.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, elapsed = ck["step"], ck["elapsed"]
        budget = ck.get("budget", budget)
        gen.set_state(ck["gen_state"])
        torch.set_rng_state(ck["torch_rng"])
        random.setstate(ck["py_rng"])
        log(f"resumed from {ckpt_path}: step {step}, elapsed {elapsed:.1f}s of {budget:.0f}s")
    else:
        log(f"start: params {n_params}, train tokens {len(train_ids)}, val tokens {len(val_ids)} "
            f"({len(val_starts)} val windows), batch {args.batch}x{CTX}, lr {args.lr}, "
            f"warmup {args.warmup}, arch {args.arch}, budget {budget:.0f}s, seed {args.seed}, threads {args.threads}")

    def save_ckpt():
        tmp = ckpt_path + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "elapsed": elapsed, "budget": budget, "gen_state": gen.get_state(),
                    "torch_rng": torch.get_rng_state(), "py_rng": random.getstate(),
                    "args": vars(args)}, tmp)
        os.replace(tmp, ckpt_path)

    t_last = time.time()
    last_eval = last_ckpt = elapsed
    run_loss, run_n = 0.0, 0
    hi = len(train_ids) - CTX - 1
    while elapsed < budget:
        lr = lr_at(step, elapsed / budget, args)
        for grp in opt.param_groups:
            grp["lr"] = lr
        starts = torch.randint(0, hi, (args.batch,), generator=gen)
        idx = starts[:, None] + torch.arange(CTX + 1)[None, :]
        chunk = train_ids[idx]
        loss = batch_loss(model, chunk[:, :-1], chunk[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        run_loss += loss.item()
        run_n += 1
        now = time.time()
        elapsed += now - t_last
        t_last = now
        if step % 50 == 0:
            log(f"step {step} elapsed {elapsed:.0f}s lr {lr:.2e} train_loss(avg50) {run_loss / run_n:.4f}")
            run_loss, run_n = 0.0, 0
        if elapsed - last_eval >= args.eval_seconds:
            vl = eval_windows(model, val_ids, val_starts)
            tl = eval_windows(model, train_ids, train_eval_starts)
            log(f"eval step {step} elapsed {elapsed:.0f}s eval_train_loss {tl:.4f} val_loss {vl:.4f}")
            last_eval = elapsed
            t_last = time.time()  # do not count eval in the training-time budget
        if elapsed - last_ckpt >= args.ckpt_seconds:
            save_ckpt()
            last_ckpt = elapsed
            t_last = time.time()

    save_ckpt()
    vl = eval_windows(model, val_ids, val_starts)
    tl = eval_windows(model, train_ids, train_eval_starts)
    vl128 = eval_windows(model, val_ids, val_starts128, ctx=128)
    log(f"final step {step} elapsed {elapsed:.0f}s eval_train_loss {tl:.4f} val_loss {vl:.4f} "
        f"val_loss@128 {vl128:.4f} ({len(val_starts128)} windows)")
    model.eval()
    model.save_pretrained(args.out, safe_serialization=True)
    gc = os.path.join(args.out, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)  # not needed; keep the directory to config/weights/tokenizer/card
    log(f"saved {args.out}/config.json and model.safetensors")
    print(f"FINAL train_loss {tl:.4f} val_loss {vl:.4f} steps {step} batch {args.batch} "
          f"train_seconds {elapsed:.0f}")


if __name__ == "__main__":
    main()
