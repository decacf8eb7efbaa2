/* The genfence backend ABI: one versioned function table per backend.
 *
 * A backend is a table of functions (gf_backend_ops). Built-in backends are
 * registered by name; out-of-tree plugins are shared objects exporting
 *
 *     const gf_backend_ops *genfence_backend_entry(void);
 *
 * which genfence loads with dlopen and refuses if abi_version differs from
 * GF_BACKEND_ABI_VERSION or a required slot is NULL. The engine reaches a
 * backend only through this table.
 *
 * Ownership: the backend owns everything it returns through *_out handles and
 * frees it in the matching *_free (NULL-safe). It must not keep pointers into
 * gf_model_desc after model_load returns (copy or convert what it needs),
 * except the tensors desc->weights points to where gf_model_desc_weights_persist(desc) says
 * they stay until its model_free (genfence's own loader hands out the mapped
 * file so: a backend that keeps F32 weights as they are need not copy them),
 * nor into gf_batch after forward returns. Logits buffers belong to the caller.
 *
 * Threading: calls on one model handle (and its caches) are serialised by the
 * caller. Distinct model handles may be used from distinct threads. A backend
 * may use its own worker threads inside a call, at most options->threads.
 *
 * Errors: every gf_status-returning slot returns GF_OK or an error; on error it
 * records a message with gf_error_set() when it links genfence's status.c (the
 * built-in ones do) and/or makes it available through last_error (optional).
 */
#ifndef GENFENCE_BACKEND_H
#define GENFENCE_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "genfence/model_desc.h"
#include "genfence/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version 2: gf_model_desc gained the Llama/Qwen2 fields (gf_layer_weights
 * grew, so its array stride changed) and gf_backend_options gained config. */
#define GF_BACKEND_ABI_VERSION 2u

/* The dtype a backend computes in; the margin gate uses its ULP. */
typedef enum gf_compute_dtype {
    GF_COMPUTE_F32 = 1,
    GF_COMPUTE_F16 = 2,
    GF_COMPUTE_BF16 = 3,
    GF_COMPUTE_F64 = 4,
    GF_COMPUTE_TF32 = 5, /* 11 significant bits like fp16, fp32's range (NVIDIA TF32 matmuls) */
} gf_compute_dtype;

typedef struct gf_backend_options {
    uint32_t struct_size;
    int32_t threads; /* worker threads the backend may use; >= 1 */
    /* The text after the first ':' of the backend spec the user gave, e.g.
     * "tf32" for `--backend cuda:tf32`, "q8_0,kv=f16" for
     * `--backend llamacpp:q8_0,kv=f16`, the command line for `exec:CMD ...`;
     * NULL when the spec had no ':'. A backend that takes no options refuses
     * a non-NULL config in model_load (GF_E_INVALID_ARG, naming it); info
     * reports the dtype the config selects. */
    const char *config;
} gf_backend_options;

/* Which logits forward writes. */
typedef enum gf_logits_mode {
    GF_LOGITS_ALL = 0,  /* logits_out is (B, T, V) */
    GF_LOGITS_LAST = 1, /* logits_out is (B, 1, V): position T-1 of each row */
} gf_logits_mode;

typedef struct gf_batch {
    int32_t B;                   /* rows */
    int32_t T;                   /* new positions per row (>= 1) */
    const int32_t *tokens;       /* (B, T) row-major */
    const int32_t *position_ids; /* (B, T) row-major; each in [0, n_positions) */
    /* (B, Tk) row-major, 1 = real key, 0 = padding; Tk = cache length + T when
     * cached, T when uncached; NULL = all keys real. It is ANDed with the
     * causal mask; a query always sees its own key, whatever the mask says. */
    const uint8_t *key_mask;
    gf_logits_mode logits_mode;
} gf_batch;

