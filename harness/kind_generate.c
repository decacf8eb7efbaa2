/* Model kinds about the generation loop: seeded_reproducibility,
 * context_limit, eos. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "kind.h"

static void free_tokens(int32_t **p, int32_t B)
{
    for (int32_t b = 0; p && b < B; b++)
        free(p[b]);
    free(p);
}

/* Encode every prompt; on failure records an error and returns 0. */
static int encode_all(gf_krun *k, const gf_prompt_spec *ps, int32_t B, int32_t ***prompts, int32_t **lens)
{
    *prompts = calloc((size_t)B, sizeof **prompts);
    *lens = calloc((size_t)B, sizeof **lens);
    if (!*prompts || !*lens) {
        gf_k_fail(k, "out of memory");
        return 0;
    }
    for (int32_t b = 0; b < B; b++)
        if (gf_prompt_tokens(k->session, &ps[b], &(*prompts)[b], &(*lens)[b]) != GF_OK) {
            gf_k_error(k, "%s", gf_error_msg());
            return 0;
        }
    return 1;
}

static void generate_failed(gf_krun *k, gf_status st, const char *what)
{
    if (st == GF_E_INVALID_ARG)
        gf_k_error(k, "%s: %s", what, gf_error_msg());
    else
        gf_k_status(k, st, what);
}

/* ======================= seeded_reproducibility ======================= */

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
    s->atol = 1e-4;
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
            s->seeds[i] = (uint64_t)v;
        }
    } else {
        bad = 1;
    }
    if (!bad && s->p.temperature == 0) {
        gf_y_error(ctx, gf_y_get(ctx, m, "temperature", 0),
                   "seeded_reproducibility needs a sampled temperature (> 0)");
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
    if (!runs || !encode_all(k, s->prompts, B, &prompts, &lens))
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
    /* the same seed repeats */
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
                generate_failed(k, st, "sampled generate");
                gf_generation_free(again);
                goto done;
            }
            if (!same_tokens(runs[i * B + b], 0, again, 0) && repeats) {
                repeats = 0;
                snprintf(why, sizeof why, "seed %llu, prompt %d: two runs differ", (unsigned long long)s->seeds[i], b);
            }
            gf_generation_free(again);
        }
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
                generate_failed(k, st, label);
                break;
            }
        }
done:
    for (int32_t i = 0; runs && i < S * B; i++)
        gf_generation_free(runs[i]);
    free(runs);
    free_tokens(prompts, B);
    free(lens);
}

/* ======================= context_limit ======================= */

static const char *const k_stops[] = {"eos", "length", "context_limit", NULL};
static const gf_stop_reason k_stop_vals[] = {GF_STOP_EOS, GF_STOP_LENGTH, GF_STOP_CONTEXT_LIMIT};

typedef struct limit_expect {
    int has_stop, has_total;
    int stop;                  /* index into k_stops */
    long long total;
} limit_expect;

typedef struct limit_spec {
    char *text;
    int32_t *ids;
    size_t n_ids;
    long long n_tokens;        /* prompt length when given as a count */
    long long max_new;
    limit_expect expect, uncached;
    int has_uncached, raise;
} limit_spec;

static void limit_free(void *p)
{
    limit_spec *s = p;
    if (s) {
        free(s->text);
        free(s->ids);
    }
    free(s);
}

static int parse_expect(gf_cctx *ctx, const gf_ynode *m, const char *key, int flags, limit_expect *e)
{
    const gf_ynode *n = gf_y_get(ctx, m, key, flags);
    if (!n)
        return (flags & GF_Y_REQUIRED) ? -1 : 0;
    char what[64];
    snprintf(what, sizeof what, "'%s'", key);
    if (!gf_y_node_is_map(ctx, n, what))
        return -1;
    int bad = 0, rc;
    rc = gf_y_enum(ctx, n, "stop_reason", 0, k_stops, &e->stop);
    bad |= rc < 0;
    e->has_stop = rc > 0;
    rc = gf_y_int(ctx, n, "total_tokens", 0, 1, 1 << 24, &e->total);
    bad |= rc < 0;
    e->has_total = rc > 0;
    snprintf(what, sizeof what, "in '%s' (known: stop_reason, total_tokens)", key);
    gf_y_check_unknown(ctx, n, what);
    if (!bad && !e->has_stop && !e->has_total) {
        gf_y_error(ctx, n, "'%s' needs stop_reason and/or total_tokens", key);
        bad = 1;
    }
    return bad ? -1 : 1;
}

