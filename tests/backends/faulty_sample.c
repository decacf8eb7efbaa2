/* The ref backend with a `sample` slot of its own, for the sampler-slot
 * detection cases (cases/detect/sample_slot.yaml, tests/cli/sample_slot.sh).
 * ref has no sample slot; this table is ref's with one added: a plain
 * sampler written from docs/sampler.md (temperature -> top-k -> top-p ->
 * race over the engine's uniforms), with one realistic bug switched on
 * (GF_FAULT: its number in the one table of test faults,
 * tests/backends/CMakeLists.txt; 50 is the correct slot, the control).
 *
 * Every other slot is ref's. Output: libgenfence_test_sample_<stem>.so. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/backend.h"
#include "genfence/sampler.h"
#include "ref/ref.h"

#ifndef GF_FAULT
#error "GF_FAULT selects the fault (50: none)"
#endif
#ifndef GF_FAULT_NAME
#error "GF_FAULT_NAME names the backend"
#endif

static gf_backend_ops g_ops;

typedef struct zi {
    double z;
    int32_t i;
} zi;

/* z descending, equal z by ascending index (docs/sampler.md's stable order) */
static int zi_desc(const void *a, const void *b)
{
    const zi *x = a, *y = b;
    if (x->z != y->z)
        return x->z > y->z ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* 1 when score s at index i beats the best so far (bs at bi) */
static int beats(double s, int32_t i, double bs, int32_t bi)
{
    if (bi < 0 || s > bs)
        return 1;
#if GF_FAULT == 52
    return s == bs && i > bi; /* the bug: the highest index wins a tie */
#else
    (void)i;
    return 0; /* equal: the lower index, seen first, stays */
#endif
}

/* top-p over the finite entries of z (V), in place; s: scratch (V) */
static void top_p(double *z, int32_t V, double top, zi *s)
{
    int32_t n = 0;
    for (int32_t i = 0; i < V; i++)
        if (z[i] != -INFINITY)
            s[n++] = (zi){z[i], i};
    qsort(s, (size_t)n, sizeof *s, zi_desc);
#if GF_FAULT == 53
    const double zmax = 0; /* the bug: exp(z) of z in the thousands is inf */
#else
    const double zmax = s[0].z;
#endif
    double total = 0;
    for (int32_t j = 0; j < n; j++)
        total += exp(s[j].z - zmax);
    double before = 0;
    for (int32_t j = 0; j < n; j++) {
#if GF_FAULT == 51
        int drop = j > 0 && before > top; /* the bug: > instead of >= */
#else
        int drop = j > 0 && before >= top;
#endif
        if (drop)
            z[s[j].i] = -INFINITY;
        before += exp(s[j].z - zmax) / total;
    }
}

static gf_status sample_row(const float *logits, int32_t V, const gf_sampler_params *p, const double *u, double *z,
                            zi *s, int32_t *id)
{
    int32_t best = -1;
    double bs = -INFINITY;
    if (p->temperature == 0) { /* greedy: the argmax of the raw logits */
        for (int32_t i = 0; i < V; i++)
            if ((double)logits[i] != -INFINITY && beats((double)logits[i], i, bs, best)) {
                bs = (double)logits[i];
                best = i;
            }
        *id = best;
        return GF_OK;
    }
#if GF_FAULT == 55
    const double T = 1.0; /* the bug: top-k and top-p on the raw logits */
#else
    const double T = p->temperature;
#endif
    for (int32_t i = 0; i < V; i++)
        z[i] = (double)logits[i] / T;
    if (p->use_top_k && p->top_k < V) {
        for (int32_t i = 0; i < V; i++)
            s[i] = (zi){z[i], i};
        qsort(s, (size_t)V, sizeof *s, zi_desc);
#if GF_FAULT == 54
        for (int32_t j = p->top_k; j < V; j++) /* the bug: only the first k survive */
            z[s[j].i] = -INFINITY;
#else
        const double kth = s[p->top_k - 1].z;
        for (int32_t i = 0; i < V; i++)
            if (z[i] < kth)
                z[i] = -INFINITY;
#endif
    }
    if (p->use_top_p)
        top_p(z, V, p->top_p, s);
#if GF_FAULT == 55
    for (int32_t i = 0; i < V; i++) /* ... and only now the temperature */
        if (z[i] != -INFINITY)
            z[i] = (double)logits[i] / p->temperature;
#endif
    for (int32_t i = 0; i < V; i++) { /* the exponential race over the engine's uniforms */
        if (!isfinite(z[i]))
            continue;
#if GF_FAULT == 180
        double sc = (double)((float)z[i] - logf(-logf((float)u[i]))); /* the bug: the race in float */
#else
        double sc = z[i] - log(-log(u[i]));
#endif
        if (beats(sc, i, bs, best)) {
            bs = sc;
            best = i;
        }
    }
    *id = best;
    return best < 0 ? GF_E_BACKEND : GF_OK;
}

static gf_status fs_sample(void *model, const float *logits, int32_t B, const gf_sampler_params *p,
                           const gf_rng_draws *d, int32_t *ids)
{
    (void)model; /* sampler-only calls pass NULL; with a model the result must not depend on it */
    const int32_t V = d->V;
    double *z = malloc((size_t)V * sizeof *z);
    zi *s = malloc((size_t)V * sizeof *s);
    gf_status st = z && s ? GF_OK : GF_E_NOMEM;
    for (int32_t b = 0; b < B && st == GF_OK; b++)
#if GF_FAULT == 56
        /* the bug: every row races on row 0's uniforms, one stream for the
         * batch (a device sampler that broadcasts its first random buffer) */
        st = sample_row(logits + (size_t)b * V, V, p, d->u, z, s, &ids[b]);
#else
        st = sample_row(logits + (size_t)b * V, V, p, d->u + (size_t)b * V, z, s, &ids[b]);
#endif
    free(z);
    free(s);
    return st;
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref with a sample slot (tests/backends/faulty_sample.c)";
        g_ops.sample = fs_sample;
    }
    return &g_ops;
}