/* ---- sized structs: "the callee fills at most the caller's struct_size" ----
 *
 * A struct that starts with struct_size may grow at its end within one ABI
 * version, so the two sides of a call can know different sizes of it. The
 * rule for every one of them:
 *   - the side that allocates it sets struct_size to sizeof as it knows it;
 *   - a callee that reads it (gf_backend_options, gf_model_desc,
 *     gf_sampler_ext) reads a field only when the caller's struct_size covers
 *     it, else uses the field's documented default;
 *   - a callee that fills it (gf_backend_info) writes at most the caller's
 *     struct_size bytes and sets struct_size to how many it filled, the
 *     smaller of the caller's and its own sizeof (gf_backend_info_put does
 *     both); a field past that is unset for the caller.
 * gf_backend_ops is the one the callee (the backend) allocates: genfence
 * reads at most its struct_size (GF_OPS_HAS).
 *
 * Version-2 modules built before the rule was written set struct_size to
 * their own sizeof and wrote that many bytes; built against this header
 * (or an older, smaller one) that is never more than genfence's struct, so
 * they keep working unchanged. A module built against a grown
 * gf_backend_info must use the rule: an older genfence hands info a
 * struct_size of its own, and watches the bytes after it (a write past
 * them is the backend's fault, named, not a corrupted host). */

/* Information a backend reports about itself (all strings static or owned by
 * the backend; any may be NULL). Filled by the info slot under the rule
 * above: info_out->struct_size is the caller's on entry. */
typedef struct gf_backend_info {
    uint32_t struct_size;
    gf_compute_dtype dtype;
    int32_t threads;     /* threads it will use */
    const char *library; /* e.g. "OpenBLAS 0.3.21 ..." */
    const char *detail;  /* ISA, device name, ... */
    /* Added in ABI 2 by growing the struct (struct_size says whether a
     * backend knew them; unset means NULL): the weight storage the options
     * select, e.g. "f32", "f16", "bf16", "q8_0", "q4_k" (NULL: the model's
     * weights as given, converted to the compute dtype), and the KV-cache
     * element type, e.g. "f32", "f16" (NULL: the compute dtype). A backend
     * whose weights are quantized or held in lower precision is judged by the
     * statistical tier (docs/cases.md) where token equality cannot hold. */
    const char *weights;
    const char *kv_cache;
    /* Added by growing the struct (as above; NULL: not said): the CPU kernel
     * path these options run on this machine, in the library's own terms,
     * e.g. "AMX" / "repack" / "plain" with ggml's CPU features, OpenBLAS's
     * core ("Haswell"), oneDNN's ISA ("avx512_core"). Reports put it beside
     * the CPU model (run.json audit, compare, the scoreboard's columns): a
     * changed path explains a changed figure. */
    const char *cpu_path;
    /* Added by growing the struct (as above; unset: 0): the GF_MODEL_NEEDS_*
     * bits (model_desc.h) this backend implements. genfence loads a model
     * whose desc->needs has a bit not in here nowhere near the backend: it
     * refuses with the feature named (GF_E_UNSUPPORTED). */
    uint32_t model_features;
    /* Added by growing the struct (as above; NULL: not said): the mechanism
     * probes (cases/probes/, docs/cases.md "probe") this backend runs on its
     * own kernels, comma-separated ("embedding,attention,rope,norm,mlp,head")
     * or "all", and "-TAG" to leave out the probe cases tagged TAG
     * ("all,-gelu_erf") or whose micro-model is of architecture TAG
     * ("all,-llama": an engine of GPT-2 only). A declared probe must run as declared: refusing its model or
     * its calls (GF_E_UNSUPPORTED: handing the shape to no path or another)
     * is a finding; an undeclared probe is skipped. */
    const char *probes;
    /* Added by growing the struct (as above; NULL: not said): the invariance
     * this backend declares, per axis of the `invariance` kind (docs/cases.md,
     * "invariance"), comma-separated AXIS=LEVEL with LEVEL one of bitwise
     * (the probe row's logits are the same bytes), gated (they may differ,
     * within the margin gate) or none (no promise); AXIS one of batch,
     * position, mixed, threads, split, repeat, prefix, or all; a later entry
     * overrides an earlier one ("all=bitwise,threads=gated"). An axis not
     * said is judged as gated. The kind fails a measurement below the
     * declared level. */
    const char *invariance;
} gf_backend_info;

