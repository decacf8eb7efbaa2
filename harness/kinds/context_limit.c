/* context_limit: generation at a full cache stops (or raises) exactly at
 * n_positions, cached and uncached. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "keys.h"

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

/* The uncached loop's logits at every step: (N, V). */
typedef struct step_capture {
    float *logits;
    int32_t V, N;
} step_capture;

static gf_status capture_step(void *user, const gf_step_info *info)
{
    step_capture *c = user;
    if (info->step < c->N)
        memcpy(c->logits + (size_t)info->step * c->V, info->logits, (size_t)c->V * sizeof(float));
    return GF_OK;
}

/* Logits of the last of W tokens (positions 0..W-1) through a fresh cache:
 * prefill W - 1, decode 1 -- the backend's cached path, not its uncached one. */
static gf_status cached_window(gf_engine *e, const int32_t *win, int32_t W, int32_t *pos, float *out)
{
    void *cache = NULL;
    gf_status st = gf_engine_cache_create(e, 1, W, &cache);
    if (st != GF_OK)
        return st;
    for (int32_t t = 0; t < W; t++)
        pos[t] = t;
    if (W > 1) {
        gf_batch pre = {.B = 1, .T = W - 1, .tokens = win, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
        st = gf_engine_forward(e, cache, &pre, out);
    }
    if (st == GF_OK) {
        gf_batch one = {
            .B = 1, .T = 1, .tokens = win + W - 1, .position_ids = pos + W - 1, .logits_mode = GF_LOGITS_LAST};
        st = gf_engine_forward(e, cache, &one, out);
    }
    gf_engine_cache_free(e, cache);
    return st;
}

/* The uncached crop at exactly n_positions: at every step whose sequence
 * holds n_positions tokens or more, the loop's logits must be those of its
 * last n_positions tokens renumbered from 0, computed here through a fresh
 * cache (the first three such steps and the last: a prefill of n_positions
 * each). A window one short (n_positions - 1: the crop's off-by-one), or an
 * uncached forward that mishandles T = n_positions, differs. The delta a
 * one-short window would have is recorded (`one_short_delta`): the power of
 * the check on this model. */
static void check_crop(gf_krun *k, gf_engine *e, const gf_generation *g, const float *loop_logits, int32_t N)
{
    const gf_model_config *cfg = gf_engine_config(e);
    const int32_t V = cfg->vocab_size, P = cfg->n_positions, n0 = g->prompt_len[0];
    float *ref = malloc((size_t)V * sizeof *ref), *shorter = malloc((size_t)V * sizeof *shorter);
    int32_t *pos = malloc((size_t)P * sizeof *pos);
    if (!ref || !shorter || !pos) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    gf_cmp cmp;
    gf_gate gate = gf_gate_default();
    gf_cmp_init(&cmp, &gate, k->dtype, GF_CMP_TEACHER_FORCED, GF_ATOL_DEFAULT);
    int32_t first = -1, checked = 0;
    double one_short = NAN, same_window = NAN;
    const int32_t last = (N < g->steps ? N : g->steps) - 1;
    for (int32_t t = 0, seen = 0; t <= last; t++) {
        const int32_t L = n0 + t;                /* tokens the loop saw at step t */
        if (L < P || (seen++ >= 3 && t != last)) /* the first three steps of the crop and the last */
            continue;
        const int32_t *win = g->tokens[0] + L - P;
        gf_status st = cached_window(e, win, P, pos, ref);
        if (st != GF_OK) {
            gf_k_status(k, st, "the crop's reference (a cached decode of the last n_positions tokens)");
            goto done;
        }
        if (first < 0) {
            first = t;
            /* diagnostics, uncached: the same n_positions tokens (does the loop
             * crop to that length?) and a window of n_positions - 1 */
            gf_batch in = {.B = 1, .T = P, .tokens = win, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
            if (gf_engine_forward(e, NULL, &in, shorter) == GF_OK)
                same_window = gf_max_abs_delta(loop_logits + (size_t)t * V, shorter, (size_t)V, NULL);
            in.T = P - 1;
            in.tokens = win + 1;
            if (gf_engine_forward(e, NULL, &in, shorter) == GF_OK)
                one_short = gf_max_abs_delta(ref, shorter, (size_t)V, NULL);
        }
        checked++;
        if (gf_cmp_logits(&cmp, t, ref, loop_logits + (size_t)t * V, V))
            gf_k_write_logits(k, "uncached_crop", t, ref, "cached decode of the last n_positions tokens",
                              loop_logits + (size_t)t * V, "uncached generation loop", V);
    }
    gf_k_metric_int(k, "crop_steps_checked", checked);
    gf_k_metric_int(k, "crop_first_step", first);
    if (isfinite(one_short))
        gf_k_metric(k, "one_short_delta", one_short);
    if (isfinite(same_window))
        gf_k_metric(k, "loop_vs_uncached_window_delta", same_window);
    if (!checked) {
        gf_k_metric_json(k, "uncached_crop", json_string("not reached: the loop never held n_positions tokens"));
        goto done;
    }
    const char *why = "";
    if (cmp.first_failing >= 0)
        why = same_window <= cmp.atol ? "; the loop equals an uncached forward over those tokens: the window's length "
                                        "is right, the backend's T = n_positions forward or its cache is off"
                                      : "; the loop differs from an uncached forward over those tokens too: its "
                                        "window is another length";
    gf_k_check(k, cmp.first_failing < 0, "uncached crop keeps exactly n_positions tokens",
               "%d steps from step %d: max |delta| %.3g against the last %d tokens through a cache%s", checked, first,
               cmp.max_delta, P, why);
    gf_k_compare(k, "uncached_crop", &cmp);
done:
    free(ref);
    free(shorter);
    free(pos);
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
        step_capture cap = {.V = cfg->vocab_size, .N = (int32_t)s->max_new};
        cap.logits = malloc((size_t)cap.N * cap.V * sizeof *cap.logits);
        if (!cap.logits) {
            gf_k_fail(k, "out of memory");
            goto done;
        }
        gp.use_cache = 0;
        gp.on_step = capture_step;
        gp.user = &cap;
        st = gf_generate(e, 1, (const int32_t *const *)&prompt, &n, &gp, &g);
        if (st != GF_OK) {
            free(cap.logits);
            gf_k_status(k, st, "uncached generate");
            goto done;
        }
        check_expect(k, "uncached", &s->uncached, g);
        gf_k_metric_json(
            k, "uncached",
            json_pack("{s:s, s:i}", "stop_reason", gf_stop_reason_str(g->stop[0]), "total_tokens", g->n_until_stop[0]));
        check_crop(k, e, g, cap.logits, cap.N);
        free(cap.logits);
    }
done:
    gf_generation_free(g);
    free(prompt);
}

/* served_skip (case.h): the case fills the model's whole context and
 * expects the logits after its last position; over the completions API a
 * request needs room for the token it generates, so a server refuses a prompt
 * of the full context (llama-server: n_prompt >= n_ctx) and the last
 * position is out of reach. The server's own error for an over-long prompt
 * is still named by the backend (tests/cli/http_faults.sh). */
static const char *limit_served_skip(const gf_case *c)
{
    (void)c;
    return "the case fills the model's whole context, and a completion request needs room for the token it "
           "generates: a server refuses a prompt of the full context (llama-server: n_prompt >= n_ctx), so the last "
           "position cannot be asked for over the API";
}

const gf_kind_def gf_kind_context_limit = {
    .name = "context_limit",
    .summary = "a full cache stops (or raises) with the last token kept; uncached generation slides",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .served_skip = limit_served_skip,
    .parse = parse_limit,
    .free_spec = limit_free,
    .run = run_limit,
};
