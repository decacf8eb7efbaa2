/* The plan of a run (plan.h): the (case, backend) matrix with every run,
 * skip and error and its reason, the statistical-tier deferral included. */
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

void gf_job_decide(gf_job *j, gf_verdict v, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    j->verdict = v;
    j->decided = 1;
    free(j->reason);
    j->reason = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (j->reason)
        vsnprintf(j->reason, (size_t)len + 1, fmt, ap2);
    va_end(ap2);
}

/* ---- --rerun-failed ---- */

/* w appended to (*v, *n) unless there: its index, or -1 out of memory. */
static long add_word(char ***v, size_t *n, const char *w)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*v)[i], w))
            return (long)i;
    char **g = realloc(*v, (*n + 1) * sizeof *g);
    if (!g)
        return -1;
    *v = g;
    if (!(g[*n] = strdup(w)))
        return -1;
    return (long)(*n)++;
}

static int passed(const char *v) { return !strcmp(v, "pass") || !strcmp(v, "pass-near-tie") || !strcmp(v, "skip"); }

int gf_rerun_load(gf_rerun *r, const char *path, char *why, size_t cap)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    json_t *res = doc ? json_object_get(doc, "results") : NULL;
    if (!doc || !json_is_array(res)) {
        if (!doc && err.line > 0)
            snprintf(why, cap, "--rerun-failed %s:%d:%d: %s", path, err.line, err.column, err.text);
        else if (!doc)
            snprintf(why, cap, "--rerun-failed %s", err.text);
        else
            snprintf(why, cap, "--rerun-failed %s: not a genfence run report (no \"results\" array)", path);
        json_decref(doc);
        return -1;
    }
    r->pairs = json_object();
    size_t i;
    json_t *x;
    json_array_foreach(res, i, x)
    {
        const char *id = json_string_value(json_object_get(x, "id"));
        const char *v = json_string_value(json_object_get(x, "verdict"));
        if (!id || !v) {
            snprintf(why, cap, "--rerun-failed %s: result %zu has no id or verdict", path, i);
            json_decref(doc);
            gf_rerun_free(r);
            return -1;
        }
        const json_t *decl = json_object_get(x, "as_declared"); /* judged by its expect_verdict */
        if (json_is_boolean(decl) ? json_is_true(decl) : passed(v))
            continue;
        /* the backend as it was asked for (NAME:CONFIG and plugin paths kept) */
        const char *be = json_string_value(json_object_get(x, "backend_requested"));
        if (!be)
            be = json_string_value(json_object_get(x, "backend"));
        if (!be)
            be = "-";
        json_t *per = json_object_get(r->pairs, id);
        if (!per) {
            per = json_object();
            json_object_set_new(r->pairs, id, per);
        }
        if (!json_object_get(per, be)) {
            json_object_set_new(per, be, json_true());
            r->n_pairs++;
        }
        const char *file = json_string_value(json_object_get(x, "file"));
        if (file && add_word(&r->files, &r->n_files, file) < 0) {
            snprintf(why, cap, "--rerun-failed %s: out of memory", path);
            json_decref(doc);
            gf_rerun_free(r);
            return -1;
        }
        if (!strcmp(be, "engine") || !strcmp(be, "-"))
            continue;
        size_t before = r->n_backends;
        long k = add_word(&r->backends, &r->n_backends, be);
        int *q = k >= 0 && r->n_backends > before ? realloc(r->required, r->n_backends * sizeof *q) : NULL;
        if (q) {
            r->required = q;
            r->required[k] = 0;
        }
        if (k < 0 || (r->n_backends > before && !q)) {
            snprintf(why, cap, "--rerun-failed %s: out of memory", path);
            json_decref(doc);
            gf_rerun_free(r);
            return -1;
        }
        r->required[k] |= json_is_true(json_object_get(x, "backend_required"));
    }
    json_decref(doc);
    return 0;
}

void gf_rerun_free(gf_rerun *r)
{
    json_decref(r->pairs);
    for (size_t i = 0; i < r->n_backends; i++)
        free(r->backends[i]);
    free(r->backends);
    free(r->required);
    for (size_t i = 0; i < r->n_files; i++)
        free(r->files[i]);
    free(r->files);
    memset(r, 0, sizeof *r);
}

int gf_rerun_has_case(const gf_rerun *r, const char *id) { return json_object_get(r->pairs, id) != NULL; }

int gf_rerun_has(const gf_rerun *r, const char *id, const char *backend_requested)
{
    return json_object_get(json_object_get(r->pairs, id), backend_requested) != NULL;
}

/* ---- the statistical tier ---- */

/* The statistical cases of one repository root (cases/statistical*.yaml),
 * loaded once. */
typedef struct stat_root {
    char *root;
    gf_case_set set;
} stat_root;

typedef struct stat_cache {
    stat_root *v;
    size_t n;
    const gf_kind_def *const *kinds;
} stat_cache;

