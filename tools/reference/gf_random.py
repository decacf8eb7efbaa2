#!/usr/bin/env python3
"""genfence's documented draw in pure Python (stdlib only): Philox4x32-10, the
uniform mapping and the exponential race, bit for bit with engine/philox.c and
engine/sampler.c (docs/random.md, docs/sampler.md).

    key     = (seed & 0xffffffff, seed >> 32 & 0xffffffff)
    counter = (i // 4, step & 0xffffffff, seq & 0xffffffff, seq >> 32 & 0xffffffff)
    x       = philox4x32_10(counter, key)[i % 4]
    u       = (x + 0.5) / 2**32                      # in (0, 1), exact in float64
    score_i = z_i - log(-log(u_i))                   # over kept (finite) z_i
    token   = argmax score (lowest index on ties); margin = best - second best

The uniforms are integer arithmetic plus one exact division, so they match any
correct implementation exactly. Race scores use math.log (the platform libm);
they match the C engine bit for bit when both use the same libm.

`python3 tools/reference/gf_random.py` runs the self-test (Philox known answers, the
uniforms hard-coded in tests/unit/test_philox.c) and prints the worked example
of docs/random.md.
"""

import math

M0 = 0xD2511F53
M1 = 0xCD9E8D57
W0 = 0x9E3779B9
W1 = 0xBB67AE85
MASK32 = 0xFFFFFFFF
ROUNDS = 10


def philox4x32_10(ctr, key):
    """Philox4x32-10: 4 counter words, 2 key words -> 4 output words."""
    c0, c1, c2, c3 = (int(w) & MASK32 for w in ctr)
    k0, k1 = (int(w) & MASK32 for w in key)
    for r in range(ROUNDS):
        if r > 0:
            k0 = (k0 + W0) & MASK32
            k1 = (k1 + W1) & MASK32
        p0 = M0 * c0
        p1 = M1 * c2
        hi0, lo0 = p0 >> 32, p0 & MASK32
        hi1, lo1 = p1 >> 32, p1 & MASK32
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return (c0, c1, c2, c3)


def _key(seed):
    return (seed & MASK32, (seed >> 32) & MASK32)


def _ctr(block, seq, step):
    return (block & MASK32, step & MASK32, seq & MASK32, (seq >> 32) & MASK32)


def word_to_uniform(x):
    """32-bit word -> (0, 1): the midpoint of the x-th of 2**32 cells."""
    return (float(x) + 0.5) / 4294967296.0


