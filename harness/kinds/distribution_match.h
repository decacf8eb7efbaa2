/* The statistical tier (distribution_match, docs/cases.md): where token
 * equality cannot hold, a backend's next-token distributions are judged
 * against the reference's by KL divergence, top-1 agreement and |delta p|. */
#ifndef GENFENCE_HARNESS_DISTRIBUTION_MATCH_H
#define GENFENCE_HARNESS_DISTRIBUTION_MATCH_H

#include <stddef.h>

#include "krun.h"

/* The weight type the thresholds are keyed on: the backend's info.weights
 * ("q8_0", "f16", ...), else its declared compute dtype as a storage name
 * (fp32 -> "f32", fp16 -> "f16", bf16 -> "bf16", tf32 -> "tf32"); and its KV
 * cache type (info.kv_cache, else the same). Needs k->session. */
void gf_stat_backend_types(const gf_krun *k, char *weights, size_t wcap, char *kv, size_t kvcap);

/* Called first by the token-equality kinds that compare against a fp32
 * reference (golden_generation): for a backend whose weights are quantized or
 * held in lower precision (info.weights set and not "f32"), when a
 * distribution_match case on the same model in cases/statistical*.yaml has
 * thresholds for them, records the skip "weights q8_0: judged by the
 * statistical tier (case ID)" and returns 1 (the caller returns). Else 0:
 * nothing would judge the backend statistically, so token equality does
 * (metrics.statistical_tier says why). */
int gf_stat_defer(const gf_case *c, gf_krun *k);

#endif
