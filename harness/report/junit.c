/* JUnit XML: one <testsuite> per backend (the engine alone's runs in a
 * suite of their own, genfence.engine), one <testcase> per (case, backend),
 * written from the JSON report (json.c), so `run` and `merge` write the same.
 * Valid against the Jenkins / Ant junit-10 XSD (the one pytest validates its
 * own output against): a <testcase> has name, classname and time only (the
 * XSD has no properties in a testcase): the case's file and line open its
 * <system-out> ("case: FILE:LINE"). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "genfence/version.h"
#include "record.h"
#include "report.h"
#include "buf.h"
#include "sys.h"
#include "utf8.h"

/* XML-escaped text. Text from outside (reasons, stderr, case text) may be
 * any bytes: what is not valid UTF-8 or not an XML 1.0 character (controls
 * other than tab and newline, U+FFFE, U+FFFF) is written as \xNN per byte
 * (utf8.h), never dropped and never making the file unreadable. */
static void esc(gf_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = s ? strlen(s) : 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t l = gf_utf8_seq(s + i, n - i, &cp);
        int xml_ok = l && (cp >= 0x20 || cp == '\n' || cp == '\t') && cp != 0xFFFE && cp != 0xFFFF;
        if (!xml_ok) {
            for (size_t k = 0; k < (l ? l : 1); k++) {
                unsigned char c = (unsigned char)s[i + k];
                char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
                gf_buf_put(b, e, 4);
            }
            i += l ? l : 1;
            continue;
        }
        switch (cp) {
        case '&': gf_buf_puts(b, "&amp;"); break;
        case '<': gf_buf_puts(b, "&lt;"); break;
        case '>': gf_buf_puts(b, "&gt;"); break;
        case '"': gf_buf_puts(b, "&quot;"); break;
        case '\'': gf_buf_puts(b, "&apos;"); break;
        default: gf_buf_put(b, s + i, l);
        }
        i += l;
    }
}