/* For the info slot: copy the backend's answer `mine` (built as a whole
 * gf_backend_info of this header) into the caller's info_out, at most
 * info_out->struct_size bytes, and set info_out->struct_size to the bytes
 * filled. Returns GF_OK (the info slot's return value). */
static inline gf_status gf_backend_info_put(gf_backend_info *info_out, const gf_backend_info *mine)
{
    size_t n = info_out->struct_size < sizeof *mine ? info_out->struct_size : sizeof *mine;
    if (n < sizeof info_out->struct_size)
        return GF_E_INVALID_ARG; /* the caller's struct cannot even say its size */
    memcpy((unsigned char *)info_out + sizeof info_out->struct_size,
           (const unsigned char *)mine + sizeof mine->struct_size, n - sizeof info_out->struct_size);
    info_out->struct_size = (uint32_t)n;
    return GF_OK;
}

/* Random numbers for an on-device sampler: exactly the uniforms the engine's
 * sampler would use (see docs/random.md), (B, V) row-major, each in (0, 1):
 * row b is gf_rng_uniforms(params->seed, seq_ids[b], step, V).
 * V is the row length of both u and the logits. It lives here because the
 * slot has no V argument and a sampler-only call has no model to read
 * vocab_size from; genfence never called the slot before V was added, so the
 * ABI version did not change. */
typedef struct gf_rng_draws {
    const double *u; /* (B, V) */
    int32_t V;       /* entries per row of logits and u (>= 1) */
} gf_rng_draws;

typedef struct gf_sampler_params gf_sampler_params; /* engine/sampler.h */

/* ---- the trace slot: hidden states at the sublayer boundaries ----
 *
 * A forward of L blocks has 4 L + 2 trace points, in the order the forward
 * reaches them; point p of the request is numbered
 *   0                     the embedding's output (x: token + learned position)
 *   1 + 4 l + 0           block l: the attention's output projection, before the residual add
 *   1 + 4 l + 1           block l: the residual stream after the attention add
 *   1 + 4 l + 2           block l: the MLP's output, before the residual add
 *   1 + 4 l + 3           block l: the residual stream after the MLP add (the block's output)
 *   4 L + 1               the final norm's output (the output head's input), at
 *                         every requested position whatever logits_mode says
 * Each is D = n_embd floats per (row, position). */
typedef enum gf_trace_kind {
    GF_TRACE_EMBED = 0,
    GF_TRACE_ATTN_OUT = 1,
    GF_TRACE_ATTN_RESID = 2,
    GF_TRACE_MLP_OUT = 3,
    GF_TRACE_MLP_RESID = 4,
    GF_TRACE_FINAL_NORM = 5,
} gf_trace_kind;

#define GF_TRACE_POINTS(n_layer) (4 * (n_layer) + 2)

/* The point index of kind at block layer (layer is ignored for the
 * embedding and the final norm). */
static inline int32_t gf_trace_index(int32_t n_layer, gf_trace_kind kind, int32_t layer)
{
    if (kind == GF_TRACE_EMBED)
        return 0;
    if (kind == GF_TRACE_FINAL_NORM)
        return 4 * n_layer + 1;
    return 1 + 4 * layer + ((int32_t)kind - 1);
}

/* What the trace slot is asked for: rows [row0, row0 + rows) of the batch
 * and its new positions [pos0, pos0 + positions) (chunk-relative, as t in
 * tokens[b][t]). The caller owns out and given and sets struct_size (the
 * rule above: a field past it takes its default). */
