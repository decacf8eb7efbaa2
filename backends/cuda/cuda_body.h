/* The CUDA backend's kernel bodies, written once for two compilers.
 *
 * Every kernel is a body function: an element body (one output element i)
 * or a block body (block `blk` of the grid, thread `tid` of `nth`, with a
 * shared-memory scratch). cuda_kernels.cu wraps each body in a __global__
 * kernel; cuda_exec_host.c runs the same bodies on the CPU (element bodies in
 * a loop, block bodies with one thread, nth = 1, where the block reductions
 * are the identity), which is how the unit test checks the forward and the
 * sampler on a machine without a GPU. The device-only parts are the
 * reductions below (#ifdef __CUDACC__) and the launch configuration.
 *
 * Block bodies must be reached by every thread of the block (no early return
 * before a reduction or GFC_SYNC). Plain C11 when not compiled by nvcc. */
#ifndef GENFENCE_CUDA_BODY_H
#define GENFENCE_CUDA_BODY_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GFC_HD     static __device__ __forceinline__
#define GFC_SYNC() __syncthreads()
#else
#define GFC_HD     static inline
#define GFC_SYNC() ((void)0)
#endif

/* ---- F32 <-> bfloat16 / IEEE half bits, round to nearest even ---- */

GFC_HD uint32_t gfc_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

GFC_HD float gfc_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

GFC_HD uint16_t gfc_f32_to_bf16(float x)
{
    uint32_t u = gfc_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN: keep it a (quiet) NaN */
    u += 0x7fffu + ((u >> 16) & 1u);          /* overflow carries into inf */
    return (uint16_t)(u >> 16);
}

GFC_HD float gfc_bf16_to_f32(uint16_t h) { return gfc_float((uint32_t)h << 16); }

GFC_HD uint16_t gfc_f32_to_f16(float x)
{
    uint32_t u = gfc_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u, ax = u & 0x7fffffffu;
    if (ax >= 0x7f800000u)
        return (uint16_t)(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (ax >= 0x477ff000u) /* >= 65520 rounds past 65504 */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) {   /* below 2^-14: a half subnormal (units of 2^-24) or zero */
        if (ax < 0x33000000u) /* below 2^-25 */
            return (uint16_t)sign;
        uint32_t e = ax >> 23, mant = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax - 0x38000000u + 0xfffu + ((ax >> 13) & 1u); /* rebias 127 -> 15, round */
    return (uint16_t)(sign | (r >> 13));
}

GFC_HD float gfc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0) {
        if (m == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            e = 113;
            while (!(m & 0x400u)) {
                m <<= 1;
                e--;
            }
            u = sign | (e << 23) | ((m & 0x3ffu) << 13);
        }
    } else if (e == 31) {
        u = sign | 0x7f800000u | (m << 13);
    } else {
        u = sign | ((e + 112u) << 23) | (m << 13);
    }
    return gfc_float(u);
}

/* ---- block reductions (identity with one thread) ---- */

/* red: at least 33 floats / doubles / ints of shared memory */
#ifdef __CUDACC__
#define GFC_RED_SLOTS 33
__device__ __forceinline__ float gfc_block_sum(float v, float *red, int tid, int nth)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = tid >> 5, lane = tid & 31, nw = (nth + 31) >> 5;
    __syncthreads(); /* red may still be read by the previous reduction */
    if (lane == 0)
        red[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? red[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0)
            red[32] = v;
    }
    __syncthreads();
    return red[32];
}

__device__ __forceinline__ float gfc_block_max(float v, float *red, int tid, int nth)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int w = tid >> 5, lane = tid & 31, nw = (nth + 31) >> 5;
    __syncthreads();
    if (lane == 0)
        red[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? red[lane] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1)
            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
        if (lane == 0)
            red[32] = v;
    }
    __syncthreads();
    return red[32];
}

__device__ __forceinline__ int gfc_block_sum_int(int v, int *red, int tid, int nth)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = tid >> 5, lane = tid & 31, nw = (nth + 31) >> 5;
    __syncthreads();
    if (lane == 0)
        red[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? red[lane] : 0;
        for (int o = 16; o > 0; o >>= 1)
            v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0)
            red[32] = v;
    }
    __syncthreads();
    return red[32];
}
#else
GFC_HD float gfc_block_sum(float v, float *red, int tid, int nth)
{
    (void)red, (void)tid, (void)nth;
    return v;
}
GFC_HD float gfc_block_max(float v, float *red, int tid, int nth)
{
    (void)red, (void)tid, (void)nth;
    return v;
}
GFC_HD int gfc_block_sum_int(int v, int *red, int tid, int nth)
{
    (void)red, (void)tid, (void)nth;
    return v;
}
#endif

