/* Case files (harness/case.h, docs/cases.md): YAML core schema scalars, every
 * kind's keys, and errors with FILE:LINE:COLUMN. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case.h"
#include "kinds.h"
#include "record.h"

static int load(const char *text, gf_case_set *set)
{
    return gf_cases_load_text(gf_kinds(), text, strlen(text), "t.yaml", "/repo", set);
}

/* The loader must fail with exactly one error containing `want`. */
static void expect_error(const char *text, const char *want)
{
    gf_case_set set;
    int rc = load(text, &set);
    cr_assert_eq(rc, GF_E_FORMAT, "expected an error containing '%s'", want);
    cr_assert_eq(set.n, 0);
    int found = 0;
    for (size_t i = 0; i < set.n_errors; i++)
        found |= strstr(set.errors[i], want) != NULL;
    cr_assert(found, "no error contains '%s'; first: %s", want, set.n_errors ? set.errors[0] : "(none)");
    gf_case_set_free(&set);
}

/* ---- core schema ---- */

static gf_yvalue scalar(const char *text, int plain)
{
    gf_ynode n = {.type = GF_YN_SCALAR, .value = (char *)text, .len = strlen(text), .plain = plain};
    return gf_yscalar_resolve(&n);
}

Test(core_schema, null_bool_int_float_string)
{
    cr_assert_eq(scalar("~", 1).type, GF_YS_NULL);
    cr_assert_eq(scalar("null", 1).type, GF_YS_NULL);
    cr_assert_eq(scalar("NULL", 1).type, GF_YS_NULL);
    cr_assert_eq(scalar("", 1).type, GF_YS_NULL);
    gf_yvalue v = scalar("true", 1);
    cr_assert(v.type == GF_YS_BOOL && v.b == 1);
    v = scalar("False", 1);
    cr_assert(v.type == GF_YS_BOOL && v.b == 0);
    v = scalar("-42", 1);
    cr_assert(v.type == GF_YS_INT && v.i == -42);
    v = scalar("0x1F", 1);
    cr_assert(v.type == GF_YS_INT && v.i == 31);
    v = scalar("0o17", 1);
    cr_assert(v.type == GF_YS_INT && v.i == 15);
    v = scalar("1e-4", 1);
    cr_assert(v.type == GF_YS_FLOAT && v.d == 1e-4);
    v = scalar("1.0e+3", 1);
    cr_assert(v.type == GF_YS_FLOAT && v.d == 1e3);
    v = scalar(".5", 1);
    cr_assert(v.type == GF_YS_FLOAT && v.d == 0.5);
    v = scalar(".nan", 1);
    cr_assert(v.type == GF_YS_FLOAT && isnan(v.d));
    v = scalar(".NaN", 1);
    cr_assert(v.type == GF_YS_FLOAT && isnan(v.d));
    v = scalar("-.inf", 1);
    cr_assert(v.type == GF_YS_FLOAT && isinf(v.d) && v.d < 0);
    v = scalar("+.Inf", 1);
    cr_assert(v.type == GF_YS_FLOAT && isinf(v.d) && v.d > 0);
    cr_assert_eq(scalar("yes", 1).type, GF_YS_STR); /* YAML 1.1 only */
    cr_assert_eq(scalar("1_000", 1).type, GF_YS_STR);
    cr_assert_eq(scalar("nan", 1).type, GF_YS_STR);
    cr_assert_eq(scalar("1.2.3", 1).type, GF_YS_STR);
    cr_assert_eq(scalar("true", 0).type, GF_YS_STR); /* quoted */
    cr_assert_eq(scalar("1", 0).type, GF_YS_STR);
}

Test(core_schema, in_a_case_file)
{
    gf_case_set set;
    int rc = load("cases:\n"
                  "  - id: errs\n"
                  "    kind: sampler_errors\n"
                  "    logits: [1.0, -.inf, 0x2, 1e-4]\n"
                  "    calls:\n"
                  "      - {temperature: .nan, expect: error}\n"
                  "      - {top_k: ~, top_p: null, temperature: !!float 1, expect: ok}\n",
                  &set);
    cr_assert_eq(rc, GF_OK, "%s", set.n_errors ? set.errors[0] : "");
    cr_assert_eq(set.n, 1);
    gf_case_set_free(&set);
}

/* ---- every kind parses ---- */

