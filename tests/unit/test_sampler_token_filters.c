/* Issue 34's further filters (docs/sampler.md, "Filters"): hf's epsilon and
 * eta cutoffs, bad_words_ids and sequence_bias over several tokens,
 * min_length, forced BOS / EOS; vllm's allowed_token_ids, bad words and a
 * given structured-output mask. Hand-computed kept sets and z, the places
 * where hf and vllm read the same list differently, and every refusal with
 * the peer's message. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "genfence/sampler.h"

static const double PROBS5[5] = {0.5, 0.3, 0.1, 0.06, 0.04};
static float L5[5];

static void init_l5(void)
{
    for (int i = 0; i < 5; i++)
        L5[i] = (float)log(PROBS5[i]);
}

TestSuite(sampler_token_filters, .init = init_l5);

static gf_sampler_ext E;

static gf_sampler_params prof(int profile, double temperature)
{
    E = gf_sampler_ext_defaults();
    E.profile = profile;
    gf_sampler_params p = gf_sampler_greedy();
    p.temperature = temperature;
    p.ext = &E;
    return p;
}

#define B(i) (1L << (i))

/* the kept set of gf_sampler_filter over V <= 32 as a bitmask; -1 on error */
static long kept_mask(const float *logits, int V, const gf_sampler_params *p, double *z)
{
    if (gf_sampler_filter(logits, V, p, z) != GF_OK)
        return -1;
    long m = 0;
    for (int i = 0; i < V; i++)
        if (z[i] != -INFINITY)
            m |= B(i);
    return m;
}

static void expect_mask(const gf_sampler_params *p, long want, const char *what)
{
    double z[5];
    long got = kept_mask(L5, 5, p, z);
    cr_assert(got >= 0, "%s: %s", what, gf_error_msg());
    cr_assert_eq(got, want, "%s: kept mask 0x%lx, want 0x%lx", what, got, want);
}

static void expect_error(const gf_sampler_params *p, const char *needle)
{
    double z[5];
    cr_assert_eq(gf_sampler_filter(L5, 5, p, z), GF_E_INVALID_ARG, "accepted (want an error naming '%s')", needle);
    cr_assert(strstr(gf_error_msg(), needle), "message '%s' lacks '%s'", gf_error_msg(), needle);
}

Test(sampler_token_filters, hf_epsilon_cutoff)
{
    gf_sampler_params p = prof(GF_PROFILE_HF, 1.0);
    E.epsilon_cutoff = 0.07; /* 0.06 and 0.04 are below */
    expect_mask(&p, B(0) | B(1) | B(2), "epsilon 0.07");
    E.epsilon_cutoff = 0.059; /* p < epsilon: 0.06 stays */
    expect_mask(&p, B(0) | B(1) | B(2) | B(3), "epsilon 0.059");
    const double off[] = {0.0, 1.0, 1.5, -0.2, NAN}; /* generate() adds it for (0, 1) only */
    for (int i = 0; i < 5; i++) {
        E.epsilon_cutoff = off[i];
        expect_mask(&p, 0x1f, "epsilon off");
    }
    E.epsilon_cutoff = 0.2; /* the top min_tokens_to_keep stay */
    E.min_tokens_to_keep = 4;
    expect_mask(&p, B(0) | B(1) | B(2) | B(3), "epsilon 0.2, min_tokens_to_keep 4");
    E.min_tokens_to_keep = 9; /* more than V: torch.topk's k is V, its k-th the smallest: all stay */
    expect_mask(&p, 0x1f, "epsilon 0.2, min_tokens_to_keep 9");
    /* after temperature: at T 0.5 the probabilities are squared and renormalised */
    p = prof(GF_PROFILE_HF, 0.5);
    E.epsilon_cutoff = 0.07; /* 0.25, .09, .01, .0036, .0016 over 0.3552: 0.1 -> 0.028 is dropped */
    expect_mask(&p, B(0) | B(1), "epsilon 0.07 at T 0.5");
}

