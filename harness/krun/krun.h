/* The run of one (case, backend), in the child: the record a kind fills
 * (checks, metrics, seeds, artifacts, verdict) and the helpers kinds share
 * (key readers, prompts, the batch-vs-single comparison, the backend's sample
 * slot). The kinds themselves are in harness/kinds/ (kinds.h). */
#ifndef GENFENCE_HARNESS_KRUN_H
#define GENFENCE_HARNESS_KRUN_H

#include <jansson.h>
#include <stdint.h>

#include "case.h"
#include "compare.h"
#include "session.h"

typedef struct gf_krun gf_krun;

/* ---- the run of one (case, backend), in the child ---- */

struct gf_krun {
    const char *backend;       /* as requested (name or plugin path) */
    const char *backend_name;  /* as the backend reports it */
    int32_t threads;
    gf_compute_dtype dtype;    /* the backend's declared compute dtype (fp32 if undeclared) */
    int backend_has_sample;    /* the backend has its own `sample` slot */
    /* Sampler-only kinds on a backend with a `sample` slot: its table (the
     * runner opens it in the child; else NULL). Every sampling call of the
     * case then also goes through the slot (model NULL), tallied below. */
    const gf_backend_ops *sample_ops;
    int sampler_noted;         /* gf_k_note_sampler ran */
    long long slot_calls, slot_rows, slot_mismatches, slot_errors;
    long long slot_unsupported; /* calls the slot declined (GF_E_UNSUPPORTED: parameters it does not take) */
    char slot_first[512];      /* the first mismatch or error */
    char slot_declined[256];   /* why the first declined call was declined */
    gf_session *session;       /* kinds that reach the model slots: open; else NULL */
    const char *artifact_dir;  /* where failing-step logits go (NULL: nowhere) */
    const char *artifact_stem; /* "<id>@<backend>" */
    const char *golden_dir;    /* run --golden-dir: goldens are read from here (NULL: each case's own) */
    const char *stat_note;     /* the plan's word on the statistical tier for a backend with lower-precision
                                  weights that no statistical case judges (harness/run/plan.c), or NULL */
    const char *model;         /* the case's model directory (NULL: none), named in bad-input reasons */

    json_t *checks;            /* [{name, passed, detail}] */
    json_t *metrics;           /* {...}; "summary" holds the comparison metrics */
    json_t *seeds;             /* {what: seed} */
    json_t *artifacts;         /* [path] */
    gf_verdict verdict;        /* so far */
    char reason[1024];         /* why (first failure, error or skip; or a near tie) */
    char failed_call[128];     /* what gf_k_status failed on (the record's failed_call; "" none) */
    gf_cmp summary;            /* every comparison merged */
    int has_summary;
};

void gf_krun_init(gf_krun *k);
void gf_krun_clear(gf_krun *k);
/* The record as JSON (verdict, reason, checks, metrics, seeds, artifacts). */
json_t *gf_krun_record(const gf_krun *k);

/* A named check; a failed one makes the run fail (the first one gives the
 * reason). Returns ok. */
