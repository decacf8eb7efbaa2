/* Helpers shared by the subcommands. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gf_cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("genfence: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int gf_cli_parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

int gf_cli_parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        return 0;
    *out = v;
    return 1;
}

gf_status gf_cli_parse_ids(const char *s, int32_t **ids_out, size_t *n_out)
{
    *ids_out = NULL;
    *n_out = 0;
    size_t cap = 16, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            free(ids);
            return gf_error_set(GF_E_INVALID_ARG, "bad token id list '%s' at character %td: expected "
                                "non-negative integers separated by commas", s, p - s);
        }
        if (n == cap) {
            int32_t *grown = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!grown) {
                free(ids);
                return gf_error_set(GF_E_NOMEM, "out of memory");
            }
            ids = grown;
        }
        ids[n++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (n == 0) {
        free(ids);
        return gf_error_set(GF_E_INVALID_ARG, "empty token id list");
    }
    *ids_out = ids;
    *n_out = n;
    return GF_OK;
}

gf_status gf_session_open(gf_session *s, const char *dir, const char *backend, int32_t threads,
                          int need_tokenizer)
{
    memset(s, 0, sizeof *s);
    gf_status st = gf_model_load(dir, &s->model);
    if (st != GF_OK)
        return st;
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "rb");
    if (f) {
        fclose(f);
        st = gf_tokenizer_load(path, &s->tok);
        if (st != GF_OK)
            goto fail;
    } else if (need_tokenizer) {
        st = gf_error_set(GF_E_IO, "%s: no tokenizer.json (needed for text prompts)", dir);
        goto fail;
    }
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

gf_status gf_session_tokens(const gf_session *s, const char *text, const char *ids,
                            int32_t **tokens_out, size_t *n_out)
{
    if (ids)
        return gf_cli_parse_ids(ids, tokens_out, n_out);
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

void gf_json_write_string(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
    }
    fputc('"', f);
}

void gf_json_write_number(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.17g", x);
    else
        fputs("null", f);
}
