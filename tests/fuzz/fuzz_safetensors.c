/* Fuzz target: the safetensors reader. A file that opens must be consistent:
 * every tensor's bytes lie inside the file, nbytes = numel * dtype size, find()
 * returns each listed tensor, and small tensors convert to F32. */
#include <string.h>

#include "fuzz_common.h"
#include "genfence/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = gf_fuzz_path(0, "t.safetensors");
    gf_fuzz_write(path, data, size);
    gf_safetensors *st = NULL;
    if (gf_safetensors_open(path, &st) != GF_OK) {
        GF_FUZZ_ASSERT(st == NULL, "st_out not cleared on failure");
        return 0;
    }
    size_t n = gf_safetensors_count(st);
    for (size_t i = 0; i < n; i++) {
        const gf_st_tensor *t = gf_safetensors_at(st, i);
        GF_FUZZ_ASSERT(t && t->name, "tensor %zu missing", i);
        GF_FUZZ_ASSERT(t->offset <= size && t->nbytes <= size - t->offset, "tensor %s outside the file", t->name);
        int64_t numel = gf_st_tensor_numel(t);
        GF_FUZZ_ASSERT(numel >= 0 && (uint64_t)numel * gf_dtype_size(t->dtype) == t->nbytes,
                       "tensor %s: nbytes %zu vs numel %lld", t->name, t->nbytes, (long long)numel);
        GF_FUZZ_ASSERT(gf_safetensors_find(st, t->name) == t, "find(%s) is not the listed tensor", t->name);
        if (numel <= 4096) {
            float *dst = malloc((size_t)(numel ? numel : 1) * sizeof *dst);
            if (dst)
                (void)gf_st_tensor_to_f32(st, t, dst);
            free(dst);
        }
    }
    for (size_t i = 0; i < gf_safetensors_meta_count(st); i++) {
        const char *k = NULL, *v = NULL;
        gf_safetensors_meta_at(st, i, &k, &v);
        GF_FUZZ_ASSERT(k && v && gf_safetensors_meta(st, k), "metadata %zu", i);
    }
    gf_safetensors_close(st);
    return 0;
}
