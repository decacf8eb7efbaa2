/* JUnit XML: one <testsuite> per backend, one <testcase> per (case, backend). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "genfence/version.h"
#include "krun.h"
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

/* The stderr tail from its first whole character (the pool cut it at a byte offset). */
static const char *tail_start(const char *s) { return s + gf_utf8_tail_start(s, strlen(s)); }

static const char *backend_of(const gf_job *j) { return j->backend ? j->backend->name : "none"; }

/* Another job with the same case and backend name (exec:A and exec:B are
 * both "exec"): then the test name carries the backend as requested. */
static int name_shared(const gf_run_info *r, const gf_job *j)
{
    for (size_t i = 0; i < r->n_jobs; i++) {
        const gf_job *o = &r->jobs[i];
        if (o != j && o->c == j->c && !strcmp(backend_of(o), backend_of(j)))
            return 1;
    }
    return 0;
}

/* One <testcase> per (case, backend): classname genfence.<backend>.<kind>,
 * name the case id (unique pairs: CI tools key on them). */
static void testcase(gf_buf *b, const gf_run_info *r, const gf_job *j)
{
    gf_buf_puts(b, "    <testcase classname=\"genfence.");
    esc(b, backend_of(j));
    gf_buf_puts(b, ".");
    esc(b, j->c->kind->name);
    gf_buf_puts(b, "\" name=\"");
    esc(b, j->c->id);
    if (j->backend && name_shared(r, j)) {
        gf_buf_puts(b, " [");
        esc(b, j->backend->requested);
        gf_buf_puts(b, "]");
    }
    gf_buf_puts(b, "\" file=\"");
    esc(b, j->c->file);
    gf_buf_printf(b, "\" line=\"%d\" time=\"%.3f\">\n", j->c->line, j->seconds);
    const char *reason = j->reason ? j->reason : "";
    int req = gf_job_required(j);
    gf_junit_elem elem = gf_verdict_junit(j->verdict, req);
    if (elem == GF_JUNIT_FAILURE || elem == GF_JUNIT_ERROR) {
        const char *tag = elem == GF_JUNIT_ERROR ? "error" : "failure";
        gf_buf_printf(b, "      <%s type=\"", tag);
        gf_buf_puts(b, j->verdict == GF_V_SKIP ? "required-skip" : gf_verdict_str(j->verdict));
        gf_buf_puts(b, "\" message=\"");
        esc(b, reason);
        gf_buf_puts(b, "\">");
        esc(b, reason);
        char *rep = gf_job_reproduce(j, r->opts);
        if (rep) {
            gf_buf_puts(b, "\nreproduce: ");
            esc(b, rep);
        }
        free(rep);
        json_t *arts = j->record ? json_object_get(j->record, "artifacts") : NULL;
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
    gf_job_key_metrics(j, metrics, sizeof metrics);
    gf_buf_puts(b, "      <system-out>verdict: ");
    esc(b, gf_verdict_str(j->verdict));
    if (metrics[0]) {
        gf_buf_puts(b, "; ");
        esc(b, metrics);
    }
    if (j->verdict == GF_V_PASS_NEAR_TIE) {
        gf_buf_puts(b, "; ");
        esc(b, reason);
    }
    gf_buf_puts(b, "</system-out>\n");
    if (j->stderr_tail && j->stderr_tail[0]) {
        gf_buf_puts(b, "      <system-err>");
        esc(b, tail_start(j->stderr_tail));
        gf_buf_puts(b, "</system-err>\n");
    }
    gf_buf_puts(b, "    </testcase>\n");
}

int gf_report_junit_write(const gf_run_info *r, const char *path)
{
    gf_buf b = {0};
    char when[64], host[256] = "localhost";
    struct tm tm;
    gmtime_r(&r->started, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    gethostname(host, sizeof host - 1);
    size_t fails = 0, errors = 0, skips = 0;
    for (size_t i = 0; i < r->n_jobs; i++) {
        const gf_job *j = &r->jobs[i];
        switch (gf_verdict_junit(j->verdict, gf_job_required(j))) {
        case GF_JUNIT_ERROR: errors++; break;
        case GF_JUNIT_SKIPPED: skips++; break;
        case GF_JUNIT_FAILURE: fails++; break;
        case GF_JUNIT_NONE: break;
        }
    }
    gf_buf_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    gf_buf_printf(
        &b,
        "<testsuites name=\"genfence\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" time=\"%.3f\">\n", r->n_jobs,
        fails, errors, r->seconds); /* skips: per <testsuite> (Jenkins' junit schema has no skipped here) */
    (void)skips;
    /* one suite per backend name, in first-seen order */
    const char **seen = calloc(r->n_jobs + 1, sizeof *seen);
    size_t n_seen = 0;
    for (size_t i = 0; seen && i < r->n_jobs; i++) {
        const char *name = backend_of(&r->jobs[i]);
        int dup = 0;
        for (size_t k = 0; k < n_seen; k++)
            dup |= !strcmp(seen[k], name);
        if (!dup)
            seen[n_seen++] = name;
    }
    for (size_t s = 0; s < n_seen; s++) {
        size_t t = 0, f = 0, e = 0, k = 0;
        double time = 0;
        for (size_t i = 0; i < r->n_jobs; i++) {
            const gf_job *j = &r->jobs[i];
            if (strcmp(backend_of(j), seen[s]))
                continue;
            t++;
            time += j->seconds;
            switch (gf_verdict_junit(j->verdict, gf_job_required(j))) {
            case GF_JUNIT_ERROR: e++; break;
            case GF_JUNIT_SKIPPED: k++; break;
            case GF_JUNIT_FAILURE: f++; break;
            case GF_JUNIT_NONE: break;
            }
        }
        gf_buf_puts(&b, "  <testsuite name=\"genfence.");
        esc(&b, seen[s]);
        gf_buf_printf(&b,
                      "\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\" time=\"%.3f\" timestamp=\"%s\" "
                      "hostname=\"",
                      t, f, e, k, time, when);
        esc(&b, host);
        gf_buf_puts(&b, "\">\n    <properties>\n");
        gf_buf_printf(&b, "      <property name=\"genfence.version\" value=\"%s\"/>\n", GENFENCE_VERSION);
        gf_buf_printf(&b, "      <property name=\"genfence.commit\" value=\"%s\"/>\n", GENFENCE_COMMIT);
        gf_buf_printf(&b, "      <property name=\"threads\" value=\"%d\"/>\n", r->opts->threads);
        gf_buf_puts(&b, "    </properties>\n");
        for (size_t i = 0; i < r->n_jobs; i++)
            if (!strcmp(backend_of(&r->jobs[i]), seen[s]))
                testcase(&b, r, &r->jobs[i]);
        gf_buf_puts(&b, "  </testsuite>\n");
    }
    gf_buf_puts(&b, "</testsuites>\n");
    free(seen);
    if (b.oom) {
        gf_buf_free(&b);
        errno = ENOMEM;
        return -1;
    }
    int rc = gf_write_atomic(path, b.p, b.n);
    gf_buf_free(&b);
    return rc;
}
