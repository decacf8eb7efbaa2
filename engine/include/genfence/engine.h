/* The engine: a backend (through its gf_backend_ops table only) plus a loaded
 * model, and the generation loop on top of it. Knows nothing of YAML, goldens
 * or reports. */
#ifndef GENFENCE_ENGINE_H
#define GENFENCE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "genfence/backend.h"
#include "genfence/sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the one way to call a backend's table ----
 * Every slot is called through these wrappers (or the gf_engine ones below);
 * slots past the version-2 baseline are read only when GF_OPS_HAS says the
 * backend's table holds them, and an absent optional slot gets its default
 * here. Errors carry the backend's name and, when it has one, its last_error
 * text: a backend reports an error by its return status plus last_error (a
 * module's own copy of status.c is not genfence's message buffer). */

/* GF_OK if ops can be used: ABI version matches, the table is at least the
 * version-2 baseline and no longer than this genfence's (struct_size),
 * required slots present. Otherwise GF_E_ABI with the reason (naming the
 * slot, both versions or both sizes). */
gf_status gf_backend_check_ops(const gf_backend_ops *ops);

/* The probe slot: GF_OK, or GF_E_UNAVAILABLE with the reason in why
 * (NUL-terminated; the status text when the backend gave none), or
 * GF_E_BACKEND when the probe wrote past why_len (a guarded buffer). */
gf_status gf_backend_available(const gf_backend_ops *ops, char *why, size_t why_len);

/* *info_out from the info slot for opts; without the slot (or when it
 * fails) the defaults: fp32, opts->threads (1 without opts), no library or
 * detail. Returns GF_OK when the backend described itself, GF_E_UNSUPPORTED
 * without the slot, else the slot's error; *info_out is filled either way. */
gf_status gf_backend_describe(const gf_backend_ops *ops, const gf_backend_options *opts, gf_backend_info *info_out);

/* GF_OK when the backend's info declares every GF_MODEL_NEEDS_* bit desc
 * needs (model_features); else GF_E_UNSUPPORTED naming what is missing.
 * gf_engine_create calls it before model_load. */
gf_status gf_backend_check_needs(const gf_backend_ops *ops, const gf_model_desc *desc, const gf_backend_options *opts);

/* Does the table hold a set `sample` slot? */
int gf_backend_has_sample(const gf_backend_ops *ops);

/* The profiles the backend's sample_ex implements (a GF_PROFILE_BIT mask,
 * the sample_profiles slot's answer); 0 when the table holds no
 * sample_profiles or no sample_ex slot. */
uint32_t gf_backend_sample_profiles(const gf_backend_ops *ops);

/* The last_error slot's text for model (NULL: global), "" when the backend
 * has no slot or no text. */
const char *gf_backend_last_error(const gf_backend_ops *ops, void *model);

/* Run B rows of logits (B, V) through the backend's own `sample` slot:
 * validates params and logits as gf_sample does (GF_E_INVALID_ARG), builds
 * the uniforms gf_rng_uniforms(p->seed, seq_ids[b], step, V) per row
 * (seq_ids NULL = row index) and calls the slot with `model` (NULL for
 * sampler-only use). ids_out (B). GF_E_UNSUPPORTED when the backend has no
 * slot; errors carry the backend's name (and its last_error text). */
gf_status gf_backend_sample(const gf_backend_ops *ops, void *model, const float *logits, int32_t B, int32_t V,
                            const gf_sampler_params *p, const uint64_t *seq_ids, uint64_t step, int32_t *ids_out);

/* ---- speculative decoding: one round of the rejection sampler ----
 * (backend.h, gf_spec_request; engine/spec_round.c; docs/speculative.md) */

/* The engine's reference for one round: validates req (GF_E_INVALID_ARG
 * naming the field) and writes the draft tokens accepted and the next token,
 * exactly as the request's rule says. */
