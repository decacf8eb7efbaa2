/* toy_attention_cache: the seed's fence 3 (fence_toy_cache). One causal
 * attention head with seeded W_q, W_k, W_v (d x d, N(0, 1) / sqrt(d)) over T
 * seeded inputs: the uncached path attends over all T positions at once; the
 * cached path feeds the chunks (prefill, then one token at a time), appending
 * each chunk's keys and values to a preallocated (T, d) buffer and masking
 * with the offset rule j <= start + i. Both in float, compared at atol.
 *
 * It proves the indexing and mask arithmetic of a cache, not a backend: the
 * toy lives here, in the harness, and reaches no backend slot (it runs once,
 * on the engine, like left_padding_positions). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kept_list.h"
#include "keys.h"

enum { MASK_OFFSET = 0, MASK_LOCAL = 1 };
static const char *const k_masks[] = {"offset", "local", NULL};

typedef struct toy_spec {
    long long d, T, seed;
    int32_t *chunks;
    size_t n_chunks;
    double atol;
    int mask; /* the cached path's mask: offset (right); local: j <= i, the start forgotten (for must-fail cases) */
} toy_spec;

static void toy_free(void *p)
{
    toy_spec *s = p;
    if (s)
        free(s->chunks);
    free(s);
}

static int parse_toy(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    toy_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->d = 8;
    s->T = 6;
    s->seed = 35;
    s->atol = 1e-5;
    int bad = gf_y_int(ctx, m, "dim", 0, 1, 256, &s->d) < 0;
    bad |= gf_y_int(ctx, m, "tokens", 0, 1, 4096, &s->T) < 0;
    bad |= gf_y_int(ctx, m, "seed", 0, 0, 0x7fffffffffffffffLL, &s->seed) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_enum(ctx, m, "mask", 0, k_masks, &s->mask) < 0;
    int rc = gf_y_ints(ctx, m, "chunks", 0, 1, 4096, 1, &s->chunks, &s->n_chunks);
    bad |= rc < 0;
    if (!bad) {
        long long tot = 0;
        for (size_t i = 0; i < s->n_chunks; i++)
            tot += s->chunks[i];
        if (rc > 0 && tot > s->T) {
            gf_y_error(ctx, gf_y_get(ctx, m, "chunks", 0), "'chunks' add up to %lld; 'tokens' is %lld", tot, s->T);
            bad = 1;
        }
    }
    return bad ? -1 : 0;
}

/* out (n, d) = softmax(mask(q k^T / sqrt d)) v over the first `len` cached
 * rows; query i sits at position start + i. */
static void attend(const float *q, const float *K, const float *Vv, int32_t n, int32_t len, int32_t start, int32_t d,
                   int mask, float *out, float *sc)
{
    const float scale = 1.0f / sqrtf((float)d);
    for (int32_t i = 0; i < n; i++) {
        float mx = -INFINITY;
        for (int32_t j = 0; j < len; j++) {
            int allowed = mask == MASK_OFFSET ? j <= start + i : j <= i;
            float v = 0;
            for (int32_t t = 0; t < d; t++)
                v += q[i * d + t] * K[j * d + t];
            sc[j] = allowed ? v * scale : -INFINITY;
            if (sc[j] > mx)
                mx = sc[j];
        }
        float tot = 0;
        for (int32_t j = 0; j < len; j++)
            tot += sc[j] = sc[j] == -INFINITY ? 0.0f : expf(sc[j] - mx);
        for (int32_t t = 0; t < d; t++) {
            float acc = 0;
            for (int32_t j = 0; j < len; j++)
                acc += sc[j] / tot * Vv[j * d + t];
            out[i * d + t] = acc;
        }
    }
}

/* y (n, d) = x (n, d) W (d, d) */
static void matmul(const float *x, const float *W, int32_t n, int32_t d, float *y)
{
    for (int32_t i = 0; i < n; i++)
        for (int32_t c = 0; c < d; c++) {
            float acc = 0;
            for (int32_t t = 0; t < d; t++)
                acc += x[i * d + t] * W[t * d + c];
            y[i * d + c] = acc;
        }
}

