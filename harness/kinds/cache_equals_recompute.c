/* cache_equals_recompute: a cached greedy decode against an uncached forward
 * over the same prefix at every step (the seed's verify_cache), gated. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "genfence/engine.h"
#include "keys.h"
#include "stat_thresholds.h"

typedef struct cache_spec {
    gf_prompt_spec prompt;
    long long steps;
    double atol;
    gf_gate gate;
    int32_t *chunks;
    size_t n_chunks;
} cache_spec;

static void cache_free(void *p)
{
    cache_spec *s = p;
    if (s) {
        free(s->prompt.text);
        free(s->prompt.ids);
        free(s->chunks);
    }
    free(s);
}

static int parse_cache(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    cache_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->steps = 64;
    s->atol = GF_ATOL_DEFAULT;
    int bad = gf_y_one_prompt(ctx, m, &s->prompt) < 0;
    bad |= gf_y_int(ctx, m, "steps", 0, 1, 1 << 20, &s->steps) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_gate(ctx, m, "gate", &s->gate) < 0;
    bad |= gf_y_ints(ctx, m, "prefill_chunks", 0, 1, 1 << 20, 1, &s->chunks, &s->n_chunks) < 0;
    if (!bad && !(s->atol >= 0)) {
        gf_y_error(ctx, gf_y_get(ctx, m, "atol", 0), "'atol' must be >= 0");
        bad = 1;
    }
    return bad ? -1 : 0;
}

/* The rows to keep (gf_row_keep): step 0's, which the gate may name once the
 * prompt positions' delta is folded in (gf_cmp_verify), and those of the
 * first step an online copy of the gate fails at; one of the two is the
 * failing step of the full comparison. */
typedef struct keep_gate {
    gf_cmp cmp;
} keep_gate;

static int pick_failing(void *user, const gf_step_summary *s)
{
    keep_gate *g = user;
    int failed = gf_cmp_step(&g->cmp, s->step, s->delta, s->ref_token, s->token, s->ref_margin, s->ref_top1);
    return failed || s->step == 0;
}

/* Bytes per element of a KV-cache type (issue 31: f32 4, f16 2, q8_0 34/32,
 * q4_0 18/32, ...); 0 for a type not in the table. */
static double kv_bytes_per(const char *t)
{
    static const struct {
        const char *name;
        double bytes;
    } k_types[] = {{"f32", 4},          {"f16", 2},           {"bf16", 2},         {"f64", 8},
                   {"q8_0", 34.0 / 32}, {"q4_0", 18.0 / 32},  {"q4_1", 20.0 / 32}, {"q5_0", 22.0 / 32},
                   {"q5_1", 24.0 / 32}, {"iq4_nl", 18.0 / 32}};
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++)
        if (!strcmp(t, k_types[i].name))
            return k_types[i].bytes;
    return 0;
}

/* The slots no comparison reaches (issue 11): a cache reused after
 * cache_reset gives the first prefill's logits again, cache_length is 0
 * after the reset, and cache_bytes holds at least the (2 for k and v, L, 1,
 * H_kv, length held, d_head) layout at the bytes per element of the KV type
 * the backend declares (info.kv_cache, else its compute dtype; one byte for a
 * type not in kv_bytes_per's table, saying so). One check each. */
