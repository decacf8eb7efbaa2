/* Sampler profiles: names, the field table, defaults, the versioned
 * extension and every argument rule (include/genfence/sampler.h and
 * sampler_fields.h, docs/sampler.md "Profiles"). The lowest of the three
 * sampler files: sampler_chain.c runs the profile's chain, sampler.c draws
 * and validates through gf_sampler_validate here. */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "genfence/sampler.h"
#include "genfence/sampler_fields.h"
#include "sampler_internal.h"

static const char *const k_profiles[GF_PROFILE_COUNT] = {"seed", "hf", "llamacpp", "vllm"};
static const char *const k_stages[] = {
#define STAGE_NAME_(ID, v, name) [v] = name,
    GF_SAMPLER_STAGE_LIST(STAGE_NAME_)
#undef STAGE_NAME_
};
#define N_STAGES ((int)(sizeof k_stages / sizeof k_stages[0]))

const gf_sampler_field gf_sampler_fields[GF_SF_COUNT] = {
#define FIELD_(ID, nm, ty, wh, mem, aux_, dv, rlo, rhi, stg, rc, fl, flg, hlp, c_any, c_seed, c_hf, c_lc, c_vl) \
    [GF_SFI_##ID] = {.name = nm,                                                                                \
                     .type = ty,                                                                                \
                     .in_ext = GF_SF_IN_EXT_##wh,                                                               \
                     .off = offsetof(GF_SF_STRUCT_##wh, mem),                                                   \
                     .aux = offsetof(GF_SF_STRUCT_##wh, aux_),                                                  \
                     .def = dv,                                                                                 \
                     .lo = rlo,                                                                                 \
                     .hi = rhi,                                                                                 \
                     .stage = stg,                                                                              \
                     .rec = rc,                                                                                 \
                     .flags = fl,                                                                               \
                     .flag = flg,                                                                               \
                     .help = hlp,                                                                               \
                     .any = c_any,                                                                              \
                     .by_profile = {c_seed, c_hf, c_lc, c_vl}},
    GF_SAMPLER_FIELD_LIST(FIELD_)
#undef FIELD_
};

const char *gf_sampler_profile_name(int profile)
{
    return profile >= 0 && profile < GF_PROFILE_COUNT ? k_profiles[profile] : NULL;
}

int gf_sampler_profile_from_name(const char *name)
{
    for (int i = 0; name && i < GF_PROFILE_COUNT; i++)
        if (!strcmp(name, k_profiles[i]))
            return i;
    return -1;
}

const char *gf_sampler_stage_name(int stage) { return stage > 0 && stage < N_STAGES ? k_stages[stage] : NULL; }

int gf_sampler_stage_from_name(const char *name)
{
    for (int i = 1; name && i < N_STAGES; i++)
        if (k_stages[i] && !strcmp(name, k_stages[i]))
            return i;
    return -1;
}

static void join(char *buf, size_t cap, const char *const *names, int n, const char *last_sep)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0, k = 0; i < n; i++) {
        if (!names[i])
            continue;
        int w = snprintf(buf + used, cap - used, "%s%s", k == 0 ? "" : i == n - 1 ? last_sep : ", ", names[i]);
        if (w < 0 || (size_t)w >= cap - used)
            break;
        used += (size_t)w;
        k++;
    }
}

const char *gf_sampler_profile_list(const char *last_sep)
{
    static char comma[128], other[128];
    char *buf = !strcmp(last_sep, ", ") ? comma : other;
    join(buf, sizeof comma, k_profiles, GF_PROFILE_COUNT, last_sep);
    return buf;
}

const char *gf_sampler_stage_list(void)
{
    static char buf[256];
    join(buf, sizeof buf, k_stages, N_STAGES, ", ");
    return buf;
}

/* ---- a field's storage ---- */

void *gf_sf_at(const gf_sampler_field *f, gf_sampler_params *p, gf_sampler_ext *e, size_t off)
{
    return (char *)(f->in_ext ? (void *)e : (void *)p) + off;
}

const void *gf_sf_cat(const gf_sampler_field *f, const gf_sampler_params *p, const gf_sampler_ext *e, size_t off)
{
    return (const char *)(f->in_ext ? (const void *)e : (const void *)p) + off;
}

