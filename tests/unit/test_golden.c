/* Goldens (harness/golden.h, docs/goldens.md): the writer and the validating
 * reader (data_sha256, structure), the golden_generation kind's keys, the case
 * as JSON and what its hash covers. */
#include <criterion/criterion.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "case.h"
#include "genfence/safetensors.h"
#include "golden_case.h"
#include "hash.h"
#include "kinds.h"
#include "record.h"

static char g_dir[256];

static void make_dir(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/gf_test_golden_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
}

static void remove_dir(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    cr_assert_eq(system(cmd), 0);
}

static const char *path_in(const char *name)
{
    static char p[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", g_dir, name);
    return p[i];
}

enum { V = 8, N = 3 };

/* Two rows: prompts of 2 and 4 tokens, N steps, V logits. */
typedef struct rows2 {
    int32_t tok[2][4 + N];
    float logits[2][N * V];
    double margins[2][N];
    gf_golden_row r[2];
} rows2;

static void fill(rows2 *x)
{
    const int32_t P[2] = {2, 4};
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < P[b] + N; i++)
            x->tok[b][i] = (i * 3 + b) % V;
        for (int i = 0; i < N * V; i++)
            x->logits[b][i] = (float)(0.25 * i - 1.0 * b);
        for (int i = 0; i < N; i++)
            x->margins[b][i] = 0.5 + i + b;
        x->r[b] = (gf_golden_row){
            .n_tokens = P[b] + N, .steps = N, .tokens = x->tok[b], .logits = x->logits[b], .margins = x->margins[b]};
    }
}

static const char *const k_keys[] = {"generator", "generator_version", "model",   "model_hash", "case_id",
                                     "case_hash", "created",           "sampler", "seed"};
static const char *const k_vals[] = {"test",
                                     "1",
                                     "models/m",
                                     "ab",
                                     "x",
                                     "cd",
                                     "2026-01-01T00:00:00Z",
                                     "{\"seed\":0,\"temperature\":0.0,\"top_k\":null,\"top_p\":null}",
                                     "0"};

static void write_two(const char *path)
{
    rows2 x;
    fill(&x);
    cr_assert_eq(gf_golden_write(path, x.r, 2, V, k_keys, k_vals, 9), GF_OK, "%s", gf_error_msg());
}

TestSuite(golden, .init = make_dir, .fini = remove_dir);

Test(golden, write_then_read)
{
    const char *p = path_in("a.safetensors");
    write_two(p);
    gf_golden *g = NULL;
    cr_assert_eq(gf_golden_read(p, &g), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(g->rows, 2);
    cr_assert_eq(g->V, V);
    rows2 x;
    fill(&x);
    for (int b = 0; b < 2; b++) {
        cr_assert_eq(g->row[b].steps, N);
        cr_assert_eq(g->row[b].prompt_len, b ? 4 : 2);
        cr_assert_eq(memcmp(g->row[b].tokens, x.tok[b], (size_t)g->row[b].n_tokens * 4), 0);
        cr_assert_eq(memcmp(g->row[b].logits, x.logits[b], sizeof x.logits[b]), 0);
        cr_assert_eq(memcmp(g->row[b].margins, x.margins[b], sizeof x.margins[b]), 0);
    }
    cr_assert_str_eq(gf_golden_meta(g, "format"), GF_GOLDEN_FORMAT);
    cr_assert_str_eq(gf_golden_meta(g, "rows"), "2");
    cr_assert_str_eq(gf_golden_meta(g, "steps"), "3");
    cr_assert_str_eq(gf_golden_meta(g, "case_hash"), "cd");
    cr_assert_str_eq(gf_golden_meta(g, "data_sha256"), g->data_sha256);
    cr_assert_null(gf_golden_meta(g, "nope"));
    gf_golden_free(g);
}

Test(golden, data_sha256_is_over_tensors_in_name_order)
{
    const char *p = path_in("a.safetensors");
    write_two(p);
    rows2 x;
    fill(&x);
    /* by hand: logits.0 logits.1 margins.0 margins.1 tokens.0 tokens.1, tokens as int64 */
    gf_sha256 s;
    gf_sha256_init(&s);
    gf_sha256_update(&s, x.logits[0], sizeof x.logits[0]);
    gf_sha256_update(&s, x.logits[1], sizeof x.logits[1]);
    gf_sha256_update(&s, x.margins[0], sizeof x.margins[0]);
    gf_sha256_update(&s, x.margins[1], sizeof x.margins[1]);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < x.r[b].n_tokens; i++) {
            int64_t v = x.tok[b][i];
            gf_sha256_update(&s, &v, 8);
        }
    char want[65];
    gf_sha256_hex(&s, want);
    gf_golden *g = NULL;
    cr_assert_eq(gf_golden_read(p, &g), GF_OK, "%s", gf_error_msg());
    cr_assert_str_eq(g->data_sha256, want);
    gf_golden_free(g);
}

