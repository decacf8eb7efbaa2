/* distribution_match: the statistical tier (docs/cases.md). The backend is
 * teacher-forced (prefill + cached decode) through
 *   - every row of the listed goldens (reference: the golden's own logits at
 *     each step, Hugging Face transformers on PyTorch), and
 *   - each listed prompt followed by `steps` greedy tokens of the ref backend
 *     (reference: ref's logits, computed in this child by the engine on ref);
 * at every step both sides' logits become distributions (float64 softmax) and
 * the step gives KL(reference || backend) in nats, whether the argmaxes agree,
 * and |p_ref(x) - p_backend(x)| of the token x the sequence takes next (what
 * llama-perplexity --kl-divergence reports). The verdict: KL mean and top-1
 * agreement by one-tailed hypothesis tests against the calibrated null of
 * the case and the backend's types (stat_judge.h, docs/calibration.md), KL
 * p99, KL max and |delta p| max by exceedance tests against the same null's
 * levels; where the table has no null (a user's model, a served top-k
 * bound), by the fixed thresholds of its weight type (info.weights, else its
 * dtype), saying so. The usual max |delta|,
 * reference margins and near ties are in the summary beside them.
 *
 * `topk: N` restricts every figure to what a served engine reports (docs/http.md,
 * "The top-k KL bound"): the backend's top-N tokens S (a served backend's row:
 * the ids it listed, whatever N) plus one merged outcome "rest",
 *   KL_S = sum_{v in S} p_v log(p_v / q_v) + p_rest log(p_rest / q_rest),
 * a lower bound on the full KL(p || q) (merging outcomes never raises a KL);
 * |delta p| of a token outside S is its own lower bound max(0, p - q_rest),
 * max |delta| is over S's log-probabilities. So a fail is a fail, a pass is
 * "no divergence visible in the top N". On a backend with full rows the full
 * KL is computed beside it and the bound checked to be at most it. Without
 * `topk` a served backend is skipped (served_skip: no full logits). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stat_judge.h"
#include "stat_thresholds.h"
#include "genfence/engine.h"
#include "golden.h"
#include "hash.h"
#include "kinds.h"

/* ---- keys ---- */

typedef struct dm_spec {
    char **goldens;      /* as written */
    char **golden_paths; /* resolved */
    size_t n_goldens;
    gf_prompt_spec *prompts;
    size_t n_prompts;
    long long steps;        /* greedy ref tokens after each prompt */
    gf_stat_thr_entry *thr; /* the case's (over the defaults, field by field) */
    size_t n_thr;
    const gf_stat_table *table; /* the calibration table (stat_calibration.h; NULL: none), not owned */
    gf_stat_policy_entry *hyp;  /* the case's `hypothesis` (over the table's policy, field by field) */
    char *cal_case;             /* `calibration_case`: the case whose null judges this one (a reseeded twin) */
    size_t n_hyp;
    gf_gate gate;        /* for the near-tie count beside the figures */
    long long topk;      /* 0: the full distributions; N: the top-N bound (served engines) */
    double *kl_p, *kl_q; /* (n_kl) kl_pair_p / kl_pair_q: two logit rows whose KL(p || q) is */
    size_t n_kl;         /* kl_pair_expect (0: no pair); the KL's own check (kl_pair_check) */
    double kl_expect;
} dm_spec;

static void spec_free(void *p)
{
    dm_spec *s = p;
    if (s) {
        gf_y_strings_free(s->goldens, s->n_goldens);
        for (size_t i = 0; s->golden_paths && i < s->n_goldens; i++)
            free(s->golden_paths[i]);
        free(s->golden_paths);
        gf_prompts_free(s->prompts, s->n_prompts);
        free(s->thr);
        free(s->kl_p);
        free(s->kl_q);
        free(s->hyp);
        free(s->cal_case);
    }
    free(s);
}

