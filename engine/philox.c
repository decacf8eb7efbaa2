/* Philox4x32-10 and the uniform mapping every backend shares (docs/random.md).
 *
 * Philox4x32-10 is the counter-based generator of Salmon et al. (SC'11), as in
 * Random123, cuRAND's curand_Philox4x32_10 and JAX. Each round:
 *   (hi0, lo0) = M0 * ctr[0],  (hi1, lo1) = M1 * ctr[2]       (32x32 -> 64)
 *   ctr = (hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0)
 * and the key is bumped by the Weyl constants between rounds (9 bumps for 10
 * rounds). No state: a draw is a pure function of (seed, seq, step, index). */
#include "genfence/sampler.h"

#include <stddef.h>

#define GF_PHILOX_M0     UINT32_C(0xD2511F53)
#define GF_PHILOX_M1     UINT32_C(0xCD9E8D57)
#define GF_PHILOX_W0     UINT32_C(0x9E3779B9)
#define GF_PHILOX_W1     UINT32_C(0xBB67AE85)
#define GF_PHILOX_ROUNDS 10

static inline void philox_round(uint32_t c[4], const uint32_t k[2])
{
    uint64_t p0 = (uint64_t)GF_PHILOX_M0 * c[0];
    uint64_t p1 = (uint64_t)GF_PHILOX_M1 * c[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c[1] ^ k[0];
    uint32_t n2 = hi0 ^ c[3] ^ k[1];
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
}

void gf_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
    uint32_t k[2] = {key[0], key[1]};
    for (int r = 0; r < GF_PHILOX_ROUNDS; r++) {
        if (r > 0) {
            k[0] += GF_PHILOX_W0;
            k[1] += GF_PHILOX_W1;
        }
        philox_round(c, k);
    }
    out[0] = c[0];
    out[1] = c[1];
    out[2] = c[2];
    out[3] = c[3];
}

/* 32 bits -> (0, 1): the midpoint of the x-th of 2^32 equal cells. Exact in
 * double (x + 0.5 needs 33 significant bits), so every implementation that
 * follows the formula gets the same bits. */
static inline double word_to_uniform(uint32_t x) { return ((double)x + 0.5) / 4294967296.0; }

static inline void make_key(uint64_t seed, uint32_t key[2])
{
    key[0] = (uint32_t)seed;
    key[1] = (uint32_t)(seed >> 32);
}

static inline void make_ctr(uint32_t block, uint64_t seq_id, uint64_t step, uint32_t ctr[4])
{
    ctr[0] = block;
    ctr[1] = (uint32_t)step;
    ctr[2] = (uint32_t)seq_id;
    ctr[3] = (uint32_t)(seq_id >> 32);
}

double gf_rng_uniform(uint64_t seed, uint64_t seq_id, uint64_t step, uint32_t i)
{
    uint32_t key[2], ctr[4], x[4];
    make_key(seed, key);
    make_ctr(i / 4u, seq_id, step, ctr);
    gf_philox4x32_10(ctr, key, x);
    return word_to_uniform(x[i % 4u]);
}

void gf_rng_uniforms(uint64_t seed, uint64_t seq_id, uint64_t step, int32_t V, double *u_out)
{
    if (V <= 0 || u_out == NULL)
        return;
    uint32_t key[2], ctr[4], x[4];
    make_key(seed, key);
    uint32_t n = (uint32_t)V;
    for (uint32_t base = 0; base < n; base += 4u) {
        make_ctr(base / 4u, seq_id, step, ctr);
        gf_philox4x32_10(ctr, key, x);
        uint32_t m = n - base < 4u ? n - base : 4u;
        for (uint32_t j = 0; j < m; j++)
            u_out[base + j] = word_to_uniform(x[j]);
    }
}
