/* speculative: speculative decoding must change speed, not output (issue 30).
 *
 * Part 1, the verify pass. A speculative engine scores a draft of K tokens
 * with one (K+1)-token cached forward: the last committed token and the K
 * draft tokens, at positions L .. L+K on a cache of length L. Its logits must
 * be the ones K+1 single-token steps from the same cache give. For every
 * cache length L the case names and every K, both are run on fresh caches
 * holding the same L tokens, and every position's row is compared: the
 * sequential step is the reference, the margin gate judges the argmax, atol
 * the largest |delta|; bitwise (atol 0) where the backend declares the
 * `split` axis bitwise (gf_backend_info.invariance). Two drafts: the
 * backend's own greedy continuation (what an accepting draft feeds) and the
 * same with every other token replaced (what a rejecting draft feeds).
 *
 * Part 2, the scripted loop (`steps` > 0; part 1 then runs only where the
 * case names `cache_lengths`). The engine's reference
 * speculative loop runs greedily on the backend's forward: each round
 * verifies a draft built from the backend's own plain greedy output with
 * the tokens at the generation steps in `reject_at` replaced, accepts while
 * the draft equals the verify pass's argmax, takes the next token from the
 * first rejected position (or the bonus token from the last), and rolls the
 * cache back by recomputing the committed prefix (the ABI has no truncate).
 * So every round's accepted count is known before it runs. The output must
 * equal the plain greedy output token for token (a near tie excuses a
 * divergence), every round must accept exactly the scripted count, an EOS
 * inside a draft ends the output there, and drafts are clipped at the
 * model's context limit. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "invariance_decl.h"
#include "keys.h"

#define SPEC_MAX_K 64

typedef struct spec_spec {
    gf_prompt_spec prompt;
    int32_t *ks; /* draft lengths K (default 1 .. 8) */
    size_t n_ks;
    int32_t *lens; /* cache lengths L of the verify pass (default: the prompt's) */
    size_t n_lens;
    long long steps;    /* the scripted loop's output length; 0: no loop */
    int32_t *reject_at; /* generation steps whose draft token is replaced */
    size_t n_reject;
    long long eos_at; /* -1: none; else the plain output's token at this step is the EOS id */
    double atol;
    gf_gate gate;
} spec_spec;

static void spec_free(void *p)
{
    spec_spec *s = p;
    if (s) {
        free(s->prompt.text);
        free(s->prompt.ids);
        free(s->ks);
        free(s->lens);
        free(s->reject_at);
    }
    free(s);
}

static int parse_spec(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    spec_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->atol = GF_ATOL_DEFAULT;
    s->eos_at = -1;
    int bad = gf_y_one_prompt(ctx, m, &s->prompt) < 0;
    bad |= gf_y_ints(ctx, m, "k", 0, 1, SPEC_MAX_K, 1, &s->ks, &s->n_ks) < 0;
    bad |= gf_y_ints(ctx, m, "cache_lengths", 0, 1, 1 << 20, 1, &s->lens, &s->n_lens) < 0;
    bad |= gf_y_int(ctx, m, "steps", 0, 0, 1 << 20, &s->steps) < 0;
    bad |= gf_y_ints(ctx, m, "reject_at", 0, 1, 1 << 20, 1, &s->reject_at, &s->n_reject) < 0;
    bad |= gf_y_int(ctx, m, "eos_at", 0, 0, 1 << 20, &s->eos_at) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_gate(ctx, m, "gate", &s->gate) < 0;
    if (bad)
        return -1;
    if (!(s->atol >= 0)) {
        gf_y_error(ctx, gf_y_get(ctx, m, "atol", 0), "'atol' must be >= 0");
        return -1;
    }
    if ((s->n_reject || s->eos_at >= 0) && s->steps == 0) {
        gf_y_error(ctx, gf_y_get(ctx, m, s->n_reject ? "reject_at" : "eos_at", 0),
                   "'%s' scripts the speculative loop: give 'steps' (the output length) too",
                   s->n_reject ? "reject_at" : "eos_at");
        return -1;
    }
    for (size_t i = 0; i < s->n_reject; i++)
        if (s->reject_at[i] >= s->steps) {
            gf_y_error(ctx, gf_y_get(ctx, m, "reject_at", 0), "'reject_at' entry %lld is past the %lld steps",
                       (long long)s->reject_at[i], s->steps);
            return -1;
        }
    if (s->eos_at >= s->steps && s->steps > 0) {
        gf_y_error(ctx, gf_y_get(ctx, m, "eos_at", 0), "'eos_at' %lld is past the %lld steps", s->eos_at, s->steps);
        return -1;
    }
    if (!s->ks) { /* K in 1 .. 8 */
        if (!(s->ks = malloc(8 * sizeof *s->ks)))
            return -1;
        for (int32_t i = 0; i < 8; i++)
            s->ks[i] = i + 1;
        s->n_ks = 8;
    }
    return 0;
}

