/* The generation loop: left padding, prefill, one token per step, stop rules. */
#include "genfence/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_internal.h" /* gf_sample_row_valid, gf_sampler_ext_load: validated once, at the top */

const char *gf_stop_reason_str(gf_stop_reason r)
{
    switch (r) {
    case GF_STOP_EOS: return "eos";
    case GF_STOP_LENGTH: return "length";
    case GF_STOP_CONTEXT_LIMIT: return "context_limit";
    default: return "none";
    }
}

gf_generate_params gf_generate_defaults(void)
{
    gf_generate_params p;
    memset(&p, 0, sizeof p);
    p.max_new_tokens = 64;
    p.sampler = gf_sampler_greedy();
    p.eos_id = -1;
    p.use_cache = 1;
    return p;
}

void gf_positions_from_mask(const uint8_t *mask, int32_t B, int32_t T, int32_t *positions_out, int32_t *next_out)
{
    for (int32_t b = 0; b < B; b++) {
        int32_t run = 0;
        for (int32_t t = 0; t < T; t++) {
            run += mask[(size_t)b * T + t] ? 1 : 0;
            if (positions_out)
                positions_out[(size_t)b * T + t] = run > 0 ? run - 1 : 0;
        }
        if (next_out)
            next_out[b] = run;
    }
}

void gf_generation_free(gf_generation *g)
{
    if (!g)
        return;
    for (int32_t b = 0; g->tokens && b < g->B; b++)
        free(g->tokens[b]);
    free(g->tokens);
    free(g->prompt_len);
    free(g->n_tokens);
    free(g->n_until_stop);
    free(g->stop);
    free(g->margins);
    free(g);
}

static gf_generation *generation_alloc(int32_t B, const int32_t *prompt_lens, int32_t max_new)
{
    gf_generation *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->B = B;
    g->tokens = calloc((size_t)B, sizeof *g->tokens);
    g->prompt_len = calloc((size_t)B, sizeof *g->prompt_len);
    g->n_tokens = calloc((size_t)B, sizeof *g->n_tokens);
    g->n_until_stop = calloc((size_t)B, sizeof *g->n_until_stop);
    g->stop = calloc((size_t)B, sizeof *g->stop);
    g->margins = calloc((size_t)B * (max_new > 0 ? max_new : 1), sizeof *g->margins);
    if (!g->tokens || !g->prompt_len || !g->n_tokens || !g->n_until_stop || !g->stop || !g->margins) {
        gf_generation_free(g);
        return NULL;
    }
    for (int32_t b = 0; b < B; b++) {
        g->tokens[b] = malloc(((size_t)prompt_lens[b] + max_new) * sizeof(int32_t));
        if (!g->tokens[b]) {
            gf_generation_free(g);
            return NULL;
        }
        g->prompt_len[b] = prompt_lens[b];
    }
    return g;
}

/* The state of one run, freed in one place. */
typedef struct gen_state {
    int32_t B, V, Pmax, width; /* width: columns of seq / mask in use */
    int32_t *seq;              /* (B, cap) left-padded tokens so far */
    uint8_t *mask;             /* (B, cap) 1 = real token */
    int32_t cap;
    int32_t *pos;              /* (B, cap) scratch position ids */
    int32_t *next_pos;         /* (B) */
    uint8_t *packed_mask;      /* (B, cap) scratch: a (B, Tk) window */
    int32_t *in_tokens;        /* (B, cap) scratch */
    float *logits;             /* (B, V) last-position logits */
    int32_t *step_tokens;      /* (B) */
    gf_sample_result *results; /* (B) */
    uint8_t *finished;         /* (B) */
    uint8_t *finished_before;  /* (B) */
    double *mu;                /* (B) llamacpp's mirostat state per row; NULL when off */
    void *cache;
} gen_state;

