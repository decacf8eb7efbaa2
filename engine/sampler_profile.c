/* Sampler profiles: names, defaults, the versioned extension and the
 * per-profile argument semantics (include/genfence/sampler.h,
 * docs/sampler.md "Profiles"). The chain itself is engine/sampler_chain.c. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "genfence/sampler.h"
#include "sampler_internal.h"

static const char *const k_profiles[GF_PROFILE_COUNT] = {"seed", "hf", "llamacpp", "vllm"};
static const char *const k_stages[] = {NULL, "penalties", "top_k", "typical_p", "top_p", "min_p", "temperature"};

const char *gf_sampler_profile_name(int profile)
{
    return profile >= 0 && profile < GF_PROFILE_COUNT ? k_profiles[profile] : NULL;
}

int gf_sampler_profile_from_name(const char *name)
{
    for (int i = 0; name && i < GF_PROFILE_COUNT; i++)
        if (!strcmp(name, k_profiles[i]))
            return i;
    return -1;
}

const char *gf_sampler_stage_name(int stage)
{
    return stage >= GF_STAGE_PENALTIES && stage <= GF_STAGE_TEMPERATURE ? k_stages[stage] : NULL;
}

int gf_sampler_stage_from_name(const char *name)
{
    for (int i = GF_STAGE_PENALTIES; name && i <= GF_STAGE_TEMPERATURE; i++)
        if (!strcmp(name, k_stages[i]))
            return i;
    return -1;
}

gf_sampler_ext gf_sampler_ext_defaults(void)
{
    gf_sampler_ext e;
    memset(&e, 0, sizeof e);
    e.struct_size = (uint32_t)sizeof e;
    e.profile = GF_PROFILE_SEED;
    e.min_p = 0.0;
    e.typical_p = 1.0;
    e.repetition_penalty = 1.0;
    e.penalty_last_n = -1;
    e.min_tokens_to_keep = 1;
    e.eos_id = -1;
    return e;
}

gf_status gf_sampler_ext_load(const gf_sampler_params *p, gf_sampler_ext *out)
{
    *out = gf_sampler_ext_defaults();
    if (!p->ext)
        return GF_OK;
    uint32_t n = p->ext->struct_size;
    if (n < offsetof(gf_sampler_ext, profile) + sizeof(int32_t))
        return gf_error_set(GF_E_INVALID_ARG, "sampler extension: struct_size %u is too small", n);
    memcpy(out, p->ext, n < sizeof *out ? n : sizeof *out);
    out->struct_size = (uint32_t)sizeof *out;
    return GF_OK;
}

int gf_sampler_params_profile(const gf_sampler_params *p)
{
    if (!p || !p->ext || p->ext->struct_size < offsetof(gf_sampler_ext, profile) + sizeof(int32_t))
        return GF_PROFILE_SEED;
    return p->ext->profile;
}

int gf_sampler_ext_is_plain(const gf_sampler_ext *e)
{
    return e->profile == GF_PROFILE_SEED && e->n_chain == 0 && !e->use_min_p && !e->use_typical_p &&
           e->repetition_penalty == 1.0 && e->frequency_penalty == 0.0 && e->presence_penalty == 0.0 &&
           e->min_tokens_to_keep <= 1 && e->n_bias == 0 && (e->min_new_tokens == 0 || e->eos_id < 0);
}

int gf_sampler_params_plain(const gf_sampler_params *p)
{
    if (!p || !p->ext)
        return 1;
    gf_sampler_ext e;
    if (gf_sampler_ext_load(p, &e) != GF_OK)
        return 0;
    return gf_sampler_ext_is_plain(&e);
}

gf_status gf_sample_row(const float *logits, int32_t V, const gf_sampler_params *p, const int32_t *tokens,
                        int32_t n_tokens, int32_t n_prompt, int32_t eos_id, uint64_t seq_id, uint64_t step,
                        gf_sample_result *out)
{
    if (!p || !p->ext)
        return gf_sample(logits, V, p, seq_id, step, out);
    gf_sampler_ext e;
    gf_status st = gf_sampler_ext_load(p, &e);
    if (st != GF_OK)
        return st;
    e.history = tokens;
    e.n_history = n_tokens;
    e.n_prompt = n_prompt;
    if (e.eos_id < 0)
        e.eos_id = eos_id;
    gf_sampler_params q = *p;
    q.ext = &e;
    return gf_sample(logits, V, &q, seq_id, step, out);
}

int gf_sampler_is_stop(const gf_sampler_params *p, int32_t token)
{
    gf_sampler_ext e;
    if (!p || !p->ext || gf_sampler_ext_load(p, &e) != GF_OK)
        return 0;
    for (int32_t i = 0; i < e.n_stop_ids; i++)
        if (e.stop_ids[i] == token)
            return 1;
    return 0;
}

#define BAD(...) return gf_error_set(GF_E_INVALID_ARG, __VA_ARGS__)

static gf_status validate_common(const gf_sampler_ext *e, const char *pn)
{
    if (e->n_bias < 0 || (e->n_bias > 0 && !e->bias))
        BAD("%s: logit_bias: %d entries, pointer %s", pn, (int)e->n_bias, e->bias ? "set" : "NULL");
    for (int32_t i = 0; i < e->n_bias; i++) {
        if (e->bias[i].token < 0)
            BAD("%s: logit_bias token %d is negative", pn, (int)e->bias[i].token);
        if (isnan(e->bias[i].bias) || (isinf(e->bias[i].bias) && e->bias[i].bias > 0))
            BAD("%s: logit_bias for token %d is %s (a finite number or -inf)", pn, (int)e->bias[i].token,
                isnan(e->bias[i].bias) ? "NaN" : "+inf");
        for (int32_t j = 0; j < i; j++)
            if (e->bias[j].token == e->bias[i].token)
                BAD("%s: logit_bias names token %d twice", pn, (int)e->bias[i].token);
    }
    if (e->n_history < 0 || (e->n_history > 0 && !e->history))
        BAD("%s: history: %d ids, pointer %s", pn, (int)e->n_history, e->history ? "set" : "NULL");
    for (int32_t i = 0; i < e->n_history; i++)
        if (e->history[i] < 0)
            BAD("%s: history[%d] = %d is negative", pn, (int)i, (int)e->history[i]);
    if (e->n_prompt < 0 || e->n_prompt > e->n_history)
        BAD("%s: history_prompt %d must lie in [0, %d] (the history's length)", pn, (int)e->n_prompt,
            (int)e->n_history);
    if (e->min_new_tokens < 0)
        BAD("%s: min_new_tokens must be >= 0, got %d", pn, (int)e->min_new_tokens);
    if (e->eos_id < -1)
        BAD("%s: eos_id must be >= 0 (or -1: none), got %d", pn, (int)e->eos_id);
    if (e->n_stop_ids < 0 || (e->n_stop_ids > 0 && !e->stop_ids))
        BAD("%s: stop_token_ids: %d ids, pointer %s", pn, (int)e->n_stop_ids, e->stop_ids ? "set" : "NULL");
    for (int32_t i = 0; i < e->n_stop_ids; i++)
        if (e->stop_ids[i] < 0)
            BAD("%s: stop_token_ids[%d] = %d is negative", pn, (int)i, (int)e->stop_ids[i]);
    if (!isfinite(e->frequency_penalty))
        BAD("%s: frequency_penalty must be finite, got %g", pn, e->frequency_penalty);
    if (!isfinite(e->presence_penalty))
        BAD("%s: presence_penalty must be finite, got %g", pn, e->presence_penalty);
    if (e->penalty_last_n < -1)
        BAD("%s: penalty_last_n must be >= -1 (-1: the whole history), got %d", pn, (int)e->penalty_last_n);
    if (e->n_chain != 0 && e->profile != GF_PROFILE_LLAMACPP)
        BAD("%s: an explicit chain is llamacpp's (its order is configurable); %s has a fixed order", pn, pn);
    return GF_OK;
}

static int chain_has(const gf_sampler_ext *e, int stage)
{
    for (int32_t i = 0; i < e->n_chain; i++)
        if (e->chain[i] == stage)
            return 1;
    return 0;
}

static gf_status validate_llamacpp_chain(const gf_sampler_params *p, const gf_sampler_ext *e)
{
    if (e->n_chain == 0)
        return GF_OK;
    if (e->n_chain < 0 || e->n_chain > GF_SAMPLER_MAX_CHAIN)
        BAD("llamacpp: chain has %d stages (1..%d)", (int)e->n_chain, GF_SAMPLER_MAX_CHAIN);
    for (int32_t i = 0; i < e->n_chain; i++) {
        if (!gf_sampler_stage_name(e->chain[i]))
            BAD("llamacpp: chain[%d] = %d is not a stage", (int)i, (int)e->chain[i]);
        for (int32_t j = 0; j < i; j++)
            if (e->chain[j] == e->chain[i])
                BAD("llamacpp: chain names '%s' twice", gf_sampler_stage_name(e->chain[i]));
    }
    if (!chain_has(e, GF_STAGE_TEMPERATURE))
        BAD("llamacpp: chain lacks 'temperature' (llama.cpp's dist would sample at temperature 1)");
    const struct { int set, stage; } need[] = {
        {p->use_top_k, GF_STAGE_TOP_K},
        {p->use_top_p, GF_STAGE_TOP_P},
        {e->use_min_p, GF_STAGE_MIN_P},
        {e->use_typical_p, GF_STAGE_TYPICAL_P},
        {e->repetition_penalty != 1.0 || e->frequency_penalty != 0.0 || e->presence_penalty != 0.0,
         GF_STAGE_PENALTIES},
    };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (need[i].set && !chain_has(e, need[i].stage))
            BAD("llamacpp: '%s' is set but not in the chain", gf_sampler_stage_name(need[i].stage));
    return GF_OK;
}

static gf_status validate_temperature(double T, int profile)
{
    switch (profile) {
    case GF_PROFILE_HF:
        if (!(T > 0))
            BAD("hf: temperature (=%.17g) has to be a strictly positive float (HF's TemperatureLogitsWarper "
                "raises; greedy is do_sample=False)", T);
        return GF_OK;
    case GF_PROFILE_LLAMACPP:
        if (isnan(T))
            BAD("llamacpp: temperature is NaN (llama.cpp would divide every logit by it)");
        return GF_OK; /* <= 0: greedy at its place in the chain; +inf: uniform */
    case GF_PROFILE_VLLM:
        if (isnan(T) || isinf(T)) /* SamplingParams: "a non-negative finite number" */
            BAD("vllm: temperature must be a non-negative finite number, got %s", isnan(T) ? "NaN" : T > 0 ? "inf" : "-inf");
        if (T < 0)
            BAD("vllm: temperature must be a non-negative finite number, got %.17g", T);
        return GF_OK;
    default:
        return GF_OK;
    }
}