/* (score, index) a beats (score, index) b: a higher score, or an equal score
 * and a lower index; index < 0 is "none" and beats nothing. */
GFC_HD int gfc_beats(double as, int32_t ai, double bs, int32_t bi)
{
    return ai >= 0 && (bi < 0 || as > bs || (as == bs && ai < bi));
}

#ifdef __CUDACC__
__device__ __forceinline__ void gfc_block_best(double *s, int32_t *i, double *reds, int *redi, int tid, int nth)
{
    double bs = *s;
    int32_t bi = *i;
    for (int o = 16; o > 0; o >>= 1) {
        double os = __shfl_xor_sync(0xffffffffu, bs, o);
        int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (gfc_beats(os, oi, bs, bi)) {
            bs = os;
            bi = oi;
        }
    }
    int w = tid >> 5, lane = tid & 31, nw = (nth + 31) >> 5;
    __syncthreads();
    if (lane == 0) {
        reds[w] = bs;
        redi[w] = bi;
    }
    __syncthreads();
    if (w == 0) {
        bs = lane < nw ? reds[lane] : -INFINITY;
        bi = lane < nw ? redi[lane] : -1;
        for (int o = 16; o > 0; o >>= 1) {
            double os = __shfl_xor_sync(0xffffffffu, bs, o);
            int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (gfc_beats(os, oi, bs, bi)) {
                bs = os;
                bi = oi;
            }
        }
        if (lane == 0) {
            reds[32] = bs;
            redi[32] = bi;
        }
    }
    __syncthreads();
    *s = reds[32];
    *i = redi[32];
}
#else
GFC_HD void gfc_block_best(double *s, int32_t *i, double *reds, int *redi, int tid, int nth)
{
    (void)s, (void)i, (void)reds, (void)redi, (void)tid, (void)nth;
}
#endif

/* ---- the kernels' arguments ---- */

enum { GFC_ACT_NONE = 0 }; /* else a gf_activation */

typedef enum gfc_kind {
    GFC_K_EMBED = 0,     /* element: x = wte[tok] (+ wpe[pos]) */
    GFC_K_NORM = 1,      /* block per output row: LayerNorm / RMSNorm */
    GFC_K_BIAS_ACT = 2,  /* element: y = act(y + b) */
    GFC_K_RESIDUAL = 3,  /* element: x += y + b */
    GFC_K_SWIGLU = 4,    /* element: out = silu(gate) * up */
    GFC_K_ROPE = 5,      /* element: one rotated pair of q or k */
    GFC_K_KV_WRITE = 6,  /* element: k, v of the new positions into the cache */
    GFC_K_ATTENTION = 7, /* block per (row, position, head) */
    GFC_K_TO_HALF = 8,   /* element: F32 -> bf16 / f16 bits */
    GFC_K_SAMPLE = 9,    /* block per row: the sampler */
    GFC_K_COUNT
} gfc_kind;

typedef struct gfc_embed_args {
    float *x;                 /* (R, D) */
    const float *wte, *wpe;   /* (V, D), (n_positions, D) or NULL */
    const int32_t *tok, *pos; /* (R) */
    int32_t D;
} gfc_embed_args;

typedef struct gfc_norm_args {
    float *y;           /* (rows, D) */
    const float *x;     /* source rows: first + r * every */
    const float *w, *b; /* (D); b NULL for RMSNorm */
    int32_t D, rms, every, first;
    float eps;
} gfc_norm_args;

typedef struct gfc_bias_act_args {
    float *y;       /* (rows, N) */
    const float *b; /* (N) or NULL */
    int32_t N, act; /* act: GFC_ACT_NONE or a gf_activation */
} gfc_bias_act_args;

typedef struct gfc_residual_args {
    float *x;           /* (rows, N) += y + b */
    const float *y, *b; /* (rows, N), (N) or NULL */
    int32_t N;
} gfc_residual_args;

typedef struct gfc_swiglu_args {
    float *out;      /* (rows, F) */
    const float *gu; /* (rows, 2F): gate | up */
    int32_t F;
} gfc_swiglu_args;

typedef struct gfc_rope_args {
    float *qkv;            /* (R, qkv_dim): q (H dh) | k (H_kv dh) | v */
    const int32_t *pos;    /* (R) */
    const float *inv_freq; /* (dh / 2) */
    int32_t H, Hkv, dh, qkv_dim;
} gfc_rope_args;

