/* Case keys and inputs shared by several kinds: sampler parameters,
 * probabilities or logits, prompts, seeded normals. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/sampler.h"
#include "genfence/sampler_fields.h"
#include "keys.h"

const char *const gf_stop_words[] = {"eos", "length", "context_limit", NULL};
const gf_stop_reason gf_stop_values[] = {GF_STOP_EOS, GF_STOP_LENGTH, GF_STOP_CONTEXT_LIMIT};

/* ---- sampler profiles and filters (docs/sampler.md, docs/cases.md) ----
 *
 * Every key is a row of the field table (genfence/sampler_fields.h), read by
 * its type. The extension of a case's sampler lives as long as the process:
 * cases are loaded once and their specs copy gf_sampler_params by value, so
 * each block (and the lists it points to) is kept on a list (reachable,
 * never freed) instead of being owned by a kind's spec. */
typedef struct ext_block {
    struct ext_block *next;
    gf_sampler_ext e;
} ext_block;
static ext_block *g_ext_blocks;

static const char *k_sampler_ext_keys[GF_SF_COUNT + 1];

const char *const *gf_sampler_ext_keys(void)
{
    if (!k_sampler_ext_keys[0]) {
        size_t n = 0;
        for (int i = 0; i < GF_SF_COUNT; i++)
            if (gf_sampler_fields[i].flags & GF_SF_EXT_KEY)
                k_sampler_ext_keys[n++] = gf_sampler_fields[i].name;
    }
    return k_sampler_ext_keys;
}

