/* Verdicts: one table (GF_VERDICT_LIST) that every report, the tally and the
 * exit status read, and the one mapping from an engine status to a verdict.
 *
 * A verdict is what one (case, backend) run ended with. Its columns:
 *   name      the word in reports and in `expect_verdict:` ("pass", ...)
 *   label     the console word (failures in capitals)
 *   exit      the exit status it asks for: 0, 1 or 2 (2 wins over 1 over 0)
 *   severity  which of two verdicts a single run keeps (the higher)
 *   junit     the JUnit element it becomes (none, skipped, failure, error: the
 *             run did not complete: crash, timeout, error)
 * A skip of a backend named with --require-backend is a failure: exit 1,
 * JUnit <failure type="required-skip">.
 *
 * known and fixed are given only by a baseline of known findings (genfence
 * run --baseline, harness/report/baseline.c), never by a child: known is a
 * run whose verdict and reason are a baseline entry's (exit 0, JUnit skipped
 * with the finding's text); fixed is a run that passed where an entry expects
 * a finding (exit 1, or 0 after gf_verdict_allow_fixed: --baseline-allow-fixed). */
#ifndef GENFENCE_HARNESS_VERDICT_H
#define GENFENCE_HARNESS_VERDICT_H

#include "genfence/status.h"

typedef enum gf_junit_elem {
    GF_JUNIT_NONE = 0, /* a passing <testcase/> */
    GF_JUNIT_SKIPPED,
    GF_JUNIT_FAILURE,
    GF_JUNIT_ERROR,
} gf_junit_elem;

/* clang-format off */
/*        ID             name             label            exit sev junit */
#define GF_VERDICT_LIST(X)                                                         \
    X(PASS,          "pass",          "pass",          0, 0, GF_JUNIT_NONE)    \
    X(PASS_NEAR_TIE, "pass-near-tie", "pass-near-tie", 0, 1, GF_JUNIT_NONE)    \
    X(SKIP,          "skip",          "skip",          0, 2, GF_JUNIT_SKIPPED) \
    X(KNOWN,         "known",         "known",         0, 3, GF_JUNIT_SKIPPED) \
    X(FIXED,         "fixed",         "FIXED",         1, 4, GF_JUNIT_FAILURE) \
    X(FAIL,          "fail",          "FAIL",          1, 5, GF_JUNIT_FAILURE) \
    X(STALE,         "stale",         "STALE",         1, 6, GF_JUNIT_FAILURE) \
    X(CRASH,         "crash",         "CRASH",         1, 8, GF_JUNIT_ERROR)   \
    X(TIMEOUT,       "timeout",       "TIMEOUT",       1, 7, GF_JUNIT_ERROR)   \
    X(ERROR,         "error",         "ERROR",         2, 9, GF_JUNIT_ERROR)
/* clang-format on */

typedef enum gf_verdict {
#define GF_VERDICT_ENUM(id, name, label, exit, sev, junit) GF_V_##id,
    GF_VERDICT_LIST(GF_VERDICT_ENUM)
#undef GF_VERDICT_ENUM
        GF_V_COUNT
} gf_verdict;

const char *gf_verdict_str(gf_verdict v);             /* "pass", "pass-near-tie", ... ("?" if unknown) */
const char *gf_verdict_label(gf_verdict v);           /* console: "pass", "FAIL", ... */
int gf_verdict_parse(const char *s, gf_verdict *out); /* 1 if known */
/* The exit status a verdict asks for: 0, 1 or 2 (a skip is 1 when the
 * backend was required with --require-backend). */
int gf_verdict_exit(gf_verdict v, int backend_required);
/* Did the run count as passed / skipped (not failed)? A required skip is failed. */
int gf_verdict_passed(gf_verdict v);
int gf_verdict_skipped(gf_verdict v, int backend_required);
/* The JUnit element (a required skip is a failure). */
gf_junit_elem gf_verdict_junit(gf_verdict v, int backend_required);
/* Is v one that only a baseline gives (known, fixed)? A child's record or a
 * case's expect_verdict may not name one. */
int gf_verdict_of_baseline(gf_verdict v);
/* --baseline-allow-fixed: from now on a fixed verdict exits 0 and counts as
 * passed (JUnit: a passing testcase). Sticky for the process. */
void gf_verdict_allow_fixed(int on);
/* Combine exit statuses: 2 wins over 1 wins over 0. */
int gf_exit_combine(int a, int b);
/* The more severe of two verdicts a single run can have (error > crash >
 * timeout > stale > fail > fixed > known > skip > pass-near-tie > pass). */
gf_verdict gf_verdict_worse(gf_verdict a, gf_verdict b);

/* The one status -> verdict mapping, for an engine or backend call that
 * failed: bad input (the case's or the user's: GF_E_IO, GF_E_FORMAT,
 * GF_E_NOT_FOUND, GF_E_INVALID_ARG, and GF_E_CONTEXT_LIMIT: the request does
 * not fit the model's positions) -> error; the backend cannot run it here
 * (GF_E_UNAVAILABLE, GF_E_UNSUPPORTED) -> skip; anything else (the backend
 * misbehaved) -> fail. GF_OK -> pass. */
gf_verdict gf_verdict_of_status(gf_status st);

#endif
