/* The statistical tier (distribution_match, docs/cases.md): where token
 * equality cannot hold, a backend's next-token distributions are judged
 * against the reference's by KL divergence, top-1 agreement and |delta p|. */
#ifndef GENFENCE_HARNESS_DISTRIBUTION_MATCH_H
#define GENFENCE_HARNESS_DISTRIBUTION_MATCH_H

#include <stddef.h>

#include "keys.h"

/* The weight type the thresholds are keyed on: the backend's info.weights
 * ("q8_0", "f16", ...), else its declared compute dtype as a storage name
 * (fp32 -> "f32", fp16 -> "f16", bf16 -> "bf16", tf32 -> "tf32"); and its KV
 * cache type (info.kv_cache, else the same). Needs k->session. */
void gf_stat_backend_types(const gf_krun *k, char *weights, size_t wcap, char *kv, size_t kvcap);

/* (The deferral of token-equality kinds on lower-precision weights to this
 * tier is the plan's: harness/run/plan.c, gf_kind_def.judges_weights.) */

#endif
