/* Case keys and inputs shared by several kinds: sampler parameters,
 * probabilities or logits, prompts, seeded normals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/sampler.h"
#include "krun.h"
#include "sampler_keys.h"

const char *const gf_stop_words[] = {"eos", "length", "context_limit", NULL};
const gf_stop_reason gf_stop_values[] = {GF_STOP_EOS, GF_STOP_LENGTH, GF_STOP_CONTEXT_LIMIT};

/* ---- sampler profiles and filters (docs/sampler.md, docs/cases.md) ----
 *
 * The extension of a case's sampler lives as long as the process: cases are
 * loaded once and their specs copy gf_sampler_params by value, so each block
 * is kept on a list (reachable, never freed) instead of being owned by a
 * kind's spec. */
typedef struct ext_block {
    struct ext_block *next;
    gf_sampler_ext e;
    gf_logit_bias *bias;
    int32_t *history, *stop_ids;
} ext_block;
static ext_block *g_ext_blocks;

static const char *const k_sampler_ext_keys[] = {
    "profile", "chain", "min_p", "typical_p", "repetition_penalty", "frequency_penalty", "presence_penalty",
    "penalty_last_n", "min_tokens_to_keep", "logit_bias", "history", "history_prompt", "min_new_tokens",
    "stop_token_ids", NULL};

const char *const *gf_sampler_ext_keys(void) { return k_sampler_ext_keys; }

int gf_y_profiles(gf_cctx *ctx, const gf_ynode *map, uint32_t *mask, int *first)
{
    *mask = 0;
    *first = GF_PROFILE_SEED;
    const gf_ynode *n = gf_y_get(ctx, map, "profile", 0);
    if (!n || gf_yscalar_resolve(n).type == GF_YS_NULL)
        return 0;
    size_t cnt = n->type == GF_YN_SEQ ? n->n : 1;
    if (cnt == 0) {
        gf_y_error(ctx, n, "'profile' is an empty list (give seed, hf, llamacpp or vllm)");
        return -1;
    }
    for (size_t i = 0; i < cnt; i++) {
        const gf_ynode *it = n->type == GF_YN_SEQ ? n->items[i] : n;
        char *name = NULL;
        if (gf_y_node_string(ctx, it, "'profile'", &name) < 0)
            return -1;
        int pr = gf_sampler_profile_from_name(name);
        if (pr < 0) {
            gf_y_error(ctx, it, "unknown sampler profile '%s'; known: seed, hf, llamacpp, vllm", name);
            free(name);
            return -1;
        }
        free(name);
        if (*mask & GF_PROFILE_BIT(pr)) {
            gf_y_error(ctx, it, "'profile' names '%s' twice", gf_sampler_profile_name(pr));
            return -1;
        }
        if (i == 0)
            *first = pr;
        *mask |= GF_PROFILE_BIT(pr);
    }
    return 1;
}

/* min_p / typical_p: a number, or null (off). */
static int y_opt_double(gf_cctx *ctx, const gf_ynode *map, const char *key, int32_t *use, double *v)
{
    const gf_ynode *n = gf_y_get(ctx, map, key, 0);
    if (!n || gf_yscalar_resolve(n).type == GF_YS_NULL)
        return 0;
    char what[64];
    snprintf(what, sizeof what, "'%s'", key);
    if (gf_y_node_double(ctx, n, what, v) < 0)
        return -1;
    *use = 1;
    return 1;
}

static int y_chain(gf_cctx *ctx, const gf_ynode *map, gf_sampler_ext *e)
{
    const gf_ynode *n = gf_y_get(ctx, map, "chain", 0);
    if (!n)
        return 0;
    if (!gf_y_node_is_seq(ctx, n, "'chain'"))
        return -1;
    if (n->n == 0 || n->n > GF_SAMPLER_MAX_CHAIN) {
        gf_y_error(ctx, n, "'chain' has %zu stages (1..%d of penalties, top_k, typical_p, top_p, min_p, temperature)",
                   n->n, GF_SAMPLER_MAX_CHAIN);
        return -1;
    }
    for (size_t i = 0; i < n->n; i++) {
        char *name = NULL;
        if (gf_y_node_string(ctx, n->items[i], "'chain' entry", &name) < 0)
            return -1;
        int st = gf_sampler_stage_from_name(name);
        if (st < 0) {
            gf_y_error(ctx, n->items[i],
                       "unknown chain stage '%s'; known: penalties, top_k, typical_p, top_p, min_p, temperature", name);
            free(name);
            return -1;
        }
        free(name);
        e->chain[i] = st;
    }
    e->n_chain = (int32_t)n->n;
    return 1;
}

