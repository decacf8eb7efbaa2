/* Model kinds that compare logits within one backend:
 * cache_equals_recompute (teacher-forced, gf_verify_cache) and
 * batch_consistency (free-running, a left-padded batch against single runs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "kind.h"

/* One prompt from `prompt` (text) or `prompt_tokens` (ids). */
static int parse_one_prompt(gf_cctx *ctx, const gf_ynode *m, gf_prompt_spec *p)
{
    int rt = gf_y_string(ctx, m, "prompt", 0, &p->text);
    int ri = gf_y_ints(ctx, m, "prompt_tokens", 0, 0, 2147483647LL, 1, &p->ids, &p->n_ids);
    if (rt < 0 || ri < 0)
        return -1;
    if (rt > 0 && ri > 0) {
        gf_y_error(ctx, gf_y_get(ctx, m, "prompt_tokens", 0), "give 'prompt' or 'prompt_tokens', not both");
        return -1;
    }
    if (rt == 0 && ri == 0) {
        gf_y_error(ctx, m, "missing required key 'prompt' (or 'prompt_tokens')");
        return -1;
    }
    if (rt > 0 && !p->text[0]) {
        gf_y_error(ctx, gf_y_get(ctx, m, "prompt", 0), "'prompt' is empty");
        return -1;
    }
    return 0;
}

/* ======================= cache_equals_recompute ======================= */

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
    s->atol = 1e-4;
    int bad = parse_one_prompt(ctx, m, &s->prompt) < 0;
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

/* Replay the cached decode (with the same prefill chunks) and one uncached
 * forward to get both sides' logits at `step` (for the failure artifact). */
static gf_status replay_step(gf_engine *e, const int32_t *prompt, int32_t n, const int32_t *chunks,
                             int32_t n_chunks, const int32_t *tokens, int32_t step, float *cached_row,
                             float *uncached_row)
{
    const gf_model_config *cfg = gf_engine_config(e);
    int32_t total = n + step;
    int32_t *seq = malloc((size_t)total * sizeof *seq), *pos = malloc((size_t)total * sizeof *pos);
    void *cache = NULL;
    gf_status st = seq && pos ? GF_OK : gf_error_set(GF_E_NOMEM, "out of memory");
    if (st == GF_OK) {
        memcpy(seq, prompt, (size_t)n * sizeof *seq);
        memcpy(seq + n, tokens, (size_t)step * sizeof *seq);
        for (int32_t i = 0; i < total; i++)
            pos[i] = i;
        st = gf_engine_cache_create(e, 1, cfg->n_positions, &cache);
    }
    for (int32_t c = 0, at = 0; st == GF_OK && at < n; c++) {
        int32_t len = c < n_chunks ? chunks[c] : n - at;
        gf_batch in = {.B = 1, .T = len, .tokens = seq + at, .position_ids = pos + at, .logits_mode = GF_LOGITS_LAST};
        st = gf_engine_forward(e, cache, &in, cached_row);
        at += len;
    }
    for (int32_t t = 1; st == GF_OK && t <= step; t++) {
        gf_batch in = {.B = 1, .T = 1, .tokens = seq + n + t - 1, .position_ids = pos + n + t - 1,
                       .logits_mode = GF_LOGITS_LAST};
        st = gf_engine_forward(e, cache, &in, cached_row);
    }
    if (st == GF_OK) {
        gf_batch in = {.B = 1, .T = total, .tokens = seq, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
        st = gf_engine_forward(e, NULL, &in, uncached_row);
    }
    gf_engine_cache_free(e, cache);
    free(seq);
    free(pos);
    return st;
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
    st = gf_verify_cache(e, prompt, n, (int32_t)s->steps, s->chunks, (int32_t)s->n_chunks, &r);
    if (st != GF_OK) {
        if (st == GF_E_INVALID_ARG || st == GF_E_CONTEXT_LIMIT)
            gf_k_error(k, "verify: %s", gf_error_msg());
        else
            gf_k_status(k, st, "verify");
        free(prompt);
        return;
    }
    gf_cmp cmp;
    gf_cmp_init(&cmp, &s->gate, k->dtype, GF_CMP_TEACHER_FORCED, s->atol);
    /* step 0 also covers the prompt positions before the last: gf_verify_cache
     * reports their delta only when it is the largest (max_delta_step -1) */
    for (int32_t t = 0; t < r.steps; t++) {
        double d = r.step_max_delta[t];
        if (t == 0 && r.max_delta_step < 0 && !(r.max_abs_delta <= d))
            d = r.max_abs_delta;
        gf_cmp_step(&cmp, t, d, r.ref_tokens[t], r.tokens[t], r.step_margin[t], r.step_top1[t]);
    }
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
        float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
        if (a && b && replay_step(e, prompt, n, s->chunks, (int32_t)s->n_chunks, r.tokens, at, a, b) == GF_OK)
            gf_k_write_logits(k, "cached_vs_uncached", at, b, "uncached recompute (reference)", a,
                              s->chunks ? "cached decode, chunked prefill" : "cached decode", V);
        free(a);
        free(b);
    }
    gf_verify_result_clear(&r);
    free(prompt);
}

