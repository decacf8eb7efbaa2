/* Reports of a run: console lines (and a progress line on a terminal), and
 * the report files of GF_REPORT_FORMAT_LIST (the JSON report, JUnit XML, the
 * HTML page), written atomically (temporary file + rename). */
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
    json_t *triangulation;  /* triangulate.h; NULL when not run */
    int as_declared;        /* a case's expect_verdict is what it must get (exit 0 as declared); 0: --raw-verdicts */
    size_t n_declared, n_as_declared; /* runs of cases with expect_verdict, those that got it */
    size_t required_unreached;        /* --require-backend backends that no case reached */
    json_t *baseline;                 /* --baseline: what the baseline found (baseline.h); NULL without one */
    json_t *stray_files;              /* files in the report folder genfence did not write (stray.c); NULL: none */
} gf_run_info;

/* How one run counts: passed, skipped or failed (a required skip is failed;
 * by default (not --raw-verdicts) a run of a case with expect_verdict is passed when it
 * got that verdict, failed when it got another, skipped when not run). */
typedef enum gf_outcome { GF_OUT_PASSED, GF_OUT_SKIPPED, GF_OUT_FAILED } gf_outcome;
/* declared: -1 not judged against expect_verdict, 1 as declared, 0 not. */
gf_outcome gf_outcome_of(gf_verdict v, int req, int declared);
int gf_outcome_exit(gf_verdict v, int req, int declared);
typedef struct gf_counts {
    size_t passed, failed, skipped, runs, reached; /* reached: a child ran it */
    int exit_status;
} gf_counts;
void gf_counts_add(gf_counts *c, gf_verdict v, int req, int declared, int ran);
/* "N passed, N failed, N skipped" */
int gf_counts_format(const gf_counts *c, char *buf, size_t cap);
/* The runs of one backend (b), of the engine alone, or of no backend (the
 * case's backends filter matched none). */
typedef enum gf_job_group { GF_GROUP_BACKEND, GF_GROUP_ENGINE, GF_GROUP_NONE } gf_job_group;
gf_counts gf_run_counts_of(const gf_run_info *r, gf_job_group g, const gf_backend_probe *b);
/* An available backend of the run that no case reached. */
int gf_backend_unreached(const gf_run_info *r, const gf_backend_probe *b);
/* The job judged against its case's expect_verdict (gf_outcome_of's declared). */
int gf_job_declared(const gf_run_info *r, const gf_job *j);
/* The exit status one job asks for (verdict, required, as declared). */
int gf_job_exit(const gf_run_info *r, const gf_job *j);
/* The summary's per-backend groups from a report's results and backends
 * (json.c and merge): {"by_backend": [{backend, requested, passed, failed,
 * skipped, runs, reached}], "engine_alone": {...}, "no_backend": {...}}. */
json_t *gf_report_groups(const json_t *results, const json_t *backends);
/* The last line of a run, from a report's summary (merge): each backend's
 * figures, then the engine alone's and no backend's, as the console's. */
void gf_report_groups_print(const json_t *summary);

/* Count verdicts and derive the exit status (2 wins over 1 wins over 0; a
 * skip of a required backend counts as a failure, and so does a required
 * backend that no case reached; an interrupted run exits 128 + the signal:
 * 130 for SIGINT, 143 for SIGTERM). */
void gf_run_tally(gf_run_info *r);
/* Is the job's backend required (--require-backend)? */
int gf_job_required(const gf_job *j);
/* The name a backend goes by in reports: as requested when that carries
 * options (llamacpp:q8_0, openblas:coretype=Haswell: two configs of one
 * module are two backends), else its name (a plugin path is this machine's). */
const char *gf_backend_label(const gf_backend_probe *b);

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
/* The same from a result's metrics and checks (JSON report). */
void gf_key_metrics(const json_t *metrics, const json_t *checks, char *buf, size_t cap);

