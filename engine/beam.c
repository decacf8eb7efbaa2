/* Beam search, transformers 4.47.1's rules (genfence/beam.h). */
#include "genfence/beam.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/status.h"

typedef struct cand {
    double score; /* beam sum + log_softmax */
    int64_t flat; /* beam x V + token */
} cand;

/* a before b: higher score, then lower flat index */
static int cand_before(const cand *a, const cand *b)
{
    return a->score > b->score || (a->score == b->score && a->flat < b->flat);
}

/* Insert c into the sorted list top (n of at most cap). */
static void cand_insert(cand *top, int32_t *n, int32_t cap, cand c)
{
    if (*n == cap && !cand_before(&c, &top[cap - 1]))
        return;
    int32_t i = *n < cap ? (*n)++ : cap - 1;
    while (i > 0 && cand_before(&c, &top[i - 1])) {
        top[i] = top[i - 1];
        i--;
    }
    top[i] = c;
}

typedef struct hyp {
    double score, sum;
    int32_t gen_len, n_tokens, finished;
    int32_t *tokens;
    long order; /* when it was added (the stable sort's order) */
} hyp;

typedef struct hyps {
    hyp *v; /* at most num_beams + 1 */
    int32_t n, cap;
    double worst;
    long added;
} hyps;

/* BeamHypotheses.add: takes ownership of tokens. */
static void hyps_add(hyps *h, int32_t *tokens, int32_t n_tokens, double sum, int32_t gen_len, double lp,
                     int32_t finished)
{
    double score = sum / pow((double)gen_len, lp);
    if (!(h->n < h->cap - 1 || score > h->worst)) {
        free(tokens);
        return;
    }
    h->v[h->n++] = (hyp){.score = score,
                         .sum = sum,
                         .gen_len = gen_len,
                         .n_tokens = n_tokens,
                         .finished = finished,
                         .tokens = tokens,
                         .order = h->added++};
    if (h->n > h->cap - 1) {
        /* sorted((score, idx)): drop the first (lowest score, lower index on a
         * tie); worst = the second's score */
        int32_t lo = 0, second = -1;
        for (int32_t i = 1; i < h->n; i++)
            if (h->v[i].score < h->v[lo].score)
                lo = i;
        for (int32_t i = 0; i < h->n; i++)
            if (i != lo && (second < 0 || h->v[i].score < h->v[second].score))
                second = i;
        h->worst = h->v[second].score;
        free(h->v[lo].tokens);
        memmove(&h->v[lo], &h->v[lo + 1], (size_t)(h->n - lo - 1) * sizeof *h->v);
        h->n--;
    } else if (score < h->worst) {
        h->worst = score;
    }
}

/* BeamHypotheses.is_done(best_sum, cur_len): cur_len counts the next token. */
static int hyps_done(const hyps *h, const gf_beam_params *p, double best_sum, int32_t cur_len, int32_t P)
{
    if (h->n < p->num_beams)
        return 0;
    if (p->early_stopping == GF_BEAM_EARLY_TRUE)
        return 1;
    int32_t len = cur_len - P;
    if (p->early_stopping == GF_BEAM_EARLY_NEVER && p->length_penalty > 0)
        len = p->max_new_tokens;
    return h->worst >= best_sum / pow((double)len, p->length_penalty);
}

void gf_beam_result_clear(gf_beam_result *r)
{
    if (!r)
        return;
    for (int32_t i = 0; r->tokens && i < r->n; i++)
        free(r->tokens[i]);
    free(r->tokens);
    free(r->n_tokens);
    free(r->scores);
    free(r->sum_logprobs);
    free(r->generated_len);
    free(r->finished);
    memset(r, 0, sizeof *r);
}

int32_t gf_best_of(const double *scores, int32_t n)
{
    int32_t best = -1;
    for (int32_t i = 0; scores && i < n; i++)
        if (!isnan(scores[i]) && (best < 0 || scores[i] > scores[best]))
            best = i;
    return best;
}