/* Flip one bit at `at` bytes into the data section. */
static void flip_data_byte(const char *p, long at)
{
    FILE *f = fopen(p, "r+b");
    cr_assert_not_null(f);
    uint64_t n;
    cr_assert_eq(fread(&n, 8, 1, f), 1);
    fseek(f, (long)(8 + n) + at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, (long)(8 + n) + at, SEEK_SET);
    fputc(c ^ 1, f);
    fclose(f);
}

Test(golden, a_changed_data_byte_is_detected)
{
    const char *p = path_in("a.safetensors");
    for (long at = 0; at < 200; at += 37) {
        write_two(p);
        flip_data_byte(p, at);
        gf_golden *g = NULL;
        cr_assert_eq(gf_golden_read(p, &g), GF_E_FORMAT, "byte %ld", at);
        cr_assert_null(g);
        cr_assert(strstr(gf_error_msg(), "data_sha256 mismatch"), "%s", gf_error_msg());
        cr_assert(strstr(gf_error_msg(), p), "%s", gf_error_msg());
    }
}

Test(golden, missing_file_is_not_found)
{
    gf_golden *g = NULL;
    cr_assert_eq(gf_golden_read(path_in("none.safetensors"), &g), GF_E_NOT_FOUND);
    cr_assert_null(g);
}

/* A raw file with the given tensors and metadata; data_sha256 right unless
 * bad_hash. */
static void write_raw(const char *p, const gf_st_write_tensor *t, size_t n, const char *const *keys,
                      const char *const *vals, size_t nm, int with_hash)
{
    const char *k[16], *v[16];
    char hex[65];
    for (size_t i = 0; i < nm; i++)
        k[i] = keys[i], v[i] = vals[i];
    cr_assert_eq(gf_safetensors_write(p, t, n, k, v, nm), GF_OK, "%s", gf_error_msg());
    if (with_hash) {
        gf_safetensors *st;
        cr_assert_eq(gf_safetensors_open(p, &st), GF_OK);
        gf_golden_data_sha256(st, hex);
        gf_safetensors_close(st);
        k[nm] = "data_sha256", v[nm] = hex;
        cr_assert_eq(gf_safetensors_write(p, t, n, k, v, nm + 1), GF_OK);
    }
}

static const char *const k_full_keys[] = {"format",    "generator", "generator_version", "model_hash", "case_id",
                                          "case_hash", "created",   "sampler",           "seed",       "rows"};
static const char *k_full_vals[] = {GF_GOLDEN_FORMAT, "t", "1", "m", "x", "c", "now", "{}", "0", "1"};

static void expect_bad(const gf_st_write_tensor *t, size_t n, const char *const *vals, const char *want)
{
    const char *p = path_in("bad.safetensors");
    write_raw(p, t, n, k_full_keys, vals, 10, 1);
    gf_golden *g = NULL;
    gf_status st = gf_golden_read(p, &g);
    cr_assert_eq(st, GF_E_FORMAT, "expected an error with '%s'", want);
    cr_assert(strstr(gf_error_msg(), want), "'%s' not in: %s", want, gf_error_msg());
}