typedef struct gfc_kv_args {
    float *k, *v;     /* this layer's (B, H_kv, S, dh) */
    const float *qkv; /* (B, T, qkv_dim) */
    int32_t B, T, Hkv, dh, S, start, q_dim, kv_dim, qkv_dim;
} gfc_kv_args;

typedef struct gfc_attn_args {
    float *out;          /* (B, T, H dh) */
    const float *qkv;    /* (B, T, qkv_dim) */
    const float *k, *v;  /* this layer's (B, H_kv, S, dh) */
    const uint8_t *mask; /* (B, start + T) or NULL */
    int32_t B, T, H, Hkv, dh, S, start, qkv_dim;
    float scale; /* 1 / sqrt(dh) */
} gfc_attn_args;

typedef struct gfc_half_args {
    uint16_t *dst;
    const float *src;
    int32_t bf16; /* 1: bfloat16, 0: IEEE half */
} gfc_half_args;

typedef struct gfc_sample_args {
    const float *logits; /* (B, V) */
    const double *u;     /* (B, V) */
    int32_t *ids;        /* (B) */
    double *zs;          /* (B, P) sort scratch, or NULL when not needed */
    int32_t *is;         /* (B, P) */
    double *e;           /* (B, P) top-p weights */
    int32_t V, P;        /* P: a power of two >= V */
    double temperature;
    int32_t use_top_k, top_k, use_top_p;
    double top_p;
} gfc_sample_args;

/* shared scratch of one sampler block */
typedef struct gfc_sample_shared {
    double reds[33];
    int redi[33];
    int cut;
} gfc_sample_shared;

/* floats of shared memory a block body needs */
#define GFC_NORM_SMEM             33
#define GFC_ATTN_SMEM(dh, n_keys) ((size_t)(dh) + (size_t)(n_keys) + 33)

/* ---- element bodies ---- */

GFC_HD void gfc_embed_body(size_t i, const gfc_embed_args *a)
{
    size_t r = i / (size_t)a->D, d = i % (size_t)a->D;
    float x = a->wte[(size_t)a->tok[r] * a->D + d];
    if (a->wpe)
        x += a->wpe[(size_t)a->pos[r] * a->D + d];
    a->x[i] = x;
}

GFC_HD float gfc_activation(int32_t act, float v)
{
    switch (act) {
    case 1: /* GF_ACT_GELU_TANH */ return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    case 2: /* GF_ACT_GELU_ERF */ return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
    case 3: /* GF_ACT_RELU */ return v > 0.0f ? v : 0.0f;
    default: return v;
    }
}

GFC_HD void gfc_bias_act_body(size_t i, const gfc_bias_act_args *a)
{
    float v = a->y[i];
    if (a->b)
        v += a->b[i % (size_t)a->N];
    a->y[i] = gfc_activation(a->act, v);
}

GFC_HD void gfc_residual_body(size_t i, const gfc_residual_args *a)
{
    float v = a->y[i];
    if (a->b)
        v += a->b[i % (size_t)a->N];
    a->x[i] += v;
}

GFC_HD void gfc_swiglu_body(size_t i, const gfc_swiglu_args *a)
{
    size_t r = i / (size_t)a->F, f = i % (size_t)a->F;
    float g = a->gu[r * 2 * (size_t)a->F + f], u = a->gu[r * 2 * (size_t)a->F + a->F + f];
    a->out[i] = g / (1.0f + expf(-g)) * u; /* silu(g) = g sigmoid(g) */
}

/* i over (R, H + H_kv, dh / 2): rotate-half, angle = (float)pos * inv_freq */
GFC_HD void gfc_rope_body(size_t i, const gfc_rope_args *a)
{
    const int32_t half = a->dh / 2, heads = a->H + a->Hkv;
    size_t p = i % (size_t)half, hh = (i / (size_t)half) % (size_t)heads, r = i / ((size_t)half * heads);
    size_t col = hh < (size_t)a->H ? hh * a->dh : (size_t)a->H * a->dh + (hh - a->H) * a->dh;
    float *x = a->qkv + r * a->qkv_dim + col;
    float ang = (float)a->pos[r] * a->inv_freq[p];
    float c = cosf(ang), s = sinf(ang), x1 = x[p], x2 = x[p + half];
    x[p] = x1 * c - x2 * s;
    x[p + half] = x2 * c + x1 * s;
}

