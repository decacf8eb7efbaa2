/* The report formats of a run (GF_REPORT_FORMAT_LIST, report.h): one JSON
 * document, each format's file written from it into the report folder. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

const gf_report_format gf_report_formats[] = {
#define X(name, file, write_doc, fatal) {#name, file, write_doc, fatal},
    GF_REPORT_FORMAT_LIST(X)
#undef X
        {NULL, NULL, NULL, 0},
};

int gf_report_write(const gf_run_info *r, const char *dir)
{
    json_t *doc = gf_report_json(r);
    if (!doc) {
        errno = ENOMEM;
        return -1;
    }
    int rc = 0, err = 0;
    for (const gf_report_format *f = gf_report_formats; f->name && rc == 0; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, f->file);
        if (f->write_doc(doc, path) == 0)
            continue;
        if (f->fatal) {
            err = errno;
            rc = -1;
        } else { /* said, not fatal */
            fprintf(stderr, "genfence: cannot write %s: %s\n", path, strerror(errno));
        }
    }
    json_decref(doc);
    errno = err;
    return rc;
}
