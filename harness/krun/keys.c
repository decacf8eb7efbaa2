/* Case keys and inputs shared by several kinds: sampler parameters,
 * probabilities or logits, prompts, seeded normals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/sampler.h"
#include "krun.h"

const char *const gf_stop_words[] = {"eos", "length", "context_limit", NULL};
const gf_stop_reason gf_stop_values[] = {GF_STOP_EOS, GF_STOP_LENGTH, GF_STOP_CONTEXT_LIMIT};

int gf_y_sampler_raw(gf_cctx *ctx, const gf_ynode *map, gf_sampler_params *p)
{
    int bad = 0;
    bad |= gf_y_double(ctx, map, "temperature", 0, &p->temperature) < 0;
    const gf_ynode *k = gf_y_get(ctx, map, "top_k", 0);
    if (k) {
        if (gf_yscalar_resolve(k).type == GF_YS_NULL) {
            p->use_top_k = 0;
        } else {
            long long v;
            if (gf_y_node_int(ctx, k, "'top_k'", -2147483647LL, 2147483647LL, &v) < 0)
                bad = 1;
            p->use_top_k = 1;
            p->top_k = (int32_t)v;
        }
    }
    const gf_ynode *tp = gf_y_get(ctx, map, "top_p", 0);
    if (tp) {
        if (gf_yscalar_resolve(tp).type == GF_YS_NULL) {
            p->use_top_p = 0;
        } else {
            if (gf_y_node_double(ctx, tp, "'top_p'", &p->top_p) < 0)
                bad = 1;
            p->use_top_p = 1;
        }
    }
    long long seed;
    int rc = gf_y_int(ctx, map, "seed", 0, 0, 0x7fffffffffffffffLL, &seed);
    if (rc < 0)
        bad = 1;
    else if (rc > 0)
        p->seed = (uint64_t)seed;
    return bad ? -1 : 0;
}

int gf_y_sampler(gf_cctx *ctx, const gf_ynode *map, gf_sampler_params *p)
{
    if (gf_y_sampler_raw(ctx, map, p) < 0)
        return -1;
    if (gf_sampler_validate(p) != GF_OK) { /* a range error is bad input at load time */
        gf_y_error(ctx, map, "invalid sampler: %s", gf_error_msg());
        return -1;
    }
    return 0;
}

json_t *gf_sampler_json(const gf_sampler_params *p)
{
    json_t *o = json_object();
    gf_json_set_number(o, "temperature", p->temperature, NULL);
    json_object_set_new(o, "top_k", p->use_top_k ? json_integer(p->top_k) : json_null());
    if (p->use_top_p)
        gf_json_set_number(o, "top_p", p->top_p, NULL);
    else
        json_object_set_new(o, "top_p", json_null());
    json_object_set_new(o, "seed", json_integer((json_int_t)p->seed));
    return o;
}