static const char *spec_served_skip(const gf_case *c)
{
    (void)c;
    return "a served backend answers one request per position (docs/http.md): a (K+1)-token forward is K+1 "
           "requests, never the server's own verify pass";
}

/* What the backend declares for the split axis: bitwise makes the verify
 * pass's atol 0. *text gets the declaration ("" when none). */
static gf_inv_level split_level(gf_krun *k, char *text, size_t cap)
{
    gf_inv_decl d;
    char err[256];
    if (gf_inv_declared(k->session, k->threads, &d, text, cap, err, sizeof err) < 0)
        return GF_INV_LEVEL_GATED; /* the invariance kind fails an unreadable declaration */
    return d.level[GF_INV_split];
}

/* A cache of length n holding seq[0, n): a fresh prefill in one forward.
 * last (V) gets the last position's logits when not NULL. */
static gf_status prefill(gf_engine *e, void *cache, const int32_t *seq, const int32_t *pos, int32_t n, float *last)
{
    gf_status st = gf_engine_cache_reset(e, cache);
    if (st != GF_OK || n == 0)
        return st;
    const int32_t V = gf_engine_config(e)->vocab_size;
    float *tmp = last ? NULL : malloc((size_t)V * sizeof *tmp); /* (1, 1, V) discarded */
    if (!last && !tmp)
        return gf_error_set(GF_E_NOMEM, "speculative: out of memory");
    gf_batch in = {.B = 1, .T = n, .tokens = seq, .position_ids = pos, .logits_mode = GF_LOGITS_LAST};
    st = gf_engine_forward(e, cache, &in, last ? last : tmp);
    free(tmp);
    return st;
}

/* The plain greedy continuation: seq[n, total) decoded one token at a time
 * on cache (seq[0, n) the prompt); margin[t], top1[t] of the row that chose
 * seq[n + t] (the reference sides of the loop's gate). */
static gf_status plain_greedy(gf_engine *e, void *cache, int32_t *seq, const int32_t *pos, int32_t n, int32_t total,
                              double *margin, double *top1)
{
    const int32_t V = gf_engine_config(e)->vocab_size;
    float *row = malloc((size_t)V * sizeof *row); /* (1, 1, V) */
    if (!row)
        return gf_error_set(GF_E_NOMEM, "speculative: out of memory");
    gf_status st = prefill(e, cache, seq, pos, n, row);
    for (int32_t t = n; st == GF_OK && t < total; t++) {
        double m = 0, t1 = 0;
        int32_t a = gf_row_top(row, V, &t1, &m);
        if (a < 0) {
            st = gf_error_set(GF_E_BACKEND, "speculative: the plain decode's row at position %d has no finite logit",
                              t - 1);
            break;
        }
        seq[t] = a;
        if (margin)
            margin[t - n] = m;
        if (top1)
            top1[t - n] = t1;
        if (t + 1 < total) {
            gf_batch one = {.B = 1, .T = 1, .tokens = seq + t, .position_ids = pos + t, .logits_mode = GF_LOGITS_LAST};
            st = gf_engine_forward(e, cache, &one, row);
        }
    }
    free(row);
    return st;
}

/* ---- part 1: the verify pass against K+1 single steps ---- */