gf_status gf_spec_round(const gf_spec_request *req, int32_t *accepted_out, int32_t *next_out);
/* The inverse-CDF draw of gf_spec_request from weights w (V, >= 0) with
 * uniform u: the smallest j with w_j > 0 whose running sum exceeds u times
 * the total; -1 when no weight is > 0. */
int32_t gf_spec_draw(const double *w, int32_t V, double u);
/* The probability that rule accepts a draft token x drawn with draft
 * probability q = q(x) where the target has p = p(x): min(1, p / q) (seed,
 * hf; q 0 accepts iff p > 0), the same with q 0 rejecting (vllm), p
 * (llamacpp: the target's own draw equals x). */
double gf_spec_accept_prob(int rule, double p, double q);
/* Does the table hold a set speculate slot? */
int gf_backend_has_speculate(const gf_backend_ops *ops);
/* One round through the backend's speculate slot (model NULL for
 * sampler-only use): validates req as gf_spec_round does, checks what the
 * slot returns (accepted in [0, K], next in [0, V)); GF_E_UNSUPPORTED
 * without the slot; errors carry the backend's name and last_error. */
gf_status gf_backend_speculate(const gf_backend_ops *ops, void *model, const gf_spec_request *req,
                               int32_t *accepted_out, int32_t *next_out);

/* ---- a backend's reported log-probabilities (the logprobs slot) ---- */
/* Does the table hold a set logprobs slot? */
int gf_backend_has_logprobs(const gf_backend_ops *ops);
/* B rows of logits (B, V) through the backend's logprobs slot (model NULL
 * for sampler-only use): validates params, mode and every row as
 * gf_sampler_logprobs does (GF_E_INVALID_ARG), hands the slot guarded
 * copies (a write past out or into the logits is a GF_E_BACKEND naming
 * it), and checks what it wrote: no NaN where the engine's row has none.
 * out (B, V). GF_E_UNSUPPORTED without the slot, or the slot's own
 * GF_E_UNSUPPORTED (a mode or profile it does not report). */
gf_status gf_backend_logprobs(const gf_backend_ops *ops, void *model, const float *logits, int32_t B, int32_t V,
                              const gf_sampler_params *p, int mode, double *out);

/* ---- call trace: the context of a crash or a timeout ----
 * Before every backend call made through these wrappers the engine writes
 * what it is about to call into the trace set here (process-wide; NULL, the
 * default, turns it off) and clears in_call when the call returns. The runner
 * points it at memory shared with the parent (MAP_SHARED), so when a child
 * dies or hangs inside a slot the parent can say which slot, which call and
 * with which shapes. Plain stores only: readable after the writer died. */
typedef struct gf_call_trace {
    volatile int32_t in_call; /* 1 while the slot below runs, 0 once it returned */
    char slot[24];            /* "probe", "model_load", "forward", "sample", "cache_reset", ... */
    long long call;           /* the slot's 1-based call index in this process */
    long long step;           /* generation step set by gf_engine_trace_step (-1: none) */
    int32_t B, T;             /* rows and new positions (0 where the slot has none) */
    int32_t cache_length;     /* before the call (-1: uncached or not a cache call) */
    long long calls_total;    /* backend calls so far in this process, this one included */
    int32_t threads_after;    /* after model_free returned: threads of the process (0: unknown) */
    /* forward's guarded buffers during the call (engine/guard.h), so that a
     * fault on a guard page can name the buffer: the mapping [map_lo,
     * map_hi), the data [data, data + n) */
    struct {
        char name[16];  /* "logits_out", "tokens", ... */
        char shape[48]; /* "(B, 1, V) = (1, 1, 512) floats" */
        uintptr_t map_lo, map_hi, data, n;
    } bufs[4];
    int32_t n_bufs;
    char logits_mode[8];  /* forward: "all" or "last" */
    uintptr_t fault_addr; /* SIGSEGV / SIGBUS from the kernel: the address (the runner's handler) */
    int32_t fault_sig;    /* that signal (0: none recorded) */
    /* the model descriptions handed to model_load and poisoned once it
     * returned (gf_engine_desc_poison), one per live engine: [lo, hi), the
     * backend's name; a fault inside one is a kept pointer into gf_model_desc */
    struct {
        uintptr_t lo, hi;
        char backend[40];
    } poisoned[4];
    int32_t n_poisoned;
} gf_call_trace;
void gf_engine_trace_to(gf_call_trace *t);
/* The generation step later calls belong to (-1: none); the generation loop
 * and the kinds set it. */
