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
#include <string.h>

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

/* ---- the llamacpp profile (sample_ex): llama.cpp's own chain ----
 *
 * Under the llamacpp profile (docs/sampler.md) the order is llama.cpp's:
 * logit bias, then common/sampling's default penalties, DRY, top-n-sigma,
 * top-k, typical, top-p, min-p, XTC, temperature (or the case's `chain`), each stage one of
 * llama.cpp's samplers with its own off values (top_k <= 0, top_p >= 1,
 * min_p <= 0, typical >= 1 are no-ops there, temperature <= 0 keeps the
 * maximum); the penalties sampler is fed the history with
 * llama_sampler_accept, the last penalty_last_n ids (-1: all). The race over
 * the tokens it kept is the same as above. */

uint32_t lc_sample_profiles(void) { return GF_PROFILE_BIT(GF_PROFILE_LLAMACPP); }

/* ext with the fields past its struct_size at their documented defaults
 * (gf_sampler_ext_defaults; the module links only status.c of genfence) */
static void ext_load(const gf_sampler_ext *in, gf_sampler_ext *out)
{
    memset(out, 0, sizeof *out);
    out->typical_p = 1.0;
    out->repetition_penalty = 1.0;
    out->penalty_last_n = -1;
    out->min_tokens_to_keep = 1;
    out->eos_id = -1;
    out->xtc_threshold = 0.1;
    out->xtc_min_keep = 1;
    out->top_n_sigma = -1.0;
    out->dry_base = 1.75;
    out->dry_allowed_length = 2;
    out->dry_penalty_last_n = -1;
    out->mirostat_tau = 5.0;
    out->mirostat_eta = 0.1;
    memcpy(out, in, in->struct_size < sizeof *out ? in->struct_size : sizeof *out);
}

#define LC_STAGE_MIROSTAT 100 /* after temperature when mirostat is on: no chain names it */

static struct llama_sampler *stage(const gf_sampler_params *p, const gf_sampler_ext *e, int32_t V, int st)
{
    const size_t keep = (size_t)(e->min_tokens_to_keep > 0 ? e->min_tokens_to_keep : 0);
    switch (st) {
    case GF_STAGE_PENALTIES: {
        int32_t last = e->penalty_last_n < 0 ? e->n_history : e->penalty_last_n;
        struct llama_sampler *s = llama_sampler_init_penalties(V, last, (float)e->repetition_penalty,
                                                               (float)e->frequency_penalty, (float)e->presence_penalty);
        for (int32_t i = 0; s && i < e->n_history; i++)
            llama_sampler_accept(s, e->history[i]);
        return s;
    }
    case GF_STAGE_TOP_K: return llama_sampler_init_top_k(p->use_top_k ? p->top_k : 0);
    case GF_STAGE_TYPICAL_P: return llama_sampler_init_typical(e->use_typical_p ? (float)e->typical_p : 1.0f, keep);
    case GF_STAGE_TOP_P: return llama_sampler_init_top_p(p->use_top_p ? (float)p->top_p : 1.0f, keep);
    case GF_STAGE_MIN_P: return llama_sampler_init_min_p(e->use_min_p ? (float)e->min_p : 0.0f, keep);
    case GF_STAGE_TEMPERATURE: return llama_sampler_init_temp((float)p->temperature);
    case GF_STAGE_XTC: /* genfence's validator passes only <= 0 and >= 1: the coin never decides */
        return llama_sampler_init_xtc((float)e->xtc_probability, (float)e->xtc_threshold,
                                      (size_t)(e->xtc_min_keep > 0 ? e->xtc_min_keep : 0), (uint32_t)p->seed);
    case GF_STAGE_TOP_N_SIGMA: return llama_sampler_init_top_n_sigma((float)e->top_n_sigma);
    case GF_STAGE_DRY: { /* no breakers (lc_sample_ex refuses them): llama.cpp reads no vocabulary then */
        int32_t last = e->dry_penalty_last_n < 0 ? e->n_history : e->dry_penalty_last_n;
        struct llama_sampler *s = llama_sampler_init_dry(NULL, (float)e->dry_multiplier, (float)e->dry_base,
                                                         e->dry_allowed_length, last, NULL, 0);
        for (int32_t i = 0; s && i < e->n_history; i++)
            llama_sampler_accept(s, e->history[i]);
        return s;
    }
    case LC_STAGE_MIROSTAT: {
        const double mu = e->use_mirostat_mu ? e->mirostat_mu : 2.0 * e->mirostat_tau;
        if (e->mirostat == 1)
            return llama_sampler_init_mirostat(V, (uint32_t)p->seed, (float)(mu / 2.0), (float)e->mirostat_eta, 100);
        return llama_sampler_init_mirostat_v2((uint32_t)p->seed, (float)(mu / 2.0), (float)e->mirostat_eta);
    }
    default: return NULL;
    }
}

