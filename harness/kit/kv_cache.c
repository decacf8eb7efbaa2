/* The KV cache's shape and bytes as JSON (kv_cache.h). */
#include "kv_cache.h"

#include <stdio.h>
#include <string.h>

json_t *gf_kv_cache_json(const gf_model_config *cfg, int32_t B, int32_t max_len, size_t bytes)
{
    /* (2 for k and v, L, B, H_kv, max_len, d_head) */
    double elems = 2.0 * cfg->n_layer * B * cfg->n_kv_head * (double)max_len * cfg->d_head;
    return json_pack("{s:s, s:[i,i,i,i,i,i], s:f, s:I, s:f}", "layout", "(k|v, L, B, H_kv, max_len, d_head)", "shape",
                     2, cfg->n_layer, B, cfg->n_kv_head, max_len, cfg->d_head, "elements", elems, "bytes",
                     (json_int_t)bytes, "bytes_per_element", elems > 0 ? (double)bytes / elems : 0.0);
}

void gf_kv_split(const char *kv, char *k, size_t kcap, char *v, size_t vcap)
{
    const char *comma = kv ? strchr(kv, ',') : NULL;
    if (kv && !strncmp(kv, "k=", 2) && comma && !strncmp(comma + 1, "v=", 2)) {
        snprintf(k, kcap, "%.*s", (int)(comma - kv - 2), kv + 2);
        snprintf(v, vcap, "%s", comma + 3);
    } else {
        snprintf(k, kcap, "%s", kv ? kv : "");
        snprintf(v, vcap, "%s", kv ? kv : "");
    }
}
