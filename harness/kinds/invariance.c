/* invariance: one axis (batch size, row position, mixed lengths, threads,
 * prefill split, repeats, shared prefixes) swept against the same reference
 * call; the probe row's logits are bitwise equal, within the margin gate, or
 * not invariant, judged against the level the backend declares for the axis
 * (gf_backend_info.invariance). A case names its negative control, a faulty
 * test backend that must fail it; run on ref, the case runs the control too,
 * so a case that cannot fail says so. Measurements: invariance_axes.c. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "genfence/engine.h"
#include "invariance.h"
#include "keys.h"
#include "record.h"

#ifndef GENFENCE_TEST_BACKEND_DIR
#define GENFENCE_TEST_BACKEND_DIR ""
#endif

static void inv_free(void *p)
{
    inv_spec *s = p;
    if (s) {
        free(s->probe.text);
        free(s->probe.ids);
        gf_prompts_free(s->others, s->n_others);
        free(s->sweep);
        free(s->control);
    }
    free(s);
}

static const char *const k_axes[] = {
#define GF_INV_AXIS_WORD(name, what) #name,
    GF_INV_AXIS_LIST(GF_INV_AXIS_WORD)
#undef GF_INV_AXIS_WORD
        NULL};

static int parse_inv(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    inv_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->axis = -1;
    s->steps = 8;
    s->repeats = 20;
    s->processes = 2;
    s->batch = 0;
    s->atol = GF_ATOL_DEFAULT;
    int bad = gf_y_enum(ctx, m, "axis", GF_Y_REQUIRED, k_axes, &s->axis) < 0;
    bad |= gf_y_one_prompt(ctx, m, &s->probe) < 0;
    bad |= gf_y_prompts(ctx, m, "prompts", 0, &s->others, &s->n_others) < 0;
    bad |= gf_y_ints(ctx, m, "sweep", 0, 0, 1 << 16, 1, &s->sweep, &s->n_sweep) < 0;
    bad |= gf_y_int(ctx, m, "batch", 0, 1, 64, &s->batch) < 0;
    bad |= gf_y_int(ctx, m, "steps", 0, 1, 1 << 10, &s->steps) < 0;
    bad |= gf_y_int(ctx, m, "repeats", 0, 2, 1000, &s->repeats) < 0;
    bad |= gf_y_int(ctx, m, "processes", 0, 0, 16, &s->processes) < 0;
    bad |= gf_y_int(ctx, m, "prefix_tokens", 0, 1, 1 << 20, &s->prefix) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_gate(ctx, m, "gate", &s->gate) < 0;
    bad |= gf_y_string(ctx, m, "control", 0, &s->control) < 0;
    if (bad)
        return -1;
    if (!(s->atol >= 0)) {
        gf_y_error(ctx, gf_y_get(ctx, m, "atol", 0), "'atol' must be >= 0");
        return -1;
    }
    if (s->others && s->axis != GF_INV_mixed) {
        gf_y_error(ctx, gf_y_get(ctx, m, "prompts", 0), "'prompts' (co-resident rows) is for axis mixed");
        return -1;
    }
    const int sweeps =
        s->axis == GF_INV_batch || s->axis == GF_INV_position || s->axis == GF_INV_threads || s->axis == GF_INV_split;
    if (s->sweep && !sweeps) {
        gf_y_error(ctx, gf_y_get(ctx, m, "sweep", 0), "'sweep' is for axes batch, position, threads and split");
        return -1;
    }
    for (size_t i = 0; s->sweep && i < s->n_sweep; i++)
        if (s->sweep[i] < (s->axis == GF_INV_position ? 0 : 1)) {
            gf_y_error(ctx, gf_y_get(ctx, m, "sweep", 0), "'sweep' entry %d: %s", s->sweep[i],
                       s->axis == GF_INV_position ? "rows count from 0" : "must be >= 1");
            return -1;
        }
    if (s->batch && s->axis != GF_INV_position && s->axis != GF_INV_threads) {
        gf_y_error(ctx, gf_y_get(ctx, m, "batch", 0), "'batch' is for axes position and threads");
        return -1;
    }
    if (!s->batch)
        s->batch = s->axis == GF_INV_position ? 8 : 4;
    if (s->control && !s->control[0]) {
        gf_y_error(ctx, gf_y_get(ctx, m, "control", 0), "'control' is empty");
        return -1;
    }
    return 0;
}

/* The tokens every measurement shares: the probe, and (mixed) the others. */
typedef struct inv_tokens {
    int32_t *probe, n_probe;
    int32_t **others, *other_lens, n_others;
} inv_tokens;

