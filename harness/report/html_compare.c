/* The compare page (genfence compare --html): the verdict changes of two runs
 * and, per changed result, its plots of both runs overlaid. Built from the
 * two JSON reports with the pieces of the run page (html_internal.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "html_internal.h"
#include "report.h"

static const json_t *find_result(const json_t *doc, const char *key)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(doc, "results"), i, r)
    {
        char k[1024];
        snprintf(k, sizeof k, "%s@%s", gf_html_jstr(r, "id"), gf_html_jstr(r, "backend"));
        if (!strcmp(k, key))
            return r;
    }
    return NULL;
}

static void cell_value(gf_buf *b, const json_t *v)
{
    if (!v || json_is_null(v))
        gf_buf_puts(b, "<i>(absent)</i>");
    else if (json_is_string(v))
        gf_html_esc(b, json_string_value(v));
    else if (json_is_real(v))
        gf_buf_printf(b, "%.4g", json_real_value(v));
    else {
        char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        gf_html_esc(b, s ? s : "?");
        free(s);
    }
}

/* row 0 of a per-step series (a golden's rows are nested) */
static const json_t *first_row(const json_t *s) { return gf_html_series_row(s, 0); }

static void overlay(gf_buf *b, const char *key, const json_t *ra, const json_t *rb, size_t idx)
{
    const json_t *ma = json_object_get(ra, "metrics"), *mb = json_object_get(rb, "metrics");
    double atol, thr;
    long fd, fs;
    gf_html_comparison_marks(mb, &atol, &thr, &fd, &fs);
    gf_buf_printf(b, "<section class=\"case\" id=\"c%zu\"><h3>", idx);
    gf_html_esc(b, key);
    gf_buf_puts(b, ": A <span style=\"color:#1f77b4\">blue</span> ");
    gf_html_verdict_span(b, gf_html_jstr(ra, "verdict"));
    gf_buf_puts(b, ", B <span style=\"color:#ff7f0e\">orange</span> ");
    gf_html_verdict_span(b, gf_html_jstr(rb, "verdict"));
    gf_buf_puts(b, "</h3>\n");
    json_t *d = json_pack("[O, O]", first_row(json_object_get(ma, "step_max_delta")),
                          first_row(json_object_get(mb, "step_max_delta")));
    gf_html_plot_marks dm = {
        .gate = atol, .gate_label = "gate (atol)", .first_div = fd, .failing = fs, .mark_below = 0};
    if (d)
        gf_html_plot(b, "max |delta| per step (row 0), A and B", d, &dm);
    json_decref(d);
    const json_t *ga = json_object_get(ma, "step_margin"), *gb = json_object_get(mb, "step_margin");
    if (json_is_array(ga) && json_is_array(gb)) {
        json_t *g = json_pack("[O, O]", first_row(ga), first_row(gb));
        gf_html_plot_marks mm = {
            .gate = thr, .gate_label = "near-tie threshold", .first_div = fd, .failing = fs, .mark_below = 1};
        if (g)
            gf_html_plot(b, "top-1/top-2 margin per step (row 0), A and B", g, &mm);
        json_decref(g);
    }
    gf_buf_puts(b, "</section>\n");
}

