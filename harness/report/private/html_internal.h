/* The pieces the run page (html.c) and the compare page (html_compare.c)
 * share: escaping, JSON field readers, verdict badges, the style sheet and
 * the log-scale plots of a result's per-step series. Private to report/. */
#ifndef GENFENCE_REPORT_HTML_INTERNAL_H
#define GENFENCE_REPORT_HTML_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "buf.h"

typedef struct gf_html_plot_marks {
    double gate; /* horizontal line; NAN: none */
    const char *gate_label;
    long first_div; /* vertical line; < 0: none */
    long failing;   /* vertical line; < 0: none */
    int mark_below; /* mark points below the gate (near ties) */
} gf_html_plot_marks;

/* HTML-escaped text (invalid UTF-8 repaired). */
void gf_html_esc(gf_buf *b, const char *s);
/* o[key] as a string, or NULL. */
const char *gf_html_jstr(const json_t *o, const char *key);
/* A verdict as a coloured badge. */
void gf_html_verdict_span(gf_buf *b, const char *v);
/* Row r of a per-step series (a list, or a list of per-row lists). */
const json_t *gf_html_series_row(const json_t *s, size_t r);
/* One log-scale line plot; returns the number of near ties marked. */
size_t gf_html_plot(gf_buf *b, const char *title, const json_t *s, const gf_html_plot_marks *m);
/* The gate, near-tie threshold, first divergence and failing step a result's metrics mark. */
void gf_html_comparison_marks(const json_t *metrics, double *atol, double *thr, long *first_div, long *failing);
/* Does a result carry a per-step series to plot? */
int gf_html_has_plot(const json_t *res);
/* A result's plots, anchored as plot-IDX (with a heading when asked). */
void gf_html_plots(gf_buf *b, const json_t *res, size_t idx, int heading);
/* A result's localization (run.json "localization"): its summary, its trace
 * line and a per-layer plot of NMSE over bound (html_trace.c); nothing
 * without one. */
void gf_html_trace(gf_buf *b, const json_t *res);
/* The page's style sheet. */
extern const char gf_html_style[];

/* The probe cases of results as a grid (probe x shape, one column per
 * backend: NMSE and verdict); nothing when there are none (probe_table.c). */
void gf_probe_table_html(gf_buf *b, const json_t *results);

#endif