static gf_status check_params(const gf_model_config *cfg, int32_t P, const gf_beam_params *p)
{
    if (!p)
        return gf_error_set(GF_E_INVALID_ARG, "beam search: params NULL");
    if (p->num_beams < 2 || (int64_t)2 * p->num_beams > cfg->vocab_size)
        return gf_error_set(GF_E_INVALID_ARG, "beam search: num_beams %d (must be >= 2 and 2 x num_beams <= V = %d)",
                            p->num_beams, cfg->vocab_size);
    if (p->num_return < 1 || p->num_return > p->num_beams)
        return gf_error_set(GF_E_INVALID_ARG, "beam search: num_return_sequences %d (must be in [1, num_beams %d])",
                            p->num_return, p->num_beams);
    if (p->max_new_tokens < 1 || P < 1 || (int64_t)P + p->max_new_tokens - 1 > cfg->n_positions)
        return gf_error_set(GF_E_INVALID_ARG,
                            "beam search: %d prompt tokens + max_new_tokens %d - 1 must be in [1, n_positions %d]", P,
                            p->max_new_tokens, cfg->n_positions);
    if (!isfinite(p->length_penalty))
        return gf_error_set(GF_E_INVALID_ARG, "beam search: length_penalty %g is not finite", p->length_penalty);
    if (p->early_stopping < GF_BEAM_EARLY_FALSE || p->early_stopping > GF_BEAM_EARLY_NEVER)
        return gf_error_set(GF_E_INVALID_ARG, "beam search: early_stopping %d (0 false, 1 true, 2 never)",
                            p->early_stopping);
    if (p->eos_id >= cfg->vocab_size)
        return gf_error_set(GF_E_INVALID_ARG, "beam search: eos_id %d outside the vocabulary (%d)", p->eos_id,
                            cfg->vocab_size);
    return GF_OK;
}

