/* The probe kind's pieces (probe.c: keys and run; probe_model.c: the
 * micro-model; docs/cases.md "probe"). */
#ifndef GENFENCE_HARNESS_KINDS_PROBE_H
#define GENFENCE_HARNESS_KINDS_PROBE_H

#include <jansson.h>
#include <stdint.h>

#include "genfence/model_desc.h"
#include "genfence/status.h"

/* The mechanisms, one table: name, what the micro-model keeps of a block
 * (attention on, MLP on), what it isolates. */
/* clang-format off */
#define GF_PROBE_LIST(X)                                                                              \
    X(embedding, 0, 0, "token (and learned position) embedding, final norm, head: both sublayers zeroed") \
    X(attention, 1, 0, "one attention block (MLP zeroed): causal, padded or cached calls")         \
    X(rope,      1, 0, "rotary positions through one attention block, up to the context limit")   \
    X(norm,      0, 1, "LayerNorm / RMSNorm (seeded gains) around the MLP; attention zeroed")      \
    X(mlp,       0, 1, "one MLP (GELU tanh / erf, SwiGLU); attention zeroed")                        \
    X(head,      0, 0, "the output head with logits in the thousands; both sublayers zeroed")
/* clang-format on */

typedef enum gf_probe_mech {
#define GF_PROBE_ENUM(name, att, mlp, what) GF_PROBE_##name,
    GF_PROBE_LIST(GF_PROBE_ENUM)
#undef GF_PROBE_ENUM
        GF_PROBE_COUNT
} gf_probe_mech;

extern const char *const gf_probe_names[]; /* NULL-terminated, in GF_PROBE_LIST order */

enum { GF_PROBE_UNCACHED = 0, GF_PROBE_CACHED = 1, GF_PROBE_PADDED = 2 };

typedef struct gf_probe_spec {
    int mech; /* gf_probe_mech */
    int arch; /* GF_ARCH_* */
    long long n_embd, n_head, n_kv_head, d_head, d_ff, vocab, n_positions, n_layer;
    int activation; /* GF_ACT_* (GPT-2: gelu_tanh, gelu_erf, relu; Llama: silu) */
    double norm_eps, rope_theta;
    json_t *rope_scaling; /* the case's rope_scaling mapping, written into config.json as is; NULL: none */
    double embed_scale;   /* std of the token embeddings */
    double qk_scale;      /* W_q, W_k std in units of 1 / sqrt(n_embd): attention scores ~ qk_scale^2 */
    double head_scale;    /* lm_head std in units of 1 / sqrt(n_embd): logits ~ head_scale */
    double gain_spread;   /* norm gains 1 + gain_spread N(0, 1) (norm probe), else 1 */
    long long tokens, rows, seed;
    int mode;        /* GF_PROBE_UNCACHED / _CACHED / _PADDED */
    int32_t *chunks; /* cached: the calls' sizes, adding up to tokens */
    size_t n_chunks;
    int32_t *pad; /* padded: left padding of each row (rows entries) */
    size_t n_pad;
    double bound;    /* declared NMSE bound; 0: the rule by the backend's compute type */
    char shape[160]; /* "llama D64 H4/4 dh16 F128 V96 P64 T8 cached[5,1,1,1]" (the table's column) */
} gf_probe_spec;

/* The micro-model of spec, seeded: weights N(0, 1) from Philox (seed, one
 * stream per tensor) scaled as the spec says, the sublayers the mechanism
 * does not keep zeroed. Written into dir (gf_model_write). */
gf_status gf_probe_model_write(const gf_probe_spec *s, const char *dir);

#endif
