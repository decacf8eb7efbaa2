/* The sampler's bans and biases over the history (docs/sampler.md,
 * "Filters"): what every profile applies before its chain of stages, each
 * a rewrite of z from the history alone: vllm's given structured-output
 * mask and allowed_token_ids, vllm's bad words; logit bias; the EOS bans
 * (min_new_tokens, hf's min_length); hf's sequence_bias, no-repeat n-gram
 * ban, bad_words_ids and forced BOS / EOS. Between sampler_profile.c (the
 * extension it reads) and sampler_chain.c (which calls it first).
 *
 * z (V) is double; a banned token is -inf. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_internal.h"

typedef struct bans_ctx {
    const gf_sampler_ext *e;
    int32_t V;
    double *z; /* (V) */
    const char *pn;
} bans_ctx;

/* hf's no_repeat_ngram_size n over the history h (length L): nothing
 * while L + 1 < n; else every h[j + n - 1] whose n - 1 ids before it,
 * h[j .. j + n - 2], equal the history's last n - 1 ids is banned (n 1:
 * every id seen). transformers' _calc_banned_ngram_tokens. */
static void ngram_ban(bans_ctx *c)
{
    const gf_sampler_ext *e = c->e;
    const int32_t n = e->no_repeat_ngram_size, L = e->n_history;
    const int32_t *h = e->history;
    if (L + 1 < n)
        return;
    for (int32_t j = 0; j + n <= L; j++) {
        int32_t m = 0;
        while (m < n - 1 && h[j + m] == h[L - (n - 1) + m])
            m++;
        if (m == n - 1 && h[j + n - 1] < c->V)
            c->z[h[j + n - 1]] = -INFINITY;
    }
}

/* 1 when the last seq->n - 1 ids of h (L of them) are seq's first n - 1 */
static int seq_prefix_matches(const gf_token_seq *seq, const int32_t *h, int32_t L)
{
    const int32_t m = seq->n - 1;
    if (m > L)
        return 0;
    for (int32_t j = 0; j < m; j++)
        if (h[L - m + j] != seq->ids[j])
            return 0;
    return 1;
}

static gf_status seq_ids_in_vocab(const bans_ctx *c, const char *what, const gf_token_seq *q, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < q[i].n; j++)
            if (q[i].ids[j] >= c->V)
                return gf_error_set(GF_E_INVALID_ARG, "%s: the model vocabulary size is %d, but %s[%d] holds token %d",
                                    c->pn, (int)c->V, what, (int)i, (int)q[i].ids[j]);
    return GF_OK;
}

/* hf's sequence_bias (SequenceBiasLogitsProcessor): a one-id entry's bias
 * always; a longer one's when the history ends in its first n - 1 ids and
 * the entry is no longer than the history (HF skips `len(seq) >
 * input_ids.shape[1]`); biases ending in one id add up. */
static gf_status stage_sequence_bias(bans_ctx *c)
{
    const gf_sampler_ext *e = c->e;
    gf_status st = seq_ids_in_vocab(c, "sequence_bias", e->sequence_bias, e->n_sequence_bias);
    for (int32_t i = 0; st == GF_OK && i < e->n_sequence_bias; i++) {
        const gf_token_seq *q = &e->sequence_bias[i];
        if (q->n == 1 || (q->n <= e->n_history && seq_prefix_matches(q, e->history, e->n_history)))
            c->z[q->ids[q->n - 1]] += (double)q->bias;
    }
    return st;
}

/* Banned sequences: hf's bad_words_ids (NoBadWordsLogitsProcessor: a
 * sequence_bias of -inf over the whole history, the one-id entry [eos_id]
 * dropped) or vllm's bad words (over the generated ids: skipped when longer
 * than them plus one, vllm/v1/sample/ops/bad_words.py). */
static gf_status stage_bad_words(bans_ctx *c)
{
    const gf_sampler_ext *e = c->e;
    gf_status st = seq_ids_in_vocab(c, "bad_words_ids", e->bad_words, e->n_bad_words);
    const int vllm = e->profile == GF_PROFILE_VLLM;
    const int32_t *h = vllm ? e->history + e->n_prompt : e->history;
    const int32_t L = vllm ? e->n_history - e->n_prompt : e->n_history;
    for (int32_t i = 0; st == GF_OK && i < e->n_bad_words; i++) {
        const gf_token_seq *q = &e->bad_words[i];
        if (!vllm && q->n == 1 && q->ids[0] == e->eos_id)
            continue;
        const int fits = vllm ? q->n <= L + 1 : (q->n == 1 || q->n <= L);
        if (fits && seq_prefix_matches(q, h, L))
            c->z[q->ids[q->n - 1]] = -INFINITY;
    }
    return st;
}

/* vllm's given structured-output mask, then allowed_token_ids: every id
 * either leaves out is -inf. */
