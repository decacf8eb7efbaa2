/* golden_generation: a backend teacher-forced through a golden's tokens,
 * step by step against the golden's logits, gated like every comparison
 * (docs/goldens.md). A golden whose case or model hash no longer matches is
 * stale and never used; a missing or corrupt one is an error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "golden_case.h"
#include "hash.h"
#include "slot.h"
#include "sys.h"

/* ---- keys ---- */

static void spec_free(void *p)
{
    gf_golden_spec *s = p;
    if (s) {
        gf_prompts_free(s->prompts, s->n_prompts);
        free(s->golden_arg);
        free(s->golden);
    }
    free(s);
}

static int parse_golden(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    gf_golden_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->max_new = 64;
    s->atol = GF_ATOL_DEFAULT;
    s->sampler = gf_sampler_greedy();
    int bad = gf_y_prompts(ctx, m, "prompts", GF_Y_REQUIRED, &s->prompts, &s->n_prompts) < 0;
    bad |= gf_y_int(ctx, m, "max_new_tokens", 0, 1, 1 << 20, &s->max_new) < 0;
    bad |= gf_y_sampler(ctx, m, &s->sampler) < 0;
    bad |= gf_y_double(ctx, m, "atol", 0, &s->atol) < 0;
    bad |= gf_y_gate(ctx, m, "gate", &s->gate) < 0;
    bad |= gf_y_string(ctx, m, "golden", 0, &s->golden_arg) < 0;
    if (!bad && (!(s->atol >= 0) || !isfinite(s->atol))) {
        gf_y_error(ctx, gf_y_get(ctx, m, "atol", 0), "'atol' must be a finite number >= 0");
        bad = 1;
    }
    /* gf_y_sampler has validated the sampler parameters ("invalid sampler: ...") */
    if (!bad && s->golden_arg && !s->golden_arg[0]) {
        gf_y_error(ctx, gf_y_get(ctx, m, "golden", 0), "'golden' is empty (omit it for golden/<id>.safetensors)");
        bad = 1;
    }
    if (!bad && c->id) {
        s->golden = gf_golden_path_resolve(ctx, s->golden_arg, "golden", c->id);
        if (!s->golden)
            bad = 1;
    }
    return bad ? -1 : 0;
}

/* ---- the run ---- */

typedef struct capture {
    float *logits;         /* (N, B, V) */
    int32_t *chosen;       /* (N, B): the sampler's own choice on the backend's logits */
    double *chosen_margin; /* (N, B) */
    int32_t B, V, N;
    gf_krun *k; /* with k->sample_ops: every step's rows through the backend's slot too */
    const gf_sampler_params *sampler;
    const uint64_t *seq_ids; /* (B) */
} capture;

static gf_status capture_step(void *user, const gf_step_info *info)
{
    capture *c = user;
    if (info->step >= c->N)
        return GF_OK;
    memcpy(c->logits + (size_t)info->step * c->B * c->V, info->logits, (size_t)c->B * c->V * sizeof(float));
    for (int32_t b = 0; b < c->B; b++) {
        c->chosen[(size_t)info->step * c->B + b] = info->results[b].token;
        c->chosen_margin[(size_t)info->step * c->B + b] = info->results[b].margin;
    }
    if (c->k && c->k->sample_ops) { /* the engine's choice per row against the backend's slot, same seq id and step */
        char what[64];
        snprintf(what, sizeof what, "generation step %d", info->step);
        gf_k_slot_rows(c->k, what, info->logits, c->B, c->V, c->sampler, c->seq_ids, (uint64_t)info->step,
                       c->chosen + (size_t)info->step * c->B);
    }
    return GF_OK;
}

static void provenance_metrics(gf_krun *k, const gf_golden *g, const char *path)
{
    json_t *o = json_object();
    json_object_set_new(o, "path", json_string(path));
    static const char *const keys[] = {"generator",  "generator_version", "torch_version", "backend",
                                       "machine",    "genfence_commit",   "created",       "case_hash",
                                       "model_hash", "data_sha256",       "sampler",       "seed",
                                       NULL};
    for (int i = 0; keys[i]; i++) {
        const char *v = gf_golden_meta(g, keys[i]);
        if (v)
            json_object_set_new(o, keys[i], json_string(v));
    }
    gf_k_metric_json(k, "golden", o);
}

/* A served backend's row (backends/http): the top-k log-probabilities at
 * their ids, every other entry the same lower fill. Its delta from a golden
 * row is the largest |log_softmax(ref)[v] - test[v]| over the listed ids (a
 * log-probability is the logit less the row's log-sum-exp, so logits
 * themselves cannot be compared). (V) rows. */
