/* Every kind's declared reach (gf_kind_def.reaches, harness/cases/case.h)
 * holds against what it does: each case of the shipped suites (cases/ and
 * cases/detect/) of a kind that does not open a model runs here on a
 * recording backend whose sample slots count their calls. A kind declared
 * to reach no slot that calls the sample slot fails here: `genfence run`
 * would put it on the engine alone, where the slot is never attached, and
 * it would pass without testing a backend's sampler. A kind declared to
 * reach the sample slot that no case of it calls fails too (its runs on a
 * slot backend would test nothing of it). The model kinds (the widest
 * reach, a session) are checked for needing a model, or for making their
 * own (opens_sessions: the probes' micro-models). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "genfence/engine.h"
#include "kinds.h"
#include "slot.h"

static long g_calls;      /* calls of the recording sample slots */
static long g_spec_calls; /* ... and of its speculate slot */
static long g_lp_calls;   /* ... and of its logprobs slot */

static gf_status rec_sample(void *model, const float *logits, int32_t B, const gf_sampler_params *p,
                            const gf_rng_draws *d, int32_t *ids)
{
    (void)model, (void)logits, (void)p, (void)d;
    g_calls++;
    for (int32_t b = 0; b < B; b++)
        ids[b] = 0; /* what it answers is not under test here, only that it was asked */
    return GF_OK;
}

static uint32_t rec_profiles(void) { return 0xffffffffu; }

static gf_status rec_speculate(void *model, const gf_spec_request *rq, int32_t *accepted, int32_t *next)
{
    (void)model, (void)rq;
    g_spec_calls++;
    *accepted = 0;
    *next = 0;
    return GF_OK;
}

static gf_status rec_logprobs(void *model, const float *logits, int32_t B, int32_t V, const gf_sampler_params *p,
                              int32_t mode, double *out)
{
    (void)model, (void)logits, (void)p, (void)mode;
    g_lp_calls++;
    for (size_t i = 0; i < (size_t)B * (size_t)V; i++)
        out[i] = 0; /* likewise */
    return GF_OK;
}

static gf_backend_ops recording_ops(void)
{
    gf_backend_ops o;
    memset(&o, 0, sizeof o);
    o.abi_version = GF_BACKEND_ABI_VERSION;
    o.struct_size = sizeof o;
    o.name = "recording-slots";
    o.sample = rec_sample;
    o.sample_profiles = rec_profiles;
    o.sample_ex = rec_sample;
    o.speculate = rec_speculate;
    o.logprobs = rec_logprobs;
    return o;
}

static const char *reach_name(gf_kind_reach r)
{
    return r == GF_KIND_REACHES_MODEL       ? "the model slots"
           : r == GF_KIND_REACHES_SAMPLE    ? "the sample slot"
           : r == GF_KIND_REACHES_SPECULATE ? "the speculate slot"
           : r == GF_KIND_REACHES_LOGPROBS  ? "the logprobs slot"
                                            : "no slot";
}

