/* prompt_logprobs: the log-probability of every prompt token given its
 * prefix, from one uncached prefill with every position's logits (vLLM's
 * prompt_logprobs, an OpenAI completion's echo with logprobs), against
 * transformers' (issue 34 item 2; docs/cases.md "prompt_logprobs").
 *
 * The prompt is a golden's whole sequence but its last token (a
 * golden_generation golden: tokens (P + N), the teacher-forced logits of
 * its N steps): one forward of T = P + N - 1 positions, GF_LOGITS_ALL.
 * Position P - 1 + k predicts token P + k, and the golden holds
 * transformers' logits there, so positions P .. P + N - 1 of the prompt are
 * judged; 1 .. P - 1 have no reference in a golden and are counted, not
 * judged (position 0 has no logprob, as in vLLM). At each judged position:
 *   - the logits against the golden's, margin-gated (gf_cmp, teacher
 *     forced): max |delta| within the golden's tolerance rule, the argmax
 *     equal unless at a near tie;
 *   - the prompt token's log-probability (log-softmax in double) within
 *     2 x that atol: |d log_softmax(z)_i| <= |d z_i| + |d lse(z)| <= 2 max |d z|,
 *     so a backend within the logit atol is within it;
 *   - the top `top` ids in order, where the golden's gap between ranks r and
 *     r + 1 exceeds 2 x atol (a closer pair is a near tie there: counted). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "genfence/rows.h"
#include "golden_case.h"
#include "hash.h"
#include "keys.h"

typedef struct pl_spec {
    char *golden_arg; /* as written */
    char *golden;     /* resolved under the case's root */
    long long top;
    double atol;
    gf_gate gate;
} pl_spec;

static void pl_free(void *p)
{
    pl_spec *s = p;
    if (s) {
        free(s->golden_arg);
        free(s->golden);
    }
    free(s);
}

static int parse_pl(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    pl_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->top = 5;
    s->atol = GF_ATOL_DEFAULT;
    int bad = gf_y_string(ctx, m, "golden", GF_Y_REQUIRED, &s->golden_arg) < 0;
    bad |= gf_y_int(ctx, m, "top", 0, 1, 64, &s->top) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_gate(ctx, m, "gate", &s->gate) < 0;
    if (!bad && (!(s->atol >= 0) || !isfinite(s->atol))) {
        gf_y_error(ctx, gf_y_get(ctx, m, "atol", 0), "'atol' must be a finite number >= 0");
        bad = 1;
    }
    if (!bad && s->golden_arg && !s->golden_arg[0]) {
        gf_y_error(ctx, gf_y_get(ctx, m, "golden", 0), "'golden' is empty (a golden_generation golden's path)");
        bad = 1;
    }
    if (!bad && s->golden_arg && !(s->golden = gf_golden_path_resolve(ctx, s->golden_arg, "golden", c->id)))
        bad = 1;
    return bad ? -1 : 0;
}

/* the n largest of v (V) by value, ties by ascending id, into ids (n) */
static void top_ids(const double *v, int32_t V, int32_t n, int32_t *ids)
{
    for (int32_t r = 0; r < n; r++) {
        int32_t best = -1;
        for (int32_t i = 0; i < V; i++) {
            int taken = 0;
            for (int32_t q = 0; q < r && !taken; q++)
                taken = ids[q] == i;
            if (!taken && (best < 0 || v[i] > v[best]))
                best = i;
        }
        ids[r] = best;
    }
}

typedef struct pl_acc {
    double lp_max; /* max |lp_backend - lp_golden| of the prompt token */
    int32_t lp_row, lp_pos, lp_tok;
    double lp_got, lp_want;
    long long judged, top_judged, top_near_ties, top_mismatches;
    char top_first[256]; /* the first top-ids mismatch */
} pl_acc;

/* One golden row: its sequence but the last token in one prefill, judged at
 * positions P .. P + N - 1. 0, or -1 when the run was decided (recorded). */
