/* The tally (harness/report/tally.c): how each verdict of the verdict table
 * counts (so a verdict added to the table counts without a change here), the
 * --as-declared judgement, and the per-backend groups of a JSON report
 * (issue 25: the engine alone's runs apart from each backend's own). */
#include <criterion/criterion.h>
#include <string.h>

#include "report.h"

Test(report_tally, every_verdict_counts_as_the_table_says)
{
    for (int v = 0; v < GF_V_COUNT; v++)
        for (int req = 0; req <= 1; req++) {
            gf_counts c = {0};
            gf_counts_add(&c, (gf_verdict)v, req, -1, 1);
            cr_expect_eq(c.runs, 1);
            cr_expect_eq(c.passed + c.failed + c.skipped, 1, "%s counted %zu times", gf_verdict_str((gf_verdict)v),
                         c.passed + c.failed + c.skipped);
            cr_expect_eq(c.passed, (size_t)gf_verdict_passed((gf_verdict)v), "%s", gf_verdict_str((gf_verdict)v));
            cr_expect_eq(c.skipped, (size_t)gf_verdict_skipped((gf_verdict)v, req), "%s",
                         gf_verdict_str((gf_verdict)v));
            cr_expect_eq(c.exit_status, gf_verdict_exit((gf_verdict)v, req), "%s", gf_verdict_str((gf_verdict)v));
        }
}

Test(report_tally, as_declared)
{
    /* as declared: passed, exit 0, whatever the verdict (a must-fail case that failed) */
    cr_expect_eq(gf_outcome_of(GF_V_FAIL, 0, 1), GF_OUT_PASSED);
    cr_expect_eq(gf_outcome_exit(GF_V_ERROR, 0, 1), 0);
    /* not as declared: failed, exit 1, a pass included; an error (bad input, an
     * unusable backend) keeps its exit 2 whatever the case declared */
    cr_expect_eq(gf_outcome_of(GF_V_PASS, 0, 0), GF_OUT_FAILED);
    cr_expect_eq(gf_outcome_exit(GF_V_PASS, 0, 0), 1);
    cr_expect_eq(gf_outcome_exit(GF_V_CRASH, 0, 0), 1);
    cr_expect_eq(gf_outcome_exit(GF_V_ERROR, 0, 0), 2);
    /* not run (its backend not named): a skip, as any skip */
    cr_expect_eq(gf_outcome_of(GF_V_SKIP, 0, 0), GF_OUT_SKIPPED);
    cr_expect_eq(gf_outcome_exit(GF_V_SKIP, 0, 0), 0);
    /* a required skip stays a failure */
    cr_expect_eq(gf_outcome_of(GF_V_SKIP, 1, 0), GF_OUT_FAILED);
}

Test(report_tally, groups_keep_the_engine_apart)
{
    json_t *results = json_loads(
        "[{\"backend\": \"mine\", \"backend_requested\": \"/p/libmine.so\", \"verdict\": \"pass\", \"process\": {}},"
        " {\"backend\": \"mine\", \"backend_requested\": \"/p/libmine.so\", \"verdict\": \"skip\"},"
        " {\"backend\": \"engine\", \"backend_requested\": \"engine\", \"verdict\": \"pass\", \"process\": {}},"
        " {\"backend\": \"engine\", \"backend_requested\": \"engine\", \"verdict\": \"pass\", \"process\": {}},"
        " {\"backend\": \"engine\", \"backend_requested\": \"engine\", \"verdict\": \"fail\", \"process\": {}},"
        " {\"backend\": null, \"backend_requested\": null, \"verdict\": \"skip\"}]",
        0, NULL);
    json_t *backends =
        json_loads("[{\"requested\": \"/p/libmine.so\", \"name\": \"mine\", \"available\": true},"
                   " {\"requested\": \"ref\", \"name\": \"ref\", \"available\": true, \"required\": true}]",
                   0, NULL);
    cr_assert(results && backends);
    json_t *g = gf_report_groups(results, backends);
    json_t *by = json_object_get(g, "by_backend");
    cr_assert_eq(json_array_size(by), 2);
    json_t *mine = json_array_get(by, 0), *ref = json_array_get(by, 1);
    cr_expect_str_eq(json_string_value(json_object_get(mine, "backend")), "mine");
    cr_expect_eq(json_integer_value(json_object_get(mine, "passed")), 1);
    cr_expect_eq(json_integer_value(json_object_get(mine, "skipped")), 1);
    cr_expect_eq(json_integer_value(json_object_get(mine, "reached")), 1);
    cr_expect_eq(json_integer_value(json_object_get(ref, "runs")), 0, "ref reached nothing");
    cr_expect(json_is_true(json_object_get(ref, "required")));
    json_t *eng = json_object_get(g, "engine_alone"), *none = json_object_get(g, "no_backend");
    cr_expect_eq(json_integer_value(json_object_get(eng, "passed")), 2);
    cr_expect_eq(json_integer_value(json_object_get(eng, "failed")), 1);
    cr_expect_eq(json_integer_value(json_object_get(none, "skipped")), 1);
    json_decref(g);
    json_decref(results);
    json_decref(backends);
}