void gf_engine_trace_step(long long step);

typedef struct gf_engine gf_engine;

/* The description model_load gets (on by default; engine/desc_copy.h): a
 * private copy of desc and every weight, unmapped (PROT_NONE) once
 * model_load returns, so a backend that kept pointers into it instead of
 * copying faults on its next read, and the runner says so. Off: desc itself,
 * as the ABI allows (`genfence bench`, whose RSS figures would count the
 * copy). Process-wide; returns the previous setting. */
int gf_engine_desc_poison(int on);

/* Probe, then load desc into the backend. The engine keeps a copy of the
 * config; desc's weights need not outlive the call unless
 * desc->weights_persist is 1 (gf_model_load's desc): then the backend may
 * keep pointers into them, and they must outlive the engine
 * (gf_engine_destroy before gf_model_free). */
gf_status gf_engine_create(const gf_backend_ops *ops, const gf_model_desc *desc, const gf_backend_options *opts,
                           gf_engine **engine_out);
void gf_engine_destroy(gf_engine *e); /* NULL-safe */
const gf_backend_ops *gf_engine_ops(const gf_engine *e);
const gf_model_config *gf_engine_config(const gf_engine *e);

/* Thin checked wrappers over the table (errors carry the backend's name and
 * its last_error text when it has one). */
gf_status gf_engine_cache_create(gf_engine *e, int32_t batch, int32_t max_len, void **cache_out);
void gf_engine_cache_free(gf_engine *e, void *cache);
gf_status gf_engine_cache_reset(gf_engine *e, void *cache);
int32_t gf_engine_cache_length(gf_engine *e, const void *cache);
size_t gf_engine_cache_bytes(gf_engine *e, const void *cache);
/* The backend gets guarded copies of in's buffers and of logits_out
 * (sentinels around each, PROT_NONE pages beyond; engine/guard.h): a write
 * outside one, or into tokens / position_ids / key_mask, is GF_E_BACKEND
 * naming the call, the buffer and how far; logits_out is written only after
 * a clean call. */
gf_status gf_engine_forward(gf_engine *e, void *cache, const gf_batch *in, float *logits_out);

/* ---- the trace slot (backend.h, gf_trace_request) ----
 * Does the table hold a set forward_trace slot? */
int gf_backend_has_trace(const gf_backend_ops *ops);
/* gf_engine_forward through the trace slot: the same checks and guards, and
 * req->out / req->given filled by the backend (given zeroed first).
 * GF_E_UNSUPPORTED without the slot. */
/* The kernel paths the model's calls ran (the optional model_paths slot):
 * GF_OK with buf filled, GF_E_UNSUPPORTED without the slot. */
gf_status gf_engine_model_paths(gf_engine *e, char *buf, size_t len);
gf_status gf_engine_forward_trace(gf_engine *e, void *cache, const gf_batch *in, float *logits_out,
                                  const gf_trace_request *req);

/* ---- the call log: what a failing case did, to replay it traced ----
 * With a log set (gf_engine_log_to), every cache_create / cache_reset /
 * cache_free / forward the engine makes is appended (the batch copied), up
 * to GF_CALL_LOG_MAX forward calls and GF_CALL_LOG_MAX_TOKENS batch tokens;
 * past that the log stops growing and says so (overflow). */
