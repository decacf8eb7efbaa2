/* The localization of a result on the HTML page (harness/kit/localize.h): its
 * summary and a per-layer plot, one bar per trace point of the divergent call
 * (or each point's largest NMSE over the calls of a matched trace), its
 * height log10(NMSE / bound): below the zero line is below the bound. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "html_internal.h"

enum { TR_W = 760, TR_H = 300, TR_PAD_L = 48, TR_PAD_B = 140, TR_PAD_T = 24 };

void gf_html_trace(gf_buf *b, const json_t *res)
{
    const json_t *loc = json_object_get(res, "localization");
    if (!json_is_object(loc))
        return;
    gf_buf_puts(b, "<div class=\"trace\"><p class=\"divergence\">localized: ");
    gf_html_esc(b, gf_html_jstr(loc, "summary"));
    gf_buf_puts(b, "</p>\n");
    const char *tc = gf_html_jstr(res, "trace_command");
    if (tc && *tc) {
        gf_buf_puts(b, "<pre class=\"reproduce\">");
        gf_html_esc(b, tc);
        gf_buf_puts(b, "</pre>\n");
    }
    const json_t *pts = json_object_get(loc, "points");
    size_t n = json_array_size(pts);
    if (!n) {
        gf_buf_puts(b, "</div>\n");
        return;
    }
    /* y: log10(NMSE / bound) in [lo, hi] decades, 0 (the bound) always shown */
    double lo = -1, hi = 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *p = json_array_get(pts, i), *nm = json_object_get(p, "nmse");
        double bd = json_number_value(json_object_get(p, "bound"));
        double v = json_is_number(nm) ? json_number_value(nm) : json_is_string(nm) ? INFINITY : NAN;
        double r = v > 0 && bd > 0 ? log10(v / bd) : NAN;
        if (isfinite(r)) {
            lo = r < lo ? floor(r) : lo;
            hi = r > hi ? ceil(r) : hi;
        }
    }
    const double ph = TR_H - TR_PAD_B - TR_PAD_T, pw = TR_W - TR_PAD_L - 8, bw = pw / (double)n;
#define TR_Y(r) (TR_PAD_T + (hi - (r)) / (hi - lo) * ph)
    gf_buf_printf(b,
                  "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                  "viewBox=\"0 0 %d %d\" role=\"img\"><title>NMSE over its bound per trace point</title>"
                  "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>"
                  "<text x=\"%d\" y=\"14\" font-size=\"12\">log10(NMSE / bound) per trace point%s; above the red "
                  "line: past the bound</text>",
                  TR_W, TR_H, TR_W, TR_H, TR_W, TR_H, TR_PAD_L,
                  strcmp(gf_html_jstr(loc, "status"), "matched") ? " of the divergent call"
                                                                 : ", largest over the calls");
    for (double d = lo; d <= hi + 1e-9; d += 1) {
        gf_buf_printf(b,
                      "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>"
                      "<text x=\"4\" y=\"%.1f\" font-size=\"10\">%+.0f</text>",
                      TR_PAD_L, TR_Y(d), TR_W - 8, TR_Y(d), TR_Y(d) + 3, d);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *p = json_array_get(pts, i), *nm = json_object_get(p, "nmse");
        double bd = json_number_value(json_object_get(p, "bound"));
        double v = json_is_number(nm) ? json_number_value(nm) : json_is_string(nm) ? INFINITY : NAN;
        double r = v > 0 && bd > 0 ? log10(v / bd) : (v == 0 ? lo : NAN);
        if (isinf(r))
            r = hi;
        double x = TR_PAD_L + i * bw;
        if (isfinite(r)) {
            double y0 = TR_Y(lo), y = TR_Y(r);
            gf_buf_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>", x + 1, y,
                          bw > 3 ? bw - 2 : 1, y0 - y > 1 ? y0 - y : 1, v > bd ? "#d62728" : "#2ca02c");
            gf_html_esc(b, gf_html_jstr(p, "point"));
            gf_buf_printf(b, ": NMSE %.3g, bound %.3g</title></rect>", v, bd);
        } else {
            gf_buf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\">n/a</text>", x + 1, TR_Y(lo) - 2);
        }
        gf_buf_printf(b, "<text font-size=\"9\" transform=\"translate(%.1f %d) rotate(60)\">", x + bw / 2,
                      TR_H - TR_PAD_B + 4);
        gf_html_esc(b, gf_html_jstr(p, "point"));
        gf_buf_puts(b, "</text>");
    }
    gf_buf_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#d62728\" stroke-dasharray=\"4 3\"/>",
                  TR_PAD_L, TR_Y(0), TR_W - 8, TR_Y(0));
#undef TR_Y
    gf_buf_puts(b, "</svg></div>\n");
}