#define I32(f, p, e, o) (*(const int32_t *)gf_sf_cat(f, p, e, o))
#define F64(f, p, e, o) (*(const double *)gf_sf_cat(f, p, e, o))

int32_t gf_sf_count(const gf_sampler_field *f, const gf_sampler_params *p, const gf_sampler_ext *e)
{
    switch (f->type) {
    case GF_SF_CHAIN:
    case GF_SF_BIAS:
    case GF_SF_IDS:
    case GF_SF_SEQS:
    case GF_SF_SEQ_BIAS: return I32(f, p, e, f->aux);
    default: return 0;
    }
}

int gf_sf_is_default(const gf_sampler_field *f, const gf_sampler_params *p, const gf_sampler_ext *e)
{
    switch (f->type) {
    case GF_SF_REAL: return F64(f, p, e, f->off) == f->def;
    case GF_SF_REAL_OPT:
    case GF_SF_INT_OPT: return !I32(f, p, e, f->aux);
    case GF_SF_INT:
    case GF_SF_PROFILE:
    case GF_SF_PROMPT_LEN: return I32(f, p, e, f->off) == (int32_t)f->def;
    case GF_SF_SEED: return *(const uint64_t *)gf_sf_cat(f, p, e, f->off) == 0;
    case GF_SF_CHAIN:
    case GF_SF_BIAS:
    case GF_SF_IDS:
    case GF_SF_SEQS:
    case GF_SF_SEQ_BIAS: return gf_sf_count(f, p, e) == 0;
    }
    return 1;
}

void gf_sf_reset(const gf_sampler_field *f, gf_sampler_params *p, gf_sampler_ext *e)
{
    switch (f->type) {
    case GF_SF_REAL: *(double *)gf_sf_at(f, p, e, f->off) = f->def; break;
    case GF_SF_REAL_OPT:
        *(double *)gf_sf_at(f, p, e, f->off) = f->def;
        *(int32_t *)gf_sf_at(f, p, e, f->aux) = 0;
        break;
    case GF_SF_INT_OPT:
        *(int32_t *)gf_sf_at(f, p, e, f->off) = (int32_t)f->def;
        *(int32_t *)gf_sf_at(f, p, e, f->aux) = 0;
        break;
    case GF_SF_INT:
    case GF_SF_PROFILE:
    case GF_SF_PROMPT_LEN: *(int32_t *)gf_sf_at(f, p, e, f->off) = (int32_t)f->def; break;
    case GF_SF_SEED: *(uint64_t *)gf_sf_at(f, p, e, f->off) = 0; break;
    case GF_SF_CHAIN:
    case GF_SF_BIAS:
    case GF_SF_IDS:
    case GF_SF_SEQS:
    case GF_SF_SEQ_BIAS: *(int32_t *)gf_sf_at(f, p, e, f->aux) = 0; break;
    }
}

/* The defaults, from the field table once (gf_sampler_ext_load runs at every
 * sampling step of a profile's chain) */
static gf_sampler_ext g_ext_defaults;
static pthread_once_t g_ext_defaults_once = PTHREAD_ONCE_INIT;

static void ext_defaults_init(void)
{
    gf_sampler_ext *e = &g_ext_defaults;
    memset(e, 0, sizeof *e);
    e->struct_size = (uint32_t)sizeof *e;
    for (int i = 0; i < GF_SF_COUNT; i++)
        if (gf_sampler_fields[i].in_ext)
            gf_sf_reset(&gf_sampler_fields[i], NULL, e);
}

gf_sampler_ext gf_sampler_ext_defaults(void)
{
    pthread_once(&g_ext_defaults_once, ext_defaults_init);
    return g_ext_defaults;
}

gf_status gf_sampler_ext_load(const gf_sampler_params *p, gf_sampler_ext *out)
{
    *out = gf_sampler_ext_defaults();
    if (!p->ext)
        return GF_OK;
    uint32_t n = p->ext->struct_size;
    if (n < offsetof(gf_sampler_ext, profile) + sizeof(int32_t))
        return gf_error_set(GF_E_INVALID_ARG, "sampler extension: struct_size %u is too small", n);
    memcpy(out, p->ext, n < sizeof *out ? n : sizeof *out);
    out->struct_size = (uint32_t)sizeof *out;
    return GF_OK;
}

