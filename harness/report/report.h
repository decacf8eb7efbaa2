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
    const char *report_dir; /* the report folder as given (options.report_dir); NULL: none */
    int interrupted;        /* SIGINT / SIGTERM stopped the run: the signal, else 0 */
    json_t *triangulation; /* triangulate.h; NULL when not run */
} gf_run_info;

/* Count verdicts and derive the exit status (2 wins over 1 wins over 0; a
 * skip of a required backend counts as a failure; an interrupted run exits
 * 128 + the signal: 130 for SIGINT, 143 for SIGTERM). */
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

/* ---- the report directory (outdir.c) ----
 * A run locks DIR/.lock (flock; a second run into DIR exits 2 at once, with
 * the first one's pid), writes its report into DIR/.staging.PID (the
 * children's failing-step logits too) and, once it is complete, moves it into
 * place: failures/ exchanged with the old one (renameat2 RENAME_EXCHANGE),
 * then run.json, junit.xml and index.html each renamed over the old file.
 * The old report stays whole until then. Staging folders of killed runs are
 * removed by the next run. */
typedef struct gf_report_dir {
    char *dir;   /* as given */
    char *stage; /* DIR/.staging.PID: where this run writes */
    int lock_fd;
} gf_report_dir;
/* Create DIR if needed, lock it, make the staging folder; -1 with why set. */
int gf_report_dir_open(gf_report_dir *d, const char *dir, char *why, size_t why_cap);
/* Artifact paths in the jobs' records: STAGE/... -> DIR/... (where they will be). */
void gf_report_dir_rebase(const gf_report_dir *d, gf_job *jobs, size_t n_jobs);
/* Move the staged report into place (above). */
int gf_report_dir_commit(gf_report_dir *d);
/* Remove the staging folder, unlock. Safe on a cleared or closed d. */
void gf_report_dir_close(gf_report_dir *d);
/* SIGINT / SIGTERM from now on only recorded (the run's pool has its own
 * handler while it runs): the report is finished and nothing is left half
 * written; gf_report_signal_seen gives the first signal (0: none). */
void gf_report_catch_signals(void);
int gf_report_signal_seen(void);
/* "SIGINT", "SIGTERM", or "signal" */
const char *gf_report_signal_name(int sig);

#endif