static const char *k_all_kinds =
    "cases:\n"
    "  - id: a.top_p\n"
    "    kind: top_p_fence\n"
    "    tags: [sampler, fence]\n"
    "    probs: [0.5, 0.3, 0.1, 0.06, 0.04]\n"
    "    permutation: [3, 0, 4, 2, 1]\n"
    "    expect: [{p: 0.45, keep: [0]}, {p: 0.85, keep: [0, 1, 2]}]\n"
    "  - id: a.top_k\n"
    "    kind: top_k_fence\n"
    "    logits: [1, 2, 3]\n"
    "    expect: [{k: 2, keep: [1, 2]}]\n"
    "  - id: a.temp\n"
    "    kind: temperature_limits\n"
    "    random: {rows: 3, vocab: 512, seed: 35, scale: 3, margin: 1}\n"
    "    cold: {temperature: 1e-3, min_max_prob: 0.999}\n"
    "    hot: {temperature: 1e3, max_spread: 1e-2}\n"
    "  - id: a.temp2\n"
    "    kind: temperature_limits\n"
    "    logits: [[1, 2, 3], [3, 2, 1]]\n"
    "  - id: a.errors\n"
    "    kind: sampler_errors\n"
    "    calls: [{temperature: -1, expect: error}, {top_p: 0, expect: error}, {top_k: 1, expect: argmax}]\n"
    "  - id: a.dist\n"
    "    kind: sampling_distribution\n"
    "    probs: [0.5, 0.5]\n"
    "    temperature: 0.8\n"
    "    top_k: 2\n"
    "    top_p: 0.9\n"
    "    draws: 1000\n"
    "    alpha: 0.01\n"
    "  - id: a.seeded\n"
    "    kind: seeded_reproducibility\n"
    "    model: models/m\n"
    "    prompts: [\"Holmes\", [1, 2, 3]]\n"
    "    max_new_tokens: 8\n"
    "    temperature: 0.8\n"
    "    top_k: 40\n"
    "    top_p: 0.95\n"
    "    seeds: [1, 2]\n"
    "  - id: a.cache\n"
    "    kind: cache_equals_recompute\n"
    "    model: /abs/model\n"
    "    prompt: \"Sherlock Holmes\"\n"
    "    steps: 64\n"
    "    atol: 1e-4\n"
    "    gate: {abs: 1e-4, ulps: 4}\n"
    "    prefill_chunks: [2, 1, 3]\n"
    "  - id: a.pad\n"
    "    kind: left_padding_positions\n"
    "    mask: [[0, 1], [1, 1]]\n"
    "    expect_positions: [[0, 0], [0, 1]]\n"
    "    expect_next: [1, 2]\n"
    "  - id: a.batch\n"
    "    kind: batch_consistency\n"
    "    model: models/m\n"
    "    prompts: [\"A\", \"B C\"]\n"
    "    max_new_tokens: 24\n"
    "    modes: [cached, uncached]\n"
    "    gate: {abs: 1e-4}\n"
    "  - id: a.limit\n"
    "    kind: context_limit\n"
    "    model: models/m\n"
    "    prompt_tokens: 120\n"
    "    max_new_tokens: 20\n"
    "    expect: {stop_reason: context_limit, total_tokens: 129}\n"
    "    on_limit: raise\n"
    "    uncached: {total_tokens: 140}\n"
    "  - id: a.eos\n"
    "    kind: eos\n"
    "    model: models/m\n"
    "    prompts: [\"A\"]\n"
    "    max_new_tokens: 8\n"
    "    eos_id: 11\n"
    "    expect: [{stop_reason: eos}]\n"
    "  - id: a.stream\n"
    "    kind: stream_decode\n"
    "    model: models/m\n"
    "    text: \"a \\u2014 b\"\n"
    "  - id: a.stream2\n"
    "    kind: stream_decode\n"
    "    model: models/m\n"
    "    sample: {tokens: 48, seed: 1}\n"
    "    backends: [ref, \"!cuda\"]\n"
    "  - id: a.golden\n"
    "    kind: golden_generation\n"
    "    model: models/m\n"
    "    prompts: [\"Holmes\", [1, 2, 3]]\n"
    "    max_new_tokens: 64\n"
    "    temperature: 0.8\n"
    "    seed: 1337\n"
    "    golden: golden/g.safetensors\n";