static double served_delta(const float *ref, const float *test, int32_t V)
{
    double m = -INFINITY, fill = INFINITY, sum = 0, worst = 0;
    for (int32_t v = 0; v < V; v++) {
        m = ref[v] > m ? ref[v] : m;
        fill = test[v] < fill ? test[v] : fill;
    }
    for (int32_t v = 0; v < V; v++)
        sum += exp((double)ref[v] - m);
    double lse = m + log(sum);
    for (int32_t v = 0; v < V; v++)
        if (test[v] > fill) {
            double d = fabs(((double)ref[v] - lse) - (double)test[v]);
            worst = d > worst || isnan(d) ? d : worst;
        }
    return worst;
}

/* The tolerance rule (gf_golden_atol), recorded as "atol_rule". */
static double golden_atol(const gf_golden *g, double case_atol, gf_krun *k)
{
    json_t *rule = NULL;
    double atol = gf_golden_atol(g, case_atol, &rule);
    gf_k_metric_json(k, "atol_rule", rule);
    return atol;
}

static void run_golden(const gf_case *c, gf_krun *k)
{
    const gf_golden_spec *s = c->spec;
    gf_engine *e = k->session->engine;
    const int32_t V = gf_engine_config(e)->vocab_size;
    const int32_t B = (int32_t)s->n_prompts, N = (int32_t)s->max_new;
    char *path = gf_golden_path_for(c, k->golden_dir);
    gf_golden *g = NULL;
    int32_t **prompts = NULL, *lens = NULL;
    const int32_t **forced = NULL;
    uint64_t *seq_ids = NULL;
    gf_generation *gen = NULL;
    capture cap = {0};
    char hint[2048];
    /* a backend with lower-precision weights that a statistical case judges
     * was skipped by the plan (harness/run/plan.c); one that none judges is
     * judged here, saying why */
    if (k->stat_note)
        gf_k_metric_json(k, "statistical_tier", json_string(k->stat_note));
    gf_golden_make_hint(c, k->golden_dir, hint, sizeof hint);
    if (!path) {
        gf_k_fail(k, "out of memory");
        return;
    }
    gf_k_slot_attach(k); /* a backend with a sample slot samples every step too */
    gf_k_note_sampler(k);
    gf_k_metric_json(k, "sampler_params", gf_sampler_json(&s->sampler));
    if (s->sampler.temperature > 0)
        gf_k_seed(k, "sampler", s->sampler.seed);

    /* the golden: there, intact, and made for this case and this model */
    gf_status st = gf_golden_read(path, &g);
    if (st == GF_E_NOT_FOUND) {
        gf_k_error(k, "no golden at %s: %s", path, hint);
        goto done;
    }
    if (st != GF_OK) {
        gf_k_error(k, "%s", gf_error_msg());
        goto done;
    }
    provenance_metrics(k, g, path);
    char case_hex[65], model_hex[65];
    if (gf_case_hash_of(c, case_hex) != GF_OK) {
        gf_k_error(k, "case hash: %s", gf_error_msg());
        goto done;
    }
    if (gf_model_hash(c->model, model_hex) != GF_OK) {
        gf_k_error(k, "model hash of %s: %s", c->model_arg, gf_error_msg());
        goto done;
    }
    gf_k_metric_json(k, "case_hash", json_string(case_hex));
    gf_k_metric_json(k, "model_hash", json_string(model_hex));
    const char *g_case = gf_golden_meta(g, "case_hash"), *g_model = gf_golden_meta(g, "model_hash");
    int case_ok = !strcmp(g_case, case_hex), model_ok = !strcmp(g_model, model_hex);
    gf_k_check(k, case_ok, "golden case hash", "golden %s, case %s", g_case, case_hex);
    gf_k_check(k, model_ok, "golden model hash", "golden %s, model %s", g_model, model_hex);
    if (!case_ok || !model_ok) {
        char why[1400] = "";
        if (!case_ok)
            snprintf(why, sizeof why, "case hash %s in the golden, %s now (the case changed)", g_case, case_hex);
        if (!model_ok)
            snprintf(why + strlen(why), sizeof why - strlen(why), "%smodel hash %s in the golden, %s now (%s changed)",
                     case_ok ? "" : "; ", g_model, model_hex, c->model_arg);
        gf_k_stale(k, "golden %s is stale: %s; re%s", path, why, hint);
        goto done;
    }

    /* its sampler record is the case's sampler (beside the case hash: a record edited, or written by a maker
     * that ignored a filter, is stale too) */
    {
        const char *g_sampler = gf_golden_meta(g, "sampler");
        char *now = gf_golden_sampler_json(&s->sampler), diff[700] = "";
        if (!now) {
            gf_k_fail(k, "out of memory");
            goto done;
        }
        int r = gf_golden_sampler_diff(g_sampler ? g_sampler : "", now, diff, sizeof diff);
        if (r < 0)
            snprintf(diff, sizeof diff, "the golden's sampler record %.200s is not a canonical JSON object",
                     g_sampler ? g_sampler : "(none)");
        gf_k_check(k, r == 0, "golden sampler record", "%s", r == 0 ? now : diff);
        free(now);
        if (r != 0) {
            gf_k_stale(k, "golden %s is stale: its sampler record differs from the case's: %s; re%s", path, diff, hint);
            goto done;
        }
    }

    /* it fits the case */
    if (g->rows != B || g->V != V) {
        gf_k_error(k, "golden %s holds %d row%s of %d logits; the case has %d prompt%s and the model %d logits", path,
                   g->rows, g->rows == 1 ? "" : "s", g->V, B, B == 1 ? "" : "s", V);
        goto done;
    }
    for (int32_t b = 0; b < B; b++)
        if (g->row[b].steps != N) {
            gf_k_error(k, "golden %s row %d holds %d steps; the case asks for %d", path, b, g->row[b].steps, N);
            goto done;
        }

    /* its prompts are the tokenizer's encoding of the case's prompts */
    prompts = calloc((size_t)B, sizeof *prompts);
    lens = calloc((size_t)B, sizeof *lens);
    forced = calloc((size_t)B, sizeof *forced);
    seq_ids = calloc((size_t)B, sizeof *seq_ids);
    if (!prompts || !lens || !forced || !seq_ids) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    json_t *plens = json_array();
    gf_k_metric_json(k, "prompt_tokens", plens);
    int prompts_ok = 1;
    for (int32_t b = 0; b < B; b++) {
        st = gf_prompt_tokens(k->session, &s->prompts[b], &prompts[b], &lens[b]);
        if (st != GF_OK) {
            gf_k_error(k, "%s", gf_error_msg());
            goto done;
        }
        json_array_append_new(plens, json_integer(lens[b]));
        const gf_golden_row *r = &g->row[b];
        if (r->prompt_len != lens[b] || memcmp(r->tokens, prompts[b], (size_t)lens[b] * sizeof(int32_t))) {
            char a[512], t[512];
            gf_k_ids_str(a, sizeof a, r->tokens, (size_t)r->prompt_len);
            gf_k_ids_str(t, sizeof t, prompts[b], (size_t)lens[b]);
            gf_k_check(k, 0, "golden prompt tokens",
                       "row %d: the golden's prompt is %s, the tokenizer encodes the case's "
                       "prompt to %s",
                       b, a, t);
            prompts_ok = 0;
        }
        forced[b] = r->tokens + r->prompt_len;
        seq_ids[b] = (uint64_t)b;
    }
    if (!prompts_ok)
        goto done;
    gf_k_check(k, 1, "golden prompt tokens", "%d row%s equal the tokenizer's encoding", B, B == 1 ? "" : "s");

    /* the backend, teacher-forced through the golden's tokens (one left-padded batch) */
    cap.B = B;
    cap.V = V;
    cap.N = N;
    cap.k = k;
    cap.sampler = &s->sampler;
    cap.seq_ids = seq_ids;
    cap.logits = malloc((size_t)N * B * V * sizeof *cap.logits);
    cap.chosen = malloc((size_t)N * B * sizeof *cap.chosen);
    cap.chosen_margin = malloc((size_t)N * B * sizeof *cap.chosen_margin);
    if (!cap.logits || !cap.chosen || !cap.chosen_margin) {
        gf_k_fail(k, "out of memory for %d x %d x %d logits", N, B, V);
        goto done;
    }
    gf_generate_params gp = gf_generate_defaults();
    gp.max_new_tokens = N;
    gp.sampler = s->sampler;
    gp.eos_id = -1;
    gp.use_cache = 1;
    gp.seq_ids = seq_ids;
    gp.forced = forced;
    gp.on_step = capture_step;
    gp.user = &cap;
    st = gf_generate(e, B, (const int32_t *const *)prompts, lens, &gp, &gen);
    if (st != GF_OK) {
        gf_k_status(k, st, "teacher-forced generate");
        goto done;
    }
    if (gen->steps != N) {
        gf_k_error(k,
                   "the backend ran %d of %d steps (%s): the longest prompt plus max_new_tokens - 1 must fit the "
                   "model's %d positions",
                   gen->steps, N, gf_stop_reason_str(gen->stop[0]), gf_engine_config(e)->n_positions);
        goto done;
    }

    /* step by step against the golden */
    json_t *deltas = json_array(), *mismatch_steps = json_array(), *margins = json_array();
    int all_equal = 1;
    double atol = golden_atol(g, s->atol, k);
    const int served = k->weights && !strcmp(k->weights, GF_WEIGHTS_SERVED);
    if (served)
        gf_k_metric_json(k, "compared",
                         json_string("the server's top-k log-probabilities against the golden's "
                                     "log-softmax at the same ids (no full logits: docs/http.md)"));
    json_t *boundary = json_array();
    for (int32_t b = 0; b < B; b++) {
        const gf_golden_row *r = &g->row[b];
        gf_cmp cmp;
        gf_cmp_init(&cmp, &s->gate, k->dtype, GF_CMP_TEACHER_FORCED, atol);
        double *row_delta = malloc((size_t)N * sizeof *row_delta);
        json_t *row_mis = json_array();
        char label[64];
        snprintf(label, sizeof label, "golden/row%d", b);
        for (int32_t t = 0; t < N; t++) {
            const float *ref = r->logits + (size_t)t * V;
            const float *test = cap.logits + ((size_t)t * B + b) * V;
            double top1;
            gf_row_top(ref, V, &top1, NULL);
            double delta = served ? served_delta(ref, test, V) : gf_max_abs_delta(ref, test, (size_t)V, NULL);
            if (row_delta)
                row_delta[t] = delta;
            int32_t want = r->tokens[r->prompt_len + t], got = cap.chosen[(size_t)t * B + b];
            double margin = r->margins[t], bm;
            if (want != got) {
                all_equal = 0;
                json_array_append_new(row_mis, json_integer(t));
                /* a top-k / top-p boundary within the gate that explains got */
                if (gf_golden_boundary_excuse(ref, V, &s->sampler, (uint64_t)b, (uint64_t)t, got,
                                              gf_gate_threshold(&s->gate, top1, k->dtype), &bm) &&
                    bm < margin) {
                    margin = bm;
                    json_array_append_new(boundary, json_pack("{s:i, s:i, s:f, s:f}", "row", b, "step", t,
                                                              "boundary_margin", bm, "race_margin", r->margins[t]));
                }
            }
            if (gf_cmp_step(&cmp, t, delta, want, got, margin, top1)) {
                char side[256];
                snprintf(side, sizeof side, "golden (%s %s)", gf_golden_meta(g, "generator"),
                         gf_golden_meta(g, "generator_version"));
                gf_k_write_logits(k, label, t, ref, side, test, "backend, teacher-forced through the golden's tokens",
                                  V);
            }
        }
        gf_k_compare(k, label, &cmp);
        json_array_append_new(deltas, row_delta ? gf_json_doubles(row_delta, (size_t)N) : json_null());
        json_array_append_new(mismatch_steps, row_mis);
        json_array_append_new(margins, gf_json_doubles(r->margins, (size_t)N)); /* the golden's, per step */
        free(row_delta);
    }
    gf_k_metric_int(k, "rows", B);
    gf_k_metric_int(k, "steps", N);
    gf_k_metric_json(k, "tokens_equal", json_boolean(all_equal));
    gf_k_metric_json(k, "mismatch_steps", mismatch_steps);
    gf_k_metric_json(k, "step_max_delta", deltas);
    gf_k_metric_json(k, "step_margin", margins);
    gf_k_metric_json(k, "boundary_excused", boundary);
done:
    gf_k_slot_finish(k);
    gf_generation_free(gen);
    free(cap.logits);
    free(cap.chosen);
    free(cap.chosen_margin);
    for (int32_t b = 0; prompts && b < B; b++)
        free(prompts[b]);
    free(prompts);
    free(lens);
    free(forced);
    free(seq_ids);
    gf_golden_free(g);
    free(path);
}

/* served_skip (case.h): a sampled golden's tokens are drawn by genfence's
 * sampler over the rows, and a served backend's rows are its top-k plus an
 * even remainder, so the draw is neither the model's distribution nor the
 * server's sampler: a mismatch there would be a false failure. A greedy
 * golden is judged (the argmax and the margin are the server's own). */
static const char *golden_served_skip(const gf_case *c)
{
    const gf_golden_spec *s = c->spec;
    if (!s || s->sampler.temperature <= 0)
        return NULL;
    return "a sampled golden (temperature > 0) needs full logits: genfence's sampler would draw over the server's "
           "top-k log-probabilities and an even remainder, not the model's distribution (the server's own sampler "
           "is probed by integrity=on: docs/http.md)";
}

const gf_kind_def gf_kind_golden_generation = {
    .name = "golden_generation",
    .summary = "the backend teacher-forced through a golden's tokens against its logits (goldens: docs/goldens.md)",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .hashes_model = 1,
    .defers_to_statistical = 1,
    .served_skip = golden_served_skip,
    .parse = parse_golden,
    .free_spec = spec_free,
    .run = run_golden,
};
