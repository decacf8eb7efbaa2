/* beam_search: the engine's beam search (genfence/beam.h, transformers
 * 4.47.1's rules) over the backend's forward against a golden made by
 * transformers' own generate(num_beams=...) on the same model
 * (tools/reference/beam_golden.py): every returned beam's tokens equal, its
 * score within the stated tolerance. A golden whose case or model hash no
 * longer matches is stale; a missing or corrupt one is an error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/beam.h"
#include "genfence/engine.h"
#include "genfence/safetensors.h"
#include "golden.h"
#include "golden_case.h"
#include "hash.h"
#include "keys.h"

#define BEAM_GOLDEN_FORMAT "genfence-beam-golden-1"

typedef struct beam_spec {
    gf_prompt_spec prompt;
    long long num_beams, num_return, max_new, eos_id; /* eos_id -2: the model's */
    double length_penalty, atol;
    int early;
    char *golden_arg, *golden;
} beam_spec;

static void beam_free(void *p)
{
    beam_spec *s = p;
    if (s) {
        free(s->prompt.text);
        free(s->prompt.ids);
        free(s->golden_arg);
        free(s->golden);
    }
    free(s);
}

static const char *const k_early[] = {"false", "true", "never", NULL};

/* early_stopping: a bool or "never" */
static int y_early(gf_cctx *ctx, const gf_ynode *m, int *out)
{
    const gf_ynode *n = gf_y_get(ctx, m, "early_stopping", 0);
    if (!n)
        return 0;
    gf_yvalue v = n->type == GF_YN_SCALAR ? gf_yscalar_resolve(n) : (gf_yvalue){0};
    if (n->type == GF_YN_SCALAR && v.type == GF_YS_BOOL) {
        *out = v.b ? GF_BEAM_EARLY_TRUE : GF_BEAM_EARLY_FALSE;
        return 1;
    }
    if (n->type == GF_YN_SCALAR && v.type == GF_YS_STR && !strcmp(n->value, "never")) {
        *out = GF_BEAM_EARLY_NEVER;
        return 1;
    }
    gf_y_error(ctx, n, "'early_stopping' must be true, false or never (transformers' early_stopping)");
    return -1;
}

static int parse_beam(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    beam_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->num_return = 1;
    s->max_new = 16;
    s->eos_id = -2;
    s->length_penalty = 1.0;
    s->atol = GF_ATOL_DEFAULT;
    int bad = gf_y_one_prompt(ctx, m, &s->prompt) < 0;
    bad |= gf_y_int(ctx, m, "num_beams", GF_Y_REQUIRED, 2, 64, &s->num_beams) < 0;
    bad |= gf_y_int(ctx, m, "num_return_sequences", 0, 1, 64, &s->num_return) < 0;
    bad |= gf_y_double(ctx, m, "length_penalty", 0, &s->length_penalty) < 0;
    bad |= y_early(ctx, m, &s->early) < 0;
    bad |= gf_y_int(ctx, m, "max_new_tokens", 0, 1, 1 << 16, &s->max_new) < 0;
    bad |= gf_y_int(ctx, m, "eos_id", 0, 0, 2147483647LL, &s->eos_id) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_string(ctx, m, "golden", 0, &s->golden_arg) < 0;
    if (!bad && s->num_return > s->num_beams) {
        gf_y_error(ctx, gf_y_get(ctx, m, "num_return_sequences", 0),
                   "'num_return_sequences' %lld is more than num_beams %lld", s->num_return, s->num_beams);
        bad = 1;
    }
    if (!bad && !isfinite(s->length_penalty)) {
        gf_y_error(ctx, gf_y_get(ctx, m, "length_penalty", 0), "'length_penalty' must be finite");
        bad = 1;
    }
    if (!bad && (!(s->atol >= 0) || !isfinite(s->atol))) {
        gf_y_error(ctx, gf_y_get(ctx, m, "atol", 0), "'atol' must be a finite number >= 0");
        bad = 1;
    }
    if (!bad && s->golden_arg && !s->golden_arg[0]) {
        gf_y_error(ctx, gf_y_get(ctx, m, "golden", 0), "'golden' is empty (omit it for golden/beam/<id>.safetensors)");
        bad = 1;
    }
    if (!bad && c->id) {
        s->golden = gf_golden_path_resolve(ctx, s->golden_arg, "golden/beam", c->id);
        if (!s->golden)
            bad = 1;
    }
    return bad ? -1 : 0;
}