Test(sampler_token_filters, hf_eta_cutoff)
{
    /* H = 1.2357 nats, e^-H = 0.29063: eta 0.3 cuts at min(0.3, 0.5477 * 0.29063 = 0.1592),
     * eta 0.09 at min(0.09, 0.3 * 0.29063 = 0.0872), eta 0.01 at min(0.01, 0.029) */
    gf_sampler_params p = prof(GF_PROFILE_HF, 1.0);
    E.eta_cutoff = 0.3;
    expect_mask(&p, B(0) | B(1), "eta 0.3");
    E.eta_cutoff = 0.09;
    expect_mask(&p, B(0) | B(1) | B(2), "eta 0.09 (the entropy term)");
    E.eta_cutoff = 0.05; /* min(0.05, 0.2236 * 0.29063 = 0.065): epsilon itself, 0.04 goes */
    expect_mask(&p, B(0) | B(1) | B(2) | B(3), "eta 0.05 (epsilon itself)");
    E.eta_cutoff = 0.01;
    expect_mask(&p, 0x1f, "eta 0.01");
    E.eta_cutoff = 1.0;
    expect_mask(&p, 0x1f, "eta 1: off");
    /* epsilon first, then eta over what epsilon left (renormalised) */
    E.epsilon_cutoff = 0.05;
    E.eta_cutoff = 0.3;
    expect_mask(&p, B(0) | B(1), "epsilon then eta");
}

Test(sampler_token_filters, bad_words_hf_and_vllm)
{
    static const int32_t hist[3] = {1, 2, 3};
    static const int32_t w_end[] = {3, 4}, w_no[] = {2, 4}, w_long[] = {1, 2, 3, 0}, w_eos[] = {2};
    const gf_token_seq words[] = {{2, w_end, 0}, {2, w_no, 0}, {4, w_long, 0}, {1, w_eos, 0}};
    for (int pf = GF_PROFILE_HF; pf <= GF_PROFILE_VLLM; pf += 2) {
        gf_sampler_params p = prof(pf, 1.0);
        E.history = hist;
        E.n_history = 3;
        E.eos_id = 2;
        E.bad_words = words;
        E.n_bad_words = 4;
        /* hf: [3, 4] bans 4; [1, 2, 3, 0] is longer than the history (HF
         * skips it); [2] is the eos: dropped. vllm: the generated ids are all
         * three, so [1, 2, 3, 0] fits (<= 3 + 1) and bans 0; [2] is banned. */
        expect_mask(&p, pf == GF_PROFILE_HF ? (B(0) | B(1) | B(2) | B(3)) : (B(1) | B(3)), "bad words");
        /* a prompt: vllm reads the generated ids only */
        E.n_prompt = 2;
        expect_mask(&p, pf == GF_PROFILE_HF ? (B(0) | B(1) | B(2) | B(3)) : (B(0) | B(1) | B(3)),
                    "bad words, prompt 2");
    }
    gf_sampler_params p = prof(GF_PROFILE_VLLM, 1.0);
    static const int32_t big[] = {1, 7};
    const gf_token_seq out[] = {{2, big, 0}};
    E.bad_words = out;
    E.n_bad_words = 1;
    expect_error(&p, "vocabulary size is 5");
}