static const gf_case_set *stat_cases(stat_cache *sc, const char *case_file)
{
    char *root = gf_case_root_for(NULL, case_file);
    if (!root)
        return NULL;
    for (size_t i = 0; i < sc->n; i++)
        if (!strcmp(sc->v[i].root, root)) {
            free(root);
            return &sc->v[i].set;
        }
    stat_root *g = realloc(sc->v, (sc->n + 1) * sizeof *g);
    if (!g) {
        free(root);
        return NULL;
    }
    sc->v = g;
    stat_root *s = &sc->v[sc->n++];
    memset(s, 0, sizeof *s);
    s->root = root;
    /* only those files, so that an error elsewhere in the suite does not
     * hide them; a file with errors judges nothing */
    char *dir = gf_case_default_dir(root);
    char pattern[4096];
    glob_t gl;
    memset(&gl, 0, sizeof gl);
    snprintf(pattern, sizeof pattern, "%s/statistical*.yaml", dir ? dir : "");
    if (dir && glob(pattern, 0, NULL, &gl) == 0 &&
        gf_cases_load(sc->kinds, (const char *const *)gl.gl_pathv, gl.gl_pathc, root, &s->set) != GF_OK) {
        gf_case_set_free(&s->set);
        memset(&s->set, 0, sizeof s->set);
    }
    globfree(&gl);
    free(dir);
    return &s->set;
}

static void stat_cache_free(stat_cache *sc)
{
    for (size_t i = 0; i < sc->n; i++) {
        free(sc->v[i].root);
        gf_case_set_free(&sc->v[i].set);
    }
    free(sc->v);
}

/* Does s, a statistical case, judge weights w on c's model? */
static int stat_covers(const gf_case *s, const gf_case *c, const char *w, const char *kv)
{
    return s->kind->judges_weights && s->model && !strcmp(s->model, c->model) && s->kind->judges_weights(s, w, kv);
}

/* A token-equality kind on a backend with lower-precision weights (its info
 * names weights other than f32): a skip naming the statistical case that
 * judges them, else a note for the child (token equality judges them). The
 * case may be one of this run's (a user's own, wherever its file lives) or
 * one of the root's cases/statistical*.yaml; the run's are looked at first. */
static void stat_defer(stat_cache *sc, gf_job *j, const gf_case *const *run, size_t n_run)
{
    const gf_case *c = j->c;
    const char *w = j->backend->weights;
    /* a served backend's weights are unknown (served_skip below judges it) */
    if (!c->kind->defers_to_statistical || !w[0] || !strcmp(w, "f32") || !strcmp(w, GF_WEIGHTS_SERVED) || !c->model)
        return;
    for (size_t i = 0; i < n_run; i++)
        if (stat_covers(run[i], c, w, j->backend->kv_cache)) {
            gf_job_decide(j, GF_V_SKIP, "weights %s: judged by the statistical tier (case %s) of %s", w, run[i]->id,
                          run[i]->file);
            return;
        }
    const gf_case_set *set = stat_cases(sc, c->file);
    for (size_t i = 0; set && i < set->n; i++) {
        const gf_case *s = &set->cases[i];
        if (stat_covers(s, c, w, j->backend->kv_cache)) {
            gf_job_decide(j, GF_V_SKIP, "weights %s: judged by the statistical tier (case %s) of %s", w, s->id,
                          s->file);
            return;
        }
    }
    const char *fmt = "no distribution_match case in this run or in cases/statistical*.yaml judges weights %s on %s";
    const char *m = c->model_arg ? c->model_arg : "this model";
    int len = snprintf(NULL, 0, fmt, w, m);
    j->stat_note = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (j->stat_note)
        snprintf(j->stat_note, (size_t)len + 1, fmt, w, m);
}

/* ---- served backends ---- */

/* A case its kind says a served backend cannot give what it needs for
 * (gf_kind_def.served_skip): a skip with the kind's reason. */
static void served_defer(gf_job *j)
{
    const gf_case *c = j->c;
    if (strcmp(j->backend->weights, GF_WEIGHTS_SERVED) || !c->kind->served_skip)
        return;
    const char *why = c->kind->served_skip(c);
    if (why)
        gf_job_decide(j, GF_V_SKIP, "served backend: %s", why);
}

/* ---- the matrix ---- */

