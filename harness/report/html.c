/* The HTML report (reports/index.html): one self-contained file built from
 * the JSON report (gf_report_json), so it can be made again from any run.json.
 * No script, no network: tables and inline SVG only.
 *
 *   - the case x backend verdict matrix (cells link to the case's plots)
 *   - per model case: max |delta| per step against the gate (atol), and the
 *     reference top-1/top-2 margin per step against the near-tie threshold;
 *     near ties marked, the first divergence and the failing step highlighted
 *   - the failure list with reproduce lines
 *   - durations, slowest first */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "html_internal.h"
#include "report.h"
#include "sys.h"
#include "utf8.h"

enum { PLOT_W = 560, PLOT_H = 180, PAD_L = 56, PAD_R = 12, PAD_T = 22, PAD_B = 28 };

/* HTML-escaped text; the document's strings come from a JSON report (valid
 * UTF-8), but a page made from any run.json repairs what is not (utf8.h). */
void gf_html_esc(gf_buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (!gf_utf8_valid(s, n)) {
        char *r = gf_utf8_repair(s, n);
        gf_html_esc(b, r ? r : "(text lost: out of memory)");
        free(r);
        return;
    }
    for (; s && *s; s++)
        switch (*s) {
        case '<': gf_buf_puts(b, "&lt;"); break;
        case '>': gf_buf_puts(b, "&gt;"); break;
        case '&': gf_buf_puts(b, "&amp;"); break;
        case '"': gf_buf_puts(b, "&quot;"); break;
        default: gf_buf_put(b, s, 1);
        }
}