gf_status gf_sampler_ext_validate(const gf_sampler_params *p, const gf_sampler_ext *e)
{
    const int pr = e->profile;
    const char *pn = gf_sampler_profile_name(pr);
    if (!pn)
        BAD("sampler profile %d is not one of seed, hf, llamacpp, vllm", (int)pr);
    gf_status st = validate_common(e, pn);
    if (st != GF_OK)
        return st;
    st = validate_temperature(p->temperature, pr);
    if (st != GF_OK)
        return st;
    switch (pr) {
    case GF_PROFILE_SEED:
        if (e->use_min_p && !(e->min_p >= 0.0 && e->min_p <= 1.0))
            BAD("seed: min_p must lie in [0, 1], got %.17g", e->min_p);
        if (e->use_typical_p && !(e->typical_p > 0.0 && e->typical_p <= 1.0))
            BAD("seed: typical_p must lie in (0, 1], got %.17g", e->typical_p);
        if (!(e->repetition_penalty > 0.0) || isinf(e->repetition_penalty))
            BAD("seed: repetition_penalty must be a finite number > 0, got %.17g", e->repetition_penalty);
        if (e->min_tokens_to_keep < 1)
            BAD("seed: min_tokens_to_keep must be >= 1, got %d", (int)e->min_tokens_to_keep);
        return GF_OK;
    case GF_PROFILE_HF:
        if (p->use_top_k && p->top_k < 0)
            BAD("hf: top_k has to be a strictly positive integer (0: off), got %d", (int)p->top_k);
        if (p->use_top_p && p->top_p < 0)
            BAD("hf: top_p has to be a float in [0, 1] (>= 1 and NaN: off), got %.17g", p->top_p);
        if (e->use_min_p && !(e->min_p >= 0.0 && e->min_p <= 1.0))
            BAD("hf: min_p has to be a float in the [0, 1] interval, got %.17g", e->min_p);
        if (e->use_typical_p && e->typical_p <= 0)
            BAD("hf: typical_p has to be a float > 0 (>= 1 and NaN: off), got %.17g", e->typical_p);
        if (!(e->repetition_penalty > 0.0))
            BAD("hf: repetition_penalty has to be a strictly positive float, got %.17g", e->repetition_penalty);
        if (e->frequency_penalty != 0.0)
            BAD("hf: transformers has no frequency_penalty (got %g)", e->frequency_penalty);
        if (e->presence_penalty != 0.0)
            BAD("hf: transformers has no presence_penalty (got %g)", e->presence_penalty);
        if (e->penalty_last_n != -1)
            BAD("hf: repetition_penalty covers the whole history; penalty_last_n is llamacpp's");
        if (e->min_tokens_to_keep < 1)
            BAD("hf: min_tokens_to_keep has to be a positive integer, got %d", (int)e->min_tokens_to_keep);
        return GF_OK;
    case GF_PROFILE_LLAMACPP:
        /* min_p: any value. llama.cpp's min-p keeps the top max(1, min_keep)
         * when fewer pass (p > 1: none but the top); NaN passes every
         * comparison's negation, so it keeps all; <= 0 is off. */
        if (!(e->repetition_penalty > 0.0) || isinf(e->repetition_penalty))
            BAD("llamacpp: repeat penalty must be a finite number > 0 (1: off), got %.17g", e->repetition_penalty);
        if (e->min_tokens_to_keep < 0)
            BAD("llamacpp: min_keep must be >= 0, got %d", (int)e->min_tokens_to_keep);
        if (e->min_new_tokens != 0)
            BAD("llamacpp: llama.cpp's sampler has no min_new_tokens (ban EOS with logit_bias)");
        return validate_llamacpp_chain(p, e);
    case GF_PROFILE_VLLM:
        if (p->use_top_k && p->top_k < -1)
            BAD("vllm: top_k must be -1 or 0 (disable) or at least 1, got %d", (int)p->top_k);
        if (p->use_top_p && !(p->top_p > 0.0 && p->top_p <= 1.0))
            BAD("vllm: top_p must be in (0, 1], got %.17g", p->top_p);
        if (e->use_min_p && !(e->min_p >= 0.0 && e->min_p <= 1.0))
            BAD("vllm: min_p must be in [0, 1], got %.17g", e->min_p);
        if (e->use_typical_p)
            BAD("vllm: vLLM has no typical_p");
        if (!(e->repetition_penalty > 0.0) || isinf(e->repetition_penalty))
            BAD("vllm: repetition_penalty must be greater than zero, got %.17g", e->repetition_penalty);
        if (!(e->frequency_penalty >= -2.0 && e->frequency_penalty <= 2.0))
            BAD("vllm: frequency_penalty must be in [-2, 2], got %g", e->frequency_penalty);
        if (!(e->presence_penalty >= -2.0 && e->presence_penalty <= 2.0))
            BAD("vllm: presence_penalty must be in [-2, 2], got %g", e->presence_penalty);
        if (e->penalty_last_n != -1)
            BAD("vllm: penalties cover the whole prompt and output; penalty_last_n is llamacpp's");
        if (e->min_tokens_to_keep != 1)
            BAD("vllm: vLLM has no min_tokens_to_keep (got %d)", (int)e->min_tokens_to_keep);
        return GF_OK;
    }
    return GF_OK;
}

