/* Philox4x32-10 known answers and the uniform mapping (docs/random.md). */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/sampler.h"

/* ---- known-answer vectors (shared/docs/philox-kat.md) ---- */

static void check_kat(const uint32_t ctr[4], const uint32_t key[2], const uint32_t want[4])
{
    uint32_t got[4];
    gf_philox4x32_10(ctr, key, got);
    for (int j = 0; j < 4; j++)
        cr_assert(got[j] == want[j], "word %d: got %08x, want %08x", j, got[j], want[j]);
}

Test(philox, kat_zero)
{
    const uint32_t ctr[4] = {0, 0, 0, 0}, key[2] = {0, 0};
    const uint32_t want[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
    check_kat(ctr, key, want);
}

Test(philox, kat_ones)
{
    const uint32_t ctr[4] = {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff};
    const uint32_t key[2] = {0xffffffff, 0xffffffff};
    const uint32_t want[4] = {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd};
    check_kat(ctr, key, want);
}

Test(philox, kat_pi)
{
    const uint32_t ctr[4] = {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344};
    const uint32_t key[2] = {0xa4093822, 0x299f31d0};
    const uint32_t want[4] = {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1};
    check_kat(ctr, key, want);
}

Test(philox, does_not_modify_inputs)
{
    const uint32_t ctr0[4] = {1, 2, 3, 4}, key0[2] = {5, 6};
    uint32_t ctr[4], key[2], out[4];
    memcpy(ctr, ctr0, sizeof ctr);
    memcpy(key, key0, sizeof key);
    gf_philox4x32_10(ctr, key, out);
    cr_assert(memcmp(ctr, ctr0, sizeof ctr) == 0);
    cr_assert(memcmp(key, key0, sizeof key) == 0);
}

/* ---- the mapping (seed, seq, step, i) -> key, counter, word -> u ---- */

Test(rng, mapping_matches_philox)
{
    const uint64_t seeds[] = {0, 1337, UINT64_C(0x0123456789abcdef)};
    const uint64_t seqs[] = {0, 7, UINT64_C(0xfedcba9876543210)};
    const uint64_t steps[] = {0, 3, UINT64_C(0x89abcdef)};
    const uint32_t idx[] = {0, 1, 2, 3, 4, 5, 11, 1023, 0xfffffffe, 0xffffffff};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 3; c++)
                for (size_t d = 0; d < sizeof idx / sizeof idx[0]; d++) {
                    uint64_t seed = seeds[a], seq = seqs[b], step = steps[c];
                    uint32_t i = idx[d];
                    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
                    uint32_t ctr[4] = {i / 4, (uint32_t)step, (uint32_t)seq, (uint32_t)(seq >> 32)};
                    uint32_t x[4];
                    gf_philox4x32_10(ctr, key, x);
                    double u = gf_rng_uniform(seed, seq, step, i);
                    double want = ((double)x[i % 4] + 0.5) / 4294967296.0;
                    cr_assert(u == want, "seed %llu seq %llu step %llu i %u: %.17g != %.17g", (unsigned long long)seed,
                              (unsigned long long)seq, (unsigned long long)step, i, u, want);
                    /* u * 2^32 - 0.5 is exactly the word */
                    cr_assert(u * 4294967296.0 - 0.5 == (double)x[i % 4]);
                    cr_assert(u > 0.0 && u < 1.0);
                }
}

Test(rng, extreme_words_stay_inside)
{
    /* The mapping's extremes, by formula: neither endpoint is reachable. */
    double lo = (0.0 + 0.5) / 4294967296.0;
    double hi = (4294967295.0 + 0.5) / 4294967296.0;
    cr_assert(lo > 0.0 && hi < 1.0);
    cr_assert(-log(hi) > 0.0, "-log(u) must stay positive at the top word");
    cr_assert(isfinite(log(-log(lo))) && isfinite(log(-log(hi))));
}

/* Printed by tools/reference/gf_random.py (which hard-codes the same table). */
static const char *const golden_1337_0_0[16] = {
    "0.85427486698608845", "0.9376442456850782",   "0.85634902270976454", "0.85957603866700083",
    "0.82009357830975205", "0.95195202913600951",  "0.7348675379762426",  "0.27843480615410954",
    "0.62576399429235607", "0.052993379416875541", "0.68147974845487624", "0.26004532224033028",
    "0.43164255644660443", "0.15820190717931837",  "0.58945188310462981", "0.87957837211433798",
};
static const char *const golden_big[16] = {
    "0.44185897929128259",  "0.63573997735511512",  "0.60022791347000748", "0.5631599243497476",
    "0.44187825627159327",  "0.92843266448471695",  "0.4701851507415995",  "0.24979223741684109",
    "0.016165704815648496", "0.49075127032119781",  "0.18003481777850538", "0.72010019340086728",
    "0.26156132121104747",  "0.021030019619502127", "0.2833042066777125",  "0.9156932634068653",
};

