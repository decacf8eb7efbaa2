/* Internal to engine/: guarded copies of the buffers genfence hands a backend
 * (issue 12, item 4). A gf_guard is one mapping
 *
 *   | PROT_NONE page | slack | pattern | data (n bytes) | pattern | PROT_NONE page |
 *
 * with a known byte pattern directly around the data: GF_GUARD_BEFORE bytes
 * before it (fewer when the slack is smaller: then the guard page follows)
 * and GF_GUARD_SENTINEL to GF_GUARD_SENTINEL + alignof(max_align_t) - 1
 * after it (the data's end sits against the trailing pattern, its start at
 * malloc's alignment). A stray write near the buffer changes the pattern,
 * which gf_guard_check finds after the call; one a page past the end hits
 * the guard page (SIGSEGV, a crash the runner reports with the call trace).
 * The slack, left when a smaller buffer reuses a mapping a bigger one made,
 * is neither filled nor checked beyond GF_GUARD_BEFORE: a write there is not
 * seen, and harms only the mapping. The mapping is kept between calls and
 * grows only when a bigger buffer is needed, so a guarded call costs a copy
 * in, a copy out and about 4 KiB of pattern written and compared. */
#ifndef GENFENCE_ENGINE_GUARD_H
#define GENFENCE_ENGINE_GUARD_H

#include <stddef.h>

#include "genfence/backend.h"
#include "genfence/status.h"

#define GF_GUARD_SENTINEL 64   /* pattern bytes at least after the data */
#define GF_GUARD_BEFORE   4096 /* pattern bytes before it (where the mapping has room) */

typedef struct gf_guard {
    unsigned char *map; /* the whole mapping, guard pages included */
    size_t map_len;
    unsigned char *lo, *hi; /* [lo, hi): the writable bytes between the guard pages */
    unsigned char *data;    /* the buffer handed out last (NULL: none) */
    size_t n;               /* its bytes */
} gf_guard;

/* Hand out n bytes (n >= 1) in g: grows the mapping if needed, writes the
 * pattern around the buffer, copies src in (NULL: leaves the bytes as they
 * are). Returns the buffer, or NULL with GF_E_NOMEM set. */
void *gf_guard_place(gf_guard *g, size_t n, const void *src);

/* After the call: 1 if every pattern byte is intact; else 0 with *before_out
 * the bytes from the first changed byte before the buffer to its start (0:
 * none before) and *past_out the bytes from the buffer's end to the last
 * changed byte after it, that byte included (0: none after). The pattern is
 * restored, so the next call starts clean. */
int gf_guard_check(gf_guard *g, size_t *before_out, size_t *past_out);

/* Unmap (NULL-safe; g is zeroed). */
void gf_guard_release(gf_guard *g);

/* The first index at which the n bytes at a and b differ, or n if none. */
size_t gf_guard_first_diff(const void *a, const void *b, size_t n);

/* The message for a guard that gf_guard_check found broken: sets status st
 * with "<where>: wrote 4 bytes (1 float) past <what> <shape>" (before,
 * past or both), the distances rounded up to whole elements of elem bytes.
 * what: the buffer's name ("logits_out"); shape: e.g. "((B, T, V) = (1, 5, 96) floats)". */
gf_status gf_guard_error(gf_status st, const char *where, const char *what, const char *shape, size_t elem,
                         const char *elem_name, size_t before, size_t past);

/* After a guarded call: GF_OK if the pattern around g is intact and, for an
 * input (orig: the caller's copy of the bytes), none of them changed; else
 * GF_E_BACKEND: "<where>: wrote N bytes (k floats) past <what> <shape>" or
 * "<where>: changed <what> <shape>, its read-only input: element i was x,
 * is y". elem: the element size, 4 (int32, float: a change shown as int32)
 * or 1; elem_name: "float", "int32", "byte". */
gf_status gf_guard_verdict(gf_guard *g, const char *where, const char *what, const char *shape, const void *orig,
                           size_t elem, const char *elem_name);

/* The type of both sampler slots, gf_backend_ops.sample and .sample_ex. */
typedef gf_status (*gf_sample_slot_fn)(void *model, const float *logits, int32_t B, const gf_sampler_params *params,
                                       const gf_rng_draws *draws, int32_t *ids_out);

