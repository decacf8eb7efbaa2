/* The http backend module's private interface (see http.c). Only this folder
 * includes <curl/curl.h> (hb_net.c). */
#ifndef GENFENCE_HTTP_HB_H
#define GENFENCE_HTTP_HB_H

#include <stddef.h>
#include <stdint.h>

#include "genfence/backend.h"

/* --backend http:URL[,model=NAME][,k=N][,timeout=S][,connect_timeout=S]
 *                   [,retries=N][,retry_wait=S][,stream=on|off][,integrity=on|off][,api=completions|chat] */
typedef struct hb_conf {
    char url[512];          /* base URL, no trailing '/': requests go to URL/v1/... */
    char model[128];        /* "model" of every request; "" = the first of /v1/models */
    int k;                  /* top_logprobs asked for (default 20) */
    double timeout;         /* seconds per request, connect to last byte (default 60) */
    double connect_timeout; /* seconds (default 10) */
    int retries;            /* extra tries after HTTP 429 / 5xx / a reset connection (default 2) */
    double retry_wait;      /* the most seconds a Retry-After may make it wait (default 5) */
    int stream;             /* 1: each step also asked streamed and checked against the plain reply */
    int integrity;          /* 1: model_load runs hb_integrity first (integrity=on) */
    int chat;               /* api=chat: POST /v1/chat/completions, the prompt's text (the server's
                               /detokenize of genfence's ids) as one user message */
} hb_conf;

/* Parse opts->config; a bad one is GF_E_INVALID_ARG naming the key. */
gf_status hb_conf_parse(const char *config, hb_conf *out);

/* One HTTP exchange after the retries: status, body (NUL-terminated, malloc'd). */
typedef struct hb_reply {
    long status;
    char *body; /* (len + 1) */
    size_t len;
    int tries;
} hb_reply;
void hb_reply_free(hb_reply *r);

/* GET URL/path or POST json to it, with conf's timeouts and retries. Transport
 * failures (refused, timed out, reset, retries used up) are GF_E_BACKEND
 * naming the URL and what happened; an HTTP error status that is not retried
 * (or after the last retry) comes back GF_OK with r->status set. */
gf_status hb_request(const hb_conf *c, const char *path, const char *json, hb_reply *r);
/* Process-wide libcurl initialisation; GF_OK or GF_E_UNAVAILABLE (why). */
gf_status hb_net_init(char *why, size_t why_len);
const char *hb_net_version(void);

/* One generated position as the server reported it. */
#define HB_TOPK_MAX 64
typedef struct hb_step {
    int32_t id;                  /* the token the server chose */
    double logprob;              /* its log-probability */
    int32_t n_top;               /* entries in top_id / top_lp */
    int32_t top_id[HB_TOPK_MAX]; /* (n_top) */
    double top_lp[HB_TOPK_MAX];  /* (n_top) */
} hb_step;

/* A completion: its choice's text, finish_reason, usage and steps. */
typedef struct hb_completion {
    char *text; /* malloc'd, NUL-terminated (text_len + 1) */
    size_t text_len;
    char finish[32];                        /* "length", "stop", ... */
    int64_t usage_prompt, usage_completion; /* -1 where absent */
    int32_t n_steps;
    hb_step *steps; /* (n_steps) */
} hb_completion;
void hb_completion_free(hb_completion *c);

/* Parse a non-streamed /v1/completions reply (llama-server's logprobs.content
 * with ids, or the OpenAI layout with "token_id:N" keys). GF_E_BACKEND naming
 * what is wrong: invalid or truncated JSON (its byte offset), no choice, no
 * ids. */
gf_status hb_parse_completion(const char *body, size_t len, hb_completion *out);
/* Parse a streamed reply (Server-Sent Events): the text of its chunks in
 * order, the last finish_reason. GF_E_BACKEND for a cut event, an event that
 * is not JSON, no "[DONE]", or text after it. */
gf_status hb_parse_stream(const char *body, size_t len, hb_completion *out);
/* The server's error message of an error reply, or the body's start ("" if
 * none), into buf. */
void hb_error_text(const char *body, size_t len, char *buf, size_t buf_len);
/* 1 when an error reply says the prompt is over the context size. */
int hb_is_context_error(long status, const char *body, size_t len);

/* Whole-generation integrity on a fixed prompt (hb_integrity.c): GF_OK with a
 * one-line summary, or GF_E_BACKEND naming the first failed check. V and eos
 * of the model (V = INT32_MAX, eos = -1 where unknown: info). */
gf_status hb_integrity(const hb_conf *c, const char *model, int32_t V, int32_t eos, char *summary, size_t len);

/* One completion request: the prompt as ids, max_tokens, temperature,
 * logprobs = conf->k, echo, stream, seed (< 0: none), the model (NULL or "":
 * none). */
typedef struct hb_ask {
    const int32_t *prompt; /* (n) */
    int32_t n;
    int max_tokens;
    double temperature;
    int seed, echo, stream;
} hb_ask;
/* POST it to URL/v1/completions (api=chat: the ids through URL/detokenize,
 * then URL/v1/chat/completions, echo refused as GF_E_UNSUPPORTED). GF_OK with the reply on HTTP 200; another
 * status is GF_E_BACKEND naming it and the server's message (an over-long
 * prompt GF_E_CONTEXT_LIMIT), or with keep_error GF_OK with r->status set
 * (the probes read the refusal). */
gf_status hb_complete(const hb_conf *c, const char *model, const hb_ask *a, int keep_error, hb_reply *r);

/* The info slot: probes the server named by opts->config (hb_info.c). */
gf_status hb_info(const gf_backend_options *opts, gf_backend_info *info_out);

#endif