static int parse_dm(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    dm_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->steps = 64;
    int bad = gf_y_strings(ctx, m, "goldens", 0, &s->goldens, &s->n_goldens) < 0;
    bad |= gf_y_prompts(ctx, m, "prompts", 0, &s->prompts, &s->n_prompts) < 0;
    bad |= gf_y_int(ctx, m, "steps", 0, 1, 1 << 20, &s->steps) < 0;
    bad |= gf_y_gate(ctx, m, "gate", &s->gate) < 0;
    bad |= gf_y_int(ctx, m, "topk", 0, 1, 1 << 20, &s->topk) < 0;
    bad |= gf_stat_thr_parse(ctx, m, &s->thr, &s->n_thr) < 0;
    bad |= gf_stat_hypothesis_parse(ctx, m, &s->hyp, &s->n_hyp) < 0;
    bad |= gf_y_string(ctx, m, "calibration_case", 0, &s->cal_case) < 0;
    /* the calibration table: the case's `calibration` (required to exist),
     * else the repository's calibration/distribution_match.yaml when there is one */
    char *cal = NULL;
    int rc_cal = gf_y_string(ctx, m, "calibration", 0, &cal);
    bad |= rc_cal < 0;
    if (rc_cal >= 0) {
        char *root = gf_case_root_for(ctx->root, ctx->file);
        char *path = !root ? NULL
                     : cal ? (cal[0] == '/' ? strdup(cal) : gf_path_join(root, cal))
                           : gf_path_join(root, GF_STAT_TABLE_DEFAULT);
        size_t errors = ctx->n_errors;
        if (path)
            s->table = gf_stat_table_load(ctx, path, cal != NULL);
        bad |= !path || ctx->n_errors > errors;
        free(path);
        free(root);
    }
    free(cal);
    size_t n_q = 0;
    int has_p = gf_y_doubles(ctx, m, "kl_pair_p", 0, 2, &s->kl_p, &s->n_kl);
    int has_q = gf_y_doubles(ctx, m, "kl_pair_q", 0, 2, &s->kl_q, &n_q);
    int has_e = gf_y_double(ctx, m, "kl_pair_expect", 0, &s->kl_expect);
    bad |= has_p < 0 || has_q < 0 || has_e < 0;
    if (!bad && (has_p || has_q || has_e) &&
        !(has_p && has_q && has_e && s->n_kl == n_q && isfinite(s->kl_expect) && s->kl_expect >= 0)) {
        gf_y_error(ctx, m,
                   "'kl_pair_p' and 'kl_pair_q' (two logit rows of one length) and 'kl_pair_expect' (their "
                   "KL(p || q) in nats, >= 0) go together");
        bad = 1;
    }
    for (size_t i = 0; !bad && i < s->n_kl; i++)
        if (!isfinite(s->kl_p[i]) || !isfinite(s->kl_q[i])) {
            gf_y_error(ctx, m, "'kl_pair_p' and 'kl_pair_q' must be finite logits");
            bad = 1;
        }
    if (!has_p)
        s->n_kl = 0;
    if (!bad && !s->n_goldens && !s->n_prompts) {
        gf_y_error(ctx, m, "distribution_match needs 'goldens' or 'prompts' (or both)");
        bad = 1;
    }
    if (!bad && s->n_goldens) {
        s->golden_paths = calloc(s->n_goldens, sizeof *s->golden_paths);
        char *root = gf_case_root_for(ctx->root, ctx->file);
        for (size_t i = 0; s->golden_paths && root && i < s->n_goldens; i++)
            s->golden_paths[i] = s->goldens[i][0] == '/' ? strdup(s->goldens[i]) : gf_path_join(root, s->goldens[i]);
        for (size_t i = 0; i < s->n_goldens; i++)
            if (!s->golden_paths || !s->golden_paths[i])
                bad = 1;
        free(root);
    }
    return bad ? -1 : 0;
}

/* judges_weights (case.h): the plan skips token-equality kinds on weights
 * a statistical case has thresholds for (harness/run/plan.c). */
static int dm_judges_weights(const gf_case *c, const char *weights, const char *kv)
{
    gf_stat_thr t;
    int from_case;
    /* a top-k bound proves a fail, never a pass: it stands for no deferred case */
    const dm_spec *s = c->spec;
    return s && !s->topk &&
           (gf_stat_thr_for(s->thr, s->n_thr, weights, &t, &from_case) ||
            gf_stat_table_has(s->table, s->cal_case ? s->cal_case : c->id, weights, kv && kv[0] ? kv : "f32"));
}

/* ---- figures ---- */

typedef struct dm_acc {
    double *kl, *dp;       /* (n) per position */
    int32_t *pos, *step;   /* (n) the position of the row computing it, its step in its sequence (0: the first) */
    int32_t topk;          /* 0: full rows; else the top-k bound (topk_step) */
    int served;            /* the backend's rows are a served engine's (listed ids above one fill) */
    int32_t *order;        /* (V) scratch: ids by the backend's log-probability */
    double kl_full_max;    /* the full KL's largest, where the backend has full rows (topk only) */
    double bound_over_max; /* the largest KL_S - KL seen (> 0: the bound broken) */
    size_t n, cap;
    size_t agree;
    double disagree_max_margin; /* the reference's largest top-two margin where top-1 differs */
    double *lr, *lb;            /* (V) scratch: log-softmax of both sides */
    gf_cmp cmp;                 /* max |delta|, margins, near ties (no atol: not judged) */
} dm_acc;

static void log_softmax(const float *x, int32_t V, double *out)
{
    double m = -INFINITY, sum = 0;
    for (int32_t v = 0; v < V; v++)
        if (x[v] > m)
            m = x[v];
    for (int32_t v = 0; v < V; v++)
        sum += exp((double)x[v] - m);
    double lse = m + log(sum);
    for (int32_t v = 0; v < V; v++)
        out[v] = (double)x[v] - lse;
}

static const double *g_sort_key; /* qsort's key: the backend's log-softmax (one thread per child) */
static int by_key_desc(const void *x, const void *y)
{
    double a = g_sort_key[*(const int32_t *)x], b = g_sort_key[*(const int32_t *)y];
    return a > b   ? -1
           : a < b ? 1
                   : (*(const int32_t *)x > *(const int32_t *)y) - (*(const int32_t *)x < *(const int32_t *)y);
}

/* The top-k bound at one position (the file comment), a->lr and a->lb the
 * two log-softmaxes: KL_S into *kl, |delta p| (or its bound) of next into
 * *dp, max |delta| over S into *delta. A served row's S is the ids above its
 * fill (backends/http: every unlisted id holds the same lower value), its
 * q the listed log-probabilities as reported. */
