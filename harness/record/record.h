/* The run record of one (case, backend), in the child: what a kind fills
 * (checks, metrics, seeds, artifacts, verdict) and the runner sends to the
 * parent. The helpers kinds share (key readers, prompts, token sources, the
 * batch-vs-single comparison, the backend's sample slot) are one layer up, in
 * harness/kit/; the kinds themselves in harness/kinds/ (kinds.h). */
#ifndef GENFENCE_HARNESS_RECORD_H
#define GENFENCE_HARNESS_RECORD_H

#include <jansson.h>
#include <stdint.h>

#include "compare.h"
#include "session.h"

typedef struct gf_krun gf_krun;

/* ---- the run of one (case, backend), in the child ---- */

struct gf_krun {
    const char *backend;      /* as requested (name or plugin path) */
    const char *backend_name; /* as the backend reports it */
    int32_t threads;
    gf_compute_dtype dtype; /* the backend's declared compute dtype (fp32 if undeclared) */
    const char *weights;    /* the backend's info weights ("" / NULL: as given); "served": a server's
                               top-k log-probabilities, no full logits (backends/http, docs/http.md) */
    int backend_has_sample; /* the backend has its own `sample` slot */
    /* Sampler-only kinds on a backend with a `sample` slot: its table (the
     * runner opens it in the child; else NULL). Every sampling call of the
     * case then also goes through the slot (model NULL), tallied below. */
    const gf_backend_ops *sample_ops;
    /* The speculate slot's kind (GF_KIND_REACHES_SPECULATE) on a backend
     * with the slot: its table, opened by the runner in the child; else NULL. */
    const gf_backend_ops *spec_ops;
    /* The logprobs slot's kind (GF_KIND_REACHES_LOGPROBS) likewise. */
    const gf_backend_ops *lp_ops;
    int sampler_noted; /* gf_k_note_sampler ran */
    long long slot_calls, slot_rows, slot_mismatches, slot_errors;
    long long slot_unsupported; /* calls the slot declined (GF_E_UNSUPPORTED: parameters it does not take) */
    char slot_first[512];       /* the first mismatch or error */
    char slot_declined[256];    /* why the first declined call was declined */
    gf_session *session;        /* kinds that reach the model slots: open; else NULL */
    const char *artifact_dir;   /* where failing-step logits go (NULL: nowhere) */
    const char *artifact_stem;  /* "<id>@<backend>" */
    const char *golden_dir;     /* run --golden-dir: goldens are read from here (NULL: each case's own) */
    const char *stat_note;      /* the plan's word on the statistical tier for a backend with lower-precision
                                  weights that no statistical case judges (harness/run/plan.c), or NULL */
    const char *model;          /* the case's model directory (NULL: none), named in bad-input reasons */

    json_t *checks;        /* [{name, passed, detail}] */
    json_t *metrics;       /* {...}; "summary" holds the comparison metrics */
    json_t *seeds;         /* {what: seed} */
    json_t *artifacts;     /* [path] */
    gf_verdict verdict;    /* so far */
    char reason[1024];     /* why (first failure, error or skip; or a near tie) */
    char failed_call[128]; /* what gf_k_status failed on (the record's failed_call; "" none) */
    gf_cmp summary;        /* every comparison merged */
    int has_summary;
    /* A kind that replays its calls traced itself (precision) sets localized;
     * localization is its reading to put in the record (NULL: none worth
     * printing, as for a stored-finer finding). The runner then runs none. */
    int localized;
    json_t *localization;
};

void gf_krun_init(gf_krun *k);
void gf_krun_clear(gf_krun *k);
/* The record as JSON (verdict, reason, checks, metrics, seeds, artifacts). */
json_t *gf_krun_record(const gf_krun *k);

/* A named check; a failed one makes the run fail (the first one gives the
 * reason). Returns ok. */
int gf_k_check(gf_krun *k, int ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void gf_k_fail(gf_krun *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gf_k_error(gf_krun *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gf_k_skip(gf_krun *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A golden no longer matches its case or model (docs/goldens.md). */
void gf_k_stale(gf_krun *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An engine call failed: bad input -> error, unavailable/unsupported -> skip,
 * anything else (the backend misbehaved) -> fail. what: "cached generate". */
void gf_k_status(gf_krun *k, gf_status st, const char *what);

void gf_k_metric(gf_krun *k, const char *key, double v);
void gf_k_metric_int(gf_krun *k, const char *key, long long v);
void gf_k_metric_json(gf_krun *k, const char *key, json_t *v); /* steals v */
void gf_k_seed(gf_krun *k, const char *what, uint64_t seed);

/* Record a comparison under metrics.comparisons[label], fold it into the
 * summary and apply its verdict (fail / pass-near-tie). */
void gf_k_compare(gf_krun *k, const char *label, const gf_cmp *c);

/* Write the logits of both sides at a failing step next to the report:
 * <artifact_dir>/<stem>.<label>.safetensors with F32 tensors "reference" and
 * "test" (V each) and metadata naming the sides, the step and the case. */
void gf_k_write_logits(gf_krun *k, const char *label, int32_t step, const float *ref, const char *ref_side,
                       const float *test, const char *test_side, int32_t V);

/* "[0, 1, 2]" into buf (truncated to cap). */
const char *gf_k_ids_str(char *buf, size_t cap, const int32_t *v, size_t n);

#endif