Test(kinds, every_kind_parses)
{
    gf_case_set set;
    int rc = load(k_all_kinds, &set);
    cr_assert_eq(rc, GF_OK, "%s", set.n_errors ? set.errors[0] : "");
    cr_assert_eq(set.n, 15);
    /* every kind of the inline text resolved; that every kind genfence has
     * parses is asserted on the suites (suites::default_and_detect_cases_load),
     * so a new kind needs no edit here */
    for (size_t i = 0; i < set.n; i++)
        cr_assert(set.cases[i].kind && gf_kind_find(set.cases[i].kind->name) == set.cases[i].kind);
    const gf_case *c = &set.cases[0];
    cr_assert_str_eq(c->id, "a.top_p");
    cr_assert_eq(c->line, 2);
    cr_assert_eq(c->col, 5);
    cr_assert(gf_case_has_tag(c, "fence"));
    cr_assert(!gf_case_has_tag(c, "model"));
    cr_assert_str_eq(set.cases[6].model, "/repo/models/m");
    cr_assert_str_eq(set.cases[7].model, "/abs/model");
    /* backends filter: a positive list, and exclusions */
    cr_assert(gf_case_backend_allowed(&set.cases[0], "anything", "x"));
    const gf_case *s2 = &set.cases[13];
    cr_assert(gf_case_backend_allowed(s2, "ref", "ref"));
    cr_assert(gf_case_backend_allowed(s2, "/p/lib.so", "ref"));
    cr_assert(!gf_case_backend_allowed(s2, "openblas", "openblas"));
    cr_assert(!gf_case_backend_allowed(s2, "cuda", "cuda"));
    gf_case_set_free(&set);
}

Test(kinds, exclusion_only_filter)
{
    gf_case_set set;
    int rc = load("cases:\n  - id: x\n    kind: top_k_fence\n    backends: ['!cuda']\n"
                  "    probs: [0.5, 0.5]\n    expect: [{k: 1, keep: [0]}]\n",
                  &set);
    cr_assert_eq(rc, GF_OK);
    cr_assert(gf_case_backend_allowed(&set.cases[0], "ref", "ref"));
    cr_assert(!gf_case_backend_allowed(&set.cases[0], "cuda", "cuda"));
    gf_case_set_free(&set);
}

Test(kinds, anchors_and_aliases)
{
    gf_case_set set;
    int rc = load("cases:\n"
                  "  - id: a\n    kind: top_k_fence\n    probs: &p [0.5, 0.3, 0.2]\n    expect: [{k: 1, keep: [0]}]\n"
                  "  - id: b\n    kind: top_p_fence\n    probs: *p\n    expect: [{p: 0.45, keep: [0]}]\n",
                  &set);
    cr_assert_eq(rc, GF_OK, "%s", set.n_errors ? set.errors[0] : "");
    cr_assert_eq(set.n, 2);
    gf_case_set_free(&set);
}

/* ---- errors: file, line, column ---- */

Test(errors, unknown_key)
{
    expect_error("cases:\n  - id: x\n    kind: top_k_fence\n    probs: [0.5, 0.5]\n"
                 "    expect: [{k: 1, keep: [0]}]\n    temprature: 2\n",
                 "t.yaml:6:5: unknown key 'temprature'");
}

Test(errors, unknown_key_in_a_nested_mapping)
{
    expect_error("cases:\n  - id: x\n    kind: top_k_fence\n    probs: [0.5, 0.5]\n"
                 "    expect: [{k: 1, keep: [0], q: 3}]\n",
                 "t.yaml:5:32: unknown key 'q'");
}

Test(errors, wrong_type)
{
    expect_error("cases:\n  - id: x\n    kind: cache_equals_recompute\n    model: m\n    prompt: a\n"
                 "    steps: many\n",
                 "t.yaml:6:12: 'steps' must be an integer, got a string 'many'");
    expect_error("cases:\n  - id: x\n    kind: top_k_fence\n    probs: [0.5, true]\n    expect: [{k: 1, keep: [0]}]\n",
                 "t.yaml:4:18: 'probs' entry 1 must be a number, got a boolean");
    expect_error("cases:\n  - id: x\n    kind: top_k_fence\n    probs: [0.5, 0.5]\n    expect: [{k: 1.5, keep: [0]}]\n",
                 "t.yaml:5:18: 'k' must be an integer, got a float '1.5'");
    expect_error("cases:\n  - id: x\n    kind: top_k_fence\n    probs: [0.5, 0.5]\n    expect: {k: 1}\n",
                 "t.yaml:5:13: 'expect' must be a sequence, got a mapping");
    expect_error("cases:\n  - id: x\n    kind: top_k_fence\n    probs: [0.5, 0.5]\n    expect: [{k: 1, keep: [0]}]\n"
                 "    tags: sampler\n",
                 "t.yaml:6:11: 'tags' must be a sequence");
}