static void topk_step(dm_acc *a, const float *test, int32_t V, int32_t next, double *kl, double *dp, double *delta)
{
    int32_t n = 0;
    if (a->served) {
        float fill = INFINITY;
        for (int32_t v = 0; v < V; v++)
            fill = test[v] < fill ? test[v] : fill;
        for (int32_t v = 0; v < V; v++)
            if (test[v] > fill)
                a->order[n++] = v;
    } else {
        for (int32_t v = 0; v < V; v++)
            a->order[v] = v;
        g_sort_key = a->lb;
        qsort(a->order, (size_t)V, sizeof *a->order, by_key_desc);
        n = a->topk < V ? a->topk : V;
    }
    double ps = 0, qs = 0, k = 0, d = 0, q_next = -1;
    for (int32_t i = 0; i < n; i++) {
        int32_t v = a->order[i];
        double lq = a->served ? (double)test[v] : a->lb[v], p = exp(a->lr[v]);
        ps += p;
        qs += exp(lq);
        if (p > 0)
            k += p * (a->lr[v] - lq);
        double dd = fabs(a->lr[v] - lq);
        d = dd > d || isnan(dd) ? dd : d;
        if (v == next)
            q_next = exp(lq);
    }
    /* the rest: 1 - the listed mass (floored: a sum rounded past 1 leaves no rest) */
    double p_rest = 1 - ps > 0 ? 1 - ps : 0, q_rest = 1 - qs > 1e-300 ? 1 - qs : 1e-300;
    if (p_rest > 0)
        k += p_rest * log(p_rest / q_rest);
    double p_next = exp(a->lr[next]);
    *kl = k;
    *dp = q_next >= 0 ? fabs(p_next - q_next) : (p_next - q_rest > 0 ? p_next - q_rest : 0);
    *delta = d;
}

/* *p grown to cap elements of elt bytes (kept as it was when that fails): 0 or -1 */
static int grow(void **p, size_t cap, size_t elt)
{
    void *q = realloc(*p, cap * elt);
    if (!q)
        return -1;
    *p = q;
    return 0;
}

/* One position: ref and test logits (V), next the token the sequence takes. */
static int acc_step(dm_acc *a, const float *ref, const float *test, int32_t V, int32_t next, int32_t pos, int32_t step)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 1024;
        int bad = grow((void **)&a->kl, cap, sizeof *a->kl) | grow((void **)&a->dp, cap, sizeof *a->dp);
        bad |= grow((void **)&a->pos, cap, sizeof *a->pos) | grow((void **)&a->step, cap, sizeof *a->step);
        if (bad)
            return -1;
        a->cap = cap;
    }
    a->pos[a->n] = pos;
    a->step[a->n] = step;
    log_softmax(ref, V, a->lr);
    log_softmax(test, V, a->lb);
    double kl = 0, dp = -1, delta = -1;
    for (int32_t v = 0; v < V && !a->served; v++) {
        double p = exp(a->lr[v]);
        if (p > 0)
            kl += p * (a->lr[v] - a->lb[v]);
    }
    if (a->topk) {
        double full = kl;
        topk_step(a, test, V, next, &kl, &dp, &delta);
        if (!a->served) {
            a->kl_full_max = full > a->kl_full_max ? full : a->kl_full_max;
            double over = kl - full - 1e-12 * (1 + full);
            a->bound_over_max = over > a->bound_over_max ? over : a->bound_over_max;
        }
    }
    double top1, margin;
    int32_t ra = gf_row_top(ref, V, &top1, &margin), ta = gf_row_top(test, V, NULL, NULL);
    if (ra == ta)
        a->agree++;
    else if (!(margin <= a->disagree_max_margin))
        a->disagree_max_margin = margin;
    a->kl[a->n] = kl;
    a->dp[a->n] = dp >= 0 ? dp : fabs(exp(a->lr[next]) - exp(a->lb[next]));
    gf_cmp_step(&a->cmp, (int32_t)a->n, delta >= 0 ? delta : gf_max_abs_delta(ref, test, (size_t)V, NULL), ra, ta,
                margin, top1);
    a->n++;
    return 0;
}

/* The KL's own check: the case's two rows through acc_step, as every
 * position goes (p the reference, q the backend), must give the case's
 * KL(p || q) within 1e-9 relative. The rows are far apart, where KL(q || p)
 * is another number, so a KL with its arguments swapped fails here, where
 * near-identical distributions (every backend of the suite) cannot tell. */
