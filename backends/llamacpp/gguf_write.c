/* gguf_write MODEL_DIR OUT.gguf: a genfence model directory as the F32 GGUF
 * the llamacpp backend loads (lc_gguf.c: vocabulary "none", ids only), for
 * serving it with llama.cpp's llama-server (docs/http.md, tests/cli/http_live.sh).
 * Exit 0 written, 1 failed, 2 usage. */
#include <stdio.h>

#include "genfence/model.h"
#include "lc.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gguf_write MODEL_DIR OUT.gguf\n");
        return 2;
    }
    gf_model *m = NULL;
    gf_status st = gf_model_load(argv[1], &m);
    const gf_model_desc *desc = st == GF_OK ? gf_model_desc_get(m) : NULL;
    if (st == GF_OK)
        st = lc_check_desc(desc);
    if (st == GF_OK)
        st = lc_gguf_write(desc, argv[2]);
    if (st != GF_OK)
        fprintf(stderr, "gguf_write: %s: %s\n", argv[1], gf_error_msg());
    gf_model_free(m);
    return st == GF_OK ? 0 : 1;
}
