/* Console report: one line per (case, backend), a progress line when stdout
 * is a terminal, and the summary CI parses. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/version.h"
#include "record.h"
#include "report.h"
#include "sys.h"

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (json_is_number(v))
        return json_number_value(v);
    const char *why = NULL;
    char rk[128];
    snprintf(rk, sizeof rk, "%s_reason", key);
    why = json_string_value(json_object_get(o, rk));
    if (why && why[0] == '+')
        return INFINITY;
    return NAN;
}

void gf_job_key_metrics(const gf_job *j, char *buf, size_t cap)
{
    /* a failure from a backend call, not from a check or a comparison, says so */
    if (j->verdict == GF_V_FAIL && json_is_string(j->record ? json_object_get(j->record, "failed_call") : NULL)) {
        json_t *checks = json_object_get(j->record, "checks");
        size_t ok = 0, n = json_is_array(checks) ? json_array_size(checks) : 0;
        for (size_t i = 0; i < n; i++)
            ok += json_is_true(json_object_get(json_array_get(checks, i), "passed"));
        if (n)
            snprintf(buf, cap, "backend call failed (after %zu/%zu checks)", ok, n);
        else
            snprintf(buf, cap, "backend call failed");
        return;
    }
    gf_key_metrics(j->record ? json_object_get(j->record, "metrics") : NULL,
                   j->record ? json_object_get(j->record, "checks") : NULL, buf, cap);
}

void gf_key_metrics(const json_t *mc, const json_t *checks_c, char *buf, size_t cap)
{
    buf[0] = '\0';
    json_t *m = (json_t *)mc;
    json_t *s = m ? json_object_get(m, "summary") : NULL;
    if (s && json_object_get(s, "steps")) {
        double d = num(s, "max_abs_delta"), mm = num(s, "min_margin"), sf = num(s, "safety_factor");
        long long step = json_integer_value(json_object_get(s, "max_delta_step"));
        long long ties = json_integer_value(json_object_get(s, "near_ties"));
        char sfs[32];
        if (isinf(sf))
            snprintf(sfs, sizeof sfs, "inf");
        else
            snprintf(sfs, sizeof sfs, "%.2g", sf);
        json_t *st = json_object_get(m, "statistical"); /* the statistical tier's figures first (distribution_match) */
        if (st && !isnan(num(st, "kld_mean")))
            snprintf(buf, cap, "KL %.2e  top1 %.2f%%  max|d| %.2e  margin %.2e  ties %lld", num(st, "kld_mean"),
                     100 * num(st, "top1_agreement"), d, mm, ties);
        else
            snprintf(buf, cap, "max|d| %.2e @%lld  margin %.2e  sf %s  ties %lld", d, step, mm, sfs, ties);
        return;
    }
    const json_t *checks = checks_c;
    if (json_is_array(checks) && json_array_size(checks)) {
        size_t ok = 0, n = json_array_size(checks);
        for (size_t i = 0; i < n; i++)
            ok += json_is_true(json_object_get(json_array_get(checks, i), "passed"));
        snprintf(buf, cap, "%zu/%zu checks", ok, n);
    }
}

static int g_progress_shown;

static void clear_progress(const gf_run_info *r)
{
    if (r->tty && g_progress_shown) {
        fputs("\r\033[K", stdout);
        g_progress_shown = 0;
    }
}

void gf_console_header(const gf_run_info *r)
{
    if (r->quiet)
        return;
    size_t avail = 0;
    for (size_t i = 0; i < r->n_backends; i++)
        avail += r->backends[i].available;
    printf("genfence %s (%s): %zu case%s, %zu backend%s available, %zu run%s; -j %d, %d thread%s, timeout %.0f s\n",
           GENFENCE_VERSION, GENFENCE_COMMIT, r->n_selected, r->n_selected == 1 ? "" : "s", avail,
           avail == 1 ? "" : "s", r->n_jobs, r->n_jobs == 1 ? "" : "s", r->opts->jobs, r->opts->threads,
           r->opts->threads == 1 ? "" : "s", r->opts->timeout_s);
    char cpu[256] = "";
    gf_cpu_model(cpu, sizeof cpu);
    printf("  cpu %s; flags %s\n", cpu[0] ? cpu : "(unknown)", gf_report_cpu_flags());
    for (size_t i = 0; i < r->n_backends; i++) {
        const gf_backend_probe *b = &r->backends[i];
        /* one that does not run is named once, in the summary's skip lines */
        if (b->available)
            printf("  backend %-14s available   %s%s%s%s%s%s%s%s%s\n", gf_backend_label(b), b->library,
                   b->detail[0] ? "; " : "", b->detail, b->weights[0] ? "; weights " : "", b->weights,
                   b->kv_cache[0] ? "; kv " : "", b->kv_cache, b->cpu_path[0] ? "; cpu path " : "", b->cpu_path);
    }
    fflush(stdout);
}

