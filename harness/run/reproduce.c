/* Reproduce lines: the shell command that reruns one job alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "sys.h"

char *gf_job_reproduce(const gf_job *j, const gf_run_opts *o)
{
    char file[2048], filt[1024], be[1200], idre[600];
    gf_shell_quote(file, sizeof file, j->c->file);
    gf_id_regex(idre, sizeof idre, j->c->id); /* the id is [A-Za-z0-9_.-] */
    gf_shell_quote(filt, sizeof filt, idre);
    be[0] = '\0';
    if (j->backend && j->backend->engine_) {
        /* on the engine alone: ref has no sample slot, so the case runs once, on the engine */
        snprintf(be, sizeof be, " --backend ref");
    } else if (j->backend) {
        char q[1100];
        gf_shell_quote(q, sizeof q, j->backend->requested);
        snprintf(be, sizeof be, " --backend %s", q);
    }
    char extra[1200] = "";
    if (o->threads != 1)
        snprintf(extra, sizeof extra, " --threads %d", o->threads);
    if (o->golden_dir) {
        char q[1100];
        gf_shell_quote(q, sizeof q, o->golden_dir);
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --golden-dir %s", q);
    }
    size_t n = strlen(file) + strlen(filt) + strlen(be) + strlen(extra) + 64;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "genfence run %s --filter %s%s%s", file, filt, be, extra);
    return out;
}