Test(errors, missing_key)
{
    expect_error("cases:\n  - id: x\n    kind: top_k_fence\n    probs: [0.5, 0.5]\n",
                 "t.yaml:2:5: missing required key 'expect'");
    expect_error("cases:\n  - kind: top_k_fence\n    probs: [0.5, 0.5]\n    expect: [{k: 1, keep: [0]}]\n",
                 "t.yaml:2:5: missing required key 'id'");
    expect_error("cases:\n  - id: x\n    kind: cache_equals_recompute\n    prompt: a\n",
                 "t.yaml:2:5: missing required key 'model'");
    expect_error("other: 1\n", "t.yaml:1:1: missing required key 'cases'");
}

Test(errors, duplicate_id)
{
    expect_error("cases:\n"
                 "  - {id: x, kind: top_k_fence, probs: [0.5, 0.5], expect: [{k: 1, keep: [0]}]}\n"
                 "  - {id: x, kind: top_k_fence, probs: [0.5, 0.5], expect: [{k: 1, keep: [0]}]}\n",
                 "t.yaml:3:10: duplicate id 'x' (first at t.yaml:2:5)");
}

Test(errors, duplicate_key_unknown_kind_and_syntax)
{
    expect_error("cases:\n  - id: x\n    id: y\n    kind: top_k_fence\n", "t.yaml:3:5: duplicate key 'id'");
    expect_error("cases:\n  - id: x\n    kind: top_q_fence\n", "t.yaml:3:11: unknown kind 'top_q_fence'");
    expect_error("cases:\n  - id: x\n    kind: [unclosed\n", "t.yaml:4:1: YAML syntax error");
    expect_error("cases:\n  - id: 'x y'\n    kind: top_k_fence\n    probs: [1]\n    expect: [{k: 1, keep: [0]}]\n",
                 "t.yaml:2:9: id 'x y' may hold only");
    expect_error("", "t.yaml:1:1: empty file");
}

Test(errors, values_out_of_range)
{
    expect_error("cases:\n  - id: x\n    kind: top_k_fence\n    probs: [0.5, 0.5]\n    expect: [{k: 1, keep: [2]}]\n",
                 "'keep' entry 0 must lie in [0, 1], got 2");
    expect_error("cases:\n  - id: x\n    kind: top_p_fence\n    probs: [0.5, 0.5]\n    permutation: [0, 0]\n"
                 "    expect: [{p: 0.5, keep: [0]}]\n",
                 "'permutation' must hold each index 0..1 once");
    expect_error(
        "cases:\n  - id: x\n    kind: batch_consistency\n    model: m\n    prompts: [a]\n    modes: [cashed]\n",
        "t.yaml:6:13: 'modes' entries must be cached or uncached");
    expect_error(
        "cases:\n  - id: x\n    kind: top_k_fence\n    model: m\n    probs: [1]\n    expect: [{k: 1, keep: [0]}]\n",
        "t.yaml:4:12: kind 'top_k_fence' takes no 'model'");
}

Test(errors, every_error_is_reported)
{
    gf_case_set set;
    int rc = load("cases:\n"
                  "  - {id: a, kind: top_k_fence, probs: [1], expect: [{k: 1, keep: [0]}], bogus: 1}\n"
                  "  - {id: b, kind: top_k_fence, probs: [1]}\n",
                  &set);
    cr_assert_eq(rc, GF_E_FORMAT);
    cr_assert_eq(set.n_errors, 2);
    gf_case_set_free(&set);
}

/* ---- filters ---- */

