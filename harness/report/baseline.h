/* Baselines of known findings (docs/harness.md "Baselines of known findings"):
 * pytest's xfail with strict, for engines. A baseline file lists findings an
 * engine is known to have: a case id pattern, a backend, the verdict and a
 * reason pattern it gives, and where the finding is written up. `genfence run
 * --baseline FILE` turns a run that meets an entry into `known` (exit 0), a run
 * that passes where an entry expects a finding into `fixed` (exit 1 unless
 * --baseline-allow-fixed), and leaves every other failure as it was. `genfence
 * baseline RUN.json -o FILE` writes one from a run's failures.
 *
 * The file (YAML, read through the case loader's node tree):
 *   about: free text (optional): the engine version and CPU path it was measured on
 *   findings:
 *     - case: '^golden\.greedy\.sherlock$'   POSIX ERE matched against the whole case id
 *       backend: llamacpp:f32                the backend as requested (--backend), or its name
 *       verdict: fail                        fail, stale, crash, timeout or error
 *       reason: 'max \|delta\| '             POSIX ERE searched in the run's reason (optional: any)
 *       see: docs/llamacpp.md#...            where the finding is written up (optional)
 *       note: free text                      (optional)
 */
#ifndef GENFENCE_HARNESS_BASELINE_H
#define GENFENCE_HARNESS_BASELINE_H

#include <jansson.h>
#include <regex.h>
#include <stddef.h>

#include "report.h"

typedef struct gf_baseline_entry {
    const char *file; /* the baseline file it came from (gf_baseline.files) */
    int line, col;
    char *case_pat, *backend, *reason_pat, *see, *note;
    gf_verdict verdict;
    regex_t case_re, reason_re; /* reason_re only when reason_pat */
    size_t met;                 /* runs of this run it matched (case and backend) */
} gf_baseline_entry;

typedef struct gf_baseline {
    char **files;
    size_t n_files;
    gf_baseline_entry *e;
    size_t n;
    size_t known, fixed, differ, not_checked; /* after gf_baseline_apply */
    json_t *summary;                          /* run.json's "baseline" object (gf_run_info.baseline points here) */
} gf_baseline;

/* Add the entries of the baseline file at path to bl: 0, or -1 after
 * printing each "genfence: CMD: FILE:LINE:COL: message" (bl keeps what it
 * had). A file may hold no findings (an engine with none known). */
int gf_baseline_load(gf_baseline *bl, const char *path, const char *cmd);
/* Apply bl to a finished run (after the records are in, before the reports
 * are written): rewrites the verdict and reason of every run an entry meets
 * (job->baseline says what it was), tallies again (gf_run_tally), sets
 * r->baseline and prints the baseline's lines (known ones unless r->quiet).
 * Nothing happens when bl holds no file. */
void gf_baseline_apply(gf_baseline *bl, gf_run_info *r);
void gf_baseline_free(gf_baseline *bl);

/* The reason pattern genfence baseline writes for a reason: the reason with
 * ERE metacharacters escaped and every number a number class, anchored (a
 * reason over 400 bytes: its first 400, anchored at the start only).
 * malloc'd; it always matches the reason it came from. */
char *gf_baseline_reason_pattern(const char *reason);

#endif