static gf_status stage_vllm_masks(bans_ctx *c)
{
    const gf_sampler_ext *e = c->e;
    const int32_t *lists[2] = {e->mask_ids, e->allowed_ids};
    const int32_t counts[2] = {e->n_mask_ids, e->n_allowed_ids};
    for (int k = 0; k < 2; k++) {
        if (counts[k] == 0)
            continue;
        uint8_t *ok = calloc((size_t)c->V, 1); /* (V) 1: allowed */
        if (!ok)
            return gf_error_set(GF_E_NOMEM, "sampler: a mask of %d tokens", (int)c->V);
        for (int32_t i = 0; i < counts[k]; i++) {
            if (lists[k][i] >= c->V) {
                free(ok);
                if (k == 1)
                    return gf_error_set(GF_E_INVALID_ARG,
                                        "vllm: allowed_token_ids contains out-of-vocab token id! (%d; vocabulary %d)",
                                        (int)lists[k][i], (int)c->V);
                return gf_error_set(GF_E_INVALID_ARG,
                                    "vllm: structured_output_mask allows token %d, outside the vocabulary (%d)",
                                    (int)lists[k][i], (int)c->V);
            }
            ok[lists[k][i]] = 1;
        }
        for (int32_t t = 0; t < c->V; t++)
            if (!ok[t])
                c->z[t] = -INFINITY;
        free(ok);
    }
    return GF_OK;
}

/* hf's forced BOS (a history of 1 id) and forced EOS (max_length - 1 ids):
 * every z -inf but the id's, which is 0; EOS after BOS, so it wins. */
static gf_status stage_forced(bans_ctx *c)
{
    const gf_sampler_ext *e = c->e;
    const int32_t ids[2] = {e->forced_bos_id, e->forced_eos_id};
    const char *const names[2] = {"forced_bos_token_id", "forced_eos_token_id"};
    const int on[2] = {e->n_history == 1, e->n_history == e->max_length - 1};
    for (int k = 0; k < 2; k++) {
        if (ids[k] < 0)
            continue;
        if (ids[k] >= c->V)
            return gf_error_set(GF_E_INVALID_ARG, "%s: %s %d is outside the vocabulary (%d)", c->pn, names[k],
                                (int)ids[k], (int)c->V);
        if (!on[k])
            continue;
        for (int32_t t = 0; t < c->V; t++)
            c->z[t] = -INFINITY;
        c->z[ids[k]] = 0.0;
    }
    return GF_OK;
}

gf_status gf_sampler_bans_run(const gf_sampler_ext *e, int32_t V, double *z, const char *pn)
{
    bans_ctx cc = {.e = e, .V = V, .z = z, .pn = pn}, *c = &cc;
    const int pr = e->profile;
    /* vllm's masks (the grammar's before the sampler, then allowed_token_ids), its bad words */
    gf_status st = stage_vllm_masks(c);
    if (st == GF_OK && pr == GF_PROFILE_VLLM && e->n_bad_words > 0)
        st = stage_bad_words(c);
    if (st != GF_OK)
        return st;
    /* logit bias, then the min_new_tokens ban (both argmax-changing, first in every profile) */
    for (int32_t b = 0; b < e->n_bias; b++) {
        int32_t t = e->bias[b].token;
        if (t >= V)
            return gf_error_set(GF_E_INVALID_ARG, "%s: logit_bias token %d is outside the vocabulary (%d)", pn, (int)t,
                                (int)V);
        z[t] += (double)e->bias[b].bias; /* vLLM's OpenAI server clamps to [-100, 100]; SamplingParams does not */
    }
    if (e->min_new_tokens > 0 && e->n_history - e->n_prompt < e->min_new_tokens) {
        if (e->eos_id >= 0 && e->eos_id < V)
            z[e->eos_id] = -INFINITY;
        for (int32_t i = 0; pr == GF_PROFILE_VLLM && i < e->n_stop_ids; i++)
            if (e->stop_ids[i] < V)
                z[e->stop_ids[i]] = -INFINITY;
    }
    /* hf's processors in generate()'s order (its repetition penalty, which
     * comes between sequence_bias and the n-gram ban, commutes with a ban
     * and with a forced 0, so it stays the chain's first stage) */
    if (e->n_sequence_bias > 0 && (st = stage_sequence_bias(c)) != GF_OK)
        return st;
    if (e->no_repeat_ngram_size > 0)
        ngram_ban(c);
    if (pr != GF_PROFILE_VLLM && e->n_bad_words > 0 && (st = stage_bad_words(c)) != GF_OK)
        return st;
    if (e->min_length > 0 && e->n_history < e->min_length && e->eos_id >= 0 && e->eos_id < V)
        z[e->eos_id] = -INFINITY; /* hf's min_length counts the prompt */
    if ((e->forced_bos_id >= 0 || e->forced_eos_id >= 0) && (st = stage_forced(c)) != GF_OK)
        return st;
    return GF_OK;
}