typedef struct gf_trace_request {
    uint32_t struct_size;
    int32_t n_layer;         /* L, as the model's config says: out holds 4 L + 2 points */
    int32_t n_embd;          /* D */
    int32_t row0, rows;      /* 0 <= row0, row0 + rows <= B */
    int32_t pos0, positions; /* 0 <= pos0, pos0 + positions <= T */
    float *out;              /* (4 L + 2, rows, positions, D): point p at out + p rows positions D */
    uint8_t *given;          /* (4 L + 2): the backend writes 1 for each point it wrote, else 0 */
    /* Block l's keys and values as its attention reads them once the call
     * has written its own (keys after RoPE, a quantized cache's rows
     * dequantized), at cache positions [0, kv_positions) of the same rows:
     * the point between block l - 1's output and block l's attention output,
     * where a cache written at the wrong positions first shows. Read only
     * when struct_size covers kv_given and kv_out is set (a caller built
     * before these fields asks for none; a backend built before them writes
     * none, and kv_given stays as the caller zeroed it). */
    int32_t kv_dim;       /* H_kv d_head (n_head d_head for GPT-2) */
    int32_t kv_positions; /* the cache length after the call (T for an uncached call) */
    float *kv_out;        /* (L, 2, rows, kv_positions, kv_dim): block l's keys at (2 l), its values at (2 l + 1) */
    uint8_t *kv_given;    /* (L): the backend writes 1 for each block whose keys and values it wrote */
} gf_trace_request;

/* Whether req asks for keys and values (the fields exist on the caller's
 * side and it passed a buffer). */
static inline int gf_trace_wants_kv(const struct gf_trace_request *req)
{
    return req && req->struct_size >= offsetof(struct gf_trace_request, kv_given) + sizeof req->kv_given &&
           req->kv_out && req->kv_given && req->kv_positions > 0 && req->kv_dim > 0;
}

/* For a trace slot: store block l's key row k and value row v (kv_dim floats
 * each, heads concatenated) of (batch row b, cache position j), if req asks
 * for that row and position. */
static inline void gf_trace_put_kv_row(const struct gf_trace_request *req, int32_t l, int32_t b, int32_t j,
                                       const float *k, const float *v)
{
    if (!gf_trace_wants_kv(req) || l < 0 || l >= req->n_layer || b < req->row0 || b >= req->row0 + req->rows || j < 0 ||
        j >= req->kv_positions)
        return;
    size_t plane = (size_t)req->rows * (size_t)req->kv_positions * (size_t)req->kv_dim;
    size_t off = ((size_t)(b - req->row0) * (size_t)req->kv_positions + (size_t)j) * (size_t)req->kv_dim;
    memcpy(req->kv_out + 2 * (size_t)l * plane + off, k, (size_t)req->kv_dim * sizeof *k);
    memcpy(req->kv_out + (2 * (size_t)l + 1) * plane + off, v, (size_t)req->kv_dim * sizeof *v);
    req->kv_given[l] = 1;
}

/* For a trace slot whose cache holds block l's keys and values as K and V,
 * (B, H_kv, S, dh) each (S the cache's capacity): store every asked-for
 * row's positions [0, kv_positions) (kv_dim = H_kv dh). */
static inline void gf_trace_put_kv(const struct gf_trace_request *req, int32_t l, const float *K, const float *V,
                                   int32_t B, int32_t Hkv, int32_t S, int32_t dh)
{
    if (!gf_trace_wants_kv(req) || req->kv_dim != Hkv * dh || req->kv_positions > S)
        return;
    size_t plane = (size_t)req->rows * (size_t)req->kv_positions * (size_t)req->kv_dim;
    for (int32_t b = req->row0; b < req->row0 + req->rows && b < B; b++)
        for (int32_t j = 0; j < req->kv_positions; j++)
            for (int32_t h = 0; h < Hkv; h++) {
                size_t src = (((size_t)b * Hkv + h) * S + j) * dh;
                size_t off = ((size_t)(b - req->row0) * req->kv_positions + j) * req->kv_dim + (size_t)h * dh;
                memcpy(req->kv_out + 2 * (size_t)l * plane + off, K + src, (size_t)dh * sizeof *K);
                memcpy(req->kv_out + (2 * (size_t)l + 1) * plane + off, V + src, (size_t)dh * sizeof *V);
            }
    req->kv_given[l] = 1;
}

/* For a trace slot: store the D floats y of (batch row b, new position t) as
 * point p, if req asks for that row and position. */
static inline void gf_trace_put_row(const struct gf_trace_request *req, int32_t p, int32_t b, int32_t t, const float *y)
{
    if (!req || p < 0 || p >= GF_TRACE_POINTS(req->n_layer) || b < req->row0 || b >= req->row0 + req->rows ||
        t < req->pos0 || t >= req->pos0 + req->positions)
        return;
    size_t off =
        (((size_t)p * (size_t)req->rows + (size_t)(b - req->row0)) * (size_t)req->positions + (size_t)(t - req->pos0)) *
        (size_t)req->n_embd;
    memcpy(req->out + off, y, (size_t)req->n_embd * sizeof *y);
    req->given[p] = 1;
}

