/* genfence generate's sampler-profile flags (gen_sampler.h). */
#include "gen_sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char *gf_gen_sampler_flag(int code)
{
    if (code == GS_STOP)
        return "--stop";
    if (code >= GS_TEMPERATURE && code < GS_STOP && gf_sampler_fields[code - GS_TEMPERATURE].flag)
        return gf_sampler_fields[code - GS_TEMPERATURE].flag;
    return "?";
}

size_t gf_gen_sampler_longopts(struct option *out, size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < GF_SF_COUNT && n < cap; i++)
        if (gf_sampler_fields[i].flag)
            out[n++] = (struct option){gf_sampler_fields[i].flag + 2, required_argument, 0, GS_CODE(i)};
    if (n < cap)
        out[n++] = (struct option){"stop", required_argument, 0, GS_STOP};
    return n;
}

void gf_gen_sampler_help(FILE *f)
{
    for (int i = 0; i < GF_SF_COUNT; i++)
        if (gf_sampler_fields[i].flag && gf_sampler_fields[i].help)
            fputs(gf_sampler_fields[i].help, f);
}

void gf_gen_sampler_init(gf_gen_sampler *gs)
{
    memset(gs, 0, sizeof *gs);
    gs->e = gf_sampler_ext_defaults();
}

void gf_gen_sampler_clear(gf_gen_sampler *gs)
{
    if (!gs)
        return;
    for (int i = 0; i < GF_SF_COUNT; i++)
        free(gs->owned[i]);
    free(gs->stops);
    gf_gen_sampler_init(gs);
}

void gf_gen_sampler_mark(gf_gen_sampler *gs, int code)
{
    if (code >= GS_TEMPERATURE && code < GS_END)
        gs->set[code - GS_TEMPERATURE] = 1;
}

#define BADV(...)                  \
    do {                           \
        gf_cli_error(__VA_ARGS__); \
        return -1;                 \
    } while (0)

/* "top_k,temperature": the stage names of the case key 'chain'. */
static int parse_chain(gf_gen_sampler *gs, const char *arg)
{
    char *copy = strdup(arg);
    if (!copy)
        BADV("generate: out of memory");
    int n = 0, rc = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int st = gf_sampler_stage_from_name(tok);
        if (st < 0) {
            gf_cli_error("generate: --chain: unknown chain stage '%s'; known: %s", tok, gf_sampler_stage_list());
            rc = -1;
            break;
        }
        if (n == GF_SAMPLER_MAX_CHAIN) {
            n++;
            break;
        }
        gs->e.chain[n++] = st;
    }
    free(copy);
    if (rc == 0 && (n == 0 || n > GF_SAMPLER_MAX_CHAIN)) {
        gf_cli_error("generate: --chain '%s' has %s stages (1..%d of %s)", arg, n ? "too many" : "no",
                     GF_SAMPLER_MAX_CHAIN, gf_sampler_stage_list());
        rc = -1;
    }
    if (rc == 0)
        gs->e.n_chain = n;
    return rc;
}

/* "13:-inf,198:+5": appended to the bias list (repeatable). */
static int parse_bias(gf_gen_sampler *gs, const char *arg)
{
    size_t items = 1;
    for (const char *p = arg; *p; p++)
        items += *p == ',';
    gf_logit_bias *nb = realloc(gs->owned[GF_SFI_LOGIT_BIAS], ((size_t)gs->e.n_bias + items) * sizeof *nb);
    if (!nb)
        BADV("generate: out of memory");
    gs->owned[GF_SFI_LOGIT_BIAS] = nb;
    char *copy = strdup(arg);
    if (!copy)
        BADV("generate: out of memory");
    int rc = 0;
    char *item = copy;
    for (size_t i = 0; i < items && rc == 0; i++) {
        char *comma = strchr(item, ',');
        if (comma)
            *comma = '\0';
        char *colon = strchr(item, ':');
        long tok;
        double v;
        if (colon)
            *colon = '\0';
        if (!colon || !gf_parse_int(item, 0, 2147483647L, &tok) || !gf_parse_double(colon + 1, &v)) {
            if (colon)
                *colon = ':';
            gf_cli_error("generate: --logit-bias: '%s' is not ID:BIAS (a token id >= 0, a number or -inf; "
                         "e.g. 13:-inf,198:+5)",
                         item);
            rc = -1;
        } else if (isnan(v) || v == INFINITY) {
            gf_cli_error("generate: --logit-bias for token %ld is %s; a finite number or -inf", tok,
                         isnan(v) ? "NaN" : "+inf");
            rc = -1;
        } else {
            nb[gs->e.n_bias].token = (int32_t)tok;
            nb[gs->e.n_bias].bias = (float)v;
            gs->e.n_bias++;
        }
        item = comma ? comma + 1 : item + strlen(item);
    }
    free(copy);
    gs->e.bias = nb;
    return rc;
}

/* "A,B,...": appended to the field's ids (repeatable). */
static int parse_ids(gf_gen_sampler *gs, const gf_sampler_field *f, const char *arg)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (gf_parse_ids(arg, &ids, &n) != GF_OK || n == 0) {
        gf_cli_error("generate: %s: %s", f->flag, n == 0 && ids ? "no ids" : gf_error_msg());
        free(ids);
        return -1;
    }
    int32_t *count = gf_sf_at(f, NULL, &gs->e, f->aux);
    int32_t *all = realloc(gs->owned[f - gf_sampler_fields], ((size_t)*count + n) * sizeof *all);
    if (!all) {
        free(ids);
        BADV("generate: out of memory");
    }
    memcpy(all + *count, ids, n * sizeof *ids);
    free(ids);
    gs->owned[f - gf_sampler_fields] = all;
    *count += (int32_t)n;
    *(const int32_t **)gf_sf_at(f, NULL, &gs->e, f->off) = all;
    return 0;
}