typedef struct verify_tally {
    gf_cmp cmp;      /* every compared row, teacher-forced, sequential = reference */
    int32_t rows;    /* compared */
    int failed;      /* the first failing row is named below */
    char first[384]; /* where */
    json_t *per;     /* [{cache_length, draft, k, max_delta}] */
} verify_tally;

static gf_status verify_one(gf_krun *k, gf_engine *e, void *ca, void *cb, const int32_t *in_tok, const int32_t *pos,
                            int32_t L, int32_t Kmax, const spec_spec *s, const char *draft, verify_tally *vt)
{
    const int32_t V = gf_engine_config(e)->vocab_size;
    float *seqr = malloc((size_t)(Kmax + 1) * V * sizeof *seqr); /* (K+1, V) sequential rows */
    float *ver = malloc((size_t)(Kmax + 1) * V * sizeof *ver);   /* (K+1, V) the verify pass's rows */
    gf_status st = seqr && ver ? GF_OK : gf_error_set(GF_E_NOMEM, "speculative: out of memory");
    /* the reference: K_max + 1 single steps after a prefill of L tokens */
    if (st == GF_OK)
        st = prefill(e, cb, in_tok, pos, L, NULL);
    for (int32_t i = 0; st == GF_OK && i <= Kmax; i++) {
        gf_batch one = {
            .B = 1, .T = 1, .tokens = in_tok + L + i, .position_ids = pos + L + i, .logits_mode = GF_LOGITS_LAST};
        st = gf_engine_forward(e, cb, &one, seqr + (size_t)i * V);
    }
    if (st != GF_OK) {
        gf_k_status(k, st, "speculative: sequential steps");
        goto done;
    }
    for (size_t ki = 0; ki < s->n_ks; ki++) {
        const int32_t K = s->ks[ki];
        st = prefill(e, ca, in_tok, pos, L, NULL);
        gf_batch vp = {.B = 1, .T = K + 1, .tokens = in_tok + L, .position_ids = pos + L, .logits_mode = GF_LOGITS_ALL};
        if (st == GF_OK)
            st = gf_engine_forward(e, ca, &vp, ver);
        if (st != GF_OK) {
            gf_k_status(k, st, "speculative: verify pass");
            goto done;
        }
        double worst = 0;
        for (int32_t i = 0; i <= K; i++) {
            const float *r = seqr + (size_t)i * V, *t = ver + (size_t)i * V;
            size_t where = 0;
            double d = gf_max_abs_delta(r, t, (size_t)V, &where);
            worst = d > worst || isnan(d) ? d : worst;
            int failed = gf_cmp_logits(&vt->cmp, vt->rows++, r, t, V);
            if (failed && !vt->failed) {
                int32_t ar = gf_row_top(r, V, NULL, NULL), at = gf_row_top(t, V, NULL, NULL);
                vt->failed = 1;
                snprintf(vt->first, sizeof vt->first,
                         "cache length %d, K %d (%s draft): verify position %d (position id %d, input token %d): "
                         "max |delta| %.3g at token %zu against the single step (atol %.3g), argmax %d vs %d",
                         L, K, draft, i, L + i, in_tok[L + i], d, where, vt->cmp.atol, at, ar);
                gf_k_write_logits(k, "speculative_verify", i, r, "sequential single step (reference)", t, "verify pass",
                                  V);
            }
        }
        json_t *o = json_object();
        json_object_set_new(o, "cache_length", json_integer(L));
        json_object_set_new(o, "draft", json_string(draft));
        json_object_set_new(o, "k", json_integer(K));
        json_object_set_new(o, "max_delta", isfinite(worst) ? json_real(worst) : json_null());
        json_array_append_new(vt->per, o);
    }
done:
    free(seqr);
    free(ver);
    return st;
}