/* For a trace slot: store x, (B, T, D) row-major (a residual stream or a
 * sublayer's output), as point p. */
static inline void gf_trace_put(const struct gf_trace_request *req, int32_t p, const float *x, int32_t B, int32_t T)
{
    if (!req)
        return;
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++)
            gf_trace_put_row(req, p, b, t, x + ((size_t)b * (size_t)T + (size_t)t) * (size_t)req->n_embd);
}

/* ---- the speculate slot: a backend's own rejection sampler ----
 *
 * One round of speculative decoding after the verify pass: the target's
 * logits for K + 1 positions (row i judges draft[i]; row K gives the bonus
 * token when all K are accepted), the K draft tokens and the draft's
 * probabilities, the target's sampler and the round's uniforms. The target
 * distribution p_i of row i is the filtered, renormalised distribution of
 * params (plain: temperature -> top-k -> top-p, ext NULL; gf_sampler_probs;
 * temperature 0 puts all mass on the argmax, lowest index on ties). Every
 * draw from a distribution w (p_i, or a residual) is the inverse CDF of one
 * uniform u in index order: total = sum of w_j (j ascending, in double), the
 * token is the smallest j with w_j > 0 whose running sum exceeds u * total
 * (the last j with w_j > 0 if rounding leaves none). The rule says how a
 * draft token x = draft[i] is judged (docs/speculative.md):
 *   GF_PROFILE_SEED, GF_PROFILE_HF  Leviathan et al. / Chen et al. (HF's
 *       assisted decoding): accept if u_accept[i] * q_i(x) <= p_i(x)
 *       (q_i(x) = 0 accepts iff p_i(x) > 0); on the first rejection the
 *       next token is a draw from the residual max(0, p_i - q_i) with
 *       u_draw[i] (from p_i if the residual has no mass);
 *   GF_PROFILE_VLLM  vLLM's rejection sampler: as above, but q_i(x) = 0
 *       rejects;
 *   GF_PROFILE_LLAMACPP  llama.cpp's common_sampler_sample_and_accept_n:
 *       the target's own draw y from p_i with u_draw[i]; accept iff y == x,
 *       else y is the next token (q and u_accept are not read).
 * When all K are accepted the next token is the bonus: a draw from p_K with
 * u_draw[K]. A deterministic draft (an n-gram, a greedy draft) has
 * draft_probs NULL: q_i is one-hot at draft[i]. */
typedef struct gf_spec_request {
    uint32_t struct_size;
    int32_t K;                       /* draft tokens, >= 1 */
    int32_t V;                       /* entries per row */
    int32_t rule;                    /* a gf_sampler_profile (above) */
    const float *target_logits;      /* (K + 1, V) */
    const int32_t *draft;            /* (K), each in [0, V) */
    const double *draft_probs;       /* (K, V) q, rows of weights >= 0 summing to 1; NULL: one-hot */
    const gf_sampler_params *params; /* the target's sampler, plain (ext NULL), validated */
    const double *u_accept;          /* (K), each in (0, 1) */
    const double *u_draw;            /* (K + 1), each in (0, 1) */
} gf_spec_request;

