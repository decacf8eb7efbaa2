/* The KV cache's size in the record (run.json's metrics, generate --json):
 * one description of its shape and bytes (kv_cache.c). */
#ifndef GENFENCE_HARNESS_KIT_KV_CACHE_H
#define GENFENCE_HARNESS_KIT_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "genfence/model_desc.h"

/* {"layout": "(k|v, L, B, H_kv, max_len, d_head)", "shape": [2, L, B, H_kv,
 * max_len, d_head], "elements": N, "bytes": the backend's cache_bytes,
 * "bytes_per_element": bytes / N}: the cache a backend allocated for B rows
 * of max_len positions. New reference. */
json_t *gf_kv_cache_json(const gf_model_config *cfg, int32_t B, int32_t max_len, size_t bytes);

/* A declared KV type ("f16", or "k=q8_0,v=f16" where the K and V caches
 * differ: llamacpp's k= / v=) as its K and V types (the same for the first
 * form; "" for NULL). */
void gf_kv_split(const char *kv, char *k, size_t kcap, char *v, size_t vcap);

#endif