int gf_y_probs_or_logits(gf_cctx *ctx, const gf_ynode *map, int flags, float **logits, int32_t *V,
                         int *from_probs)
{
    double *v = NULL;
    size_t n = 0;
    int rp = gf_y_doubles(ctx, map, "probs", 0, 1, &v, &n);
    if (rp < 0)
        return -1;
    if (rp > 0) {
        const gf_ynode *other = gf_y_get(ctx, map, "logits", 0);
        if (other) {
            gf_y_error(ctx, other, "give 'probs' or 'logits', not both");
            free(v);
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            if (!(v[i] >= 0) || !isfinite(v[i])) {
                gf_y_error(ctx, gf_y_get(ctx, map, "probs", 0), "probs entry %zu is %g; probabilities must be >= 0",
                           i, v[i]);
                free(v);
                return -1;
            }
        *from_probs = 1;
    } else {
        int rl = gf_y_doubles(ctx, map, "logits", 0, 1, &v, &n);
        if (rl < 0)
            return -1;
        if (rl == 0) {
            if (flags & GF_Y_REQUIRED)
                gf_y_error(ctx, map, "missing required key 'probs' or 'logits'");
            return (flags & GF_Y_REQUIRED) ? -1 : 0;
        }
        *from_probs = 0;
    }
    *logits = malloc(n * sizeof **logits);
    if (!*logits) {
        free(v);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        (*logits)[i] = *from_probs ? (float)log(v[i]) : (float)v[i];
    *V = (int32_t)n;
    free(v);
    return 1;
}

void gf_prompts_free(gf_prompt_spec *p, size_t n)
{
    for (size_t i = 0; p && i < n; i++) {
        free(p[i].text);
        free(p[i].ids);
    }
    free(p);
}

int gf_y_prompts(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, gf_prompt_spec **out,
                 size_t *n_out)
{
    const gf_ynode *n = gf_y_get(ctx, map, key, flags);
    if (!n)
        return (flags & GF_Y_REQUIRED) ? -1 : 0;
    char what[128];
    snprintf(what, sizeof what, "'%s'", key);
    if (!gf_y_node_is_seq(ctx, n, what))
        return -1;
    if (n->n == 0) {
        gf_y_error(ctx, n, "'%s' is empty", key);
        return -1;
    }
    gf_prompt_spec *p = calloc(n->n, sizeof *p);
    if (!p)
        return -1;
    int ok = 1;
    for (size_t i = 0; i < n->n; i++) {
        const gf_ynode *it = n->items[i];
        snprintf(what, sizeof what, "'%s' entry %zu", key, i);
        if (it->type == GF_YN_SEQ) {
            p[i].ids = calloc(it->n ? it->n : 1, sizeof *p[i].ids);
            p[i].n_ids = it->n;
            if (it->n == 0) {
                gf_y_error(ctx, it, "%s: an empty token list", what);
                ok = 0;
            }
            for (size_t j = 0; p[i].ids && j < it->n; j++) {
                long long v = 0;
                if (gf_y_node_int(ctx, it->items[j], what, 0, 2147483647LL, &v) < 0)
                    ok = 0;
                p[i].ids[j] = (int32_t)v;
            }
        } else if (gf_y_node_string(ctx, it, what, &p[i].text) < 0) {
            ok = 0;
        } else if (!p[i].text[0]) {
            gf_y_error(ctx, it, "%s: an empty prompt", what);
            ok = 0;
        }
    }
    if (!ok) {
        gf_prompts_free(p, n->n);
        return -1;
    }
    *out = p;
    *n_out = n->n;
    return 1;
}

gf_status gf_prompt_tokens(const gf_session *s, const gf_prompt_spec *p, int32_t **ids, int32_t *n)
{
    *ids = NULL;
    *n = 0;
    if (p->ids) {
        *ids = malloc(p->n_ids * sizeof **ids);
        if (!*ids)
            return gf_error_set(GF_E_NOMEM, "out of memory");
        memcpy(*ids, p->ids, p->n_ids * sizeof **ids);
        *n = (int32_t)p->n_ids;
        return GF_OK;
    }
    size_t len = 0;
    gf_status st = gf_session_tokens(s, p->text, NULL, ids, &len);
    if (st != GF_OK)
        return gf_error_prefix(st, "prompt '%s'", p->text);
    *n = (int32_t)len;
    return GF_OK;
}

void gf_k_normals(uint64_t seed, uint64_t stream, double *out, size_t n)
{
    /* Box-Muller on Philox uniforms (step = stream, seq 0x6e6f726d "norm") */
    for (size_t i = 0; i < n; i += 2) {
        double u1 = gf_rng_uniform(seed, 0x6e6f726dULL, stream, (uint32_t)i);
        double u2 = gf_rng_uniform(seed, 0x6e6f726dULL, stream, (uint32_t)i + 1);
        double r = sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
        out[i] = r * cos(th);
        if (i + 1 < n)
            out[i + 1] = r * sin(th);
    }
}


int gf_k_encode_prompts(gf_krun *k, const gf_prompt_spec *ps, int32_t B, int32_t ***prompts, int32_t **lens)
{
    *prompts = calloc((size_t)B, sizeof **prompts);
    *lens = calloc((size_t)B, sizeof **lens);
    if (!*prompts || !*lens) {
        gf_k_fail(k, "out of memory");
        return 0;
    }
    for (int32_t b = 0; b < B; b++)
        if (gf_prompt_tokens(k->session, &ps[b], &(*prompts)[b], &(*lens)[b]) != GF_OK) {
            gf_k_error(k, "%s", gf_error_msg());
            return 0;
        }
    return 1;
}

void gf_k_free_tokens(int32_t **p, int32_t B)
{
    for (int32_t b = 0; p && b < B; b++)
        free(p[b]);
    free(p);
}