static void run_verify(gf_krun *k, gf_engine *e, const int32_t *prompt, int32_t n, const spec_spec *s,
                       gf_inv_level split)
{
    const gf_model_config *cfg = gf_engine_config(e);
    const int32_t NP = cfg->n_positions, V = cfg->vocab_size;
    int32_t Kmax = 0, Lmax = 0;
    for (size_t i = 0; i < s->n_ks; i++)
        Kmax = s->ks[i] > Kmax ? s->ks[i] : Kmax;
    int32_t one_len = n;
    const int32_t *lens = s->lens ? s->lens : &one_len;
    const size_t n_lens = s->lens ? s->n_lens : 1;
    for (size_t i = 0; i < n_lens; i++)
        Lmax = lens[i] > Lmax ? lens[i] : Lmax;
    if (Lmax + Kmax + 1 > NP) {
        gf_k_error(k, "speculative: cache length %d + a verify pass of %d tokens needs %d positions; the model has %d",
                   Lmax, Kmax + 1, Lmax + Kmax + 1, NP);
        return;
    }
    const int32_t total = Lmax + Kmax + 1 > n ? Lmax + Kmax + 1 : n;
    int32_t *seq = malloc((size_t)total * sizeof *seq); /* (total) prompt + plain greedy continuation */
    int32_t *alt = malloc((size_t)total * sizeof *alt); /* (total) the same, every other draft token replaced */
    int32_t *pos = malloc((size_t)total * sizeof *pos); /* (total) 0 .. total-1 */
    void *ca = NULL, *cb = NULL;
    verify_tally vt = {.per = json_array()};
    gf_cmp_init(&vt.cmp, &s->gate, k->dtype, GF_CMP_TEACHER_FORCED, split == GF_INV_LEVEL_BITWISE ? 0.0 : s->atol);
    gf_status st = seq && alt && pos ? GF_OK : gf_error_set(GF_E_NOMEM, "speculative: out of memory");
    for (int32_t i = 0; st == GF_OK && i < total; i++)
        pos[i] = i;
    if (st == GF_OK) {
        memcpy(seq, prompt, (size_t)n * sizeof *seq);
        st = gf_engine_cache_create(e, 1, NP, &ca);
    }
    if (st == GF_OK)
        st = gf_engine_cache_create(e, 1, NP, &cb);
    if (st == GF_OK)
        st = plain_greedy(e, cb, seq, pos, n, total, NULL, NULL);
    if (st != GF_OK) {
        gf_k_status(k, st, "speculative: the plain decode");
        goto done;
    }
    gf_k_metric_json(k, "sequence", gf_json_ints(seq, (size_t)total));
    for (size_t li = 0; li < n_lens && st == GF_OK; li++) {
        const int32_t L = lens[li];
        /* the rejecting draft: inputs L+1, L+3, ... replaced (input L is the committed token) */
        memcpy(alt, seq, (size_t)total * sizeof *alt);
        for (int32_t j = L + 1; j < total; j += 2)
            alt[j] = (seq[j] + 1) % V;
        st = verify_one(k, e, ca, cb, seq, pos, L, Kmax, s, "accepting", &vt);
        if (st == GF_OK)
            st = verify_one(k, e, ca, cb, alt, pos, L, Kmax, s, "rejecting", &vt);
    }
    if (st != GF_OK)
        goto done;
    gf_k_metric_json(k, "verify", vt.per);
    vt.per = NULL;
    gf_k_metric_int(k, "verify_rows", vt.rows);
    if (vt.failed)
        gf_k_check(k, 0, "the verify pass equals sequential decode", "%s", vt.first);
    else
        gf_k_check(k, 1, "the verify pass equals sequential decode",
                   "%d rows: every (K+1)-token verify pass within %s of its single steps", vt.rows,
                   split == GF_INV_LEVEL_BITWISE ? "0 (split declared bitwise)" : "atol");
    gf_k_compare(k, "verify_vs_sequential", &vt.cmp);
done:
    json_decref(vt.per);
    gf_engine_cache_free(e, ca);
    gf_engine_cache_free(e, cb);
    free(seq);
    free(alt);
    free(pos);
}

/* ---- part 2: the scripted speculative loop ---- */