int gf_report_html_compare(const json_t *cmp, const json_t *a, const json_t *b_doc, gf_buf *b)
{
    size_t i;
    json_t *v;
    gf_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<title>genfence compare</title><style>");
    gf_buf_puts(b, gf_html_style);
    gf_buf_puts(b, "</style></head><body>\n<h1>genfence compare</h1>\n<p>A: ");
    gf_html_esc(b, gf_html_jstr(cmp, "a"));
    gf_buf_puts(b, " (started ");
    gf_html_esc(b, gf_html_jstr(a, "started"));
    gf_buf_puts(b, ")<br>B: ");
    gf_html_esc(b, gf_html_jstr(cmp, "b"));
    gf_buf_puts(b, " (started ");
    gf_html_esc(b, gf_html_jstr(b_doc, "started"));
    gf_buf_printf(b, ")</p>\n<p class=\"summary\"><b>%lld regression(s)</b></p>\n",
                  (long long)json_integer_value(json_object_get(cmp, "regressions")));
    gf_buf_puts(b, "<h2 id=\"verdicts\">Verdict changes</h2>\n<table><thead><tr><th>result</th><th>A</th><th>B</th>"
                   "<th></th><th>B's reason</th></tr></thead><tbody>\n");
    json_array_foreach(json_object_get(cmp, "verdict_changes"), i, v)
    {
        gf_buf_puts(b, "<tr><td>");
        gf_html_esc(b, gf_html_jstr(v, "result"));
        gf_buf_puts(b, "</td><td>");
        gf_html_verdict_span(b, gf_html_jstr(v, "a"));
        gf_buf_puts(b, "</td><td>");
        gf_html_verdict_span(b, gf_html_jstr(v, "b"));
        gf_buf_puts(b, json_is_true(json_object_get(v, "regression")) ? "</td><td><b>REGRESSED</b></td><td>"
                                                                      : "</td><td>changed</td><td>");
        gf_html_esc(b, gf_html_jstr(v, "reason_b"));
        gf_buf_puts(b, "</td></tr>\n");
    }
    gf_buf_puts(b, "</tbody></table>\n");
    gf_buf_printf(b,
                  "<h2 id=\"moved\">Moved metrics (threshold %g)</h2>\n<table><thead><tr><th>result</th>"
                  "<th>comparison</th><th>metric</th><th>A</th><th>B</th></tr></thead><tbody>\n",
                  json_number_value(json_object_get(cmp, "threshold")));
    json_array_foreach(json_object_get(cmp, "moved"), i, v)
    {
        gf_buf_puts(b, "<tr><td>");
        gf_html_esc(b, gf_html_jstr(v, "result"));
        gf_buf_puts(b, "</td><td>");
        gf_html_esc(b, gf_html_jstr(v, "comparison"));
        gf_buf_puts(b, "</td><td>");
        gf_html_esc(b, gf_html_jstr(v, "metric"));
        gf_buf_puts(b, "</td><td>");
        cell_value(b, json_object_get(v, "a"));
        gf_buf_puts(b, "</td><td>");
        cell_value(b, json_object_get(v, "b"));
        gf_buf_puts(b, "</td></tr>\n");
    }
    gf_buf_puts(b, "</tbody></table>\n<h2 id=\"audit\">Audit differences</h2>\n<table><thead><tr><th>key</th>"
                   "<th>A</th><th>B</th></tr></thead><tbody>\n");
    json_array_foreach(json_object_get(cmp, "audit_differences"), i, v)
    {
        gf_buf_puts(b, "<tr><td>");
        gf_html_esc(b, gf_html_jstr(v, "key"));
        gf_buf_puts(b, "</td><td>");
        cell_value(b, json_object_get(v, "a"));
        gf_buf_puts(b, "</td><td>");
        cell_value(b, json_object_get(v, "b"));
        gf_buf_puts(b, "</td></tr>\n");
    }
    gf_buf_puts(b, "</tbody></table>\n<h2 id=\"plots\">Per-step plots of what changed</h2>\n");
    /* each result with a verdict change or a moved metric, once */
    json_t *done = json_object();
    size_t n = 0;
    const char *lists[] = {"verdict_changes", "moved"};
    for (int l = 0; l < 2; l++)
        json_array_foreach(json_object_get(cmp, lists[l]), i, v)
        {
            const char *key = gf_html_jstr(v, "result");
            if (json_object_get(done, key))
                continue;
            json_object_set_new(done, key, json_true());
            const json_t *ra = find_result(a, key), *rb = find_result(b_doc, key);
            if (ra && rb && gf_html_has_plot(ra) && gf_html_has_plot(rb))
                overlay(b, key, ra, rb, n++);
        }
    json_decref(done);
    if (!n)
        gf_buf_puts(b, "<p>nothing with per-step data changed</p>\n");
    gf_buf_puts(b, "</body></html>\n");
    return b->oom ? -1 : 0;
}
