/* context_limit: generation at a full cache stops (or raises) exactly at
 * n_positions, cached and uncached. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "krun.h"

typedef struct limit_spec {
    char *text;
    int32_t *ids;
    size_t n_ids;
    long long n_tokens; /* prompt length when given as a count */
    long long max_new;
    gf_stop_expect expect, uncached;
    int has_uncached, raise;
} limit_spec;

static void limit_free(void *p)
{
    limit_spec *s = p;
    if (s) {
        free(s->text);
        free(s->ids);
    }
    free(s);
}

static int parse_expect(gf_cctx *ctx, const gf_ynode *m, const char *key, int flags, gf_stop_expect *e)
{
    const gf_ynode *n = gf_y_get(ctx, m, key, flags);
    if (!n)
        return (flags & GF_Y_REQUIRED) ? -1 : 0;
    char what[64];
    snprintf(what, sizeof what, "'%s'", key);
    if (!gf_y_node_is_map(ctx, n, what))
        return -1;
    int bad = 0, rc;
    rc = gf_y_enum(ctx, n, "stop_reason", 0, gf_stop_words, &e->stop);
    bad |= rc < 0;
    e->has_stop = rc > 0;
    rc = gf_y_int(ctx, n, "total_tokens", 0, 1, 1 << 24, &e->total);
    bad |= rc < 0;
    e->has_total = rc > 0;
    snprintf(what, sizeof what, "in '%s' (known: stop_reason, total_tokens)", key);
    gf_y_check_unknown(ctx, n, what);
    if (!bad && !e->has_stop && !e->has_total) {
        gf_y_error(ctx, n, "'%s' needs stop_reason and/or total_tokens", key);
        bad = 1;
    }
    return bad ? -1 : 1;
}

static const char *const k_on_limit[] = {"stop", "raise", NULL};

static int parse_limit(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    limit_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->max_new = 20;
    int bad = gf_y_string(ctx, m, "prompt", 0, &s->text) < 0;
    const gf_ynode *pt = gf_y_get(ctx, m, "prompt_tokens", 0);
    if (pt && pt->type == GF_YN_SEQ) {
        bad |= gf_y_ints(ctx, m, "prompt_tokens", 0, 0, 2147483647LL, 1, &s->ids, &s->n_ids) < 0;
        if (s->text) {
            gf_y_error(ctx, pt, "give 'prompt' text or a 'prompt_tokens' list, not both");
            bad = 1;
        }
    } else if (pt) {
        bad |= gf_y_node_int(ctx, pt, "'prompt_tokens'", 1, 1 << 20, &s->n_tokens) < 0;
    } else if (!s->text) {
        gf_y_error(ctx, m, "missing required key 'prompt_tokens' (or 'prompt')");
        bad = 1;
    }
    bad |= gf_y_int(ctx, m, "max_new_tokens", 0, 1, 1 << 20, &s->max_new) < 0;
    bad |= parse_expect(ctx, m, "expect", GF_Y_REQUIRED, &s->expect) < 0;
    int rc = parse_expect(ctx, m, "uncached", 0, &s->uncached);
    bad |= rc < 0;
    s->has_uncached = rc > 0;
    bad |= gf_y_enum(ctx, m, "on_limit", 0, k_on_limit, &s->raise) < 0;
    return bad ? -1 : 0;
}

static void check_expect(gf_krun *k, const char *label, const gf_stop_expect *e, const gf_generation *g)
{
    char name[128];
    if (e->has_stop) {
        snprintf(name, sizeof name, "%s stop_reason", label);
        gf_k_check(k, g->stop[0] == gf_stop_values[e->stop], name, "got %s, expected %s",
                   gf_stop_reason_str(g->stop[0]), gf_stop_words[e->stop]);
    }
    if (e->has_total) {
        snprintf(name, sizeof name, "%s total_tokens", label);
        gf_k_check(k, g->n_until_stop[0] == e->total, name, "got %d, expected %lld", g->n_until_stop[0], e->total);
    }
}