typedef struct gf_backend_ops {
    uint32_t abi_version;    /* GF_BACKEND_ABI_VERSION */
    uint32_t struct_size;    /* sizeof(gf_backend_ops) the backend was built with */
    const char *name;        /* registry name, e.g. "ref" */
    const char *description; /* one line */

    /* Can this backend run here? GF_OK, or GF_E_UNAVAILABLE with the reason
     * written to why (NUL-terminated, truncated to why_len). */
    gf_status (*probe)(char *why, size_t why_len);

    /* (optional) fill *info_out for the given options: at most the caller's
     * info_out->struct_size bytes (gf_backend_info_put). */
    gf_status (*info)(const gf_backend_options *opts, gf_backend_info *info_out);

    /* Build the backend's own copy of the model. *model_out NULL on failure. */
    gf_status (*model_load)(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out);
    void (*model_free)(void *model); /* NULL-safe */

    /* KV cache for `batch` rows of up to max_len positions (max_len <=
     * n_positions). Allocated once; length starts at 0. */
    gf_status (*cache_create)(void *model, int32_t batch, int32_t max_len, void **cache_out);
    gf_status (*cache_reset)(void *cache);      /* length = 0 */
    void (*cache_free)(void *cache);            /* NULL-safe */
    int32_t (*cache_length)(const void *cache); /* positions held */
    size_t (*cache_bytes)(const void *cache);   /* bytes of k and v storage */

    /* Run the model over in->tokens. cache NULL: uncached, positions are the
     * whole sequence. cache non-NULL: the T new positions are appended at
     * [length, length + T) of every layer's k/v, queries attend over
     * [0, length + T) with the causal mask offset by length (bottom-right
     * aligned), and length advances by T once, after the last layer; it is an
     * error if length + T > max_len or in->B != the cache's batch.
     * logits_out: (B, T, V) or (B, 1, V), see gf_logits_mode. */
    gf_status (*forward)(void *model, void *cache, const gf_batch *in, float *logits_out);

    /* (optional) the backend's own sampler. logits (B, V) row-major with
     * V = draws->V; draws->u (B, V) the engine sampler's uniforms for each
     * row (see gf_rng_draws); params already validated (gf_sampler_validate)
     * and logits finite or -inf, not all -inf. Writes ids_out (B): for each
     * row exactly the token gf_sample returns for that row, params and the
     * row's (seed, seq id, step), i.e. temperature -> top-k -> top-p -> race
     * over the given u (docs/sampler.md); greedy (temperature 0) is the
     * argmax, lowest index on ties, and ignores u.
     * model may be NULL: sampler-only use (genfence's sampler kinds call it
     * with no model loaded), so the slot must not need the model handle. A
     * slot given a model may use it (a device, a stream) but must not depend
     * on it for the result. Buffers belong to the caller; no state is kept. */
    gf_status (*sample)(void *model, const float *logits, int32_t B, const gf_sampler_params *params,
                        const gf_rng_draws *draws, int32_t *ids_out);

    /* (optional) the vendor's text for the last error on this model (or
     * globally with model NULL); NULL or "" if none. */
    const char *(*last_error)(void *model);

    /* ---- added within version 2, at the end (GF_OPS_HAS) ---- */

    /* (optional, with sample_ex) the sampler profiles sample_ex implements,
     * each with every filter of gf_sampler_ext (include/genfence/sampler.h):
     * a mask of GF_PROFILE_BIT(GF_PROFILE_SEED / _HF / _LLAMACPP / _VLLM).
     * Constant for the backend; may be called before any model_load. */
    uint32_t (*sample_profiles)(void);

    /* (optional) the backend's sampler for params of any profile it
     * declares: like `sample`, but params->ext may be set (the profile, its
     * chain order, min_p, typical_p, penalties over ext->history, logit
     * bias, min_tokens_to_keep, the min_new_tokens ban), shared by all B
     * rows. Row b must give exactly gf_sample's token for that row, params
     * and (seed, seq id, step): the profile's chain, then the race over
     * draws->u; greedy is the profile's argmax. Logits are as gf_sample
     * accepts them under the profile: under vllm a row may hold NaN, +inf
     * or only -inf, and any id in [0, V) is then valid. genfence calls the
     * old `sample` slot only with gf_sampler_params_plain params (ext NULL,
     * the first six fields as before), so a backend without these two
     * slots keeps working unchanged. */
    gf_status (*sample_ex)(void *model, const float *logits, int32_t B, const gf_sampler_params *params,
                           const gf_rng_draws *draws, int32_t *ids_out);

    /* (optional) forward with a trace: exactly `forward` (the same logits,
     * the same cache effects), and also the hidden states at the sublayer
     * boundaries (gf_trace_point) for the rows and positions req asks for,
     * written into req->out, with req->given[p] set to 1 for each point p it
     * wrote and 0 for one it cannot give (see gf_trace_request). genfence
     * calls it only to say where a failing case first diverges from ref
     * (docs/backends.md, "The trace slot"); a backend without it keeps
     * working unchanged. */
    gf_status (*forward_trace)(void *model, void *cache, const gf_batch *in, float *logits_out,
                               const struct gf_trace_request *req);

    /* (optional) the kernel paths this model's calls ran since it was
     * loaded, in the library's own terms and the words of info.cpu_path,
     * comma-separated, each once ("brg:avx512_core", "brg:avx512_core,
     * gemm:jit"), written into buf (NUL-terminated, truncated to len); "" when
     * no call ran yet. genfence's mechanism probes (docs/cases.md, "probe")
     * ask it after a probe's calls: a path not in info.cpu_path's list means
     * the declared probe ran on another path than the one declared (a silent
     * fallback, a finding: its NMSE judged the fallback, not the declared
     * kernel). A backend without it is not asked (the probe says so). */
    gf_status (*model_paths)(void *model, char *buf, size_t len);

    /* (optional) the backend's rejection sampler for one speculative round
     * (gf_spec_request): writes *accepted_out, the draft tokens accepted
     * (0 .. K), and *next_out, the token that follows them (the residual
     * draw at the first rejected position, or the bonus token). Exactly the
     * engine's gf_spec_round for the same request. model may be NULL (as for
     * `sample`: genfence's sampler kinds call it with no model loaded). */
    gf_status (*speculate)(void *model, const gf_spec_request *req, int32_t *accepted_out, int32_t *next_out);

    /* (optional) what the backend reports as log-probabilities: for B rows
     * of logits (B, V) under params (plain, or ext set for a profile
     * sample_profiles declares), the V values of `mode`, a gf_logprob_mode
     * (genfence/sampler.h, docs/sampler.md "Logprobs": 0 raw log-softmax of
     * the raw logits, 1 the raw logits, 2 log-softmax after temperature
     * alone, 3 log-softmax of the profile's filtered z, -inf where dropped,
     * 4 that z itself), written into out (B, V), in double. Each row must
     * equal gf_sampler_logprobs for that row within the case's slot_atol
     * (float32 arithmetic is enough at the shipped 1e-5), with -inf exactly
     * where it has -inf. The logits are what gf_sampler_logprobs accepts
     * (validated, as for sample_ex); scaled / processed rows are never
     * greedy. GF_E_UNSUPPORTED for a mode or profile the backend does not
     * report (a declined call, tallied and said). model may be NULL. */
    gf_status (*logprobs)(void *model, const float *logits, int32_t B, int32_t V, const gf_sampler_params *params,
                          int32_t mode, double *out);
} gf_backend_ops;