int gf_gen_sampler_option(gf_gen_sampler *gs, int code, const char *arg)
{
    const char *flag = gf_gen_sampler_flag(code);
    gf_sampler_ext *e = &gs->e;
    long v;
    double d;
    gf_gen_sampler_mark(gs, code);
    if (code == GS_STOP) { /* stop strings are generate's, not the sampler's */
        if (!*arg)
            BADV("generate: --stop: a stop string must not be empty");
        const char **ns = realloc(gs->stops, (gs->n_stops + 1) * sizeof *ns);
        if (!ns)
            BADV("generate: out of memory");
        gs->stops = ns;
        ns[gs->n_stops++] = arg;
        return 0;
    }
    if (code < GS_FIRST_EXT || code >= GS_STOP || !gf_sampler_fields[code - GS_TEMPERATURE].flag)
        BADV("generate: internal: %d is not a sampler flag", code);
    gs->any_ext = 1;
    const gf_sampler_field *f = &gf_sampler_fields[code - GS_TEMPERATURE];
    void *val = gf_sf_at(f, NULL, e, f->off);
    switch (f->type) {
    case GF_SF_PROFILE: {
        int pr = gf_sampler_profile_from_name(arg);
        if (pr < 0)
            BADV("generate: %s: unknown sampler profile '%s'; known: %s", flag, arg, gf_sampler_profile_list(", "));
        *(int32_t *)val = pr;
        return 0;
    }
    case GF_SF_CHAIN: return parse_chain(gs, arg);
    case GF_SF_REAL_OPT:
        if (!strcmp(arg, "none")) {
            *(int32_t *)gf_sf_at(f, NULL, e, f->aux) = 0;
            return 0;
        }
        if (!gf_parse_double(arg, &d))
            break;
        *(int32_t *)gf_sf_at(f, NULL, e, f->aux) = 1;
        *(double *)val = d;
        return 0;
    case GF_SF_REAL:
        if (!gf_parse_double(arg, &d))
            break;
        *(double *)val = d;
        return 0;
    case GF_SF_INT:
        if (!gf_parse_int(arg, (long)f->lo, (long)f->hi, &v))
            break;
        *(int32_t *)val = (int32_t)v;
        return 0;
    case GF_SF_BIAS: return parse_bias(gs, arg);
    case GF_SF_IDS: return parse_ids(gs, f, arg);
    default: BADV("generate: internal: %s has no reader", flag);
    }
    BADV("generate: bad value '%s' for %s", arg, flag);
}

/* p and e with flag `code` back at its default: the params' from d
 * (generate's defaults), the extension's from the table. */
static void revert(int code, gf_sampler_params *p, gf_sampler_ext *e, const gf_sampler_params *d)
{
    const gf_sampler_field *f = &gf_sampler_fields[code - GS_TEMPERATURE];
    if (f->in_ext) {
        gf_sf_reset(f, p, e);
        return;
    }
    memcpy(gf_sf_at(f, p, e, f->off), gf_sf_cat(f, d, NULL, f->off),
           f->type == GF_SF_REAL || f->type == GF_SF_REAL_OPT ? sizeof(double)
           : f->type == GF_SF_SEED                            ? sizeof(uint64_t)
                                                              : sizeof(int32_t));
    if (f->type == GF_SF_REAL_OPT || f->type == GF_SF_INT_OPT)
        *(int32_t *)gf_sf_at(f, p, e, f->aux) = *(const int32_t *)gf_sf_cat(f, d, NULL, f->aux);
}

int gf_gen_sampler_check(gf_gen_sampler *gs, gf_sampler_params *p, const gf_sampler_params *defaults)
{
    if (gs->any_ext)
        p->ext = &gs->e;
    if (gf_sampler_validate(p) == GF_OK)
        return 0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", gf_error_msg());
    /* the flags given whose default changes the outcome (passes, or another message) */
    char flags[512] = "";
    size_t used = 0;
    for (int code = GS_TEMPERATURE; code < GS_END; code++) {
        if (code == GS_STOP || !gs->set[code - GS_TEMPERATURE])
            continue;
        gf_sampler_params q = *p;
        gf_sampler_ext f = gs->e;
        if (q.ext)
            q.ext = &f;
        revert(code, &q, &f, defaults);
        int differs = gf_sampler_validate(&q) == GF_OK || strcmp(gf_error_msg(), msg) != 0;
        if (differs && used + 32 < sizeof flags)
            used += (size_t)snprintf(flags + used, sizeof flags - used, "%s%s", used ? ", " : "",
                                     gf_gen_sampler_flag(code));
    }
    gf_cli_error("generate: invalid sampler (%s): %s", used ? flags : "the defaults", msg);
    return -1;
}

int gf_gen_sampler_check_model(const gf_gen_sampler *gs, int32_t V, int32_t eos_id)
{
    for (int32_t i = 0; i < gs->e.n_bias; i++)
        if (gs->e.bias[i].token >= V)
            BADV("generate: --logit-bias: token %d is outside the vocabulary [0, %d)", (int)gs->e.bias[i].token,
                 (int)V);
    for (int32_t i = 0; i < gs->e.n_stop_ids; i++)
        if (gs->e.stop_ids[i] >= V)
            BADV("generate: --stop-token-ids: token %d is outside the vocabulary [0, %d)", (int)gs->e.stop_ids[i],
                 (int)V);
    if (gs->e.min_new_tokens > 0 && eos_id < 0 && gs->e.n_stop_ids == 0)
        BADV("generate: --min-new-tokens needs an eos id (the token it bans): the config has none or --no-eos "
             "removed it; give --eos-id or --stop-token-ids");
    return 0;
}