static void tokens_free(inv_tokens *t)
{
    free(t->probe);
    for (int32_t i = 0; t->others && i < t->n_others; i++)
        free(t->others[i]);
    free(t->others);
    free(t->other_lens);
}

/* Derived co-resident rows for mixed when the case gives none: one shorter
 * than the probe and one longer, of filler tokens. */
static gf_status tokens_get(gf_krun *k, const inv_spec *s, inv_tokens *t)
{
    memset(t, 0, sizeof *t);
    const gf_model_config *cfg = gf_engine_config(k->session->engine);
    gf_status st = gf_prompt_tokens(k->session, &s->probe, &t->probe, &t->n_probe);
    if (st != GF_OK)
        return st;
    if (t->n_probe < 1)
        return gf_error_set(GF_E_INVALID_ARG, "the probe prompt has no tokens");
    const int32_t room = cfg->n_positions - (int32_t)s->steps;
    for (int32_t i = 0; i < t->n_probe; i++)
        if (t->probe[i] < 0 || t->probe[i] >= cfg->vocab_size)
            return gf_error_set(GF_E_INVALID_ARG, "probe token %d at %d is outside the vocabulary (%d)", t->probe[i], i,
                                cfg->vocab_size);
    if (t->n_probe > room)
        return gf_error_set(GF_E_INVALID_ARG, "the probe's %d tokens + %lld steps exceed the model's %d positions",
                            t->n_probe, s->steps, cfg->n_positions);
    if (s->axis != GF_INV_mixed)
        return GF_OK;
    t->n_others = s->n_others ? (int32_t)s->n_others : 2;
    t->others = calloc((size_t)t->n_others, sizeof *t->others);
    t->other_lens = calloc((size_t)t->n_others, sizeof *t->other_lens);
    if (!t->others || !t->other_lens)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    for (int32_t i = 0; i < t->n_others; i++) {
        if (s->n_others) {
            st = gf_prompt_tokens(k->session, &s->others[i], &t->others[i], &t->other_lens[i]);
            if (st != GF_OK)
                return st;
        } else {
            int32_t n = i == 0 ? (t->n_probe + 2) / 3 : 2 * t->n_probe + 3;
            n = n < room ? n : room;
            t->others[i] = malloc((size_t)n * sizeof **t->others);
            if (!t->others[i])
                return gf_error_set(GF_E_NOMEM, "out of memory");
            for (int32_t j = 0; j < n; j++)
                t->others[i][j] = (t->probe[j % t->n_probe] + 101 * (i + 1)) % cfg->vocab_size;
            t->other_lens[i] = n;
        }
        if (t->other_lens[i] < 1 || t->other_lens[i] > room)
            return gf_error_set(GF_E_INVALID_ARG, "co-resident prompt %d: %d tokens (1..%d with %lld steps)", i,
                                t->other_lens[i], room, s->steps);
    }
    return GF_OK;
}

/* The variant that decides the axis's level: the first not invariant one,
 * or the within-gate one farthest from bitwise. */
static const inv_variant *deciding(const inv_result *r, gf_inv_level level)
{
    const inv_variant *w = NULL;
    for (int i = 0; i < r->n; i++) {
        const inv_variant *v = &r->v[i];
        if (v->level != level)
            continue;
        if (level == GF_INV_LEVEL_NONE)
            return v;
        if (!w || v->max_delta > w->max_delta)
            w = v;
    }
    return w;
}

/* "bitwise: 16 variants" / "within gate: max |delta| ..." / "not invariant: ..." */
static void describe(char *buf, size_t cap, const inv_result *r, gf_inv_level measured, int distinct)
{
    const inv_variant *w = deciding(r, measured);
    if (measured == GF_INV_LEVEL_BITWISE || !w) {
        snprintf(buf, cap, "bitwise: all %d variant%s equal the reference's logits bit for bit", r->n,
                 r->n == 1 ? "" : "s");
        return;
    }
    double worst = 0;
    for (int i = 0; i < r->n; i++)
        worst = r->v[i].max_delta > worst ? r->v[i].max_delta : worst;
    if (measured == GF_INV_LEVEL_GATED)
        snprintf(buf, cap,
                 "within gate: max |delta| %.3g from bitwise (%s, first differing %s %d); tokens gated equal, %d "
                 "distinct completion%s",
                 worst, w->label, w->teacher_forced ? "position" : "step", w->first_diff, distinct,
                 distinct == 1 ? "" : "s");
    else
        snprintf(buf, cap, "not invariant: %s, first differing %s %d, max |delta| %.3g (%s), %d distinct completions",
                 w->label, w->teacher_forced ? "position" : "step", w->first_diff, worst,
                 w->cmp.first_unexcused >= 0 ? "a token past the gate" : "past atol", distinct);
}