int gf_sampler_params_profile(const gf_sampler_params *p)
{
    if (!p || !p->ext || p->ext->struct_size < offsetof(gf_sampler_ext, profile) + sizeof(int32_t))
        return GF_PROFILE_SEED;
    return p->ext->profile;
}

/* Seed, every filter at its default; min_new_tokens bans nothing without an eos id. */
int gf_sampler_ext_is_plain(const gf_sampler_ext *e)
{
    if (e->profile != GF_PROFILE_SEED || (e->min_new_tokens != 0 && e->eos_id >= 0))
        return 0;
    for (int i = 0; i < GF_SF_COUNT; i++)
        if ((gf_sampler_fields[i].flags & GF_SF_FILTER) && !gf_sf_is_default(&gf_sampler_fields[i], NULL, e))
            return 0;
    return 1;
}

int gf_sampler_params_plain(const gf_sampler_params *p)
{
    if (!p || !p->ext)
        return 1;
    gf_sampler_ext e;
    if (gf_sampler_ext_load(p, &e) != GF_OK)
        return 0;
    return gf_sampler_ext_is_plain(&e);
}

/* ---- validation: the table's rules ---- */

#define BAD(...) return gf_error_set(GF_E_INVALID_ARG, __VA_ARGS__)

/* One rule over value v under profile pr: GF_OK or its message. */
static gf_status check(const gf_sf_check *c, double v, int pr)
{
    if (!c->msg || (c->except & GF_PROFILE_BIT(pr)))
        return GF_OK;
    int ok = isnan(v) ? (c->flags & GF_SFC_NAN_OK) != 0
                      : ((c->flags & GF_SFC_LO_OPEN) ? v > c->lo : v >= c->lo) &&
                            ((c->flags & GF_SFC_HI_OPEN) ? v < c->hi : v <= c->hi);
    if (ok)
        return GF_OK;
    char val[64] = "";
    switch (c->flags & GF_SFC_V_MASK) {
    case GF_SFC_V_NANWORD:
        if (isnan(v)) {
            snprintf(val, sizeof val, "NaN");
            break;
        }
        /* fall through */
    case GF_SFC_V_G17: snprintf(val, sizeof val, "%.17g", v); break;
    case GF_SFC_V_G: snprintf(val, sizeof val, "%g", v); break;
    case GF_SFC_V_D: snprintf(val, sizeof val, "%d", (int)v); break;
    case GF_SFC_V_PROFILE: snprintf(val, sizeof val, "%s", gf_sampler_profile_name(pr)); break;
    default: break;
    }
    char msg[512];
    const char *pct = strstr(c->msg, "%s");
    if (pct)
        snprintf(msg, sizeof msg, "%.*s%s%s", (int)(pct - c->msg), c->msg, val, pct + 2);
    else
        snprintf(msg, sizeof msg, "%s", c->msg);
    if (c->flags & GF_SFC_PREFIX)
        BAD("%s: %s", gf_sampler_profile_name(pr), msg);
    BAD("%s", msg);
}

/* The value a field's rules read: the number, or a list's count. */
static double rule_value(const gf_sampler_field *f, const gf_sampler_params *p, const gf_sampler_ext *e)
{
    switch (f->type) {
    case GF_SF_REAL:
    case GF_SF_REAL_OPT: return F64(f, p, e, f->off);
    case GF_SF_INT:
    case GF_SF_INT_OPT:
    case GF_SF_PROFILE:
    case GF_SF_PROMPT_LEN: return (double)I32(f, p, e, f->off);
    case GF_SF_CHAIN:
    case GF_SF_BIAS:
    case GF_SF_IDS:
    case GF_SF_SEQS:
    case GF_SF_SEQ_BIAS: return (double)gf_sf_count(f, p, e);
    case GF_SF_SEED: return 0.0;
    }
    return 0.0;
}

/* rules apply to an optional only when it is on */
static gf_status field_rule(const gf_sampler_field *f, const gf_sf_check *c, const gf_sampler_params *p,
                            const gf_sampler_ext *e, int pr)
{
    if ((f->type == GF_SF_REAL_OPT || f->type == GF_SF_INT_OPT) && !I32(f, p, e, f->aux))
        return GF_OK;
    return check(c, rule_value(f, p, e), pr);
}

