/* Fuzz target: the golden reader (safetensors + format, metadata, data_sha256,
 * tensor names, dtypes, shapes, token ids). A golden that reads must be
 * self-consistent: its rows' shapes agree with V and steps. */
#include "fuzz_common.h"
#include "golden.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = gf_fuzz_path(0, "g.safetensors");
    gf_fuzz_write(path, data, size);
    gf_golden *g = NULL;
    if (gf_golden_read(path, &g) != GF_OK) {
        GF_FUZZ_ASSERT(g == NULL, "out not cleared on failure");
        return 0;
    }
    GF_FUZZ_ASSERT(g->rows > 0 && g->V > 0, "rows %d V %d", g->rows, g->V);
    for (int32_t b = 0; b < g->rows; b++) {
        const gf_golden_row *r = &g->row[b];
        GF_FUZZ_ASSERT(r->steps >= 0 && r->prompt_len >= 0 && r->prompt_len + r->steps == r->n_tokens,
                       "row %d: %d + %d != %d", b, r->prompt_len, r->steps, r->n_tokens);
        for (int32_t i = 0; i < r->n_tokens; i++)
            GF_FUZZ_ASSERT(r->tokens[i] >= 0 && r->tokens[i] < g->V, "row %d token %d = %d", b, i, r->tokens[i]);
        volatile float sink = 0;
        for (int64_t i = 0; i < (int64_t)r->steps * g->V; i++)
            sink += r->logits[i];
        for (int32_t i = 0; i < r->steps; i++)
            sink += (float)r->margins[i];
        (void)sink;
    }
    for (size_t i = 0; i < g->n_meta; i++)
        GF_FUZZ_ASSERT(gf_golden_meta(g, g->meta_keys[i]), "meta %zu", i);
    gf_golden_free(g);
    return 0;
}