static void check_reuse(gf_krun *k, gf_engine *e, const int32_t *prompt, int32_t n, double atol)
{
    const gf_model_config *cfg = gf_engine_config(e);
    const int32_t V = cfg->vocab_size;
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    float *first = malloc((size_t)V * sizeof *first), *again = malloc((size_t)V * sizeof *again); /* (1, 1, V) */
    void *cache = NULL;
    gf_status st = pos && first && again ? GF_OK : gf_error_set(GF_E_NOMEM, "out of memory");
    for (int32_t i = 0; st == GF_OK && i < n; i++)
        pos[i] = i;
    if (st == GF_OK)
        st = gf_engine_cache_create(e, 1, cfg->n_positions, &cache);
    const size_t bytes0 = st == GF_OK ? gf_engine_cache_bytes(e, cache) : 0; /* before any position is held */
    gf_batch in = {.B = 1, .T = n, .tokens = prompt, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
    if (st == GF_OK)
        st = gf_engine_forward(e, cache, &in, first);
    if (st == GF_OK) { /* dirty the cache past the prompt, then reset and prefill again */
        int32_t tok = prompt[0], p = n;
        gf_batch one = {.B = 1, .T = 1, .tokens = &tok, .position_ids = &p, .logits_mode = GF_LOGITS_LAST};
        st = n < cfg->n_positions ? gf_engine_forward(e, cache, &one, again) : GF_OK;
    }
    if (st != GF_OK) {
        gf_k_status(k, st, "cache reuse");
        goto done;
    }
    /* a dynamic cache (docs/protocol.md) holds only the positions so far:
     * the layout up to the current length is the floor; a cache allocated
     * whole (the same bytes, > 0, before the prefill and after) holds all
     * of max_len, the floor its layout */
    const size_t bytes_now = gf_engine_cache_bytes(e, cache);
    const int whole = bytes0 > 0 && bytes0 == bytes_now;
    int32_t held = whole ? cfg->n_positions : gf_engine_cache_length(e, cache);
    gf_k_metric_json(k, "cache_allocation", json_string(whole ? "whole (max_len)" : "grows with its length"));
    double elems = 2.0 * cfg->n_layer * cfg->n_kv_head * (double)held * cfg->d_head;
    char wt[32], kvt[32];
    gf_stat_backend_types(k, wt, sizeof wt, kvt, sizeof kvt);
    char kt[32], vt[32]; /* K and V of different types (k=q8_0,v=f16): their mean */
    gf_kv_split(kvt, kt, sizeof kt, vt, sizeof vt);
    double per = kv_bytes_per(kt) > 0 && kv_bytes_per(vt) > 0 ? (kv_bytes_per(kt) + kv_bytes_per(vt)) / 2 : 0;
    gf_k_metric_json(k, "kv_bytes_per_element",
                     per > 0 ? json_real(per) : json_string("unknown type: one byte per element assumed"));
    per = per > 0 ? per : 1.0;
    size_t bytes = bytes_now;
    gf_k_metric_int(k, "cache_bytes", (long long)bytes);
    gf_k_metric_json(k, "kv_cache", gf_kv_cache_json(cfg, 1, cfg->n_positions, bytes));
    if (k->weights &&
        !strcmp(k->weights, GF_WEIGHTS_SERVED)) /* its cache is the token history: the K/V is the server's */
        gf_k_metric_json(k, "cache_bytes_check",
                         json_string("not judged: a served backend's cache holds the token history it resends, the "
                                     "K/V is the server's (docs/http.md)"));
    else
        gf_k_check(k, (double)bytes >= elems * per, "cache_bytes covers the layout",
                   "cache_bytes %zu for (2, L %d, B 1, H_kv %d, %s %d, d_head %d) = %.0f elements of kv %s at "
                   "%g bytes: %.0f bytes",
                   bytes, cfg->n_layer, cfg->n_kv_head, whole ? "max_len" : "length", held, cfg->d_head, elems, kvt,
                   per, elems * per);
    gf_error_clear();
    st = gf_engine_cache_reset(e, cache);
    if (st != GF_OK) {
        gf_k_fail(k, "cache_reset: %s (%s)", gf_error_msg(), gf_status_str(st));
        goto done;
    }
    int32_t len = gf_engine_cache_length(e, cache);
    if (!gf_k_check(k, len == 0, "cache_reset empties the cache", "cache_length %d after cache_reset (want 0)", len))
        goto done;
    st = gf_engine_forward(e, cache, &in, again);
    if (st != GF_OK) {
        gf_k_status(k, st, "prefill after cache_reset");
        goto done;
    }
    size_t where = 0;
    double d = gf_max_abs_delta(first, again, (size_t)V, &where);
    gf_k_check(k, d <= atol, "a reset cache gives the first prefill's logits",
               "max |delta| %.3g (token %zu) between the prefill of a new cache and of the same cache after "
               "cache_reset (atol %.3g)",
               d, where, atol);
done:
    gf_engine_cache_free(e, cache);
    free(pos);
    free(first);
    free(again);
}

/* The own-key rule of the mask contract: a query always sees its own key,
 * whatever the mask says. Row 1 of an uncached (2, n) forward is all padding
 * (key mask 0): its logits must be finite (the engine checks every logit),
 * and row 0 must equal the prompt run alone. */
static void check_own_key(gf_krun *k, gf_engine *e, const int32_t *prompt, int32_t n, double atol)
{
    const int32_t V = gf_engine_config(e)->vocab_size;
    int32_t *tok = malloc((size_t)2 * n * sizeof *tok), *pos = malloc((size_t)2 * n * sizeof *pos); /* (2, n) */
    uint8_t *mask = malloc((size_t)2 * n);                                                          /* (2, n) */
    float *two = malloc((size_t)2 * V * sizeof *two), *one = malloc((size_t)V * sizeof *one); /* (2, 1, V), (1, 1, V) */
    gf_status st = tok && pos && mask && two && one ? GF_OK : gf_error_set(GF_E_NOMEM, "out of memory");
    for (int32_t i = 0; st == GF_OK && i < n; i++) {
        tok[i] = tok[n + i] = prompt[i];
        pos[i] = pos[n + i] = i;
        mask[i] = 1;
        mask[n + i] = 0;
    }
    gf_batch both = {
        .B = 2, .T = n, .tokens = tok, .position_ids = pos, .key_mask = mask, .logits_mode = GF_LOGITS_LAST};
    gf_batch alone = {.B = 1, .T = n, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
    if (st == GF_OK)
        st = gf_engine_forward(e, NULL, &both, two);
    if (st != GF_OK) {
        gf_k_fail(k, "own key: a fully padded query row: %s (%s)", gf_error_msg(), gf_status_str(st));
        goto done;
    }
    st = gf_engine_forward(e, NULL, &alone, one);
    if (st != GF_OK) {
        gf_k_status(k, st, "own key: the prompt alone");
        goto done;
    }
    size_t where = 0;
    double d = gf_max_abs_delta(two, one, (size_t)V, &where);
    gf_k_check(k, d <= atol, "a fully padded row sees its own key",
               "row 1 all padding: finite logits; row 0 vs alone max |delta| %.3g (token %zu, atol %.3g)", d, where,
               atol);
done:
    free(tok);
    free(pos);
    free(mask);
    free(two);
    free(one);
}

static void run_cache(const gf_case *c, gf_krun *k)
{
    const cache_spec *s = c->spec;
    gf_engine *e = k->session->engine;
    const int32_t V = gf_engine_config(e)->vocab_size;
    int32_t *prompt = NULL, n = 0;
    gf_status st = gf_prompt_tokens(k->session, &s->prompt, &prompt, &n);
    if (st != GF_OK) {
        gf_k_error(k, "%s", gf_error_msg());
        return;
    }
    gf_k_metric_int(k, "prompt_tokens", n);
    gf_k_metric_json(k, "prompt", gf_json_ints(prompt, (size_t)n));
    if (s->chunks)
        gf_k_metric_json(k, "prefill_chunks", gf_json_ints(s->chunks, s->n_chunks));
    gf_verify_result r;
    keep_gate kg;
    gf_cmp_init(&kg.cmp, &s->gate, k->dtype, GF_CMP_TEACHER_FORCED, s->atol);
    gf_row_keep keep = {.pick = pick_failing, .user = &kg};
    st = gf_verify_cache(e, prompt, n, (int32_t)s->steps, s->chunks, (int32_t)s->n_chunks, &keep, &r);
    if (st != GF_OK) {
        gf_k_status(k, st, "verify");
        free(prompt);
        return;
    }
    gf_cmp cmp;
    gf_cmp_init(&cmp, &s->gate, k->dtype, GF_CMP_TEACHER_FORCED, s->atol);
    gf_cmp_verify(&cmp, &r);
    gf_k_compare(k, "cached_vs_uncached", &cmp);
    gf_k_metric_int(k, "steps", r.steps);
    gf_k_metric_json(k, "tokens", gf_json_ints(r.tokens, (size_t)r.steps));
    gf_k_metric_json(k, "tokens_equal", json_boolean(r.tokens_equal));
    json_t *per16 = json_array();
    for (int32_t i = 0; i < r.steps; i += 16) {
        double m = 0;
        for (int32_t j = i; j < i + 16 && j < r.steps; j++)
            m = r.step_max_delta[j] > m || isnan(r.step_max_delta[j]) ? r.step_max_delta[j] : m;
        json_array_append_new(per16, isfinite(m) ? json_real(m) : json_null());
    }
    gf_k_metric_json(k, "per16_max_delta", per16);
    gf_k_metric_json(k, "step_max_delta", gf_json_doubles(r.step_max_delta, (size_t)r.steps));
    gf_k_metric_json(k, "step_margin", gf_json_doubles(r.step_margin, (size_t)r.steps));
    if (gf_cmp_verdict(&cmp, NULL, 0) == GF_V_FAIL) {
        int32_t at = cmp.first_failing < 0 ? 0 : cmp.first_failing;
        const gf_kept_rows *kr = gf_row_keep_find(&keep, at);
        if (kr)
            gf_k_write_logits(k, "cached_vs_uncached", at, kr->ref, "uncached recompute (reference)", kr->test,
                              s->chunks ? "cached decode, chunked prefill" : "cached decode", V);
    }
    gf_row_keep_clear(&keep);
    check_reuse(k, e, prompt, n, cmp.atol);
    check_own_key(k, e, prompt, n, cmp.atol);
    gf_verify_result_clear(&r);
    free(prompt);
}

const gf_kind_def gf_kind_cache_equals_recompute = {
    .name = "cache_equals_recompute",
    .summary = "greedy cached decode teacher-forced against the uncached forward, every step",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .parse = parse_cache,
    .free_spec = cache_free,
    .run = run_cache,
};
