/* Fuzz target: the golden reader (safetensors + format, metadata, data_sha256,
 * tensor names, dtypes, shapes, token ids). A golden that reads must be
 * self-consistent: its rows' shapes agree with V and steps.
 *
 * A mutated file almost never keeps its data_sha256, which the reader checks
 * first; so when the input is safetensors with a "data_sha256":"<64 hex>"
 * in its header, the digest is recomputed and patched in place (same length)
 * before the read, letting the checks behind it see mutated data too. */
#include <string.h>

#include "fuzz_common.h"
#include "golden.h"

static void patch_digest(uint8_t *buf, size_t size, const char *path)
{
    static const char key[] = "\"data_sha256\":\"";
    gf_safetensors *st = NULL;
    if (gf_safetensors_open(path, &st) != GF_OK)
        return;
    char hex[65];
    int ok = gf_golden_data_sha256(st, hex) == GF_OK;
    gf_safetensors_close(st);
    if (!ok || size < 8)
        return;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | buf[i];
    if (hlen > size - 8)
        return;
    uint8_t *h = buf + 8, *end = h + hlen;
    for (uint8_t *p = h; p + sizeof key - 1 + 64 <= end; p++)
        if (!memcmp(p, key, sizeof key - 1)) {
            memcpy(p + sizeof key - 1, hex, 64);
            gf_fuzz_write(path, buf, size);
            return;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = gf_fuzz_path(0, "g.safetensors");
    gf_fuzz_write(path, data, size);
    uint8_t *copy = malloc(size ? size : 1);
    if (copy) {
        memcpy(copy, data, size);
        patch_digest(copy, size, path);
        free(copy);
    }
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