/* ---- the report formats (formats.c) ----
 * X(name, file, write_doc, fatal): the files of a run's report, each written
 * from the one JSON document of the run (gf_report_json) into the report
 * folder, in this order, and moved into place together (gf_report_dir_commit).
 * fatal: a failure keeps the previous report; else it is said and the run
 * goes on. A new format is a writer and one row. The console (console.c) is
 * printed while the run goes, its summary after the report is in place; the
 * scoreboard (scoreboard.c, genfence scoreboard) tables several runs' run.json:
 * neither is a file of one run. */
/* clang-format off */
#define GF_REPORT_FORMAT_LIST(X)                                  \
    X(json,  "run.json",   gf_report_json_write_doc,  1)          \
    X(junit, "junit.xml",  gf_report_junit_write_doc, 1)          \
    X(html,  "index.html", gf_report_html_write_doc,  0)
/* clang-format on */
typedef struct gf_report_format {
    const char *name;
    const char *file;                                      /* in the report folder */
    int (*write_doc)(const json_t *doc, const char *path); /* 0, or -1 with errno set */
    int fatal;
} gf_report_format;
/* The rows of GF_REPORT_FORMAT_LIST, then {NULL}. */
extern const gf_report_format gf_report_formats[];
/* Every format into dir/<file>. 0, or -1 with errno set when a fatal one
 * could not be written (the others' failures are said on stderr). */
int gf_report_write(const gf_run_info *r, const char *dir);

/* ---- files ---- */
json_t *gf_report_json(const gf_run_info *r);
json_t *gf_report_environment(const gf_run_info *r);
/* The ISA flags of this CPU that matter (avx2 avx512f ... amx_int8), space-separated. */
const char *gf_report_cpu_flags(void);
int gf_report_json_write_doc(const json_t *doc, const char *path);
/* JUnit from a JSON report (run's, or merge's): junit.c */
struct gf_buf;
int gf_report_junit_doc(const json_t *doc, struct gf_buf *out);
int gf_report_junit_write_doc(const json_t *doc, const char *path);
/* HTML (html.c), from a JSON report: a self-contained page, no script, inline SVG. */
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
/* mkdir -p DIR; -1 with errno set. */
int gf_report_mkdir_p(const char *dir);
/* Create DIR if needed, lock it, make the staging folder; -1 with why set. */
int gf_report_dir_open(gf_report_dir *d, const char *dir, char *why, size_t why_cap);
/* Artifact paths in the jobs' records: STAGE/... -> DIR/... (where they will be). */
void gf_report_dir_rebase(const gf_report_dir *d, gf_job *jobs, size_t n_jobs);
/* Move the staged report into place (above). */
int gf_report_dir_commit(gf_report_dir *d);
/* The names in dir (a JSON object name -> true; empty when unreadable). */
json_t *gf_report_dir_listing(const char *dir);
/* What is in the report folder now that genfence did not write: names new
 * since before (a listing) that are not its own (run.json, junit.xml,
 * index.html, failures, reproduce, .lock, .staging.*), and files in this
 * run's failures/ that no result names; as paths under DIR (stray.c). */
json_t *gf_report_dir_strays(const gf_report_dir *d, json_t *before, const gf_job *jobs, size_t n_jobs);
/* Remove the staging folder, unlock. Safe on a cleared or closed d. */
void gf_report_dir_close(gf_report_dir *d);
/* SIGINT / SIGTERM from now on only recorded (the run's pool has its own
 * handler while it runs): the report is finished and nothing is left half
 * written; gf_report_signal_seen gives the first signal (0: none). */
void gf_report_catch_signals(void);
int gf_report_signal_seen(void);
/* "SIGINT", "SIGTERM", or "signal" */
const char *gf_report_signal_name(int sig);

/* The mechanism probes' table (probe x shape -> NMSE, bound, headroom,
 * verdict) of the run's probe cases on stdout; nothing when it has none
 * (probe_table.c). */
void gf_probe_table_print(const gf_run_info *r);

#endif
