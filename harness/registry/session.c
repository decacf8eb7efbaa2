/* Sessions: a model directory on a backend. */
#include "session.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

gf_status gf_session_open(gf_session *s, const char *dir, const char *backend, int32_t threads, int tokenizer)
{
    memset(s, 0, sizeof *s);
    gf_status st = GF_OK;
    if (tokenizer != GF_SESSION_TOK_NONE) { /* before the weights: a refused one costs no model load */
        char path[4096];
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
        FILE *f = fopen(path, "rb");
        if (f) {
            fclose(f);
            st = gf_tokenizer_load(path, &s->tok);
            if (st != GF_OK && tokenizer == GF_SESSION_TOK_IF_USABLE) {
                snprintf(s->tok_error, sizeof s->tok_error, "%s", gf_error_msg());
                st = GF_OK;
            }
        } else if (tokenizer == GF_SESSION_TOK_REQUIRED) {
            st = gf_error_set(GF_E_IO, "%s: no tokenizer.json (needed for text prompts)", dir);
        }
        if (st != GF_OK)
            goto fail;
    }
    st = gf_model_load(dir, &s->model);
    if (st != GF_OK)
        goto fail;
    st = gf_registry_open(backend, &s->backend);
    if (st != GF_OK)
        goto fail;
    gf_backend_options opts = gf_registry_options(&s->backend, threads);
    st = gf_engine_create(s->backend.ops, gf_model_desc_get(s->model), &opts, &s->engine);
    if (st != GF_OK)
        goto fail;
    return GF_OK;
fail:
    gf_session_close(s);
    return st;
}

void gf_session_close(gf_session *s)
{
    gf_engine_destroy(s->engine);
    gf_registry_close(&s->backend);
    gf_tokenizer_free(s->tok);
    gf_model_free(s->model);
    memset(s, 0, sizeof *s);
}

gf_status gf_session_tokens(const gf_session *s, const char *text, const char *ids, int32_t **tokens_out, size_t *n_out)
{
    if (ids)
        return gf_parse_ids(ids, tokens_out, n_out);
    if (!s->tok)
        return gf_error_set(GF_E_INVALID_ARG, "a text prompt needs the model's tokenizer.json");
    gf_status st = gf_tokenizer_encode(s->tok, text, strlen(text), tokens_out, n_out);
    if (st == GF_OK && *n_out == 0) {
        free(*tokens_out);
        *tokens_out = NULL;
        return gf_error_set(GF_E_INVALID_ARG, "the prompt encodes to no tokens");
    }
    return st;
}
