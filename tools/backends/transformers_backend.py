#!/usr/bin/env python3
"""Hugging Face transformers as a live genfence backend over the protocol (docs/protocol.md).

    genfence run --backend ref --backend "exec:.venv/bin/python tools/backends/transformers_backend.py"

Any model AutoModelForCausalLM loads (GPT-2: models/holmes-gpt; Llama:
models/holmes-llama), in float32 on the CPU, eager attention, with
transformers' own machinery for everything the contract covers:

* the KV cache is transformers' own past_key_values (a DynamicCache where the
  model takes one, else the legacy tuples it returns), extended by each
  cached forward and dropped on reset;
* the key mask is handed over as the 2-D attention_mask (B, Tk), which
  transformers combines with its causal mask;
* position ids are handed over as position_ids;
* torch.set_num_threads(the threads genfence gives).

One rule of the contract has no equivalent in transformers' 2-D mask: "a
query always sees its own key". A padding query (its own key masked) gets
whatever transformers computes for a fully masked row; the logits of real
positions are unaffected. docs/protocol.md ("The transformers client") says
where this shows.

Options (after the script name): --device DEVICE (default cpu),
--attn eager|sdpa (default eager; sdpa needs torch >= 2.1.1), --sampler hf (also offer the sample
slot, with transformers' own logits warpers; see TransformersSampler).
"""
import argparse
import importlib.metadata as md
import os
import sys

import gfproto
import numpy as np


class Cache:
    __slots__ = ("past", "batch", "max_len")

    def __init__(self, batch, max_len):
        self.past, self.batch, self.max_len = None, batch, max_len


class Transformers(gfproto.Backend):
    name = "transformers"

    def __init__(self, device, attn):
        self.device, self.attn = device, attn
        self.model = self.torch = None
        self.description = f"transformers {md.version('transformers')}, torch {md.version('torch')}"

    def info(self, threads):
        return ("f32", max(1, threads), self.description,
                f"AutoModelForCausalLM float32 on {self.device}, {self.attn} attention, past_key_values cache")

    def model_load(self, path, threads, config):
        import torch
        from transformers import AutoModelForCausalLM
        self.torch = torch
        torch.set_num_threads(max(1, threads))
        torch.manual_seed(0)
        self.model = AutoModelForCausalLM.from_pretrained(
            path, torch_dtype=torch.float32, attn_implementation=self.attn).to(self.device).eval()
        c = self.model.config
        self.dynamic = getattr(self.model, "_supports_cache_class", False)
        V = c.vocab_size
        npos = getattr(c, "n_positions", None) or c.max_position_embeddings
        if V != config["vocab_size"] or npos != config["n_positions"]:
            raise gfproto.invalid_arg(f"{path}: transformers reads vocab {V}, {npos} positions; "
                                      f"genfence read {config['vocab_size']}, {config['n_positions']}")
        return V, npos

    def cache_create(self, batch, max_len):
        return Cache(batch, max_len)

    def cache_reset(self, cache):
        cache.past = None

    def cache_bytes(self, cache):
        if cache.past is None:
            return 0
        layers = cache.past.to_legacy_cache() if hasattr(cache.past, "to_legacy_cache") else cache.past
        return sum(t.numel() * t.element_size() for layer in layers for t in layer[:2])

    def forward(self, cache, tokens, positions, key_mask, last_only):
        torch = self.torch
        dev = self.device
        ids = torch.from_numpy(tokens.astype("int64")).to(dev)
        pos = torch.from_numpy(positions.astype("int64")).to(dev)
        mask = None if key_mask is None else torch.from_numpy(key_mask.astype("int64")).to(dev)
        kw = dict(input_ids=ids, position_ids=pos, attention_mask=mask)
        if cache is None:
            kw["use_cache"] = False
        else:
            past = cache.past
            if past is None and self.dynamic:
                from transformers import DynamicCache
                past = DynamicCache()
            kw.update(past_key_values=past, use_cache=True)
        with torch.no_grad():
            out = self.model(**kw)
        if cache is not None:
            cache.past = out.past_key_values
        logits = out.logits[:, -1:, :] if last_only else out.logits
        return logits.float().cpu().numpy()

    has_trace = True

    def forward_trace(self, cache, tokens, positions, key_mask, last_only):
        """forward with hooks at the trace points (docs/backends.md, "The trace
        slot"): each block's input (the embedding before block 0), its
        attention module's output (before the residual add), its MLP's
        output, the final norm's output; the residual streams are their sums."""
        m = self.model
        if hasattr(m, "transformer"):  # GPT-2
            blocks, attn, mlp, norm = m.transformer.h, "attn", "mlp", m.transformer.ln_f
        else:  # Llama, Qwen2
            blocks, attn, mlp, norm = m.model.layers, "self_attn", "mlp", m.model.norm
        rec, hooks = {}, []

        def keep(key, pick):
            def hook(mod, args, out=None):
                rec[key] = pick(args if out is None else out).detach().float()
            return hook
        try:
            for l, blk in enumerate(blocks):
                hooks.append(blk.register_forward_pre_hook(keep(("in", l), lambda a: a[0])))
                hooks.append(getattr(blk, attn).register_forward_hook(keep(("attn", l), lambda o: o[0])))
                hooks.append(getattr(blk, mlp).register_forward_hook(keep(("mlp", l), lambda o: o)))
            hooks.append(norm.register_forward_hook(keep("norm", lambda o: o)))
            logits = self.forward(cache, tokens, positions, key_mask, last_only)
        finally:
            for h in hooks:
                h.remove()
        pts = [rec[("in", 0)]]
        for l in range(len(blocks)):
            a = rec[("in", l)] + rec[("attn", l)]
            pts += [rec[("attn", l)], a, rec[("mlp", l)], a + rec[("mlp", l)]]
        pts.append(rec["norm"])
        return logits, np.stack([p.cpu().numpy() for p in pts]), [True] * len(pts)


class TransformersSampler(Transformers):
    """--sampler hf: also the protocol's sample slot, with transformers' own
    logits warpers (TemperatureLogitsWarper, TopKLogitsWarper,
    TopPLogitsWarper, in generate's order, float32 as generate runs them) and
    the exponential race over genfence's uniforms in place of
    torch.multinomial; greedy is torch.argmax."""
    has_sample = True

    def sample(self, logits, params, u):
        import torch
        from transformers.generation.logits_process import (TemperatureLogitsWarper, TopKLogitsWarper,
                                                            TopPLogitsWarper)
        x = torch.from_numpy(logits.copy())
        if params["temperature"] == 0.0:
            return torch.argmax(x, dim=-1).tolist()
        x = TemperatureLogitsWarper(params["temperature"])(None, x)
        if params["use_top_k"]:
            x = TopKLogitsWarper(params["top_k"])(None, x)
        if params["use_top_p"]:
            x = TopPLogitsWarper(params["top_p"])(None, x)
        scores = x.double() - torch.log(-torch.log(torch.from_numpy(u.copy())))
        return torch.argmax(scores, dim=-1).tolist()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--attn", default="eager", choices=["eager", "sdpa"])
    ap.add_argument("--sampler", default="none", choices=["none", "hf"],
                    help="hf: offer the sample slot, with transformers' logits warpers")
    a = ap.parse_args()
    cls = TransformersSampler if a.sampler == "hf" else Transformers
    return gfproto.serve(cls(a.device, a.attn))


if __name__ == "__main__":
    sys.exit(main())