/* What the type itself demands of the lists and the prompt length. */
static gf_status field_shape(const gf_sampler_field *f, const gf_sampler_ext *e, const char *pn)
{
    const int32_t n = gf_sf_count(f, NULL, e);
    switch (f->type) {
    case GF_SF_BIAS: {
        const gf_logit_bias *b = *(const gf_logit_bias *const *)gf_sf_cat(f, NULL, e, f->off);
        if (n < 0 || (n > 0 && !b))
            BAD("%s: %s: %d entries, pointer %s", pn, f->name, (int)n, b ? "set" : "NULL");
        for (int32_t i = 0; i < n; i++) {
            if (b[i].token < 0)
                BAD("%s: %s token %d is negative", pn, f->name, (int)b[i].token);
            if (isnan(b[i].bias) || (isinf(b[i].bias) && b[i].bias > 0))
                BAD("%s: %s for token %d is %s (a finite number or -inf)", pn, f->name, (int)b[i].token,
                    isnan(b[i].bias) ? "NaN" : "+inf");
            for (int32_t j = 0; j < i; j++)
                if (b[j].token == b[i].token)
                    BAD("%s: %s names token %d twice", pn, f->name, (int)b[i].token);
        }
        return GF_OK;
    }
    case GF_SF_IDS: {
        const int32_t *ids = *(const int32_t *const *)gf_sf_cat(f, NULL, e, f->off);
        if (n < 0 || (n > 0 && !ids))
            BAD("%s: %s: %d ids, pointer %s", pn, f->name, (int)n, ids ? "set" : "NULL");
        for (int32_t i = 0; i < n; i++)
            if (ids[i] < 0)
                BAD("%s: %s[%d] = %d is negative", pn, f->name, (int)i, (int)ids[i]);
        return GF_OK;
    }
    case GF_SF_SEQS:
    case GF_SF_SEQ_BIAS: {
        const gf_token_seq *q = *(const gf_token_seq *const *)gf_sf_cat(f, NULL, e, f->off);
        if (n < 0 || (n > 0 && !q))
            BAD("%s: %s: %d entries, pointer %s", pn, f->name, (int)n, q ? "set" : "NULL");
        for (int32_t i = 0; i < n; i++) {
            if (q[i].n < 1 || !q[i].ids)
                BAD("%s: %s[%d] is empty (each entry is a non-empty list of token ids)", pn, f->name, (int)i);
            for (int32_t j = 0; j < q[i].n; j++)
                if (q[i].ids[j] < 0)
                    BAD("%s: %s[%d][%d] = %d is negative", pn, f->name, (int)i, (int)j, (int)q[i].ids[j]);
            if (f->type == GF_SF_SEQ_BIAS && (isnan(q[i].bias) || (isinf(q[i].bias) && q[i].bias > 0)))
                BAD("%s: %s[%d]'s bias is %s (a finite number or -inf)", pn, f->name, (int)i,
                    isnan(q[i].bias) ? "NaN" : "+inf");
            for (int32_t k = 0; f->type == GF_SF_SEQ_BIAS && k < i; k++)
                if (q[k].n == q[i].n && !memcmp(q[k].ids, q[i].ids, (size_t)q[i].n * sizeof *q[i].ids))
                    BAD("%s: %s names the sequence of entry %d twice (entry %d)", pn, f->name, (int)k, (int)i);
        }
        return GF_OK;
    }
    case GF_SF_PROMPT_LEN: {
        const int32_t v = *(const int32_t *)gf_sf_cat(f, NULL, e, f->off);
        if (v < 0 || v > e->n_history)
            BAD("%s: %s %d must lie in [0, %d] (the history's length)", pn, f->name, (int)v, (int)e->n_history);
        return GF_OK;
    }
    default: return GF_OK;
    }
}

static int chain_has(const gf_sampler_ext *e, int stage)
{
    for (int32_t i = 0; i < e->n_chain; i++)
        if (e->chain[i] == stage)
            return 1;
    return 0;
}

/* llamacpp's chain: known stages, each once, temperature in it, and the
 * stage of every field that is set (the table's `stage`). */