Test(golden, structure_is_validated)
{
    int64_t tok[4] = {1, 2, 3, 4}, bad_tok[4] = {1, 2, 9, 4};
    float lg[2 * V] = {0};
    double mg[2] = {1, 2};
    gf_st_write_tensor ok[3] = {
        {.name = "tokens.0", .dtype = GF_DT_I64, .ndim = 1, .shape = {4}, .data = tok},
        {.name = "logits.0", .dtype = GF_DT_F32, .ndim = 2, .shape = {2, V}, .data = lg},
        {.name = "margins.0", .dtype = GF_DT_F64, .ndim = 1, .shape = {2}, .data = mg},
    };
    /* the good one reads */
    const char *p = path_in("ok.safetensors");
    write_raw(p, ok, 3, k_full_keys, k_full_vals, 10, 1);
    gf_golden *g = NULL;
    cr_assert_eq(gf_golden_read(p, &g), GF_OK, "%s", gf_error_msg());
    cr_assert_eq(g->row[0].prompt_len, 2);
    gf_golden_free(g);

    const char *vals[10];
    memcpy(vals, k_full_vals, sizeof vals);
    vals[0] = "genfence-golden-0";
    expect_bad(ok, 3, vals, "expected \"genfence-golden-1\"");
    memcpy(vals, k_full_vals, sizeof vals);
    vals[9] = "2";
    expect_bad(ok, 3, vals, "3 tensors for 2 rows");
    vals[9] = "zero";
    expect_bad(ok, 3, vals, "rows 'zero' is not a positive integer");

    gf_st_write_tensor t[4];
    memcpy(t, ok, sizeof ok);
    t[0].name = "tokens.1";
    expect_bad(t, 3, k_full_vals, "unexpected tensor 'tokens.1'");
    memcpy(t, ok, sizeof ok);
    t[3] = (gf_st_write_tensor){.name = "extra", .dtype = GF_DT_F64, .ndim = 1, .shape = {2}, .data = mg};
    expect_bad(t, 4, k_full_vals, "unexpected tensor 'extra'");
    memcpy(t, ok, sizeof ok);
    t[2].dtype = GF_DT_F32;
    t[2].shape[0] = 4;
    expect_bad(t, 3, k_full_vals, "tensor 'margins.0' is F32");
    memcpy(t, ok, sizeof ok);
    t[2].shape[0] = 1;
    expect_bad(t, 3, k_full_vals, "shapes do not fit");
    memcpy(t, ok, sizeof ok);
    t[0].shape[0] = 2; /* no prompt left */
    expect_bad(t, 3, k_full_vals, "shapes do not fit");
    memcpy(t, ok, sizeof ok);
    t[0].data = bad_tok;
    expect_bad(t, 3, k_full_vals, "tokens.0[2] = 9 is outside [0, 8)");

    /* metadata missing */
    write_raw(p, ok, 3, k_full_keys, k_full_vals, 9, 1); /* no rows */
    cr_assert_eq(gf_golden_read(p, &g), GF_E_FORMAT);
    cr_assert(strstr(gf_error_msg(), "no 'rows' in the metadata"), "%s", gf_error_msg());
    write_raw(p, ok, 3, k_full_keys, k_full_vals, 10, 0); /* no data_sha256 */
    cr_assert_eq(gf_golden_read(p, &g), GF_E_FORMAT);
    cr_assert(strstr(gf_error_msg(), "no 'data_sha256'"), "%s", gf_error_msg());
    /* not safetensors at all */
    FILE *f = fopen(p, "wb");
    fputs("hello", f);
    fclose(f);
    cr_assert_eq(gf_golden_read(p, &g), GF_E_FORMAT);
}

Test(golden, sampler_json)
{
    gf_sampler_params s = gf_sampler_greedy();
    char *j = gf_golden_sampler_json(&s);
    cr_assert_str_eq(j, "{\"seed\":0,\"temperature\":0.0,\"top_k\":null,\"top_p\":null}");
    free(j);
    s.temperature = 0.8;
    s.use_top_k = 1;
    s.top_k = 40;
    s.use_top_p = 1;
    s.top_p = 0.95;
    s.seed = 1337;
    j = gf_golden_sampler_json(&s);
    cr_assert_str_eq(j, "{\"seed\":1337,\"temperature\":0.8,\"top_k\":40,\"top_p\":0.95}");
    free(j);
}

/* with an extension: its every field, so a profile or filter is part of the
 * golden's recorded sampler; a NULL ext keeps the four keys above */