static void kl_pair_check(gf_krun *k, const dm_spec *s)
{
    const int32_t n = (int32_t)s->n_kl;
    float *p = malloc((size_t)n * sizeof *p), *q = malloc((size_t)n * sizeof *q); /* (n) each */
    dm_acc b = {.disagree_max_margin = -INFINITY, .kl_full_max = -INFINITY, .bound_over_max = -INFINITY};
    b.lr = malloc((size_t)n * sizeof *b.lr);
    b.lb = malloc((size_t)n * sizeof *b.lb);
    gf_cmp_init(&b.cmp, &s->gate, k->dtype, GF_CMP_TEACHER_FORCED, NAN);
    if (!p || !q || !b.lr || !b.lb) {
        gf_k_fail(k, "out of memory");
    } else {
        for (int32_t i = 0; i < n; i++) {
            p[i] = (float)s->kl_p[i];
            q[i] = (float)s->kl_q[i];
        }
        if (acc_step(&b, p, q, n, 0, 0, 0) != 0) {
            gf_k_fail(k, "out of memory");
        } else {
            const double got = b.kl[0];
            gf_k_metric_json(k, "kl_pair", json_pack("{s:f, s:f}", "computed", got, "expected", s->kl_expect));
            gf_k_check(k, fabs(got - s->kl_expect) <= 1e-9 * (1 + s->kl_expect), "KL of the kl_pair",
                       "KL(p || q) of the case's two rows: computed %.12g, expected %.12g nats", got, s->kl_expect);
        }
    }
    free(p);
    free(q);
    free(b.kl);
    free(b.dp);
    free(b.pos);
    free(b.step);
    free(b.lr);
    free(b.lb);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* numpy's default percentile (linear between the closest ranks) */
static double percentile(const double *v, size_t n, double q)
{
    double *s = malloc(n * sizeof *s);
    if (!s || !n) {
        free(s);
        return NAN;
    }
    memcpy(s, v, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_double);
    double at = q / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(at), hi = lo + 1 < n ? lo + 1 : lo;
    double r = s[lo] + (s[hi] - s[lo]) * (at - (double)lo);
    free(s);
    return r;
}

static double mean_of(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return n ? s / (double)n : NAN;
}

/* the sample standard deviation (n - 1) */
static double sd_of(const double *v, size_t n, double mean)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (v[i] - mean) * (v[i] - mean);
    return n > 1 ? sqrt(s / (double)(n - 1)) : NAN;
}

static double max_of(const double *v, size_t n)
{
    double m = n ? v[0] : NAN;
    for (size_t i = 1; i < n; i++)
        if (!(v[i] <= m))
            m = v[i];
    return m;
}

/* ---- running one sequence ---- */

typedef struct capture {
    float *logits;   /* (N, V) */
    int32_t *tokens; /* (N) */
    int32_t V, N;
} capture;

static gf_status capture_step(void *user, const gf_step_info *info)
{
    capture *c = user;
    if (info->step < c->N) {
        memcpy(c->logits + (size_t)info->step * c->V, info->logits, (size_t)c->V * sizeof(float));
        c->tokens[info->step] = info->tokens[0];
    }
    return GF_OK;
}

/* prompt (P) then N steps on engine e: teacher-forced through forced (N) when
 * given, else greedy; the step logits into cap. */
static gf_status run_sequence(gf_engine *e, const int32_t *prompt, int32_t P, const int32_t *forced, int32_t N,
                              capture *cap)
{
    gf_generate_params gp = gf_generate_defaults();
    gp.max_new_tokens = N;
    gp.sampler = gf_sampler_greedy();
    gp.eos_id = -1;
    gp.use_cache = 1;
    gp.forced = forced ? &forced : NULL;
    gp.on_step = capture_step;
    gp.user = cap;
    gf_generation *gen = NULL;
    gf_status st = gf_generate(e, 1, &prompt, &P, &gp, &gen);
    if (st == GF_OK && gen->steps != N)
        st = gf_error_set(GF_E_CONTEXT_LIMIT,
                          "%d of %d steps ran (%s): the prompt (%d) plus %d steps must fit the "
                          "model's positions",
                          gen->steps, N, gf_stop_reason_str(gen->stop[0]), P, N);
    gf_generation_free(gen);
    return st;
}

static int cap_alloc(capture *c, int32_t N, int32_t V)
{
    c->N = N;
    c->V = V;
    c->logits = malloc((size_t)N * V * sizeof *c->logits);
    c->tokens = malloc((size_t)N * sizeof *c->tokens);
    return c->logits && c->tokens;
}

static void cap_free(capture *c)
{
    free(c->logits);
    free(c->tokens);
    c->logits = NULL;
    c->tokens = NULL;
}

/* Fold steps [from, a->n) of one source into the per-source list. */
static void source_metrics(json_t *list, const char *label, const char *reference, const dm_acc *a, size_t from)
{
    json_t *o = json_object();
    size_t n = a->n - from;
    json_object_set_new(o, "source", json_string(label));
    json_object_set_new(o, "reference", json_string(reference));
    json_object_set_new(o, "positions", json_integer((json_int_t)n));
    gf_json_set_number(o, "kld_mean", mean_of(a->kl + from, n), "no positions");
    gf_json_set_number(o, "kld_max", max_of(a->kl + from, n), "no positions");
    gf_json_set_number(o, "dp_max", max_of(a->dp + from, n), "no positions");
    json_array_append_new(list, o);
}

