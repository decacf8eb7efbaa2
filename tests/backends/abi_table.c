/* The ref backend behind an ops table of another length, for
 * tests/cli/plugin_table_size.sh and plugin_refused.sh:
 *
 *   GF_ABI_TABLE=1  "ref-v2-short": a table that ends at `forward` (the
 *                   version-2 baseline), as a plugin built before the
 *                   optional trailing slots (sample, last_error) existed.
 *                   The bytes after it hold a set-looking `sample` pointer
 *                   that aborts: genfence must not read past struct_size, so
 *                   it loads, works, and has no sample slot.
 *   GF_ABI_TABLE=2  "ref-v2-long": the full table plus one slot this genfence
 *                   does not know (a newer genfence's header): refused.
 */
#include <stddef.h>
#include <stdlib.h>

#include "genfence/backend.h"
#include "ref/ref.h"

/* The first part of gf_backend_ops, member for member: what an older
 * backend.h declared. */
typedef struct v2_base_ops {
    uint32_t abi_version;
    uint32_t struct_size;
    const char *name;
    const char *description;
    gf_status (*probe)(char *why, size_t why_len);
    gf_status (*info)(const gf_backend_options *opts, gf_backend_info *info_out);
    gf_status (*model_load)(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out);
    void (*model_free)(void *model);
    gf_status (*cache_create)(void *model, int32_t batch, int32_t max_len, void **cache_out);
    gf_status (*cache_reset)(void *cache);
    void (*cache_free)(void *cache);
    int32_t (*cache_length)(const void *cache);
    size_t (*cache_bytes)(const void *cache);
    gf_status (*forward)(void *model, void *cache, const gf_batch *in, float *logits_out);
} v2_base_ops;
_Static_assert(sizeof(v2_base_ops) == GF_BACKEND_OPS_BASE_SIZE, "the baseline is every slot through forward");
_Static_assert(offsetof(v2_base_ops, forward) == offsetof(gf_backend_ops, forward), "same layout");

static gf_status trap_sample(void *model, const float *logits, int32_t B, const gf_sampler_params *p,
                             const gf_rng_draws *d, int32_t *ids)
{
    (void)model, (void)logits, (void)B, (void)p, (void)d, (void)ids;
    abort(); /* genfence read a slot past the table's struct_size */
}

#if GF_ABI_TABLE == 1
static void copy_base(v2_base_ops *t, const gf_backend_ops *ref)
{
    t->abi_version = ref->abi_version;
    t->probe = ref->probe;
    t->info = ref->info;
    t->model_load = ref->model_load;
    t->model_free = ref->model_free;
    t->cache_create = ref->cache_create;
    t->cache_reset = ref->cache_reset;
    t->cache_free = ref->cache_free;
    t->cache_length = ref->cache_length;
    t->cache_bytes = ref->cache_bytes;
    t->forward = ref->forward;
}

static struct {
    v2_base_ops ops;
    /* where a longer table would have `sample` and `last_error` */
    gf_status (*after[2])(void *, const float *, int32_t, const gf_sampler_params *, const gf_rng_draws *, int32_t *);
} g_table;

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    copy_base(&g_table.ops, gf_backend_ref());
    g_table.ops.struct_size = (uint32_t)sizeof g_table.ops;
    g_table.ops.name = "ref-v2-short";
    g_table.ops.description = "ref behind a version-2 baseline table (no optional trailing slots)";
    g_table.after[0] = g_table.after[1] = trap_sample;
    return (const gf_backend_ops *)(const void *)&g_table.ops;
}
#elif GF_ABI_TABLE == 2
static struct {
    gf_backend_ops ops;
    gf_status (*future_slot)(void *model);
} g_table;

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    g_table.ops = *gf_backend_ref();
    g_table.ops.struct_size = (uint32_t)sizeof g_table;
    g_table.ops.name = "ref-v2-long";
    g_table.ops.description = "ref behind a table one slot longer than this genfence's";
    g_table.ops.sample = trap_sample;
    g_table.future_slot = NULL;
    return &g_table.ops;
}
#else
#error "GF_ABI_TABLE must be 1 (short) or 2 (long)"
#endif