const char *gf_html_jstr(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static double jnum(const json_t *o, const char *key, double dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* verdict -> CSS class (pass-near-tie -> "pass-near-tie") */
void gf_html_verdict_span(gf_buf *b, const char *v)
{
    gf_buf_puts(b, "<span class=\"v v-");
    gf_html_esc(b, v);
    gf_buf_puts(b, "\">");
    gf_html_esc(b, v);
    gf_buf_puts(b, "</span>");
}

/* ---- plots ---- */

/* series: a JSON array of numbers, or an array of such arrays (one per row). */
static size_t series_rows(const json_t *s) { return json_is_array(json_array_get(s, 0)) ? json_array_size(s) : 1; }
const json_t *gf_html_series_row(const json_t *s, size_t r)
{
    return json_is_array(json_array_get(s, 0)) ? json_array_get(s, r) : s;
}

static double ylog(double v, double lo, double hi)
{
    double l = log10(v < lo ? lo : v);
    return PAD_T + (PLOT_H - PAD_T - PAD_B) * (log10(hi) - l) / (log10(hi) - log10(lo));
}

static double xstep(long t, size_t n)
{
    return PAD_L + (PLOT_W - PAD_L - PAD_R) * (n > 1 ? (double)t / (double)(n - 1) : 0.5);
}

/* One log-scale line plot; returns the number of near ties marked. */
size_t gf_html_plot(gf_buf *b, const char *title, const json_t *s, const gf_html_plot_marks *m)
{
    static const char *const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"};
    size_t rows = series_rows(s), n = 0, ties = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t r = 0; r < rows; r++) {
        const json_t *a = gf_html_series_row(s, r);
        if (json_array_size(a) > n)
            n = json_array_size(a);
        for (size_t i = 0; i < json_array_size(a); i++) {
            double v = json_number_value(json_array_get(a, i));
            if (json_is_number(json_array_get(a, i)) && v > 0 && isfinite(v)) {
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
        }
    }
    if (isfinite(m->gate) && m->gate > 0) {
        lo = m->gate < lo ? m->gate : lo;
        hi = m->gate > hi ? m->gate : hi;
    }
    if (!isfinite(lo)) { /* all zero: a flat line on the floor */
        lo = 1e-8;
        hi = 1e-6;
    }
    lo = pow(10, floor(log10(lo)));
    hi = pow(10, ceil(log10(hi)));
    if (hi <= lo)
        hi = lo * 10;
    gf_buf_printf(b,
                  "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                  "viewBox=\"0 0 %d %d\" role=\"img\"><title>",
                  PLOT_W, PLOT_H, PLOT_W, PLOT_H);
    gf_html_esc(b, title);
    gf_buf_printf(b, "</title><rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>", PLOT_W, PLOT_H);
    gf_buf_printf(b, "<text x=\"%d\" y=\"14\" font-size=\"12\">", PAD_L);
    gf_html_esc(b, title);
    gf_buf_puts(b, " (log scale; 0 drawn on the floor)</text>");
    /* decades */
    for (double d = lo; d <= hi * 1.0001; d *= 10) {
        double y = ylog(d, lo, hi);
        gf_buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>", PAD_L, y,
                      PLOT_W - PAD_R, y);
        gf_buf_printf(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%.0e</text>", PAD_L - 4, y + 3,
                      d);
    }
    gf_buf_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\">step 0</text>", PAD_L, PLOT_H - 8);
    gf_buf_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">step %zu</text>", PLOT_W - PAD_R,
                  PLOT_H - 8, n ? n - 1 : 0);
    if (m->first_div >= 0 && n) {
        double x = xstep(m->first_div, n);
        gf_buf_printf(b,
                      "<rect class=\"first-divergence\" x=\"%.1f\" y=\"%d\" width=\"4\" height=\"%d\" "
                      "fill=\"#d62728\" opacity=\"0.35\"><title>first divergence: step %ld</title></rect>",
                      x - 2, PAD_T, PLOT_H - PAD_T - PAD_B, m->first_div);
        gf_buf_printf(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" fill=\"#d62728\">first divergence @%ld</text>",
                      x + 3, PAD_T + 10, m->first_div);
    }
    if (m->failing >= 0 && m->failing != m->first_div && n) {
        double x = xstep(m->failing, n);
        gf_buf_printf(b,
                      "<line class=\"failing-step\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#d62728\" "
                      "stroke-dasharray=\"2,2\"><title>failing step %ld</title></line>",
                      x, PAD_T, x, PLOT_H - PAD_B, m->failing);
    }
    if (isfinite(m->gate) && m->gate > 0) {
        double y = ylog(m->gate, lo, hi);
        gf_buf_printf(b,
                      "<line class=\"gate\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#000\" "
                      "stroke-dasharray=\"6,3\"/>",
                      PAD_L, y, PLOT_W - PAD_R, y);
        gf_buf_printf(b, "<text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%s %.3g</text>",
                      PLOT_W - PAD_R, y - 3, m->gate_label, m->gate);
    }
    for (size_t r = 0; r < rows; r++) {
        const json_t *a = gf_html_series_row(s, r);
        const char *col = colors[r % (sizeof colors / sizeof *colors)];
        gf_buf_printf(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.2\" points=\"", col);
        for (size_t i = 0; i < json_array_size(a); i++) {
            json_t *v = json_array_get(a, i);
            if (json_is_number(v))
                gf_buf_printf(b, "%.1f,%.1f ", xstep((long)i, n), ylog(json_number_value(v), lo, hi));
        }
        gf_buf_puts(b, "\"/>");
        for (size_t i = 0; m->mark_below && isfinite(m->gate) && i < json_array_size(a); i++) {
            json_t *v = json_array_get(a, i);
            if (json_is_number(v) && json_number_value(v) < m->gate) {
                ties++;
                gf_buf_printf(b,
                              "<circle class=\"near-tie\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"none\" "
                              "stroke=\"#d62728\"><title>near tie: step %zu, margin %.3g</title></circle>",
                              xstep((long)i, n), ylog(json_number_value(v), lo, hi), i, json_number_value(v));
            }
        }
    }
    gf_buf_puts(b, "</svg>\n");
    return ties;
}

/* The gate, margin threshold, first divergence and failing step over all of
 * a result's comparisons (the smallest step wins). */