/* gf_backend_sample's call of the slot it chose (engine/backend_sample.c):
 * slot, the table's own pointer (sample or sample_ex), on guarded copies of
 * logits (B, d->V) and ids_out (B), and for sample_ex of p->ext and its
 * history, stop_ids and bias arrays (all read-only but ids_out), kept per
 * thread.
 * Returns the slot's status, or GF_E_BACKEND when it wrote outside a buffer
 * or into an input ("sample call #N (B b, V v): ..."); ids_out gets the slot's
 * ids only after a clean call. call: the slot's call index. */
gf_status gf_guard_sample(gf_sample_slot_fn slot, void *model, const float *logits, int32_t B,
                          const gf_sampler_params *p, const gf_rng_draws *d, int32_t *ids_out, long long call);

/* The logprobs slot likewise: logits and params->ext read-only, out (B, V)
 * doubles guarded; out gets the slot's values only after a clean call. */
typedef gf_status (*gf_logprobs_slot_fn)(void *model, const float *logits, int32_t B, int32_t V,
                                         const gf_sampler_params *params, int32_t mode, double *out);
gf_status gf_guard_logprobs(gf_logprobs_slot_fn slot, void *model, const float *logits, int32_t B, int32_t V,
                            const gf_sampler_params *p, int32_t mode, double *out, long long call);

/* model_load's descriptor (issue 12): the weights and the desc are the
 * caller's, read-only to the backend. gf_desc_guard_take, before the call,
 * keeps a copy of the desc and its layers array and two 64-bit sums per
 * block of GF_DESC_BLOCK floats of every tensor (S = sum of the words, W =
 * sum of (n - i) * word: 16 bytes per 4 KiB, no copy of the weights). After
 * the call gf_desc_guard_verdict recomputes them: a changed pointer, config
 * or name is GF_E_BACKEND naming the field; a changed block names the tensor
 * and the first changed element with its old and new value (exact when one
 * element of the block changed: the sums' differences give its index and
 * its old bits; for several, the block's range). Two changes that cancel in
 * both sums go unseen. */
#define GF_DESC_BLOCK 1024

typedef struct gf_desc_tensor {
    const char *field; /* "layers[3].attn_qkv_w"; points into the guard's name pool */
    const float *data;
    size_t n, cols; /* elements; cols: the row length (0: 1-D) */
    size_t block0;  /* its first block in sums */
} gf_desc_tensor;

typedef struct gf_desc_guard {
    gf_model_desc desc;       /* the caller's desc, as it was */
    gf_layer_weights *layers; /* (L) its layers, as they were */
    gf_desc_tensor *t;        /* the tensors (a tied lm_head once, as wte) */
    size_t n_t;
    uint64_t *sums; /* (blocks, 2): S, W */
    size_t n_blocks;
    char *names; /* the field names */
} gf_desc_guard;

/* Every tensor of d (NULL pointers skipped, a tied lm_head skipped) into
 * t[] (cap: room; t and names may be NULL with cap 0, to count) with its
 * element count and field name; returns how many there are. */
size_t gf_desc_tensors(const gf_model_desc *d, gf_desc_tensor *t, size_t cap, char *names, size_t names_cap);

/* Before model_load: take the desc's state. GF_E_NOMEM on failure (g cleared). */
gf_status gf_desc_guard_take(gf_desc_guard *g, const gf_model_desc *d);

/* After it: GF_OK if d and every weight are as taken, else GF_E_BACKEND:
 * "<where>: changed desc->weights.layers[0].ln1_w, a read-only input:
 * element 7 was 0.25, is -0.25" (or "changed the pointer desc->...").
 * Does not free g. */
gf_status gf_desc_guard_verdict(const gf_desc_guard *g, const gf_model_desc *d, const char *where);

void gf_desc_guard_release(gf_desc_guard *g); /* NULL-safe; g is zeroed */

/* The probe slot on a guarded why buffer of why_len (>= 1) bytes: GF_OK,
 * with the slot's status in *probe_out and why its text (NUL-terminated, at
 * most why_len - 1 bytes of it read); GF_E_BACKEND ("probe: wrote N bytes
 * (N chars) past why (why_len = 512 bytes)") when it wrote outside the
 * buffer, GF_E_NOMEM when the guard cannot be mapped. */
gf_status gf_guard_probe(const gf_backend_ops *ops, char *why, size_t why_len, gf_status *probe_out);

#endif