/* The golden sources: each row, teacher-forced, against the golden's logits. */
static int run_goldens(const gf_case *c, gf_krun *k, const dm_spec *s, dm_acc *a, json_t *sources)
{
    gf_engine *e = k->session->engine;
    const int32_t V = gf_engine_config(e)->vocab_size;
    char model_hex[65];
    if (s->n_goldens && gf_model_hash(c->model, model_hex) != GF_OK) {
        gf_k_error(k, "model hash of %s: %s", c->model_arg, gf_error_msg());
        return -1;
    }
    for (size_t i = 0; i < s->n_goldens; i++) {
        gf_golden *g = NULL;
        gf_status st = gf_golden_read(s->golden_paths[i], &g);
        if (st != GF_OK) {
            gf_k_error(k, "golden %s: %s", s->golden_paths[i], st == GF_E_NOT_FOUND ? "not found" : gf_error_msg());
            return -1;
        }
        const char *gm = gf_golden_meta(g, "model_hash");
        if (!gm || strcmp(gm, model_hex)) {
            gf_k_stale(k, "golden %s was made for model hash %s, %s is %s now", s->goldens[i], gm ? gm : "(none)",
                       c->model_arg, model_hex);
            gf_golden_free(g);
            return -1;
        }
        if (g->V != V) {
            gf_k_error(k, "golden %s holds %d logits per step, the model %d", s->goldens[i], g->V, V);
            gf_golden_free(g);
            return -1;
        }
        for (int32_t b = 0; b < g->rows; b++) {
            const gf_golden_row *r = &g->row[b];
            capture cap = {0};
            size_t from = a->n;
            if (!cap_alloc(&cap, r->steps, V)) {
                cap_free(&cap);
                gf_golden_free(g);
                gf_k_fail(k, "out of memory");
                return -1;
            }
            st = run_sequence(e, r->tokens, r->prompt_len, r->tokens + r->prompt_len, r->steps, &cap);
            if (st != GF_OK) {
                char what[1200];
                snprintf(what, sizeof what, "teacher-forced generate through %s row %d", s->goldens[i], b);
                gf_k_status(k, st, what);
                cap_free(&cap);
                gf_golden_free(g);
                return -1;
            }
            for (int32_t t = 0; t < r->steps; t++)
                if (acc_step(a, r->logits + (size_t)t * V, cap.logits + (size_t)t * V, V, r->tokens[r->prompt_len + t],
                             r->prompt_len - 1 + t, t) < 0) {
                    gf_k_fail(k, "out of memory");
                    cap_free(&cap);
                    gf_golden_free(g);
                    return -1;
                }
            char label[1100];
            snprintf(label, sizeof label, "%s/row%d", s->goldens[i], b);
            char refname[300];
            const char *gen = gf_golden_meta(g, "generator"), *gv = gf_golden_meta(g, "generator_version");
            snprintf(refname, sizeof refname, "golden (%s %s)", gen ? gen : "?", gv ? gv : "?");
            source_metrics(sources, label, refname, a, from);
            cap_free(&cap);
        }
        gf_golden_free(g);
    }
    return 0;
}

/* The prompt sources: ref decodes `steps` greedy tokens; the backend is
 * teacher-forced through them against ref's logits. */
static int run_prompts(const gf_case *c, gf_krun *k, const dm_spec *s, dm_acc *a, json_t *sources)
{
    if (!s->n_prompts)
        return 0;
    gf_session ref;
    gf_status st = gf_session_open(&ref, c->model, "ref", k->threads, 0);
    if (st != GF_OK) {
        gf_k_error(k, "the reference (ref on %s): %s", c->model_arg, gf_error_msg());
        return -1;
    }
    const int32_t V = gf_engine_config(k->session->engine)->vocab_size, N = (int32_t)s->steps;
    int rc = 0;
    for (size_t i = 0; i < s->n_prompts && !rc; i++) {
        int32_t *prompt = NULL, P = 0;
        capture rc_ = {0}, bc = {0};
        size_t from = a->n;
        st = gf_prompt_tokens(k->session, &s->prompts[i], &prompt, &P);
        if (st != GF_OK) {
            gf_k_error(k, "prompt %zu: %s", i, gf_error_msg());
            rc = -1;
        } else if (!cap_alloc(&rc_, N, V) || !cap_alloc(&bc, N, V)) {
            gf_k_fail(k, "out of memory");
            rc = -1;
        } else if ((st = run_sequence(ref.engine, prompt, P, NULL, N, &rc_)) != GF_OK) {
            gf_k_error(k, "the reference's greedy decode of prompt %zu on ref: %s", i, gf_error_msg());
            rc = -1;
        } else if ((st = run_sequence(k->session->engine, prompt, P, rc_.tokens, N, &bc)) != GF_OK) {
            char what[128];
            snprintf(what, sizeof what, "teacher-forced generate through prompt %zu and ref's tokens", i);
            gf_k_status(k, st, what);
            rc = -1;
        }
        for (int32_t t = 0; !rc && t < N; t++)
            if (acc_step(a, rc_.logits + (size_t)t * V, bc.logits + (size_t)t * V, V, rc_.tokens[t], P - 1 + t, t) <
                0) {
                gf_k_fail(k, "out of memory");
                rc = -1;
            }
        if (!rc) {
            char label[64];
            snprintf(label, sizeof label, "prompt%zu + %d ref tokens", i, N);
            source_metrics(sources, label, "ref (this child)", a, from);
        }
        cap_free(&rc_);
        cap_free(&bc);
        free(prompt);
    }
    gf_session_close(&ref);
    return rc;
}

/* ---- the run ---- */

/* KL binned by context position (GF_DM_BIN positions a bin): mean, max and
 * count per non-empty bin, so growth with length shows. */