static void check_golden(uint64_t seed, uint64_t seq, uint64_t step, const char *const want[16])
{
    double u[16];
    gf_rng_uniforms(seed, seq, step, 16, u);
    for (int i = 0; i < 16; i++) {
        double w = strtod(want[i], NULL);
        cr_assert(u[i] == w, "u[%d] = %.17g, python says %s", i, u[i], want[i]);
        cr_assert(gf_rng_uniform(seed, seq, step, (uint32_t)i) == w);
    }
}

Test(rng, golden_matches_python_1337) { check_golden(1337, 0, 0, golden_1337_0_0); }

Test(rng, golden_matches_python_high_words)
{
    /* every key and counter word non-zero; step's high word is dropped */
    check_golden(UINT64_C(0x0123456789abcdef), UINT64_C(0xfedcba9876543210), UINT64_C(0x89abcdef), golden_big);
    check_golden(UINT64_C(0x0123456789abcdef), UINT64_C(0xfedcba9876543210), UINT64_C(0x5555555589abcdef), golden_big);
}

Test(rng, worked_example)
{
    /* docs/random.md: seed 1337, seq 0, step 0 -> x = dab1c1f7 f009740a db39b086 dc0d2cde */
    const uint32_t ctr[4] = {0, 0, 0, 0}, key[2] = {1337, 0};
    const uint32_t want[4] = {0xdab1c1f7, 0xf009740a, 0xdb39b086, 0xdc0d2cde};
    check_kat(ctr, key, want);
    cr_assert(gf_rng_uniform(1337, 0, 0, 0) == 0.85427486698608845);
    cr_assert(gf_rng_uniform(1337, 0, 0, 1) == 0.9376442456850782);
    cr_assert(gf_rng_uniform(1337, 0, 0, 2) == 0.85634902270976454);
    cr_assert(gf_rng_uniform(1337, 0, 0, 3) == 0.85957603866700083);
}

Test(rng, uniforms_equal_uniform_any_length)
{
    double buf[64];
    for (int32_t V = 0; V <= 37; V++) {
        for (int i = 0; i < 64; i++)
            buf[i] = -1.0;
        gf_rng_uniforms(42, 3, 9, V, buf);
        for (int32_t i = 0; i < V; i++)
            cr_assert(buf[i] == gf_rng_uniform(42, 3, 9, (uint32_t)i), "V %d i %d", V, i);
        for (int i = V; i < 64; i++)
            cr_assert(buf[i] == -1.0, "V %d wrote past the end at %d", V, i);
    }
    buf[0] = -1.0;
    gf_rng_uniforms(42, 3, 9, -5, buf); /* no-op */
    cr_assert(buf[0] == -1.0);
}

Test(rng, range_and_mean)
{
    enum { N = 100000 };
    double *u = malloc(N * sizeof *u);
    cr_assert_not_null(u);
    gf_rng_uniforms(2024, 1, 0, N, u);
    double sum = 0.0, lo = 1.0, hi = 0.0;
    for (int i = 0; i < N; i++) {
        cr_assert(u[i] > 0.0 && u[i] < 1.0, "u[%d] = %.17g", i, u[i]);
        sum += u[i];
        lo = u[i] < lo ? u[i] : lo;
        hi = u[i] > hi ? u[i] : hi;
    }
    double mean = sum / N;
    cr_assert(fabs(mean - 0.5) < 0.005, "mean %.6f", mean);
    cr_assert(lo < 1e-3 && hi > 1.0 - 1e-3, "lo %g hi %g", lo, hi);
    /* a coarse histogram: 10 bins of ~10000 each */
    int bins[10] = {0};
    for (int i = 0; i < N; i++)
        bins[(int)(u[i] * 10.0)]++;
    for (int b = 0; b < 10; b++)
        cr_assert(abs(bins[b] - N / 10) < 500, "bin %d has %d", b, bins[b]);
    free(u);
}

static int count_equal(const double *a, const double *b, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += a[i] == b[i];
    return k;
}

Test(rng, distinct_streams_differ)
{
    enum { N = 256 };
    double base[N], other[N];
    gf_rng_uniforms(7, 0, 0, N, base);
    /* seq, step, seed, seq high word, seed high word: each changes everything */
    struct {
        uint64_t seed, seq, step;
    } v[] = {
        {7, 1, 0}, {7, 0, 1}, {8, 0, 0}, {7, UINT64_C(1) << 32, 0}, {7 | (UINT64_C(1) << 32), 0, 0}, {7, 1, 1},
    };
    for (size_t j = 0; j < sizeof v / sizeof v[0]; j++) {
        gf_rng_uniforms(v[j].seed, v[j].seq, v[j].step, N, other);
        cr_assert(count_equal(base, other, N) == 0, "stream %zu shares values with the base", j);
    }
    /* (seq, step) swapped is a different stream too */
    double a[N], b[N];
    gf_rng_uniforms(7, 2, 5, N, a);
    gf_rng_uniforms(7, 5, 2, N, b);
    cr_assert(count_equal(a, b, N) == 0);
    /* and the same triple repeats exactly */
    gf_rng_uniforms(7, 0, 0, N, other);
    cr_assert(count_equal(base, other, N) == N);
}