gf_status lc_sample_ex(void *model, const float *logits, int32_t B, const gf_sampler_params *params,
                       const gf_rng_draws *draws, int32_t *ids_out)
{
    if (!params || !params->ext)
        return lc_sample(model, logits, B, params, draws, ids_out);
    if (!logits || B < 1 || !draws || !draws->u || draws->V < 1 || !ids_out)
        return gf_error_set(GF_E_INVALID_ARG, "llamacpp sample_ex: missing logits, draws or output");
    gf_sampler_ext e;
    ext_load(params->ext, &e);
    if (e.profile != GF_PROFILE_LLAMACPP)
        return gf_error_set(GF_E_UNSUPPORTED, "llamacpp sample_ex: profile %d is not llamacpp", (int)e.profile);
    if (e.n_dry_breakers > 0 && e.dry_multiplier != 0.0)
        return gf_error_set(GF_E_UNSUPPORTED,
                            "llamacpp sample_ex: DRY sequence breakers as token ids reach llama.cpp only through "
                            "its C++ test hook (llama_sampler_init_dry_testing); its C API takes strings");
    static const int32_t k_default[] = {GF_STAGE_PENALTIES, GF_STAGE_DRY,       GF_STAGE_TOP_N_SIGMA,
                                        GF_STAGE_TOP_K,     GF_STAGE_TYPICAL_P, GF_STAGE_TOP_P,
                                        GF_STAGE_MIN_P,     GF_STAGE_XTC,       GF_STAGE_TEMPERATURE};
    /* mirostat: common/sampling's temperature then mirostat, at the step's mu
     * (llama.cpp starts mu at 2 * tau: tau mu / 2 gives that mu; the tau of its
     * own update is not used, the draw is the race below over what it kept) */
    static const int32_t k_mirostat[] = {GF_STAGE_TEMPERATURE, LC_STAGE_MIROSTAT};
    const int32_t *order = e.mirostat ? k_mirostat : e.n_chain > 0 ? e.chain : k_default;
    const int32_t n_order = e.mirostat      ? 2
                            : e.n_chain > 0 ? e.n_chain
                                            : (int32_t)(sizeof k_default / sizeof k_default[0]);
    const int32_t V = draws->V;
    llama_token_data *data = malloc((size_t)V * sizeof *data);
    llama_logit_bias *bias = malloc((size_t)(e.n_bias > 0 ? e.n_bias : 1) * sizeof *bias);
    gf_status st = data && bias ? GF_OK : gf_error_set(GF_E_NOMEM, "llamacpp sample_ex: out of memory");
    for (int32_t i = 0; st == GF_OK && i < e.n_bias; i++)
        bias[i] = (llama_logit_bias){.token = e.bias[i].token, .bias = e.bias[i].bias};
    for (int32_t b = 0; st == GF_OK && b < B; b++) {
        const float *row = logits + (size_t)b * V;
        const double *u = draws->u + (size_t)b * V;
        for (int32_t i = 0; i < V; i++)
            data[i] = (llama_token_data){.id = i, .logit = row[i], .p = 0.0f};
        llama_token_data_array cur = {.data = data, .size = (size_t)V, .selected = -1, .sorted = false};
        int ok = e.n_bias == 0 || apply(llama_sampler_init_logit_bias(V, e.n_bias, bias), &cur);
        for (int32_t s = 0; ok && s < n_order; s++)
            ok = apply(stage(params, &e, V, order[s]), &cur);
        if (!ok) {
            st = gf_error_set(GF_E_NOMEM, "llamacpp sample_ex: out of memory");
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
            st = gf_error_set(GF_E_BACKEND, "llamacpp sample_ex: llama.cpp's chain kept no finite token in row %d", b);
            break;
        }
        ids_out[b] = best;
    }
    free(data);
    free(bias);
    return st;
}
