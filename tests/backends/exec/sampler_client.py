#!/usr/bin/env python3
"""A protocol client that is only a sampler, for tests/cli/exec_sample.sh.

    sampler_client.py [--bad] [--bad-logprobs]

Announces the sample feature in hello and implements docs/sampler.md in
plain Python doubles (math.exp / math.log, the C library's): temperature ->
top-k -> top-p -> the exponential race over the uniforms genfence sends.
It loads no model (the sample slot must not need one). --bad returns the
race's runner-up instead of its winner, which the check must catch.
Hello feature 64 too: logprobs (op 14), docs/sampler.md's "Logprobs" on
the same filter; --bad-logprobs reports processed values before
temperature (the filter at T 1), which the logprobs kind must catch.
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


def log_softmax(z):
    finite = [v for v in z if v != -math.inf]
    if not finite:
        return list(z)
    m = max(finite)
    lse = m + math.log(sum(math.exp(v - m) for v in finite))
    return [v - lse if v != -math.inf else -math.inf for v in z]


class Sampler(gfproto.Backend):
    name = "sampler-only"
    description = "docs/sampler.md in Python doubles"
    has_sample = True
    has_logprobs = True

    def __init__(self, bad, bad_lp):
        self.bad = bad
        self.bad_lp = bad_lp

    def logprobs(self, logits, params, mode):
        out = []
        for row in logits:
            x = [float(v) for v in row]
            if mode in (gfproto.LP_RAW, gfproto.LP_RAW_LOGITS):
                z = x
            elif mode == gfproto.LP_SCALED:
                z = [v / params["temperature"] for v in x]
            else:
                p = dict(params, temperature=1.0) if self.bad_lp else params
                z = filter_z(x, p)
            out.append(log_softmax(z) if mode in (gfproto.LP_RAW, gfproto.LP_SCALED, gfproto.LP_PROCESSED) else z)
        return out

    def sample(self, logits, params, u):
        return [sample_row([float(x) for x in logits[b]], params, [float(x) for x in u[b]], self.bad)
                for b in range(logits.shape[0])]


if __name__ == "__main__":
    sys.exit(gfproto.serve(Sampler("--bad" in sys.argv[1:], "--bad-logprobs" in sys.argv[1:])))