static int y_bias(gf_cctx *ctx, const gf_ynode *map, ext_block *b)
{
    const gf_ynode *n = gf_y_get(ctx, map, "logit_bias", 0);
    if (!n)
        return 0;
    if (!gf_y_node_is_map(ctx, n, "'logit_bias' (token id: bias)"))
        return -1;
    b->bias = calloc(n->n ? n->n : 1, sizeof *b->bias);
    if (!b->bias)
        return -1;
    for (size_t i = 0; i < n->n; i++) {
        long long tok;
        double v;
        if (gf_y_node_int(ctx, n->items[2 * i], "'logit_bias' token id", 0, 2147483647LL, &tok) < 0 ||
            gf_y_node_double(ctx, n->items[2 * i + 1], "'logit_bias' bias", &v) < 0)
            return -1;
        if (isnan(v) || v == INFINITY) {
            gf_y_error(ctx, n->items[2 * i + 1], "'logit_bias' for token %lld is %s; a finite number or -.inf", tok,
                       isnan(v) ? "NaN" : "+inf");
            return -1;
        }
        b->bias[i].token = (int32_t)tok;
        b->bias[i].bias = (float)v;
    }
    b->e.bias = b->bias;
    b->e.n_bias = (int32_t)n->n;
    return 1;
}

/* The extension keys of map into a new block (NULL with *rc 0 when the case
 * names none: it runs under the seed profile exactly as before). */
static ext_block *y_sampler_ext(gf_cctx *ctx, const gf_ynode *map, int *rc)
{
    *rc = 0;
    int any = 0;
    for (size_t k = 0; k_sampler_ext_keys[k]; k++)
        for (size_t i = 0; map && map->type == GF_YN_MAP && i < map->n; i++)
            if (map->items[2 * i]->value && !strcmp(map->items[2 * i]->value, k_sampler_ext_keys[k]))
                any = 1;
    if (!any)
        return NULL;
    ext_block *b = calloc(1, sizeof *b);
    if (!b) {
        *rc = -1;
        return NULL;
    }
    b->e = gf_sampler_ext_defaults();
    gf_sampler_ext *e = &b->e;
    int bad = 0;
    uint32_t mask;
    int first;
    bad |= gf_y_profiles(ctx, map, &mask, &first) < 0;
    e->profile = first;
    bad |= y_chain(ctx, map, e) < 0;
    bad |= y_opt_double(ctx, map, "min_p", &e->use_min_p, &e->min_p) < 0;
    bad |= y_opt_double(ctx, map, "typical_p", &e->use_typical_p, &e->typical_p) < 0;
    bad |= gf_y_double(ctx, map, "repetition_penalty", 0, &e->repetition_penalty) < 0;
    bad |= gf_y_double(ctx, map, "frequency_penalty", 0, &e->frequency_penalty) < 0;
    bad |= gf_y_double(ctx, map, "presence_penalty", 0, &e->presence_penalty) < 0;
    long long v;
    int r = gf_y_int(ctx, map, "penalty_last_n", 0, -1, 2147483647LL, &v);
    bad |= r < 0;
    if (r > 0)
        e->penalty_last_n = (int32_t)v;
    r = gf_y_int(ctx, map, "min_tokens_to_keep", 0, 0, 2147483647LL, &v);
    bad |= r < 0;
    if (r > 0)
        e->min_tokens_to_keep = (int32_t)v;
    bad |= y_bias(ctx, map, b) < 0;
    size_t n = 0;
    r = gf_y_ints(ctx, map, "history", 0, 0, 2147483647LL, 0, &b->history, &n);
    bad |= r < 0;
    e->history = b->history;
    e->n_history = (int32_t)n;
    r = gf_y_int(ctx, map, "history_prompt", 0, 0, 2147483647LL, &v);
    bad |= r < 0;
    if (r > 0)
        e->n_prompt = (int32_t)v;
    if (r > 0 && e->n_prompt > e->n_history) {
        gf_y_error(ctx, gf_y_get(ctx, map, "history_prompt", 0), "'history_prompt' %d exceeds the %d ids of 'history'",
                   (int)e->n_prompt, (int)e->n_history);
        bad = 1;
    }
    r = gf_y_int(ctx, map, "min_new_tokens", 0, 0, 2147483647LL, &v);
    bad |= r < 0;
    if (r > 0)
        e->min_new_tokens = (int32_t)v;
    r = gf_y_int(ctx, map, "eos_id", 0, 0, 2147483647LL, &v);
    bad |= r < 0;
    if (r > 0)
        e->eos_id = (int32_t)v;
    n = 0;
    bad |= gf_y_ints(ctx, map, "stop_token_ids", 0, 0, 2147483647LL, 0, &b->stop_ids, &n) < 0;
    e->stop_ids = b->stop_ids;
    e->n_stop_ids = (int32_t)n;
    if (!bad && e->min_new_tokens > 0 && e->eos_id < 0 && e->n_stop_ids == 0) {
        gf_y_error(ctx, gf_y_get(ctx, map, "min_new_tokens", 0), "'min_new_tokens' needs 'eos_id' (the token it bans)");
        bad = 1;
    }
    b->next = g_ext_blocks; /* kept (and reachable) even on error: the loader reports and exits */
    g_ext_blocks = b;
    *rc = bad ? -1 : 1;
    return b;
}

