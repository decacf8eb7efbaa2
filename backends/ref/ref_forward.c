/* ref's forward passes (GPT-2 and the Llama family), readable top to bottom:
 * the matrix and attention kernels, then one forward per architecture. The
 * model and its cache are ref.c's (shapes in ref_model.h); the accuracy and
 * threading rules are in ref.c's opening comment. */
#include "ref_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the forward pass ---- */

/* One clone of the hot loops per x86-64 ISA (GCC): the same source, so the
 * same double operations in the same order; a product of two floats is exact
 * in double, so a fused multiply-add rounds exactly as multiply then add. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#define REF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define REF_CLONES
#endif
/* the kernels below are inlined into each clone (a kernel left out of line
 * would be compiled for the baseline ISA only) */
#if defined(__GNUC__)
#define REF_INLINE inline __attribute__((always_inline))
#else
#define REF_INLINE inline
#endif

/* sum a[i] b[i] in double: 8 partial sums (lane i % 8), added in a fixed order */
static REF_INLINE double dot(const float *a, const float *b, int32_t n)
{
    double acc[8] = {0};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += (double)a[i + j] * (double)b[i + j];
    for (int j = 0; i + j < n; j++)
        acc[j] += (double)a[i + j] * (double)b[i + j];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* dot(a_k, b, n) for four a_k at once, each exactly dot()'s operations in
 * dot()'s order (lane j of a vector is dot()'s acc[j]), so the same double:
 * four independent chains of adds keep the FP units busy where one dot waits
 * on its own previous add (a short dot, as the tiny models' and a head
 * dimension's, is that latency and little else). GCC 12 does not vectorise
 * four interleaved scalar dots, so the lanes are GNU C vectors (element-wise
 * IEEE double operations, as the scalar code's); other compilers run dot()
 * four times, which is the same arithmetic. */
#if defined(__GNUC__)
typedef double ref_v8d __attribute__((vector_size(64)));
typedef float ref_v8f __attribute__((vector_size(32)));
#define REF_LD8(p)                            \
    __extension__({                           \
        ref_v8f f_;                           \
        memcpy(&f_, (p), sizeof f_);          \
        __builtin_convertvector(f_, ref_v8d); \
    })
#define REF_SUM8(c) ((((c)[0] + (c)[1]) + ((c)[2] + (c)[3])) + (((c)[4] + (c)[5]) + ((c)[6] + (c)[7])))
typedef long long ref_v8i __attribute__((vector_size(64)));
/* out[k] = REF_SUM8(c_k) for four vectors at once: the same additions
 * (((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), each pair's sum in
 * either order the same double), done lane-wise on shuffled vectors: pairs,
 * then pairs of pairs, then the two halves */
static REF_INLINE void ref_sum8x4(double out[4], ref_v8d c0, ref_v8d c1, ref_v8d c2, ref_v8d c3)
{
    const ref_v8i ev = {0, 8, 2, 10, 4, 12, 6, 14}, od = {1, 9, 3, 11, 5, 13, 7, 15};
    const ref_v8d s01 = __builtin_shuffle(c0, c1, ev) + __builtin_shuffle(c0, c1, od); /* lane 2i + k: c_k's pair i */
    const ref_v8d s23 = __builtin_shuffle(c2, c3, ev) + __builtin_shuffle(c2, c3, od);
    const ref_v8i lo = {0, 1, 8, 9, 4, 5, 12, 13}, hi = {2, 3, 10, 11, 6, 7, 14, 15};
    const ref_v8d t = __builtin_shuffle(s01, s23, lo) + __builtin_shuffle(s01, s23, hi); /* lane 4h + k: c_k's half h */
    for (int k = 0; k < 4; k++)
        out[k] = t[k] + t[4 + k];
}
static REF_INLINE void dot4(double out[4], const float *a0, const float *a1, const float *a2, const float *a3,
                            const float *b, int32_t n)
{
    ref_v8d c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const ref_v8d bv = REF_LD8(b + i);
        c0 += REF_LD8(a0 + i) * bv;
        c1 += REF_LD8(a1 + i) * bv;
        c2 += REF_LD8(a2 + i) * bv;
        c3 += REF_LD8(a3 + i) * bv;
    }
    for (int j = 0; i + j < n; j++) {
        const double bj = (double)b[i + j];
        c0[j] += (double)a0[i + j] * bj;
        c1[j] += (double)a1[i + j] * bj;
        c2[j] += (double)a2[i + j] * bj;
        c3[j] += (double)a3[i + j] * bj;
    }
    ref_sum8x4(out, c0, c1, c2, c3);
}
#else
static REF_INLINE void dot4(double out[4], const float *a0, const float *a1, const float *a2, const float *a3,
                            const float *b, int32_t n)
{
    out[0] = dot(a0, b, n);
    out[1] = dot(a1, b, n);
    out[2] = dot(a2, b, n);
    out[3] = dot(a3, b, n);
}
#endif

/* Each product's operands in double, once: a row of x or W converted to
 * double (the conversion is exact) into the thread's scratch, zero-padded to
 * kp = K rounded up to 8, so that dot4d() runs whole blocks of 8. A padded
 * lane adds 0 * 0 = +0 to a partial sum that is never -0 (it starts at +0,
 * and an exact cancellation rounds to +0), so the padding changes no bit:
 * dot4d(w, x, kp) is dot(w, x, K) exactly, four outputs at a time. */
static inline int32_t ref_kpad(int32_t K) { return (K + 7) & ~7; }

static REF_INLINE void to_double(double *restrict d, const float *restrict f, int32_t n, int32_t np)
{
    int32_t i = 0;
    for (; i < n; i++)
        d[i] = (double)f[i];
    for (; i < np; i++)
        d[i] = 0.0;
}

#if defined(__GNUC__)
/* out[k] = dot of w (4, kp) row k with x (kp): w and x 64-byte aligned, kp a
 * multiple of 8; lane j of c_k is dot()'s acc[j] */
static REF_INLINE void dot4d(double out[4], const double *w, const double *x, int32_t kp)
{
    const ref_v8d *w0 = (const ref_v8d *)__builtin_assume_aligned(w, 64), *xv = __builtin_assume_aligned(x, 64);
    const ref_v8d *w1 = w0 + kp / 8, *w2 = w1 + kp / 8, *w3 = w2 + kp / 8;
    ref_v8d c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
    for (int32_t i = 0; i < kp / 8; i++) {
        const ref_v8d xi = xv[i];
        c0 += w0[i] * xi;
        c1 += w1[i] * xi;
        c2 += w2[i] * xi;
        c3 += w3[i] * xi;
    }
    ref_sum8x4(out, c0, c1, c2, c3);
}

/* dot4d for two rows x0, x1 at once: each of W's four rows is loaded once for
 * both (half the loads per product, where a long K keeps w in L2) */
static REF_INLINE void dot4x2d(double out0[4], double out1[4], const double *w, const double *x0, const double *x1,
                               int32_t kp)
{
    const ref_v8d *w0 = (const ref_v8d *)__builtin_assume_aligned(w, 64);
    const ref_v8d *xa = __builtin_assume_aligned(x0, 64), *xb = __builtin_assume_aligned(x1, 64);
    const ref_v8d *w1 = w0 + kp / 8, *w2 = w1 + kp / 8, *w3 = w2 + kp / 8;
    ref_v8d a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
    for (int32_t i = 0; i < kp / 8; i++) {
        const ref_v8d xi = xa[i], yi = xb[i], v0 = w0[i], v1 = w1[i], v2 = w2[i], v3 = w3[i];
        a0 += v0 * xi;
        b0 += v0 * yi;
        a1 += v1 * xi;
        b1 += v1 * yi;
        a2 += v2 * xi;
        b2 += v2 * yi;
        a3 += v3 * xi;
        b3 += v3 * yi;
    }
    ref_sum8x4(out0, a0, a1, a2, a3);
    ref_sum8x4(out1, b0, b1, b2, b3);
}
#else
static REF_INLINE double dotd(const double *a, const double *b, int32_t n)
{
    double acc[8] = {0};
    for (int32_t i = 0; i < n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += a[i + j] * b[i + j];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}
static REF_INLINE void dot4d(double out[4], const double *w, const double *x, int32_t kp)
{
    for (int k = 0; k < 4; k++)
        out[k] = dotd(w + (size_t)k * kp, x, kp);
}
static REF_INLINE void dot4x2d(double out0[4], double out1[4], const double *w, const double *x0, const double *x1,
                               int32_t kp)
{
    dot4d(out0, w, x0, kp);
    dot4d(out1, w, x1, kp);
}
#endif

#if defined(__GNUC__)
/* out[k] = dot of the float rows a_k (K) with x (kp, double, 64-byte aligned,
 * zero past K): dot()'s operations in dot()'s order, W converted as it is
 * loaded. pf > 0: each row's line pf floats ahead is prefetched, one per 64
 * bytes read (linear_chunk's decode passes the next row of each stream) */
static REF_INLINE void dot4xd(double out[4], const float *a0, const float *a1, const float *a2, const float *a3,
                              const double *x, int32_t K, size_t pf)
{
    const ref_v8d *xv = __builtin_assume_aligned(x, 64);
    ref_v8d c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
    int32_t i = 0;
    for (; i + 8 <= K; i += 8) {
        if (pf && (i / 8) % 2 == 0) {
            __builtin_prefetch(a0 + pf + i);
            __builtin_prefetch(a1 + pf + i);
            __builtin_prefetch(a2 + pf + i);
            __builtin_prefetch(a3 + pf + i);
        }
        const ref_v8d xi = xv[i / 8];
        c0 += REF_LD8(a0 + i) * xi;
        c1 += REF_LD8(a1 + i) * xi;
        c2 += REF_LD8(a2 + i) * xi;
        c3 += REF_LD8(a3 + i) * xi;
    }
    for (int j = 0; i + j < K; j++) {
        const double xj = x[i + j];
        c0[j] += (double)a0[i + j] * xj;
        c1[j] += (double)a1[i + j] * xj;
        c2[j] += (double)a2[i + j] * xj;
        c3[j] += (double)a3[i + j] * xj;
    }
    ref_sum8x4(out, c0, c1, c2, c3);
}
#else
static REF_INLINE void dot4xd(double out[4], const float *a0, const float *a1, const float *a2, const float *a3,
                              const double *x, int32_t K, size_t pf)
{
    (void)pf;
    const float *a[4] = {a0, a1, a2, a3};
    for (int k = 0; k < 4; k++) {
        double acc[8] = {0};
        int32_t i = 0;
        for (; i < K; i++)
            acc[i % 8] += (double)a[k][i] * x[i];
        out[k] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
}
#endif

typedef struct lin_task {
    const ref_model *m; /* linear_kn_chunk's per-thread scratch */
    float *y;           /* (R, N) */
    const float *x;     /* (R, K) */
    const float *W;     /* (N, K) [out, in]; (K, N) [in, out] for linear_kn_chunk */
    const float *b;     /* (N) or NULL */
    int32_t R, N, K;
} lin_task;

/* outputs [lo, hi) of every row; rows in blocks of REF_RB, converted to
 * double once, while four rows of W at a time, converted once per block,
 * meet every row of the block */
REF_CLONES static void linear_chunk(void *arg, int64_t lo, int64_t hi, int thread)
{
    const lin_task *t = arg;
    const int32_t K = t->K, kp = ref_kpad(K);
    double *xd = ref_dscratch(t->m, thread); /* (REF_RB, kp) rows of x */
    double *wd = xd + (size_t)REF_RB * kp;   /* (4, kp) rows of W */
    if (t->R == 1) {                         /* decode: W is read once, as it is loaded */
        to_double(xd, t->x, K, kp);
        /* four streams, one per quarter of the chunk (rows o, o + q, o + 2q,
         * o + 3q), each read in file order with its next row prefetched: four
         * adjacent rows would share a 4 KiB page where K is short (GPT-2's
         * 768: 3 KB rows), and the hardware's stream prefetcher, which follows
         * one stream per page, then lags (gpt2-small's LM head, side by side:
         * 12.1 / 23.0 GB/s at one / two threads, against 15.4 / 30.6 so) */
        const int64_t q = (hi - lo) / 4;
        for (int64_t o = lo; o < lo + q; o++) {
            const float *a0 = t->W + (size_t)o * K;
            const size_t s = (size_t)q * K;
            double s4[4];
            dot4xd(s4, a0, a0 + s, a0 + 2 * s, a0 + 3 * s, xd, K, o + 1 < lo + q ? (size_t)K : 0);
            for (int k = 0; k < 4; k++)
                t->y[o + k * q] = (float)(s4[k] + (t->b ? (double)t->b[o + k * q] : 0.0));
        }
        for (int64_t o = lo + 4 * q; o < hi; o += 4) { /* the last (hi - lo) % 4 rows */
            const int nq = hi - o < 4 ? (int)(hi - o) : 4;
            const float *a[4];
            for (int k = 0; k < 4; k++) /* rows past hi repeat row o: computed, not stored */
                a[k] = t->W + (size_t)(o + (k < nq ? k : 0)) * K;
            double s4[4];
            dot4xd(s4, a[0], a[1], a[2], a[3], xd, K, 0);
            for (int k = 0; k < nq; k++)
                t->y[o + k] = (float)(s4[k] + (t->b ? (double)t->b[o + k] : 0.0));
        }
        return;
    }
    for (int32_t r0 = 0; r0 < t->R; r0 += REF_RB) {
        const int32_t r1 = r0 + REF_RB < t->R ? r0 + REF_RB : t->R;
        for (int32_t r = r0; r < r1; r++)
            to_double(xd + (size_t)(r - r0) * kp, t->x + (size_t)r * K, K, kp);
        for (int64_t o = lo; o < hi; o += 4) {
            const int nq = hi - o < 4 ? (int)(hi - o) : 4;
            for (int k = 0; k < 4; k++) /* rows past hi repeat row o: computed, not stored */
                to_double(wd + (size_t)k * kp, t->W + (size_t)(o + (k < nq ? k : 0)) * K, K, kp);
            for (int32_t r = r0; r < r1; r += 2) {
                double s4[2][4] = {{0}};
                if (r + 1 < r1)
                    dot4x2d(s4[0], s4[1], wd, xd + (size_t)(r - r0) * kp, xd + (size_t)(r + 1 - r0) * kp, kp);
                else
                    dot4d(s4[0], wd, xd + (size_t)(r - r0) * kp, kp);
                for (int q = 0; q < 2 && r + q < r1; q++)
                    for (int k = 0; k < nq; k++)
                        t->y[(size_t)(r + q) * t->N + o + k] = (float)(s4[q][k] + (t->b ? (double)t->b[o + k] : 0.0));
            }
        }
    }
}

/* The same outputs from W stored [in, out] (K, N), as GPT-2's Conv1D file
 * holds it, bit-identical to linear_chunk on the transposed matrix: each
 * output's sum is dot()'s exactly (8 partial sums, lane i % 8, each in
 * increasing i, added in dot's order, then the bias).
 *
 * One row (decode): linear_kn1_chunk, then linear_kn1_sums. Several rows
 * (prefill, batches): W's columns [o, o + REF_KN_TILE) are gathered into the
 * thread's tile (REF_KN_TILE, K) (m->kn_tile), [out, in] like linear_chunk's
 * W, and dot() runs on it for every row: W is read once however many rows
 * there are. */

/* The rows of W that feed one of dot()'s lanes (i % 8 == j) into that lane's
 * partial sums acc (8, N) (m->kn_acc), row j: items [lo, hi) of [0, 8 C) are
 * (lane it / C, columns chunk it % C of C), C = m->kn_cols. Each thread thus
 * streams whole rows of W in file order (with two threads, rows i % 8 < 4
 * and the others: runs of four adjacent rows, not a half of every row), and
 * each lane's sum is added in increasing i whichever thread owns it. */
/* a + w[0][o] x[0] + ... + w[7][o] x[7], added in that order */
static REF_INLINE double kn1_lane8(double a, const float *const restrict w[8], const double x[8], size_t o)
{
    return (((((((a + (double)w[0][o] * x[0]) + (double)w[1][o] * x[1]) + (double)w[2][o] * x[2]) +
               (double)w[3][o] * x[3]) +
              (double)w[4][o] * x[4]) +
             (double)w[5][o] * x[5]) +
            (double)w[6][o] * x[6]) +
           (double)w[7][o] * x[7];
}

REF_CLONES static void linear_kn1_chunk(void *arg, int64_t lo, int64_t hi, int thread)
{
    (void)thread;
    const lin_task *t = arg;
    const int32_t K = t->K, N = t->N, C = t->m->kn_cols;
    double *acc = t->m->kn_acc; /* (8, N) */
    for (int64_t it = lo; it < hi; it++) {
        int64_t c0, c1;
        ref_chunk(N, C, (int)(it % C), &c0, &c1);
        memset(acc + (it / C) * N + c0, 0, (size_t)(c1 - c0) * sizeof *acc);
    }
    /* eight rows of one lane per pass (i, i + 8, ..., i + 56: the lane's adds
     * in order, so the same roundings) reads and writes acc once per eight
     * weights. The next pass's eight rows (the thread's next item, else its
     * first item in the next 64 rows) are prefetched, a line each per 16
     * outputs: a pass's rows are short streams (GPT-2's 768 columns: 3 KB,
     * under a page), too short for the hardware to get ahead of (gpt2-small's
     * layer products, side by side: 13.6 / 25.9 GB/s at one / two threads,
     * against 15.0 / 29.0 so) */
    int32_t i0 = 0;
    for (; i0 + 64 <= K; i0 += 64)
        for (int64_t it = lo; it < hi; it++) {
            const int32_t j = (int32_t)(it / C);
            int64_t c0, c1;
            ref_chunk(N, C, (int)(it % C), &c0, &c1);
            const float *restrict w[8];
            double x[8];
            for (int q = 0; q < 8; q++) {
                w[q] = t->W + (size_t)(i0 + j + 8 * q) * N + c0;
                x[q] = t->x[i0 + j + 8 * q];
            }
            const int64_t itn = it + 1 < hi ? it + 1 : lo; /* the next pass */
            const int32_t in0 = it + 1 < hi ? i0 : i0 + 64;
            const float *pn = NULL; /* its row in0 + lane, from its first column */
            size_t nn = 0;          /* its columns */
            if (in0 + 64 <= K) {
                int64_t n0, n1;
                ref_chunk(N, C, (int)(itn % C), &n0, &n1);
                pn = t->W + (size_t)(in0 + itn / C) * N + n0;
                nn = (size_t)(n1 - n0);
            }
            double *restrict a = acc + (size_t)j * N + c0;
            const size_t nb = (size_t)(c1 - c0);
            size_t o = 0;
            for (; o + 16 <= nb; o += 16) {
                if (o < nn)
                    for (int q = 0; q < 8; q++)
                        __builtin_prefetch(pn + (size_t)8 * q * N + o);
                for (size_t u = o; u < o + 16; u++)
                    a[u] = kn1_lane8(a[u], w, x, u);
            }
            for (; o < nb; o++)
                a[o] = kn1_lane8(a[o], w, x, o);
        }
    for (int32_t i = i0; i < K; i++)
        for (int64_t it = lo; it < hi; it++) {
            if (it / C != (i & 7))
                continue;
            int64_t c0, c1;
            ref_chunk(N, C, (int)(it % C), &c0, &c1);
            const float *restrict w = t->W + (size_t)i * N + c0;
            const double xi = (double)t->x[i];
            double *restrict a = acc + (size_t)(i & 7) * N + c0;
            for (size_t o = 0; o < (size_t)(c1 - c0); o++)
                a[o] += (double)w[o] * xi;
        }
}

/* outputs [lo, hi) of the one row: the 8 lanes of acc (8, N) added in
 * dot()'s order, then the bias */
REF_CLONES static void linear_kn1_sums(void *arg, int64_t lo, int64_t hi, int thread)
{
    (void)thread;
    const lin_task *t = arg;
    const int64_t N = t->N;
    for (int64_t o = lo; o < hi; o++) {
        const double *a = t->m->kn_acc + o;
        const double sum = ((a[0] + a[N]) + (a[2 * N] + a[3 * N])) + ((a[4 * N] + a[5 * N]) + (a[6 * N] + a[7 * N]));
        const double bias = t->b ? (double)t->b[o] : 0.0;
        t->y[o] = (float)(sum + bias);
    }
}

REF_CLONES static void linear_kn_chunk(void *arg, int64_t lo, int64_t hi, int thread)
{
    const lin_task *t = arg;
    const ref_model *m = t->m;
    const int32_t K = t->K, N = t->N;
    const int32_t kp = ref_kpad(K);
    double *xd = ref_dscratch(m, thread);    /* (REF_RB, kp) rows of x */
    double *tile = xd + (size_t)REF_RB * kp; /* (REF_KN_TILE, kp) columns of W */
    for (int64_t o0 = lo; o0 < hi; o0 += REF_KN_TILE) {
        const int32_t nt = (int32_t)(hi - o0 < REF_KN_TILE ? hi - o0 : REF_KN_TILE);
        const int32_t ntp = (nt + 3) & ~3; /* tile rows past nt are zero: computed, not stored */
        /* eight rows of W at a time, so that each tile row gets eight
         * consecutive doubles per pass (a vector store, not eight scalar ones) */
        int32_t i0 = 0;
        for (; i0 + 8 <= K; i0 += 8) {
            const float *w = t->W + (size_t)i0 * N + o0;
            for (int32_t o = 0; o < nt; o++) {
                double *d = tile + (size_t)o * kp + i0;
                for (int32_t ii = 0; ii < 8; ii++)
                    d[ii] = (double)w[(size_t)ii * N + o];
            }
        }
        for (int32_t i = i0; i < K; i++) {
            const float *w = t->W + (size_t)i * N + o0;
            for (int32_t o = 0; o < nt; o++)
                tile[(size_t)o * kp + i] = (double)w[o];
        }
        for (int32_t o = 0; o < ntp; o++)
            for (int32_t i = o < nt ? K : 0; i < kp; i++)
                tile[(size_t)o * kp + i] = 0.0;
        for (int32_t r0 = 0; r0 < t->R; r0 += REF_RB) {
            const int32_t r1 = r0 + REF_RB < t->R ? r0 + REF_RB : t->R;
            for (int32_t r = r0; r < r1; r++)
                to_double(xd + (size_t)(r - r0) * kp, t->x + (size_t)r * K, K, kp);
            for (int32_t r = r0; r < r1; r += 2)
                for (int32_t o = 0; o < nt; o += 4) {
                    double s4[2][4] = {{0}};
                    if (r + 1 < r1)
                        dot4x2d(s4[0], s4[1], tile + (size_t)o * kp, xd + (size_t)(r - r0) * kp,
                                xd + (size_t)(r + 1 - r0) * kp, kp);
                    else
                        dot4d(s4[0], tile + (size_t)o * kp, xd + (size_t)(r - r0) * kp, kp);
                    for (int q = 0; q < 2 && r + q < r1; q++)
                        for (int k = 0; k < 4 && o + k < nt; k++)
                            t->y[(size_t)(r + q) * N + o0 + o + k] =
                                (float)(s4[q][k] + (t->b ? (double)t->b[o0 + o + k] : 0.0));
                }
        }
    }
}

/* y (R, N) = x (R, K) W^T + b, split among the pool by output column. W is
 * (N, K) [out, in], except GPT-2's layer weights, which are (K, N) [in, out]
 * as the file holds them (ref keeps no transposed copy); GPT-2's LM head (the
 * embedding) is [out, in] like every Llama weight. */
static void linear(const ref_model *m, float *y, const float *x, int32_t R, const float *W, const float *b, int32_t N,
                   int32_t K)
{
    lin_task t = {m, y, x, W, b, R, N, K};
    const int in_out = m->cfg.arch == GF_ARCH_GPT2 && W != m->lm_head;
    if (in_out && R == 1) {
        ref_pool_run(m->pool, linear_kn1_chunk, &t, 8 * (int64_t)m->kn_cols, (double)N * K);
        ref_pool_run(m->pool, linear_kn1_sums, &t, N, 8.0 * N);
        return;
    }
    ref_pool_run(m->pool, in_out ? linear_kn_chunk : linear_chunk, &t, N, (double)R * N * K);
}

static void layernorm(float *y, const float *x, const float *w, const float *b, int32_t D, double eps)
{
    double mean = 0.0, var = 0.0;
    for (int32_t i = 0; i < D; i++)
        mean += x[i];
    mean /= D;
    for (int32_t i = 0; i < D; i++)
        var += ((double)x[i] - mean) * ((double)x[i] - mean);
    var /= D;
    double inv = 1.0 / sqrt(var + eps);
    for (int32_t i = 0; i < D; i++)
        y[i] = (float)(((double)x[i] - mean) * inv * (double)w[i] + (double)b[i]);
}

static float activation(gf_activation act, float xf)
{
    double x = xf;
    switch (act) {
    case GF_ACT_GELU_TANH: return (float)(0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
    case GF_ACT_GELU_ERF: return (float)(0.5 * x * (1.0 + erf(x * 0.7071067811865476)));
    case GF_ACT_RELU: return xf > 0.0f ? xf : 0.0f;
    default: return xf;
    }
}

typedef struct act_task {
    gf_activation act;
    float *v; /* (n) in place */
} act_task;

/* elements [lo, hi) through the activation, split among the pool: each
 * element's own function (a libm tanh or erf in double), so the same bits on
 * any thread */
static void act_chunk(void *arg, int64_t lo, int64_t hi, int thread)
{
    (void)thread;
    const act_task *t = arg;
    for (int64_t i = lo; i < hi; i++)
        t->v[i] = activation(t->act, t->v[i]);
}

typedef struct attn_task {
    const gf_batch *in;
    int32_t window;      /* sliding window of this layer; 0 = full causal */
    const float *q;      /* (B, T, q_stride): head hh at column hh dh */
    const float *K, *Vc; /* (B, H_kv, S, dh) of one layer */
    float *att;          /* (B, T, att_stride) */
    double *scratch;     /* (threads, Tk + dh) */
    size_t q_stride, att_stride;
    int32_t T, H, Hkv, S, dh, start, Tk;
    double scale;
} attn_task;

/* query heads [lo, hi) of the (B, T, H) queries: query head hh reads key/value
 * head hh / (H / H_kv); the query at absolute position start + t sees keys
 * j <= start + t (causal, bottom-right aligned) that the key mask allows, and
 * always its own; with a sliding window w only keys j > start + t - w */
REF_CLONES static void attn_chunk(void *arg, int64_t lo, int64_t hi, int thread)
{
    const attn_task *a = arg;
    const gf_batch *in = a->in;
    const int32_t dh = a->dh, rep = a->H / a->Hkv;
    double *p = a->scratch + (size_t)thread * (a->Tk + dh), *acc = p + a->Tk;
    for (int64_t item = lo; item < hi; item++) {
        const int32_t hh = (int32_t)(item % a->H), t = (int32_t)(item / a->H % a->T);
        const int32_t b = (int32_t)(item / ((int64_t)a->H * a->T));
        const float *q = a->q + ((size_t)b * a->T + t) * a->q_stride + (size_t)hh * dh;
        const int32_t kb = b;
        const float *Kh = a->K + ((size_t)kb * a->Hkv + hh / rep) * a->S * dh;
        const float *Vh = a->Vc + ((size_t)kb * a->Hkv + hh / rep) * a->S * dh;
        const int32_t qpos = a->start + t;
        const int32_t j0 = a->window > 0 && qpos - a->window + 1 > 0 ? qpos - a->window + 1 : 0;
        double mx = -INFINITY;
        int32_t j = j0; /* keys before j0 are outside the window (only the own key is always seen: qpos >= j0) */
        for (int32_t i = 0; i < j0; i++)
            p[i] = -INFINITY;
        for (; j + 4 <= qpos + 1; j += 4) { /* four keys' scores at once: each one dot()'s */
            const float *k0 = Kh + (size_t)j * dh;
            dot4(p + j, k0, k0 + dh, k0 + 2 * (size_t)dh, k0 + 3 * (size_t)dh, q, dh);
        }
        for (; j <= qpos; j++)
            p[j] = dot(Kh + (size_t)j * dh, q, dh);
        for (j = j0; j <= qpos; j++) {
            int allowed = j == qpos || !in->key_mask || in->key_mask[(size_t)b * a->Tk + j];
            p[j] = allowed ? p[j] * a->scale : -INFINITY;
            if (p[j] > mx)
                mx = p[j];
        }
        double sum = 0.0;
        for (int32_t j = 0; j <= qpos; j++) {
            p[j] = p[j] == -INFINITY ? 0.0 : exp(p[j] - mx);
            sum += p[j];
        }
        /* o[d] = sum_j p[j] v[j][d] / sum, each d summed over j in order */
        for (int32_t d = 0; d < dh; d++)
            acc[d] = 0.0;
        int32_t d0 = 0;
#if defined(__GNUC__)
        for (; d0 + 16 <= dh; d0 += 16) { /* 16 channels held in registers across the keys: the same adds */
            ref_v8d c0 = {0}, c1 = {0};
            for (int32_t j = 0; j <= qpos; j++) {
                const float *vj = Vh + (size_t)j * dh + d0;
                const ref_v8d pj = {p[j], p[j], p[j], p[j], p[j], p[j], p[j], p[j]};
                c0 += pj * REF_LD8(vj);
                c1 += pj * REF_LD8(vj + 8);
            }
            memcpy(acc + d0, &c0, sizeof c0);
            memcpy(acc + d0 + 8, &c1, sizeof c1);
        }
#endif
        for (int32_t j = 0; j <= qpos && d0 < dh; j++) {
            const float *vj = Vh + (size_t)j * dh;
            for (int32_t d = d0; d < dh; d++)
                acc[d] += p[j] * (double)vj[d];
        }
        float *o = a->att + ((size_t)b * a->T + t) * a->att_stride + (size_t)hh * dh;
        for (int32_t d = 0; d < dh; d++)
            o[d] = (float)(acc[d] / sum);
    }
}

static void attention(const ref_model *m, attn_task *a, int32_t B)
{
    const int64_t items = (int64_t)B * a->T * a->H;
    ref_pool_run(m->pool, attn_chunk, a, items, (double)items * a->Tk * a->dh * 2);
}

typedef struct ref_scratch {
    float *x;   /* (B, T, D) residual stream */
    float *h;   /* (B, T, D) normed */
    float *qkv; /* (B, T, 3D) */
    float *att; /* (B, T, D) attention output, heads concatenated */
    float *tmp; /* (B, T, D) */
    float *ff;  /* (B, T, F) */
    double *p;  /* (Tk) attention weights of one query */
} ref_scratch;

static void scratch_free(ref_scratch *s)
{
    free(s->x);
    free(s->h);
    free(s->qkv);
    free(s->att);
    free(s->tmp);
    free(s->ff);
    free(s->p);
}

static gf_status check_batch(const ref_model *m, const ref_cache *c, const gf_batch *in)
{
    if (!in || in->B < 1 || in->T < 1 || !in->tokens || !in->position_ids)
        return gf_error_set(GF_E_INVALID_ARG, "ref: batch needs B >= 1, T >= 1, tokens and position_ids");
    if (c && c->B != in->B)
        return gf_error_set(GF_E_INVALID_ARG, "ref: batch has %d rows, cache has %d", in->B, c->B);
    if (c && c->length + in->T > c->max_len)
        return gf_error_set(GF_E_CONTEXT_LIMIT, "ref: cache holds %d of %d positions; %d more do not fit", c->length,
                            c->max_len, in->T);
    if (!c && in->T > m->cfg.n_positions)
        return gf_error_set(GF_E_CONTEXT_LIMIT, "ref: %d positions exceed n_positions %d", in->T, m->cfg.n_positions);
    for (int64_t i = 0; i < (int64_t)in->B * in->T; i++) {
        if (in->tokens[i] < 0 || in->tokens[i] >= m->cfg.vocab_size)
            return gf_error_set(GF_E_INVALID_ARG, "ref: token %d at (%lld, %lld) outside [0, %d)", in->tokens[i],
                                (long long)(i / in->T), (long long)(i % in->T), m->cfg.vocab_size);
        if (in->position_ids[i] < 0 || in->position_ids[i] >= m->cfg.n_positions)
            return gf_error_set(GF_E_INVALID_ARG, "ref: position %d at (%lld, %lld) outside [0, %d)",
                                in->position_ids[i], (long long)(i / in->T), (long long)(i % in->T),
                                m->cfg.n_positions);
    }
    return GF_OK;
}

/* ---- the Llama family forward ---- */

/* RMSNorm as LlamaRMSNorm: y = w * x / sqrt(mean(x^2) + eps) */
static void rmsnorm(float *y, const float *x, const float *w, int32_t D, double eps)
{
    double ss = 0.0;
    for (int32_t i = 0; i < D; i++)
        ss += (double)x[i] * (double)x[i];
    double inv = 1.0 / sqrt(ss / D + eps);
    for (int32_t i = 0; i < D; i++)
        y[i] = (float)((double)w[i] * ((double)x[i] * inv));
}

/* Rotary embedding of one head vector x (dh) at position pos, in place, as
 * transformers applies it: angle_i = (float)pos * inv_freq[i] and its cos/sin
 * in float32, then x_i' = x_i cos - x_{i+dh/2} sin and
 * x_{i+dh/2}' = x_{i+dh/2} cos + x_i sin (rotate_half). */
static void rope(float *x, const float *inv_freq, float attn_factor, int32_t dh, int32_t pos)
{
    const int32_t half = dh / 2;
    for (int32_t i = 0; i < half; i++) {
        float angle = (float)pos * inv_freq[i];
        /* cos and sin in float32, times the attention factor (YaRN, longrope; 1) in float32 */
        double c = (float)((float)cos((double)angle) * attn_factor);
        double s = (float)((float)sin((double)angle) * attn_factor);
        double a = x[i], b = x[i + half];
        x[i] = (float)(a * c - b * s);
        x[i + half] = (float)(b * c + a * s);
    }
}

static double silu(double x) { return x / (1.0 + exp(-x)); }

typedef struct llama_scratch {
    float *x;     /* (B, T, D) residual stream */
    float *h;     /* (B, T, D) normed */
    float *q;     /* (B, T, H dh) */
    float *k, *v; /* (B, T, H_kv dh) */
    float *att;   /* (B, T, H dh) attention output, heads concatenated */
    float *tmp;   /* (B, T, D) */
    float *gate;  /* (B, T, F) */
    float *up;    /* (B, T, F) */
    double *p;    /* (Tk) attention weights of one query */
} llama_scratch;

static gf_status llama_forward(const ref_model *m, ref_cache *c, const gf_batch *in, float *logits_out,
                               const gf_trace_request *tr)
{
    const gf_model_config *g = &m->cfg;
    const int32_t B = in->B, T = in->T, D = g->n_embd, H = g->n_head, Hkv = g->n_kv_head;
    const int32_t dh = g->d_head, F = g->d_ff, V = g->vocab_size;
    const int32_t Q = H * dh, KV = Hkv * dh, start = c->length, Tk = start + T, S = c->max_len;
    const size_t BT = (size_t)B * T;
    gf_status st = GF_OK;
    llama_scratch s = {0};
    s.x = malloc(BT * D * sizeof(float));
    s.h = malloc(BT * D * sizeof(float));
    s.q = malloc(BT * Q * sizeof(float));
    s.k = malloc(BT * KV * sizeof(float));
    s.v = malloc(BT * KV * sizeof(float));
    s.att = malloc(BT * Q * sizeof(float));
    s.tmp = malloc(BT * D * sizeof(float));
    s.gate = malloc(BT * F * sizeof(float));
    s.up = malloc(BT * F * sizeof(float));
    s.p = malloc((size_t)m->pool->n * (Tk + dh) * sizeof(double));
    if (!s.x || !s.h || !s.q || !s.k || !s.v || !s.att || !s.tmp || !s.gate || !s.up || !s.p) {
        st = gf_error_set(GF_E_NOMEM, "ref: out of memory for activations");
        goto done;
    }

    /* embeddings: x = embed_tokens[token] (no positions added: they are rotary) */
    for (size_t i = 0; i < BT; i++)
        memcpy(s.x + i * D, m->wte + (size_t)in->tokens[i] * D, D * sizeof(float));
    gf_trace_put(tr, 0, s.x, B, T);

    const double scale = 1.0 / sqrt((double)dh);
    for (int32_t l = 0; l < g->n_layer; l++) {
        const ref_layer *ly = &m->layers[l];
        float *K = c->k + (size_t)l * B * Hkv * S * dh; /* (B, H_kv, S, dh) of layer l */
        float *Vc = c->v + (size_t)l * B * Hkv * S * dh;

        /* attention block: h = RMSNorm(x); q = h Wq^T + bq, k, v likewise;
         * q and k rotated by their row's position id */
        for (size_t i = 0; i < BT; i++)
            rmsnorm(s.h + i * D, s.x + i * D, ly->attn_norm, D, g->norm_eps);
        linear(m, s.q, s.h, (int32_t)BT, ly->wq, ly->bq, Q, D);
        linear(m, s.k, s.h, (int32_t)BT, ly->wk, ly->bk, KV, D);
        linear(m, s.v, s.h, (int32_t)BT, ly->wv, ly->bv, KV, D);
        for (size_t i = 0; i < BT; i++) {
            for (int32_t hh = 0; hh < H; hh++)
                rope(s.q + i * Q + hh * dh, m->inv_freq, m->rope_mscale, dh, in->position_ids[i]);
            for (int32_t hh = 0; hh < Hkv; hh++)
                rope(s.k + i * KV + hh * dh, m->inv_freq, m->rope_mscale, dh, in->position_ids[i]);
        }
        /* write this chunk's (rotated) keys and values at [start, start + T) */
        for (int32_t b = 0; b < B; b++)
            for (int32_t t = 0; t < T; t++)
                for (int32_t hh = 0; hh < Hkv; hh++) {
                    size_t row = ((size_t)b * T + t) * KV + (size_t)hh * dh;
                    size_t off = (((size_t)b * Hkv + hh) * S + start + t) * dh;
                    memcpy(K + off, s.k + row, dh * sizeof(float));
                    memcpy(Vc + off, s.v + row, dh * sizeof(float));
                }
        gf_trace_put_kv(tr, l, K, Vc, B, Hkv, S, dh); /* the keys and values attention reads */
        /* grouped-query attention (attn_chunk) */
        attn_task at = {.in = in,
                        .q = s.q,
                        .K = K,
                        .Vc = Vc,
                        .att = s.att,
                        .scratch = s.p,
                        .q_stride = (size_t)Q,
                        .att_stride = (size_t)Q,
                        .T = T,
                        .H = H,
                        .Hkv = Hkv,
                        .S = S,
                        .dh = dh,
                        .start = start,
                        .Tk = Tk,
                        .scale = scale,
                        .window = m->window ? m->window[l] : 0};
        attention(m, &at, B);
        /* x += att Wo^T */
        linear(m, s.tmp, s.att, (int32_t)BT, ly->wo, NULL, D, Q);
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_ATTN_OUT, l), s.tmp, B, T);
        for (size_t i = 0; i < BT * D; i++)
            s.x[i] += s.tmp[i];
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_ATTN_RESID, l), s.x, B, T);
        /* SwiGLU MLP: x += (silu(h Wg^T) * (h Wu^T)) Wd^T, h = RMSNorm(x) */
        for (size_t i = 0; i < BT; i++)
            rmsnorm(s.h + i * D, s.x + i * D, ly->mlp_norm, D, g->norm_eps);
        linear(m, s.gate, s.h, (int32_t)BT, ly->w_gate, NULL, F, D);
        linear(m, s.up, s.h, (int32_t)BT, ly->w_up, NULL, F, D);
        for (size_t i = 0; i < BT * F; i++)
            s.gate[i] = (float)(silu(s.gate[i]) * (double)s.up[i]);
        linear(m, s.tmp, s.gate, (int32_t)BT, ly->w_down, NULL, D, F);
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_MLP_OUT, l), s.tmp, B, T);
        for (size_t i = 0; i < BT * D; i++)
            s.x[i] += s.tmp[i];
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_MLP_RESID, l), s.x, B, T);
    }
    c->length = Tk; /* once, after the last layer */

    /* logits = RMSNorm(x) lm_head^T, for every position or each row's last */
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++) {
            if (in->logits_mode == GF_LOGITS_LAST && t != T - 1)
                continue;
            size_t i = (size_t)b * T + t;
            size_t orow = in->logits_mode == GF_LOGITS_LAST ? (size_t)b : i;
            rmsnorm(s.h + orow * D, s.x + i * D, m->lnf_w, D, g->norm_eps);
        }
    if (tr) { /* the final norm at every position, whatever logits_mode says */
        for (size_t i = 0; i < BT; i++)
            rmsnorm(s.tmp + i * D, s.x + i * D, m->lnf_w, D, g->norm_eps);
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_FINAL_NORM, 0), s.tmp, B, T);
    }
    linear(m, logits_out, s.h, in->logits_mode == GF_LOGITS_LAST ? B : (int32_t)BT, m->lm_head, NULL, V, D);