/* The localization (harness/kit/localize.h): its summary; under genfence
 * trace (all) also every point of the divergent call, bars of log10 NMSE
 * over bound. */
static void print_localization(const gf_run_info *r, const gf_job *j, int all)
{
    json_t *loc = j->record ? json_object_get(j->record, "localization") : NULL;
    if (!loc)
        return;
    printf("    localized: %s\n", json_string_value(json_object_get(loc, "summary")));
    json_t *ng = json_object_get(loc, "not_given");
    if (json_array_size(ng)) {
        printf("    not given by the backend's trace slot (%zu):", json_array_size(ng));
        for (size_t i = 0; i < json_array_size(ng) && i < 12; i++)
            printf("%s %s", i ? "," : "", json_string_value(json_array_get(ng, i)));
        printf("%s\n", json_array_size(ng) > 12 ? ", ..." : "");
    }
    const char *kv = json_string_value(json_object_get(loc, "keys_and_values"));
    if (kv && strcmp(kv, "compared at every block"))
        printf("    keys and values: %s\n", kv);
    json_t *pts = json_object_get(loc, "points");
    for (size_t i = 0; all && i < json_array_size(pts); i++) {
        json_t *p = json_array_get(pts, i);
        json_t *nm = json_object_get(p, "nmse");
        double b = json_real_value(json_object_get(p, "bound"));
        if (!json_is_real(nm)) {
            printf("      %-32s %s\n", json_string_value(json_object_get(p, "point")),
                   json_is_null(nm) ? "not given" : "NMSE inf");
            continue;
        }
        double v = json_real_value(nm);
        printf("      %-32s NMSE %9.2e  bound %9.2e  %s\n", json_string_value(json_object_get(p, "point")), v, b,
               v > b ? "OVER" : "ok");
    }
    if (gf_verdict_exit(j->verdict, gf_job_required(j)) != 0) {
        char *tl = gf_job_trace_line(j, r->opts);
        if (tl)
            printf("    trace: %s\n", tl);
        free(tl);
    }
}

void gf_console_line(const gf_run_info *r, const gf_job *j)
{
    int bad = gf_job_exit(r, j) != 0, declared = gf_job_declared(r, j);
    int raw_bad =
        gf_verdict_exit(j->verdict, gf_job_required(j)) != 0; /* as declared: still its reason and reproduce line */
    if (r->quiet && !bad)
        return;
    clear_progress(r);
    char metrics[256];
    gf_job_key_metrics(j, metrics, sizeof metrics);
    char who[512];
    snprintf(who, sizeof who, "%s [%s]", j->c->id, j->backend ? gf_backend_label(j->backend) : "-");
    printf("%-13s %-44s %-46s %6.2fs%s%s%s\n", gf_verdict_label(j->verdict), who, metrics, j->seconds,
           declared == 1   ? "  as declared"
           : declared == 0 ? "  NOT AS DECLARED (declared "
                           : "",
           declared == 0 ? gf_verdict_str(j->c->expect_verdict) : "", declared == 0 ? ")" : "");
    bad |= raw_bad;
    if (!bad && r->opts && r->opts->trace > 0)
        print_localization(r, j, 1); /* genfence trace: a passing case's trace too */
    if (j->verdict == GF_V_PASS_NEAR_TIE || j->verdict == GF_V_SKIP || bad) {
        if (j->reason && j->reason[0])
            printf("    %s%s\n", j->reason, j->verdict == GF_V_SKIP && gf_job_required(j) ? " (required backend)" : "");
    }
    if (bad) {
        char *rep = gf_job_reproduce(j, r->opts);
        if (rep)
            printf("    reproduce: %s\n", rep);
        free(rep);
        print_localization(r, j, r->opts && r->opts->trace > 0);
        json_t *arts = j->record ? json_object_get(j->record, "artifacts") : NULL;
        for (size_t i = 0; json_is_array(arts) && i < json_array_size(arts); i++) {
            json_t *a = json_array_get(arts, i);
            if (json_is_string(a))
                printf("    logits: %s\n", json_string_value(a));
        }
        if (j->stderr_tail && (j->verdict == GF_V_CRASH || j->verdict == GF_V_TIMEOUT)) {
            const char *t = j->stderr_tail;
            size_t n = strlen(t);
            if (n > 600)
                t += n - 600;
            printf("    stderr (tail): %s%s", t, n && t[strlen(t) - 1] == '\n' ? "" : "\n");
        }
    }
    fflush(stdout);
}