Test(golden, sampler_json_ext)
{
    gf_sampler_params s = gf_sampler_greedy();
    s.temperature = 0.8;
    s.seed = 7;
    gf_sampler_ext e = gf_sampler_ext_defaults();
    e.profile = GF_PROFILE_LLAMACPP;
    e.n_chain = 2;
    e.chain[0] = GF_STAGE_MIN_P;
    e.chain[1] = GF_STAGE_TEMPERATURE;
    e.use_min_p = 1;
    e.min_p = NAN;
    const gf_logit_bias b[] = {{3, -INFINITY}, {5, 1.5f}};
    e.n_bias = 2;
    e.bias = b;
    s.ext = &e;
    char *j = gf_golden_sampler_json(&s);
    cr_assert_str_eq(j,
                     "{\"allowed_token_ids\":[],\"bad_words_ids\":[],"
                     "\"chain\":[\"min_p\",\"temperature\"],\"dry_allowed_length\":2,\"dry_base\":1.75,"
                     "\"dry_multiplier\":0.0,\"dry_penalty_last_n\":-1,\"dry_sequence_breakers\":[],"
                     "\"eos_id\":-1,\"epsilon_cutoff\":0.0,\"eta_cutoff\":0.0,"
                     "\"exponential_decay_factor\":1.0,\"exponential_decay_start\":-1,"
                     "\"forced_bos_token_id\":-1,\"forced_eos_token_id\":-1,\"frequency_penalty\":0.0,"
                     "\"history\":[],\"history_prompt\":0,\"logit_bias\":{\"3\":-Infinity,\"5\":1.5},"
                     "\"max_length\":20,\"min_length\":0,"
                     "\"min_new_tokens\":0,\"min_p\":NaN,\"min_tokens_to_keep\":1,\"mirostat\":0,\"mirostat_eta\":0.1,"
                     "\"mirostat_mu\":null,\"mirostat_tau\":5.0,\"no_repeat_ngram_size\":0,\"penalty_last_n\":-1,"
                     "\"presence_penalty\":0.0,\"profile\":\"llamacpp\",\"repetition_penalty\":1.0,\"seed\":7,"
                     "\"sequence_bias\":[],\"stop_token_ids\":[],\"structured_output_mask\":[],"
                     "\"temperature\":0.8,\"top_k\":null,\"top_n_sigma\":-1.0,\"top_p\":null,"
                     "\"typical_p\":null,"
                     "\"xtc_min_keep\":1,\"xtc_probability\":0.0,\"xtc_threshold\":0.1}");
    free(j);
    /* the sequence lists: ids per entry, sequence_bias as [ids, bias] */
    {
        const int32_t w0[] = {1, 2}, w1[] = {3};
        const gf_token_seq words[] = {{2, w0, 0.0f}, {1, w1, 0.0f}}, sb[] = {{2, w0, -1.5f}};
        gf_sampler_ext h = gf_sampler_ext_defaults();
        h.profile = GF_PROFILE_HF;
        h.n_bad_words = 2;
        h.bad_words = words;
        h.n_sequence_bias = 1;
        h.sequence_bias = sb;
        gf_sampler_params q = s;
        q.ext = &h;
        char *t = gf_golden_sampler_json(&q);
        cr_assert(strstr(t, "\"bad_words_ids\":[[1,2],[3]],"), "%s", t);
        cr_assert(strstr(t, "\"sequence_bias\":[[[1,2],-1.5]],"), "%s", t);
        free(t);
    }
    /* one filter changed: another sampler record */
    e.min_p = 0.1;
    char *k = gf_golden_sampler_json(&s);
    cr_assert(strstr(k, "\"min_p\":0.1,"), "%s", k);
    free(k);
    /* the seed profile with every default is still an extension: recorded as such */
    gf_sampler_ext d = gf_sampler_ext_defaults();
    s.ext = &d;
    k = gf_golden_sampler_json(&s);
    cr_assert(strstr(k, "\"profile\":\"seed\""), "%s", k);
    free(k);
    s.ext = NULL;
    k = gf_golden_sampler_json(&s);
    cr_assert_str_eq(k, "{\"seed\":7,\"temperature\":0.8,\"top_k\":null,\"top_p\":null}");
    free(k);
}

/* ---- the kind's keys, the case tree and its hash ---- */

static int load(const char *text, gf_case_set *set)
{
    return gf_cases_load_text(gf_kinds(), text, strlen(text), "t.yaml", "/repo", set);
}

static const char *k_case = "cases:\n"
                            "  - id: g.one\n"
                            "    kind: golden_generation\n"
                            "    description: d\n"
                            "    tags: [golden]\n"
                            "    model: models/m\n"
                            "    prompts: [\"Sherlock Holmes\", [1, 2, 0x3]]\n"
                            "    max_new_tokens: 64\n"
                            "    temperature: 0.8\n"
                            "    top_k: 40\n"
                            "    top_p: 0.95\n"
                            "    seed: 1337\n"
                            "    atol: 1.0e-4\n"
                            "    gate: {abs: 1.0e-4, ulps: 4}\n";

