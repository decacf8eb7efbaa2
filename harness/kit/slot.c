/* The backend's own sampler slot, exercised by the sampler-only kinds and by
 * the model kinds that sample (golden_generation, seeded_reproducibility, eos): every
 * sampling call also goes through the slot and is tallied here. */
#include <stdio.h>
#include <stdlib.h>

#include "genfence/engine.h"
#include "slot.h"
#include "utf8.h"

void gf_k_note_sampler(gf_krun *k)
{
    k->sampler_noted = 1;
    if (k->sample_ops) { /* gf_k_slot_finish replaces the slot's entry with its tally */
        gf_k_metric_json(k, "sampler", json_string("engine + backend slot"));
        gf_k_metric_json(k, "backend_sample_slot", json_string("exercised"));
        return;
    }
    gf_k_metric_json(k, "sampler", json_string("engine"));
    gf_k_metric_json(k, "backend_sample_slot",
                     json_string(k->backend_has_sample
                                     ? "present (not exercised: the generation loop samples on the engine)"
                                     : "none"));
}

void gf_k_slot_rows(gf_krun *k, const char *what, const float *logits, int32_t B, int32_t V, const gf_sampler_params *p,
                    const uint64_t *seq_ids, uint64_t step, const int32_t *engine_tokens)
{
    if (!k->sample_ops || B < 1)
        return;
    int32_t *ids = malloc((size_t)B * sizeof *ids);
    k->slot_calls++;
    gf_status st = ids ? gf_backend_sample(k->sample_ops, NULL, logits, B, V, p, seq_ids, step, ids)
                       : gf_error_set(GF_E_NOMEM, "out of memory");
    if (st == GF_E_UNSUPPORTED) { /* a profile the slot does not declare (gf_backend_sample): not exercised */
        k->slot_calls--;
        if (!k->slot_unsupported++)
            snprintf(k->slot_declined, sizeof k->slot_declined, "%s", gf_error_msg());
        free(ids);
        return;
    }
    if (st != GF_OK) {
        if (!k->slot_errors++ && !k->slot_mismatches)
            snprintf(k->slot_first, sizeof k->slot_first, "%s: %s", what, gf_error_msg());
        free(ids);
        return;
    }
    for (int32_t b = 0; b < B; b++) {
        k->slot_rows++;
        if (ids[b] == engine_tokens[b])
            continue;
        if (!k->slot_mismatches++ && !k->slot_errors)
            snprintf(k->slot_first, sizeof k->slot_first, "%s, row %d (seq %llu, step %llu): slot %d, engine %d", what,
                     b, (unsigned long long)(seq_ids ? seq_ids[b] : (uint64_t)b), (unsigned long long)step, ids[b],
                     engine_tokens[b]);
    }
    free(ids);
}

int gf_k_slot_attach(gf_krun *k)
{
    if (!k->session || !k->backend_has_sample)
        return 0;
    const gf_backend_ops *ops = gf_engine_ops(k->session->engine);
    if (!gf_backend_has_sample(ops))
        return 0;
    k->sample_ops = ops;
    return 1;
}

gf_status gf_k_slot_on_step(void *user, const gf_step_info *info)
{
    gf_k_slot_steps *ss = user;
    if (!ss->k->sample_ops || info->B < 1)
        return GF_OK;
    int32_t *chosen = malloc((size_t)info->B * sizeof *chosen);
    if (!chosen)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    for (int32_t b = 0; b < info->B; b++) /* the sampler's choice, also on a finished row */
        chosen[b] = info->results[b].token;
    char what[64];
    snprintf(what, sizeof what, "generation step %d", info->step);
    gf_k_slot_rows(ss->k, what, info->logits, info->B, info->V, &ss->gp->sampler, ss->gp->seq_ids, (uint64_t)info->step,
                   chosen);
    free(chosen);
    return GF_OK;
}

void gf_k_slot_finish(gf_krun *k)
{
    if (!k->sample_ops || !k->sampler_noted)
        return;
    if (!k->slot_calls) {
        /* nothing reached the slot (a sampler_errors case whose calls the
         * sampler rejects, all of them): neither tested nor failed */
        gf_k_metric_json(k, "sampler", json_string("engine"));
        char why[400];
        if (k->slot_unsupported)
            snprintf(why, sizeof why, "present (not exercised: it declined all %lld calls: %.300s)",
                     k->slot_unsupported, k->slot_declined);
        else
            snprintf(why, sizeof why, "present (not exercised: no sampling call of this case reached the slot)");
        gf_k_metric_json(k, "backend_sample_slot", gf_json_text(why));
        k->sample_ops = NULL;
        return;
    }
    json_t *m = json_object();
    json_object_set_new(m, "ran", json_true());
    /* sampler-only kinds call it without a model; model kinds too, the
     * engine keeps its backend model handle to itself (the ABI allows NULL) */
    json_object_set_new(m, "model", json_null());
    json_object_set_new(m, "during", json_string(k->session ? "the generation loop, every step" : "sampler calls"));
    json_object_set_new(m, "calls", json_integer(k->slot_calls));
    json_object_set_new(m, "rows", json_integer(k->slot_rows));
    json_object_set_new(m, "mismatches", json_integer(k->slot_mismatches));
    json_object_set_new(m, "errors", json_integer(k->slot_errors));
    json_object_set_new(m, "declined", json_integer(k->slot_unsupported));
    json_object_set_new(m, "first_difference", k->slot_first[0] ? gf_json_text(k->slot_first) : json_null());
    gf_k_metric_json(k, "backend_sample_slot", m);
    if (!k->slot_mismatches && !k->slot_errors)
        gf_k_check(k, 1, "backend sample slot equals engine sampler", "%lld calls, %lld rows: every token equal",
                   k->slot_calls, k->slot_rows);
    else
        gf_k_check(k, 0, "backend sample slot equals engine sampler",
                   "%lld of %lld rows differ, %lld of %lld calls failed; first: %s", k->slot_mismatches, k->slot_rows,
                   k->slot_errors, k->slot_calls, k->slot_first);
    k->sample_ops = NULL;
}