enum { GF_CALL_LOG_MAX = 512, GF_CALL_LOG_MAX_TOKENS = 1 << 16 };
typedef enum gf_call_op {
    GF_CALL_CACHE_CREATE = 1,
    GF_CALL_CACHE_RESET,
    GF_CALL_CACHE_FREE,
    GF_CALL_FORWARD
} gf_call_op;
typedef struct gf_call_entry {
    gf_call_op op;
    int32_t cache;          /* the cache's index (order of cache_create in the log); -1: uncached forward */
    int32_t batch, max_len; /* cache_create's */
    int32_t cache_length;   /* forward: the cache's length before the call (0 uncached) */
    gf_batch in;            /* forward: tokens, position_ids (B, T) and key_mask (B, Tk) owned by the log */
    gf_status status;       /* forward: what the call returned (a failed one is not replayed) */
} gf_call_entry;
typedef struct gf_call_log {
    gf_call_entry *v;
    size_t n, cap;
    size_t n_forward, n_tokens;
    int overflow;        /* 1: calls were left out (the caps above) */
    const void **caches; /* (n_caches) the backend's handles, by index; NULL once freed */
    int32_t n_caches;
} gf_call_log;
void gf_engine_log_to(gf_engine *e, gf_call_log *log); /* NULL: off */
gf_call_log *gf_engine_log(const gf_engine *e);        /* the log set, or NULL */
void gf_call_log_clear(gf_call_log *log);

/* ---- generation ---- */

typedef enum gf_stop_reason {
    GF_STOP_NONE = 0,          /* still running (internal) */
    GF_STOP_EOS = 1,           /* sampled eos_id */
    GF_STOP_LENGTH = 2,        /* max_new_tokens reached */
    GF_STOP_CONTEXT_LIMIT = 3, /* cache full: length == n_positions */
} gf_stop_reason;
const char *gf_stop_reason_str(gf_stop_reason r); /* "eos", "length", "context_limit" */

typedef struct gf_step_info {
    int32_t step; /* 0-based sampling step */
    int32_t B, V;
    const float *logits;             /* (B, V): each row's last-position logits this step */
    const int32_t *tokens;           /* (B): the token each row emits this step (forced or sampled) */
    const gf_sample_result *results; /* (B): the sampler's result (margin...) */
    const uint8_t *finished_before;  /* (B): 1 if the row had finished before this step */
} gf_step_info;

/* Called after every sampling step; a non-OK return stops generation with it. */
typedef gf_status (*gf_step_fn)(void *user, const gf_step_info *info);

typedef struct gf_generate_params {
    int32_t max_new_tokens;
    gf_sampler_params sampler;
    int32_t eos_id;                 /* -1: no EOS stop */
    int32_t use_cache;              /* 1: prefill + one token per step; 0: recompute loop */
    int32_t raise_on_context_limit; /* cached: fail with GF_E_CONTEXT_LIMIT instead of stopping */
    const uint64_t *seq_ids;        /* (B) the RNG's sequence id per prompt; NULL = row index */
    int32_t pad_id;                 /* token written into left padding (never attended); 0 ok */
    /* (optional) teacher forcing: forced[b][step] is emitted instead of the
     * sampled token (the sampler still runs; its choice is in on_step's
     * results). Rows must hold max_new_tokens tokens. NULL = free running. */
    const int32_t *const *forced;
    gf_step_fn on_step; /* (optional) */
    void *user;
    /* cached, at a full cache (and not raise_on_context_limit): 0 = stop with
     * GF_STOP_CONTEXT_LIMIT (the GPT rule); 1 = slide by recompute: reset the
     * cache and prefill the last n_positions tokens, renumbered from 0, at
     * every step from then on, which is exactly the uncached loop's crop. */
    int32_t slide_on_limit;
} gf_generate_params;

gf_generate_params gf_generate_defaults(void); /* greedy, 64 tokens, cached, no EOS */