/* ---- the semantics table (genfence list --profiles, docs/sampler.md) ---- */

#define ROW(w, a, b, c, d) {w, {a, b, c, d}}
static const gf_profile_row k_rows[] = {
    ROW("order", "bias, eos ban, penalties, temperature, top_k, top_p, min_p, typical_p",
     "bias, penalties, eos ban, temperature, top_k, top_p, min_p, typical_p",
     "bias, penalties, top_k, typical_p, top_p, min_p, temperature (chain: reorders)",
     "bias, eos ban, penalties, [greedy], temperature, min_p, top_k, top_p"),
    ROW("temperature 0", "greedy (argmax after penalties)", "error (do_sample=False is greedy)",
     "<= 0: keep the first maximum at its place in the chain", "< 1e-5: greedy (argmax after penalties)"),
    ROW("temperature NaN / inf / < 0", "error / error / error", "error / uniform / error", "error / uniform / greedy",
     "error / error / error"),
    ROW("top_k off", "unset", "0 (unset)", "<= 0", "-1 or 0 (vLLM >= 0.8; older refused 0)"),
    ROW("top_k < 0", "error (k < 1)", "error", "off", "< -1: error"),
    ROW("top_k ties", "kept", "kept", "exactly k (lowest index first)", "kept"),
    ROW("top_p 0", "error", "keeps min_tokens_to_keep", "keeps one (min_keep)", "error"),
    ROW("top_p >= 1", "1: drop once prefix >= 1 (underflow); > 1 error", "off", "off", "1: off; > 1 error"),
    ROW("top_p NaN", "error", "off", "keeps all", "error"),
    ROW("top_p rule", "drop once exclusive prefix >= p", "drop ascending cumsum <= 1 - p",
     "keep shortest prefix with inclusive sum >= p", "drop ascending cumsum <= 1 - p, keep top 1"),
    ROW("min_p", "[0, 1]; keep p >= min_p * p_max", "[0, 1]; same", "<= 0 off; NaN keeps all; z >= z_max + log min_p, at least max(1, min_keep) (> 1: the top)",
     "[0, 1]; same, after temperature"),
    ROW("typical_p", "(0, 1]; HF's rule", "<= 0 error; >= 1, NaN off; cumsum < mass",
     ">= 1 off; NaN keeps all; first cumsum > p", "error (none)"),
    ROW("repetition_penalty", "> 0, whole history, z < 0 ? z*r : z/r", "> 0, whole history, z < 0 ? z*r : z/r",
     "> 0, last penalty_last_n, z <= 0 ? z*r : z/r", "> 0, prompt + output, z > 0 ? z/r : z*r"),
    ROW("frequency / presence", "generated ids; z -= f*count + p*(count>0)", "error (none)",
     "last penalty_last_n ids; same formula", "generated ids; [-2, 2]; same formula"),
    ROW("min_tokens_to_keep", ">= 1 (top_k, top_p, min_p, typical)", ">= 1 (top_k, top_p, min_p, typical)",
     "min_keep >= 0 (top_p, min_p, typical)", "1 only"),
    ROW("min_new_tokens", "bans eos_id", "bans eos_id", "error (none)", "bans eos_id and stop_token_ids"),
    ROW("logit_bias", "added", "added (sequence_bias)", "added", "added (SamplingParams; the OpenAI server clamps to [-100, 100])"),
    ROW("all -inf / NaN / +inf row", "error", "error", "error", "valid id: first NaN, else first +inf, else 0"),
};

const gf_profile_row *gf_sampler_profile_rows(size_t *n)
{
    *n = sizeof k_rows / sizeof k_rows[0];
    return k_rows;
}
