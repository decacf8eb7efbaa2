/* The sliding-window measurement for rotary models: an evicting cache against
 * recomputation over the window (see gf_sliding_window_measure in engine.h). */
#include "genfence/engine.h"
#include "genfence/rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void gf_sliding_result_clear(gf_sliding_result *r)
{
    if (!r)
        return;
    free(r->step_max_delta);
    free(r->step_margin);
    free(r->tokens);
    free(r->evicted_tokens);
    memset(r, 0, sizeof *r);
}

gf_status gf_sliding_window_measure(gf_engine *e, const int32_t *prompt, int32_t prompt_len, int32_t window,
                                    int32_t steps, gf_row_keep *keep, gf_sliding_result *out)
{
    memset(out, 0, sizeof *out);
    gf_row_keep_reset(keep);
    const gf_model_config *cfg = gf_engine_config(e);
    const int32_t V = cfg->vocab_size, NP = cfg->n_positions;
    if (cfg->pos != GF_POS_ROPE)
        return gf_error_set(GF_E_UNSUPPORTED, "sliding window: the model has learned absolute positions, which are "
                                              "baked into every cached key and value; such a cache cannot slide "
                                              "(sliding = recompute)");
    if (steps < 1 || window < 1 || prompt_len < 1 || prompt_len > window)
        return gf_error_set(GF_E_INVALID_ARG, "sliding window: need steps >= 1 and 1 <= prompt (%d) <= window (%d)",
                            prompt_len, window);
    if (prompt_len + steps - 1 > NP)
        return gf_error_set(GF_E_CONTEXT_LIMIT,
                            "sliding window: %d prompt tokens + %d steps need %d positions; the "
                            "evicting cache holds every position and the model has %d",
                            prompt_len, steps, prompt_len + steps - 1, NP);
    for (int32_t i = 0; i < prompt_len; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return gf_error_set(GF_E_INVALID_ARG, "sliding window: prompt token %d is %d, outside [0, %d)", i,
                                prompt[i], V);

    const int32_t total = prompt_len + steps;
    int32_t *seq = malloc((size_t)total * sizeof *seq); /* (total) the forced path */
    int32_t *pos = malloc((size_t)total * sizeof *pos); /* (total) scratch positions */
    uint8_t *mask = malloc((size_t)total);              /* (1, Tk) key mask of one query */
    float *ev = malloc((size_t)V * sizeof *ev);         /* (1, V) evicted-cache logits */
    float *rc = malloc((size_t)V * sizeof *rc);         /* (1, V) recompute logits */
    void *cache = NULL;
    gf_status st = GF_OK;
    out->steps = steps;
    out->window = window;
    out->first_evict_step = -1;
    out->max_delta_step = -1;
    out->min_margin = INFINITY;
    out->step_max_delta = calloc((size_t)steps, sizeof *out->step_max_delta);
    out->step_margin = calloc((size_t)steps, sizeof *out->step_margin);
    out->tokens = calloc((size_t)steps, sizeof *out->tokens);
    out->evicted_tokens = calloc((size_t)steps, sizeof *out->evicted_tokens);
    if (!seq || !pos || !mask || !ev || !rc || !out->step_max_delta || !out->step_margin || !out->tokens ||
        !out->evicted_tokens) {
        st = gf_error_set(GF_E_NOMEM, "sliding window: out of memory");
        goto done;
    }
    memcpy(seq, prompt, (size_t)prompt_len * sizeof *seq);
    if ((st = gf_engine_cache_create(e, 1, NP, &cache)) != GF_OK)
        goto done;

    /* evicted path, prefill: the prompt fits the window, nothing masked */
    for (int32_t t = 0; t < prompt_len; t++)
        pos[t] = t;
    gf_batch pre = {
        .B = 1, .T = prompt_len, .tokens = seq, .position_ids = pos, .key_mask = NULL, .logits_mode = GF_LOGITS_LAST};
    if ((st = gf_engine_forward(e, cache, &pre, ev)) != GF_OK)
        goto done;

    for (int32_t step = 0; step < steps; step++) {
        const int32_t n = prompt_len + step; /* tokens so far */
        if (step > 0) {                      /* evicted path: feed token n-1 at position n-1, keys (n-1-window, n-1] */
            for (int32_t j = 0; j < n; j++)
                mask[j] = j >= n - window;
            int32_t p1 = n - 1;
            gf_batch dec = {.B = 1,
                            .T = 1,
                            .tokens = seq + n - 1,
                            .position_ids = &p1,
                            .key_mask = n > window ? mask : NULL,
                            .logits_mode = GF_LOGITS_LAST};
            if ((st = gf_engine_forward(e, cache, &dec, ev)) != GF_OK)
                goto done;
        }
        /* recompute path: the last `window` tokens, renumbered from 0, uncached */
        const int32_t c0 = n > window ? n - window : 0, w = n - c0;
        for (int32_t t = 0; t < w; t++)
            pos[t] = t;
        gf_batch full = {
            .B = 1, .T = w, .tokens = seq + c0, .position_ids = pos, .key_mask = NULL, .logits_mode = GF_LOGITS_LAST};
        if ((st = gf_engine_forward(e, NULL, &full, rc)) != GF_OK)
            goto done;

        gf_top2 rr, er;
        gf_row_top2(rc, V, &rr);
        gf_row_top2(ev, V, &er);
        double d = gf_max_abs_delta(ev, rc, (size_t)V, NULL), margin = gf_top2_margin(&rr);
        out->step_max_delta[step] = d;
        out->step_margin[step] = margin;
        out->tokens[step] = rr.token;
        out->evicted_tokens[step] = er.token;
        if (margin < out->min_margin)
            out->min_margin = margin;
        gf_step_summary sum = {.step = step,
                               .delta = d,
                               .ref_token = rr.token,
                               .token = er.token,
                               .ref_margin = margin,
                               .ref_top1 = rr.top1,
                               .evicting = n > window};
        if ((st = gf_row_keep_offer(keep, &sum, rc, ev, V)) != GF_OK)
            goto done;
        if (n > window) {
            if (out->first_evict_step < 0)
                out->first_evict_step = step;
            out->evict_steps++;
            out->argmax_agree += er.token == rr.token;
            if (d > out->max_abs_delta || out->max_delta_step < 0) {
                out->max_abs_delta = d;
                out->max_delta_step = step;
            }
        } else if (d > out->pre_evict_max_delta) {
            out->pre_evict_max_delta = d;
        }
        seq[n] = rr.token; /* both paths follow the exact rule's token */
    }
done:
    gf_engine_cache_free(e, cache);
    free(seq);
    free(pos);
    free(mask);
    free(ev);
    free(rc);
    if (st != GF_OK) {
        gf_sliding_result_clear(out);
        gf_row_keep_clear(keep);
    }
    return st;
}