typedef struct spec_round {
    int32_t at;       /* the output index of the round's first draft token */
    int32_t k;        /* draft tokens verified (K, clipped at the output's end and the context) */
    int32_t accepted; /* draft tokens the verify pass accepted */
    int32_t expected; /* ... the script says it must: the leading draft tokens not replaced */
    int32_t emitted;  /* output tokens the round added (accepted + 1, fewer at EOS or the end) */
    int at_limit;     /* k clipped by the context limit (not only by the output's end) */
} spec_round;

typedef struct spec_loop {
    int32_t *out; /* (steps) the speculative output */
    int32_t n_out;
    spec_round *rounds; /* (steps) at most one per output token */
    int32_t n_rounds;
    /* the backend's speculate slot, where it has one: it judges every
     * round's draft (greedy, rule seed, a deterministic draft); the engine's
     * argmax acceptance is its reference, round for round */
    const gf_backend_ops *slot;
    int32_t slot_rounds, slot_differ;
    char slot_first[320];
} spec_loop;

/* One greedy speculative generation of at most steps tokens with drafts of
 * K. plain (steps): the backend's plain greedy output, the draft's source;
 * replaced (steps): 1 where the draft's token is replaced; eos: the EOS id
 * (-1 none). The cache holds the committed tokens but the last. */
static gf_status loop_run(gf_engine *e, void *cache, const int32_t *prompt, int32_t n, const int32_t *plain,
                          const uint8_t *replaced, int32_t steps, int32_t eos, int32_t K, spec_loop *L)
{
    const gf_model_config *cfg = gf_engine_config(e);
    const int32_t V = cfg->vocab_size, NP = cfg->n_positions;
    const int32_t cap = n + steps + K + 1;
    int32_t *seq = malloc((size_t)cap * sizeof *seq);         /* (cap) the committed tokens */
    int32_t *pos = malloc((size_t)cap * sizeof *pos);         /* (cap) */
    float *rows = malloc((size_t)(K + 1) * V * sizeof *rows); /* (K+1, V) one verify pass */
    int32_t *draft = malloc((size_t)(K + 1) * sizeof *draft); /* (K) */
    gf_status st = seq && pos && rows && draft ? GF_OK : gf_error_set(GF_E_NOMEM, "speculative: out of memory");
    if (st != GF_OK)
        goto done;
    for (int32_t i = 0; i < cap; i++)
        pos[i] = i;
    memcpy(seq, prompt, (size_t)n * sizeof *seq);
    st = prefill(e, cache, seq, pos, n, rows);
    if (st != GF_OK)
        goto done;
    int32_t t0 = gf_row_top(rows, V, NULL, NULL);
    if (t0 < 0) {
        st = gf_error_set(GF_E_BACKEND, "speculative: the prefill's last row has no finite logit");
        goto done;
    }
    seq[n] = t0;
    L->out[L->n_out++] = t0;
    int32_t committed = n + 1; /* seq[committed - 1] is the last token, not yet in the cache */
    int ended = t0 == eos;
    while (!ended && L->n_out < steps && committed - 1 < NP) {
        int32_t kr = K;
        kr = kr < steps - L->n_out ? kr : steps - L->n_out;
        const int at_limit = NP - committed < kr;
        kr = at_limit ? NP - committed : kr; /* the verify pass ends at position NP - 1 */
        int32_t expected = 0;
        for (int32_t j = 0; j < kr; j++) {
            int32_t g = plain[L->n_out + j];
            draft[j] = replaced[L->n_out + j] ? (g + 1) % V : g;
            if (expected == j && !replaced[L->n_out + j])
                expected++;
        }
        int32_t in[SPEC_MAX_K + 1];
        in[0] = seq[committed - 1];
        memcpy(in + 1, draft, (size_t)kr * sizeof *in);
        gf_batch vp = {
            .B = 1, .T = kr + 1, .tokens = in, .position_ids = pos + committed - 1, .logits_mode = GF_LOGITS_ALL};
        if ((st = gf_engine_forward(e, cache, &vp, rows)) != GF_OK)
            goto done;
        int32_t a = 0;
        while (a < kr && gf_row_top(rows + (size_t)a * V, V, NULL, NULL) == draft[a])
            a++;
        int32_t next = gf_row_top(rows + (size_t)a * V, V, NULL, NULL);
        if (next < 0) {
            st = gf_error_set(GF_E_BACKEND, "speculative: verify row %d at position %d has no finite logit", a,
                              committed - 1 + a);
            goto done;
        }
        if (L->slot && kr > 0) { /* the backend's rejection sampler decides the round */
            const gf_sampler_params greedy = gf_sampler_greedy();
            double ua[SPEC_MAX_K], ud[SPEC_MAX_K + 1];
            for (int32_t j = 0; j <= kr; j++) { /* greedy reads none of them; any in (0, 1) */
                ud[j] = gf_rng_uniform(0, 0x5350ec00u, (uint64_t)L->n_rounds, (uint32_t)j);
                if (j < kr)
                    ua[j] = ud[j];
            }
            gf_spec_request rq = {.struct_size = sizeof rq,
                                  .K = kr,
                                  .V = V,
                                  .rule = GF_PROFILE_SEED,
                                  .target_logits = rows,
                                  .draft = draft,
                                  .params = &greedy,
                                  .u_accept = ua,
                                  .u_draw = ud};
            int32_t sa = -1, sn = -1;
            if ((st = gf_backend_speculate(L->slot, NULL, &rq, &sa, &sn)) != GF_OK)
                goto done;
            L->slot_rounds++;
            if ((sa != a || sn != next) && !L->slot_differ++)
                snprintf(L->slot_first, sizeof L->slot_first,
                         "the round at output step %d (cache length %d, %d draft tokens): the slot accepted %d and "
                         "gave %d, the verify pass's argmax accepts %d and gives %d",
                         L->n_out, committed - 1, kr, sa, sn, a, next);
            a = sa;
            next = sn;
        }
        spec_round *r = &L->rounds[L->n_rounds++];
        *r = (spec_round){.at = L->n_out, .k = kr, .accepted = a, .expected = expected, .at_limit = at_limit};
        for (int32_t j = 0; j <= a && !ended && L->n_out < steps; j++) {
            int32_t t = j < a ? draft[j] : next;
            L->out[L->n_out++] = t;
            r->emitted++;
            ended = t == eos;
        }
        memcpy(seq + committed, draft, (size_t)a * sizeof *seq);
        seq[committed + a] = next;
        if (a < kr && !ended && L->n_out < steps) /* roll back the rejected tail: recompute the committed prefix */
            st = prefill(e, cache, seq, pos, committed + a, NULL);
        if (st != GF_OK)
            goto done;
        committed += a + 1;
    }
done:
    free(seq);
    free(pos);
    free(rows);
    free(draft);
    return st;
}