typedef struct gf_generation {
    int32_t B;
    int32_t steps;         /* sampling steps run */
    int32_t *prompt_len;   /* (B) */
    int32_t *n_tokens;     /* (B) prompt + generated tokens (a finished row keeps
                                  emitting eos_id until the loop ends) */
    int32_t **tokens;      /* (B) x n_tokens[b] */
    int32_t *n_until_stop; /* (B) tokens up to and including the row's stop (EOS) */
    gf_stop_reason *stop;  /* (B) */
    double *margins;       /* (steps, B) margin of each step's choice */
    int32_t cache_len;     /* cached: the cache's max_len, what the generation can feed:
                                  min(n_positions, longest prompt + max_new_tokens); 0 uncached */
    size_t cache_bytes;    /* cached: the backend's cache_bytes for the (B, cache_len) cache,
                                  i.e. (L, B, H_kv, cache_len, d_head) k and v; 0 uncached */
} gf_generation;

/* Left-pads the B prompts to a common length (key mask + position ids
 * cumsum(mask) - 1 clamped at 0, next position = mask.sum()), then samples.
 * Cached: stops with GF_STOP_CONTEXT_LIMIT once the cache holds n_positions
 * positions, still returning the token sampled at the last position (or
 * fails with GF_E_CONTEXT_LIMIT when raise_on_context_limit). Uncached: the
 * sequence is cropped to its last n_positions tokens and generation goes on. */
gf_status gf_generate(gf_engine *e, int32_t B, const int32_t *const *prompts, const int32_t *prompt_lens,
                      const gf_generate_params *p, gf_generation **gen_out);
void gf_generation_free(gf_generation *g); /* NULL-safe */

/* Left-padding arithmetic, exposed for tests and the harness.
 * mask (B, T) of 0/1 -> positions (B, T) = max(cumsum(mask) - 1, 0) and
 * next (B) = sum(mask). Either output may be NULL. */
void gf_positions_from_mask(const uint8_t *mask, int32_t B, int32_t T, int32_t *positions_out, int32_t *next_out);

/* ---- the rows behind a failing step ----
 * gf_verify_cache and gf_sliding_window_measure compare a reference row and a
 * tested row of V logits at every step and keep only the summaries. A caller
 * that needs both rows of the step its gate fails at (the failure artifact)
 * passes a gf_row_keep: after every compared step the engine calls pick with
 * the step's summary, and copies both rows of the first GF_ROW_KEEP_MAX steps
 * it returns nonzero for, so nothing re-runs the backend to recover them
 * (a re-run of a backend whose fault depends on the call count would not
 * even give the same rows). */
typedef struct gf_step_summary {
    int32_t step;
    double delta;             /* max |delta| of the two rows (genfence/rows.h) */
    int32_t ref_token, token; /* each row's argmax */
    double ref_margin;        /* the reference row's top-1 minus top-2 */
    double ref_top1;          /* the reference row's top-1 logit */
    int evicting;             /* sliding window: the context has passed the window */
} gf_step_summary;

#define GF_ROW_KEEP_MAX 2

typedef struct gf_kept_rows {
    int32_t step;
    float *ref, *test; /* (V) each */
} gf_kept_rows;

typedef struct gf_row_keep {
    int (*pick)(void *user, const gf_step_summary *s); /* nonzero: keep this step's rows */
    void *user;
    gf_kept_rows kept[GF_ROW_KEEP_MAX]; /* filled by the engine (n_kept of them) */
    int32_t n_kept;
} gf_row_keep;

/* The kept rows of step (NULL: none kept); k may be NULL. */
const gf_kept_rows *gf_row_keep_find(const gf_row_keep *k, int32_t step);
void gf_row_keep_clear(gf_row_keep *k); /* frees the rows, keeps pick/user; NULL-safe */
/* (engine-internal) drop what k holds before a run; offer one step's rows. */
void gf_row_keep_reset(gf_row_keep *k);
gf_status gf_row_keep_offer(gf_row_keep *k, const gf_step_summary *s, const float *ref, const float *test, int32_t V);

