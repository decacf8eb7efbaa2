/* batch_consistency: each row of a left-padded batch against its prompt
 * alone, cached and uncached, gated. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "keys.h"
#include "batch.h"

typedef struct batch_spec {
    gf_prompt_spec *prompts;
    size_t n_prompts;
    long long max_new;
    int modes[2]; /* cached, uncached */
    double atol;
    gf_gate gate;
} batch_spec;

static void batch_free(void *p)
{
    batch_spec *s = p;
    if (s)
        gf_prompts_free(s->prompts, s->n_prompts);
    free(s);
}

static const char *const k_modes[] = {"cached", "uncached", NULL};

static int parse_batch(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    batch_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->max_new = 24;
    s->atol = GF_ATOL_DEFAULT;
    s->modes[0] = s->modes[1] = 1;
    int bad = gf_y_prompts(ctx, m, "prompts", GF_Y_REQUIRED, &s->prompts, &s->n_prompts) < 0;
    bad |= gf_y_int(ctx, m, "max_new_tokens", 0, 1, 1 << 20, &s->max_new) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_gate(ctx, m, "gate", &s->gate) < 0;
    const gf_ynode *mn = gf_y_get(ctx, m, "modes", 0);
    if (mn && gf_y_node_is_seq(ctx, mn, "'modes'")) {
        s->modes[0] = s->modes[1] = 0;
        if (mn->n == 0) {
            gf_y_error(ctx, mn, "'modes' is empty");
            bad = 1;
        }
        for (size_t i = 0; i < mn->n; i++) {
            const gf_ynode *it = mn->items[i];
            int which = -1;
            for (int w = 0; k_modes[w]; w++)
                if (it->type == GF_YN_SCALAR && !strcmp(it->value, k_modes[w]))
                    which = w;
            if (which < 0) {
                gf_y_error(ctx, it, "'modes' entries must be cached or uncached");
                bad = 1;
            } else {
                s->modes[which] = 1;
            }
        }
    } else if (mn) {
        bad = 1;
    }
    return bad ? -1 : 0;
}

static void run_batch(const gf_case *c, gf_krun *k)
{
    const batch_spec *s = c->spec;
    const int32_t B = (int32_t)s->n_prompts;
    int32_t **prompts = calloc((size_t)B, sizeof *prompts), *lens = calloc((size_t)B, sizeof *lens);
    if (!prompts || !lens) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    for (int32_t b = 0; b < B; b++) {
        gf_status st = gf_prompt_tokens(k->session, &s->prompts[b], &prompts[b], &lens[b]);
        if (st != GF_OK) {
            gf_k_error(k, "%s", gf_error_msg());
            goto done;
        }
    }
    gf_k_metric_json(k, "prompt_tokens", gf_json_ints(lens, (size_t)B));
    for (int mode = 0; mode < 2; mode++) {
        if (!s->modes[mode])
            continue;
        gf_generate_params gp = gf_generate_defaults();
        gp.max_new_tokens = (int32_t)s->max_new;
        gp.sampler = gf_sampler_greedy();
        gp.eos_id = -1;
        gp.use_cache = mode == 0;
        gf_status st = gf_kind_batch_vs_single(k, k_modes[mode], B, prompts, lens, &gp, &s->gate, s->atol, NULL);
        if (st != GF_OK) {
            gf_k_status(k, st, k_modes[mode]);
        }
    }
done:
    for (int32_t b = 0; prompts && b < B; b++)
        free(prompts[b]);
    free(prompts);
    free(lens);
}

const gf_kind_def gf_kind_batch_consistency = {
    .name = "batch_consistency",
    .summary = "a left-padded greedy batch equals each prompt run alone (cached and uncached)",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .parse = parse_batch,
    .free_spec = batch_free,
    .run = run_batch,
};