static void run_loop(gf_krun *k, gf_engine *e, const int32_t *prompt, int32_t n, const spec_spec *s)
{
    const gf_model_config *cfg = gf_engine_config(e);
    const int32_t NP = cfg->n_positions;
    const int32_t steps = (int32_t)s->steps;
    if (n + steps - 1 > NP) {
        gf_k_error(k, "speculative: %d prompt tokens + %d steps need %d positions; the model has %d", n, steps,
                   n + steps - 1, NP);
        return;
    }
    int32_t *seq = malloc((size_t)(n + steps) * sizeof *seq); /* (n + steps) prompt + plain greedy output */
    int32_t *pos = malloc((size_t)(n + steps) * sizeof *pos);
    double *margin = malloc((size_t)steps * sizeof *margin), *top1 = malloc((size_t)steps * sizeof *top1);
    uint8_t *replaced = calloc((size_t)steps, 1);
    spec_loop L = {.out = malloc((size_t)steps * sizeof *L.out),
                   .rounds = malloc((size_t)steps * sizeof *L.rounds),
                   .slot = gf_backend_has_speculate(gf_engine_ops(e)) ? gf_engine_ops(e) : NULL};
    gf_k_metric_json(k, "loop_acceptance",
                     json_string(L.slot ? "the backend's speculate slot (checked against the verify pass's argmax)"
                                        : "the engine's reference loop (the backend has no speculate slot)"));
    void *cache = NULL;
    gf_status st = seq && pos && margin && top1 && replaced && L.out && L.rounds
                       ? GF_OK
                       : gf_error_set(GF_E_NOMEM, "speculative: out of memory");
    for (int32_t i = 0; st == GF_OK && i < n + steps; i++)
        pos[i] = i;
    if (st == GF_OK) {
        memcpy(seq, prompt, (size_t)n * sizeof *seq);
        st = gf_engine_cache_create(e, 1, NP, &cache);
    }
    if (st == GF_OK)
        st = plain_greedy(e, cache, seq, pos, n, n + steps, margin, top1);
    if (st != GF_OK) {
        gf_k_status(k, st, "speculative: the plain greedy decode");
        goto done;
    }
    const int32_t *plain = seq + n;
    const int32_t eos = s->eos_at >= 0 ? plain[s->eos_at] : -1;
    int32_t want = steps; /* the plain output ends at its first EOS */
    for (int32_t t = 0; eos >= 0 && t < steps; t++)
        if (plain[t] == eos) {
            want = t + 1;
            break;
        }
    for (size_t i = 0; i < s->n_reject; i++)
        replaced[s->reject_at[i]] = 1;
    gf_k_metric_json(k, "plain_output", gf_json_ints(plain, (size_t)want));
    if (eos >= 0)
        gf_k_metric_int(k, "eos_id", eos);
    json_t *per_k = json_array();
    for (size_t ki = 0; ki < s->n_ks; ki++) {
        const int32_t K = s->ks[ki];
        L.n_out = L.n_rounds = 0;
        L.slot_rounds = L.slot_differ = 0;
        L.slot_first[0] = '\0';
        st = loop_run(e, cache, prompt, n, plain, replaced, steps, eos, K, &L);
        if (st != GF_OK) {
            char what[64];
            snprintf(what, sizeof what, "speculative loop, K %d", K);
            gf_k_status(k, st, what);
            break;
        }
        gf_cmp cmp; /* free-running: the plain output is the reference */
        gf_cmp_init(&cmp, &s->gate, k->dtype, GF_CMP_FREE_RUNNING, s->atol);
        int32_t m = L.n_out < want ? L.n_out : want;
        for (int32_t t = 0; t < m && !gf_cmp_stopped(&cmp); t++)
            gf_cmp_step(&cmp, t, NAN, plain[t], L.out[t], margin[t], top1[t]);
        const int32_t diverged = cmp.first_divergence; /* -1: none */
        char label[32];
        snprintf(label, sizeof label, "loop_k%d", K);
        char buf[160], name[96];
        snprintf(name, sizeof name, "K %d: the speculative output has the plain output's length", K);
        if (diverged < 0)
            gf_k_check(k, L.n_out == want, name, "%d tokens, plain %d%s", L.n_out, want,
                       eos >= 0 ? " (to its first EOS)" : "");
        /* each round before any divergence accepts exactly what the script says */
        int32_t accepted = 0, drafted = 0, bonus = 0, clipped = 0;
        const spec_round *bad = NULL;
        for (int32_t i = 0; i < L.n_rounds; i++) {
            const spec_round *r = &L.rounds[i];
            accepted += r->accepted;
            drafted += r->k;
            bonus += r->accepted == r->k;
            clipped += r->at_limit;
            if (!bad && (diverged < 0 || r->at + r->emitted <= diverged) && r->accepted != r->expected)
                bad = r;
        }
        snprintf(name, sizeof name, "K %d: every round accepts what the script says", K);
        if (bad)
            gf_k_check(k, 0, name,
                       "the round at output step %d verified %d draft tokens and accepted %d; the script says %d "
                       "(draft tokens replaced at %s)",
                       bad->at, bad->k, bad->accepted, bad->expected,
                       s->n_reject ? gf_k_ids_str(buf, sizeof buf, s->reject_at, s->n_reject) : "none");
        else
            gf_k_check(
                k, 1, name,
                "%d rounds, %d of %d draft tokens accepted, %d bonus tokens, %d drafts clipped at the context limit",
                L.n_rounds, accepted, drafted, bonus, clipped);
        if (L.slot) {
            snprintf(name, sizeof name, "K %d: the backend's speculate slot judges every round as the argmax does", K);
            gf_k_check(k, L.slot_differ == 0, name, "%d of %d rounds differ; first: %s", L.slot_differ, L.slot_rounds,
                       L.slot_first);
        }
        if (gf_cmp_verdict(&cmp, NULL, 0) == GF_V_FAIL) { /* name the round that emitted the divergent token */
            const int32_t d = cmp.first_failing < 0 ? diverged : cmp.first_failing;
            const spec_round *r = NULL;
            for (int32_t i = 0; i < L.n_rounds && !r; i++)
                if (d >= L.rounds[i].at && d < L.rounds[i].at + L.rounds[i].emitted)
                    r = &L.rounds[i];
            snprintf(name, sizeof name, "K %d: the speculative output equals the plain greedy output", K);
            if (r)
                gf_k_check(k, 0, name,
                           "output step %d: %d, plain greedy %d (margin %.3g); the round at output step %d (cache "
                           "length %d) verified %d draft tokens, accepted %d where the script says %d, and took "
                           "step %d from verify position %d",
                           d, L.out[d], plain[d], margin[d], r->at, n + r->at - 1, r->k, r->accepted, r->expected, d,
                           d - r->at);
            else
                gf_k_check(k, 0, name, "output step %d (from the prefill): %d, plain greedy %d (margin %.3g)", d,
                           L.out[d], plain[d], margin[d]);
        }
        gf_k_compare(k, label, &cmp);
        json_t *o = json_object();
        json_object_set_new(o, "k", json_integer(K));
        json_object_set_new(o, "rounds", json_integer(L.n_rounds));
        json_object_set_new(o, "drafted", json_integer(drafted));
        json_object_set_new(o, "accepted", json_integer(accepted));
        json_object_set_new(o, "bonus", json_integer(bonus));
        json_object_set_new(o, "clipped_at_limit", json_integer(clipped));
        json_object_set_new(o, "output", gf_json_ints(L.out, (size_t)L.n_out));
        json_t *acc = json_array();
        for (int32_t i = 0; i < L.n_rounds; i++)
            json_array_append_new(acc, json_integer(L.rounds[i].accepted));
        json_object_set_new(o, "accepted_per_round", acc);
        json_array_append_new(per_k, o);
    }
    gf_k_metric_json(k, "loop", per_k);
done:
    gf_engine_cache_free(e, cache);
    free(seq);
    free(pos);
    free(margin);
    free(top1);
    free(replaced);
    free(L.out);
    free(L.rounds);
}

