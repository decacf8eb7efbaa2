/* ref with a second copy of the weights (test fault 230, ref-two-copies):
 * model_load hands ref the desc with weights_persist cleared, so ref copies
 * every weight as a backend built before the mapped weights would, while the
 * engine's mapping stays: peak RSS about 2x the weights, which bench
 * --max-rss-ratio must report (tests/cli/mem_rss.sh). Every slot is ref's. */
#include <stdlib.h>
#include <string.h>

#include "genfence/backend.h"
#include "ref/ref.h"

#ifndef GF_FAULT
#error "GF_FAULT selects the fault"
#endif

static gf_backend_ops g_ops;

static gf_status two_copies_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    gf_model_desc d; /* the caller's desc, its promise dropped */
    memset(&d, 0, sizeof d);
    memcpy(&d, desc, desc->struct_size < sizeof d ? desc->struct_size : sizeof d);
    d.struct_size = (uint32_t)sizeof d;
    d.weights_persist = 0;
    return gf_backend_ref()->model_load(&d, opts, model_out);
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref keeping its own copy of the weights (tests/backends/faulty_memory.c)";
        g_ops.model_load = two_copies_load;
    }
    return &g_ops;
}
