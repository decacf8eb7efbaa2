/* verify_cache: a greedy cached decode, teacher-forced against the uncached
 * forward over the same prefix at every step. */
#include "genfence/engine.h"
#include "genfence/rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void gf_verify_result_clear(gf_verify_result *r)
{
    if (!r)
        return;
    free(r->step_max_delta);
    free(r->step_margin);
    free(r->tokens);
    free(r->ref_tokens);
    free(r->step_top1);
    memset(r, 0, sizeof *r);
}

void gf_row_keep_clear(gf_row_keep *k)
{
    if (!k)
        return;
    for (int32_t i = 0; i < k->n_kept; i++) {
        free(k->kept[i].ref);
        free(k->kept[i].test);
    }
    memset(k->kept, 0, sizeof k->kept);
    k->n_kept = 0;
}

void gf_row_keep_reset(gf_row_keep *k)
{
    if (k) {
        memset(k->kept, 0, sizeof k->kept);
        k->n_kept = 0;
    }
}

const gf_kept_rows *gf_row_keep_find(const gf_row_keep *k, int32_t step)
{
    for (int32_t i = 0; k && i < k->n_kept; i++)
        if (k->kept[i].step == step)
            return &k->kept[i];
    return NULL;
}

gf_status gf_row_keep_offer(gf_row_keep *k, const gf_step_summary *s, const float *ref, const float *test, int32_t V)
{
    if (!k || !k->pick || k->n_kept >= GF_ROW_KEEP_MAX || !k->pick(k->user, s))
        return GF_OK;
    gf_kept_rows *r = &k->kept[k->n_kept];
    r->ref = malloc((size_t)V * sizeof *r->ref);
    r->test = malloc((size_t)V * sizeof *r->test);
    if (!r->ref || !r->test) {
        free(r->ref);
        free(r->test);
        r->ref = r->test = NULL;
        return gf_error_set(GF_E_NOMEM, "keeping the rows of step %d: out of memory", s->step);
    }
    memcpy(r->ref, ref, (size_t)V * sizeof *r->ref);
    memcpy(r->test, test, (size_t)V * sizeof *r->test);
    r->step = s->step;
    k->n_kept++;
    return GF_OK;
}