/* ---- the golden: tokens.<r> I64 (P + n_r), scores F64 (R) ---- */

typedef struct beam_golden {
    gf_safetensors *st;
    int32_t R;
    int32_t *n_tokens; /* (R) */
    int32_t **tokens;  /* (R) */
    double *scores;    /* (R) */
} beam_golden;

static void golden_free(beam_golden *g)
{
    for (int32_t r = 0; g->tokens && r < g->R; r++)
        free(g->tokens[r]);
    free(g->tokens);
    free(g->n_tokens);
    free(g->scores);
    gf_safetensors_close(g->st);
    memset(g, 0, sizeof *g);
}

static gf_status golden_read(const char *path, int32_t V, beam_golden *g)
{
    memset(g, 0, sizeof *g);
    gf_status st = gf_safetensors_open(path, &g->st);
    if (st != GF_OK)
        return st;
    const char *fmt = gf_safetensors_meta(g->st, "format"), *rows = gf_safetensors_meta(g->st, "rows");
    if (!fmt || strcmp(fmt, BEAM_GOLDEN_FORMAT))
        return gf_error_set(GF_E_FORMAT, "%s: format %s, expected %s", path, fmt ? fmt : "(none)", BEAM_GOLDEN_FORMAT);
    char hex[65];
    const char *want = gf_safetensors_meta(g->st, "data_sha256");
    if ((st = gf_golden_data_sha256(g->st, hex)) != GF_OK)
        return st;
    if (!want || strcmp(want, hex))
        return gf_error_set(GF_E_FORMAT, "%s: data_sha256 mismatch: the metadata says %s, the tensor data hashes to %s",
                            path, want ? want : "(none)", hex);
    const gf_st_tensor *sc = gf_safetensors_find(g->st, "scores");
    char *end = NULL;
    long R = rows ? strtol(rows, &end, 10) : 0;
    if (!sc || sc->dtype != GF_DT_F64 || sc->ndim != 1 || !rows || *end || R < 1 || sc->shape[0] != R ||
        gf_safetensors_count(g->st) != (size_t)R + 1)
        return gf_error_set(GF_E_FORMAT,
                            "%s: expected 'rows' R >= 1, tensors tokens.0 .. tokens.<R-1> and scores F64 (R)", path);
    g->R = (int32_t)R;
    g->n_tokens = calloc((size_t)R, sizeof *g->n_tokens);
    g->tokens = calloc((size_t)R, sizeof *g->tokens);
    g->scores = malloc((size_t)R * sizeof *g->scores);
    if (!g->n_tokens || !g->tokens || !g->scores)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    memcpy(g->scores, sc->data, (size_t)R * sizeof *g->scores);
    for (int32_t r = 0; r < g->R; r++) {
        char name[32];
        snprintf(name, sizeof name, "tokens.%d", r);
        const gf_st_tensor *t = gf_safetensors_find(g->st, name);
        if (!t || t->dtype != GF_DT_I64 || t->ndim != 1 || t->shape[0] < 1 || t->shape[0] > (1 << 20))
            return gf_error_set(GF_E_FORMAT, "%s: tensor %s missing or not I64 (n)", path, name);
        g->n_tokens[r] = (int32_t)t->shape[0];
        if (!(g->tokens[r] = malloc((size_t)t->shape[0] * sizeof(int32_t))))
            return gf_error_set(GF_E_NOMEM, "out of memory");
        for (int64_t i = 0; i < t->shape[0]; i++) {
            int64_t v;
            memcpy(&v, (const char *)t->data + i * 8, 8);
            if (v < 0 || v >= V)
                return gf_error_set(GF_E_FORMAT, "%s: %s[%lld] = %lld outside the vocabulary (%d)", path, name,
                                    (long long)i, (long long)v, V);
            g->tokens[r][i] = (int32_t)v;
        }
    }
    return GF_OK;
}

/* The search's parameters as the golden's "beam" record (canonical JSON). */
static char *beam_record(const gf_beam_params *p)
{
    json_t *o = json_pack("{s:s, s:i, s:f, s:i, s:i, s:i}", "early_stopping", k_early[p->early_stopping], "eos_id",
                          p->eos_id, "length_penalty", p->length_penalty, "max_new_tokens", p->max_new_tokens,
                          "num_beams", p->num_beams, "num_return_sequences", p->num_return);
    char *s = o ? gf_canonical_json(o) : NULL;
    json_decref(o);
    return s;
}