static void run_toy(const gf_case *c, gf_krun *k)
{
    const toy_spec *s = c->spec;
    const int32_t d = (int32_t)s->d, T = (int32_t)s->T;
    const size_t dd = (size_t)d * d, td = (size_t)T * d;
    double *nrm = malloc((3 * dd + td) * sizeof *nrm);
    float *W = malloc(3 * dd * sizeof *W); /* Wq, Wk, Wv: (3, d, d) */
    float *x = malloc(td * sizeof *x);     /* (T, d) */
    float *q = malloc(td * sizeof *q), *kk = malloc(td * sizeof *kk), *vv = malloc(td * sizeof *vv);
    float *full = malloc(td * sizeof *full), *cached = malloc(td * sizeof *cached);
    float *Kc = calloc(td, sizeof *Kc), *Vc = calloc(td, sizeof *Vc); /* the preallocated cache (T, d) */
    float *sc = malloc((size_t)T * sizeof *sc);
    int32_t *plan = malloc(((size_t)T + 1) * sizeof *plan);
    if (!nrm || !W || !x || !q || !kk || !vv || !full || !cached || !Kc || !Vc || !sc || !plan) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    gf_k_metric_json(k, "engine", json_string("none: a harness-side toy attention head, no backend slot"));
    gf_k_seed(k, "weights", (uint64_t)s->seed);
    gf_k_normals((uint64_t)s->seed, 0, nrm, 3 * dd + td);
    for (size_t i = 0; i < 3 * dd; i++)
        W[i] = (float)(nrm[i] / sqrt((double)d));
    for (size_t i = 0; i < td; i++)
        x[i] = (float)nrm[3 * dd + i];
    /* uncached: all T positions at once, start 0 */
    matmul(x, W, T, d, q);
    matmul(x, W + dd, T, d, kk);
    matmul(x, W + 2 * dd, T, d, vv);
    attend(q, kk, vv, T, T, 0, d, MASK_OFFSET, full, sc);
    /* the chunk plan: the given chunks, then one token at a time; default prefill 2 */
    size_t n_plan = 0;
    int32_t used = 0;
    if (s->chunks) {
        for (size_t i = 0; i < s->n_chunks; i++)
            used += plan[n_plan++] = s->chunks[i];
    } else {
        used = plan[n_plan++] = T < 2 ? T : 2;
    }
    while (used < T)
        used += plan[n_plan++] = 1;
    int32_t length = 0;
    for (size_t ci = 0; ci < n_plan; ci++) {
        const int32_t n = plan[ci];
        const float *xc = x + (size_t)length * d;
        matmul(xc, W + dd, n, d, Kc + (size_t)length * d); /* append at the current length */
        matmul(xc, W + 2 * dd, n, d, Vc + (size_t)length * d);
        float *qc = q; /* reuse q as scratch: the uncached pass is done */
        matmul(xc, W, n, d, qc);
        attend(qc, Kc, Vc, n, length + n, length, d, s->mask, cached + (size_t)length * d, sc);
        length += n;
    }
    double worst = 0;
    int32_t worst_pos = -1;
    json_t *per = json_array();
    for (int32_t i = 0; i < T; i++) {
        double m = 0;
        for (int32_t t = 0; t < d; t++) {
            double dl = fabs((double)cached[(size_t)i * d + t] - full[(size_t)i * d + t]);
            if (!(dl <= m))
                m = dl;
        }
        if (i < GF_KEPT_SHOWN) /* the record shows the first GF_KEPT_SHOWN positions (kept_list.h) */
            json_array_append_new(per, json_real(isfinite(m) ? m : 1e300));
        if (!(m <= worst)) {
            worst = m;
            worst_pos = i;
        }
    }
    gf_k_metric_json(k, "per_position_max_delta", per);
    gf_k_metric_int(k, "positions_shown", T < GF_KEPT_SHOWN ? T : GF_KEPT_SHOWN);
    if (worst_pos >= 0) /* -1: every delta is 0 */
        gf_k_metric_int(k, "worst_position", worst_pos);
    gf_k_metric_json(k, "chunks", gf_json_ints(plan, n_plan < GF_KEPT_SHOWN ? n_plan : GF_KEPT_SHOWN));
    gf_k_metric_int(k, "chunks_shown", (long long)(n_plan < GF_KEPT_SHOWN ? n_plan : GF_KEPT_SHOWN));
    gf_k_metric_int(k, "chunks_total", (long long)n_plan);
    gf_k_metric_json(k, "mask", json_string(k_masks[s->mask]));
    gf_k_metric(k, "max_abs_delta", worst);
    gf_k_metric_int(k, "dim", d);
    gf_k_metric_int(k, "tokens", T);
    gf_k_check(k, worst <= s->atol, "cached equals recomputed", "max |delta| %.3g at position %d (atol %.3g)", worst,
               worst_pos, s->atol);
done:
    free(nrm);
    free(W);
    free(x);
    free(q);
    free(kk);
    free(vv);
    free(full);
    free(cached);
    free(Kc);
    free(Vc);
    free(sc);
    free(plan);
}

const gf_kind_def gf_kind_toy_attention_cache = {
    .name = "toy_attention_cache",
    .summary = "the seed's toy KV cache: one attention head, cached chunks against one uncached pass (harness only)",
    .needs = GF_KIND_NEEDS_NOTHING,
    .reaches = GF_KIND_REACHES_NONE,
    .parse = parse_toy,
    .free_spec = toy_free,
    .run = run_toy,
};