/* i over (B, T, H_kv, dh) */
GFC_HD void gfc_kv_write_body(size_t i, const gfc_kv_args *a)
{
    size_t d = i % (size_t)a->dh, hk = (i / a->dh) % (size_t)a->Hkv, t = (i / ((size_t)a->dh * a->Hkv)) % (size_t)a->T,
           b = i / ((size_t)a->dh * a->Hkv * a->T);
    const float *row = a->qkv + (b * a->T + t) * a->qkv_dim;
    size_t dst = ((b * a->Hkv + hk) * a->S + a->start + t) * a->dh + d;
    a->k[dst] = row[a->q_dim + hk * a->dh + d];
    a->v[dst] = row[a->q_dim + a->kv_dim + hk * a->dh + d];
}

GFC_HD void gfc_to_half_body(size_t i, const gfc_half_args *a)
{
    a->dst[i] = a->bf16 ? gfc_f32_to_bf16(a->src[i]) : gfc_f32_to_f16(a->src[i]);
}

/* ---- block bodies ---- */

/* output row blk = norm(x row first + blk * every): LayerNorm (two passes:
 * mean, then the centred variance) or RMSNorm, F32 */
GFC_HD void gfc_norm_body(int32_t blk, int tid, int nth, const gfc_norm_args *a, float *smem)
{
    const int32_t D = a->D;
    const float *x = a->x + ((size_t)a->first + (size_t)blk * a->every) * D;
    float *y = a->y + (size_t)blk * D;
    float mean = 0.0f;
    if (!a->rms) {
        float s = 0.0f;
        for (int32_t d = tid; d < D; d += nth)
            s += x[d];
        mean = gfc_block_sum(s, smem, tid, nth) / (float)D;
    }
    float s2 = 0.0f;
    for (int32_t d = tid; d < D; d += nth) {
        float c = x[d] - mean;
        s2 += c * c;
    }
    float inv = 1.0f / sqrtf(gfc_block_sum(s2, smem, tid, nth) / (float)D + a->eps);
    for (int32_t d = tid; d < D; d += nth)
        y[d] = a->rms ? x[d] * inv * a->w[d] : (x[d] - mean) * inv * a->w[d] + a->b[d];
}

/* block blk = ((b T + t) H + h): query t of row b, head h, over the cache
 * [0, start + t]: the causal mask offset by start, the key mask ANDed, the own
 * key always seen. smem: GFC_ATTN_SMEM(dh, start + T) floats. */
GFC_HD void gfc_attention_body(int32_t blk, int tid, int nth, const gfc_attn_args *a, float *smem)
{
    const int32_t H = a->H, dh = a->dh, T = a->T, Tk = a->start + a->T;
    const int32_t h = blk % H, t = (blk / H) % T, b = blk / (H * T);
    const int32_t hk = h / (H / a->Hkv), qpos = a->start + t, n = qpos + 1;
    float *q = smem, *sc = smem + dh, *red = smem + dh + Tk;
    const float *qs = a->qkv + ((size_t)b * T + t) * a->qkv_dim + (size_t)h * dh;
    for (int32_t d = tid; d < dh; d += nth)
        q[d] = qs[d];
    GFC_SYNC();
    const float *K = a->k + ((size_t)b * a->Hkv + hk) * a->S * dh;
    const float *Vv = a->v + ((size_t)b * a->Hkv + hk) * a->S * dh;
    const uint8_t *mask = a->mask ? a->mask + (size_t)b * Tk : NULL;
    float mx = -INFINITY;
    for (int32_t j = tid; j < n; j += nth) {
        float s = -INFINITY;
        if (j == qpos || !mask || mask[j]) {
            const float *kj = K + (size_t)j * dh;
            float acc = 0.0f;
            for (int32_t d = 0; d < dh; d++)
                acc += q[d] * kj[d];
            s = acc * a->scale;
        }
        sc[j] = s;
        mx = fmaxf(mx, s);
    }
    mx = gfc_block_max(mx, red, tid, nth);
    float sum = 0.0f;
    for (int32_t j = tid; j < n; j += nth) {
        float e = sc[j] == -INFINITY ? 0.0f : expf(sc[j] - mx);
        sc[j] = e;
        sum += e;
    }
    sum = gfc_block_sum(sum, red, tid, nth); /* its barriers publish sc */
    float *o = a->out + ((size_t)b * T + t) * (size_t)H * dh + (size_t)h * dh;
    for (int32_t d = tid; d < dh; d += nth) {
        float acc = 0.0f;
        for (int32_t j = 0; j < n; j++)
            acc += sc[j] * Vv[(size_t)j * dh + d];
        o[d] = acc / sum;
    }
}

