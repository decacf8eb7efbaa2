/* Small helpers shared by the subcommands. */
#ifndef GENFENCE_CLI_H
#define GENFENCE_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "genfence/engine.h"
#include "genfence/model.h"
#include "genfence/tokenizer.h"
#include "registry.h"

/* "genfence: <message>\n" on stderr. */
void gf_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse "1,2,3" into a malloc'd array; GF_E_INVALID_ARG naming the bad item. */
gf_status gf_cli_parse_ids(const char *s, int32_t **ids_out, size_t *n_out);
/* Strict numbers: the whole string must parse. */
int gf_cli_parse_int(const char *s, long lo, long hi, long *out);
int gf_cli_parse_double(const char *s, double *out);

/* A model directory opened for running: weights, tokenizer (if present),
 * backend and engine. */
typedef struct gf_session {
    gf_model *model;
    gf_tokenizer *tok;         /* NULL if the directory has no tokenizer */
    gf_backend_handle backend;
    gf_engine *engine;
} gf_session;

/* Opens dir (config.json, model.safetensors, tokenizer.json if present) on
 * the named backend with `threads`. need_tokenizer: fail if absent. */
gf_status gf_session_open(gf_session *s, const char *dir, const char *backend, int32_t threads,
                          int need_tokenizer);
void gf_session_close(gf_session *s);

/* Text or "1,2,3" ids into tokens (text needs the tokenizer). */
gf_status gf_session_tokens(const gf_session *s, const char *text, const char *ids,
                            int32_t **tokens_out, size_t *n_out);

/* JSON string escaping into f. */
#include <stdio.h>
void gf_json_write_string(FILE *f, const char *s, size_t len);
/* A finite number with 17 significant digits, or null when not finite. */
void gf_json_write_number(FILE *f, double x);

#endif