Test(kinds, declared_reach_holds_on_a_recording_backend, .timeout = 280)
{
    const char *paths[] = {GF_TEST_SOURCE_DIR "/cases", GF_TEST_SOURCE_DIR "/cases/detect"};
    gf_case_set set;
    int rc = gf_cases_load(gf_kinds(), paths, 2, GF_TEST_SOURCE_DIR, &set);
    cr_assert_eq(rc, GF_OK, "%s", set.n_errors ? set.errors[0] : "");
    gf_backend_ops ops = recording_ops();
    cr_assert(gf_backend_has_sample(&ops));
    char errors[8192] = "";
    for (const gf_kind_def *const *kp = gf_kinds(); *kp; kp++) {
        const gf_kind_def *k = *kp;
        if (k->reaches == GF_KIND_REACHES_MODEL) {                     /* opens model + backend: every slot */
            if (k->needs != GF_KIND_NEEDS_MODEL && !k->opens_sessions) /* the probes make their own */
                snprintf(errors + strlen(errors), sizeof errors - strlen(errors),
                         "%s reaches the model slots but neither needs a model nor makes one\n", k->name);
            if (k->needs != GF_KIND_NEEDS_NOTHING && k->opens_sessions)
                snprintf(errors + strlen(errors), sizeof errors - strlen(errors),
                         "%s makes its own model (opens_sessions) but asks for the case's\n", k->name);
            continue;
        }
        long calls = 0, spec_calls = 0, lp_calls = 0;
        size_t n_cases = 0;
        const char *first = NULL, *spec_first = NULL, *lp_first = NULL;
        for (size_t i = 0; i < set.n; i++) {
            const gf_case *c = &set.cases[i];
            if (c->kind != k)
                continue;
            n_cases++;
            gf_krun kr;
            gf_krun_init(&kr);
            kr.backend = kr.backend_name = "recording-slots";
            kr.threads = 1;
            kr.backend_has_sample = 1;
            kr.sample_ops = &ops; /* as the runner gives it a slot backend (run/jobs.c) */
            kr.spec_ops = &ops;
            kr.lp_ops = &ops;
            long before = g_calls, spec_before = g_spec_calls, lp_before = g_lp_calls;
            k->run(c, &kr);
            gf_k_slot_finish(&kr);
            if (g_calls > before && !first)
                first = c->id;
            if (g_spec_calls > spec_before && !spec_first)
                spec_first = c->id;
            if (g_lp_calls > lp_before && !lp_first)
                lp_first = c->id;
            lp_calls += g_lp_calls - lp_before;
            calls += g_calls - before;
            spec_calls += g_spec_calls - spec_before;
            gf_krun_clear(&kr);
        }
        if (!n_cases)
            continue; /* tests/unit/test_cases.c requires a case of every kind */
        if (calls && k->reaches != GF_KIND_REACHES_SAMPLE)
            snprintf(errors + strlen(errors), sizeof errors - strlen(errors),
                     "%s declares it reaches %s, but it called the sample slot %ld times (first on case %s): "
                     "declare .reaches = GF_KIND_REACHES_SAMPLE, or genfence run tests it on the engine alone\n",
                     k->name, reach_name(k->reaches), calls, first);
        if (spec_calls && k->reaches != GF_KIND_REACHES_SPECULATE)
            snprintf(errors + strlen(errors), sizeof errors - strlen(errors),
                     "%s declares it reaches %s, but it called the speculate slot %ld times (first on case %s)\n",
                     k->name, reach_name(k->reaches), spec_calls, spec_first);
        if (!spec_calls && k->reaches == GF_KIND_REACHES_SPECULATE)
            snprintf(errors + strlen(errors), sizeof errors - strlen(errors),
                     "%s declares it reaches the speculate slot, but none of its %zu cases called it\n", k->name,
                     n_cases);
        if (lp_calls && k->reaches != GF_KIND_REACHES_LOGPROBS)
            snprintf(errors + strlen(errors), sizeof errors - strlen(errors),
                     "%s declares it reaches %s, but it called the logprobs slot %ld times (first on case %s)\n",
                     k->name, reach_name(k->reaches), lp_calls, lp_first);
        if (!lp_calls && k->reaches == GF_KIND_REACHES_LOGPROBS)
            snprintf(errors + strlen(errors), sizeof errors - strlen(errors),
                     "%s declares it reaches the logprobs slot, but none of its %zu cases called it\n", k->name,
                     n_cases);
        if (!calls && k->reaches == GF_KIND_REACHES_SAMPLE)
            snprintf(errors + strlen(errors), sizeof errors - strlen(errors),
                     "%s declares it reaches the sample slot, but none of its %zu cases called it\n", k->name, n_cases);
    }
    gf_case_set_free(&set);
    cr_assert(!errors[0], "%s", errors);
}

/* A kind's keys are what its parse asks for (gf_kind_keys): the fences
 * refuse the penalties, biases and history (gf_y_refuse) they would read
 * through the shared sampler reader, and take its truncation filters. */
Test(kinds, keys_are_what_the_parse_asks)
{
    char buf[1024];
    gf_kind_keys(&gf_kind_top_p_fence, GF_KEYS_ALL, buf, sizeof buf);
    cr_assert(strstr(buf, "probs") && strstr(buf, "expect") && strstr(buf, "min_p"), "%s", buf);
    cr_assert(!strstr(buf, "repetition_penalty") && !strstr(buf, "top_k") && !strstr(buf, "logit_bias") &&
                  !strstr(buf, "eos_id"),
              "%s", buf);
    gf_kind_keys(&gf_kind_top_p_fence, GF_KEYS_CONDITIONAL, buf, sizeof buf);
    cr_assert_str_eq(
        buf, "profile, chain, min_p, typical_p, min_tokens_to_keep, xtc_probability, xtc_threshold, xtc_min_keep, "
             "top_n_sigma, mirostat, mirostat_tau, mirostat_eta, mirostat_mu, epsilon_cutoff, eta_cutoff, "
             "allowed_token_ids, structured_output_mask");
    gf_kind_keys(&gf_kind_distribution_match, GF_KEYS_ALL, buf, sizeof buf);
    cr_assert_str_eq(buf, "goldens, prompts, steps, gate, topk, thresholds, hypothesis, calibration_case, calibration, "
                          "kl_pair_p, kl_pair_q, kl_pair_expect");
    cr_assert_eq(gf_kind_keys(&gf_kind_distribution_match, GF_KEYS_CONDITIONAL, buf, sizeof buf), 0);
    /* eos_id: read by the sampler reader only beside a profile key, by eos itself always */
    gf_kind_keys(&gf_kind_sampling_distribution, GF_KEYS_PLAIN, buf, sizeof buf);
    cr_assert(!strstr(buf, "eos_id") && strstr(buf, "draws"), "%s", buf);
    gf_kind_keys(&gf_kind_sampling_distribution, GF_KEYS_CONDITIONAL, buf, sizeof buf);
    cr_assert(strstr(buf, "eos_id") && strstr(buf, "profile"), "%s", buf);
    gf_kind_keys(&gf_kind_eos, GF_KEYS_PLAIN, buf, sizeof buf);
    cr_assert(strstr(buf, "eos_id"), "%s", buf);
    for (const gf_kind_def *const *k = gf_kinds(); *k; k++)
        cr_assert(gf_kind_keys(*k, GF_KEYS_ALL, buf, sizeof buf) > 0, "%s asks for no key", (*k)->name);
}
