/* seeded_reproducibility: the same seed gives the same tokens, run after run
 * and alone or in a batch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "keys.h"
#include "slot.h"
#include "batch.h"

typedef struct seeded_spec {
    gf_prompt_spec *prompts;
    size_t n_prompts;
    long long max_new, eos_id;
    gf_sampler_params p;
    uint64_t *seeds;
    size_t n_seeds;
    double atol;
    gf_gate gate;
    int batch;
} seeded_spec;

static void seeded_free(void *p)
{
    seeded_spec *s = p;
    if (s) {
        gf_prompts_free(s->prompts, s->n_prompts);
        free(s->seeds);
    }
    free(s);
}

static int parse_seeded(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    seeded_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->max_new = 32;
    s->eos_id = -1;
    s->atol = GF_ATOL_DEFAULT;
    s->batch = 1;
    s->p = gf_sampler_greedy();
    s->p.temperature = 0.8;
    s->p.use_top_k = 1;
    s->p.top_k = 40;
    s->p.use_top_p = 1;
    s->p.top_p = 0.95;
    int bad = gf_y_prompts(ctx, m, "prompts", GF_Y_REQUIRED, &s->prompts, &s->n_prompts) < 0;
    bad |= gf_y_int(ctx, m, "max_new_tokens", 0, 1, 1 << 20, &s->max_new) < 0;
    bad |= gf_y_int(ctx, m, "eos_id", 0, 0, 2147483647LL, &s->eos_id) < 0;
    bad |= gf_y_sampler(ctx, m, &s->p) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_gate(ctx, m, "gate", &s->gate) < 0;
    bad |= gf_y_bool(ctx, m, "batch", 0, &s->batch) < 0;
    uint64_t shift;
    bad |= gf_y_seed_shift(ctx, m, &shift) < 0;
    const gf_ynode *sn = gf_y_get(ctx, m, "seeds", GF_Y_REQUIRED);
    if (sn && gf_y_node_is_seq(ctx, sn, "'seeds'")) {
        if (sn->n < 2) {
            gf_y_error(ctx, sn, "'seeds' needs at least 2 entries (different seeds must differ)");
            bad = 1;
        }
        s->seeds = calloc(sn->n ? sn->n : 1, sizeof *s->seeds);
        s->n_seeds = sn->n;
        for (size_t i = 0; s->seeds && i < sn->n; i++) {
            long long v = 0;
            if (gf_y_node_int(ctx, sn->items[i], "'seeds' entry", 0, 0x7fffffffffffffffLL, &v) < 0)
                bad = 1;
            s->seeds[i] = (uint64_t)v + shift; /* (keys.h: GENFENCE_SEED_SHIFT) */
        }
    } else {
        bad = 1;
    }
    if (!bad && s->p.temperature == 0) {
        gf_y_error(ctx, gf_y_get(ctx, m, "temperature", 0), "seeded_reproducibility needs a sampled temperature (> 0)");
        bad = 1;
    }
    return bad ? -1 : 0;
}

static int same_tokens(const gf_generation *a, int32_t ra, const gf_generation *b, int32_t rb)
{
    return a->n_tokens[ra] == b->n_tokens[rb] &&
           !memcmp(a->tokens[ra], b->tokens[rb], (size_t)a->n_tokens[ra] * sizeof(int32_t));
}