static void state_free(gf_engine *e, gen_state *s)
{
    gf_engine_cache_free(e, s->cache);
    free(s->seq);
    free(s->mask);
    free(s->pos);
    free(s->next_pos);
    free(s->packed_mask);
    free(s->in_tokens);
    free(s->logits);
    free(s->step_tokens);
    free(s->results);
    free(s->finished);
    free(s->finished_before);
    free(s->mu);
}

/* Copy columns [c0, c0 + n) of a (B, cap) matrix into a packed (B, n) one. */
static void window_i32(int32_t *dst, const int32_t *src, int32_t B, int32_t cap, int32_t c0, int32_t n)
{
    for (int32_t b = 0; b < B; b++)
        memcpy(dst + (size_t)b * n, src + (size_t)b * cap + c0, (size_t)n * sizeof *dst);
}
static void window_u8(uint8_t *dst, const uint8_t *src, int32_t B, int32_t cap, int32_t c0, int32_t n)
{
    for (int32_t b = 0; b < B; b++)
        memcpy(dst + (size_t)b * n, src + (size_t)b * cap + c0, (size_t)n);
}

static int any_padding(const uint8_t *mask, int32_t B, int32_t cap, int32_t c0, int32_t n)
{
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = c0; t < c0 + n; t++)
            if (!mask[(size_t)b * cap + t])
                return 1;
    return 0;
}

/* Uncached: run the whole (cropped) sequence, keep each row's last logits. */
static gf_status forward_uncached(gf_engine *e, gen_state *s, int32_t n_positions)
{
    int32_t W = s->width < n_positions ? s->width : n_positions;
    int32_t c0 = s->width - W;
    window_i32(s->in_tokens, s->seq, s->B, s->cap, c0, W);
    window_u8(s->packed_mask, s->mask, s->B, s->cap, c0, W);
    gf_positions_from_mask(s->packed_mask, s->B, W, s->pos, NULL);
    gf_batch in = {.B = s->B,
                   .T = W,
                   .tokens = s->in_tokens,
                   .position_ids = s->pos,
                   .key_mask = any_padding(s->mask, s->B, s->cap, c0, W) ? s->packed_mask : NULL,
                   .logits_mode = GF_LOGITS_LAST};
    return gf_engine_forward(e, NULL, &in, s->logits);
}

/* Cached: feed columns [c0, width) (prefill or one new token). */
static gf_status forward_cached(gf_engine *e, gen_state *s, int32_t c0)
{
    int32_t T = s->width - c0;
    window_i32(s->in_tokens, s->seq, s->B, s->cap, c0, T);
    if (c0 == 0) { /* prefill: positions from the padding mask */
        window_u8(s->packed_mask, s->mask, s->B, s->cap, 0, T);
        gf_positions_from_mask(s->packed_mask, s->B, T, s->pos, NULL);
    } else { /* decode: each row continues from its count of real tokens */
        for (int32_t b = 0; b < s->B; b++)
            for (int32_t t = 0; t < T; t++)
                s->pos[(size_t)b * T + t] = s->next_pos[b] + t;
    }
    window_u8(s->packed_mask, s->mask, s->B, s->cap, 0, s->width);
    gf_batch in = {.B = s->B,
                   .T = T,
                   .tokens = s->in_tokens,
                   .position_ids = s->pos,
                   .key_mask = any_padding(s->mask, s->B, s->cap, 0, s->width) ? s->packed_mask : NULL,
                   .logits_mode = GF_LOGITS_LAST};
    gf_status st = gf_engine_forward(e, s->cache, &in, s->logits);
    for (int32_t b = 0; st == GF_OK && b < s->B; b++)
        s->next_pos[b] += c0 == 0 ? 0 : T;
    return st;
}

/* Cached, slide by recompute: reset the cache and prefill the last n_positions
 * columns with positions from their padding mask -- the very batch
 * forward_uncached runs, so the logits are the uncached loop's. */