/* ---- cache verification (the seed's verify_cache) ---- */

typedef struct gf_verify_result {
    int32_t steps;
    double max_abs_delta; /* over all steps and vocabulary entries */
    int32_t max_delta_step;
    double min_margin; /* smallest top-1 minus top-2 of the uncached logits */
    int32_t min_margin_step;
    int32_t tokens_equal;     /* every step's argmax agreed */
    int32_t first_divergence; /* -1 if none */
    double divergence_margin; /* the uncached margin at first_divergence */
    double *step_max_delta;   /* (steps) */
    double *step_margin;      /* (steps) */
    int32_t *tokens;          /* (steps) greedy tokens of the cached decode */
    int32_t *ref_tokens;      /* (steps) argmax of the uncached logits at each step */
    double *step_top1;        /* (steps) top-1 uncached logit at each step */
} gf_verify_result;

/* Greedy cached decode of `steps` tokens, teacher-forced against an uncached
 * forward over the same prefix at every step. prefill_chunks (optional, n_chunks
 * > 0): feed the prompt to the cache in pieces of these sizes (the rest in one
 * piece). keep (NULL: none): the rows of the steps it picks, the uncached
 * one as ref and the cached one as test (gf_row_keep_clear frees them).
 * Fills *out; free its arrays with gf_verify_result_clear. */
gf_status gf_verify_cache(gf_engine *e, const int32_t *prompt, int32_t prompt_len, int32_t steps,
                          const int32_t *prefill_chunks, int32_t n_chunks, gf_row_keep *keep, gf_verify_result *out);
void gf_verify_result_clear(gf_verify_result *r);

/* ---- sliding windows over a rotary cache (engine/sliding.c) ---- */

/* With rotary positions q_i.k_j depends only on i - j, so a cache can slide by
 * evicting its oldest entries instead of recomputing; the surviving keys were
 * computed while the evicted tokens were visible, so this is an approximation.
 * Measured here, greedy, teacher-forced by the exact rule (recompute):
 *   recompute: at every step an uncached forward over the last `window`
 *              tokens, renumbered from 0 (the uncached loop's crop);
 *   evicted:   one cache holding every position; the query at position p
 *              sees only keys (p - window, p] (the older ones masked out, which
 *              is what evicting them does, entries untouched).
 * Both run one prompt (1 <= prompt_len <= window) for `steps` steps;
 * prompt_len + steps - 1 <= n_positions. GF_E_UNSUPPORTED for learned
 * positions (they are baked into every key: sliding = recompute). */
typedef struct gf_sliding_result {
    int32_t steps, window;
    int32_t first_evict_step;   /* first step whose context exceeds the window; -1 if none */
    double pre_evict_max_delta; /* max |evicted - recompute| before any eviction (cache noise) */
    double max_abs_delta;       /* max |evicted - recompute| over the evicting steps: the drift */
    int32_t max_delta_step;
    int32_t argmax_agree;    /* evicting steps whose evicted argmax equals recompute's */
    int32_t evict_steps;     /* steps with eviction */
    double min_margin;       /* smallest recompute top-1 minus top-2 */
    double *step_max_delta;  /* (steps) */
    double *step_margin;     /* (steps) recompute margin */
    int32_t *tokens;         /* (steps) recompute's greedy tokens (the forced path) */
    int32_t *evicted_tokens; /* (steps) the evicted cache's argmax at each step */
} gf_sliding_result;

/* keep (NULL: none): the rows of the steps it picks, recompute as ref and
 * the evicting cache as test. */
gf_status gf_sliding_window_measure(gf_engine *e, const int32_t *prompt, int32_t prompt_len, int32_t window,
                                    int32_t steps, gf_row_keep *keep, gf_sliding_result *out);
void gf_sliding_result_clear(gf_sliding_result *r);

#ifdef __cplusplus
}
#endif
#endif