void gf_html_comparison_marks(const json_t *metrics, double *atol, double *thr, long *first_div, long *failing)
{
    *atol = NAN;
    *thr = NAN;
    *first_div = -1;
    *failing = -1;
    const char *key;
    json_t *c;
    json_object_foreach(json_object_get(metrics, "comparisons"), key, c)
    {
        double a = jnum(c, "atol", NAN), t = jnum(c, "gate_threshold", NAN);
        long fd = (long)jnum(c, "first_divergence", -1), fs = (long)jnum(c, "failing_step", -1);
        if (isfinite(a) && !(a >= *atol))
            *atol = a;
        if (isfinite(t) && !(t <= *thr))
            *thr = t;
        if (fd >= 0 && (*first_div < 0 || fd < *first_div))
            *first_div = fd;
        if (fs >= 0 && (*failing < 0 || fs < *failing))
            *failing = fs;
    }
}

int gf_html_has_plot(const json_t *res)
{
    return json_is_array(json_object_get(json_object_get(res, "metrics"), "step_max_delta"));
}

void gf_html_plots(gf_buf *b, const json_t *res, size_t idx, int heading)
{
    const json_t *m = json_object_get(res, "metrics");
    double atol, thr;
    long fd, fs;
    gf_html_comparison_marks(m, &atol, &thr, &fd, &fs);
    gf_buf_printf(b, "<section class=\"case\" id=\"r%zu\">", idx);
    if (heading) { /* (in the failure list the item above names it) */
        gf_buf_puts(b, "<h3>");
        gf_html_esc(b, gf_html_jstr(res, "id"));
        gf_buf_puts(b, " on ");
        gf_html_esc(b, gf_html_jstr(res, "backend"));
        gf_buf_puts(b, " ");
        gf_html_verdict_span(b, gf_html_jstr(res, "verdict"));
        gf_buf_puts(b, "</h3>\n");
    }
    if (fd >= 0)
        gf_buf_printf(b, "<p class=\"divergence\">first divergence (tokens differ): step %ld</p>\n", fd);
    if (fs >= 0)
        gf_buf_printf(b, "<p class=\"divergence\">failing step (the gate is broken first): step %ld</p>\n", fs);
    gf_html_plot_marks dm = {
        .gate = atol, .gate_label = "gate (atol)", .first_div = fd, .failing = fs, .mark_below = 0};
    gf_html_plot(b, "max |delta| per step", json_object_get(m, "step_max_delta"), &dm);
    const json_t *mg = json_object_get(m, "step_margin");
    if (json_is_array(mg)) {
        gf_html_plot_marks mm = {
            .gate = thr, .gate_label = "near-tie threshold", .first_div = fd, .failing = fs, .mark_below = 1};
        size_t ties = gf_html_plot(b, "top-1/top-2 margin of the reference per step", mg, &mm);
        gf_buf_printf(b, "<p>%zu near tie(s) marked (margin below the threshold)</p>\n", ties);
    } else
        gf_buf_puts(b, "<p>no per-step margin recorded for this kind</p>\n");
    gf_html_trace(b, res);
    gf_buf_puts(b, "</section>\n");
}

/* ---- tables ---- */

/* The engine alone's runs (kinds that reach no slot of the run's backends). */
static int engine_alone(const json_t *r)
{
    return !strcmp(gf_html_jstr(r, "backend"), "engine") && !strcmp(gf_html_jstr(r, "backend_requested"), "engine");
}

/* A cell's safety factor (margin / delta; the summary of model cases): a
 * narrow pass (below 10) is marked. */
static void cell_sf(gf_buf *b, const json_t *r)
{
    const json_t *s = json_object_get(json_object_get(r, "metrics"), "summary");
    const json_t *sf = json_object_get(s, "safety_factor");
    if (json_is_number(sf)) {
        double v = json_number_value(sf);
        gf_buf_printf(b, " <span class=\"sf%s\" title=\"safety factor: smallest margin / max |delta|\">sf %.2g</span>",
                      v < 10 ? " narrow" : "", v);
    } else if (*gf_html_jstr(s, "safety_factor_reason") == '+')
        gf_buf_puts(b, " <span class=\"sf\" title=\"max |delta| is 0\">sf inf</span>");
}