static void run_seeded(const gf_case *c, gf_krun *k)
{
    const seeded_spec *s = c->spec;
    gf_engine *e = k->session->engine;
    const int32_t B = (int32_t)s->n_prompts, S = (int32_t)s->n_seeds;
    int32_t **prompts = NULL, *lens = NULL;
    gf_generation **runs = calloc((size_t)S * B, sizeof *runs); /* [seed][prompt] */
    if (!runs || !gf_k_encode_prompts(k, s->prompts, B, &prompts, &lens))
        goto done;
    gf_k_metric_json(k, "prompt_tokens", gf_json_ints(lens, (size_t)B));
    gf_k_metric_json(k, "sampler_params", gf_sampler_json(&s->p));
    json_t *seeds = json_array();
    for (int32_t i = 0; i < S; i++)
        json_array_append_new(seeds, json_integer((json_int_t)s->seeds[i]));
    json_object_set_new(k->seeds, "sampler", seeds);
    gf_generate_params gp = gf_generate_defaults();
    gp.max_new_tokens = (int32_t)s->max_new;
    gp.sampler = s->p;
    gp.eos_id = (int32_t)s->eos_id;
    /* the same seed repeats (each single run's steps also through a backend's sample slot) */
    gf_k_slot_steps slot_steps = {.k = k, .gp = &gp};
    if (gf_k_slot_attach(k)) {
        gp.on_step = gf_k_slot_on_step;
        gp.user = &slot_steps;
    }
    gf_k_note_sampler(k);
    int repeats = 1;
    char why[256] = "";
    for (int32_t i = 0; i < S; i++)
        for (int32_t b = 0; b < B; b++) {
            uint64_t id = (uint64_t)b;
            gp.sampler.seed = s->seeds[i];
            gp.seq_ids = &id;
            gf_generation *again = NULL;
            gf_status st = gf_generate(e, 1, (const int32_t *const *)&prompts[b], &lens[b], &gp, &runs[i * B + b]);
            if (st == GF_OK)
                st = gf_generate(e, 1, (const int32_t *const *)&prompts[b], &lens[b], &gp, &again);
            if (st != GF_OK) {
                gf_k_status(k, st, "sampled generate");
                gf_generation_free(again);
                goto done;
            }
            if (!same_tokens(runs[i * B + b], 0, again, 0) && repeats) {
                repeats = 0;
                snprintf(why, sizeof why, "seed %llu, prompt %d: two runs differ", (unsigned long long)s->seeds[i], b);
            }
            gf_generation_free(again);
        }
    gp.on_step = NULL;
    gf_k_slot_finish(k);
    gf_k_check(k, repeats, "same seed repeats", "%s", repeats ? "every seed and prompt" : why);
    /* different seeds differ */
    int differ = 1, equal_pairs = 0;
    for (int32_t b = 0; b < B; b++)
        for (int32_t i = 0; i < S; i++)
            for (int32_t j = i + 1; j < S; j++)
                if (s->seeds[i] != s->seeds[j] && same_tokens(runs[i * B + b], 0, runs[j * B + b], 0)) {
                    if (differ)
                        snprintf(why, sizeof why, "prompt %d: seeds %llu and %llu give the same tokens", b,
                                 (unsigned long long)s->seeds[i], (unsigned long long)s->seeds[j]);
                    differ = 0;
                    equal_pairs++;
                }
    gf_k_check(k, differ, "different seeds differ", "%s", differ ? "every pair of seeds" : why);
    gf_k_metric_int(k, "equal_seed_pairs", equal_pairs);
    json_t *toks = json_array();
    for (int32_t i = 0; i < S; i++) {
        json_t *row = json_array();
        for (int32_t b = 0; b < B; b++)
            json_array_append_new(row, gf_json_ints(runs[i * B + b]->tokens[0] + lens[b],
                                                    (size_t)(runs[i * B + b]->n_tokens[0] - lens[b])));
        json_array_append_new(toks, row);
    }
    gf_k_metric_json(k, "tokens", toks);
    /* a batch equals single runs, gated by the raced margins (first seed) */
    if (s->batch && B > 1)
        for (int32_t i = 0; i < 1; i++) {
            gp.sampler.seed = s->seeds[i];
            gp.seq_ids = NULL;
            char label[64];
            snprintf(label, sizeof label, "seed%llu", (unsigned long long)s->seeds[i]);
            gf_status st = gf_kind_batch_vs_single(k, label, B, prompts, lens, &gp, &s->gate, s->atol, NULL);
            if (st != GF_OK) {
                gf_k_status(k, st, label);
                break;
            }
        }
done:
    for (int32_t i = 0; runs && i < S * B; i++)
        gf_generation_free(runs[i]);
    free(runs);
    gf_k_free_tokens(prompts, B);
    free(lens);
}

const gf_kind_def gf_kind_seeded_reproducibility = {
    .name = "seeded_reproducibility",
    .summary = "a seed repeats, different seeds differ, a sampled batch equals single runs",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .parse = parse_seeded,
    .free_spec = seeded_free,
    .run = run_seeded,
};