enum { GF_DM_BIN = 16, GF_DM_EARLY_STEPS = 8 };
static json_t *kl_by_position(const dm_acc *a)
{
    int32_t hi = -1;
    for (size_t i = 0; i < a->n; i++)
        hi = a->pos[i] > hi ? a->pos[i] : hi;
    json_t *bins = json_array();
    for (int32_t lo = 0; lo <= hi; lo += GF_DM_BIN) {
        double sum = 0, mx = -INFINITY;
        size_t n = 0;
        for (size_t i = 0; i < a->n; i++)
            if (a->pos[i] >= lo && a->pos[i] < lo + GF_DM_BIN) {
                sum += a->kl[i];
                mx = a->kl[i] > mx ? a->kl[i] : mx;
                n++;
            }
        if (n)
            json_array_append_new(bins, json_pack("{s:i, s:i, s:I, s:f, s:f}", "from", lo, "to", lo + GF_DM_BIN - 1,
                                                  "positions", (json_int_t)n, "kld_mean", sum / (double)n, "kld_max",
                                                  isfinite(mx) ? mx : -1.0));
    }
    return bins;
}

/* The early-garbage guard: a KL at one of the first GF_DM_EARLY_STEPS steps
 * of a sequence far above the type's band is a broken kernel (a quantized
 * cache's wrong scale, a garbled first decode), its own check ahead of the
 * band's, not a quality drift. Its bound is the largest of
 *  - 10 x kld_mean (the KL-mean test's threshold where calibrated, else the
 *    fixed bound) and 0.25 nats: what makes it garbage, not drift. 0.25 nats
 *    is 4x the largest single-position KL measured on an honest q8_0 backend
 *    (llamacpp:q8_0 on holmes-gpt, 6.6e-2) and 1500x an honest q8_0 cache's
 *    (ref-kv-q8, 1.7e-4 in its first steps); a K scale 16x off reads 0.63 at
 *    the first step (ref-kv-q8-bad-k-scale);
 *  - where calibrated, the level that none of the n early positions of an
 *    honest backend passes but with probability at most the type's alpha
 *    (gf_stat_cantelli_level: from the null's mean and sigma, no shape
 *    assumed; sigma is the table's, at least the per-position sd, so the
 *    level errs high). It is what bounds the guard's false alarms where a
 *    type's own honest KL reaches far: q4_0 weights on holmes-gpt (null mean
 *    0.0205, sigma 0.0272, largest 0.43) get 1.56 at 16 early positions,
 *    where 0.25 had failed one honest reseed of 100 (0.297 at step 3).
 * Uncalibrated, the first two only, and the check says its false-alarm rate
 * is not bounded. */
static void early_garbage(gf_krun *k, const dm_acc *a, double kld_mean, const gf_stat_hyp *hyp, const char *key)
{
    if (!(kld_mean > 0) || !a->n)
        return;
    size_t at = SIZE_MAX, n_early = 0;
    double worst = -1;
    for (size_t i = 0; i < a->n; i++)
        if (a->step[i] < GF_DM_EARLY_STEPS) {
            n_early++;
            if (a->kl[i] > worst) {
                worst = a->kl[i];
                at = i;
            }
        }
    if (at == SIZE_MAX)
        return;
    double bound = 10 * kld_mean > 0.25 ? 10 * kld_mean : 0.25;
    double level = NAN, alpha = NAN;
    if (hyp && hyp->null) {
        alpha = hyp->pol.alpha;
        level = gf_stat_cantelli_level(hyp->null->kld_mean, hyp->null->kld_sigma, alpha, (long long)n_early);
        if (level > bound)
            bound = level;
    }
    char rule[320];
    if (isfinite(level))
        snprintf(rule, sizeof rule,
                 "10 x the %s kld_mean bound %.3g, at least 0.25 nats and the null's level %.3g that %zu honest "
                 "positions pass with probability <= alpha %g (Cantelli: mean %.3g + sigma %.3g x sqrt(n / alpha - 1))",
                 key, kld_mean, level, n_early, alpha, hyp->null->kld_mean, hyp->null->kld_sigma);
    else
        snprintf(rule, sizeof rule,
                 "10 x the %s kld_mean bound %.3g, at least 0.25 nats; no calibrated null: its false-alarm rate is not "
                 "bounded",
                 key, kld_mean);
    json_t *m = json_pack("{s:i, s:I, s:f, s:f, s:s}", "steps", GF_DM_EARLY_STEPS, "positions", (json_int_t)n_early,
                          "bound", bound, "kld_max_early", worst, "rule", rule);
    if (isfinite(level)) {
        json_object_set_new(m, "null_level", json_real(level));
        json_object_set_new(m, "alpha", json_real(alpha));
    }
    gf_k_metric_json(k, "early_garbage", m);
    size_t first = SIZE_MAX;
    for (size_t i = 0; i < a->n && first == SIZE_MAX; i++)
        if (a->step[i] < GF_DM_EARLY_STEPS && a->kl[i] > bound)
            first = i;
    if (first == SIZE_MAX)
        gf_k_check(k, 1, "no garbage in the first steps (a broken kernel)",
                   "KL at most %.3g at the %zu positions of the first %d steps (bound %.3g: %s)", worst, n_early,
                   GF_DM_EARLY_STEPS, bound, rule);
    else
        gf_k_check(k, 0, "no garbage in the first steps (a broken kernel)",
                   "a broken kernel, not a quality drift: KL %.3g at step %d (position %d) of its sequence, past %.3g "
                   "(%s); the worst in the first %d steps %.3g",
                   a->kl[first], a->step[first] + 1, a->pos[first], bound, rule, GF_DM_EARLY_STEPS, worst);
}