/* ======================= batch_consistency ======================= */

typedef struct batch_spec {
    gf_prompt_spec *prompts;
    size_t n_prompts;
    long long max_new;
    int modes[2];              /* cached, uncached */
    double atol;
    gf_gate gate;
} batch_spec;

static void batch_free(void *p)
{
    batch_spec *s = p;
    if (s)
        gf_prompts_free(s->prompts, s->n_prompts);
    free(s);
}

static const char *const k_modes[] = {"cached", "uncached", NULL};

static int parse_batch(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    batch_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->max_new = 24;
    s->atol = 1e-4;
    s->modes[0] = s->modes[1] = 1;
    int bad = gf_y_prompts(ctx, m, "prompts", GF_Y_REQUIRED, &s->prompts, &s->n_prompts) < 0;
    bad |= gf_y_int(ctx, m, "max_new_tokens", 0, 1, 1 << 20, &s->max_new) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_gate(ctx, m, "gate", &s->gate) < 0;
    const gf_ynode *mn = gf_y_get(ctx, m, "modes", 0);
    if (mn && gf_y_node_is_seq(ctx, mn, "'modes'")) {
        s->modes[0] = s->modes[1] = 0;
        if (mn->n == 0) {
            gf_y_error(ctx, mn, "'modes' is empty");
            bad = 1;
        }
        for (size_t i = 0; i < mn->n; i++) {
            const gf_ynode *it = mn->items[i];
            int which = -1;
            for (int w = 0; k_modes[w]; w++)
                if (it->type == GF_YN_SCALAR && !strcmp(it->value, k_modes[w]))
                    which = w;
            if (which < 0) {
                gf_y_error(ctx, it, "'modes' entries must be cached or uncached");
                bad = 1;
            } else {
                s->modes[which] = 1;
            }
        }
    } else if (mn) {
        bad = 1;
    }
    return bad ? -1 : 0;
}

/* on_step capture: every step's (B, V) logits */
typedef struct capture {
    float *logits;             /* (max_steps, B, V) */
    int32_t B, V, max_steps;
} capture;

static gf_status capture_step(void *user, const gf_step_info *info)
{
    capture *c = user;
    if (info->step < c->max_steps)
        memcpy(c->logits + (size_t)info->step * c->B * c->V, info->logits, (size_t)c->B * c->V * sizeof(float));
    return GF_OK;
}

/* Compare row b of a batch run against its single run, free-running; writes
 * the artifact at the first failing step. */
static void compare_row(gf_krun *k, const char *label, const gf_gate *gate, double atol, const gf_generation *single,
                        const capture *sc, const gf_generation *batch, const capture *bc, int32_t b)
{
    gf_cmp cmp;
    gf_cmp_init(&cmp, gate, k->dtype, GF_CMP_FREE_RUNNING, atol);
    const int32_t V = sc->V, P = single->prompt_len[0];
    int32_t steps = single->steps < batch->steps ? single->steps : batch->steps;
    for (int32_t t = 0; t < steps && !gf_cmp_stopped(&cmp); t++) {
        const float *ref = sc->logits + (size_t)t * V;
        const float *test = bc->logits + ((size_t)t * bc->B + b) * V;
        double top1;
        gf_row_top(ref, V, &top1, NULL);
        double delta = gf_max_abs_delta(ref, test, (size_t)V, NULL);
        int failed = gf_cmp_step(&cmp, t, delta, single->tokens[0][P + t], batch->tokens[b][P + t],
                                 single->margins[t], top1);
        if (failed)
            gf_k_write_logits(k, label, t, ref, "single prompt (reference)", test, "row of the left-padded batch", V);
    }
    cmp.ignored += single->steps - steps;
    gf_k_compare(k, label, &cmp);
}