static json_t *rows_json(int32_t n, int32_t *const *tokens, const int32_t *n_tokens, int32_t P)
{
    json_t *a = json_array();
    for (int32_t r = 0; r < n; r++)
        json_array_append_new(a, gf_json_ints(tokens[r] + P, (size_t)(n_tokens[r] > P ? n_tokens[r] - P : 0)));
    return a;
}

static void run_beam(const gf_case *c, gf_krun *k)
{
    const beam_spec *s = c->spec;
    gf_engine *e = k->session->engine;
    const gf_model_config *cfg = gf_engine_config(e);
    char *path = k->golden_dir ? NULL : strdup(s->golden);
    if (k->golden_dir) {
        size_t n = strlen(k->golden_dir) + strlen(c->id) + 16;
        if ((path = malloc(n)))
            snprintf(path, n, "%s/%s.safetensors", k->golden_dir, c->id);
    }
    int32_t *prompt = NULL, P = 0;
    beam_golden g = {0};
    gf_beam_result res = {0};
    char hint[1400], re[600];
    snprintf(re, sizeof re, "^%s$", c->id);
    snprintf(hint, sizeof hint,
             "make it with `.venv/bin/python tools/reference/beam_golden.py --genfence build/genfence "
             "--filter '%s' %s`",
             re, c->file);
    if (!path) {
        gf_k_fail(k, "out of memory");
        return;
    }
    gf_beam_params bp = {.num_beams = (int32_t)s->num_beams,
                         .num_return = (int32_t)s->num_return,
                         .max_new_tokens = (int32_t)s->max_new,
                         .length_penalty = s->length_penalty,
                         .early_stopping = s->early,
                         .eos_id = s->eos_id == -2 ? cfg->eos_id : (int32_t)s->eos_id};
    gf_status st = golden_read(path, cfg->vocab_size, &g);
    if (st == GF_E_NOT_FOUND) {
        gf_k_error(k, "no golden at %s: %s", path, hint);
        goto done;
    }
    if (st != GF_OK) {
        gf_k_error(k, "%s", gf_error_msg());
        goto done;
    }
    {
        json_t *o = json_object();
        json_object_set_new(o, "path", json_string(path));
        static const char *const keys[] = {"generator",  "generator_version", "torch_version", "created",  "case_hash",
                                           "model_hash", "data_sha256",       "beam",          "decoding", "fault",
                                           NULL};
        for (int i = 0; keys[i]; i++) {
            const char *v = gf_safetensors_meta(g.st, keys[i]);
            if (v)
                json_object_set_new(o, keys[i], json_string(v));
        }
        gf_k_metric_json(k, "golden", o);
    }
    char case_hex[65], model_hex[65];
    if (gf_case_hash_of(c, case_hex) != GF_OK || gf_model_hash(c->model, model_hex) != GF_OK) {
        gf_k_error(k, "case or model hash: %s", gf_error_msg());
        goto done;
    }
    const char *g_case = gf_safetensors_meta(g.st, "case_hash"), *g_model = gf_safetensors_meta(g.st, "model_hash");
    const char *g_beam = gf_safetensors_meta(g.st, "beam");
    char *now = beam_record(&bp);
    int case_ok = g_case && !strcmp(g_case, case_hex), model_ok = g_model && !strcmp(g_model, model_hex);
    int beam_ok = now && g_beam && !strcmp(now, g_beam);
    gf_k_check(k, case_ok, "golden case hash", "golden %s, case %s", g_case ? g_case : "(none)", case_hex);
    gf_k_check(k, model_ok, "golden model hash", "golden %s, model %s", g_model ? g_model : "(none)", model_hex);
    gf_k_check(k, beam_ok, "golden beam record", "golden %s, case %s", g_beam ? g_beam : "(none)", now ? now : "?");
    free(now);
    if (!case_ok || !model_ok || !beam_ok) {
        gf_k_stale(k, "golden %s is stale (%s changed); re%s", path,
                   !case_ok    ? "the case"
                   : !model_ok ? "the model"
                               : "the search's parameters",
                   hint);
        goto done;
    }
    if ((st = gf_prompt_tokens(k->session, &s->prompt, &prompt, &P)) != GF_OK) {
        gf_k_error(k, "%s", gf_error_msg());
        goto done;
    }
    gf_k_metric_int(k, "prompt_tokens", P);
    for (int32_t r = 0; r < g.R; r++)
        if (g.n_tokens[r] <= P || memcmp(g.tokens[r], prompt, (size_t)P * sizeof *prompt)) {
            gf_k_error(k, "golden %s: sequence %d does not start with the case's %d prompt tokens", path, r, P);
            goto done;
        }
    st = gf_beam_search(e, prompt, P, &bp, &res);
    if (st != GF_OK) {
        gf_k_status(k, st, "beam search");
        goto done;
    }
    gf_k_metric_int(k, "forward_calls", res.steps);
    gf_k_metric_json(k, "beams", rows_json(res.n, res.tokens, res.n_tokens, P));
    gf_k_metric_json(k, "golden_beams", rows_json(g.R, g.tokens, g.n_tokens, P));
    json_t *sc = json_array(), *gsc = json_array(), *tol = json_array();
    int tokens_ok = res.n == g.R, scores_ok = res.n == g.R;
    char why_t[600] = "", why_s[600] = "";
    if (res.n != g.R)
        snprintf(why_t, sizeof why_t, "%d sequences returned, the golden holds %d", res.n, g.R);
    double worst = 0;
    for (int32_t r = 0; r < res.n && r < g.R; r++) {
        /* the score rule: atol per generated token's log-probability, summed
         * over generated_len and divided by the same length penalty, plus
         * one float32 rounding of HF's score (2^-23 relative) */
        const int32_t n = res.generated_len[r];
        const double t = s->atol * n / pow((double)n, bp.length_penalty) + ldexp(fabs(g.scores[r]), -23);
        const double d = fabs(res.scores[r] - g.scores[r]);
        json_array_append_new(sc, json_real(res.scores[r]));
        json_array_append_new(gsc, json_real(g.scores[r]));
        json_array_append_new(tol, json_real(t));
        worst = d > worst || isnan(d) ? d : worst;
        if (tokens_ok && (res.n_tokens[r] != g.n_tokens[r] ||
                          memcmp(res.tokens[r], g.tokens[r], (size_t)g.n_tokens[r] * sizeof(int32_t)))) {
            int32_t i = P;
            while (i < res.n_tokens[r] && i < g.n_tokens[r] && res.tokens[r][i] == g.tokens[r][i])
                i++;
            tokens_ok = 0;
            snprintf(why_t, sizeof why_t, "sequence %d differs at generated token %d: %d, the golden's %d", r, i - P,
                     i < res.n_tokens[r] ? res.tokens[r][i] : -1, i < g.n_tokens[r] ? g.tokens[r][i] : -1);
        }
        if (scores_ok && !(d <= t)) {
            scores_ok = 0;
            snprintf(why_s, sizeof why_s, "sequence %d: score %.9g, the golden's %.9g: |delta| %.3g > %.3g", r,
                     res.scores[r], g.scores[r], d, t);
        }
    }
    gf_k_metric_json(k, "scores", sc);
    gf_k_metric_json(k, "golden_scores", gsc);
    gf_k_metric_json(k, "score_tolerance", tol);
    gf_k_metric(k, "max_abs_delta", worst);
    gf_k_metric_json(k, "min_rank_gap", isfinite(res.min_gap) ? json_real(res.min_gap) : json_null());
    gf_k_metric_int(k, "min_rank_gap_step", res.min_gap_step);
    gf_k_metric_json(k, "score_rule",
                     json_string("|score - HF's| <= atol x generated_len / generated_len ^ "
                                 "length_penalty + 2^-23 x |HF's score|"));
    gf_k_check(k, tokens_ok, "beams equal transformers'", "%s",
               tokens_ok ? "every returned sequence, token for token" : why_t);
    gf_k_check(k, scores_ok, "beam scores within tolerance", "%s",
               scores_ok ? "every sequence_score (max |delta| in max_abs_delta)" : why_s);
done:
    gf_beam_result_clear(&res);
    golden_free(&g);
    free(prompt);
    free(path);
}

static const char *beam_served_skip(const gf_case *c)
{
    (void)c;
    return "beam search sums full log-softmax rows over every candidate token: a served backend reports only its "
           "top-k log-probabilities";
}

const gf_kind_def gf_kind_beam_search = {
    .name = "beam_search",
    .summary = "the engine's beam search (transformers 4.47.1's rules) on the backend equals transformers' "
               "generate(num_beams=...): beams token for token, scores within tolerance",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .hashes_model = 1,
    .defers_to_statistical = 1,
    .served_skip = beam_served_skip,
    .parse = parse_beam,
    .free_spec = beam_free,
    .run = run_beam,
};
