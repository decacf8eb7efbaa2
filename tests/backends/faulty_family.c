/* ref reading the family's own parts of the model description wrongly
 * (issue 32 item 1): each fault rewrites a copy of gf_model_desc before
 * ref's model_load sees it, the way a backend that ignores the field
 * computes. The default suite's goldens on a tiny Qwen2 and on rope-scaled
 * Llamas (cases/golden_family.yaml, transformers) fail them; their twins are
 * in cases/detect/golden_family.yaml.
 *   172 ref-no-qkv-bias:    Qwen2's q/k/v biases dropped (qkv_bias read as 0)
 *   173 ref-rope-unscaled:  rope_scaling ignored: the inverse frequencies from
 *                           rope_theta alone, 1 / theta^(2i / d_head)
 * GF_FAULT: the number in tests/backends/CMakeLists.txt. */
#include <math.h>
#include <stdlib.h>

#include "genfence/backend.h"
#include "ref/ref.h"

#ifndef GF_FAULT
#error "GF_FAULT selects the fault"
#endif

static gf_backend_ops g_ops;

static gf_status family_fault_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    gf_model_desc d = *desc;
    gf_layer_weights *layers = NULL; /* (L) 172: the layers without their biases */
    float *inv = NULL;               /* (d_head / 2) 173: the unscaled frequencies */
    const int32_t L = desc->config.n_layer, half = desc->config.d_head / 2;
#if GF_FAULT == 172
    if (desc->config.qkv_bias && desc->weights.layers) {
        if (!(layers = malloc((size_t)L * sizeof *layers)))
            return GF_E_NOMEM;
        for (int32_t l = 0; l < L; l++) {
            layers[l] = desc->weights.layers[l];
            layers[l].bq = layers[l].bk = layers[l].bv = NULL;
        }
        d.config.qkv_bias = 0;
        d.weights.layers = layers;
    }
#elif GF_FAULT == 173
    if (desc->weights.rope_inv_freq && half > 0) {
        if (!(inv = malloc((size_t)half * sizeof *inv)))
            return GF_E_NOMEM;
        for (int32_t i = 0; i < half; i++) /* the scaling's type and factor never read */
            inv[i] = 1.0f /
                     (float)pow((double)desc->config.rope_theta, (double)((float)(2 * i) / (float)desc->config.d_head));
        d.weights.rope_inv_freq = inv;
    }
#endif
    (void)L;
    (void)half;
    gf_status st = gf_backend_ref()->model_load(&d, opts, model_out);
    free(layers); /* ref keeps its own copies */
    free(inv);
    return st;
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref reading the family's biases or rope scaling wrongly (tests/backends/faulty_family.c)";
        g_ops.model_load = family_fault_model_load;
    }
    return &g_ops;
}
