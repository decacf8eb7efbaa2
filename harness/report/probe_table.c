/* The mechanism probes' table (cases/probes/, harness/kinds/probe.c): one
 * line per (probe case, backend) on the console, probe x shape -> NMSE,
 * bound, headroom, verdict, as llama.cpp's test-backend-ops prints one line
 * per op; and the same as a grid on the HTML page (rows probe and shape,
 * columns backends). Both read the run record's metrics (probe, shape, nmse,
 * bound, headroom), so the page, written from run.json, needs no job. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "html_internal.h"
#include "report.h"

static const char k_rule[] = "NMSE = sum (x - ref)^2 / sum ref^2 over every compared logit; bound: the case's, else "
                             "fp32 1e-7, fp16 / bf16 5e-4";

static double metric(const json_t *m, const char *key)
{
    const json_t *v = json_object_get(m, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void cell(char *buf, size_t cap, double v)
{
    if (isnan(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.2e", v);
}

/* The NMSE, bound and headroom of a probe record's metrics, as printed:
 * "-" where absent (a run that produced no logits), "inf" for a non-finite
 * NMSE, "exact" for the headroom of an NMSE of 0. */
typedef struct probe_cells {
    char nmse[16], bound[16], headroom[16];
} probe_cells;

static probe_cells cells_of(const json_t *m)
{
    probe_cells c;
    double nmse = metric(m, "nmse");
    if (json_is_false(json_object_get(m, "nmse_finite")))
        nmse = INFINITY;
    cell(c.nmse, sizeof c.nmse, nmse);
    cell(c.bound, sizeof c.bound, metric(m, "bound"));
    if (json_is_null(json_object_get(m, "headroom")))
        snprintf(c.headroom, sizeof c.headroom, "exact");
    else
        cell(c.headroom, sizeof c.headroom, metric(m, "headroom"));
    return c;
}

static const json_t *metrics_of(const gf_job *j) { return j->record ? json_object_get(j->record, "metrics") : NULL; }

void gf_probe_table_print(const gf_run_info *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_jobs; i++)
        n += !strcmp(r->jobs[i].c->kind->name, "probe");
    if (!n)
        return;
    printf("probes (%s):\n", k_rule);
    printf("  %-10s %-64s %-16s %-9s %-9s %-9s %s\n", "probe", "shape", "backend", "NMSE", "bound", "headroom",
           "verdict");
    for (size_t i = 0; i < r->n_jobs; i++) {
        const gf_job *j = &r->jobs[i];
        if (strcmp(j->c->kind->name, "probe"))
            continue;
        const json_t *m = metrics_of(j);
        const char *probe = json_string_value(json_object_get(m, "probe"));
        const char *shape = json_string_value(json_object_get(m, "shape"));
        probe_cells cl = cells_of(m);
        printf("  %-10s %-64s %-16s %-9s %-9s %-9s %s", probe ? probe : "?", shape ? shape : j->c->id,
               j->backend ? gf_backend_label(j->backend) : "-", cl.nmse, cl.bound, cl.headroom,
               gf_verdict_label(j->verdict));
        if (j->verdict != GF_V_PASS && j->reason)
            printf("  %.100s%s", j->reason, strlen(j->reason) > 100 ? "..." : "");
        printf("\n");
    }
}

/* ---- the HTML grid ---- */

/* A result's backend as the grid's column names it: the requested
 * NAME:CONFIG (llamacpp:f16 beside llamacpp), the reported name for a
 * plugin path. */
static const char *column_of(const json_t *res)
{
    const char *req = gf_html_jstr(res, "backend_requested"), *name = gf_html_jstr(res, "backend");
    return req && !strchr(req, '/') ? req : name;
}

static int is_probe(const json_t *res)
{
    const char *k = gf_html_jstr(res, "kind");
    return k && !strcmp(k, "probe");
}

void gf_probe_table_html(gf_buf *b, const json_t *results)
{
    const char *backends[64];
    size_t nb = 0, n_probe = 0, i;
    json_t *res;
    json_array_foreach(results, i, res)
    {
        if (!is_probe(res))
            continue;
        n_probe++;
        const char *be = column_of(res);
        size_t k = 0;
        while (k < nb && strcmp(backends[k], be ? be : ""))
            k++;
        if (k == nb && nb < sizeof backends / sizeof *backends)
            backends[nb++] = be ? be : "";
    }
    if (!n_probe)
        return;
    gf_buf_puts(b, "<h2 id=\"probes\">Mechanism probes (probe x shape: NMSE against ref)</h2>\n<p>");
    gf_html_esc(b, k_rule);
    gf_buf_puts(b, "; the cell's title gives the bound, the headroom (bound / NMSE) and the reason.</p>\n");
    gf_buf_puts(b, "<table class=\"probes\"><thead><tr><th>probe</th><th>shape</th><th>case</th>");
    for (size_t k = 0; k < nb; k++) {
        gf_buf_puts(b, "<th>");
        gf_html_esc(b, backends[k]);
        gf_buf_puts(b, "</th>");
    }
    gf_buf_puts(b, "</tr></thead><tbody>\n");
    /* one row per case id, in the order the results list them */
    json_array_foreach(results, i, res)
    {
        if (!is_probe(res))
            continue;
        const char *id = gf_html_jstr(res, "id");
        size_t first = 0;
        json_t *o = NULL;
        json_array_foreach(results, first, o)
        {
            if (o == res || (is_probe(o) && id && gf_html_jstr(o, "id") && !strcmp(gf_html_jstr(o, "id"), id)))
                break;
        }
        if (o != res) /* a later result of a case already shown */
            continue;
        const json_t *m = json_object_get(res, "metrics");
        gf_buf_puts(b, "<tr><td>");
        gf_html_esc(b, gf_html_jstr(m, "probe"));
        gf_buf_puts(b, "</td><td>");
        gf_html_esc(b, gf_html_jstr(m, "shape"));
        gf_buf_puts(b, "</td><td>");
        gf_html_esc(b, id);
        gf_buf_puts(b, "</td>");
        for (size_t k = 0; k < nb; k++) {
            const json_t *hit = NULL;
            size_t q;
            json_array_foreach(results, q, o)
            {
                const char *oid = gf_html_jstr(o, "id"), *obe = column_of(o);
                if (is_probe(o) && oid && id && !strcmp(oid, id) && obe && !strcmp(obe, backends[k])) {
                    hit = o;
                    break;
                }
            }
            if (!hit) {
                gf_buf_puts(b, "<td>-</td>");
                continue;
            }
            const json_t *hm = json_object_get(hit, "metrics");
            const char *v = gf_html_jstr(hit, "verdict");
            probe_cells cl = cells_of(hm);
            gf_buf_printf(b, "<td class=\"v-%s\" title=\"bound %s, headroom %s", v ? v : "", cl.bound, cl.headroom);
            const char *why = gf_html_jstr(hit, "reason");
            if (why && *why) {
                gf_buf_puts(b, "; ");
                gf_html_esc(b, why);
            }
            gf_buf_printf(b, "\">%s ", cl.nmse);
            gf_html_verdict_span(b, v ? v : "");
            gf_buf_puts(b, "</td>");
        }
        gf_buf_puts(b, "</tr>\n");
    }
    gf_buf_puts(b, "</tbody></table>\n");
}