static const char *const k_on_limit[] = {"stop", "raise", NULL};

static int parse_limit(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    limit_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->max_new = 20;
    int bad = gf_y_string(ctx, m, "prompt", 0, &s->text) < 0;
    const gf_ynode *pt = gf_y_get(ctx, m, "prompt_tokens", 0);
    if (pt && pt->type == GF_YN_SEQ) {
        bad |= gf_y_ints(ctx, m, "prompt_tokens", 0, 0, 2147483647LL, 1, &s->ids, &s->n_ids) < 0;
        if (s->text) {
            gf_y_error(ctx, pt, "give 'prompt' text or a 'prompt_tokens' list, not both");
            bad = 1;
        }
    } else if (pt) {
        bad |= gf_y_node_int(ctx, pt, "'prompt_tokens'", 1, 1 << 20, &s->n_tokens) < 0;
    } else if (!s->text) {
        gf_y_error(ctx, m, "missing required key 'prompt_tokens' (or 'prompt')");
        bad = 1;
    }
    bad |= gf_y_int(ctx, m, "max_new_tokens", 0, 1, 1 << 20, &s->max_new) < 0;
    bad |= parse_expect(ctx, m, "expect", GF_Y_REQUIRED, &s->expect) < 0;
    int rc = parse_expect(ctx, m, "uncached", 0, &s->uncached);
    bad |= rc < 0;
    s->has_uncached = rc > 0;
    bad |= gf_y_enum(ctx, m, "on_limit", 0, k_on_limit, &s->raise) < 0;
    return bad ? -1 : 0;
}

static void check_expect(gf_krun *k, const char *label, const limit_expect *e, const gf_generation *g)
{
    char name[128];
    if (e->has_stop) {
        snprintf(name, sizeof name, "%s stop_reason", label);
        gf_k_check(k, g->stop[0] == k_stop_vals[e->stop], name, "got %s, expected %s", gf_stop_reason_str(g->stop[0]),
                   k_stops[e->stop]);
    }
    if (e->has_total) {
        snprintf(name, sizeof name, "%s total_tokens", label);
        gf_k_check(k, g->n_until_stop[0] == e->total, name, "got %d, expected %lld", g->n_until_stop[0], e->total);
    }
}

static void run_limit(const gf_case *c, gf_krun *k)
{
    const limit_spec *s = c->spec;
    gf_engine *e = k->session->engine;
    const gf_model_config *cfg = gf_engine_config(e);
    int32_t *prompt = NULL, n = 0;
    if (s->ids) {
        prompt = malloc(s->n_ids * sizeof *prompt);
        if (prompt)
            memcpy(prompt, s->ids, s->n_ids * sizeof *prompt);
        n = (int32_t)s->n_ids;
    } else {
        int32_t want = s->n_tokens ? (int32_t)s->n_tokens : 0;
        int32_t *text_ids = NULL, tn = 0;
        if (s->text) {
            gf_prompt_spec ps = {.text = s->text};
            if (gf_prompt_tokens(k->session, &ps, &text_ids, &tn) != GF_OK) {
                gf_k_error(k, "%s", gf_error_msg());
                return;
            }
        }
        n = want ? want : tn;
        prompt = malloc((size_t)n * sizeof *prompt);
        for (int32_t i = 0; prompt && i < n; i++) /* the text repeated, or a fixed pattern */
            prompt[i] = tn ? text_ids[i % tn] : (int32_t)((i * 31 + 7) % cfg->vocab_size);
        free(text_ids);
    }
    if (!prompt) {
        gf_k_fail(k, "out of memory");
        return;
    }
    gf_k_metric_int(k, "prompt_tokens", n);
    gf_k_metric_int(k, "n_positions", cfg->n_positions);
    gf_generate_params gp = gf_generate_defaults();
    gp.max_new_tokens = (int32_t)s->max_new;
    gp.eos_id = -1;
    gf_generation *g = NULL;
    gf_status st = gf_generate(e, 1, (const int32_t *const *)&prompt, &n, &gp, &g);
    if (st != GF_OK) {
        generate_failed(k, st, "cached generate");
        goto done;
    }
    check_expect(k, "cached", &s->expect, g);
    gf_k_metric_json(k, "cached", json_pack("{s:s, s:i}", "stop_reason", gf_stop_reason_str(g->stop[0]),
                                            "total_tokens", g->n_until_stop[0]));
    gf_generation_free(g);
    g = NULL;
    if (s->raise) {
        gp.raise_on_context_limit = 1;
        st = gf_generate(e, 1, (const int32_t *const *)&prompt, &n, &gp, &g);
        gf_k_check(k, st == GF_E_CONTEXT_LIMIT, "on_limit raise", "%s",
                   st == GF_OK ? "no error: generation ended normally" : gf_error_msg());
        gf_k_metric_json(k, "raise", json_string(st == GF_OK ? "ok" : gf_status_str(st)));
        gf_generation_free(g);
        g = NULL;
        gp.raise_on_context_limit = 0;
    }
    if (s->has_uncached) {
        gp.use_cache = 0;
        st = gf_generate(e, 1, (const int32_t *const *)&prompt, &n, &gp, &g);
        if (st != GF_OK) {
            generate_failed(k, st, "uncached generate");
            goto done;
        }
        check_expect(k, "uncached", &s->uncached, g);
        gf_k_metric_json(k, "uncached", json_pack("{s:s, s:i}", "stop_reason", gf_stop_reason_str(g->stop[0]),
                                                  "total_tokens", g->n_until_stop[0]));
    }
done:
    gf_generation_free(g);
    free(prompt);
}