static gf_status validate_llamacpp_chain(const gf_sampler_params *p, const gf_sampler_ext *e)
{
    if (e->n_chain == 0)
        return GF_OK;
    if (e->n_chain < 0 || e->n_chain > GF_SAMPLER_MAX_CHAIN)
        BAD("llamacpp: chain has %d stages (1..%d)", (int)e->n_chain, GF_SAMPLER_MAX_CHAIN);
    for (int32_t i = 0; i < e->n_chain; i++) {
        if (!gf_sampler_stage_name(e->chain[i]))
            BAD("llamacpp: chain[%d] = %d is not a stage", (int)i, (int)e->chain[i]);
        for (int32_t j = 0; j < i; j++)
            if (e->chain[j] == e->chain[i])
                BAD("llamacpp: chain names '%s' twice", gf_sampler_stage_name(e->chain[i]));
    }
    if (!chain_has(e, GF_STAGE_TEMPERATURE))
        BAD("llamacpp: chain lacks 'temperature' (llama.cpp's dist would sample at temperature 1)");
    for (int i = 0; i < GF_SF_COUNT; i++) {
        const gf_sampler_field *f = &gf_sampler_fields[i];
        if (f->stage && !gf_sf_is_default(f, p, e) && !chain_has(e, f->stage))
            BAD("llamacpp: '%s' is set but not in the chain", gf_sampler_stage_name(f->stage));
    }
    return GF_OK;
}

/* llamacpp's mirostat replaces the chain (common/sampling: logit bias,
 * temperature, mirostat): no explicit chain, and no filter of a stage but
 * temperature set beside it (llama.cpp would not apply it). */
static gf_status validate_mirostat(const gf_sampler_params *p, const gf_sampler_ext *e)
{
    if (e->n_chain > 0)
        BAD("llamacpp: mirostat %d replaces the chain (logit bias, temperature, mirostat): give no chain",
            (int)e->mirostat);
    for (int i = 0; i < GF_SF_COUNT; i++) {
        const gf_sampler_field *f = &gf_sampler_fields[i];
        if (f->stage && f->stage != GF_STAGE_TEMPERATURE && !gf_sf_is_default(f, p, e))
            BAD("llamacpp: mirostat %d replaces the chain (logit bias, temperature, mirostat): %s is not applied",
                (int)e->mirostat, f->name);
    }
    return GF_OK;
}

/* The rules in this order: under seed the params' own fields first (all a
 * params without an extension has); then, with an extension, the lists'
 * shapes and every profile's rules on numbers, every profile's rules on
 * lists (an explicit chain is llamacpp's), the profile's own rules, and
 * llamacpp's chain: the order of the code before the table, wherever two
 * rules a case or flag can break meet. */
gf_status gf_sampler_validate(const gf_sampler_params *p)
{
    if (p == NULL)
        return gf_error_set(GF_E_INVALID_ARG, "sampler params: NULL");
    gf_sampler_ext ext;
    gf_status st = gf_sampler_ext_load(p, &ext);
    if (st != GF_OK)
        return st;
    const gf_sampler_ext *e = p->ext ? &ext : NULL;
    const int pr = e ? e->profile : GF_PROFILE_SEED;
    for (int i = 0; pr == GF_PROFILE_SEED && i < GF_SF_COUNT && st == GF_OK; i++)
        if (!gf_sampler_fields[i].in_ext)
            st = field_rule(&gf_sampler_fields[i], &gf_sampler_fields[i].by_profile[GF_PROFILE_SEED], p, e, pr);
    if (st != GF_OK || !e)
        return st;
    const char *pn = gf_sampler_profile_name(pr);
    if (!pn)
        BAD("sampler profile %d is not one of %s", (int)pr, gf_sampler_profile_list(", "));
    for (int pass = 0; pass < 2; pass++) /* the numbers' every-profile rules, then the lists' (chain) */
        for (int i = 0; i < GF_SF_COUNT && st == GF_OK; i++) {
            const gf_sampler_field *f = &gf_sampler_fields[i];
            const int list = f->type == GF_SF_CHAIN || f->type == GF_SF_BIAS || f->type == GF_SF_IDS ||
                             f->type == GF_SF_SEQS || f->type == GF_SF_SEQ_BIAS;
            if (pass == 0 && f->in_ext)
                st = field_shape(f, e, pn);
            if (st == GF_OK && pass == list)
                st = field_rule(f, &f->any, p, e, pr);
        }
    for (int i = 0; i < GF_SF_COUNT && st == GF_OK; i++) {
        const gf_sampler_field *f = &gf_sampler_fields[i];
        if (pr != GF_PROFILE_SEED || f->in_ext)
            st = field_rule(f, &f->by_profile[pr], p, e, pr);
    }
    for (int32_t i = 0; st == GF_OK && pr == GF_PROFILE_HF && i < e->n_sequence_bias; i++)
        for (int32_t b = 0; st == GF_OK && e->sequence_bias[i].n == 1 && b < e->n_bias; b++)
            if (e->bias[b].token == e->sequence_bias[i].ids[0])
                st = gf_error_set(GF_E_INVALID_ARG,
                                  "hf: token %d is in logit_bias and, alone, in sequence_bias (HF has one "
                                  "sequence_bias: give it once)",
                                  (int)e->bias[b].token);
    if (st == GF_OK && pr == GF_PROFILE_LLAMACPP && e->xtc_probability > 0.0 && e->xtc_probability < 1.0)
        st = gf_error_set(GF_E_INVALID_ARG,
                          "llamacpp: xtc_probability %.17g: only <= 0 (off) and >= 1 (every step) are modelled "
                          "(llama.cpp's coin in between is its own mt19937 stream)",
                          e->xtc_probability);
    if (st == GF_OK && pr == GF_PROFILE_LLAMACPP && e->mirostat)
        st = validate_mirostat(p, e);
    if (st == GF_OK && pr == GF_PROFILE_LLAMACPP)
        st = validate_llamacpp_chain(p, e);
    return st;
}

