/* Reports of a run: console lines (and a progress line on a terminal), the
 * JSON report and JUnit XML, written atomically (temporary file + rename). */
#ifndef GENFENCE_HARNESS_REPORT_H
#define GENFENCE_HARNESS_REPORT_H

#include <jansson.h>
#include <stdio.h>
#include <time.h>

#include "runner.h"

#define GF_REPORT_SCHEMA_VERSION 1

typedef struct gf_run_info {
    int argc;
    char **argv;    /* `run` and its arguments */
    time_t started; /* wall clock */
    double seconds; /* the whole run */
    const gf_run_opts *opts;
    const char *filter;   /* --filter or NULL */
    char **kinds, **tags; /* --kind / --tag values */
    size_t n_kinds, n_tags;
    int shard_i, shard_n; /* 1-based; 0/0: no sharding */
    int oversubscribe;
    int default_backends; /* no --backend given: every available built-in */
    gf_backend_probe *backends;
    size_t n_backends;
    gf_job *jobs;
    size_t n_jobs;
    const gf_case_set *cases;
    size_t n_selected; /* cases after filters and sharding */
    /* filled by gf_run_tally */
    size_t by_verdict[GF_V_COUNT];
    size_t passed, failed, skipped, required_skips;
    int exit_status;
    int tty;   /* stdout is a terminal */
    int quiet; /* failures and the summary only */
    const char *json_path, *junit_path;
    json_t *triangulation; /* triangulate.h; NULL when not run */
} gf_run_info;

/* Count verdicts and derive the exit status (2 wins over 1 wins over 0; a
 * skip of a required backend counts as a failure). */
void gf_run_tally(gf_run_info *r);
/* Is the job's backend required (--require-backend)? */
int gf_job_required(const gf_job *j);

/* ---- console ---- */
void gf_console_header(const gf_run_info *r);
void gf_console_started(gf_job *j, size_t running, size_t done, size_t total, void *user); /* gf_run_hooks */
void gf_console_finished(gf_job *j, size_t done, size_t total, void *user);
/* A job decided without a child (skips): same line as a finished one. */
void gf_console_line(const gf_run_info *r, const gf_job *j);
/* Report paths, verdict counts and the final "N passed, N failed, N skipped". */
void gf_console_summary(const gf_run_info *r);
/* "max|d| 2.1e-06 @12  margin 1.9e-02  sf 9.0e+03  ties 0" or "5/5 checks". */
void gf_job_key_metrics(const gf_job *j, char *buf, size_t cap);

/* ---- files ---- */
json_t *gf_report_json(const gf_run_info *r);
json_t *gf_report_environment(const gf_run_info *r);
int gf_report_json_write(const gf_run_info *r, const char *path);
int gf_report_junit_write(const gf_run_info *r, const char *path);
/* HTML (html.c), from a JSON report: a self-contained page, no script, inline SVG. */
struct gf_buf;
int gf_report_html_doc(const json_t *doc, struct gf_buf *out);
int gf_report_html_write_doc(const json_t *doc, const char *path);
/* genfence compare --html: cmp is compare's JSON document, a and b the two reports. */
int gf_report_html_compare(const json_t *cmp, const json_t *a, const json_t *b, struct gf_buf *out);

#endif
