/* The sampler field table (engine/include/genfence/sampler_fields.h): it covers
 * gf_sampler_ext to its end (a field appended without its row fails here),
 * each flag is the key's name, the defaults and name lists come from it,
 * and its rules give the engines' messages. */
#include <criterion/criterion.h>
#include <stdalign.h>
#include <string.h>

#include "genfence/sampler.h"
#include "genfence/sampler_fields.h"

static size_t value_size(const gf_sampler_field *f)
{
    switch (f->type) {
    case GF_SF_REAL:
    case GF_SF_REAL_OPT: return sizeof(double);
    case GF_SF_SEED: return sizeof(uint64_t);
    case GF_SF_CHAIN: return sizeof(int32_t) * GF_SAMPLER_MAX_CHAIN;
    case GF_SF_BIAS:
    case GF_SF_IDS:
    case GF_SF_SEQS:
    case GF_SF_SEQ_BIAS: return sizeof(void *);
    default: return sizeof(int32_t);
    }
}

Test(sampler_fields, the_rows_cover_the_extension_to_its_end)
{
    unsigned char covered[sizeof(gf_sampler_ext)] = {0};
    memset(covered, 1, sizeof(uint32_t)); /* struct_size */
    for (int i = 0; i < GF_SF_COUNT; i++) {
        const gf_sampler_field *f = &gf_sampler_fields[i];
        if (!f->in_ext)
            continue;
        cr_assert_leq(f->off + value_size(f), sizeof(gf_sampler_ext), "%s", f->name);
        memset(covered + f->off, 1, value_size(f));
        if (f->aux != f->off)
            memset(covered + f->aux, 1, sizeof(int32_t));
    }
    /* every byte is a field's or padding before an aligned field: the last
     * covered byte ends where the struct does, after its alignment */
    size_t end = 0;
    for (size_t b = 0; b < sizeof covered; b++)
        if (covered[b])
            end = b + 1;
    size_t al = alignof(gf_sampler_ext);
    cr_assert_eq((end + al - 1) / al * al, sizeof(gf_sampler_ext),
                 "gf_sampler_ext has %zu bytes, the table's rows reach %zu: a field without its row in "
                 "GF_SAMPLER_FIELD_LIST",
                 sizeof(gf_sampler_ext), end);
    /* and no 8-byte hole inside (a field in the middle without a row) */
    for (size_t b = 0; b + 8 <= end; b++) {
        int hole = 1;
        for (size_t k = 0; k < 8; k++)
            hole &= !covered[b + k];
        cr_assert(!hole, "bytes %zu..%zu of gf_sampler_ext belong to no row", b, b + 7);
    }
}

Test(sampler_fields, flags_are_the_keys_names)
{
    for (int i = 0; i < GF_SF_COUNT; i++) {
        const gf_sampler_field *f = &gf_sampler_fields[i];
        if (!f->flag)
            continue;
        char want[64] = "--";
        for (size_t k = 0; f->name[k] && k + 3 < sizeof want; k++)
            want[2 + k] = f->name[k] == '_' ? '-' : f->name[k];
        cr_assert_str_eq(f->flag, want);
        if (f->in_ext)
            cr_assert_not_null(f->help, "%s has no --help lines", f->flag);
    }
}

Test(sampler_fields, defaults_and_name_lists)
{
    gf_sampler_ext e = gf_sampler_ext_defaults();
    cr_assert_eq(e.profile, GF_PROFILE_SEED);
    cr_assert_eq(e.typical_p, 1.0);
    cr_assert_eq(e.repetition_penalty, 1.0);
    cr_assert_eq(e.penalty_last_n, -1);
    cr_assert_eq(e.min_tokens_to_keep, 1);
    cr_assert_eq(e.eos_id, -1);
    cr_assert_eq(e.use_min_p + e.use_typical_p + e.n_chain + e.n_bias + e.n_history + e.n_stop_ids, 0);
    for (int i = 0; i < GF_SF_COUNT; i++)
        if (gf_sampler_fields[i].in_ext)
            cr_assert(gf_sf_is_default(&gf_sampler_fields[i], NULL, &e), "%s", gf_sampler_fields[i].name);
    cr_assert_str_eq(gf_sampler_profile_list(", "), "seed, hf, llamacpp, vllm");
    cr_assert_str_eq(gf_sampler_profile_list(" or "), "seed, hf, llamacpp or vllm");
    cr_assert_str_eq(gf_sampler_stage_list(),
                     "penalties, top_k, typical_p, top_p, min_p, temperature, xtc, top_n_sigma, dry");
}

static const char *why(gf_sampler_params p, gf_sampler_ext *e)
{
    p.ext = e;
    cr_assert_neq(gf_sampler_validate(&p), GF_OK);
    return gf_error_msg();
}

Test(sampler_fields, one_min_p_rule_per_profile)
{
    gf_sampler_params p = gf_sampler_greedy();
    p.temperature = 1.0;
    gf_sampler_ext e = gf_sampler_ext_defaults();
    e.use_min_p = 1;
    e.min_p = 1.5;
    cr_assert_str_eq(why(p, &e), "seed: min_p must lie in [0, 1], got 1.5");
    e.profile = GF_PROFILE_HF;
    cr_assert_str_eq(why(p, &e), "hf: min_p has to be a float in the [0, 1] interval, got 1.5");
    e.profile = GF_PROFILE_VLLM;
    cr_assert_str_eq(why(p, &e), "vllm: min_p must be in [0, 1], got 1.5");
    e.profile = GF_PROFILE_LLAMACPP; /* any value */
    p.ext = &e;
    cr_assert_eq(gf_sampler_validate(&p), GF_OK, "%s", gf_error_msg());
    e.profile = 9;
    cr_assert_str_eq(why(p, &e), "sampler profile 9 is not one of seed, hf, llamacpp, vllm");
}
