/* sliding_window: rotary models only. (1) An evicting cache (the oldest keys
 * dropped once the context passes `window`) against recomputation over the
 * window, greedy and teacher-forced by the recompute path: identical before
 * any eviction (atol, gated), then a measured drift that must stay within
 * the case's declared drift_tolerance. (2) Cached generation that slides by
 * recompute at a full cache equals the uncached loop (which crops to the
 * last n_positions tokens), free-running, atol and gate as elsewhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "keys.h"

typedef struct slide_spec {
    char *text;
    long long window, steps;
    double drift_tolerance, atol;
    gf_gate gate;
    long long slide_prompt_tokens, slide_new; /* part (2); 0 = skipped */
} slide_spec;

static void slide_free(void *p)
{
    slide_spec *s = p;
    if (s)
        free(s->text);
    free(s);
}

static int parse_slide(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    slide_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->atol = GF_ATOL_DEFAULT;
    int bad = gf_y_string(ctx, m, "prompt", GF_Y_REQUIRED, &s->text) < 0;
    bad |= gf_y_int(ctx, m, "window", GF_Y_REQUIRED, 1, 1 << 20, &s->window) < 0;
    bad |= gf_y_int(ctx, m, "steps", GF_Y_REQUIRED, 1, 1 << 20, &s->steps) < 0;
    bad |= gf_y_double(ctx, m, "drift_tolerance", GF_Y_REQUIRED, &s->drift_tolerance) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_gate(ctx, m, "gate", &s->gate) < 0;
    const gf_ynode *sl = gf_y_get(ctx, m, "slide", 0);
    if (sl) {
        if (!gf_y_node_is_map(ctx, sl, "'slide'"))
            return -1;
        bad |= gf_y_int(ctx, sl, "prompt_tokens", GF_Y_REQUIRED, 1, 1 << 20, &s->slide_prompt_tokens) < 0;
        bad |= gf_y_int(ctx, sl, "max_new_tokens", GF_Y_REQUIRED, 1, 1 << 20, &s->slide_new) < 0;
        gf_y_check_unknown(ctx, sl, "in 'slide' (known: prompt_tokens, max_new_tokens)");
    }
    if (!bad && !(s->drift_tolerance >= 0 && s->atol >= 0)) {
        gf_y_error(ctx, m, "'drift_tolerance' and 'atol' must be >= 0");
        bad = 1;
    }
    return bad ? -1 : 0;
}

typedef struct logit_rows {
    float *rows; /* (cap, V) */
    int32_t n, cap, V;
} logit_rows;

static gf_status keep_row(void *user, const gf_step_info *info)
{
    logit_rows *r = user;
    if (r->n < r->cap)
        memcpy(r->rows + (size_t)r->n++ * r->V, info->logits, (size_t)r->V * sizeof(float));
    return GF_OK;
}

/* The rows to keep (gf_row_keep): those of the pre-eviction step the
 * comparison below fails at, found by an online copy of it. */
static int pick_failing_pre(void *user, const gf_step_summary *s)
{
    return !s->evicting && gf_cmp_step(user, s->step, s->delta, s->ref_token, s->token, s->ref_margin, NAN);
}

/* (1) evicted cache vs recompute over the window */
static void run_evict(const slide_spec *s, gf_krun *k, const int32_t *prompt, int32_t n)
{
    gf_engine *e = k->session->engine;
    gf_sliding_result r;
    gf_cmp online;
    gf_cmp_init(&online, &s->gate, k->dtype, GF_CMP_TEACHER_FORCED, s->atol);
    gf_row_keep keep = {.pick = pick_failing_pre, .user = &online};
    gf_status st = gf_sliding_window_measure(e, prompt, n, (int32_t)s->window, (int32_t)s->steps, &keep, &r);
    if (st != GF_OK) {
        gf_k_status(k, st, "sliding-window measurement");
        return;
    }
    /* before eviction both paths are the same computation: compare them like any cache check */
    gf_cmp pre;
    gf_cmp_init(&pre, &s->gate, k->dtype, GF_CMP_TEACHER_FORCED, s->atol);
    int32_t n_pre = r.first_evict_step < 0 ? r.steps : r.first_evict_step;
    for (int32_t i = 0; i < n_pre; i++)
        gf_cmp_step(&pre, i, r.step_max_delta[i], r.tokens[i], r.evicted_tokens[i], r.step_margin[i], NAN);
    gf_k_compare(k, "evicted_vs_recompute_before_eviction", &pre);
    if (gf_cmp_verdict(&pre, NULL, 0) == GF_V_FAIL) {
        const int32_t V = gf_engine_config(e)->vocab_size, at = pre.first_failing < 0 ? 0 : pre.first_failing;
        const gf_kept_rows *kr = gf_row_keep_find(&keep, at);
        if (kr)
            gf_k_write_logits(k, "evicted_vs_recompute_before_eviction", at, kr->ref,
                              "recompute over the window (reference)", kr->test, "cache (no entry evicted yet)", V);
    }
    gf_row_keep_clear(&keep);
    gf_k_metric_int(k, "window", r.window);
    gf_k_metric_int(k, "first_evict_step", r.first_evict_step);
    gf_k_metric_int(k, "evict_steps", r.evict_steps);
    gf_k_metric(k, "drift_max_abs_delta", r.max_abs_delta);
    gf_k_metric_int(k, "drift_max_delta_step", r.max_delta_step);
    gf_k_metric(k, "drift_tolerance", s->drift_tolerance);
    gf_k_metric_int(k, "evicted_argmax_agree", r.argmax_agree);
    gf_k_metric_json(k, "step_max_delta", gf_json_doubles(r.step_max_delta, (size_t)r.steps));
    gf_k_metric_json(k, "recompute_tokens", gf_json_ints(r.tokens, (size_t)r.steps));
    gf_k_check(k, r.evict_steps > 0, "the window is passed", "%d of %d steps evict (window %d, prompt %d)",
               r.evict_steps, r.steps, r.window, n);
    gf_k_check(k, isfinite(r.max_abs_delta) && r.max_abs_delta <= s->drift_tolerance,
               "eviction drift within drift_tolerance",
               "max |evicted - recompute| %.4g at step %d, declared tolerance %.4g (argmax agrees on %d of %d "
               "evicting steps)",
               r.max_abs_delta, r.max_delta_step, s->drift_tolerance, r.argmax_agree, r.evict_steps);
    gf_sliding_result_clear(&r);
}