static void run_spec(const gf_case *c, gf_krun *k)
{
    const spec_spec *s = c->spec;
    gf_engine *e = k->session->engine;
    int32_t *prompt = NULL, n = 0;
    gf_status st = gf_prompt_tokens(k->session, &s->prompt, &prompt, &n);
    if (st != GF_OK) {
        gf_k_error(k, "%s", gf_error_msg());
        return;
    }
    gf_k_metric_int(k, "prompt_tokens", n);
    gf_k_metric_json(k, "prompt", gf_json_ints(prompt, (size_t)n));
    char decl[256];
    gf_inv_level split = split_level(k, decl, sizeof decl);
    gf_k_metric_json(k, "split_declared", json_string(gf_inv_level_word(split)));
    if (s->lens || s->steps == 0) /* a loop case runs the verify pass only where it names cache lengths */
        run_verify(k, e, prompt, n, s, split);
    if (s->steps > 0 && k->verdict != GF_V_ERROR)
        run_loop(k, e, prompt, n, s);
    free(prompt);
}

const gf_kind_def gf_kind_speculative = {
    .name = "speculative",
    .summary = "the (K+1)-token verify pass against K+1 single steps, and a scripted greedy speculative loop "
               "against plain greedy decoding",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .served_skip = spec_served_skip,
    .parse = parse_spec,
    .free_spec = spec_free,
    .run = run_spec,
};