Test(sampler_token_filters, hf_sequence_bias)
{
    static const int32_t hist[1] = {3};
    static const int32_t s30[] = {3, 0}, s20[] = {2, 0}, s0[] = {0}, s130[] = {1, 3, 0}, s4[] = {4};
    const gf_token_seq sb[] = {{2, s30, 0.25f}, {2, s20, 0.5f}, {1, s0, 0.5f}, {3, s130, -INFINITY}, {1, s4, -1.0f}};
    gf_sampler_params p = prof(GF_PROFILE_HF, 1.0);
    E.history = hist;
    E.n_history = 1;
    E.sequence_bias = sb;
    E.n_sequence_bias = 5;
    double z[5];
    cr_assert_eq(kept_mask(L5, 5, &p, z), 0x1f, "%s", gf_error_msg());
    /* token 0: [0] always (+0.5); [3, 0] would match, but HF skips an entry
     * longer than the history (`len(seq) > input_ids.shape[1]`), as [1, 3, 0] */
    cr_assert_float_eq(z[0], (double)L5[0] + 0.5, 1e-12, "z0 %.17g", z[0]);
    cr_assert_float_eq(z[4], (double)L5[4] - 1.0, 1e-12, "z4 %.17g", z[4]);
    cr_assert_eq(z[1], (double)L5[1]);
    /* with two ids [3, 0] fits and matches: biases ending in one id add up */
    static const int32_t hist2[2] = {1, 3};
    E.history = hist2;
    E.n_history = 2;
    cr_assert_eq(kept_mask(L5, 5, &p, z), 0x1f, "%s", gf_error_msg());
    cr_assert_float_eq(z[0], (double)L5[0] + 0.75, 1e-12, "z0 %.17g", z[0]);
    /* with three the -inf entry fits and bans 0 */
    static const int32_t hist3[3] = {2, 1, 3};
    E.history = hist3;
    E.n_history = 3;
    expect_mask(&p, B(1) | B(2) | B(3) | B(4), "sequence_bias -inf, history 2 1 3");
}

Test(sampler_token_filters, hf_min_length_and_forced_tokens)
{
    static const int32_t hist[4] = {1, 2, 3, 1};
    gf_sampler_params p = prof(GF_PROFILE_HF, 1.0);
    E.history = hist;
    E.eos_id = 4;
    E.min_length = 3; /* the prompt counts: banned at 2 ids, free at 3 */
    E.n_history = 2;
    E.n_prompt = 2;
    expect_mask(&p, 0x0f, "min_length 3, two ids");
    E.n_history = 3;
    expect_mask(&p, 0x1f, "min_length 3, three ids");
    p = prof(GF_PROFILE_HF, 0.7);
    E.history = hist;
    E.forced_bos_id = 2;
    E.n_history = 1;
    double z[5];
    cr_assert_eq(kept_mask(L5, 5, &p, z), B(2));
    cr_assert_eq(z[2], 0.0, "the forced id's score is 0 (then / T: 0)");
    E.n_history = 2;
    expect_mask(&p, 0x1f, "BOS after two ids: not forced");
    E.forced_eos_id = 4;
    E.max_length = 3;
    expect_mask(&p, B(4), "EOS at max_length - 1");
    E.max_length = 2; /* both at one id: EOS comes after BOS and wins */
    E.n_history = 1;
    expect_mask(&p, B(4), "BOS and EOS at once");
    gf_sample_result r;
    cr_assert_eq(gf_sample(L5, 5, &p, 0, 3, &r), GF_OK);
    cr_assert_eq(r.token, 4);
    E.forced_eos_id = 5;
    expect_error(&p, "forced_eos_token_id 5 is outside the vocabulary (5)");
}