def uniform(seed, seq, step, i):
    """gf_rng_uniform(seed, seq, step, i)."""
    x = philox4x32_10(_ctr(i // 4, seq, step), _key(seed))
    return word_to_uniform(x[i % 4])


def uniforms(seed, seq, step, n):
    """gf_rng_uniforms: [uniform(seed, seq, step, i) for i in range(n)], one
    Philox block per 4 entries."""
    key = _key(seed)
    out = []
    for block in range((n + 3) // 4):
        x = philox4x32_10(_ctr(block, seq, step), key)
        out.extend(word_to_uniform(w) for w in x[: n - 4 * block])
    return out


def race(z, u):
    """gf_sampler_race over float64 z (-inf or non-finite = dropped).

    Returns (token, runner_up, margin, kept); token -1 and margin NaN when
    nothing is kept, runner_up -1 and margin +inf when one is."""
    best = second = -1
    bs = ss = -math.inf
    kept = 0
    for i, zi in enumerate(z):
        zi = float(zi)
        if not math.isfinite(zi):
            continue
        kept += 1
        score = zi - math.log(-math.log(u[i]))
        if best < 0 or score > bs:
            second, ss = best, bs
            best, bs = i, score
        elif second < 0 or score > ss:
            second, ss = i, score
    if best < 0:
        margin = math.nan
    elif second < 0:
        margin = math.inf
    else:
        margin = bs - ss
    return best, second, margin, kept


def filter_logits(logits, temperature, top_k=None, top_p=None):
    """gf_sampler_filter for temperature > 0: z = logits / T (float64), then
    top-k (ties with the k-th kept), then top-p (stable descending sort,
    softmax minus max, exclusive prefix sum, drop where prefix >= p, keep the
    first). Logits are assumed already float32-representable and validated."""
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be finite and > 0 here, got {temperature!r}")
    z = [float(x) / temperature for x in logits]
    V = len(z)
    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        if top_k < V:
            kth = sorted(z, reverse=True)[top_k - 1]
            z = [v if v >= kth else -math.inf for v in z]
    if top_p is not None:
        if not (0.0 < top_p <= 1.0):
            raise ValueError(f"top_p must lie in (0, 1], got {top_p!r}")
        order = sorted((i for i in range(V) if z[i] != -math.inf), key=lambda i: (-z[i], i))
        zmax = z[order[0]]
        total = 0.0
        for i in order:
            total += math.exp(z[i] - zmax)
        prefix = 0.0
        drop = []
        for j, i in enumerate(order):
            pj = math.exp(z[i] - zmax) / total
            if j > 0 and prefix >= top_p:
                drop.append(i)
            prefix += pj
        for i in drop:
            z[i] = -math.inf
    return z


def greedy(logits):
    """gf_sample at temperature 0: (token, runner_up, margin, kept=V). The lowest
    index of the maximum; runner-up the lowest index of the maximum of the rest;
    -inf logits are never a runner-up."""
    best = second = -1
    bv = sv = -math.inf
    for i, x in enumerate(logits):
        x = float(x)
        if x == -math.inf:
            continue
        if best < 0 or x > bv:
            second, sv = best, bv
            best, bv = i, x
        elif second < 0 or x > sv:
            second, sv = i, x
    return best, second, (bv - sv if second >= 0 else math.inf), len(logits)


def sample(logits, temperature, seed, seq, step, top_k=None, top_p=None):
    """gf_sample: (token, runner_up, margin, kept). Temperature 0 is greedy
    (top_k/top_p cannot change the argmax)."""
    if temperature == 0:
        return greedy(logits)
    z = filter_logits(logits, temperature, top_k, top_p)
    return race(z, uniforms(seed, seq, step, len(z)))


# ---- self-test -------------------------------------------------------------

KAT = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]

# The same numbers are hard-coded in tests/unit/test_philox.c, so the C engine
# and this file are checked against one table.
# (seed, seq, step) -> the first 16 uniforms, as %.17g (round-trips exactly).
GOLDEN = {
    (1337, 0, 0): [
        "0.85427486698608845", "0.9376442456850782", "0.85634902270976454", "0.85957603866700083",
        "0.82009357830975205", "0.95195202913600951", "0.7348675379762426", "0.27843480615410954",
        "0.62576399429235607", "0.052993379416875541", "0.68147974845487624", "0.26004532224033028",
        "0.43164255644660443", "0.15820190717931837", "0.58945188310462981", "0.87957837211433798",
    ],
    (0x0123456789ABCDEF, 0xFEDCBA9876543210, 0x89ABCDEF): [
        "0.44185897929128259", "0.63573997735511512", "0.60022791347000748", "0.5631599243497476",
        "0.44187825627159327", "0.92843266448471695", "0.4701851507415995", "0.24979223741684109",
        "0.016165704815648496", "0.49075127032119781", "0.18003481777850538", "0.72010019340086728",
        "0.26156132121104747", "0.021030019619502127", "0.2833042066777125", "0.9156932634068653",
    ],
}

# gf_sample on one row, seed 1337, seq 3, steps 0..7: (token, runner_up, margin,
# kept). Also hard-coded in tests/unit/test_sampler.c. Tokens must match exactly;
# margins to 1e-12 (bit for bit where both sides use the same libm log/exp).
RACE_LOGITS = [0.5, -1.25, 2.0, 0.0, 1.5, -0.75, 1.0, -3.0]
GOLDEN_RACE = {
    # (temperature, top_k, top_p)
    (0.8, 5, None): [
        (2, 4, "1.5000499795116995", 5), (4, 2, "0.94124498695388725", 5),
        (6, 2, "0.89593341331757514", 5), (2, 4, "0.69938055648774045", 5),
        (2, 6, "1.2624975538457082", 5), (2, 4, "0.2710624871987104", 5),
        (2, 4, "1.1183173510314368", 5), (2, 0, "1.5127515385117383", 5),
    ],
    (1.2, None, 0.9): [
        (2, 4, "1.2917166461783665", 5), (4, 0, "0.98004734438819341", 5),
        (6, 2, "1.3126000799842421", 5), (2, 4, "0.49104722315440696", 5),
        (2, 0, "0.73347930958480312", 5), (2, 0, "0.030083473835924135", 5),
        (2, 4, "0.90998401769810378", 5), (2, 0, "0.88775153851173849", 5),
    ],
}


def self_test():
    for ctr, key, want in KAT:
        got = philox4x32_10(ctr, key)
        assert got == want, (ctr, key, [hex(w) for w in got])
    for (seed, seq, step), want in GOLDEN.items():
        got = uniforms(seed, seq, step, 16)
        assert got == [float(s) for s in want], ((seed, seq, step), ["%.17g" % g for g in got])
        for i in range(16):
            assert uniform(seed, seq, step, i) == got[i]
    # range and exactness of the mapping
    assert word_to_uniform(0) == 0.5 / 2**32 and word_to_uniform(MASK32) < 1.0
    # uniforms() for lengths that are not a multiple of 4
    for n in (0, 1, 2, 3, 5, 7):
        assert uniforms(1337, 0, 0, n) == uniforms(1337, 0, 0, 8)[:n]
    for (temperature, top_k, top_p), rows in GOLDEN_RACE.items():
        for step, (tok, ru, margin, kept) in enumerate(rows):
            got = sample(RACE_LOGITS, temperature, 1337, 3, step, top_k, top_p)
            assert got[0] == tok and got[1] == ru and got[3] == kept, (step, got)
            assert abs(got[2] - float(margin)) <= 1e-12, (step, got[2], margin)
    assert greedy([1.0, 3.0, 2.5, 3.0, -math.inf]) == (1, 3, 0.0, 5)
    assert greedy([-math.inf, 2.0]) == (1, -1, math.inf, 2)
    # race: hand-checked tiny case
    tok, ru, margin, kept = race([0.0, -math.inf, 0.0], [0.5, 0.5, 0.25])
    assert kept == 2 and tok == 0 and ru == 2
    assert margin == -math.log(-math.log(0.5)) + math.log(-math.log(0.25))


def _print_example():
    seed, seq, step = 1337, 0, 0
    key = _key(seed)
    ctr = _ctr(0, seq, step)
    x = philox4x32_10(ctr, key)
    print(f"worked example: seed {seed}, seq {seq}, step {step}")
    print("  key     = " + " ".join(f"{w:08x}" for w in key))
    print("  counter = " + " ".join(f"{w:08x}" for w in ctr))
    print("  x       = " + " ".join(f"{w:08x}" for w in x))
    for i, w in enumerate(x):
        u = word_to_uniform(w)
        print(f"  u[{i}] = ({w} + 0.5) / 2^32 = {u:.17g}  ({u.hex()})")


if __name__ == "__main__":
    self_test()
    print("gf_random self-test: ok (Philox KAT x%d, golden uniforms x%d, golden races x%d)"
          % (len(KAT), len(GOLDEN), sum(len(v) for v in GOLDEN_RACE.values())))
    _print_example()