static json_t *variants_json(const inv_result *r)
{
    json_t *a = json_array();
    for (int i = 0; i < r->n; i++) {
        const inv_variant *v = &r->v[i];
        json_array_append_new(
            a, json_pack("{s:s, s:s, s:b, s:i, s:o, s:s, s:o}", "variant", v->label, "against", r->ref_label[v->ref],
                         "bitwise", v->bitwise, "first_differing_step", v->first_diff, "max_abs_delta",
                         isfinite(v->max_delta) ? json_real(v->max_delta) : json_null(), "measured",
                         gf_inv_level_verdict(v->level), "tokens", gf_json_ints(v->tr.tokens, (size_t)v->tr.n)));
    }
    return a;
}

/* The control's path: GENFENCE_TEST_BACKEND_DIR (the environment's, else
 * the build tree's tests/backends) / libgenfence_test_<name, '-' as '_'>.so. */
static void control_path(const char *name, char *out, size_t cap)
{
    const char *dir = getenv("GENFENCE_TEST_BACKEND_DIR");
    if (!dir || !dir[0])
        dir = GENFENCE_TEST_BACKEND_DIR;
    int n = snprintf(out, cap, "%s/libgenfence_test_", dir);
    for (const char *p = name; *p && n + 4 < (int)cap; p++)
        out[n++] = *p == '-' ? '_' : *p;
    snprintf(out + n, cap - (size_t)n, ".so");
}

/* The negative control on this case: it must measure below what it declares. */
static void run_control(const gf_case *c, gf_krun *k, const inv_spec *s, const inv_tokens *tk)
{
    char path[4200];
    control_path(s->control, path, sizeof path);
    const char *axis = gf_inv_axis_name((gf_inv_axis)s->axis);
    if (access(path, R_OK) != 0) {
        gf_k_metric_json(k, "control",
                         json_pack("{s:s, s:b, s:s}", "backend", s->control, "ran", 0, "why", "not built"));
        gf_k_metric_json(k, "control_skipped",
                         json_sprintf("control %s not run: %s is not built here (a build "
                                      "tree's tests/backends; GENFENCE_TEST_BACKEND_DIR)",
                                      s->control, path));
        return;
    }
    gf_session cs;
    gf_status st = gf_session_open(&cs, c->model, path, k->threads, GF_SESSION_TOK_NONE);
    if (st != GF_OK) {
        gf_k_fail(k, "negative control %s: cannot open %s: %s", s->control, path, gf_error_msg());
        return;
    }
    gf_inv_decl d;
    char text[256], err[512];
    if (gf_inv_declared(&cs, k->threads, &d, text, sizeof text, err, sizeof err) < 0) {
        gf_k_fail(k, "negative control %s: %s", s->control, err);
        gf_session_close(&cs);
        return;
    }
    inv_target tg = {.spec = path,
                     .model = c->model,
                     .threads = k->threads,
                     .session = &cs,
                     .probe = tk->probe,
                     .n_probe = tk->n_probe,
                     .others = tk->others,
                     .other_lens = tk->other_lens,
                     .n_others = tk->n_others,
                     .until_differs = 1};
    inv_result r;
    st = inv_measure(s, &tg, &r);
    gf_backend_info bi;
    gf_backend_options bo = gf_registry_options(&cs.backend, k->threads);
    gf_backend_describe(cs.backend.ops, &bo, &bi);
    char why[768] = "";
    int caught;
    gf_inv_level measured = GF_INV_LEVEL_NONE;
    int distinct = 0;
    if (st != GF_OK) { /* a control whose call fails has failed the case too */
        caught = 1;
        snprintf(why, sizeof why, "its call failed: %s", gf_error_msg());
    } else {
        measured = inv_judge(&r, &s->gate, bi.dtype, s->atol, &distinct);
        caught = measured < d.level[s->axis];
        describe(why, sizeof why, &r, measured, distinct);
    }
    gf_k_metric_json(k, "control",
                     json_pack("{s:s, s:b, s:s, s:s, s:b, s:s}", "backend", s->control, "ran", 1, "declared",
                               gf_inv_level_word(d.level[s->axis]), "measured",
                               st == GF_OK ? gf_inv_level_verdict(measured) : "call failed", "caught", caught, "detail",
                               why));
    gf_k_check(k, caught, "negative control fails the case",
               caught ? "control %s (declares %s %s) fails it: %s"
                      : "this case cannot fail: its negative control %s (declares %s %s) passed: %s",
               s->control, axis, gf_inv_level_word(d.level[s->axis]), why);
    inv_result_clear(&r);
    gf_session_close(&cs);
}