static void run_limit(const gf_case *c, gf_krun *k)
{
    const limit_spec *s = c->spec;
    gf_engine *e = k->session->engine;
    const gf_model_config *cfg = gf_engine_config(e);
    int32_t *prompt = NULL, n = 0;
    if (s->ids) {
        prompt = malloc(s->n_ids * sizeof *prompt);
        if (prompt)
            memcpy(prompt, s->ids, s->n_ids * sizeof *prompt);
        n = (int32_t)s->n_ids;
    } else {
        int32_t want = s->n_tokens ? (int32_t)s->n_tokens : 0;
        int32_t *text_ids = NULL, tn = 0;
        if (s->text) {
            gf_prompt_spec ps = {.text = s->text};
            if (gf_prompt_tokens(k->session, &ps, &text_ids, &tn) != GF_OK) {
                gf_k_error(k, "%s", gf_error_msg());
                return;
            }
        }
        n = want ? want : tn;
        prompt = malloc((size_t)n * sizeof *prompt);
        for (int32_t i = 0; prompt && i < n; i++) /* the text repeated, or a fixed pattern */
            prompt[i] = tn ? text_ids[i % tn] : (int32_t)((i * 31 + 7) % cfg->vocab_size);
        free(text_ids);
    }
    if (!prompt) {
        gf_k_fail(k, "out of memory");
        return;
    }
    gf_k_metric_int(k, "prompt_tokens", n);
    gf_k_metric_int(k, "n_positions", cfg->n_positions);
    gf_generate_params gp = gf_generate_defaults();
    gp.max_new_tokens = (int32_t)s->max_new;
    gp.eos_id = -1;
    gf_generation *g = NULL;
    gf_status st = gf_generate(e, 1, (const int32_t *const *)&prompt, &n, &gp, &g);
    if (st != GF_OK) {
        gf_k_status(k, st, "cached generate");
        goto done;
    }
    check_expect(k, "cached", &s->expect, g);
    gf_k_metric_json(
        k, "cached",
        json_pack("{s:s, s:i}", "stop_reason", gf_stop_reason_str(g->stop[0]), "total_tokens", g->n_until_stop[0]));
    gf_generation_free(g);
    g = NULL;
    if (s->raise) {
        gp.raise_on_context_limit = 1;
        st = gf_generate(e, 1, (const int32_t *const *)&prompt, &n, &gp, &g);
        gf_k_check(k, st == GF_E_CONTEXT_LIMIT, "on_limit raise", "%s",
                   st == GF_OK ? "no error: generation ended normally" : gf_error_msg());
        gf_k_metric_json(k, "raise", json_string(st == GF_OK ? "ok" : gf_status_str(st)));
        gf_generation_free(g);
        g = NULL;
        gp.raise_on_context_limit = 0;
    }
    if (s->has_uncached) {
        gp.use_cache = 0;
        st = gf_generate(e, 1, (const int32_t *const *)&prompt, &n, &gp, &g);
        if (st != GF_OK) {
            gf_k_status(k, st, "uncached generate");
            goto done;
        }
        check_expect(k, "uncached", &s->uncached, g);
        gf_k_metric_json(
            k, "uncached",
            json_pack("{s:s, s:i}", "stop_reason", gf_stop_reason_str(g->stop[0]), "total_tokens", g->n_until_stop[0]));
    }
done:
    gf_generation_free(g);
    free(prompt);
}

const gf_kind_def gf_kind_context_limit = {
    .name = "context_limit",
    .summary = "a full cache stops (or raises) with the last token kept; uncached generation slides",
    .uses_backend = 1,
    .model = GF_KIND_MODEL_REQUIRED,
    .keys = "prompt_tokens, prompt, max_new_tokens, expect, on_limit, uncached",
    .parse = parse_limit,
    .free_spec = limit_free,
    .run = run_limit,
};
