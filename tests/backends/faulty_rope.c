/* ref with a fault in what the model description says about attention
 * windows and rotary scaling (issue 27 item 4): each fault rewrites one
 * field of a copy of gf_model_desc before ref's model_load sees it, the way a
 * backend that reads the field wrongly would compute. tests/cli/rope_variants.sh
 * runs the variant suite against each and expects exactly the boundary cases
 * the fault touches to fail.
 *   110 ref-window-wide:   every layer's window one key wider (w + 1: flash
 *                          attention's window_size = (w, w) read as w keys
 *                          on each side, vllm issue 3385's 2049 for 2048)
 *   111 ref-window-narrow: one key narrower (w - 1: the own key not counted)
 *   112 ref-no-mscale:     rope_attn_factor dropped (cos and sin unscaled: the
 *                          missing mscale / attention_factor, sglang 31232) */
#include "genfence/backend.h"
#include "ref/ref.h"

#include <stdlib.h>
#include <string.h>

static gf_backend_ops g_ops;

static gf_status rope_fault_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    gf_model_desc d = *desc;
    int32_t *win = NULL; /* (L) the rewritten windows */
#if GF_FAULT == 110 || GF_FAULT == 111
    if (gf_model_desc_has(desc, layer_window) && desc->layer_window) {
        const int32_t L = desc->config.n_layer;
        if (!(win = malloc((size_t)L * sizeof *win)))
            return GF_E_NOMEM;
        for (int32_t l = 0; l < L; l++) {
            int32_t w = desc->layer_window[l];
            win[l] = w <= 0 ? w : GF_FAULT == 110 ? w + 1 : (w > 1 ? w - 1 : 1);
        }
        d.layer_window = win;
    }
#elif GF_FAULT == 112
    if (gf_model_desc_has(desc, rope_attn_factor))
        d.rope_attn_factor = 1.0f;
#endif
    gf_status st = gf_backend_ref()->model_load(&d, opts, model_out);
    free(win); /* ref keeps its own copy */
    return st;
}

__attribute__((visibility("default"))) const gf_backend_ops *genfence_backend_entry(void)
{
    if (!g_ops.name) {
        g_ops = *gf_backend_ref();
        g_ops.name = GF_FAULT_NAME;
        g_ops.description = "ref reading the model's window or rotary scaling wrongly (tests/backends/faulty_rope.c)";
        g_ops.model_load = rope_fault_model_load;
    }
    return &g_ops;
}