int gf_y_profiles(gf_cctx *ctx, const gf_ynode *map, uint32_t *mask, int *first)
{
    *mask = 0;
    *first = GF_PROFILE_SEED;
    const gf_ynode *n = gf_y_get(ctx, map, "profile", 0);
    if (!n || gf_yscalar_resolve(n).type == GF_YS_NULL)
        return 0;
    size_t cnt = n->type == GF_YN_SEQ ? n->n : 1;
    if (cnt == 0) {
        gf_y_error(ctx, n, "'profile' is an empty list (give %s)", gf_sampler_profile_list(" or "));
        return -1;
    }
    for (size_t i = 0; i < cnt; i++) {
        const gf_ynode *it = n->type == GF_YN_SEQ ? n->items[i] : n;
        char *name = NULL;
        if (gf_y_node_string(ctx, it, "'profile'", &name) < 0)
            return -1;
        int pr = gf_sampler_profile_from_name(name);
        if (pr < 0) {
            gf_y_error(ctx, it, "unknown sampler profile '%s'; known: %s", name, gf_sampler_profile_list(", "));
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

/* A number, or null (off). */
static int y_opt_double(gf_cctx *ctx, const gf_ynode *map, const char *key, int32_t *use, double *v)
{
    const gf_ynode *n = gf_y_get(ctx, map, key, 0);
    if (!n)
        return 0;
    if (gf_yscalar_resolve(n).type == GF_YS_NULL) {
        *use = 0;
        return 0;
    }
    char what[64];
    snprintf(what, sizeof what, "'%s'", key);
    if (gf_y_node_double(ctx, n, what, v) < 0)
        return -1;
    *use = 1;
    return 1;
}

/* An integer in the field's range, or null (off). */
static int y_opt_int(gf_cctx *ctx, const gf_ynode *map, const gf_sampler_field *f, int32_t *use, int32_t *v)
{
    const gf_ynode *n = gf_y_get(ctx, map, f->name, 0);
    if (!n)
        return 0;
    if (gf_yscalar_resolve(n).type == GF_YS_NULL) {
        *use = 0;
        return 0;
    }
    char what[64];
    snprintf(what, sizeof what, "'%s'", f->name);
    long long x = 0;
    int bad = gf_y_node_int(ctx, n, what, (long long)f->lo, (long long)f->hi, &x) < 0;
    *use = 1;
    *v = (int32_t)x;
    return bad ? -1 : 1;
}

static int y_chain(gf_cctx *ctx, const gf_ynode *map, gf_sampler_ext *e)
{
    const gf_ynode *n = gf_y_get(ctx, map, "chain", 0);
    if (!n)
        return 0;
    if (!gf_y_node_is_seq(ctx, n, "'chain'"))
        return -1;
    if (n->n == 0 || n->n > GF_SAMPLER_MAX_CHAIN) {
        gf_y_error(ctx, n, "'chain' has %zu stages (1..%d of %s)", n->n, GF_SAMPLER_MAX_CHAIN, gf_sampler_stage_list());
        return -1;
    }
    for (size_t i = 0; i < n->n; i++) {
        char *name = NULL;
        if (gf_y_node_string(ctx, n->items[i], "'chain' entry", &name) < 0)
            return -1;
        int st = gf_sampler_stage_from_name(name);
        if (st < 0) {
            gf_y_error(ctx, n->items[i], "unknown chain stage '%s'; known: %s", name, gf_sampler_stage_list());
            free(name);
            return -1;
        }
        free(name);
        e->chain[i] = st;
    }
    e->n_chain = (int32_t)n->n;
    return 1;
}

static int y_bias(gf_cctx *ctx, const gf_ynode *map, const gf_sampler_field *f, gf_sampler_ext *e)
{
    const gf_ynode *n = gf_y_get(ctx, map, f->name, 0);
    if (!n)
        return 0;
    if (!gf_y_node_is_map(ctx, n, "'logit_bias' (token id: bias)"))
        return -1;
    gf_logit_bias *bias = calloc(n->n ? n->n : 1, sizeof *bias);
    if (!bias)
        return -1;
    e->bias = bias; /* kept with the block */
    for (size_t i = 0; i < n->n; i++) {
        long long tok;
        double v;
        if (gf_y_node_int(ctx, n->items[2 * i], "'logit_bias' token id", (long long)f->lo, (long long)f->hi, &tok) <
                0 ||
            gf_y_node_double(ctx, n->items[2 * i + 1], "'logit_bias' bias", &v) < 0)
            return -1;
        if (isnan(v) || v == INFINITY) {
            gf_y_error(ctx, n->items[2 * i + 1], "'logit_bias' for token %lld is %s; a finite number or -.inf", tok,
                       isnan(v) ? "NaN" : "+inf");
            return -1;
        }
        bias[i].token = (int32_t)tok;
        bias[i].bias = (float)v;
    }
    e->n_bias = (int32_t)n->n;
    return 1;
}

/* bad_words_ids [[id, ...], ...] or sequence_bias [[[id, ...], bias], ...]
 * (HF's list forms) into a gf_token_seq array kept with the block. */
static int y_seqs(gf_cctx *ctx, const gf_ynode *map, const gf_sampler_field *f, gf_sampler_ext *e)
{
    const gf_ynode *n = gf_y_get(ctx, map, f->name, 0);
    if (!n)
        return 0;
    const int with_bias = f->type == GF_SF_SEQ_BIAS;
    char what[96];
    snprintf(what, sizeof what, "'%s' (%s)", f->name,
             with_bias ? "a list of [[token id, ...], bias] pairs" : "a list of token-id lists");
    if (!gf_y_node_is_seq(ctx, n, what))
        return -1;
    size_t total = 0;
    for (size_t i = 0; i < n->n; i++) {
        const gf_ynode *ids = n->items[i];
        if (with_bias) {
            if (ids->type != GF_YN_SEQ || ids->n != 2) {
                gf_y_error(ctx, ids, "'%s' entry %zu: want [[token id, ...], bias]", f->name, i);
                return -1;
            }
            ids = ids->items[0];
        }
        if (ids->type != GF_YN_SEQ || ids->n == 0) {
            gf_y_error(ctx, ids, "'%s' entry %zu: want a non-empty list of token ids", f->name, i);
            return -1;
        }
        total += ids->n;
    }
    gf_token_seq *q = calloc(n->n ? n->n : 1, sizeof *q);    /* (entries) */
    int32_t *flat = calloc(total ? total : 1, sizeof *flat); /* (every id of every entry) */
    if (!q || !flat) {
        free(q);
        free(flat);
        return -1;
    }
    *(const gf_token_seq **)gf_sf_at(f, NULL, e, f->off) = q; /* kept with the block (q[0].ids is flat) */
    size_t used = 0;
    for (size_t i = 0; i < n->n; i++) {
        const gf_ynode *ids = with_bias ? n->items[i]->items[0] : n->items[i];
        q[i].ids = flat + used;
        q[i].n = (int32_t)ids->n;
        for (size_t j = 0; j < ids->n; j++) {
            long long tok;
            if (gf_y_node_int(ctx, ids->items[j], "a token id", (long long)f->lo, (long long)f->hi, &tok) < 0)
                return -1;
            flat[used++] = (int32_t)tok;
        }
        if (with_bias) {
            double v;
            if (gf_y_node_double(ctx, n->items[i]->items[1], "a sequence bias", &v) < 0)
                return -1;
            if (isnan(v) || v == INFINITY) {
                gf_y_error(ctx, n->items[i]->items[1], "'%s' entry %zu's bias is %s; a finite number or -.inf", f->name,
                           i, isnan(v) ? "NaN" : "+inf");
                return -1;
            }
            q[i].bias = (float)v;
        }
    }
    *(int32_t *)gf_sf_at(f, NULL, e, f->aux) = (int32_t)n->n;
    return 1;
}

/* One field of the table from map into p / e: 1 read, 0 absent, -1 error. */
static int y_field(gf_cctx *ctx, const gf_ynode *map, const gf_sampler_field *f, gf_sampler_params *p,
                   gf_sampler_ext *e)
{
    void *v = gf_sf_at(f, p, e, f->off);
    long long x;
    int r;
    switch (f->type) {
    case GF_SF_REAL: return gf_y_double(ctx, map, f->name, 0, v);
    case GF_SF_REAL_OPT: return y_opt_double(ctx, map, f->name, gf_sf_at(f, p, e, f->aux), v);
    case GF_SF_INT_OPT: return y_opt_int(ctx, map, f, gf_sf_at(f, p, e, f->aux), v);
    case GF_SF_INT:
    case GF_SF_PROMPT_LEN:
        r = gf_y_int(ctx, map, f->name, 0, (long long)f->lo, (long long)f->hi, &x);
        if (r > 0)
            *(int32_t *)v = (int32_t)x;
        if (r > 0 && f->type == GF_SF_PROMPT_LEN && e->n_prompt > e->n_history) {
            gf_y_error(ctx, gf_y_get(ctx, map, f->name, 0), "'%s' %d exceeds the %d ids of 'history'", f->name,
                       (int)e->n_prompt, (int)e->n_history);
            return -1;
        }
        return r;
    case GF_SF_SEED:
        r = gf_y_int(ctx, map, f->name, 0, 0, 0x7fffffffffffffffLL, &x);
        if (r > 0)
            *(uint64_t *)v = (uint64_t)x;
        return r;
    case GF_SF_PROFILE: {
        uint32_t mask;
        int first;
        r = gf_y_profiles(ctx, map, &mask, &first);
        *(int32_t *)v = first;
        return r;
    }
    case GF_SF_CHAIN: return y_chain(ctx, map, e);
    case GF_SF_BIAS: return y_bias(ctx, map, f, e);
    case GF_SF_SEQS:
    case GF_SF_SEQ_BIAS: return y_seqs(ctx, map, f, e);
    case GF_SF_IDS: {
        int32_t *ids = NULL;
        size_t n = 0;
        r = gf_y_ints(ctx, map, f->name, 0, (long long)f->lo, (long long)f->hi, 0, &ids, &n);
        *(const int32_t **)v = ids; /* kept with the block */
        *(int32_t *)gf_sf_at(f, p, e, f->aux) = (int32_t)n;
        return r;
    }
    }
    return 0;
}

/* The extension keys of map into a new block (NULL with *rc 0 when the case
 * names none: it runs under the seed profile exactly as before). */
static ext_block *y_sampler_ext(gf_cctx *ctx, const gf_ynode *map, int *rc)
{
    *rc = 0;
    int any = 0;
    for (int k = 0; k < GF_SF_COUNT; k++)
        for (size_t i = 0; (gf_sampler_fields[k].flags & GF_SF_EXT_KEY) && map && map->type == GF_YN_MAP && i < map->n;
             i++)
            if (map->items[2 * i]->value && !strcmp(map->items[2 * i]->value, gf_sampler_fields[k].name))
                any = 1;
    if (!any && !gf_y_census_all(ctx)) /* (gf_kind_keys: these keys are taken together) */
        return NULL;
    ext_block *b = calloc(1, sizeof *b);
    if (!b) {
        *rc = -1;
        return NULL;
    }
    b->e = gf_sampler_ext_defaults();
    gf_sampler_ext *e = &b->e;
    int bad = 0;
    for (int k = 0; k < GF_SF_COUNT; k++)
        if (gf_sampler_fields[k].in_ext)
            bad |= y_field(ctx, map, &gf_sampler_fields[k], NULL, e) < 0;
    if (!bad && e->min_new_tokens > 0 && e->eos_id < 0 && e->n_stop_ids == 0) {
        gf_y_error(ctx, gf_y_get(ctx, map, "min_new_tokens", 0), "'min_new_tokens' needs 'eos_id' (the token it bans)");
        bad = 1;
    }
    if (!bad && e->min_length > 0 && e->eos_id < 0) {
        gf_y_error(ctx, gf_y_get(ctx, map, "min_length", 0), "'min_length' needs 'eos_id' (the token it bans)");
        bad = 1;
    }
    if (!bad && e->exp_decay_start >= 0 && e->eos_id < 0) {
        gf_y_error(ctx, gf_y_get(ctx, map, "exponential_decay_start", 0),
                   "'exponential_decay_start' needs 'eos_id' (the token whose logit it grows; HF's "
                   "ExponentialDecayLengthPenalty takes eos_token_id)");
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
    for (int k = 0; k < GF_SF_COUNT; k++)
        if (!gf_sampler_fields[k].in_ext)
            bad |= y_field(ctx, map, &gf_sampler_fields[k], p, NULL) < 0;
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

int gf_y_seed_shift(gf_cctx *ctx, const gf_ynode *map, uint64_t *shift)
{
    *shift = 0;
    const char *env = getenv("GENFENCE_SEED_SHIFT");
    if (!env || !env[0])
        return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(env, &end, 10);
    if (errno || *end || v < 0 || v > 0x7fffffffLL) {
        gf_y_error(ctx, map, "GENFENCE_SEED_SHIFT='%s' is not an integer in [0, 2147483647]", env);
        return -1;
    }
    *shift = (uint64_t)v;
    return 0;
}

static json_t *ids_json(const int32_t *v, int32_t n)
{
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

/* One field into the record o (by the table's rec rule). */
static void field_json(json_t *o, const gf_sampler_field *f, const gf_sampler_params *p, const gf_sampler_ext *e)
{
    if (f->rec == GF_SF_REC_NEVER || (f->rec == GF_SF_REC_SET && gf_sf_is_default(f, p, e)))
        return;
    if (f->rec == GF_SF_REC_WITH_HISTORY && e->n_history == 0)
        return;
    const void *v = gf_sf_cat(f, p, e, f->off);
    const int32_t n = gf_sf_count(f, p, e);
    switch (f->type) {
    case GF_SF_REAL: gf_json_set_number(o, f->name, *(const double *)v, NULL); break;
    case GF_SF_REAL_OPT:
        if (*(const int32_t *)gf_sf_cat(f, p, e, f->aux))
            gf_json_set_number(o, f->name, *(const double *)v, NULL);
        else
            json_object_set_new(o, f->name, json_null());
        break;
    case GF_SF_INT_OPT:
        json_object_set_new(
            o, f->name, *(const int32_t *)gf_sf_cat(f, p, e, f->aux) ? json_integer(*(const int32_t *)v) : json_null());
        break;
    case GF_SF_INT:
    case GF_SF_PROMPT_LEN: json_object_set_new(o, f->name, json_integer(*(const int32_t *)v)); break;
    case GF_SF_SEED: json_object_set_new(o, f->name, json_integer((json_int_t) * (const uint64_t *)v)); break;
    case GF_SF_PROFILE:
        json_object_set_new(o, f->name, json_string(gf_sampler_profile_name(*(const int32_t *)v)));
        break;
    case GF_SF_CHAIN: {
        json_t *c = json_array();
        for (int32_t i = 0; i < n; i++)
            json_array_append_new(c, json_string(gf_sampler_stage_name(((const int32_t *)v)[i])));
        json_object_set_new(o, f->name, c);
        break;
    }
    case GF_SF_BIAS: {
        const gf_logit_bias *bias = *(const gf_logit_bias *const *)v;
        json_t *b = json_object();
        for (int32_t i = 0; i < n; i++) {
            char key[16];
            snprintf(key, sizeof key, "%d", (int)bias[i].token);
            gf_json_set_number(b, key, bias[i].bias, NULL);
        }
        json_object_set_new(o, f->name, b);
        break;
    }
    case GF_SF_IDS: json_object_set_new(o, f->name, ids_json(*(const int32_t *const *)v, n)); break;
    case GF_SF_SEQS:
    case GF_SF_SEQ_BIAS: {
        const gf_token_seq *q = *(const gf_token_seq *const *)v;
        json_t *a = json_array();
        for (int32_t i = 0; i < n; i++) {
            json_t *ids = ids_json(q[i].ids, q[i].n);
            if (f->type == GF_SF_SEQ_BIAS) { /* {ids, bias} (-inf: null and bias_reason) */
                json_t *entry = json_object();
                json_object_set_new(entry, "ids", ids);
                gf_json_set_number(entry, "bias", q[i].bias, NULL);
                ids = entry;
            }
            json_array_append_new(a, ids);
        }
        json_object_set_new(o, f->name, a);
        break;
    }
    }
}

json_t *gf_sampler_json(const gf_sampler_params *p)
{
    json_t *o = json_object();
    for (int pass = 1; pass >= 0; pass--) /* the extension's fields, then the params' */
        for (int k = 0; k < GF_SF_COUNT; k++)
            if (gf_sampler_fields[k].in_ext == pass && (!pass || p->ext))
                field_json(o, &gf_sampler_fields[k], p, p->ext);
    return o;
}

int gf_y_probs_or_logits(gf_cctx *ctx, const gf_ynode *map, int flags, float **logits, int32_t *V, int *from_probs)
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
                gf_y_error(ctx, gf_y_get(ctx, map, "probs", 0), "probs entry %zu is %g; probabilities must be >= 0", i,
                           v[i]);
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
        /* the sampler's rule (engine/sampler.c) at load time, so that list
         * and run refuse the same file: no NaN, no +inf (-inf masks a token;
         * an all -inf row stays the run's error, cases/detect/schema.yaml).
         * sampler_errors feeds refusals on purpose. */
        for (size_t i = 0; !(flags & GF_Y_ANY_LOGITS) && i < n; i++)
            if (isnan(v[i]) || v[i] == INFINITY) {
                gf_y_error(ctx, gf_y_get(ctx, map, "logits", 0),
                           "logits entry %zu is %s; logits must be finite, or -inf to mask a token", i,
                           isnan(v[i]) ? "NaN" : "+inf");
                free(v);
                return -1;
            }
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

int gf_y_prompts(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags, gf_prompt_spec **out, size_t *n_out)
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

/* One prompt from `prompt` (text) or `prompt_tokens` (ids). */
int gf_y_one_prompt(gf_cctx *ctx, const gf_ynode *m, gf_prompt_spec *p)
{
    int rt = gf_y_string(ctx, m, "prompt", 0, &p->text);
    int ri = gf_y_ints(ctx, m, "prompt_tokens", 0, 0, 2147483647LL, 1, &p->ids, &p->n_ids);
    if (rt < 0 || ri < 0)
        return -1;
    if (rt > 0 && ri > 0) {
        gf_y_error(ctx, gf_y_get(ctx, m, "prompt_tokens", 0), "give 'prompt' or 'prompt_tokens', not both");
        return -1;
    }
    if (rt == 0 && ri == 0) {
        gf_y_error(ctx, m, "missing required key 'prompt' (or 'prompt_tokens')");
        return -1;
    }
    if (rt > 0 && !p->text[0]) {
        gf_y_error(ctx, gf_y_get(ctx, m, "prompt", 0), "'prompt' is empty");
        return -1;
    }
    return 0;
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