gf_status gf_beam_search(gf_engine *e, const int32_t *prompt, int32_t P, const gf_beam_params *p, gf_beam_result *out)
{
    if (!out)
        return gf_error_set(GF_E_INVALID_ARG, "beam search: out NULL");
    memset(out, 0, sizeof *out);
    if (!e || !prompt)
        return gf_error_set(GF_E_INVALID_ARG, "beam search: engine or prompt NULL");
    const gf_model_config *cfg = gf_engine_config(e);
    gf_status st = check_params(cfg, P, p);
    if (st != GF_OK)
        return st;
    const int32_t nb = p->num_beams, K = 2 * nb, V = cfg->vocab_size, L = P + p->max_new_tokens;
    /* running beams: (nb, L) tokens, their sums; the next step's in nxt */
    int32_t *seq = malloc((size_t)nb * L * sizeof *seq), *nxt = malloc((size_t)nb * L * sizeof *nxt);
    int32_t *pos = malloc((size_t)nb * L * sizeof *pos);
    double *sum = calloc((size_t)nb, sizeof *sum), *nsum = calloc((size_t)nb, sizeof *nsum);
    float *logits = malloc((size_t)nb * V * sizeof *logits);
    cand *top = malloc((size_t)(K + 1) * sizeof *top);
    hyps h = {.v = calloc((size_t)nb + 1, sizeof(hyp)), .cap = nb + 1, .worst = 1e9};
    if (!seq || !nxt || !pos || !sum || !nsum || !logits || !top || !h.v) {
        st = gf_error_set(GF_E_NOMEM, "beam search: out of memory");
        goto done;
    }
    memcpy(seq, prompt, (size_t)P * sizeof *seq);
    out->min_gap = INFINITY;
    out->min_gap_step = -1;
    int32_t n_run = 1, len = P, is_done = 0;
    /* step 0 runs the prompt once: HF's other num_beams - 1 copies start at
     * -1e9 and none of their candidates reaches the best 2 x num_beams */
    for (int32_t step = 0;; step++) {
        for (int32_t b = 0; b < n_run; b++)
            for (int32_t t = 0; t < len; t++)
                pos[(size_t)b * len + t] = t;
        int32_t *packed = nxt; /* (n_run, len) contiguous for the forward */
        for (int32_t b = 0; b < n_run; b++)
            memcpy(packed + (size_t)b * len, seq + (size_t)b * L, (size_t)len * sizeof *seq);
        gf_batch in = {.B = n_run, .T = len, .tokens = packed, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
        gf_engine_trace_step(step);
        st = gf_engine_forward(e, NULL, &in, logits);
        out->steps++;
        if (st != GF_OK) {
            gf_error_prefix(st, "beam search step %d (%d beams of %d tokens)", step, n_run, len);
            goto done;
        }
        int32_t n_top = 0;
        for (int32_t b = 0; b < n_run; b++) {
            const float *z = logits + (size_t)b * V;
            double m = -INFINITY, s = 0;
            for (int32_t i = 0; i < V; i++)
                m = z[i] > m ? z[i] : m;
            for (int32_t i = 0; i < V; i++)
                s += exp((double)z[i] - m);
            const double lse = m + log(s);
            for (int32_t i = 0; i < V; i++)
                cand_insert(top, &n_top, K + 1, (cand){sum[b] + ((double)z[i] - lse), (int64_t)b * V + i});
        }
        for (int32_t r = 0; r + 1 < n_top; r++)
            if (top[r].score - top[r + 1].score < out->min_gap) {
                out->min_gap = top[r].score - top[r + 1].score;
                out->min_gap_step = step;
            }
        /* BeamSearchScorer.process over the best K */
        int32_t n_next = 0;
        for (int32_t r = 0; r < K && r < n_top && n_next < nb; r++) {
            const int32_t src = (int32_t)(top[r].flat / V), tok = (int32_t)(top[r].flat % V);
            if (p->eos_id >= 0 && tok == p->eos_id) {
                if (r >= nb)
                    continue;
                int32_t *ht = malloc((size_t)(len + 1) * sizeof *ht);
                if (!ht) {
                    st = gf_error_set(GF_E_NOMEM, "beam search: out of memory");
                    goto done;
                }
                memcpy(ht, seq + (size_t)src * L, (size_t)len * sizeof *ht);
                ht[len] = tok;
                hyps_add(&h, ht, len + 1, top[r].score, len + 1 - P, p->length_penalty, 1);
            } else {
                memcpy(nxt + (size_t)n_next * L, seq + (size_t)src * L, (size_t)len * sizeof *seq);
                nxt[(size_t)n_next * L + len] = tok;
                nsum[n_next++] = top[r].score;
            }
        }
        if (n_next < nb) { /* at most one EOS per source beam: cannot happen with 2 x num_beams candidates */
            st = gf_error_set(GF_E_BACKEND, "beam search step %d: only %d of %d beams continue", step, n_next, nb);
            goto done;
        }
        is_done = is_done || hyps_done(&h, p, top[0].score, len + 1, P);
        int32_t *sw = seq;
        seq = nxt;
        nxt = sw;
        double *dw = sum;
        sum = nsum;
        nsum = dw;
        n_run = nb;
        len++;
        if (is_done || len >= L)
            break;
    }
    if (!is_done) /* finalize: every running beam is a hypothesis */
        for (int32_t b = 0; b < n_run; b++) {
            int32_t *ht = malloc((size_t)len * sizeof *ht);
            if (!ht) {
                st = gf_error_set(GF_E_NOMEM, "beam search: out of memory");
                goto done;
            }
            memcpy(ht, seq + (size_t)b * L, (size_t)len * sizeof *ht);
            hyps_add(&h, ht, len, sum[b], len - P, p->length_penalty, 0);
        }
    /* sorted by score (stable), popped from the end: best first, a later one first on equal scores */
    const int32_t R = p->num_return < h.n ? p->num_return : h.n;
    out->n_tokens = calloc((size_t)R, sizeof *out->n_tokens);
    out->tokens = calloc((size_t)R, sizeof *out->tokens);
    out->scores = calloc((size_t)R, sizeof *out->scores);
    out->sum_logprobs = calloc((size_t)R, sizeof *out->sum_logprobs);
    out->generated_len = calloc((size_t)R, sizeof *out->generated_len);
    out->finished = calloc((size_t)R, sizeof *out->finished);
    if (!out->n_tokens || !out->tokens || !out->scores || !out->sum_logprobs || !out->generated_len || !out->finished) {
        st = gf_error_set(GF_E_NOMEM, "beam search: out of memory");
        goto done;
    }
    out->prompt_len = P;
    for (int32_t r = 0; r < R; r++) {
        int32_t best = -1;
        for (int32_t i = 0; i < h.n; i++)
            if (h.v[i].tokens && (best < 0 || h.v[i].score > h.v[best].score ||
                                  (h.v[i].score == h.v[best].score && h.v[i].order > h.v[best].order)))
                best = i;
        out->tokens[r] = h.v[best].tokens;
        h.v[best].tokens = NULL;
        out->n_tokens[r] = h.v[best].n_tokens;
        out->scores[r] = h.v[best].score;
        out->sum_logprobs[r] = h.v[best].sum;
        out->generated_len[r] = h.v[best].gen_len;
        out->finished[r] = (uint8_t)h.v[best].finished;
        out->n = r + 1;
    }
done:
    gf_engine_trace_step(-1);
    for (int32_t i = 0; h.v && i < h.n; i++)
        free(h.v[i].tokens);
    free(h.v);
    free(seq);
    free(nxt);
    free(pos);
    free(sum);
    free(nsum);
    free(logits);
    free(top);
    if (st != GF_OK)
        gf_beam_result_clear(out);
    return st;
}