/* ======================= eos ======================= */

typedef struct eos_spec {
    gf_prompt_spec *prompts;
    size_t n_prompts;
    long long max_new, eos_id, require_eos;
    gf_sampler_params p;
    limit_expect *expect;      /* per row, optional */
    size_t n_expect;
} eos_spec;

static void eos_free(void *p)
{
    eos_spec *s = p;
    if (s) {
        gf_prompts_free(s->prompts, s->n_prompts);
        free(s->expect);
    }
    free(s);
}

static int parse_eos(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    eos_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->max_new = 32;
    s->require_eos = 1;
    s->p = gf_sampler_greedy();
    int bad = gf_y_prompts(ctx, m, "prompts", GF_Y_REQUIRED, &s->prompts, &s->n_prompts) < 0;
    bad |= gf_y_int(ctx, m, "max_new_tokens", 0, 1, 1 << 20, &s->max_new) < 0;
    bad |= gf_y_int(ctx, m, "eos_id", GF_Y_REQUIRED, 0, 2147483647LL, &s->eos_id) < 0;
    bad |= gf_y_int(ctx, m, "require_eos", 0, 0, 1 << 20, &s->require_eos) < 0;
    bad |= gf_y_sampler(ctx, m, &s->p) < 0;
    const gf_ynode *ex = gf_y_get(ctx, m, "expect", 0);
    if (ex && gf_y_node_is_seq(ctx, ex, "'expect'")) {
        if (!bad && ex->n != s->n_prompts) {
            gf_y_error(ctx, ex, "'expect' has %zu rows; there are %zu prompts", ex->n, s->n_prompts);
            bad = 1;
        }
        s->expect = calloc(ex->n ? ex->n : 1, sizeof *s->expect);
        s->n_expect = ex->n;
        for (size_t i = 0; s->expect && i < ex->n; i++) {
            const gf_ynode *it = ex->items[i];
            if (!gf_y_node_is_map(ctx, it, "an 'expect' row")) {
                bad = 1;
                continue;
            }
            int rc = gf_y_enum(ctx, it, "stop_reason", 0, k_stops, &s->expect[i].stop);
            bad |= rc < 0;
            s->expect[i].has_stop = rc > 0;
            rc = gf_y_int(ctx, it, "total_tokens", 0, 1, 1 << 24, &s->expect[i].total);
            bad |= rc < 0;
            s->expect[i].has_total = rc > 0;
            gf_y_check_unknown(ctx, it, "in an 'expect' row (known: stop_reason, total_tokens)");
        }
    } else if (ex) {
        bad = 1;
    }
    return bad ? -1 : 0;
}