/* group: 0 the backends' runs, 1 the engine alone's */
static void matrix(gf_buf *b, const json_t *results, long *plot_of, int group)
{
    size_t nr = json_array_size(results), nc = 0, nb = 0;
    const char **cases = malloc((nr + 1) * sizeof *cases), **bks = malloc((nr + 1) * sizeof *bks);
    if (!cases || !bks) {
        free(cases);
        free(bks);
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < nr; i++) {
        const json_t *r = json_array_get(results, i);
        const char *id = gf_html_jstr(r, "id"), *bk = gf_html_jstr(r, "backend");
        if (engine_alone(r) != group)
            continue;
        size_t k;
        for (k = 0; k < nc && strcmp(cases[k], id); k++)
            ;
        if (k == nc)
            cases[nc++] = id;
        for (k = 0; k < nb && strcmp(bks[k], bk); k++)
            ;
        if (k == nb)
            bks[nb++] = bk;
    }
    if (!nc) {
        gf_buf_puts(b, "<p>none</p>\n");
        free(cases);
        free(bks);
        return;
    }
    gf_buf_puts(b, "<table class=\"matrix\"><thead><tr><th>case</th>");
    for (size_t k = 0; k < nb; k++) {
        gf_buf_puts(b, "<th>");
        gf_html_esc(b, bks[k][0] ? bks[k] : "(none)");
        gf_buf_puts(b, "</th>");
    }
    gf_buf_puts(b, "</tr></thead><tbody>\n");
    for (size_t c = 0; c < nc; c++) {
        gf_buf_puts(b, "<tr><th>");
        gf_html_esc(b, cases[c]);
        gf_buf_puts(b, "</th>");
        for (size_t k = 0; k < nb; k++) {
            gf_buf_puts(b, "<td>");
            for (size_t i = 0; i < json_array_size(results); i++) {
                const json_t *r = json_array_get(results, i);
                if (strcmp(gf_html_jstr(r, "id"), cases[c]) || strcmp(gf_html_jstr(r, "backend"), bks[k]) ||
                    engine_alone(r) != group)
                    continue;
                if (plot_of[i] >= 0)
                    gf_buf_printf(b, "<a href=\"#r%ld\">", plot_of[i]);
                gf_html_verdict_span(b, gf_html_jstr(r, "verdict"));
                if (plot_of[i] >= 0)
                    gf_buf_puts(b, "</a>");
                cell_sf(b, r);
                gf_buf_printf(b, " <small>%.2fs</small>", jnum(r, "seconds", 0));
            }
            gf_buf_puts(b, "</td>");
        }
        gf_buf_puts(b, "</tr>\n");
    }
    gf_buf_puts(b, "</tbody></table>\n");
    free(cases);
    free(bks);
}

/* The step (and row, where the record names one) a failure is at: the first
 * failing step of its comparisons, else the backend call a crash was in. */
static void where(gf_buf *b, const json_t *r)
{
    const json_t *m = json_object_get(r, "metrics"), *cc = json_object_get(r, "crash_context");
    double atol, thr;
    long fd, fs;
    gf_html_comparison_marks(m, &atol, &thr, &fd, &fs);
    long row = -1;
    const char *key;
    json_t *c;
    json_object_foreach(json_object_get(m, "comparisons"), key, c)
    {
        long rw = (long)jnum(c, "failing_row", jnum(c, "row", -1));
        if (rw >= 0 && row < 0)
            row = rw;
    }
    if (fs < 0 && json_is_object(cc))
        fs = (long)jnum(cc, "step", -1);
    if (row < 0 && json_is_object(cc))
        row = (long)jnum(cc, "row", -1);
    if (fs < 0 && row < 0)
        return;
    gf_buf_puts(b, "<br><span class=\"where\">");
    if (fs >= 0)
        gf_buf_printf(b, "step %ld", fs);
    if (row >= 0)
        gf_buf_printf(b, "%srow %ld", fs >= 0 ? ", " : "", row);
    if (json_is_object(cc) && *gf_html_jstr(cc, "call")) {
        gf_buf_puts(b, " (in ");
        gf_html_esc(b, gf_html_jstr(cc, "call"));
        gf_buf_puts(b, ")");
    }
    gf_buf_puts(b, "</span>");
}