/* sort order: higher z first, equal z by lower index (the sampler's stable
 * top-p order) */
GFC_HD int gfc_before(double za, int32_t ia, double zb, int32_t ib) { return za > zb || (za == zb && ia < ib); }

/* The sampler for row blk, exactly gf_sample's steps (docs/sampler.md) in
 * double: greedy argmax (lowest index on ties); else z = logit / T, top-k
 * (threshold the k-th largest z, -inf counted, ties kept), top-p (softmax in
 * sorted order, drop once the exclusive prefix mass is >= p, first kept),
 * then the race argmax z - log(-log u) (lowest index on ties). One bitonic
 * sort of (z, index) serves both filters: the survivors of top-k and top-p
 * are a prefix of that order. The top-p sums are one thread's, in the
 * host's order. */
GFC_HD void gfc_sample_body(int32_t blk, int tid, int nth, const gfc_sample_args *a, gfc_sample_shared *sh)
{
    const int32_t V = a->V;
    const float *lg = a->logits + (size_t)blk * V;
    const double *u = a->u + (size_t)blk * V;
    double bs = -INFINITY;
    int32_t bi = -1;
    if (a->temperature == 0.0) {
        for (int32_t i = tid; i < V; i += nth)
            if ((double)lg[i] != -INFINITY && gfc_beats((double)lg[i], i, bs, bi)) {
                bs = lg[i];
                bi = i;
            }
    } else if (!a->zs) { /* no top-k / top-p: race over every finite z */
        for (int32_t i = tid; i < V; i += nth) {
            double z = (double)lg[i] / a->temperature;
            if (!isfinite(z))
                continue;
            double s = z - log(-log(u[i]));
            if (gfc_beats(s, i, bs, bi)) {
                bs = s;
                bi = i;
            }
        }
    } else {
        const int32_t P = a->P;
        double *zs = a->zs + (size_t)blk * P;
        int32_t *is = a->is + (size_t)blk * P;
        for (int32_t i = tid; i < P; i += nth) {
            zs[i] = i < V ? (double)lg[i] / a->temperature : -INFINITY; /* pads sort last */
            is[i] = i;
        }
        GFC_SYNC();
        for (int32_t k = 2; k <= P; k <<= 1)
            for (int32_t j = k >> 1; j > 0; j >>= 1) {
                for (int32_t i = tid; i < P; i += nth) {
                    int32_t l = i ^ j;
                    if (l <= i)
                        continue;
                    int l_first = gfc_before(zs[l], is[l], zs[i], is[i]);
                    if ((i & k) == 0 ? l_first : !l_first) {
                        double tz = zs[i];
                        int32_t ti = is[i];
                        zs[i] = zs[l];
                        is[i] = is[l];
                        zs[l] = tz;
                        is[l] = ti;
                    }
                }
                GFC_SYNC();
            }
        const double kth = a->use_top_k && a->top_k < V ? zs[a->top_k - 1] : -INFINITY;
        int cnt = 0;
        for (int32_t j = tid; j < V; j += nth)
            cnt += zs[j] != -INFINITY && zs[j] >= kth;
        int32_t n = gfc_block_sum_int(cnt, sh->redi, tid, nth); /* survivors: a prefix */
        int32_t cut = n;
        if (a->use_top_p) {
            double *e = a->e + (size_t)blk * P;
            for (int32_t j = tid; j < n; j += nth)
                e[j] = exp(zs[j] - zs[0]);
            GFC_SYNC();
            if (tid == 0) {
                double total = 0.0, prefix = 0.0;
                int32_t c = n;
                for (int32_t j = 0; j < n; j++)
                    total += e[j];
                for (int32_t j = 0; j < n; j++) {
                    if (j > 0 && prefix >= a->top_p) {
                        c = j;
                        break;
                    }
                    prefix += e[j] / total;
                }
                sh->cut = c;
            }
            GFC_SYNC();
            cut = sh->cut;
        }
        for (int32_t j = tid; j < cut; j += nth) {
            double s = zs[j] - log(-log(u[is[j]]));
            if (gfc_beats(s, is[j], bs, bi)) {
                bs = s;
                bi = is[j];
            }
        }
    }
    gfc_block_best(&bs, &bi, sh->reds, sh->redi, tid, nth);
    if (tid == 0)
        a->ids[blk] = bi;
}

#endif