done:
    free(s.x);
    free(s.h);
    free(s.q);
    free(s.k);
    free(s.v);
    free(s.att);
    free(s.tmp);
    free(s.gate);
    free(s.up);
    free(s.p);
    return st;
}

gf_status gf_ref_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    return gf_ref_forward_trace(model, cache, in, logits_out, NULL);
}

gf_status gf_ref_forward_trace(void *model, void *cache, const gf_batch *in, float *logits_out,
                               const gf_trace_request *tr)
{
    const ref_model *m = model;
    const gf_model_config *g = &m->cfg;
    ref_cache *c = cache, local = {0};
    gf_status st = check_batch(m, c, in);
    if (st != GF_OK)
        return st;
    if (!c) { /* uncached: a throwaway cache of exactly T positions */
        void *tmp;
        st = gf_ref_cache_create(model, in->B, in->T, &tmp);
        if (st != GF_OK)
            return st;
        local = *(ref_cache *)tmp;
        free(tmp);
        c = &local;
    }
    if (g->arch == GF_ARCH_LLAMA) {
        st = llama_forward(m, c, in, logits_out, tr);
        if (c == &local) {
            free(local.k);
            free(local.v);
        }
        return st;
    }
    const int32_t B = in->B, T = in->T, D = g->n_embd, H = g->n_head, dh = g->d_head, F = g->d_ff;
    const int32_t V = g->vocab_size, start = c->length, Tk = start + T, S = c->max_len;
    const size_t BT = (size_t)B * T;
    ref_scratch s = {0};
    s.x = malloc(BT * D * sizeof(float));
    s.h = malloc(BT * D * sizeof(float));
    s.qkv = malloc(BT * 3 * D * sizeof(float));
    s.att = malloc(BT * D * sizeof(float));
    s.tmp = malloc(BT * D * sizeof(float));
    s.ff = malloc(BT * F * sizeof(float));
    s.p = malloc((size_t)m->pool->n * (Tk + dh) * sizeof(double));
    if (!s.x || !s.h || !s.qkv || !s.att || !s.tmp || !s.ff || !s.p) {
        st = gf_error_set(GF_E_NOMEM, "ref: out of memory for activations");
        goto done;
    }

    /* embeddings: x = wte[token] + wpe[position] */
    for (size_t i = 0; i < BT; i++)
        for (int32_t d = 0; d < D; d++)
            s.x[i * D + d] = m->wte[(size_t)in->tokens[i] * D + d] + m->wpe[(size_t)in->position_ids[i] * D + d];
    gf_trace_put(tr, 0, s.x, B, T);

    const double scale = 1.0 / sqrt((double)dh);
    for (int32_t l = 0; l < g->n_layer; l++) {
        const ref_layer *ly = &m->layers[l];
        float *K = c->k + (size_t)l * B * H * S * dh; /* (B, H, S, dh) of layer l */
        float *Vc = c->v + (size_t)l * B * H * S * dh;

        /* attention block: h = LN1(x); q, k, v = h W_qkv + b */
        for (size_t i = 0; i < BT; i++)
            layernorm(s.h + i * D, s.x + i * D, ly->ln1_w, ly->ln1_b, D, g->norm_eps);
        linear(m, s.qkv, s.h, (int32_t)BT, ly->qkv_w, ly->qkv_b, 3 * D, D);
        /* write this chunk's keys and values at [start, start + T) */
        for (int32_t b = 0; b < B; b++)
            for (int32_t t = 0; t < T; t++)
                for (int32_t hh = 0; hh < H; hh++) {
                    const float *row = s.qkv + ((size_t)b * T + t) * 3 * D;
                    size_t off = (((size_t)b * H + hh) * S + start + t) * dh;
                    memcpy(K + off, row + D + hh * dh, dh * sizeof(float));
                    memcpy(Vc + off, row + 2 * D + hh * dh, dh * sizeof(float));
                }
        gf_trace_put_kv(tr, l, K, Vc, B, H, S, dh); /* the keys and values attention reads */
        /* attention (attn_chunk): q from the qkv rows, one kv head per head */
        attn_task at = {.in = in,
                        .q = s.qkv,
                        .K = K,
                        .Vc = Vc,
                        .att = s.att,
                        .scratch = s.p,
                        .q_stride = (size_t)3 * D,
                        .att_stride = (size_t)D,
                        .T = T,
                        .H = H,
                        .Hkv = H,
                        .S = S,
                        .dh = dh,
                        .start = start,
                        .Tk = Tk,
                        .scale = scale};
        attention(m, &at, B);
        /* x += att W_proj + b */
        linear(m, s.tmp, s.att, (int32_t)BT, ly->proj_w, ly->proj_b, D, D);
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_ATTN_OUT, l), s.tmp, B, T);
        for (size_t i = 0; i < BT * D; i++)
            s.x[i] += s.tmp[i];
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_ATTN_RESID, l), s.x, B, T);
        /* MLP block: x += act(LN2(x) W_fc + b) W_proj + b */
        for (size_t i = 0; i < BT; i++)
            layernorm(s.h + i * D, s.x + i * D, ly->ln2_w, ly->ln2_b, D, g->norm_eps);
        linear(m, s.ff, s.h, (int32_t)BT, ly->fc_w, ly->fc_b, F, D);
        { /* a libm call per element: about as long as 100 multiply-adds */
            act_task at = {g->activation, s.ff};
            ref_pool_run(m->pool, act_chunk, &at, (int64_t)(BT * F), 100.0 * (double)(BT * F));
        }
        linear(m, s.tmp, s.ff, (int32_t)BT, ly->mproj_w, ly->mproj_b, D, F);
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_MLP_OUT, l), s.tmp, B, T);
        for (size_t i = 0; i < BT * D; i++)
            s.x[i] += s.tmp[i];
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_MLP_RESID, l), s.x, B, T);
    }
    c->length = Tk; /* once, after the last layer */

    /* logits = LN_f(x) lm_head^T, for every position or each row's last */
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++) {
            if (in->logits_mode == GF_LOGITS_LAST && t != T - 1)
                continue;
            size_t i = (size_t)b * T + t;
            size_t orow = in->logits_mode == GF_LOGITS_LAST ? (size_t)b : i;
            layernorm(s.h + orow * D, s.x + i * D, m->lnf_w, m->lnf_b, D, g->norm_eps);
        }
    if (tr) { /* the final norm at every position, whatever logits_mode says */
        for (size_t i = 0; i < BT; i++)
            layernorm(s.tmp + i * D, s.x + i * D, m->lnf_w, m->lnf_b, D, g->norm_eps);
        gf_trace_put(tr, gf_trace_index(g->n_layer, GF_TRACE_FINAL_NORM, 0), s.tmp, B, T);
    }
    linear(m, logits_out, s.h, in->logits_mode == GF_LOGITS_LAST ? B : (int32_t)BT, m->lm_head, NULL, V, D);
    st = GF_OK;
done:
    scratch_free(&s);
    if (c == &local) {
        free(local.k);
        free(local.v);
    }
    return st;
}
