/* The tally of a run and its exit status: decided here, once, from the
 * verdict table (verdict/verdict.h). */
#include <string.h>

#include "report.h"

int gf_job_required(const gf_job *j) { return j->backend && j->backend->required; }

void gf_run_tally(gf_run_info *r)
{
    memset(r->by_verdict, 0, sizeof r->by_verdict);
    r->passed = r->failed = r->skipped = r->required_skips = 0;
    int exit_status = 0;
    for (size_t i = 0; i < r->n_jobs; i++) {
        const gf_job *j = &r->jobs[i];
        int req = gf_job_required(j);
        r->by_verdict[j->verdict]++;
        if (gf_verdict_passed(j->verdict))
            r->passed++;
        else if (gf_verdict_skipped(j->verdict, req))
            r->skipped++;
        else
            r->failed++;
        if (j->verdict == GF_V_SKIP && req)
            r->required_skips++;
        exit_status = gf_exit_combine(exit_status, gf_verdict_exit(j->verdict, req));
    }
    r->exit_status = r->interrupted ? 128 + r->interrupted : exit_status;
}