void gf_html_plots(gf_buf *b, const json_t *res, size_t idx, int heading);

/* First on the page: each failure with its reason, where it is, its
 * reproduce line and its plot (the first one's above the fold). */
static void failures(gf_buf *b, const json_t *results, const long *plot_of)
{
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(results); i++)
        n += jnum(json_array_get(results, i), "exit_status", 0) != 0;
    gf_buf_printf(b, "<h2 id=\"failures\">Failures (%zu)</h2>\n", n);
    if (!n) {
        gf_buf_puts(b, "<p>none</p>\n");
        return;
    }
    gf_buf_puts(b, "<ol class=\"failures\">\n");
    for (size_t i = 0; i < json_array_size(results); i++) {
        const json_t *r = json_array_get(results, i);
        if (jnum(r, "exit_status", 0) == 0)
            continue;
        gf_buf_puts(b, "<li class=\"failure\"><b class=\"case\">");
        gf_html_esc(b, gf_html_jstr(r, "id"));
        gf_buf_puts(b, "</b> on <b class=\"backend\">");
        gf_html_esc(b, *gf_html_jstr(r, "backend") ? gf_html_jstr(r, "backend") : "(no backend)");
        gf_buf_puts(b, "</b> ");
        gf_html_verdict_span(b, gf_html_jstr(r, "verdict"));
        if (json_is_false(json_object_get(r, "as_declared"))) {
            gf_buf_puts(b, " <b>not as declared</b> (expect_verdict ");
            gf_html_esc(b, gf_html_jstr(r, "expect_verdict"));
            gf_buf_puts(b, ")");
        }
        gf_buf_puts(b, "<br><span class=\"reason\">");
        gf_html_esc(b, gf_html_jstr(r, "reason"));
        gf_buf_puts(b, "</span>");
        where(b, r);
        const char *rep = gf_html_jstr(r, "reproduce");
        if (*rep) {
            gf_buf_puts(b, "<pre class=\"reproduce\">");
            gf_html_esc(b, rep);
            gf_buf_puts(b, "</pre>");
        }
        if (plot_of[i] >= 0)
            gf_html_plots(b, r, (size_t)plot_of[i], 0);
        else
            gf_html_trace(b, r);
        gf_buf_puts(b, "</li>\n");
    }
    gf_buf_puts(b, "</ol>\n");
}