static const char *const dm_served_why =
    "the KL over full distributions needs full logits, and a server reports its top-k log-probabilities only (a case "
    "with 'topk: N' computes the top-k bound instead: docs/http.md)";

static void judge(gf_krun *k, const char *name, double measured, double bound, int at_least, const char *fmt_extra)
{
    if (isnan(bound))
        return;
    int ok = at_least ? measured >= bound : measured <= bound;
    /* safety: how far the bound is from the measured figure (for top-1: the
     * disagreements allowed over those seen) */
    double sf = at_least ? (1 - measured > 0 ? (1 - bound) / (1 - measured) : INFINITY)
                         : (measured > 0 ? bound / measured : INFINITY);
    char sfs[32];
    if (isinf(sf))
        snprintf(sfs, sizeof sfs, "inf");
    else
        snprintf(sfs, sizeof sfs, "%.3gx", sf);
    gf_k_check(k, ok, name, "measured %.3g %s %.3g (safety %s)%s", measured,
               ok ? (at_least ? ">=" : "<=") : (at_least ? "<" : ">"), bound, sfs, fmt_extra);
}

static void run_dm(const gf_case *c, gf_krun *k)
{
    const dm_spec *s = c->spec;
    gf_engine *e = k->session->engine;
    const int32_t V = gf_engine_config(e)->vocab_size;
    char w[64], kv[64];
    gf_stat_backend_types(k, w, sizeof w, kv, sizeof kv);
    gf_k_metric_json(k, "weights", json_string(w));
    gf_k_metric_json(k, "kv_cache", json_string(kv));
    const char *key = gf_stat_thr_key(w, kv);
    gf_k_metric_json(k, "threshold_key", json_string(key));
    const int served = !strcmp(w, GF_WEIGHTS_SERVED);
    if (served && !s->topk) { /* the plan skips it (served_skip); the rows hold no full distribution */
        gf_k_skip(k, "%s", dm_served_why);
        return;
    }
    if (s->topk)
        gf_k_metric_json(k, "restricted_to",
                         json_pack("{s:I, s:s, s:s}", "topk", (json_int_t)s->topk, "set",
                                   served ? "the ids the server listed at each position"
                                          : "the backend's top-k ids at each position",
                                   "figures",
                                   "lower bounds (KL over the top-k plus one merged rest, |delta p| "
                                   "outside the set bounded below by p - q_rest): docs/http.md"));
    /* the hypothesis tests where the table calibrates the model and types,
     * else the fixed bounds (the thresholds' defaults or the case's) */
    gf_stat_hyp hyp;
    char model_hex[65] = "";
    if (s->table && gf_model_hash(c->model, model_hex) != GF_OK) {
        gf_k_error(k, "model hash of %s: %s", c->model_arg, gf_error_msg());
        return;
    }
    char pkey[64];
    gf_stat_policy_key(w, kv, pkey, sizeof pkey);
    /* a top-k case's null is its own KL_S (the bound), measured on honest
     * backends through the same top-k restriction: tested like a full KL,
     * the power being the bound's (a divergence outside the top k is not seen) */
    const int calibrated =
        gf_stat_hyp_find(&hyp, s->table, s->hyp, s->n_hyp, pkey, s->cal_case ? s->cal_case : c->id, w, kv, model_hex);
    gf_stat_thr thr = {NAN, NAN, NAN, NAN, NAN};
    int from_case = 0;
    const int has_thr = gf_stat_thr_for(s->thr, s->n_thr, key, &thr, &from_case);
    if (!calibrated && !has_thr) {
        gf_k_skip(k,
                  "no thresholds for %s (weights %s, kv %s): not calibrated (%s), and no fixed bounds (defaults "
                  "exist for f32, f16, q8_0: give 'thresholds: {%s: {...}}', or calibrate: docs/calibration.md)",
                  key, w, kv, hyp.why, key);
        return;
    }
    if (!calibrated)
        gf_k_metric_json(k, "hypothesis", json_pack("{s:b, s:s}", "calibrated", 0, "why", hyp.why));
    if (calibrated) /* every figure is judged by a test; the fixed bounds judge nothing */
        thr = (gf_stat_thr){NAN, NAN, NAN, NAN, NAN};
    if (has_thr && !calibrated)
        gf_k_metric_json(k, "thresholds", gf_stat_thr_json(&thr, from_case));

    dm_acc a = {0};
    a.disagree_max_margin = -INFINITY;
    a.lr = malloc((size_t)V * sizeof *a.lr);
    a.lb = malloc((size_t)V * sizeof *a.lb);
    a.topk = (int32_t)s->topk;
    a.served = served;
    a.kl_full_max = -INFINITY;
    a.bound_over_max = -INFINITY;
    a.order = s->topk ? malloc((size_t)V * sizeof *a.order) : NULL;
    gf_cmp_init(&a.cmp, &s->gate, k->dtype, GF_CMP_TEACHER_FORCED, NAN);
    json_t *sources = json_array();
    gf_k_metric_json(k, "sources", sources); /* filled below (the metrics hold the reference) */
    if (!a.lr || !a.lb || (s->topk && !a.order)) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    if (s->n_kl)
        kl_pair_check(k, s);
    if (run_goldens(c, k, s, &a, sources) < 0)
        goto done;
    const size_t n_golden = a.n; /* the goldens' positions: the same in every reseed of the null */
    if (run_prompts(c, k, s, &a, sources) < 0)
        goto done;

    double kl_mean = mean_of(a.kl, a.n), kl_p99 = percentile(a.kl, a.n, 99), kl_max = max_of(a.kl, a.n);
    double top1 = a.n ? (double)a.agree / (double)a.n : NAN;
    double dp_mean = mean_of(a.dp, a.n), dp_p99 = percentile(a.dp, a.n, 99), dp_max = max_of(a.dp, a.n);
    json_t *st = json_object();
    json_object_set_new(st, "positions", json_integer((json_int_t)a.n));
    gf_json_set_number(st, "kld_mean", kl_mean, "no positions");
    gf_json_set_number(st, "kld_sd", sd_of(a.kl, a.n, kl_mean), "fewer than two positions");
    gf_json_set_number(st, "kld_p99", kl_p99, "no positions");
    gf_json_set_number(st, "kld_max", kl_max, "no positions");
    gf_json_set_number(st, "top1_agreement", top1, "no positions");
    json_object_set_new(st, "top1_disagreements", json_integer((json_int_t)(a.n - a.agree)));
    gf_json_set_number(st, "top1_disagree_max_ref_margin", a.n > a.agree ? a.disagree_max_margin : NAN,
                       "top-1 agrees everywhere");
    gf_json_set_number(st, "dp_mean", dp_mean, "no positions");
    gf_json_set_number(st, "dp_p99", dp_p99, "no positions");
    gf_json_set_number(st, "dp_max", dp_max, "no positions");
    gf_json_set_number(st, "max_abs_delta", a.cmp.max_delta, "no positions");
    if (s->topk && !served)
        gf_json_set_number(st, "kld_full_max", a.n ? a.kl_full_max : NAN, "no positions");
    gf_k_metric_json(k, "statistical", st);
    /* the bound's claim, where the full rows are there to check it on */
    if (s->topk && !served && a.n)
        gf_k_check(k, !(a.bound_over_max > 0), "top-k KL is a lower bound",
                   "the top-%lld KL is at most the full KL at all %zu positions (largest full KL %.3g)%s", s->topk, a.n,
                   a.kl_full_max, a.bound_over_max > 0 ? ": BROKEN" : "");
    /* the usual max |delta|, margins and near ties, beside (not judged: no atol) */
    k->summary = a.cmp;
    k->has_summary = 1;

    gf_k_metric_json(k, "kld_by_position", kl_by_position(&a));
    char extra[256];
    snprintf(extra, sizeof extra, "; %zu positions, weights %s, kv %s, %s thresholds%s", a.n, w, kv, key,
             s->topk ? ", top-k bound" : "");
    if (calibrated && gf_stat_hyp_plan(k, c, &hyp, pkey, a.n, n_golden) < 0)
        goto done; /* refused: the case cannot reach the declared power */
    early_garbage(k, &a, calibrated ? hyp.kl.threshold : thr.kld_mean, calibrated ? &hyp : NULL, key);
    if (calibrated) {
        gf_stat_hyp_judge(k, &hyp, kl_mean, a.n - a.agree, extra);
        gf_stat_hyp_judge_tails(k, &hyp, a.kl, a.dp, kl_p99, kl_max, dp_max, extra);
    }
    judge(k, "kld_mean", kl_mean, thr.kld_mean, 0, extra);
    judge(k, "kld_p99", kl_p99, thr.kld_p99, 0, extra);
    judge(k, "kld_max", kl_max, thr.kld_max, 0, extra);
    char t1[512];
    if (a.n > a.agree)
        snprintf(t1, sizeof t1, "; %zu of %zu positions differ, ref's top-two margin <= %.3g there%s", a.n - a.agree,
                 a.n, a.disagree_max_margin, extra);
    else
        snprintf(t1, sizeof t1, "; agrees at all %zu positions%s", a.n, extra);
    judge(k, "top1_min", top1, thr.top1_min, 1, t1);
    judge(k, "dp_max", dp_max, thr.dp_max, 0, extra);
done:
    free(a.kl);
    free(a.dp);
    free(a.pos);
    free(a.step);
    free(a.lr);
    free(a.lb);
    free(a.order);
}

static const char *dm_served_skip(const gf_case *c)
{
    const dm_spec *s = c->spec;
    return s && !s->topk ? dm_served_why : NULL;
}

const gf_kind_def gf_kind_distribution_match = {
    .name = "distribution_match",
    .summary =
        "the statistical tier: KL divergence, top-1 agreement and |delta p| against the reference, teacher-forced, "
        "hypothesis tests from a calibrated null (fixed bounds where uncalibrated)",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .hashes_model = 1,
    .judges_weights = dm_judges_weights,
    .served_skip = dm_served_skip,
    .parse = parse_dm,
    .free_spec = spec_free,
    .run = run_dm,
};