void gf_console_started(gf_job *j, size_t running, size_t done, size_t total, void *user)
{
    const gf_run_info *r = user;
    if (!r->tty)
        return;
    printf("\r\033[K[%zu/%zu] %zu running: %s [%s]", done, total, running, j->c->id, j->backend->name);
    g_progress_shown = 1;
    fflush(stdout);
}

void gf_console_finished(gf_job *j, size_t done, size_t total, void *user)
{
    const gf_run_info *r = user;
    (void)done;
    (void)total;
    gf_console_line(r, j);
}

/* A backend named (or required) that no case reached: said on its own line
 * above the last. */
static void unreached_lines(const gf_run_info *r)
{
    for (size_t b = 0; b < r->n_backends; b++) {
        const gf_backend_probe *p = &r->backends[b];
        if ((p->explicit_ || p->required) && gf_backend_unreached(r, p))
            printf("backend %s reached no case: every selected case ran on the engine alone or its backends filter "
                   "excludes it%s\n",
                   gf_backend_label(p),
                   p->required ? "; it is required (--require-backend): counted as one failure" : "");
    }
}

/* The last line, the one CI parses: each asked-for backend's own figures
 * first, then the engine alone's and the runs no backend matched, apart:
 *   "mybackend: 11 passed, 0 failed, 14 skipped; engine alone: 115 passed, 0 failed, 0 skipped"
 * Every run is in exactly one group, so the groups add up to the total line
 * above, and every failure behind the exit status is on this line (a required
 * backend no case reached is its one failure). */
static void last_line(const gf_run_info *r)
{
    char c[128];
    int n = 0;
    for (size_t b = 0; b < r->n_backends; b++) {
        const gf_backend_probe *p = &r->backends[b];
        gf_counts k = gf_run_counts_of(r, GF_GROUP_BACKEND, p);
        int unreached = gf_backend_unreached(r, p);
        if (!k.runs && !p->available && !p->required)
            continue; /* not run here (default mode), or named with no case: its line above */
        if (unreached && p->required)
            k.failed++;
        gf_counts_format(&k, c, sizeof c);
        printf("%s%s: %s%s", n++ ? "; " : "", gf_backend_label(p), c,
               !unreached    ? ""
               : p->required ? " (reached no case, --require-backend)"
                             : " (reached no case)");
    }
    gf_counts e = gf_run_counts_of(r, GF_GROUP_ENGINE, NULL), none = gf_run_counts_of(r, GF_GROUP_NONE, NULL);
    if (e.runs) {
        gf_counts_format(&e, c, sizeof c);
        printf("%sengine alone: %s", n++ ? "; " : "", c);
    }
    if (none.runs) {
        gf_counts_format(&none, c, sizeof c);
        printf("%sno backend matched the case: %s", n++ ? "; " : "", c);
    }
    if (!n)
        printf("nothing run: 0 passed, 0 failed, 0 skipped");
    printf("\n");
}

/* cases that declare a verdict: did each get it? */
static void declared_lines(const gf_run_info *r)
{
    size_t n = 0, ok = 0, not_run = 0;
    for (size_t i = 0; i < r->n_jobs; i++) {
        const gf_job *j = &r->jobs[i];
        if (!j->c->has_expect_verdict)
            continue;
        if (j->verdict == GF_V_SKIP && j->c->expect_verdict != GF_V_SKIP) {
            not_run++;
            continue;
        }
        n++;
        ok += j->verdict == j->c->expect_verdict;
    }
    if (!n && !not_run)
        return;
    if (ok == n)
        printf("as declared: %zu of %zu run%s of must-fail cases got the verdict their case declares (expect_verdict)",
               ok, n, n == 1 ? "" : "s");
    else
        printf("not as declared: %zu of %zu run%s of must-fail cases got another verdict than their case declares "
               "(expect_verdict)",
               n - ok, n, n == 1 ? "" : "s");
    if (not_run)
        printf("; %zu not run (skipped: their backend was not named or is unavailable)", not_run);
    printf("%s\n", r->as_declared ? "" : "; --raw-verdicts: the exit status is the verdicts', not the declarations'");
    if (ok != n)
        for (size_t i = 0; i < r->n_jobs; i++) {
            const gf_job *j = &r->jobs[i];
            if (j->c->has_expect_verdict && j->verdict != j->c->expect_verdict &&
                !(j->verdict == GF_V_SKIP && j->c->expect_verdict != GF_V_SKIP))
                printf("  %s [%s]: %s, declared %s\n", j->c->id, j->backend ? j->backend->name : "-",
                       gf_verdict_str(j->verdict), gf_verdict_str(j->c->expect_verdict));
        }
}