int gf_plan_build(gf_plan *p, const gf_case *const *cases, size_t n_cases, gf_backend_probe *bs, size_t n_bs,
                  const gf_kind_def *const *kinds, int threads, const gf_rerun *rerun)
{
    memset(p, 0, sizeof *p);
    p->backends = bs;
    p->n_backends = n_bs;
    p->n_cases = n_cases;
    p->engine.requested = p->engine.name = (char *)"engine";
    p->engine.available = 1;
    p->engine.engine_ = 1;
    p->engine.dtype = GF_COMPUTE_F32;
    p->engine.threads = threads;
    snprintf(p->engine.source, sizeof p->engine.source, "the engine's own code (no backend slot)");
    p->jobs = calloc(n_cases * (n_bs + 2) + 1, sizeof *p->jobs);
    if (!p->jobs)
        return -1;
    stat_cache sc = {.kinds = kinds};
    for (size_t i = 0; i < n_cases; i++) {
        const gf_case *c = cases[i];
        size_t before = p->n_jobs;
        gf_kind_reach reach = c->kind->reaches;
        int on_engine = 0, dropped = 0;
        for (size_t b = 0; b < n_bs; b++) {
            if (bs[b].opt_in && !gf_case_has_tag(c, "exec"))
                continue; /* the default run's echo client: only the cases tagged exec */
            if (bs[b].available && !bs[b].unusable && reach != GF_KIND_REACHES_MODEL &&
                !(reach == GF_KIND_REACHES_SAMPLE && bs[b].has_sample) &&
                !(reach == GF_KIND_REACHES_SPECULATE && bs[b].has_speculate) &&
                !(reach == GF_KIND_REACHES_LOGPROBS && bs[b].has_logprobs)) {
                if (gf_case_backend_allowed(c, bs[b].requested, bs[b].name))
                    on_engine = 1; /* nothing of this backend is tested: the engine run stands for it */
                continue;
            }
            if (!bs[b].explicit_ && !bs[b].available && !bs[b].opt_in)
                continue; /* default mode: only what runs here (the echo client's cases say why not) */
            /* a named backend that cannot be used is an error on every case:
             * its real name (for the cases' backends filter) is unknown */
            if (!bs[b].unusable && !gf_case_backend_allowed(c, bs[b].requested, bs[b].name))
                continue;
            if (rerun && !gf_rerun_has(rerun, c->id, bs[b].requested)) {
                dropped = 1;
                p->n_dropped++;
                continue;
            }
            gf_job *j = &p->jobs[p->n_jobs];
            j->c = c;
            j->backend = &bs[b];
            j->index = p->n_jobs++;
            if (bs[b].unusable)
                gf_job_decide(j, GF_V_ERROR, "backend '%s' cannot be used: %s", bs[b].requested, bs[b].why);
            else if (!bs[b].available)
                gf_job_decide(j, GF_V_SKIP, "backend unavailable: %s", bs[b].why);
            else
                served_defer(j);
            if (!j->decided)
                stat_defer(&sc, j, cases, n_cases);
        }
        if (on_engine && rerun && !gf_rerun_has(rerun, c->id, "engine")) {
            on_engine = 0;
            dropped = 1;
            p->n_dropped++;
        }
        if (on_engine) {
            gf_job *j = &p->jobs[p->n_jobs];
            j->c = c;
            j->backend = &p->engine;
            j->index = p->n_jobs++;
        }
        if (p->n_jobs == before && !dropped) {
            gf_job *j = &p->jobs[p->n_jobs];
            j->c = c;
            j->index = p->n_jobs++;
            char buf[1024] = "";
            for (size_t k = 0; k < c->n_backends; k++) {
                strncat(buf, k ? ", " : "", sizeof buf - strlen(buf) - 1);
                strncat(buf, c->backends[k], sizeof buf - strlen(buf) - 1);
            }
            gf_job_decide(j, GF_V_SKIP, "no selected backend matches the case's backends filter [%s]", buf);
        }
    }
    stat_cache_free(&sc);
    return 0;
}

void gf_plan_free(gf_plan *p)
{
    for (size_t i = 0; p->jobs && i < p->n_jobs; i++)
        gf_job_clear(&p->jobs[i]);
    free(p->jobs);
    p->jobs = NULL;
    p->n_jobs = 0;
}

void gf_plan_print(const gf_plan *p)
{
    size_t n_run = 0, n_skip = 0, n_err = 0;
    for (size_t b = 0; b < p->n_backends; b++)
        if (!p->backends[b].explicit_ && !p->backends[b].available)
            printf("plan: backend %s not in this run: %s\n", p->backends[b].requested, p->backends[b].why);
    for (size_t i = 0; i < p->n_jobs; i++) {
        const gf_job *j = &p->jobs[i];
        const char *be = j->backend ? j->backend->requested : "-";
        if (!j->decided) {
            n_run++;
            printf("plan: run   %-44s [%s]%s\n", j->c->id, be,
                   j->backend && j->backend->engine_ ? "  (reaches no backend slot: once, on the engine)" : "");
        } else if (j->verdict == GF_V_ERROR) {
            n_err++;
            printf("plan: error %-44s [%s]  %s\n", j->c->id, be, j->reason ? j->reason : "");
        } else {
            n_skip++;
            printf("plan: skip  %-44s [%s]  %s%s\n", j->c->id, be, j->reason ? j->reason : "",
                   j->backend && j->backend->required && !j->backend->available ? " (required: a failure)" : "");
        }
    }
    printf("plan: %zu (case, backend) pairs over %zu cases: %zu to run, %zu skipped, %zu errors; nothing was run\n",
           p->n_jobs, p->n_cases, n_run, n_skip, n_err);
}

int gf_plan_exit_status(const gf_plan *p)
{
    int rc = 0;
    for (size_t i = 0; i < p->n_jobs; i++) {
        const gf_job *j = &p->jobs[i];
        if (j->decided && j->verdict == GF_V_ERROR)
            return 2;
        if (j->decided && j->verdict == GF_V_SKIP && j->backend && j->backend->required && !j->backend->available)
            rc = 1;
    }
    return rc;
}