static gf_status forward_slide(gf_engine *e, gen_state *s, int32_t n_positions)
{
    gf_status st = gf_engine_cache_reset(e, s->cache);
    if (st != GF_OK)
        return gf_error_prefix(st, "generate: sliding by recompute");
    const int32_t W = n_positions, c0 = s->width - W;
    window_i32(s->in_tokens, s->seq, s->B, s->cap, c0, W);
    window_u8(s->packed_mask, s->mask, s->B, s->cap, c0, W);
    gf_positions_from_mask(s->packed_mask, s->B, W, s->pos, NULL);
    gf_batch in = {.B = s->B,
                   .T = W,
                   .tokens = s->in_tokens,
                   .position_ids = s->pos,
                   .key_mask = any_padding(s->mask, s->B, s->cap, c0, W) ? s->packed_mask : NULL,
                   .logits_mode = GF_LOGITS_LAST};
    return gf_engine_forward(e, s->cache, &in, s->logits);
}

gf_status gf_generate(gf_engine *e, int32_t B, const int32_t *const *prompts, const int32_t *prompt_lens,
                      const gf_generate_params *p, gf_generation **gen_out)
{
    *gen_out = NULL;
    const gf_model_config *cfg = gf_engine_config(e);
    const int32_t V = cfg->vocab_size, NP = cfg->n_positions;
    if (B < 1 || !prompts || !prompt_lens)
        return gf_error_set(GF_E_INVALID_ARG, "generate: need at least one prompt");
    if (p->max_new_tokens < 0)
        return gf_error_set(GF_E_INVALID_ARG, "generate: max_new_tokens %d < 0", p->max_new_tokens);
    gf_status st = gf_sampler_validate(&p->sampler);
    if (st != GF_OK)
        return st;
    if (p->eos_id >= V)
        return gf_error_set(GF_E_INVALID_ARG, "generate: eos_id %d outside the vocabulary (%d)", p->eos_id, V);
    int32_t Pmax = 0;
    for (int32_t b = 0; b < B; b++) {
        if (prompt_lens[b] < 1)
            return gf_error_set(GF_E_INVALID_ARG, "generate: prompt %d is empty", b);
        for (int32_t t = 0; t < prompt_lens[b]; t++)
            if (prompts[b][t] < 0 || prompts[b][t] >= V)
                return gf_error_set(GF_E_INVALID_ARG,
                                    "generate: prompt %d token %d is %d, outside the model's vocabulary [0, %d)", b, t,
                                    prompts[b][t], V);
        if (prompt_lens[b] > Pmax)
            Pmax = prompt_lens[b];
    }
    if (p->use_cache && Pmax > NP)
        return gf_error_set(GF_E_CONTEXT_LIMIT, "generate: a %d-token prompt does not fit the %d-position context",
                            Pmax, NP);

    gen_state s = {.B = B, .V = V, .Pmax = Pmax, .width = Pmax};
    s.cap = Pmax + (p->max_new_tokens > 0 ? p->max_new_tokens : 0) + 1;
    const size_t BC = (size_t)B * s.cap;
    s.seq = calloc(BC, sizeof *s.seq);
    s.mask = calloc(BC, 1);
    s.pos = calloc(BC, sizeof *s.pos);
    s.next_pos = calloc((size_t)B, sizeof *s.next_pos);
    s.packed_mask = calloc(BC, 1);
    s.in_tokens = calloc(BC, sizeof *s.in_tokens);
    s.logits = malloc((size_t)B * V * sizeof *s.logits);
    s.step_tokens = calloc((size_t)B, sizeof *s.step_tokens);
    s.results = calloc((size_t)B, sizeof *s.results);
    s.finished = calloc((size_t)B, 1);
    s.finished_before = calloc((size_t)B, 1);
    gf_generation *g = generation_alloc(B, prompt_lens, p->max_new_tokens);
    if (!s.seq || !s.mask || !s.pos || !s.next_pos || !s.packed_mask || !s.in_tokens || !s.logits || !s.step_tokens ||
        !s.results || !s.finished || !s.finished_before || !g) {
        st = gf_error_set(GF_E_NOMEM, "generate: out of memory");
        goto fail;
    }
    for (int32_t b = 0; b < B; b++) {
        int32_t pad = Pmax - prompt_lens[b];
        for (int32_t t = 0; t < Pmax; t++) {
            s.seq[(size_t)b * s.cap + t] = t < pad ? p->pad_id : prompts[b][t - pad];
            s.mask[(size_t)b * s.cap + t] = t >= pad;
        }
        memcpy(g->tokens[b], prompts[b], (size_t)prompt_lens[b] * sizeof(int32_t));
        g->n_tokens[b] = prompt_lens[b];
        s.next_pos[b] = prompt_lens[b];
    }

    if (p->max_new_tokens == 0) {
        for (int32_t b = 0; b < B; b++) {
            g->stop[b] = GF_STOP_LENGTH;
            g->n_until_stop[b] = g->n_tokens[b];
        }
        *gen_out = g;
        state_free(e, &s);
        return GF_OK;
    }

    /* prefill */
    gf_engine_trace_step(0);
    if (p->use_cache) {
        /* the longest prompt and its new tokens, every position this
         * generation can feed (the last sampled token never is: one to
         * spare), not the model's whole context: a backend that clears
         * its cache at creation (llama.cpp) holds all of it in memory, 805 MB
         * of f32 k and v on Qwen2.5-0.5B's 32768 positions for a few tokens.
         * One that runs past the context slides or stops at NP, as before. */
        const int64_t need = (int64_t)Pmax + p->max_new_tokens;
        g->cache_len = need < NP ? (int32_t)need : NP;
        st = gf_engine_cache_create(e, B, g->cache_len, &s.cache);
        if (st == GF_OK)
            g->cache_bytes = gf_engine_cache_bytes(e, s.cache);
        if (st == GF_OK)
            st = forward_cached(e, &s, 0);
    } else {
        st = forward_uncached(e, &s, NP);
    }
    if (st != GF_OK) {
        gf_error_prefix(st, "generate: prefill of %d positions", s.width);
        goto fail;
    }

    /* llamacpp's mirostat: each row's mu, carried from step to step (the
     * sampler is stateless: mu goes in as mirostat_mu) */
    gf_sampler_ext miro_ext;
    gf_sampler_params miro_p = p->sampler;
    const int miro = p->sampler.ext && gf_sampler_ext_load(&p->sampler, &miro_ext) == GF_OK &&
                     miro_ext.profile == GF_PROFILE_LLAMACPP && miro_ext.mirostat;
    if (miro) {
        s.mu = malloc((size_t)B * sizeof *s.mu);
        if (!s.mu) {
            st = gf_error_set(GF_E_NOMEM, "generate: mirostat state for %d rows", B);
            goto fail;
        }
        for (int32_t b = 0; b < B; b++)
            s.mu[b] = miro_ext.use_mirostat_mu ? miro_ext.mirostat_mu : 2.0 * miro_ext.mirostat_tau;
        miro_ext.use_mirostat_mu = 1;
        miro_p.ext = &miro_ext;
    }

    for (int32_t step = 0;; step++) {
        /* sample every row; a finished row emits eos_id */
        memcpy(s.finished_before, s.finished, (size_t)B);
        for (int32_t b = 0; b < B; b++) {
            uint64_t seq_id = p->seq_ids ? p->seq_ids[b] : (uint64_t)b;
            if (miro)
                miro_ext.mirostat_mu = s.mu[b];
            st = gf_sample_row_valid(s.logits + (size_t)b * V, V, &miro_p, g->tokens[b], g->n_tokens[b],
                                     g->prompt_len[b], p->eos_id, seq_id, (uint64_t)step,
                                     &s.results[b]); /* history: the row's tokens */
            if (st != GF_OK) {
                gf_error_prefix(st, "generate: row %d, step %d", b, step);
                goto fail;
            }
            int32_t tok = s.finished[b]
                              ? (p->eos_id >= 0 ? p->eos_id : g->tokens[b][g->n_until_stop[b] - 1]) /* stop id */
                          : p->forced ? p->forced[b][step]
                                      : s.results[b].token;
            if (tok < 0 || tok >= V) {
                st = gf_error_set(GF_E_INVALID_ARG, "generate: forced token %d at row %d, step %d is outside [0, %d)",
                                  tok, b, step, V);
                goto fail;
            }
            if (miro && !s.finished[b]) { /* mu after this token (a forced one outside the kept set: unchanged) */
                double mu = s.mu[b];
                if (gf_sampler_mirostat_mu(s.logits + (size_t)b * V, V, &miro_p, tok, &mu) == GF_OK)
                    s.mu[b] = mu;
                else
                    gf_error_clear();
            }
            s.step_tokens[b] = tok;
            s.seq[(size_t)b * s.cap + s.width] = tok;
            s.mask[(size_t)b * s.cap + s.width] = 1;
            g->tokens[b][g->n_tokens[b]++] = tok;
            g->margins[(size_t)step * B + b] = s.finished[b] ? NAN : s.results[b].margin;
            if (!s.finished[b] && ((p->eos_id >= 0 && tok == p->eos_id) || gf_sampler_is_stop(&p->sampler, tok))) {
                s.finished[b] = 1;
                g->stop[b] = GF_STOP_EOS;
                g->n_until_stop[b] = g->n_tokens[b];
            }
        }
        s.width++;
        g->steps = step + 1;
        if (p->on_step) {
            gf_step_info info = {.step = step,
                                 .B = B,
                                 .V = V,
                                 .logits = s.logits,
                                 .tokens = s.step_tokens,
                                 .results = s.results,
                                 .finished_before = s.finished_before};
            st = p->on_step(p->user, &info);
            if (st != GF_OK)
                goto fail;
        }
        int all_done = 1;
        for (int32_t b = 0; b < B; b++)
            all_done &= s.finished[b];
        if (all_done)
            break;
        gf_stop_reason why = GF_STOP_NONE;
        int slide = 0;
        if (step + 1 >= p->max_new_tokens)
            why = GF_STOP_LENGTH;
        else if (p->use_cache && s.width - 1 >= NP) /* cache full: nowhere to feed the token */
            why = GF_STOP_CONTEXT_LIMIT;
        if (why == GF_STOP_CONTEXT_LIMIT && p->slide_on_limit && !p->raise_on_context_limit) {
            why = GF_STOP_NONE;
            slide = 1;
        }
        if (why == GF_STOP_CONTEXT_LIMIT && p->raise_on_context_limit) {
            st = gf_error_set(GF_E_CONTEXT_LIMIT,
                              "generate: context limit: the cache holds all %d positions after %d new tokens", NP,
                              step + 1);
            goto fail;
        }
        if (why != GF_STOP_NONE) {
            for (int32_t b = 0; b < B; b++)
                if (!s.finished[b]) {
                    g->stop[b] = why;
                    g->n_until_stop[b] = g->n_tokens[b];
                }
            break;
        }
        gf_engine_trace_step(step + 1);
        st = !p->use_cache ? forward_uncached(e, &s, NP)
             : slide       ? forward_slide(e, &s, NP)
                           : forward_cached(e, &s, s.width - 1);
        if (st != GF_OK) {
            gf_error_prefix(st, "generate: step %d (after token %d)", step + 1, step);
            goto fail;
        }
    }
    gf_engine_trace_step(-1);
    state_free(e, &s);
    *gen_out = g;
    return GF_OK;
fail:
    gf_engine_trace_step(-1);
    state_free(e, &s);
    gf_generation_free(g);
    return st;
}
