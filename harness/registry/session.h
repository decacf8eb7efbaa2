/* A session: a model directory opened for running on one backend (weights,
 * tokenizer, backend handle from the registry, engine). */
#ifndef GENFENCE_HARNESS_SESSION_H
#define GENFENCE_HARNESS_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "genfence/engine.h"
#include "genfence/model.h"
#include "genfence/tokenizer.h"
#include "registry.h"

/* A model directory opened for running: weights, tokenizer (if present),
 * backend and engine. */
typedef struct gf_session {
    gf_model *model;
    gf_tokenizer *tok;   /* NULL if not loaded (not asked for, absent or unusable) */
    char tok_error[512]; /* GF_SESSION_TOK_IF_USABLE: why it was not loaded ("" if absent) */
    gf_backend_handle backend;
    gf_engine *engine;
} gf_session;

/* What a command needs of dir/tokenizer.json. It is read before the weights,
 * so a refused one costs no model load. */
enum {
    GF_SESSION_TOK_IF_PRESENT = 0, /* read when present (a case's text prompt); refused is an error */
    GF_SESSION_TOK_REQUIRED = 1,   /* text prompts: absent or refused is an error */
    GF_SESSION_TOK_IF_USABLE = 2,  /* text output if it loads; else tok NULL, tok_error why */
    GF_SESSION_TOK_NONE = 3,       /* ids only: not read at all */
};

/* Opens dir (config.json, model.safetensors, tokenizer.json as `tokenizer`
 * says) on the named backend with `threads`. */
gf_status gf_session_open(gf_session *s, const char *dir, const char *backend, int32_t threads, int tokenizer);
void gf_session_close(gf_session *s);

/* Text or "1,2,3" ids into tokens (text needs the tokenizer). */
gf_status gf_session_tokens(const gf_session *s, const char *text, const char *ids, int32_t **tokens_out,
                            size_t *n_out);

#endif
