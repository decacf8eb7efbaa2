/* The sample slot over llama.cpp's own samplers (llama.h's llama_sampler_*).
 *
 * The slot contract (docs/backends.md) fixes the order temperature -> top-k
 * -> top-p -> race and the uniforms of the race, so that a backend's draw can
 * be compared with the engine's token for token. Here each filtering step is
 * llama.cpp's own sampler, applied to one llama_token_data_array in the
 * contract's order:
 *   temperature  llama_sampler_init_temp(t)         (0: llama_sampler_init_greedy)
 *   top-k        llama_sampler_init_top_k(k)
 *   top-p        llama_sampler_init_top_p(p, min_keep 1)
 * and the race (the only step llama.cpp cannot take: its llama_sampler_dist
 * draws from its own mt19937) is done here over the tokens llama.cpp kept,
 * with llama.cpp's scores: argmax of z_i - log(-log(u_i)), the lowest id on
 * an exact tie. Whatever differs from the engine's sampler (float vs double
 * arithmetic, ties at the top-k threshold, the top-p boundary) therefore shows
 * up in the sampler kinds' slot check as llama.cpp's behaviour.
 *
 * Note: llama.cpp's usual chain (common/sampling) applies temperature after
 * top-k and top-p; the contract's order is used here so the slot answers the
 * question the cases ask. */
#include <math.h>
#include <stdlib.h>

#include <llama.h>

#include "genfence/sampler.h"
#include "lc.h"

/* Apply one llama.cpp sampler to cur (NULL smpl: out of memory). */
static int apply(struct llama_sampler *smpl, llama_token_data_array *cur)
{
    if (!smpl)
        return 0;
    llama_sampler_apply(smpl, cur);
    llama_sampler_free(smpl);
    return 1;
}

gf_status lc_sample(void *model, const float *logits, int32_t B, const gf_sampler_params *params,
                    const gf_rng_draws *draws, int32_t *ids_out)
{
    (void)model; /* sampler-only: nothing here needs the model */
    if (!logits || B < 1 || !params || !draws || !draws->u || draws->V < 1 || !ids_out)
        return gf_error_set(GF_E_INVALID_ARG, "llamacpp sample: missing logits, draws or output");
    const int32_t V = draws->V;
    llama_token_data *data = malloc((size_t)V * sizeof *data);
    if (!data)
        return gf_error_set(GF_E_NOMEM, "llamacpp sample: out of memory");
    gf_status st = GF_OK;
    for (int32_t b = 0; st == GF_OK && b < B; b++) {
        const float *row = logits + (size_t)b * V;
        const double *u = draws->u + (size_t)b * V;
        for (int32_t i = 0; i < V; i++)
            data[i] = (llama_token_data){.id = i, .logit = row[i], .p = 0.0f};
        llama_token_data_array cur = {.data = data, .size = (size_t)V, .selected = -1, .sorted = false};
        if (params->temperature == 0.0) {
            if (!apply(llama_sampler_init_greedy(), &cur)) {
                st = gf_error_set(GF_E_NOMEM, "llamacpp sample: out of memory");
                break;
            }
            if (cur.selected < 0 || (size_t)cur.selected >= cur.size) {
                st = gf_error_set(GF_E_BACKEND, "llamacpp sample: llama.cpp's greedy sampler selected nothing");
                break;
            }
            ids_out[b] = cur.data[cur.selected].id;
            continue;
        }
        int ok = apply(llama_sampler_init_temp((float)params->temperature), &cur);
        if (ok && params->use_top_k)
            ok = apply(llama_sampler_init_top_k(params->top_k), &cur);
        if (ok && params->use_top_p)
            ok = apply(llama_sampler_init_top_p((float)params->top_p, 1), &cur);
        if (!ok) {
            st = gf_error_set(GF_E_NOMEM, "llamacpp sample: out of memory");
            break;
        }
        int32_t best = -1;
        double best_score = -INFINITY;
        for (size_t i = 0; i < cur.size; i++) {
            const llama_token id = cur.data[i].id;
            const double z = cur.data[i].logit;
            if (id < 0 || id >= V || !(z > -INFINITY))
                continue;
            const double score = z - log(-log(u[id]));
            if (best < 0 || score > best_score || (score == best_score && id < best)) {
                best = id;
                best_score = score;
            }
        }
        if (best < 0) {
            st = gf_error_set(GF_E_BACKEND, "llamacpp sample: llama.cpp's samplers kept no finite token in row %d", b);
            break;
        }
        ids_out[b] = best;
    }
    free(data);
    return st;
}