void gf_console_summary(const gf_run_info *r)
{
    clear_progress(r);
    if (r->json_path || r->junit_path) {
        /* index.html is written beside run.json (GF_REPORT_FORMAT_LIST) */
        const char *jp = r->json_path, *slash = jp ? strrchr(jp, '/') : NULL;
        printf("reports: %s%s%s", jp ? jp : "", jp && r->junit_path ? ", " : "", r->junit_path ? r->junit_path : "");
        if (jp)
            printf(", %.*sindex.html", slash ? (int)(slash - jp + 1) : 0, jp);
        printf("\n");
    }
    /* a recap of the failures, in plan order, whatever scrolled by */
    size_t n_bad = 0;
    for (size_t i = 0; i < r->n_jobs; i++)
        n_bad += gf_job_exit(r, &r->jobs[i]) != 0;
    if (n_bad) {
        printf("failures (%zu):\n", n_bad);
        for (size_t i = 0; i < r->n_jobs; i++) {
            const gf_job *j = &r->jobs[i];
            if (gf_job_exit(r, j) == 0)
                continue;
            const char *why = j->reason ? j->reason : "";
            if (gf_job_declared(r, j) == 0) {
                printf("  %-8s %s [%s]: not as declared (expect_verdict: %s): %.140s%s\n", gf_verdict_label(j->verdict),
                       j->c->id, j->backend ? j->backend->name : "-", gf_verdict_str(j->c->expect_verdict), why,
                       strlen(why) > 140 ? "..." : "");
                continue;
            }
            printf("  %-8s %s [%s]: %.160s%s\n", gf_verdict_label(j->verdict), j->c->id,
                   j->backend ? j->backend->name : "-", why, strlen(why) > 160 ? "..." : "");
        }
    }
    /* what each backend was actually tested on: the runs that reached it */
    size_t on_engine = 0;
    for (size_t i = 0; i < r->n_jobs; i++)
        on_engine += r->jobs[i].ran && r->jobs[i].backend && r->jobs[i].backend->engine_;
    printf("tested:");
    size_t n_tested = 0;
    for (size_t b = 0; b < r->n_backends; b++) {
        size_t n = 0;
        if (!r->backends[b].available) /* not tested: its skip line below */
            continue;
        for (size_t i = 0; i < r->n_jobs; i++)
            n += r->jobs[i].ran && r->jobs[i].backend == &r->backends[b];
        printf("%s %s on %zu case%s", n_tested++ ? "," : "", gf_backend_label(&r->backends[b]), n, n == 1 ? "" : "s");
    }
    if (!n_tested && !on_engine)
        printf(" nothing");
    if (on_engine)
        printf("%s the engine alone on %zu (kinds that reach no slot of these backends)", n_tested ? ";" : "",
               on_engine);
    printf("\n");
    /* every backend that did not run, named or not, -q included */
    for (size_t i = 0; i < r->n_backends; i++) {
        const gf_backend_probe *b = &r->backends[i];
        if (b->unusable && b->explicit_)
            printf("backend %s: cannot be used (error on every case): %s\n", b->requested, b->why);
        else if (!b->available)
            printf("backend %s: unavailable here, %s: %s\n", b->name,
                   b->required    ? "required (its skips count as failed)"
                   : b->explicit_ ? "skipped"
                                  : "not run",
                   b->why);
    }
    printf("verdicts:");
    for (int v = 0; v < GF_V_COUNT; v++)
        printf("%s %zu %s", v ? "," : "", r->by_verdict[v], gf_verdict_str((gf_verdict)v));
    if (r->required_skips)
        printf(" (%zu skip%s of a required backend count as failed)", r->required_skips,
               r->required_skips == 1 ? "" : "s");
    printf("; %.2f s\n", r->seconds);
    if (r->interrupted) {
        size_t not_run = 0, stopped = 0;
        for (size_t i = 0; i < r->n_jobs; i++)
            if (r->jobs[i].interrupted)
                r->jobs[i].ran ? stopped++ : not_run++;
        printf("interrupted by %s: %zu run%s stopped, %zu not run (error in the report); exit %d",
               gf_report_signal_name(r->interrupted), stopped, stopped == 1 ? "" : "s", not_run, r->exit_status);
        /* which were not run, by name (the first 8; run.json has every one: "not_run": true) */
        size_t shown = 0;
        for (size_t i = 0; i < r->n_jobs; i++) {
            const gf_job *j = &r->jobs[i];
            if (!j->interrupted || j->ran)
                continue;
            if (shown++ < 8)
                printf("%s%s [%s]", shown == 1 ? "; not run: " : ", ", j->c->id, j->backend ? j->backend->name : "-");
        }
        printf("%s\n", shown > 8 ? ", ..." : "");
    }
    declared_lines(r);
    unreached_lines(r);
    /* the whole run, every group together; then the line CI parses */
    printf("total: %zu passed, %zu failed, %zu skipped\n", r->passed, r->failed, r->skipped);
    last_line(r);
    fflush(stdout);
}
