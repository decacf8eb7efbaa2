/* The model suite (docs/cases.md "The model suite", docs/goldens.md "Goldens
 * on demand"): `run --model DIR`, `list --model DIR` and `goldens --model
 * DIR` instantiate the templates of cases/model/ for the checkpoint in DIR
 * (a plain Hugging Face directory or a hub cache folder), with its goldens
 * content-addressed in the user's cache folder (model_suite.c). */
#ifndef GENFENCE_HARNESS_CLI_MODEL_SUITE_H
#define GENFENCE_HARNESS_CLI_MODEL_SUITE_H

#include <stddef.h>
#include <stdio.h>

/* Where the goldens come from. */
typedef enum gf_golden_source {
    GF_GOLDENS_TRANSFORMERS = 0, /* tools/reference/golden.py */
    GF_GOLDENS_REF = 1,          /* genfence bless --backend ref, marked as such */
} gf_golden_source;

typedef struct gf_model_suite {
    char *given;  /* --model as given */
    char *dir;    /* the model folder (a hub cache folder resolved to its snapshot), absolute */
    char *layout; /* how DIR was read, for the header */
    char model_hash[65];
    gf_golden_source source;
    char *python;     /* the interpreter that makes transformers goldens; NULL if none fits */
    char *python_why; /* why none (what to install), when python is NULL */
    char *generator;  /* the generator versions the goldens' addresses use */
    char *cache;      /* <cache folder>/genfence */
    char *suite_file; /* the instantiated case file a run reads (in the cache) */
    char *make_file;  /* the same with every golden at its address (what the maker writes into) */
    char **golden_ids, **golden_paths;
    size_t n_goldens;
    char **left_out; /* "ID: why" */
    size_t n_left_out;
    char **stale; /* "ID: ..." a cached golden of another model content, case or generator */
    size_t n_stale;
    char *stat_ids;         /* the distribution_match cases, comma-separated; NULL if none */
    char *calibration_path; /* their calibration table's address in the cache (it may not exist) */
} gf_model_suite;

/* Instantiate templates (NULL / 0: the bundled cases/model/ *.yaml) for the
 * model at arg into ms. 0 ok; -1 after printing the error (bad input: exit 2). */
int gf_model_suite_open(gf_model_suite *ms, const char *cmd, const char *arg, gf_golden_source source,
                        const char *const *templates, size_t n_templates);
void gf_model_suite_free(gf_model_suite *ms); /* NULL-safe */
/* How many of the suite's goldens are in the cache. */
size_t gf_model_suite_goldens_cached(const gf_model_suite *ms);
/* The header: model, layout, hash, cache, goldens cached / missing, cases left out. */
void gf_model_suite_print(const gf_model_suite *ms, const char *cmd, FILE *f);
/* Make the goldens not yet cached (all with force). 0 ok, 1 a maker failed,
 * 2 no maker (no torch: the message says how to get it and offers ref). */
int gf_model_suite_make_goldens(gf_model_suite *ms, const char *cmd, int force, int threads);
/* Is the calibration table at its address (the run judges the statistical
 * cases by its null)? */
int gf_model_suite_calibrated(const gf_model_suite *ms);
/* Measure the statistical cases' null (tools/calibrate/calibrate.py: reseeds
 * x the honest f32 backends) into the table's address, unless it is there
 * (all with force); corpus NULL: calibrate.py's default. 0 ok, 1 the
 * calibration failed, 2 no python or no statistical case. */
int gf_model_suite_calibrate(gf_model_suite *ms, const char *cmd, int force, int reseeds, const char *corpus);

/* Shared by model_suite.c and model_suite_make.c: a regular file? a path
 * under the repository (or share/genfence), NULL if none; mkdir -p (0 ok). */
int gf_ms_is_file(const char *p);
char *gf_ms_root_path(const char *rel);
int gf_ms_mkdirs(const char *path);

#endif
