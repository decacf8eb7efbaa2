/* genfence generate's sampler-profile flags (gen_sampler.h). */
#include "gen_sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *const k_flags[GS_END - GS_TEMPERATURE] = {"--temperature",
                                                             "--top-k",
                                                             "--top-p",
                                                             "--seed",
                                                             "--profile",
                                                             "--chain",
                                                             "--min-p",
                                                             "--typical-p",
                                                             "--repetition-penalty",
                                                             "--frequency-penalty",
                                                             "--presence-penalty",
                                                             "--penalty-last-n",
                                                             "--min-tokens-to-keep",
                                                             "--logit-bias",
                                                             "--min-new-tokens",
                                                             "--stop-token-ids",
                                                             "--stop"};

const char *gf_gen_sampler_flag(int code)
{
    return code >= GS_TEMPERATURE && code < GS_END ? k_flags[code - GS_TEMPERATURE] : "?";
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
    free(gs->bias);
    free(gs->stop_ids);
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
            gf_cli_error("generate: --chain: unknown chain stage '%s'; known: penalties, top_k, typical_p, top_p, "
                         "min_p, temperature",
                         tok);
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
        gf_cli_error("generate: --chain '%s' has %s stages (1..%d of penalties, top_k, typical_p, top_p, min_p, "
                     "temperature)",
                     arg, n ? "too many" : "no", GF_SAMPLER_MAX_CHAIN);
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
    gf_logit_bias *nb = realloc(gs->bias, ((size_t)gs->e.n_bias + items) * sizeof *nb);
    if (!nb)
        BADV("generate: out of memory");
    gs->bias = nb;
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
    gs->e.bias = gs->bias;
    return rc;
}

static int parse_stop_ids(gf_gen_sampler *gs, const char *arg)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (gf_parse_ids(arg, &ids, &n) != GF_OK || n == 0) {
        gf_cli_error("generate: --stop-token-ids: %s", n == 0 && ids ? "no ids" : gf_error_msg());
        free(ids);
        return -1;
    }
    int32_t *all = realloc(gs->stop_ids, ((size_t)gs->e.n_stop_ids + n) * sizeof *all);
    if (!all) {
        free(ids);
        BADV("generate: out of memory");
    }
    memcpy(all + gs->e.n_stop_ids, ids, n * sizeof *ids);
    free(ids);
    gs->stop_ids = all;
    gs->e.n_stop_ids += (int32_t)n;
    gs->e.stop_ids = all;
    return 0;
}

int gf_gen_sampler_option(gf_gen_sampler *gs, int code, const char *arg)
{
    const char *flag = gf_gen_sampler_flag(code);
    gf_sampler_ext *e = &gs->e;
    long v;
    double d;
    gf_gen_sampler_mark(gs, code);
    gs->any_ext |= code != GS_STOP; /* stop strings are generate's, not the sampler's */
    switch (code) {
    case GS_PROFILE: {
        int pr = gf_sampler_profile_from_name(arg);
        if (pr < 0)
            BADV("generate: --profile: unknown sampler profile '%s'; known: seed, hf, llamacpp, vllm", arg);
        e->profile = pr;
        return 0;
    }
    case GS_CHAIN: return parse_chain(gs, arg);
    case GS_MIN_P:
    case GS_TYPICAL_P: {
        int32_t *use = code == GS_MIN_P ? &e->use_min_p : &e->use_typical_p;
        double *val = code == GS_MIN_P ? &e->min_p : &e->typical_p;
        if (!strcmp(arg, "none")) {
            *use = 0;
            return 0;
        }
        if (!gf_parse_double(arg, &d))
            break;
        *use = 1;
        *val = d;
        return 0;
    }
    case GS_REPETITION:
    case GS_FREQUENCY:
    case GS_PRESENCE:
        if (!gf_parse_double(arg, &d))
            break;
        *(code == GS_REPETITION  ? &e->repetition_penalty
          : code == GS_FREQUENCY ? &e->frequency_penalty
                                 : &e->presence_penalty) = d;
        return 0;
    case GS_LAST_N:
        if (!gf_parse_int(arg, -1, 2147483647L, &v))
            break;
        e->penalty_last_n = (int32_t)v;
        return 0;
    case GS_MIN_KEEP:
        if (!gf_parse_int(arg, 0, 2147483647L, &v))
            break;
        e->min_tokens_to_keep = (int32_t)v;
        return 0;
    case GS_MIN_NEW:
        if (!gf_parse_int(arg, 0, 2147483647L, &v))
            break;
        e->min_new_tokens = (int32_t)v;
        return 0;
    case GS_BIAS: return parse_bias(gs, arg);
    case GS_STOP_IDS: return parse_stop_ids(gs, arg);
    case GS_STOP: {
        if (!*arg)
            BADV("generate: --stop: a stop string must not be empty");
        const char **ns = realloc(gs->stops, (gs->n_stops + 1) * sizeof *ns);
        if (!ns)
            BADV("generate: out of memory");
        gs->stops = ns;
        ns[gs->n_stops++] = arg;
        return 0;
    }
    default: BADV("generate: internal: %d is not a sampler flag", code);
    }
    BADV("generate: bad value '%s' for %s", arg, flag);
}

/* p and e with flag `code` back at its default. */
static void revert(int code, gf_sampler_params *p, gf_sampler_ext *e, const gf_sampler_params *d)
{
    const gf_sampler_ext de = gf_sampler_ext_defaults();
    switch (code) {
    case GS_TEMPERATURE: p->temperature = d->temperature; break;
    case GS_TOP_K: p->use_top_k = d->use_top_k, p->top_k = d->top_k; break;
    case GS_TOP_P: p->use_top_p = d->use_top_p, p->top_p = d->top_p; break;
    case GS_SEED: p->seed = d->seed; break;
    case GS_PROFILE: e->profile = de.profile; break;
    case GS_CHAIN: e->n_chain = 0; break;
    case GS_MIN_P: e->use_min_p = 0; break;
    case GS_TYPICAL_P: e->use_typical_p = 0; break;
    case GS_REPETITION: e->repetition_penalty = de.repetition_penalty; break;
    case GS_FREQUENCY: e->frequency_penalty = de.frequency_penalty; break;
    case GS_PRESENCE: e->presence_penalty = de.presence_penalty; break;
    case GS_LAST_N: e->penalty_last_n = de.penalty_last_n; break;
    case GS_MIN_KEEP: e->min_tokens_to_keep = de.min_tokens_to_keep; break;
    case GS_BIAS: e->n_bias = 0; break;
    case GS_MIN_NEW: e->min_new_tokens = 0; break;
    case GS_STOP_IDS: e->n_stop_ids = 0; break;
    default: break;
    }
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
        if (!gs->set[code - GS_TEMPERATURE] || code == GS_STOP)
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