static void run_inv(const gf_case *c, gf_krun *k)
{
    const inv_spec *s = c->spec;
    const char *axis = gf_inv_axis_name((gf_inv_axis)s->axis);
    inv_tokens tk;
    gf_status st = tokens_get(k, s, &tk);
    if (st != GF_OK) {
        gf_k_error(k, "%s", gf_error_msg());
        tokens_free(&tk);
        return;
    }
    gf_k_metric_json(k, "axis", json_string(axis));
    gf_k_metric_int(k, "prompt_tokens", tk.n_probe);
    gf_inv_decl d;
    char text[256], err[512];
    if (gf_inv_declared(k->session, k->threads, &d, text, sizeof text, err, sizeof err) < 0) {
        gf_k_fail(k, "the backend's info.invariance: %s", err); /* its own text: the backend's fault */
        tokens_free(&tk);
        return;
    }
    const gf_inv_level want = d.level[s->axis];
    gf_k_metric_json(k, "declared", json_string(gf_inv_level_word(want)));
    gf_k_metric_json(k, "declaration", text[0] ? json_string(text) : json_null());
    inv_target tg = {.spec = k->backend,
                     .model = c->model,
                     .threads = k->threads,
                     .session = k->session,
                     .probe = tk.probe,
                     .n_probe = tk.n_probe,
                     .others = tk.others,
                     .other_lens = tk.other_lens,
                     .n_others = tk.n_others};
    inv_result r;
    st = inv_measure(s, &tg, &r);
    if (st != GF_OK) {
        gf_k_status(k, st, "invariance");
        inv_result_clear(&r);
        tokens_free(&tk);
        return;
    }
    int distinct = 0;
    const gf_inv_level got = inv_judge(&r, &s->gate, k->dtype, s->atol, &distinct);
    gf_k_metric_json(k, "reference", json_string(r.what));
    gf_k_metric_json(k, "measured", json_string(gf_inv_level_verdict(got)));
    gf_k_metric_int(k, "distinct_completions", distinct);
    gf_k_metric_json(k, "variants", variants_json(&r));
    if (r.skipped[0])
        gf_k_metric_json(k, "not_run", json_string(r.skipped));
    /* the gate's numbers of every variant that is not bitwise, where a gate is promised */
    const inv_variant *first_bad = NULL;
    for (int i = 0; want != GF_INV_LEVEL_NONE && i < r.n; i++) {
        const inv_variant *v = &r.v[i];
        if (v->bitwise)
            continue;
        char label[128];
        snprintf(label, sizeof label, "%s/%s", axis, v->label);
        gf_k_compare(k, label, &v->cmp);
        if (!first_bad && v->level < want)
            first_bad = v;
    }
    if (first_bad && first_bad->first_diff >= 0) {
        const int32_t V = first_bad->tr.V, at = first_bad->first_diff;
        gf_k_write_logits(k, axis, at, r.refs[first_bad->ref].logits + (size_t)at * V, r.ref_label[first_bad->ref],
                          first_bad->tr.logits + (size_t)at * V, first_bad->label, V);
    }
    char why[768];
    describe(why, sizeof why, &r, got, distinct);
    gf_k_check(k, got >= want, "invariance as declared", "%s: declared %s%s, measured %s%s%s", axis,
               gf_inv_level_word(want), d.said[s->axis] ? "" : " (not said: gated)", why,
               r.skipped[0] ? "; not run: " : "", r.skipped);
    if (s->control && k->backend_name && !strcmp(k->backend_name, "ref"))
        run_control(c, k, s, &tk);
    inv_result_clear(&r);
    tokens_free(&tk);
}

const gf_kind_def gf_kind_invariance = {
    .name = "invariance",
    .summary = "one axis (batch, position, mixed, threads, split, repeat, prefix) against the same call: bitwise, "
               "within gate or not invariant, judged against the backend's declaration",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .parse = parse_inv,
    .free_spec = inv_free,
    .run = run_inv,
};