int gf_y_sampler_raw(gf_cctx *ctx, const gf_ynode *map, gf_sampler_params *p)
{
    int bad = 0;
    int erc;
    ext_block *eb = y_sampler_ext(ctx, map, &erc);
    if (erc < 0)
        bad = 1;
    if (eb)
        p->ext = &eb->e;
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

static json_t *ids_json(const int32_t *v, int32_t n)
{
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

json_t *gf_sampler_json(const gf_sampler_params *p)
{
    json_t *o = json_object();
    if (p->ext) {
        const gf_sampler_ext *e = p->ext;
        json_object_set_new(o, "profile", json_string(gf_sampler_profile_name(e->profile)));
        if (e->n_chain > 0) {
            json_t *c = json_array();
            for (int32_t i = 0; i < e->n_chain; i++)
                json_array_append_new(c, json_string(gf_sampler_stage_name(e->chain[i])));
            json_object_set_new(o, "chain", c);
        }
        if (e->use_min_p)
            gf_json_set_number(o, "min_p", e->min_p, NULL);
        if (e->use_typical_p)
            gf_json_set_number(o, "typical_p", e->typical_p, NULL);
        if (e->repetition_penalty != 1.0)
            gf_json_set_number(o, "repetition_penalty", e->repetition_penalty, NULL);
        if (e->frequency_penalty != 0.0)
            gf_json_set_number(o, "frequency_penalty", e->frequency_penalty, NULL);
        if (e->presence_penalty != 0.0)
            gf_json_set_number(o, "presence_penalty", e->presence_penalty, NULL);
        if (e->penalty_last_n != -1)
            json_object_set_new(o, "penalty_last_n", json_integer(e->penalty_last_n));
        if (e->min_tokens_to_keep != 1)
            json_object_set_new(o, "min_tokens_to_keep", json_integer(e->min_tokens_to_keep));
        if (e->n_bias > 0) {
            json_t *b = json_object();
            for (int32_t i = 0; i < e->n_bias; i++) {
                char key[16];
                snprintf(key, sizeof key, "%d", (int)e->bias[i].token);
                gf_json_set_number(b, key, e->bias[i].bias, NULL);
            }
            json_object_set_new(o, "logit_bias", b);
        }
        if (e->n_history > 0) {
            json_object_set_new(o, "history", ids_json(e->history, e->n_history));
            json_object_set_new(o, "history_prompt", json_integer(e->n_prompt));
        }
        if (e->min_new_tokens > 0)
            json_object_set_new(o, "min_new_tokens", json_integer(e->min_new_tokens));
        if (e->n_stop_ids > 0)
            json_object_set_new(o, "stop_token_ids", ids_json(e->stop_ids, e->n_stop_ids));
    }
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