static const char *js(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* a result's backend name; "none": the case matched no backend */
static const char *backend_of(const json_t *res)
{
    const char *b = json_string_value(json_object_get(res, "backend"));
    return b ? b : "none";
}

/* The element one run becomes: the verdict table's, except for
 * a case judged by its expect_verdict (as declared: a passing testcase; not: a failure). */
static gf_junit_elem res_elem(const json_t *res, gf_verdict *v_out)
{
    gf_verdict v;
    if (!gf_verdict_parse(js(res, "verdict"), &v))
        v = GF_V_ERROR;
    *v_out = v;
    const json_t *d = json_object_get(res, "as_declared");
    if (json_is_true(d))
        return GF_JUNIT_NONE;
    gf_junit_elem e = gf_verdict_junit(v, json_is_true(json_object_get(res, "backend_required")));
    if (json_is_false(d) && e == GF_JUNIT_NONE)
        return GF_JUNIT_FAILURE;
    return e;
}

/* Another result with the same case and backend name (exec:A and exec:B are
 * both "exec"): then the test name carries the backend as requested. */
static int name_shared(const json_t *results, const json_t *res)
{
    size_t i;
    json_t *o;
    json_array_foreach(results, i, o)
    {
        if (o != res && !strcmp(js(o, "id"), js(res, "id")) && !strcmp(backend_of(o), backend_of(res)))
            return 1;
    }
    return 0;
}

/* One <testcase> per (case, backend): classname genfence.<backend>.<kind>,
 * name the case id (unique pairs: CI tools key on them). */
static void testcase(gf_buf *b, const json_t *results, const json_t *res)
{
    gf_buf_puts(b, "    <testcase classname=\"genfence.");
    esc(b, backend_of(res));
    gf_buf_puts(b, ".");
    esc(b, js(res, "kind"));
    gf_buf_puts(b, "\" name=\"");
    esc(b, js(res, "id"));
    if (!json_is_null(json_object_get(res, "backend")) && name_shared(results, res)) {
        gf_buf_puts(b, " [");
        esc(b, js(res, "backend_requested"));
        gf_buf_puts(b, "]");
    }
    gf_buf_printf(b, "\" time=\"%.3f\">\n", json_number_value(json_object_get(res, "seconds")));
    const char *reason = js(res, "reason");
    gf_verdict v;
    gf_junit_elem elem = res_elem(res, &v);
    const json_t *declared = json_object_get(res, "as_declared");
    if (elem == GF_JUNIT_FAILURE || elem == GF_JUNIT_ERROR) {
        const char *tag = elem == GF_JUNIT_ERROR ? "error" : "failure";
        gf_buf_printf(b, "      <%s type=\"", tag);
        gf_buf_puts(b, json_is_false(declared) ? "not-as-declared"
                       : v == GF_V_SKIP        ? "required-skip"
                                               : gf_verdict_str(v));
        gf_buf_puts(b, "\" message=\"");
        esc(b, reason);
        gf_buf_puts(b, "\">");
        esc(b, reason);
        if (*js(res, "reproduce")) {
            gf_buf_puts(b, "\nreproduce: ");
            esc(b, js(res, "reproduce"));
        }
        const json_t *arts = json_object_get(res, "artifacts");
        for (size_t i = 0; json_is_array(arts) && i < json_array_size(arts); i++)
            if (json_is_string(json_array_get(arts, i))) {
                gf_buf_puts(b, "\nlogits: ");
                esc(b, json_string_value(json_array_get(arts, i)));
            }
        gf_buf_printf(b, "</%s>\n", tag);
    } else if (elem == GF_JUNIT_SKIPPED) {
        gf_buf_puts(b, "      <skipped message=\"");
        esc(b, reason);
        gf_buf_puts(b, "\"/>\n");
    }
    char metrics[256];
    gf_key_metrics(json_object_get(res, "metrics"), json_object_get(res, "checks"), metrics, sizeof metrics);
    /* the junit-10 XSD allows no file / line attribute and no properties in
     * a testcase: where the case is written opens its system-out */
    gf_buf_puts(b, "      <system-out>case: ");
    esc(b, js(res, "file"));
    gf_buf_printf(b, ":%lld\nverdict: ", (long long)json_integer_value(json_object_get(res, "line")));
    esc(b, gf_verdict_str(v));
    if (json_is_boolean(declared)) {
        gf_buf_puts(b, json_is_true(declared) ? " (as declared)" : " (not as declared: expect_verdict ");
        if (json_is_false(declared)) {
            esc(b, js(res, "expect_verdict"));
            gf_buf_puts(b, ")");
        }
    }
    if (metrics[0]) {
        gf_buf_puts(b, "; ");
        esc(b, metrics);
    }
    if (v == GF_V_PASS_NEAR_TIE) {
        gf_buf_puts(b, "; ");
        esc(b, reason);
    }
    gf_buf_puts(b, "</system-out>\n");
    const char *tail = js(json_object_get(res, "process"), "stderr_tail");
    if (*tail) {
        gf_buf_puts(b, "      <system-err>");
        esc(b, tail);
        gf_buf_puts(b, "</system-err>\n");
    }
    gf_buf_puts(b, "    </testcase>\n");
}

static void count(const json_t *res, size_t *f, size_t *e, size_t *k)
{
    gf_verdict v;
    switch (res_elem(res, &v)) {
    case GF_JUNIT_ERROR: ++*e; break;
    case GF_JUNIT_SKIPPED: ++*k; break;
    case GF_JUNIT_FAILURE: ++*f; break;
    case GF_JUNIT_NONE: break;
    }
}

int gf_report_junit_doc(const json_t *doc, gf_buf *b)
{
    const json_t *results = json_object_get(doc, "results");
    size_t n = json_array_size(results);
    char when[64], host[256] = "localhost";
    snprintf(when, sizeof when, "%.19s", js(doc, "started")); /* xs:dateTime without the Z, as Jenkins writes it */
    gethostname(host, sizeof host - 1);
    size_t fails = 0, errors = 0, skips = 0;
    for (size_t i = 0; i < n; i++)
        count(json_array_get(results, i), &fails, &errors, &skips);
    gf_buf_puts(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    gf_buf_printf(b, "<testsuites name=\"genfence\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" time=\"%.3f\">\n", n,
                  fails, errors, json_number_value(json_object_get(doc, "seconds")));
    /* (skips: per <testsuite>: the junit-10 schema has no skipped here) */
    /* one suite per backend name, in first-seen order */
    const char **seen = calloc(n + 1, sizeof *seen);
    size_t n_seen = 0;
    for (size_t i = 0; seen && i < n; i++) {
        const char *name = backend_of(json_array_get(results, i));
        int dup = 0;
        for (size_t k = 0; k < n_seen; k++)
            dup |= !strcmp(seen[k], name);
        if (!dup)
            seen[n_seen++] = name;
    }
    const json_t *opts = json_object_get(doc, "options"), *gv = json_object_get(doc, "genfence");
    for (size_t s = 0; s < n_seen; s++) {
        size_t t = 0, f = 0, e = 0, k = 0;
        double time = 0;
        for (size_t i = 0; i < n; i++) {
            const json_t *res = json_array_get(results, i);
            if (strcmp(backend_of(res), seen[s]))
                continue;
            t++;
            time += json_number_value(json_object_get(res, "seconds"));
            count(res, &f, &e, &k);
        }
        gf_buf_puts(b, "  <testsuite name=\"genfence.");
        esc(b, seen[s]);
        gf_buf_printf(b,
                      "\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\" time=\"%.3f\" timestamp=\"%s\" "
                      "hostname=\"",
                      t, f, e, k, time, when);
        esc(b, host);
        gf_buf_puts(b, "\">\n    <properties>\n      <property name=\"genfence.version\" value=\"");
        esc(b, js(gv, "version"));
        gf_buf_puts(b, "\"/>\n      <property name=\"genfence.commit\" value=\"");
        esc(b, js(gv, "commit"));
        gf_buf_printf(b, "\"/>\n      <property name=\"threads\" value=\"%lld\"/>\n",
                      (long long)json_integer_value(json_object_get(opts, "threads")));
        if (!strcmp(seen[s], "engine")) /* the pseudo-backend: no backend of the run was tested by these */
            gf_buf_puts(b, "      <property name=\"genfence.runs_on\" value=\"the engine alone: kinds that reach no "
                           "slot of the run's backends\"/>\n");
        gf_buf_puts(b, "    </properties>\n");
        for (size_t i = 0; i < n; i++)
            if (!strcmp(backend_of(json_array_get(results, i)), seen[s]))
                testcase(b, results, json_array_get(results, i));
        gf_buf_puts(b, "  </testsuite>\n");
    }
    gf_buf_puts(b, "</testsuites>\n");
    if (!seen)
        b->oom = 1;
    free(seen);
    return b->oom ? -1 : 0;
}

int gf_report_junit_write_doc(const json_t *doc, const char *path)
{
    gf_buf b = {0};
    if (gf_report_junit_doc(doc, &b) != 0) {
        gf_buf_free(&b);
        errno = ENOMEM;
        return -1;
    }
    int rc = gf_write_atomic(path, b.p, b.n);
    gf_buf_free(&b);
    return rc;
}
