/* ref behind a model_paths slot (backend.h): the kernel path a model's calls
 * ran, against the path info declares (cpu_path), for the mechanism probes'
 * silent-fallback check (harness/kinds/probe.c, tests/cli/probes.sh). The
 * numbers are ref's in every case: only the path differs.
 *   GF_FAULT 212 ref-fallback-dh80: declares cpu_path "tiled"; a model of
 *      head dim 80 runs "scalar" (a silent fallback: the probe's NMSE passes,
 *      its declared-path check fails)
 *   GF_FAULT 213 ref-path-honest: the same paths, declaring "tiled,scalar":
 *      every probe passes */
#include <stdlib.h>
#include <string.h>

#include "genfence/backend.h"
#include "ref/ref.h"

#ifndef GF_FAULT
#error "GF_FAULT selects the fault"
#endif

typedef struct fp_model {
    void *ref;
    int dh80; /* the model's head dim is 80: its calls run "scalar" */
    int ran;  /* a forward ran */
} fp_model;

static gf_backend_ops g_ops;

static gf_status fp_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    gf_backend_info mine;
    memset(&mine, 0, sizeof mine);
    mine.struct_size = sizeof mine;
    gf_status st = gf_backend_ref()->info(opts, &mine);
    if (st != GF_OK)
        return st;
    mine.cpu_path = GF_FAULT == 212 ? "tiled" : "tiled,scalar";
    return gf_backend_info_put(info_out, &mine);
}

static gf_status fp_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    *model_out = NULL;
    fp_model *m = calloc(1, sizeof *m);
    if (!m)
        return GF_E_NOMEM;
    gf_status st = gf_backend_ref()->model_load(desc, opts, &m->ref);
    if (st != GF_OK) {
        free(m);
        return st;
    }
    m->dh80 = desc->config.d_head == 80;
    *model_out = m;
    return GF_OK;
}

static void fp_free(void *model)
{
    fp_model *m = model;
    if (m)
        gf_backend_ref()->model_free(m->ref);
    free(m);
}

static gf_status fp_cache_create(void *model, int32_t batch, int32_t max_len, void **cache_out)
{
    return gf_backend_ref()->cache_create(((fp_model *)model)->ref, batch, max_len, cache_out);
}

static gf_status fp_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    fp_model *m = model;
    m->ran = 1;
    return gf_backend_ref()->forward(m->ref, cache, in, logits_out);
}

static gf_status fp_forward_trace(void *model, void *cache, const gf_batch *in, float *logits_out,
                                  const gf_trace_request *req)
{
    fp_model *m = model;
    m->ran = 1;
    return gf_backend_ref()->forward_trace(m->ref, cache, in, logits_out, req);
}

static const char *fp_last_error(void *model)
{
    const gf_backend_ops *r = gf_backend_ref();
    return r->last_error ? r->last_error(model ? ((fp_model *)model)->ref : NULL) : NULL;
}

static gf_status fp_paths(void *model, char *buf, size_t len)
{
    const fp_model *m = model;
    const char *p = !m->ran ? "" : m->dh80 ? "scalar" : "tiled";
    size_t n = strlen(p) < len ? strlen(p) : len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return GF_OK;
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.struct_size = sizeof g_ops;
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref behind a model_paths slot (tests/backends/faulty_path.c)";
        g_ops.info = fp_info;
        g_ops.model_load = fp_load;
        g_ops.model_free = fp_free;
        g_ops.cache_create = fp_cache_create;
        g_ops.forward = fp_forward;
        g_ops.forward_trace = fp_forward_trace;
        g_ops.last_error = fp_last_error;
        g_ops.sample = NULL;
        g_ops.sample_profiles = NULL;
        g_ops.sample_ex = NULL;
        g_ops.model_paths = fp_paths;
    }
    return &g_ops;
}
