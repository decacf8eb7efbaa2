/* A batch of prompts against each prompt alone (batch_consistency and
 * seeded_reproducibility share it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "batch.h"

/* on_step capture: every step's (B, V) logits */
typedef struct capture {
    float *logits; /* (max_steps, B, V) */
    int32_t B, V, max_steps;
} capture;

static gf_status capture_step(void *user, const gf_step_info *info)
{
    capture *c = user;
    if (info->step < c->max_steps)
        memcpy(c->logits + (size_t)info->step * c->B * c->V, info->logits, (size_t)c->B * c->V * sizeof(float));
    return GF_OK;
}

/* Compare row b of a batch run against its single run, free-running; writes
 * the artifact at the first failing step. */
static void compare_row(gf_krun *k, const char *label, const gf_gate *gate, double atol, const gf_generation *single,
                        const capture *sc, const gf_generation *batch, const capture *bc, int32_t b)
{
    gf_cmp cmp;
    gf_cmp_init(&cmp, gate, k->dtype, GF_CMP_FREE_RUNNING, atol);
    const int32_t V = sc->V, P = single->prompt_len[0];
    int32_t steps = single->steps < batch->steps ? single->steps : batch->steps;
    for (int32_t t = 0; t < steps && !gf_cmp_stopped(&cmp); t++) {
        const float *ref = sc->logits + (size_t)t * V;
        const float *test = bc->logits + ((size_t)t * bc->B + b) * V;
        double top1;
        gf_row_top(ref, V, &top1, NULL);
        double delta = gf_max_abs_delta(ref, test, (size_t)V, NULL);
        int failed =
            gf_cmp_step(&cmp, t, delta, single->tokens[0][P + t], batch->tokens[b][P + t], single->margins[t], top1);
        if (failed)
            gf_k_write_logits(k, label, t, ref, "single prompt (reference)", test, "row of the left-padded batch", V);
    }
    cmp.ignored += single->steps - steps;
    gf_k_compare(k, label, &cmp);
}

/* Generate with a logits capture. */
static gf_status generate_captured(gf_engine *e, int32_t B, int32_t *const *prompts, const int32_t *lens,
                                   const gf_generate_params *base, const uint64_t *seq_ids, capture *cap,
                                   gf_generation **out)
{
    const int32_t V = gf_engine_config(e)->vocab_size;
    cap->B = B;
    cap->V = V;
    cap->max_steps = base->max_new_tokens;
    cap->logits = malloc((size_t)(base->max_new_tokens > 0 ? base->max_new_tokens : 1) * B * V * sizeof(float));
    if (!cap->logits)
        return gf_error_set(GF_E_NOMEM, "out of memory for %d x %d x %d logits", base->max_new_tokens, B, V);
    gf_generate_params p = *base;
    p.seq_ids = seq_ids;
    p.on_step = capture_step;
    p.user = cap;
    return gf_generate(e, B, (const int32_t *const *)prompts, lens, &p, out);
}

gf_status gf_kind_batch_vs_single(gf_krun *k, const char *label, int32_t B, int32_t *const *prompts,
                                  const int32_t *lens, const gf_generate_params *gp, const gf_gate *gate, double atol,
                                  gf_generation **singles_out)
{
    gf_engine *e = k->session->engine;
    if (B < 1)
        return gf_error_set(GF_E_INVALID_ARG, "%s: no prompts", label);
    uint64_t *ids = malloc((size_t)B * sizeof *ids);
    if (!ids)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    for (int32_t b = 0; b < B; b++)
        ids[b] = gp->seq_ids ? gp->seq_ids[b] : (uint64_t)b;
    capture bc = {0};
    gf_generation *batch = NULL;
    gf_status st = generate_captured(e, B, prompts, lens, gp, ids, &bc, &batch);
    if (st != GF_OK) {
        gf_error_prefix(st, "%s: batch of %d", label, B);
        goto done;
    }
    for (int32_t b = 0; b < B; b++) {
        capture sc = {0};
        gf_generation *single = NULL;
        st = generate_captured(e, 1, &prompts[b], &lens[b], gp, &ids[b], &sc, &single);
        if (st != GF_OK) {
            free(sc.logits);
            gf_error_prefix(st, "%s: prompt %d alone", label, b);
            goto done;
        }
        char row_label[256];
        snprintf(row_label, sizeof row_label, "%s/row%d", label, b);
        compare_row(k, row_label, gate, atol, single, &sc, batch, &bc, b);
        free(sc.logits);
        if (singles_out)
            singles_out[b] = single;
        else
            gf_generation_free(single);
    }
done:
    gf_generation_free(batch);
    free(bc.logits);
    free(ids);
    return st;
}