static int run_row(gf_krun *k, const pl_spec *s, const gf_golden *g, int32_t b, double atol, pl_acc *a)
{
    gf_engine *e = k->session->engine;
    const gf_golden_row *r = &g->row[b];
    const int32_t V = g->V, P = r->prompt_len, N = r->steps, T = r->n_tokens - 1, K = (int32_t)s->top;
    const int32_t top = K < V ? K : V;
    int32_t *pos = malloc((size_t)T * sizeof *pos);                                    /* (T) position ids 0 .. T - 1 */
    float *logits = malloc((size_t)T * (size_t)V * sizeof *logits);                    /* (T, V) the backend's */
    double *lb = malloc((size_t)V * sizeof *lb), *lg = malloc((size_t)V * sizeof *lg); /* (V) log-softmax each side */
    int32_t *tb = malloc((size_t)top * sizeof *tb), *tg = malloc((size_t)top * sizeof *tg); /* (top) ids each side */
    int rc = -1;
    if (!pos || !logits || !lb || !lg || !tb || !tg) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    for (int32_t t = 0; t < T; t++)
        pos[t] = t;
    gf_batch in = {.B = 1, .T = T, .tokens = r->tokens, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
    gf_status st = gf_engine_forward(e, NULL, &in, logits);
    if (st != GF_OK) {
        char what[96];
        snprintf(what, sizeof what, "the prefill of row %d (%d positions, every position's logits)", b, T);
        gf_k_status(k, st, what);
        goto done;
    }
    gf_cmp cmp;
    gf_cmp_init(&cmp, &s->gate, k->dtype, GF_CMP_TEACHER_FORCED, atol);
    const double lp_atol = 2 * cmp.atol; /* the dtype-scaled logit atol, doubled (the header's rule) */
    char label[64];
    snprintf(label, sizeof label, "prompt/row%d", b);
    for (int32_t j = 0; j < N; j++) {
        const int32_t t = P - 1 + j, x = r->tokens[t + 1];
        const float *ref = r->logits + (size_t)j * V, *test = logits + (size_t)t * V;
        if (gf_cmp_logits(&cmp, j, ref, test, V))
            gf_k_write_logits(k, label, j, ref, "golden (transformers, teacher-forced)", test,
                              "backend, one prefill of the golden's sequence", V);
        gf_row_log_softmax(test, V, lb);
        gf_row_log_softmax(ref, V, lg);
        const double d = fabs(lb[x] - lg[x]);
        a->judged++;
        if (!(d <= a->lp_max)) {
            a->lp_max = d;
            a->lp_row = b, a->lp_pos = t + 1, a->lp_tok = x;
            a->lp_got = lb[x], a->lp_want = lg[x];
        }
        top_ids(lb, V, top, tb);
        top_ids(lg, V, top, tg);
        for (int32_t q = 0; q < top; q++) {
            /* rank q is decided where the golden's neighbours are further than 2 atol away */
            const double above = q > 0 ? lg[tg[q - 1]] - lg[tg[q]] : INFINITY;
            int32_t nxt[1];
            double below = INFINITY;
            if (q + 1 < V) {
                if (q + 1 < top) {
                    nxt[0] = tg[q + 1];
                } else { /* the best id outside the golden's top */
                    nxt[0] = -1;
                    for (int32_t i = 0; i < V; i++) {
                        int in_top = 0;
                        for (int32_t u = 0; u < top && !in_top; u++)
                            in_top = tg[u] == i;
                        if (!in_top && (nxt[0] < 0 || lg[i] > lg[nxt[0]]))
                            nxt[0] = i;
                    }
                }
                below = lg[tg[q]] - lg[nxt[0]];
            }
            if (above <= lp_atol || below <= lp_atol) {
                a->top_near_ties++;
                continue;
            }
            a->top_judged++;
            if (tb[q] != tg[q] && a->top_mismatches++ == 0)
                snprintf(a->top_first, sizeof a->top_first,
                         "row %d, prompt position %d: rank %d is token %d (logprob %.6g), the golden's %d (%.6g)", b,
                         t + 1, q + 1, tb[q], lb[tb[q]], tg[q], lg[tg[q]]);
        }
    }
    gf_k_compare(k, label, &cmp);
    rc = 0;
done:
    free(pos);
    free(logits);
    free(lb);
    free(lg);
    free(tb);
    free(tg);
    return rc;
}

static void run_pl(const gf_case *c, gf_krun *k)
{
    const pl_spec *s = c->spec;
    gf_engine *e = k->session->engine;
    const int32_t V = gf_engine_config(e)->vocab_size;
    gf_golden *g = NULL;
    char model_hex[65];
    gf_status st = gf_golden_read(s->golden, &g);
    if (st != GF_OK) {
        gf_k_error(k, "golden %s: %s", s->golden_arg, st == GF_E_NOT_FOUND ? "not found" : gf_error_msg());
        return;
    }
    const char *gm = gf_golden_meta(g, "model_hash");
    if (gf_model_hash(c->model, model_hex) != GF_OK) {
        gf_k_error(k, "model hash of %s: %s", c->model_arg, gf_error_msg());
        goto done;
    }
    if (!gm || strcmp(gm, model_hex)) {
        gf_k_stale(k, "golden %s was made for model hash %s, %s is %s now", s->golden_arg, gm ? gm : "(none)",
                   c->model_arg, model_hex);
        goto done;
    }
    if (g->V != V) {
        gf_k_error(k, "golden %s holds %d logits per step, the model %d", s->golden_arg, g->V, V);
        goto done;
    }
    json_t *rule = NULL;
    const double atol = gf_golden_atol(g, s->atol, &rule);
    gf_k_metric_json(k, "atol_rule", rule);
    const char *gen = gf_golden_meta(g, "generator"), *gv = gf_golden_meta(g, "generator_version");
    gf_k_metric_json(k, "reference", json_sprintf("golden %s (%s %s)", s->golden_arg, gen ? gen : "?", gv ? gv : "?"));
    pl_acc a = {.lp_row = -1};
    long long unjudged = 0;
    for (int32_t b = 0; b < g->rows; b++) {
        const gf_golden_row *r = &g->row[b];
        if (r->n_tokens - 1 > gf_engine_config(e)->n_positions) {
            gf_k_error(k, "golden row %d's %d tokens exceed the model's %d positions", b, r->n_tokens - 1,
                       gf_engine_config(e)->n_positions);
            goto done;
        }
        unjudged += r->prompt_len - 1;
        if (run_row(k, s, g, b, atol, &a) < 0)
            goto done;
    }
    gf_k_metric_int(k, "rows", g->rows);
    gf_k_metric_int(k, "positions_judged", a.judged);
    gf_k_metric_int(k, "positions_not_judged", unjudged);
    gf_k_metric_json(k, "not_judged",
                     json_string("the golden's own prompt positions 1 .. P - 1: a golden holds transformers' logits "
                                 "from its last prompt position on"));
    gf_k_metric(k, "logprob_max_abs_diff", a.lp_max);
    gf_k_metric_int(k, "top", s->top);
    gf_k_metric_int(k, "top_ranks_judged", a.top_judged);
    gf_k_metric_int(k, "top_ranks_near_tie", a.top_near_ties);
    const double lp_atol = 2 * atol * gf_dtype_atol_scale(k->dtype);
    gf_k_metric(k, "logprob_atol", lp_atol);
    char name[64];
    gf_k_check(k, a.lp_max <= lp_atol, "prompt token logprobs equal the golden's",
               "max |logprob - golden's| %.3g (atol %.3g = 2 x the logit atol) at row %d, prompt position %d, "
               "token %d: %.9g, golden %.9g; %lld positions",
               a.lp_max, lp_atol, a.lp_row, a.lp_pos, a.lp_tok, a.lp_got, a.lp_want, a.judged);
    snprintf(name, sizeof name, "top %lld ids in order", s->top);
    gf_k_check(k, a.top_mismatches == 0, name, "%lld of %lld ranks judged differ%s%s (%lld at a near tie, not judged)",
               a.top_mismatches, a.top_judged, a.top_mismatches ? "; first: " : "", a.top_first, a.top_near_ties);
done:
    gf_golden_free(g);
}

/* served_skip (case.h): one prefill with every position's logits; a served
 * engine gives its top-k log-probabilities per request (docs/http.md). */
static const char *pl_served_skip(const gf_case *c)
{
    (void)c;
    return "needs every position's full logits from one prefill: a served engine gives top-k log-probabilities per "
           "request (docs/http.md)";
}

const gf_kind_def gf_kind_prompt_logprobs = {
    .name = "prompt_logprobs",
    .summary = "each prompt token's logprob from one prefill with every position's logits (vLLM's prompt_logprobs) "
               "against a golden's transformers logits: gated logits, the token's logprob, the top ids",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .hashes_model = 1,
    .parse = parse_pl,
    .free_spec = pl_free,
    .run = run_pl,
    .served_skip = pl_served_skip,
};