/* Generate with a logits capture. */
static gf_status generate_captured(gf_engine *e, int32_t B, int32_t *const *prompts, const int32_t *lens,
                                   const gf_generate_params *base, const uint64_t *seq_ids, capture *cap,
                                   gf_generation **out)
{
    const int32_t V = gf_engine_config(e)->vocab_size;
    cap->B = B;
    cap->V = V;
    cap->max_steps = base->max_new_tokens;
    cap->logits = malloc((size_t)(base->max_new_tokens > 0 ? base->max_new_tokens : 1) * B * V * sizeof(float));
    if (!cap->logits)
        return gf_error_set(GF_E_NOMEM, "out of memory for %d x %d x %d logits", base->max_new_tokens, B, V);
    gf_generate_params p = *base;
    p.seq_ids = seq_ids;
    p.on_step = capture_step;
    p.user = cap;
    return gf_generate(e, B, (const int32_t *const *)prompts, lens, &p, out);
}

gf_status gf_kind_batch_vs_single(gf_krun *k, const char *label, int32_t B, int32_t *const *prompts,
                                  const int32_t *lens, const gf_generate_params *gp, const gf_gate *gate,
                                  double atol, gf_generation **singles_out)
{
    gf_engine *e = k->session->engine;
    if (B < 1)
        return gf_error_set(GF_E_INVALID_ARG, "%s: no prompts", label);
    uint64_t *ids = malloc((size_t)B * sizeof *ids);
    if (!ids)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    for (int32_t b = 0; b < B; b++)
        ids[b] = (uint64_t)b;
    capture bc = {0};
    gf_generation *batch = NULL;
    gf_status st = generate_captured(e, B, prompts, lens, gp, ids, &bc, &batch);
    if (st != GF_OK) {
        gf_error_prefix(st, "%s: batch of %d", label, B);
        goto done;
    }
    for (int32_t b = 0; b < B; b++) {
        capture sc = {0};
        gf_generation *single = NULL;
        st = generate_captured(e, 1, &prompts[b], &lens[b], gp, &ids[b], &sc, &single);
        if (st != GF_OK) {
            free(sc.logits);
            gf_error_prefix(st, "%s: prompt %d alone", label, b);
            goto done;
        }
        char row_label[256];
        snprintf(row_label, sizeof row_label, "%s/row%d", label, b);
        compare_row(k, row_label, gate, atol, single, &sc, batch, &bc, b);
        free(sc.logits);
        if (singles_out)
            singles_out[b] = single;
        else
            gf_generation_free(single);
    }
done:
    gf_generation_free(batch);
    free(bc.logits);
    free(ids);
    return st;
}

static void run_batch(const gf_case *c, gf_krun *k)
{
    const batch_spec *s = c->spec;
    const int32_t B = (int32_t)s->n_prompts;
    int32_t **prompts = calloc((size_t)B, sizeof *prompts), *lens = calloc((size_t)B, sizeof *lens);
    if (!prompts || !lens) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    for (int32_t b = 0; b < B; b++) {
        gf_status st = gf_prompt_tokens(k->session, &s->prompts[b], &prompts[b], &lens[b]);
        if (st != GF_OK) {
            gf_k_error(k, "%s", gf_error_msg());
            goto done;
        }
    }
    gf_k_metric_json(k, "prompt_tokens", gf_json_ints(lens, (size_t)B));
    for (int mode = 0; mode < 2; mode++) {
        if (!s->modes[mode])
            continue;
        gf_generate_params gp = gf_generate_defaults();
        gp.max_new_tokens = (int32_t)s->max_new;
        gp.sampler = gf_sampler_greedy();
        gp.eos_id = -1;
        gp.use_cache = mode == 0;
        gf_status st = gf_kind_batch_vs_single(k, k_modes[mode], B, prompts, lens, &gp, &s->gate, s->atol, NULL);
        if (st != GF_OK) {
            if (st == GF_E_INVALID_ARG || st == GF_E_CONTEXT_LIMIT)
                gf_k_error(k, "%s", gf_error_msg());
            else
                gf_k_status(k, st, k_modes[mode]);
        }
    }
done:
    for (int32_t b = 0; prompts && b < B; b++)
        free(prompts[b]);
    free(prompts);
    free(lens);
}

const gf_kind_def gf_kind_cache_equals_recompute = {
    "cache_equals_recompute", "greedy cached decode teacher-forced against the uncached forward, every step",
    1, GF_KIND_MODEL_REQUIRED, "prompt, prompt_tokens, steps, atol, gate, prefill_chunks",
    parse_cache, cache_free, run_cache};
const gf_kind_def gf_kind_batch_consistency = {
    "batch_consistency", "a left-padded greedy batch equals each prompt run alone (cached and uncached)",
    1, GF_KIND_MODEL_REQUIRED, "prompts, max_new_tokens, modes, atol, gate",
    parse_batch, batch_free, run_batch};