Test(filters, regex_kind_and_tags)
{
    gf_case_set set;
    cr_assert_eq(load(k_all_kinds, &set), GF_OK);
    gf_case_filter f;
    char err[256];
    cr_assert_eq(gf_case_filter_init(&f, gf_kinds(), "^a\\.t", NULL, 0, NULL, 0, err, sizeof err), 0);
    size_t n = 0;
    for (size_t i = 0; i < set.n; i++)
        n += gf_case_filter_match(&f, &set.cases[i]);
    cr_assert_eq(n, 4); /* top_p, top_k, temp, temp2 */
    gf_case_filter_free(&f);
    char *tags[] = {"sampler"};
    cr_assert_eq(gf_case_filter_init(&f, gf_kinds(), NULL, NULL, 0, tags, 1, err, sizeof err), 0);
    n = 0;
    for (size_t i = 0; i < set.n; i++)
        n += gf_case_filter_match(&f, &set.cases[i]);
    cr_assert_eq(n, 1);
    gf_case_filter_free(&f);
    char *notags[] = {"!fence"};
    char *kinds[] = {"top_p_fence", "top_k_fence"};
    cr_assert_eq(gf_case_filter_init(&f, gf_kinds(), NULL, kinds, 2, notags, 1, err, sizeof err), 0);
    n = 0;
    for (size_t i = 0; i < set.n; i++)
        n += gf_case_filter_match(&f, &set.cases[i]);
    cr_assert_eq(n, 1); /* a.top_k */
    gf_case_filter_free(&f);
    char *bad[] = {"no_such_kind"};
    cr_assert_eq(gf_case_filter_init(&f, gf_kinds(), NULL, bad, 1, NULL, 0, err, sizeof err), -1);
    cr_assert_eq(gf_case_filter_init(&f, gf_kinds(), "([", NULL, 0, NULL, 0, err, sizeof err), -1);
    gf_case_set_free(&set);
}

/* ---- the shipped suites load ---- */

Test(suites, default_and_detect_cases_load)
{
    const char *paths[] = {GF_TEST_SOURCE_DIR "/cases", GF_TEST_SOURCE_DIR "/cases/detect"};
    gf_case_set set;
    int rc = gf_cases_load(gf_kinds(), paths, 2, GF_TEST_SOURCE_DIR, &set);
    cr_assert_eq(rc, GF_OK, "%s", set.n_errors ? set.errors[0] : "");
    int kinds_default[64] = {0}, kinds_detect[64] = {0};
    for (size_t i = 0; i < set.n; i++)
        for (int k = 0; gf_kinds()[k]; k++)
            if (gf_kinds()[k] == set.cases[i].kind) {
                if (strstr(set.cases[i].file, "/detect/"))
                    kinds_detect[k] = 1;
                else
                    kinds_default[k] = 1;
            }
    for (int k = 0; gf_kinds()[k]; k++) {
        cr_assert(kinds_default[k], "the default suite has no %s case", gf_kinds()[k]->name);
        cr_assert(kinds_detect[k], "cases/detect has no %s case", gf_kinds()[k]->name);
    }
    gf_case_set_free(&set);
}

/* ---- a models: list (docs/cases.md "Common keys") ---- */

Test(models_list, one_case_per_model)
{
    gf_case_set set;
    int rc = load("cases:\n"
                  "  - id: s\n"
                  "    kind: stream_decode\n"
                  "    models: [models/a, /abs/b/]\n"
                  "    text: \"x\"\n",
                  &set);
    cr_assert_eq(rc, GF_OK, "%s", set.n_errors ? set.errors[0] : "");
    cr_assert_eq(set.n, 2);
    cr_assert_str_eq(set.cases[0].id, "s.a");
    cr_assert_str_eq(set.cases[0].model, "/repo/models/a");
    cr_assert_str_eq(set.cases[1].id, "s.b");
    cr_assert_str_eq(set.cases[1].model, "/abs/b/");
    /* each copy's tree is the case as if written with `model:` and its own id (what its hash covers) */
    cr_assert_str_eq(json_string_value(json_object_get(set.cases[1].tree, "model")), "/abs/b/");
    cr_assert_str_eq(json_string_value(json_object_get(set.cases[1].tree, "id")), "s.b");
    cr_assert_null(json_object_get(set.cases[1].tree, "models"));
    gf_case_set_free(&set);
}

Test(models_list, refused_forms)
{
    expect_error("cases:\n  - {id: s, kind: stream_decode, model: a, models: [b], text: x}\n",
                 "give 'model' or a 'models' list, not both");
    expect_error("cases:\n  - {id: s, kind: stream_decode, models: [], text: x}\n",
                 "'models' must be a non-empty list");
    expect_error("cases:\n  - {id: s, kind: stream_decode, models: [a, a/], text: x}\n", "duplicate id 's.a'");
}