gf_status gf_verify_cache(gf_engine *e, const int32_t *prompt, int32_t prompt_len, int32_t steps,
                          const int32_t *prefill_chunks, int32_t n_chunks, gf_row_keep *keep, gf_verify_result *out)
{
    memset(out, 0, sizeof *out);
    gf_row_keep_reset(keep);
    const gf_model_config *cfg = gf_engine_config(e);
    const int32_t V = cfg->vocab_size, NP = cfg->n_positions;
    if (prompt_len < 1 || steps < 1)
        return gf_error_set(GF_E_INVALID_ARG, "verify: need a prompt and at least one step");
    if (prompt_len + steps - 1 > NP)
        return gf_error_set(GF_E_CONTEXT_LIMIT,
                            "verify: %d prompt tokens + %d steps need %d positions; the model has %d", prompt_len,
                            steps, prompt_len + steps - 1, NP);
    int32_t sum = 0;
    for (int32_t i = 0; i < n_chunks; i++) {
        if (prefill_chunks[i] < 1)
            return gf_error_set(GF_E_INVALID_ARG, "verify: prefill chunk %d has size %d", i, prefill_chunks[i]);
        sum += prefill_chunks[i];
    }
    if (sum > prompt_len)
        return gf_error_set(GF_E_INVALID_ARG, "verify: prefill chunks cover %d tokens; the prompt has %d", sum,
                            prompt_len);

    gf_status st = GF_OK;
    void *cache = NULL;
    const int32_t total = prompt_len + steps;
    int32_t *seq = malloc((size_t)total * sizeof *seq);
    int32_t *pos = malloc((size_t)total * sizeof *pos);
    float *cached = malloc((size_t)prompt_len * V * sizeof *cached); /* (T, V) */
    float *uncached = malloc((size_t)prompt_len * V * sizeof *uncached);
    out->step_max_delta = calloc((size_t)steps, sizeof(double));
    out->step_margin = calloc((size_t)steps, sizeof(double));
    out->tokens = calloc((size_t)steps, sizeof(int32_t));
    out->ref_tokens = calloc((size_t)steps, sizeof(int32_t));
    out->step_top1 = calloc((size_t)steps, sizeof(double));
    if (!seq || !pos || !cached || !uncached || !out->step_max_delta || !out->step_margin || !out->tokens ||
        !out->ref_tokens || !out->step_top1) {
        st = gf_error_set(GF_E_NOMEM, "verify: out of memory");
        goto done;
    }
    memcpy(seq, prompt, (size_t)prompt_len * sizeof *seq);
    for (int32_t i = 0; i < total; i++)
        pos[i] = i;
    out->steps = steps;
    out->tokens_equal = 1;
    out->first_divergence = -1;
    out->min_margin = INFINITY;
    out->max_delta_step = -1;
    out->min_margin_step = -1;

    st = gf_engine_cache_create(e, 1, NP, &cache);
    if (st != GF_OK)
        goto done;
    /* prefill, possibly in chunks; every prompt position's logits are compared */
    for (int32_t c = 0, at = 0; at < prompt_len; c++) {
        int32_t n = c < n_chunks ? prefill_chunks[c] : prompt_len - at;
        gf_batch in = {.B = 1, .T = n, .tokens = seq + at, .position_ids = pos + at, .logits_mode = GF_LOGITS_ALL};
        st = gf_engine_forward(e, cache, &in, cached + (size_t)at * V);
        if (st != GF_OK)
            goto done;
        at += n;
    }
    {
        gf_batch in = {.B = 1, .T = prompt_len, .tokens = seq, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
        st = gf_engine_forward(e, NULL, &in, uncached);
        if (st != GF_OK)
            goto done;
    }
    /* positions before the last are checked here; the last is step 0 below */
    double prompt_delta = gf_max_abs_delta(cached, uncached, (size_t)(prompt_len - 1) * V, NULL);
    out->max_abs_delta = prompt_delta;
    const float *cached_last = cached + (size_t)(prompt_len - 1) * V;
    float *cur_cached = malloc((size_t)V * sizeof *cur_cached);
    float *cur_uncached = malloc((size_t)V * sizeof *cur_uncached);
    if (!cur_cached || !cur_uncached) {
        free(cur_cached);
        free(cur_uncached);
        st = gf_error_set(GF_E_NOMEM, "verify: out of memory");
        goto done;
    }
    memcpy(cur_cached, cached_last, (size_t)V * sizeof *cur_cached);
    memcpy(cur_uncached, uncached + (size_t)(prompt_len - 1) * V, (size_t)V * sizeof *cur_uncached);
    for (int32_t step = 0; step < steps; step++) {
        int32_t len = prompt_len + step;
        if (step > 0) { /* the uncached forward over the same prefix */
            gf_batch in = {.B = 1, .T = len, .tokens = seq, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
            st = gf_engine_forward(e, NULL, &in, cur_uncached);
            if (st != GF_OK)
                break;
        }
        double d = gf_max_abs_delta(cur_cached, cur_uncached, (size_t)V, NULL);
        double m_ref;
        int32_t a_ref = gf_row_top(cur_uncached, V, NULL, &m_ref);
        int32_t a_c = gf_row_top(cur_cached, V, NULL, NULL);
        if (a_ref < 0 || a_c < 0) { /* every logit -inf: no token to pick, none to feed back (issue 12) */
            st = gf_error_set(GF_E_BACKEND,
                              "backend '%s': verify: step %d: no %s logit is above -inf, so there is no token to "
                              "pick or to feed back",
                              gf_engine_ops(e)->name, step, a_ref < 0 ? "uncached" : "cached");
            break;
        }
        out->step_max_delta[step] = d;
        out->step_margin[step] = m_ref;
        out->tokens[step] = a_c;
        out->ref_tokens[step] = a_ref;
        out->step_top1[step] = cur_uncached[a_ref];
        gf_step_summary sum = {.step = step,
                               .delta = d,
                               .ref_token = a_ref,
                               .token = a_c,
                               .ref_margin = m_ref,
                               .ref_top1 = cur_uncached[a_ref]};
        if ((st = gf_row_keep_offer(keep, &sum, cur_uncached, cur_cached, V)) != GF_OK)
            break;
        if (d > out->max_abs_delta || (out->max_delta_step < 0 && d >= out->max_abs_delta)) {
            out->max_abs_delta = d; /* max_delta_step -1: in the (chunked) prefill */
            out->max_delta_step = step;
        }
        if (m_ref < out->min_margin) {
            out->min_margin = m_ref;
            out->min_margin_step = step;
        }
        if (a_ref != a_c && out->tokens_equal) {
            out->tokens_equal = 0;
            out->first_divergence = step;
            out->divergence_margin = m_ref;
        }
        seq[len] = a_c; /* the cached decode runs free; the uncached side follows it */
        if (step + 1 < steps) {
            gf_batch in = {
                .B = 1, .T = 1, .tokens = seq + len, .position_ids = pos + len, .logits_mode = GF_LOGITS_LAST};
            st = gf_engine_forward(e, cache, &in, cur_cached);
            if (st != GF_OK)
                break;
        }
    }
    free(cur_cached);
    free(cur_uncached);
done:
    gf_engine_cache_free(e, cache);
    free(seq);
    free(pos);
    free(cached);
    free(uncached);
    if (st != GF_OK) {
        gf_verify_result_clear(out);
        gf_row_keep_clear(keep);
    }
    return st;
}