/* (2) cached generation sliding by recompute vs the uncached loop */
static void run_recompute_slide(const slide_spec *s, gf_krun *k, const int32_t *text_ids, int32_t tn)
{
    gf_engine *e = k->session->engine;
    const gf_model_config *cfg = gf_engine_config(e);
    const int32_t n = (int32_t)s->slide_prompt_tokens, N = (int32_t)s->slide_new, V = cfg->vocab_size;
    int32_t *prompt = malloc((size_t)n * sizeof *prompt);
    logit_rows a = {malloc((size_t)N * V * sizeof(float)), 0, N, V};
    logit_rows b = {malloc((size_t)N * V * sizeof(float)), 0, N, V};
    gf_generation *gc = NULL, *gu = NULL;
    if (!prompt || !a.rows || !b.rows) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < n; i++) /* the prompt text repeated */
        prompt[i] = text_ids[i % tn];
    gf_generate_params gp = gf_generate_defaults();
    gp.max_new_tokens = N;
    gp.eos_id = -1;
    gp.slide_on_limit = 1;
    gp.on_step = keep_row;
    gp.user = &a;
    gf_status st = gf_generate(e, 1, (const int32_t *const *)&prompt, &n, &gp, &gc);
    if (st != GF_OK) {
        gf_k_status(k, st, "cached generate (slide by recompute)");
        goto done;
    }
    gp.slide_on_limit = 0;
    gp.use_cache = 0;
    gp.user = &b;
    if ((st = gf_generate(e, 1, (const int32_t *const *)&prompt, &n, &gp, &gu)) != GF_OK) {
        gf_k_status(k, st, "uncached generate");
        goto done;
    }
    gf_k_check(k, n + N > cfg->n_positions, "generation passes the context", "%d + %d tokens, %d positions", n, N,
               cfg->n_positions);
    gf_k_check(k, gc->n_until_stop[0] == n + N && gc->stop[0] == GF_STOP_LENGTH, "cached slides to the end",
               "cached: %d tokens, stop %s; expected %d, length", gc->n_until_stop[0], gf_stop_reason_str(gc->stop[0]),
               n + N);
    gf_cmp cmp;
    gf_cmp_init(&cmp, &s->gate, k->dtype, GF_CMP_FREE_RUNNING, s->atol);
    for (int32_t i = 0; i < gu->steps && i < gc->steps && !gf_cmp_stopped(&cmp); i++)
        gf_cmp_logits(&cmp, i, b.rows + (size_t)i * V, a.rows + (size_t)i * V, V);
    gf_k_compare(k, "recompute_slide_vs_uncached_loop", &cmp);
    gf_k_metric_int(k, "slide_prompt_tokens", n);
    gf_k_metric_int(k, "slide_total_tokens", gc->n_until_stop[0]);
done:
    gf_generation_free(gc);
    gf_generation_free(gu);
    free(a.rows);
    free(b.rows);
    free(prompt);
}

static void run_slide(const gf_case *c, gf_krun *k)
{
    const slide_spec *s = c->spec;
    int32_t *ids = NULL, n = 0;
    gf_prompt_spec ps = {.text = s->text};
    gf_status st = gf_prompt_tokens(k->session, &ps, &ids, &n);
    if (st != GF_OK || n < 1) {
        gf_k_error(k, "%s", st != GF_OK ? gf_error_msg() : "the prompt encodes to no tokens");
        free(ids);
        return;
    }
    gf_k_metric_int(k, "prompt_tokens", n);
    run_evict(s, k, ids, n);
    if (s->slide_prompt_tokens)
        run_recompute_slide(s, k, ids, n);
    free(ids);
}

/* served_skip (case.h): neither part can be asked of a server. The evicting
 * cache masks the oldest keys of the history and keeps the stale rotary
 * positions of the rest, and a server numbers the positions itself and
 * keeps its whole history (backends/http refuses such a mask); the slide by
 * recompute fills the whole context, and a completion needs room for the
 * token it generates (context_limit's reason). */
static const char *slide_served_skip(const gf_case *c)
{
    (void)c;
    return "the evicting cache masks the oldest keys of the history and keeps the stale rotary positions of the "
           "rest, but a server numbers the positions itself and keeps its whole history; and the slide by recompute "
           "fills the whole context, where a completion request has no room for the token it generates";
}

const gf_kind_def gf_kind_sliding_window = {
    .name = "sliding_window",
    .summary = "rotary models: evicting the oldest cache entries vs recompute over the window (a measured drift "
               "within a declared tolerance); sliding by recompute equals the uncached loop",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .served_skip = slide_served_skip,
    .parse = parse_slide,
    .free_spec = slide_free,
    .run = run_slide,
};