Test(sampler_token_filters, vllm_allowed_ids_and_mask)
{
    static const int32_t allowed[] = {1, 3, 3}, mask01[] = {0, 1}, mask4[] = {4}, out[] = {1, 9};
    gf_sampler_params p = prof(GF_PROFILE_VLLM, 1.0);
    E.allowed_ids = allowed;
    E.n_allowed_ids = 3;
    expect_mask(&p, B(1) | B(3), "allowed 1, 3");
    E.mask_ids = mask01;
    E.n_mask_ids = 2;
    expect_mask(&p, B(1), "mask 0 1 and allowed 1 3");
    /* a mask that, with the allowed ids, leaves nothing: vllm's all -inf row */
    E.mask_ids = mask4;
    E.n_mask_ids = 1;
    expect_mask(&p, 0, "nothing left");
    gf_sample_result r;
    cr_assert_eq(gf_sample(L5, 5, &p, 0, 0, &r), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(r.token, 0);
    cr_assert_eq(r.kept, 0);
    E.mask_ids = NULL;
    E.n_mask_ids = 0;
    E.allowed_ids = out;
    E.n_allowed_ids = 2;
    expect_error(&p, "allowed_token_ids contains out-of-vocab token id!");
    E.allowed_ids = NULL;
    E.n_allowed_ids = 0;
    E.mask_ids = out;
    E.n_mask_ids = 2;
    expect_error(&p, "structured_output_mask allows token 9");
    /* greedy sees the masked row */
    p = prof(GF_PROFILE_VLLM, 0.0);
    E.allowed_ids = allowed;
    E.n_allowed_ids = 3;
    cr_assert_eq(gf_sample(L5, 5, &p, 0, 0, &r), GF_OK);
    cr_assert_eq(r.token, 1);
}

/* each profile's refusals, with its peer's words */
Test(sampler_token_filters, refusals)
{
    static const int32_t ids[] = {1, 2}, empty_ids[] = {0};
    const gf_token_seq one[] = {{2, ids, -1.0f}}, twice[] = {{2, ids, -1.0f}, {2, ids, 2.0f}};
    const gf_token_seq nan_bias[] = {{2, ids, NAN}}, empty[] = {{0, empty_ids, 0.0f}};
    static const struct {
        int profile;
        const char *field, *needle;
    } rows[] = {
        {GF_PROFILE_SEED, "epsilon_cutoff", "seed: epsilon_cutoff is hf's (give profile: hf)"},
        {GF_PROFILE_LLAMACPP, "epsilon_cutoff", "llamacpp: llama.cpp's sampler has no epsilon_cutoff"},
        {GF_PROFILE_VLLM, "eta_cutoff", "vllm: vLLM's SamplingParams has no eta_cutoff"},
        {GF_PROFILE_SEED, "bad_words_ids", "seed: bad_words_ids is hf's and vllm's"},
        {GF_PROFILE_LLAMACPP, "bad_words_ids", "llama.cpp's sampler has no bad_words_ids"},
        {GF_PROFILE_VLLM, "sequence_bias", "vLLM's SamplingParams has no sequence_bias"},
        {GF_PROFILE_VLLM, "min_length", "vLLM's SamplingParams has no min_length"},
        {GF_PROFILE_SEED, "forced_bos_token_id", "seed: forced_bos_token_id is hf's"},
        {GF_PROFILE_VLLM, "max_length", "vLLM's SamplingParams has no max_length"},
        {GF_PROFILE_HF, "allowed_token_ids", "hf: allowed_token_ids is vLLM's (HF has prefix_allowed_tokens_fn"},
        {GF_PROFILE_SEED, "structured_output_mask", "seed: structured_output_mask is vLLM's"},
        {GF_PROFILE_LLAMACPP, "structured_output_mask", "llama.cpp's sampler has no structured_output_mask"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        gf_sampler_params p = prof(rows[i].profile, 1.0);
        const char *f = rows[i].field;
        if (!strcmp(f, "epsilon_cutoff"))
            E.epsilon_cutoff = 0.1;
        else if (!strcmp(f, "eta_cutoff"))
            E.eta_cutoff = 0.1;
        else if (!strcmp(f, "bad_words_ids")) {
            E.bad_words = one;
            E.n_bad_words = 1;
        } else if (!strcmp(f, "sequence_bias")) {
            E.sequence_bias = one;
            E.n_sequence_bias = 1;
        } else if (!strcmp(f, "min_length"))
            E.min_length = 3;
        else if (!strcmp(f, "forced_bos_token_id"))
            E.forced_bos_id = 1;
        else if (!strcmp(f, "max_length"))
            E.max_length = 9;
        else if (!strcmp(f, "allowed_token_ids")) {
            E.allowed_ids = ids;
            E.n_allowed_ids = 2;
        } else {
            E.mask_ids = ids;
            E.n_mask_ids = 2;
        }
        cr_assert_eq(gf_sampler_validate(&p), GF_E_INVALID_ARG, "%s under %s accepted", f,
                     gf_sampler_profile_name(rows[i].profile));
        cr_assert(strstr(gf_error_msg(), rows[i].needle), "%s: '%s' lacks '%s'", f, gf_error_msg(), rows[i].needle);
    }
    gf_sampler_params p = prof(GF_PROFILE_HF, 1.0);
    E.min_length = -1;
    expect_error(&p, "hf: `min_length` has to be a non-negative integer, but is -1");
    p = prof(GF_PROFILE_HF, 1.0);
    E.sequence_bias = twice;
    E.n_sequence_bias = 2;
    expect_error(&p, "sequence_bias names the sequence of entry 0 twice (entry 1)");
    E.sequence_bias = nan_bias;
    E.n_sequence_bias = 1;
    expect_error(&p, "sequence_bias[0]'s bias is NaN");
    E.sequence_bias = empty;
    expect_error(&p, "sequence_bias[0] is empty");
    static const int32_t one_id[] = {2};
    const gf_token_seq single[] = {{1, one_id, 1.0f}};
    const gf_logit_bias lb[] = {{2, 0.5f}};
    E.sequence_bias = single;
    E.bias = lb;
    E.n_bias = 1;
    expect_error(&p, "hf: token 2 is in logit_bias and, alone, in sequence_bias");
}

/* gf_sampler_logprobs: each mode on one row, hand-computed; greedy refused */
Test(sampler_token_filters, logprob_modes)
{
    const float L[4] = {1.0f, 0.0f, -1.0f, -INFINITY};
    const double lse = log(exp(1.0) + 1.0 + exp(-1.0)), lse2 = log(exp(2.0) + 1.0 + exp(-2.0));
    gf_sampler_params p = prof(GF_PROFILE_SEED, 0.5);
    p.use_top_k = 1;
    p.top_k = 2;
    double v[4];
    cr_assert_eq(gf_sampler_logprobs(L, 4, &p, GF_LOGPROBS_RAW, v), GF_OK, "%s", gf_error_msg());
    cr_assert_float_eq(v[0], 1.0 - lse, 1e-12);
    cr_assert_float_eq(v[2], -1.0 - lse, 1e-12);
    cr_assert_eq(v[3], -INFINITY);
    cr_assert_eq(gf_sampler_logprobs(L, 4, &p, GF_LOGPROBS_RAW_LOGITS, v), GF_OK);
    cr_assert_eq(v[1], 0.0);
    cr_assert_eq(gf_sampler_logprobs(L, 4, &p, GF_LOGPROBS_SCALED, v), GF_OK);
    cr_assert_float_eq(v[0], 2.0 - lse2, 1e-12, "after temperature, before top_k");
    cr_assert_float_eq(v[2], -2.0 - lse2, 1e-12);
    cr_assert_eq(gf_sampler_logprobs(L, 4, &p, GF_LOGPROBS_PROCESSED, v), GF_OK);
    cr_assert_float_eq(v[0], 2.0 - log(exp(2.0) + 1.0), 1e-12, "after temperature and top_k 2");
    cr_assert_eq(v[2], -INFINITY);
    cr_assert_eq(gf_sampler_logprobs(L, 4, &p, GF_LOGPROBS_PROCESSED_LOGITS, v), GF_OK);
    cr_assert_eq(v[0], 2.0);
    cr_assert_eq(v[1], 0.0);
    cr_assert_eq(v[2], -INFINITY);
    p = prof(GF_PROFILE_VLLM, 0.0);
    cr_assert_eq(gf_sampler_logprobs(L, 4, &p, GF_LOGPROBS_PROCESSED, v), GF_E_INVALID_ARG);
    cr_assert(strstr(gf_error_msg(), "greedy row"), "%s", gf_error_msg());
    cr_assert_eq(gf_sampler_logprobs(L, 4, &p, GF_LOGPROBS_RAW, v), GF_OK);
    cr_assert_eq(gf_sampler_logprobs(L, 4, &p, 9, v), GF_E_INVALID_ARG);
    cr_assert_str_eq(gf_logprob_mode_name(GF_LOGPROBS_PROCESSED), "processed");
    cr_assert_eq(gf_logprob_mode_from_name("raw_logits"), GF_LOGPROBS_RAW_LOGITS);
}