static void run_eos(const gf_case *c, gf_krun *k)
{
    const eos_spec *s = c->spec;
    gf_engine *e = k->session->engine;
    const int32_t B = (int32_t)s->n_prompts, eos = (int32_t)s->eos_id;
    int32_t **prompts = NULL, *lens = NULL;
    gf_generation *g = NULL;
    if (!encode_all(k, s->prompts, B, &prompts, &lens))
        goto done;
    gf_k_metric_json(k, "prompt_tokens", gf_json_ints(lens, (size_t)B));
    gf_k_metric_json(k, "sampler_params", gf_sampler_json(&s->p));
    if (s->p.temperature > 0)
        gf_k_seed(k, "sampler", s->p.seed);
    gf_generate_params gp = gf_generate_defaults();
    gp.max_new_tokens = (int32_t)s->max_new;
    gp.sampler = s->p;
    gp.eos_id = eos;
    gf_status st = gf_generate(e, B, (const int32_t *const *)prompts, lens, &gp, &g);
    if (st != GF_OK) {
        generate_failed(k, st, "generate");
        goto done;
    }
    int eos_rows = 0, all_eos = 1;
    int32_t longest = 0;
    json_t *rows = json_array();
    for (int32_t b = 0; b < B; b++) {
        const int32_t P = g->prompt_len[b], until = g->n_until_stop[b], nt = g->n_tokens[b];
        const int32_t *t = g->tokens[b];
        int32_t first_eos = -1;
        for (int32_t i = P; i < nt; i++)
            if (t[i] == eos) {
                first_eos = i;
                break;
            }
        char name[96];
        snprintf(name, sizeof name, "row %d stop", b);
        if (g->stop[b] == GF_STOP_EOS) {
            eos_rows++;
            gf_k_check(k, first_eos >= 0 && until == first_eos + 1, name,
                       "stop_reason eos: the stop is at token %d, the first eos_id at %d", until - 1, first_eos);
            int only = 1;
            for (int32_t i = until; i < nt; i++)
                only &= t[i] == eos;
            snprintf(name, sizeof name, "row %d emits only eos_id once finished", b);
            gf_k_check(k, only, name, "%s", only ? "every later token is eos_id" : "a finished row emitted another token");
        } else {
            all_eos = 0;
            gf_k_check(k, first_eos < 0 && until == nt, name, "stop_reason %s, %d tokens, eos_id first at %d",
                       gf_stop_reason_str(g->stop[b]), until, first_eos);
        }
        if (until - P > longest)
            longest = until - P;
        if (b < (int32_t)s->n_expect) {
            const limit_expect *x = &s->expect[b];
            if (x->has_stop) {
                snprintf(name, sizeof name, "row %d stop_reason", b);
                gf_k_check(k, g->stop[b] == k_stop_vals[x->stop], name, "got %s, expected %s",
                           gf_stop_reason_str(g->stop[b]), k_stops[x->stop]);
            }
            if (x->has_total) {
                snprintf(name, sizeof name, "row %d total_tokens", b);
                gf_k_check(k, until == x->total, name, "got %d, expected %lld", until, x->total);
            }
        }
        json_array_append_new(rows, json_pack("{s:s, s:i, s:i, s:o}", "stop_reason", gf_stop_reason_str(g->stop[b]),
                                              "total_tokens", until, "new_tokens", until - P, "tokens",
                                              gf_json_ints(t + P, (size_t)(nt - P))));
    }
    gf_k_metric_json(k, "rows", rows);
    gf_k_metric_int(k, "steps", g->steps);
    gf_k_metric_int(k, "eos_rows", eos_rows);
    int32_t want_steps = all_eos ? longest : (int32_t)s->max_new;
    gf_k_check(k, g->steps == want_steps, "loop ends when every row has finished", "%d steps, expected %d", g->steps,
               want_steps);
    gf_k_check(k, eos_rows >= s->require_eos, "rows finished by eos_id", "%d of %d rows (required %lld)", eos_rows, B,
               s->require_eos);
done:
    gf_generation_free(g);
    free_tokens(prompts, B);
    free(lens);
}

const gf_kind_def gf_kind_seeded_reproducibility = {
    "seeded_reproducibility", "a seed repeats, different seeds differ, a sampled batch equals single runs",
    1, GF_KIND_MODEL_REQUIRED, "prompts, max_new_tokens, temperature, top_k, top_p, seeds, eos_id, batch, atol, gate",
    parse_seeded, seeded_free, run_seeded};
const gf_kind_def gf_kind_context_limit = {
    "context_limit", "a full cache stops (or raises) with the last token kept; uncached generation slides",
    1, GF_KIND_MODEL_REQUIRED, "prompt_tokens, prompt, max_new_tokens, expect, on_limit, uncached",
    parse_limit, limit_free, run_limit};
const gf_kind_def gf_kind_eos = {
    "eos", "eos_id ends a row, which then emits only eos_id; the loop ends when every row has",
    1, GF_KIND_MODEL_REQUIRED, "prompts, max_new_tokens, eos_id, require_eos, expect, temperature, top_k, top_p, seed",
    parse_eos, eos_free, run_eos};
