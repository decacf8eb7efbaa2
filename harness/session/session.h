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
    gf_tokenizer *tok; /* NULL if the directory has no tokenizer */
    gf_backend_handle backend;
    gf_engine *engine;
} gf_session;

/* Opens dir (config.json, model.safetensors, tokenizer.json if present) on
 * the named backend with `threads`. need_tokenizer: fail if absent. */
gf_status gf_session_open(gf_session *s, const char *dir, const char *backend, int32_t threads, int need_tokenizer);
void gf_session_close(gf_session *s);

/* Text or "1,2,3" ids into tokens (text needs the tokenizer). */
gf_status gf_session_tokens(const gf_session *s, const char *text, const char *ids, int32_t **tokens_out,
                            size_t *n_out);

#endif
