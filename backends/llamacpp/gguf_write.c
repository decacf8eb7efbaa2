/* gguf_write MODEL_DIR OUT.gguf: a genfence model directory as the F32 GGUF
 * the llamacpp backend loads (lc_gguf.c), plus the model's own BPE
 * vocabulary from its tokenizer.json (tokens, token types, merges, BOS/EOS),
 * for serving it with llama.cpp's llama-server (docs/http.md,
 * tests/cli/http_live.sh): the backend's GGUF has vocabulary "none" (ids
 * only), and llama-server turns every generated token into text, which
 * llama.cpp refuses without a vocabulary (GGML_ASSERT in token_get_attr).
 * The weights and the computation are the backend's. Exit 0 written, 1
 * failed, 2 usage. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ggml.h>
#include <gguf.h>

#include "genfence/model.h"
#include "lc.h"

/* Add tokenizer.json's vocabulary to g (V tokens). 0 ok, -1 with a message. */
static int add_vocab(struct gguf_context *g, const char *dir, const gf_model_config *cfg, char *err, size_t err_len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    json_t *model = json_object_get(root, "model"), *vocab = json_object_get(model, "vocab");
    json_t *merges = json_object_get(model, "merges"), *added = json_object_get(root, "added_tokens");
    const int32_t V = cfg->vocab_size;
    int rc = -1;
    const char **tokens = calloc((size_t)V, sizeof *tokens); /* (V) */
    int32_t *types = calloc((size_t)V, sizeof *types);       /* (V) */
    char **merge_text = NULL;                                /* (n_merges) */
    size_t n_merges = json_is_array(merges) ? json_array_size(merges) : 0;
    char(*unused)[24] = calloc((size_t)V, sizeof *unused); /* (V) names of ids the file does not give */
    if (!root || !json_is_object(vocab) || !tokens || !types || !unused) {
        snprintf(err, err_len, "%s: %s", path, root ? "no model.vocab (a BPE tokenizer.json)" : je.text);
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v)
    {
        json_int_t id = json_integer_value(v);
        if (json_is_integer(v) && id >= 0 && id < V)
            tokens[id] = key, types[id] = 1; /* LLAMA_TOKEN_TYPE_NORMAL */
    }
    size_t i;
    json_array_foreach(added, i, v)
    {
        json_int_t id = json_integer_value(json_object_get(v, "id"));
        json_t *content = json_object_get(v, "content");
        if (id >= 0 && id < V && json_is_string(content))
            tokens[id] = json_string_value(content), types[id] = 3; /* CONTROL */
    }
    for (int32_t t = 0; t < V; t++)
        if (!tokens[t]) {
            snprintf(unused[t], sizeof unused[t], "<unused%d>", t);
            tokens[t] = unused[t], types[t] = 5; /* UNUSED */
        }
    merge_text = calloc(n_merges ? n_merges : 1, sizeof *merge_text);
    if (!merge_text) {
        snprintf(err, err_len, "out of memory");
        goto done;
    }
    for (i = 0; i < n_merges; i++) {
        json_t *m = json_array_get(merges, i);
        if (json_is_string(m))
            merge_text[i] = strdup(json_string_value(m));
        else if (json_is_array(m) && json_array_size(m) == 2 &&
                 asprintf(&merge_text[i], "%s %s", json_string_value(json_array_get(m, 0)),
                          json_string_value(json_array_get(m, 1))) < 0)
            merge_text[i] = NULL;
        if (!merge_text[i]) {
            snprintf(err, err_len, "%s: merge %zu is not 'a b' or [a, b]", path, i);
            goto done;
        }
    }
    gguf_set_val_str(g, "tokenizer.ggml.model", "gpt2");
    gguf_set_val_str(g, "tokenizer.ggml.pre", "gpt-2");
    gguf_set_arr_str(g, "tokenizer.ggml.tokens", tokens, (size_t)V);
    gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (size_t)V);
    gguf_set_arr_str(g, "tokenizer.ggml.merges", (const char **)merge_text, n_merges);
    if (cfg->bos_id >= 0)
        gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", (uint32_t)cfg->bos_id);
    if (cfg->eos_id >= 0)
        gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", (uint32_t)cfg->eos_id);
    gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", false);
    rc = 0;
done:
    for (i = 0; merge_text && i < n_merges; i++)
        free(merge_text[i]);
    free(merge_text);
    free(tokens);
    free(types);
    free(unused);
    json_decref(root);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gguf_write MODEL_DIR OUT.gguf\n");
        return 2;
    }
    gf_model *m = NULL;
    gf_status st = gf_model_load(argv[1], &m);
    const gf_model_desc *desc = st == GF_OK ? gf_model_desc_get(m) : NULL;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.novocab", argv[2]);
    if (st == GF_OK)
        st = lc_check_desc(desc);
    if (st == GF_OK)
        st = lc_gguf_write(desc, tmp);
    if (st != GF_OK) {
        fprintf(stderr, "gguf_write: %s: %s\n", argv[1], gf_error_msg());
        gf_model_free(m);
        return 1;
    }
    struct ggml_context *data = NULL;
    struct gguf_init_params ip = {.no_alloc = false, .ctx = &data};
    struct gguf_context *in = gguf_init_from_file(tmp, ip), *g = gguf_init_empty();
    char err[4400] = "";
    int rc = 1;
    if (!in || !g)
        snprintf(err, sizeof err, "cannot read back %s", tmp);
    else {
        /* a fresh context: the file's keys, its tensors (their data in `data`), the vocabulary */
        gguf_set_kv(g, in);
        for (int64_t t = 0; t < gguf_get_n_tensors(in); t++)
            gguf_add_tensor(g, ggml_get_tensor(data, gguf_get_tensor_name(in, t)));
        if (add_vocab(g, argv[1], &desc->config, err, sizeof err) == 0) {
            if (gguf_write_to_file(g, argv[2], false))
                rc = 0;
            else
                snprintf(err, sizeof err, "cannot write %s", argv[2]);
        }
    }
    if (rc)
        fprintf(stderr, "gguf_write: %s\n", err);
    unlink(tmp);
    gguf_free(in);
    gguf_free(g);
    ggml_free(data);
    gf_model_free(m);
    return rc;
}