/* Then the skips, grouped by their reason. */
static void skips(gf_buf *b, const json_t *results)
{
    size_t n = json_array_size(results), ns = 0;
    for (size_t i = 0; i < n; i++)
        ns += !strcmp(gf_html_jstr(json_array_get(results, i), "verdict"), "skip") &&
              jnum(json_array_get(results, i), "exit_status", 0) == 0;
    gf_buf_printf(b, "<h2 id=\"skips\">Skips (%zu)</h2>\n", ns);
    if (!ns) {
        gf_buf_puts(b, "<p>none</p>\n");
        return;
    }
    gf_buf_puts(b, "<table class=\"skips\"><thead><tr><th>reason</th><th>runs</th><th>cases [backend]</th></tr></thead>"
                   "<tbody>\n");
    for (size_t i = 0; i < n; i++) {
        const json_t *r = json_array_get(results, i);
        if (strcmp(gf_html_jstr(r, "verdict"), "skip") || jnum(r, "exit_status", 0) != 0)
            continue;
        size_t k, first = 1, count = 0;
        for (k = 0; k < i && first; k++) { /* one row per reason, at its first skip */
            const json_t *o = json_array_get(results, k);
            first = !(!strcmp(gf_html_jstr(o, "verdict"), "skip") && jnum(o, "exit_status", 0) == 0 &&
                      !strcmp(gf_html_jstr(o, "reason"), gf_html_jstr(r, "reason")));
        }
        if (!first)
            continue;
        for (k = i; k < n; k++) {
            const json_t *o = json_array_get(results, k);
            count += !strcmp(gf_html_jstr(o, "verdict"), "skip") && jnum(o, "exit_status", 0) == 0 &&
                     !strcmp(gf_html_jstr(o, "reason"), gf_html_jstr(r, "reason"));
        }
        gf_buf_puts(b, "<tr><td class=\"reason\">");
        gf_html_esc(b, gf_html_jstr(r, "reason"));
        gf_buf_printf(b, "</td><td>%zu</td><td>", count);
        size_t shown = 0;
        for (k = i; k < n && shown < 12; k++) {
            const json_t *o = json_array_get(results, k);
            if (strcmp(gf_html_jstr(o, "verdict"), "skip") || jnum(o, "exit_status", 0) != 0 ||
                strcmp(gf_html_jstr(o, "reason"), gf_html_jstr(r, "reason")))
                continue;
            gf_buf_puts(b, shown++ ? ", " : "");
            gf_html_esc(b, gf_html_jstr(o, "id"));
            gf_buf_puts(b, " [");
            gf_html_esc(b, *gf_html_jstr(o, "backend") ? gf_html_jstr(o, "backend") : "-");
            gf_buf_puts(b, "]");
        }
        if (count > shown)
            gf_buf_printf(b, " and %zu more", count - shown);
        gf_buf_puts(b, "</td></tr>\n");
    }
    gf_buf_puts(b, "</tbody></table>\n");
}

/* Then triangulation: every other backend against ref, per model and part. */
static void triangulation(gf_buf *b, const json_t *tri)
{
    static const char *const parts[] = {"forward", "cached", "chunked", "padded", "padded_cached"};
    gf_buf_puts(b, "<h2 id=\"triangulation\">Triangulation (max |delta| against ref)</h2>\n");
    if (!json_is_array(tri) || !json_array_size(tri)) {
        gf_buf_puts(b, "<p>not run in this run (it needs two or more backends on model cases; --no-triangulate "
                       "turns it off)</p>\n");
        return;
    }
    gf_buf_puts(b, "<table class=\"triangulation\"><thead><tr><th>model</th><th>backend</th>");
    for (size_t p = 0; p < sizeof parts / sizeof *parts; p++)
        gf_buf_printf(b, "<th>%s</th>", parts[p]);
    gf_buf_puts(b, "<th>note</th></tr></thead><tbody>\n");
    size_t i;
    json_t *t;
    json_array_foreach(tri, i, t)
    {
        gf_buf_puts(b, "<tr><td>");
        gf_html_esc(b, gf_html_jstr(t, "model"));
        gf_buf_puts(b, "</td><td>");
        gf_html_esc(b, gf_html_jstr(t, "backend"));
        gf_buf_puts(b, "</td>");
        for (size_t p = 0; p < sizeof parts / sizeof *parts; p++) {
            double d = jnum(json_object_get(t, parts[p]), "max_abs_delta", NAN);
            if (isnan(d))
                gf_buf_puts(b, "<td>-</td>");
            else
                gf_buf_printf(b, "<td>%.2e</td>", d);
        }
        gf_buf_puts(b, "<td>");
        gf_html_esc(b, *gf_html_jstr(t, "error") ? gf_html_jstr(t, "error") : gf_html_jstr(t, "status"));
        gf_buf_puts(b, "</td></tr>\n");
    }
    gf_buf_puts(b, "</tbody></table>\n");
}

static int by_seconds_desc(const void *a, const void *b)
{
    double x = jnum(*(json_t *const *)a, "seconds", 0), y = jnum(*(json_t *const *)b, "seconds", 0);
    return (x < y) - (x > y);
}

