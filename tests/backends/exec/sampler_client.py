#!/usr/bin/env python3
"""A protocol client that is only a sampler, for tests/cli/exec_sample.sh.

    sampler_client.py [--bad]

Announces the sample feature in hello and implements docs/sampler.md in
plain Python doubles (math.exp / math.log, the C library's): temperature ->
top-k -> top-p -> the exponential race over the uniforms genfence sends.
It loads no model (the sample slot must not need one). --bad returns the
race's runner-up instead of its winner, which the check must catch.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "backends"))
import gfproto  # noqa: E402


def first_max(scores):
    best = second = -1
    for i, s in enumerate(scores):
        if s == -math.inf:
            continue
        if best < 0 or s > scores[best]:
            best, second = i, best
        elif second < 0 or s > scores[second]:
            second = i
    return best, second


def filter_z(logits, p):
    """Steps 1-3 of docs/sampler.md for a sampled row (temperature > 0): the
    scaled logits z with -inf where top-k or top-p dropped them (also
    spec_client.py's target distribution)."""
    V = len(logits)
    z = [x / p["temperature"] for x in logits]
    if p["use_top_k"] and p["top_k"] < V:
        kth = sorted(z, reverse=True)[p["top_k"] - 1]
        z = [v if v >= kth else -math.inf for v in z]
    if p["use_top_p"]:
        order = sorted((i for i in range(V) if z[i] != -math.inf), key=lambda i: (-z[i], i))
        zmax = z[order[0]]
        total = 0.0
        for i in order:
            total += math.exp(z[i] - zmax)
        prefix = 0.0
        for j, i in enumerate(order):
            pj = math.exp(z[i] - zmax) / total
            if j > 0 and prefix >= p["top_p"]:
                z[i] = -math.inf
            prefix += pj
    return z


def sample_row(logits, p, u, bad):
    if p["temperature"] == 0.0:
        best, second = first_max(logits)
        return second if bad and second >= 0 else best
    z = filter_z(logits, p)
    scores = [zi - math.log(-math.log(ui)) if zi != -math.inf else -math.inf for zi, ui in zip(z, u)]
    best, second = first_max(scores)
    return second if bad and second >= 0 else best


class Sampler(gfproto.Backend):
    name = "sampler-only"
    description = "docs/sampler.md in Python doubles"
    has_sample = True

    def __init__(self, bad):
        self.bad = bad

    def sample(self, logits, params, u):
        return [sample_row([float(x) for x in logits[b]], params, [float(x) for x in u[b]], self.bad)
                for b in range(logits.shape[0])]


if __name__ == "__main__":
    sys.exit(gfproto.serve(Sampler("--bad" in sys.argv[1:])))