/* ---- table versions ----
 *
 * Within one GF_BACKEND_ABI_VERSION the table only grows at its end, and
 * struct_size says how much of it a backend was built with. Every slot
 * through `forward` is the version-2 baseline (a table shorter than that is
 * refused); a slot past it (`sample`, `last_error`, `sample_profiles`,
 * `sample_ex`, `forward_trace`, `model_paths`, `speculate`, `logprobs`,
 * and any added later) is
 * read only after GF_OPS_HAS(ops, slot) says the backend's table holds it and
 * it is set. A table longer than the one this genfence was built with comes
 * from a newer genfence's headers and is refused (its extra slots would be
 * ignored silently). The engine checks all of this in gf_backend_check_ops
 * and calls every slot through its own wrappers (genfence/engine.h). */
#define GF_BACKEND_OPS_BASE_SIZE (offsetof(gf_backend_ops, forward) + sizeof(((gf_backend_ops *)0)->forward))
#define GF_OPS_HAS(ops, slot) \
    ((ops)->struct_size >= offsetof(gf_backend_ops, slot) + sizeof((ops)->slot) && (ops)->slot != NULL)

/* What a plugin shared object exports. */
typedef const gf_backend_ops *(*gf_backend_entry_fn)(void);
#define GF_BACKEND_ENTRY_SYMBOL "genfence_backend_entry"

#ifdef __cplusplus
}
#endif
#endif
