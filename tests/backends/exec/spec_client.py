#!/usr/bin/env python3
"""A protocol client that is only a rejection sampler, for tests/cli/exec_speculate.sh.

    spec_client.py [--bad-bonus | --short | --out-of-range]

Announces the speculate feature (hello bit 4) and implements
docs/speculative.md in plain Python doubles: the target's filtered
distribution per row (temperature -> top-k -> top-p as docs/sampler.md,
softmax in index order; temperature 0 one-hot at the argmax), the rules
seed/hf (accept when u q(x) <= p(x); q(x) 0 accepts when p(x) > 0), vllm
(q(x) 0 rejects) and llamacpp (the target's own draw, kept while it equals
the draft), the residual max(0, p - q) on a rejection, the bonus from row K,
and every draw the inverse CDF of one uniform in index order. It loads no
model (the slot is called with none). The faults, each of which genfence
must catch: --bad-bonus draws the bonus token from row K - 1 instead of row
K (the round-for-round check); --short replies 4 bytes instead of 8 and
--out-of-range accepts K + 1 of K draft tokens (protocol failures).
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "backends"))
import gfproto  # noqa: E402
from sampler_client import filter_z  # noqa: E402  (the same directory: the sampler's steps 1-3)


def probs(logits, p):
    """The target's distribution of one row (a list of V doubles)."""
    V = len(logits)
    if p["temperature"] == 0.0:
        best = 0
        for i in range(1, V):
            if logits[i] > logits[best]:
                best = i
        return [1.0 if i == best else 0.0 for i in range(V)]
    z = filter_z(logits, p)
    top = max(z)
    w = [0.0 if v == -math.inf else math.exp(v - top) for v in z]
    total = 0.0
    for x in w:
        total += x
    return [x / total if total > 0 else 0.0 for x in w]


def draw(w, u):
    """The inverse CDF of u over the weights w, in index order."""
    total = 0.0
    for x in w:
        if x > 0:
            total += x
    run, last = 0.0, -1
    for j, x in enumerate(w):
        if not x > 0:
            continue
        run += x
        last = j
        if run > u * total:
            return j
    return last


class Speculator(gfproto.Backend):
    name = "spec-only"
    description = "docs/speculative.md in Python doubles"
    has_speculate = True

    def __init__(self, fault):
        self.bad_bonus = fault == "--bad-bonus"
        self.out_of_range = fault == "--out-of-range"

    def speculate(self, K, V, rule, params, target_logits, draft, draft_probs, u_accept, u_draw):
        row = lambda i: probs([float(x) for x in target_logits[i]], params)  # noqa: E731
        for i in range(K):
            p = row(i)
            x = int(draft[i])
            if rule == gfproto.RULE_LLAMACPP:
                y = draw(p, float(u_draw[i]))
                if y != x:
                    return i, y
                continue
            q = [float(v) for v in draft_probs[i]] if draft_probs is not None else [float(j == x) for j in range(V)]
            if q[x] > 0:
                ok = float(u_accept[i]) * q[x] <= p[x]
            else:
                ok = rule != gfproto.RULE_VLLM and p[x] > 0
            if ok:
                continue
            res = [pj - qj if pj > qj else 0.0 for pj, qj in zip(p, q)]
            mass = 0.0
            for r in res:
                mass += r
            return i, draw(res if mass > 0 else p, float(u_draw[i]))
        nxt = draw(row(K - 1 if self.bad_bonus else K), float(u_draw[K]))
        return (K + 1 if self.out_of_range else K), nxt


if __name__ == "__main__":
    fault = sys.argv[1] if len(sys.argv) > 1 else ""
    if fault not in ("", "--bad-bonus", "--short", "--out-of-range"):
        sys.exit(f"spec_client.py: unknown fault {fault!r}")
    if fault == "--short":  # the reply one i32 short: the protocol says 8 bytes
        whole = gfproto._Server.speculate
        gfproto._Server.speculate = lambda self, body: whole(self, body)[:4]
    sys.exit(gfproto.serve(Speculator(fault)))