static void durations(gf_buf *b, const json_t *results)
{
    size_t n = json_array_size(results);
    const json_t **v = n ? malloc(n * sizeof *v) : NULL;
    gf_buf_puts(b, "<h2 id=\"durations\">Durations (slowest first)</h2>\n");
    if (!v) {
        gf_buf_puts(b, "<p>no runs</p>\n");
        return;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(results, i);
    qsort(v, n, sizeof *v, by_seconds_desc);
    gf_buf_puts(b, "<table class=\"durations\"><thead><tr><th>seconds</th><th>case</th><th>backend</th>"
                   "<th>verdict</th></tr></thead><tbody>\n");
    for (size_t i = 0; i < n && i < 30; i++) {
        gf_buf_printf(b, "<tr><td>%.3f</td><td>", jnum(v[i], "seconds", 0));
        gf_html_esc(b, gf_html_jstr(v[i], "id"));
        gf_buf_puts(b, "</td><td>");
        gf_html_esc(b, gf_html_jstr(v[i], "backend"));
        gf_buf_puts(b, "</td><td>");
        gf_html_verdict_span(b, gf_html_jstr(v[i], "verdict"));
        gf_buf_puts(b, "</td></tr>\n");
    }
    gf_buf_puts(b, "</tbody></table>\n");
    free(v);
}

const char gf_html_style[] =
    "body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:.5em 0}"
    "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;font-size:13px}"
    ".v{padding:0 4px;border-radius:3px;font-weight:bold}.v-pass{background:#c8efc8}"
    ".v-pass-near-tie{background:#e6f2a2}.v-skip{background:#e4e4e4}.v-known{background:#d8e4f4}.v-fixed{background:#"
    "f6d8a8}"
    ".v-fail,.v-crash,.v-timeout{background:#f6b3b3}"
    ".v-stale,.v-error{background:#f7d08a}pre{background:#f4f4f4;padding:4px;white-space:pre-wrap}"
    "svg.plot{border:1px solid #ddd;margin:2px}section.case{margin:.3em 0}small{color:#666}h1{font-size:20px;margin:0}"
    "h2{font-size:17px;margin:.6em 0 .3em}p.meta{font-size:12px;color:#555;margin:.2em 0}.sf{font-size:11px;color:#555}"
    ".sf.narrow{color:#a00;font-weight:bold}li.failure{margin-bottom:.6em}.reason{font-family:monospace}"
    ".where{color:#a00}pre.reproduce{margin:.2em 0;font-size:11px}";

int gf_report_html_doc(const json_t *doc, gf_buf *b)
{
    const json_t *results = json_object_get(doc, "results"), *sum = json_object_get(doc, "summary");
    const json_t *gv = json_object_get(doc, "genfence");
    size_t n = json_array_size(results);
    long *plot_of = n ? malloc(n * sizeof *plot_of) : NULL;
    if (n && !plot_of)
        return -1;
    long np = 0;
    for (size_t i = 0; i < n; i++)
        plot_of[i] = gf_html_has_plot(json_array_get(results, i)) ? np++ : -1;
    gf_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<title>genfence report</title><style>");
    gf_buf_puts(b, gf_html_style);
    gf_buf_puts(b, "</style></head><body>\n<h1>genfence report</h1>\n<p class=\"meta\">genfence ");
    gf_html_esc(b, gf_html_jstr(gv, "version"));
    gf_buf_puts(b, " (commit ");
    gf_html_esc(b, gf_html_jstr(gv, "commit"));
    gf_buf_puts(b, "), started ");
    gf_html_esc(b, gf_html_jstr(doc, "started"));
    gf_buf_printf(b, ", %.1f s<br>command:", jnum(doc, "seconds", 0));
    const json_t *cmd = json_object_get(doc, "command");
    for (size_t i = 0; i < json_array_size(cmd); i++) {
        gf_buf_puts(b, " ");
        gf_html_esc(b, json_string_value(json_array_get(cmd, i)));
    }
    const json_t *env = json_object_get(doc, "environment");
    gf_buf_puts(b, "<br>machine: ");
    gf_html_esc(b, gf_html_jstr(env, "cpu_model"));
    gf_buf_printf(b, ", %lld CPUs, %lld jobs x %lld threads</p>\n", (long long)jnum(env, "nproc", 0),
                  (long long)jnum(env, "jobs", 0), (long long)jnum(env, "threads_per_job", 0));
    /* the backends' own figures first, the engine alone's apart */
    gf_buf_puts(b, "<p class=\"summary\">");
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(sum, "by_backend"), i, g)
    {
        gf_buf_puts(b, i ? "; <b>" : "<b>");
        gf_html_esc(b, gf_html_jstr(g, "backend"));
        gf_buf_printf(b, ": %lld passed, %lld failed, %lld skipped</b>", (long long)jnum(g, "passed", 0),
                      (long long)jnum(g, "failed", 0), (long long)jnum(g, "skipped", 0));
        if (jnum(g, "runs", 0) == 0)
            gf_buf_puts(b, " (reached no case)");
    }
    const json_t *eng = json_object_get(sum, "engine_alone"), *none = json_object_get(sum, "no_backend");
    if (jnum(eng, "runs", 0) > 0)
        gf_buf_printf(b, "; engine alone (no backend slot): %lld passed, %lld failed, %lld skipped",
                      (long long)jnum(eng, "passed", 0), (long long)jnum(eng, "failed", 0),
                      (long long)jnum(eng, "skipped", 0));
    if (jnum(none, "runs", 0) > 0)
        gf_buf_printf(b, "; no backend matched: %lld skipped", (long long)jnum(none, "skipped", 0));
    gf_buf_printf(
        b, "<br>all: %lld passed, %lld failed, %lld skipped (%lld runs of %lld cases); exit status %lld</p>\n",
        (long long)jnum(sum, "passed", 0), (long long)jnum(sum, "failed", 0), (long long)jnum(sum, "skipped", 0),
        (long long)jnum(sum, "runs", 0), (long long)jnum(sum, "cases", 0), (long long)jnum(sum, "exit_status", 0));
    failures(b, results, plot_of);
    skips(b, results);
    triangulation(b, json_object_get(doc, "triangulation"));
    gf_probe_table_html(b, results);
    gf_buf_puts(b, "<h2 id=\"matrix\">Verdicts (case x backend; sf: safety factor, margin / max |delta|)</h2>\n");
    matrix(b, results, plot_of, 0);
    gf_buf_puts(b,
                "<h2 id=\"matrix-engine\">The engine alone (kinds that reach no slot of the run's backends: they test "
                "no backend)</h2>\n");
    matrix(b, results, plot_of, 1);
    size_t np_rest = 0;
    for (size_t k = 0; k < n; k++)
        np_rest += plot_of[k] >= 0 && jnum(json_array_get(results, k), "exit_status", 0) == 0;
    gf_buf_printf(b, "<h2 id=\"plots\">Per-step plots of the other runs (%zu)</h2>\n", np_rest);
    for (size_t k = 0; k < n; k++)
        if (plot_of[k] >= 0 && jnum(json_array_get(results, k), "exit_status", 0) == 0)
            gf_html_plots(b, json_array_get(results, k), (size_t)plot_of[k], 1);
    if (!np_rest)
        gf_buf_puts(b, "<p>none (failures show theirs above)</p>\n");
    durations(b, results);
    gf_buf_puts(b, "</body></html>\n");
    free(plot_of);
    return b->oom ? -1 : 0;
}

int gf_report_html_write_doc(const json_t *doc, const char *path)
{
    gf_buf b = {0};
    int rc = gf_report_html_doc(doc, &b);
    if (rc == 0)
        rc = gf_write_atomic(path, b.p, b.n);
    gf_buf_free(&b);
    return rc;
}

/* ---- genfence compare --html ---- */