int gf_k_check(gf_krun *k, int ok, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
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
void gf_k_write_logits(gf_krun *k, const char *label, int32_t step, const float *ref,
                       const char *ref_side, const float *test, const char *test_side, int32_t V);

/* ---- helpers shared by kinds ---- */

/* Sampler keys of a mapping: temperature, top_k, top_p (null = off), seed.
 * Defaults come from *p. Out-of-range values (gf_sampler_validate) are errors
 * at load time, at the mapping. */
int gf_y_sampler(gf_cctx *ctx, const gf_ynode *map, gf_sampler_params *p);
/* The same without the range checks of gf_sampler_validate (sampler_errors
 * feeds invalid parameters to the sampler on purpose). */
int gf_y_sampler_raw(gf_cctx *ctx, const gf_ynode *map, gf_sampler_params *p);
json_t *gf_sampler_json(const gf_sampler_params *p);

/* `probs` or `logits` (exactly one, unless optional): V float logits
 * (probabilities become their logs). Logits follow the sampler's rule (no
 * NaN, no +inf) unless flags has GF_Y_ANY_LOGITS (a
 * kind that feeds the sampler's refusals). Returns 1 read, 0 absent, -1 error. */
enum { GF_Y_ANY_LOGITS = 0x100 };
int gf_y_probs_or_logits(gf_cctx *ctx, const gf_ynode *map, int flags, float **logits,
                         int32_t *V, int *from_probs);

/* An expected stop (context_limit, eos): stop_reason and/or total_tokens. */
typedef struct gf_stop_expect {
    int has_stop, has_total;
    int stop;                  /* index into gf_stop_words / gf_stop_values */
    long long total;
} gf_stop_expect;
extern const char *const gf_stop_words[];      /* "eos", "length", "context_limit", NULL */
extern const gf_stop_reason gf_stop_values[];  /* the gf_stop_reason of each word */

/* A token source (stream_decode, stop_strings): exactly one of `text`,
 * `tokens` (an id list, checked against the vocabulary at run time) or
 * `sample: {tokens, seed}` (seeded random ids; defaults 48 tokens, seed 1337). */
typedef struct gf_token_source {
    char *text;
    int32_t *tokens;
    size_t n_tokens;
    long long n_sample, sample_seed;
    int sample;
} gf_token_source;
/* Parses the token source of mapping m into *src (sample tokens in
 * [1, max_sample]). Returns 0 read, 1 an error reported (parsing may go on),
 * -1 stop parsing the case. Free with gf_token_source_free either way. */
int gf_y_token_source(gf_cctx *ctx, const gf_ynode *m, long long max_sample, gf_token_source *src);
/* Loads <model>/tokenizer.json into *tok and the ids of src into *ids
 * (malloc'd, n of them). Returns 0, or -1 after recording the error in k
 * (free *tok and *ids either way). */
int gf_token_source_open(const gf_token_source *src, const char *model, gf_krun *k, gf_tokenizer **tok,
                         int32_t **ids, size_t *n);
struct gf_buf;
/* Appends the bytes of the n tokens ids to *bytes; (*ends)[i] (malloc'd, n
 * entries) is the end offset of token i. Returns 0, or -1 after recording
 * the error in k (free *ends and *bytes either way). */
int gf_token_bytes(gf_tokenizer *tok, const int32_t *ids, size_t n, gf_krun *k, struct gf_buf *bytes,
                   size_t **ends);
void gf_token_source_free(gf_token_source *src); /* NULL: no-op */

/* A prompt list: each item a string (text) or a sequence of token ids. */
typedef struct gf_prompt_spec {
    char *text;                /* NULL when ids are given */
    int32_t *ids;
    size_t n_ids;
} gf_prompt_spec;
int gf_y_prompts(gf_cctx *ctx, const gf_ynode *map, const char *key, int flags,
                 gf_prompt_spec **out, size_t *n_out);
void gf_prompts_free(gf_prompt_spec *p, size_t n);
/* Tokens of a prompt (text via the session's tokenizer). malloc'd. */
gf_status gf_prompt_tokens(const gf_session *s, const gf_prompt_spec *p, int32_t **ids, int32_t *n);
/* Tokens of B prompts into malloc'd *prompts (B rows) and *lens (B); on
 * failure records the error in k and returns 0 (free with gf_k_free_tokens
 * either way). */
int gf_k_encode_prompts(gf_krun *k, const gf_prompt_spec *ps, int32_t B, int32_t ***prompts, int32_t **lens);
void gf_k_free_tokens(int32_t **p, int32_t B); /* NULL-safe */

/* A batch of B prompts (sequence ids 0..B-1) against each prompt alone,
 * free-running, gated (batch.c; used by batch_consistency and
 * seeded_reproducibility). Comparisons are recorded as "<label>/row<b>".
 * singles_out (optional, B entries) keeps the single runs for the caller. */
gf_status gf_kind_batch_vs_single(gf_krun *k, const char *label, int32_t B, int32_t *const *prompts,
                                  const int32_t *lens, const gf_generate_params *gp, const gf_gate *gate,
                                  double atol, gf_generation **singles_out);

/* "[0, 1, 2]" into buf (truncated to cap). */
const char *gf_k_ids_str(char *buf, size_t cap, const int32_t *v, size_t n);
/* Record that the engine's sampler ran (and whether the backend has its own
 * slot): "sampler": "engine", or "engine + backend slot" when k->sample_ops. */
void gf_k_note_sampler(gf_krun *k);
/* With k->sample_ops: run B rows of logits (B, V) through the backend's slot
 * (gf_backend_sample, model NULL; seq_ids NULL = row index) and tally whether
 * each token equals engine_tokens[b], gf_sample's for the same row, seq id
 * and step. what names the call in the first mismatch. No-op without a slot. */
void gf_k_slot_rows(gf_krun *k, const char *what, const float *logits, int32_t B, int32_t V,
                    const gf_sampler_params *p, const uint64_t *seq_ids, uint64_t step,
                    const int32_t *engine_tokens);
/* The slot's check and metrics (the runner calls it after a sampler-only kind
 * ran): "backend sample slot equals engine sampler". No-op without a slot. */
void gf_k_slot_finish(gf_krun *k);
/* Model kinds: when the session's backend has a `sample` slot, point
 * k->sample_ops at it (called with model NULL: the engine does not hand out
 * its backend model handle) so that every sampling step also runs through the
 * slot; the kind then calls gf_k_slot_finish itself. Returns 1 attached. */
int gf_k_slot_attach(gf_krun *k);
/* An on_step function (gf_generate_params.on_step) for model kinds with no
 * capture of their own: each step's rows through the slot (gf_k_slot_rows)
 * against the engine's choice (info->results), with the run's sampler and
 * seq ids. user: a gf_k_slot_steps. No-op without k->sample_ops. */
typedef struct gf_k_slot_steps {
    gf_krun *k;
    const gf_generate_params *gp; /* its sampler and seq_ids (NULL = row index) */
} gf_k_slot_steps;
gf_status gf_k_slot_on_step(void *user, const gf_step_info *info);

/* Seeded N(0, 1) numbers from Philox (seed, stream). */
void gf_k_normals(uint64_t seed, uint64_t stream, double *out, size_t n);

#endif