static void hash_of(const char *text, char hex[65])
{
    gf_case_set set;
    cr_assert_eq(load(text, &set), GF_OK, "%s", set.n_errors ? set.errors[0] : "");
    cr_assert_eq(gf_case_hash_of(&set.cases[0], hex), GF_OK);
    gf_case_set_free(&set);
}

/* k_case with `from` replaced by `to` */
static char *edited(const char *from, const char *to)
{
    const char *at = strstr(k_case, from);
    cr_assert_not_null(at, "%s", from);
    size_t n = strlen(k_case) - strlen(from) + strlen(to) + 1;
    char *s = malloc(n);
    snprintf(s, n, "%.*s%s%s", (int)(at - k_case), k_case, to, at + strlen(from));
    return s;
}

Test(golden_case, keys_paths_and_tree)
{
    gf_case_set set;
    cr_assert_eq(load(k_case, &set), GF_OK, "%s", set.n_errors ? set.errors[0] : "");
    const gf_case *c = &set.cases[0];
    const gf_golden_spec *s = c->spec;
    cr_assert_eq(s->n_prompts, 2);
    cr_assert_eq(s->prompts[1].n_ids, 3);
    cr_assert_eq(s->max_new, 64);
    cr_assert_eq(s->sampler.temperature, 0.8);
    cr_assert(s->sampler.use_top_k && s->sampler.top_k == 40);
    cr_assert(s->sampler.use_top_p && s->sampler.top_p == 0.95);
    cr_assert_eq(s->sampler.seed, 1337);
    cr_assert_str_eq(s->golden, "/repo/golden/g.one.safetensors");
    char *p = gf_golden_path_for(c, "/x");
    cr_assert_str_eq(p, "/x/g.one.safetensors");
    free(p);
    /* the tree: every key as written, values by the core schema */
    char *cj = gf_canonical_json(c->tree);
    cr_assert_str_eq(cj, "{\"atol\":0.0001,\"description\":\"d\",\"gate\":{\"abs\":0.0001,\"ulps\":4},\"id\":\"g.one\","
                         "\"kind\":\"golden_generation\",\"max_new_tokens\":64,\"model\":\"models/m\","
                         "\"prompts\":[\"Sherlock Holmes\",[1,2,3]],\"seed\":1337,\"tags\":[\"golden\"],"
                         "\"temperature\":0.8,\"top_k\":40,\"top_p\":0.95}");
    free(cj);
    gf_case_set_free(&set);

    char *t = edited("    gate:", "    golden: elsewhere/g.st\n    gate:");
    cr_assert_eq(load(t, &set), GF_OK, "%s", set.n_errors ? set.errors[0] : "");
    cr_assert_str_eq(((const gf_golden_spec *)set.cases[0].spec)->golden, "/repo/elsewhere/g.st");
    gf_case_set_free(&set);
    free(t);
    t = edited("    gate:", "    golden: /abs/g.st\n    gate:");
    cr_assert_eq(load(t, &set), GF_OK);
    cr_assert_str_eq(((const gf_golden_spec *)set.cases[0].spec)->golden, "/abs/g.st");
    gf_case_set_free(&set);
    free(t);
    /* defaults: greedy, 64 steps */
    cr_assert_eq(load("cases:\n  - id: g\n    kind: golden_generation\n    model: m\n    prompts: [a]\n", &set), GF_OK);
    s = set.cases[0].spec;
    cr_assert(s->sampler.temperature == 0 && !s->sampler.use_top_k && !s->sampler.use_top_p && s->max_new == 64);
    cr_assert_eq(s->atol, 1e-4);
    gf_case_set_free(&set);
}