/* ---- the semantics table (genfence list --profiles, docs/sampler.md) ---- */

#define ROW(w, a, b, c, d) \
    {                      \
        w, { a, b, c, d }  \
    }
static const gf_profile_row k_rows[] = {
    ROW("order", "bias, eos ban, penalties, temperature, top_k, top_p, min_p, typical_p",
        "bias (sequence_bias), penalties, n-gram ban, bad words, eos bans, forced BOS / EOS, temperature, top_k, "
        "top_p, min_p, typical_p, epsilon, eta",
        "bias, penalties, dry, top_n_sigma, top_k, typical_p, top_p, min_p, xtc, temperature (chain: reorders)",
        "mask, allowed ids, bad words, bias, eos ban, penalties, [greedy], temperature, min_p, top_k, top_p"),
    ROW("temperature 0", "greedy (argmax after penalties)", "error (do_sample=False is greedy)",
        "<= 0: keep the first maximum at its place in the chain", "< 1e-5: greedy (argmax after penalties)"),
    ROW("temperature NaN / inf / < 0", "error / error / error", "error / uniform / error", "error / uniform / greedy",
        "error / error / error"),
    ROW("top_k off", "unset", "0 (unset)", "<= 0", "-1 or 0 (vLLM >= 0.8; older refused 0)"),
    ROW("top_k < 0", "error (k < 1)", "error", "off", "< -1: error"),
    ROW("top_k ties", "kept", "kept", "exactly k (lowest index first)", "kept"),
    ROW("top_p 0", "error", "keeps min_tokens_to_keep", "keeps one (min_keep)", "error"),
    ROW("top_p >= 1", "1: drop once prefix >= 1 (underflow); > 1 error", "off", "off", "1: off; > 1 error"),
    ROW("top_p NaN", "error", "off", "keeps all", "error"),
    ROW("top_p rule", "drop once exclusive prefix >= p", "drop ascending cumsum <= 1 - p",
        "keep shortest prefix with inclusive sum >= p", "drop ascending cumsum <= 1 - p, keep top 1"),
    ROW("min_p", "[0, 1]; keep p >= min_p * p_max", "[0, 1]; same",
        "<= 0 off; NaN keeps all; z >= z_max + log min_p, at least max(1, min_keep) (> 1: the top)",
        "[0, 1]; same, after temperature"),
    ROW("typical_p", "(0, 1]; HF's rule", "<= 0 error; >= 1, NaN off; cumsum < mass",
        ">= 1 off; NaN keeps all; first cumsum > p", "error (none)"),
    ROW("repetition_penalty", "> 0, whole history, z < 0 ? z*r : z/r", "> 0, whole history, z < 0 ? z*r : z/r",
        "> 0, last penalty_last_n, z <= 0 ? z*r : z/r", "> 0, prompt + output, z > 0 ? z/r : z*r"),
    ROW("frequency / presence", "generated ids; z -= f*count + p*(count>0)", "error (none)",
        "last penalty_last_n ids; same formula", "generated ids; [-2, 2]; same formula"),
    ROW("min_tokens_to_keep", ">= 1 (top_k, top_p, min_p, typical)", ">= 1 (top_k, top_p, min_p, typical)",
        "min_keep >= 0 (top_p, min_p, typical)", "1 only"),
    ROW("min_new_tokens", "bans eos_id", "bans eos_id", "error (none)", "bans eos_id and stop_token_ids"),
    ROW("logit_bias", "added", "added (sequence_bias)", "added",
        "added (SamplingParams; the OpenAI server clamps to [-100, 100])"),
    ROW("xtc (probability, threshold, min_keep)", "error (none)", "error (none)",
        "p <= 0 off, >= 1 every step, (0, 1) error; t > 0.5 off; drop p >= t but the last, if >= min_keep stay",
        "error (none)"),
    ROW("top_n_sigma", "error (none)", "error (none)",
        "<= 0 off; finite; drop z < z_max - n * sigma (population sigma of the finite z)", "error (none)"),
    ROW("dry (multiplier, base, allowed_length, penalty_last_n, sequence_breakers)", "error (none)", "error (none)",
        "multiplier 0 / base < 1 / last_n 0 off; z -= m * b^(len - allowed) for a token extending a repeat; "
        "single-token breakers",
        "error (none)"),
    ROW("mirostat (1, 2; tau, eta, mu)", "error (none)", "error (none)",
        "replaces the chain: bias, temperature, mirostat; v2 keeps -log2 p <= mu, v1 top-k from s_hat; mu an input "
        "(unset: 2 tau), then mu -= eta (surprise - tau)",
        "error (none)"),
    ROW("no_repeat_ngram_size", "error (none)", "bans what would repeat an n-gram of the history (0 off)",
        "error (none; DRY)", "error (none)"),
    ROW("epsilon_cutoff / eta_cutoff", "error (none)",
        "(0, 1) on, else off (generate()); drop p < eps, or p < min(eta, sqrt(eta) e^-H); the top min_tokens_to_keep "
        "stay; after typical_p",
        "error (none)", "error (none)"),
    ROW("bad_words_ids (token sequences)", "error (none)",
        "ban an entry's last id when the whole history ends in its other ids (skipped when longer than the history; "
        "[eos] dropped)",
        "error (none)", "the same over the generated ids (skipped when longer than them + 1); before bias"),
    ROW("sequence_bias", "error (none)",
        "add an entry's bias to its last id when the history ends in its other ids (one id: always); biases add",
        "error (none)", "error (none; logit_bias)"),
    ROW("min_length", "error (none)", "ban eos_id while prompt + generated < min_length; >= 0", "error (none)",
        "error (none; min_new_tokens)"),
    ROW("forced_bos_token_id / forced_eos_token_id", "error (none)",
        "after 1 id / at max_length - 1 ids (max_length default 20): every other id -inf, the forced id 0",
        "error (none)", "error (none)"),
    ROW("exponential_decay_start / exponential_decay_factor", "error (none)",
        "exponential_decay_length_penalty (start, factor): after start generated ids eos_id's z += |z| (factor^k - 1), "
        "k = generated - start; after the repetition penalty, before temperature; needs eos_id",
        "error (none)", "error (none)"),
    ROW("allowed_token_ids", "error (none)", "error (prefix_allowed_tokens_fn, a callback)", "error (none)",
        "every other id -inf, first of all; an id outside the vocabulary: error"),
    ROW("structured_output_mask (given)", "error (none)", "error (none)", "error (none)",
        "a grammar's bitmask as the ids it allows: every other id -inf before the sampler; nothing allowed: the all "
        "-inf row"),
    ROW("all -inf / NaN / +inf row", "error", "error", "error", "valid id: first NaN, else first +inf, else 0"),
};

const gf_profile_row *gf_sampler_profile_rows(size_t *n)
{
    *n = sizeof k_rows / sizeof k_rows[0];
    return k_rows;
}
