/* Goldens (docs/goldens.md): reference outputs recorded once, checked
 * forever. One safetensors file per golden_generation case:
 *
 *   tokens.<b>   I64 (P_b + N)  prompt + generated tokens of row b
 *   logits.<b>   F32 (N, V)     step k's last-position logits (teacher-forced:
 *                               they chose tokens.<b>[P_b + k])
 *   margins.<b>  F64 (N)        the margin of each step's choice (raw top-1 minus
 *                               top-2 when greedy, raced scores when sampled)
 *   __metadata__ format "genfence-golden-1", generator, generator_version,
 *                model, model_hash, case_id, case_hash, created, sampler, seed,
 *                rows, steps, data_sha256, and the generator's provenance
 *                (torch_version; or backend, machine, genfence_commit).
 *
 * data_sha256 = sha256 over every tensor's raw (little-endian) bytes, the
 * tensors taken in byte order of their names. It is checked on every read, so
 * bytes changed inside the tensor data (which the safetensors structure checks
 * cannot see) are detected. tools/reference/golden.py computes it the same way. */
#ifndef GENFENCE_HARNESS_GOLDEN_H
#define GENFENCE_HARNESS_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

#include "genfence/safetensors.h"
#include "genfence/sampler.h"
#include "genfence/status.h"

#define GF_GOLDEN_FORMAT "genfence-golden-1"

typedef struct gf_golden_row {
    int32_t n_tokens;   /* P + N */
    int32_t prompt_len; /* P = n_tokens - steps */
    int32_t steps;      /* N */
    int32_t *tokens;    /* (n_tokens) */
    float *logits;      /* (N, V) */
    double *margins;    /* (N) */
} gf_golden_row;

typedef struct gf_golden {
    char *path;
    int32_t rows, V;
    gf_golden_row *row; /* (rows) */
    char **meta_keys, **meta_values;
    size_t n_meta;
    char data_sha256[65]; /* computed from the file (equal to the metadata's) */
} gf_golden;

/* Read and validate a golden: GF_E_NOT_FOUND if there is no file; GF_E_FORMAT
 * naming the file for anything wrong: not safetensors, a wrong format tag,
 * missing metadata, data_sha256 differing from the data (both digests in the
 * message), missing / unexpected tensors, wrong dtypes or shapes, token ids
 * outside the vocabulary. */
gf_status gf_golden_read(const char *path, gf_golden **out);
void gf_golden_free(gf_golden *g);                               /* NULL-safe */
const char *gf_golden_meta(const gf_golden *g, const char *key); /* NULL if absent */

/* sha256 over the tensors' data, tensors in byte order of their names. */
gf_status gf_golden_data_sha256(const gf_safetensors *st, char hex[65]);

/* Write a golden (atomically): rows[b].tokens / logits / margins with
 * rows[b].n_tokens and rows[b].steps set (prompt_len is ignored). The writer
 * adds format, rows, steps (when every row has the same) and data_sha256 to
 * the given metadata pairs. */
gf_status gf_golden_write(const char *path, const gf_golden_row *rows, int32_t n_rows, int32_t V,
                          const char *const *keys, const char *const *values, size_t n_meta);

/* The sampler as the JSON string stored in the metadata ("sampler"):
 * {"seed":S,"temperature":T,"top_k":K|null,"top_p":P|null}, keys sorted;
 * with p->ext set, also its profile, chain, filters, penalties, bias,
 * history and EOS/stop fields (a NULL ext: exactly the four keys, as every
 * golden before profiles). Non-finite values as the canonical JSON's bare
 * NaN / Infinity. malloc'd. Every field of the sampler field table
 * (genfence/sampler_fields.h). */
char *gf_golden_sampler_json(const gf_sampler_params *p);

/* The first field, in key order, where two sampler records differ (a key
 * only one side has counts), into diff as "'KEY' is A in the golden, B in
 * the case's sampler" (or "absent"); 0 equal, 1 differ, -1 when either is
 * not a canonical JSON object. */
int gf_golden_sampler_diff(const char *stored, const char *now, char *diff, size_t cap);

#endif