Test(golden_case, what_the_hash_covers)
{
    char base[65], h[65];
    hash_of(k_case, base);
    /* generation keys change it */
    static const char *const changes[][2] = {
        {"max_new_tokens: 64", "max_new_tokens: 63"},
        {"\"Sherlock Holmes\"", "\"Sherlock Holmes said\""},
        {"[1, 2, 0x3]", "[1, 2, 4]"},
        {"temperature: 0.8", "temperature: 0.7"},
        {"top_k: 40", "top_k: 41"},
        {"seed: 1337", "seed: 1338"},
        {"model: models/m", "model: models/n"},
        {"id: g.one", "id: g.two"},
        {"temperature: 0.8", "temperature: 1"}, /* 1 (an integer) is not 1.0 (a float)... */
    };
    for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
        char *t = edited(changes[i][0], changes[i][1]);
        hash_of(t, h);
        cr_assert_str_neq(h, base, "%s -> %s", changes[i][0], changes[i][1]);
        free(t);
    }
    /* comparison-only keys and formatting do not */
    static const char *const same[][2] = {
        {"atol: 1.0e-4", "atol: 1.0e-3"},
        {"gate: {abs: 1.0e-4, ulps: 4}", "gate: {abs: 1.0e-3}"},
        {"tags: [golden]", "tags: [golden, more]"},
        {"description: d", "description: other"},
        {"    gate:", "    golden: x.st\n    gate:"},
        {"temperature: 0.8", "temperature: 8e-1"}, /* ... but the same float written otherwise is */
        {"seed: 1337", "seed: 0x539"},
        {"top_k: 40\n    top_p: 0.95", "top_p: 0.95\n    top_k: 40"},
        {"\"Sherlock Holmes\"", "'Sherlock Holmes'"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        char *t = edited(same[i][0], same[i][1]);
        hash_of(t, h);
        cr_assert_str_eq(h, base, "%s -> %s", same[i][0], same[i][1]);
        free(t);
    }
}

Test(golden_case, non_finite_floats_in_the_tree)
{
    gf_case_set set;
    const char *t = "cases:\n  - id: e\n    kind: sampler_errors\n    vocab: 8\n"
                    "    calls:\n      - {temperature: .nan, expect: error}\n"
                    "      - {temperature: -.inf, expect: error}\n";
    cr_assert_eq(load(t, &set), GF_OK, "%s", set.n_errors ? set.errors[0] : "");
    json_t *ex = json_object_get(set.cases[0].tree, "calls");
    json_t *nan = json_object_get(json_array_get(ex, 0), "temperature");
    cr_assert_str_eq(gf_json_nonfinite(nan), "NaN");
    cr_assert_str_eq(gf_json_nonfinite(json_object_get(json_array_get(ex, 1), "temperature")), "-Infinity");
    char *cj = gf_canonical_json(ex);
    cr_assert_str_eq(cj,
                     "[{\"expect\":\"error\",\"temperature\":NaN},{\"expect\":\"error\",\"temperature\":-Infinity}]");
    free(cj);
    gf_case_set_free(&set);
}

static void expect_error(const char *text, const char *want)
{
    gf_case_set set;
    cr_assert_eq(load(text, &set), GF_E_FORMAT, "expected '%s'", want);
    int found = 0;
    for (size_t i = 0; i < set.n_errors; i++)
        found |= strstr(set.errors[i], want) != NULL;
    cr_assert(found, "no error contains '%s'; first: %s", want, set.n_errors ? set.errors[0] : "(none)");
    gf_case_set_free(&set);
}

Test(golden_case, bad_keys)
{
    const char *head = "cases:\n  - id: g\n    kind: golden_generation\n    model: m\n";
    char t[512];
    snprintf(t, sizeof t, "%s    max_new_tokens: 4\n", head);
    expect_error(t, "missing required key 'prompts'");
    snprintf(t, sizeof t, "%s    prompts: [a]\n    temperature: -1\n", head);
    expect_error(t, "invalid sampler");
    snprintf(t, sizeof t, "%s    prompts: [a]\n    temperature: 1\n    top_p: 0\n", head);
    expect_error(t, "invalid sampler");
    snprintf(t, sizeof t, "%s    prompts: [a]\n    atol: -1\n", head);
    expect_error(t, "'atol' must be a finite number >= 0");
    snprintf(t, sizeof t, "%s    prompts: [a]\n    golden: ''\n", head);
    expect_error(t, "'golden' is empty");
    snprintf(t, sizeof t, "%s    prompts: [a]\n    eos_id: 3\n", head);
    expect_error(t, "unknown key 'eos_id'");
    snprintf(t, sizeof t, "%s    prompts: [a]\n    max_new_tokens: 0\n", head);
    expect_error(t, "'max_new_tokens' must lie in");
}
