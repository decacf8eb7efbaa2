/* The OpenAI completions API as the http backend reads it: the config, a
 * completion reply (choices[0]: text, finish_reason, logprobs; usage), a
 * streamed one (Server-Sent Events), an error reply. jansson for the JSON. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb.h"

static int parse_num(const char *v, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= lo && d <= hi))
        return 0;
    *out = d;
    return 1;
}

gf_status hb_conf_parse(const char *config, hb_conf *out)
{
    memset(out, 0, sizeof *out);
    out->k = 20;
    out->timeout = 60;
    out->connect_timeout = 10;
    out->retries = 2;
    out->retry_wait = 5;
    if (!config || !*config)
        return gf_error_set(GF_E_INVALID_ARG, "http: no server named: use --backend http:URL "
                                              "(e.g. http:http://127.0.0.1:8080[,model=NAME,k=20,timeout=60])");
    char buf[1024];
    if (strlen(config) >= sizeof buf)
        return gf_error_set(GF_E_INVALID_ARG, "http: the config is over %zu bytes", sizeof buf - 1);
    strcpy(buf, config);
    char *save = NULL;
    int first = 1;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), first = 0) {
        if (first) {
            if (strncmp(tok, "http://", 7) && strncmp(tok, "https://", 8))
                return gf_error_set(GF_E_INVALID_ARG,
                                    "http: '%s' is not an http:// or https:// URL "
                                    "(--backend http:URL[,key=value...])",
                                    tok);
            size_t n = strlen(tok);
            while (n > 0 && tok[n - 1] == '/')
                tok[--n] = '\0';
            if (n >= 4 && !strcmp(tok + n - 3, "/v1"))
                tok[n - 3] = '\0'; /* URL/v1 means URL */
            if (strlen(tok) >= sizeof out->url)
                return gf_error_set(GF_E_INVALID_ARG, "http: the URL is too long");
            strcpy(out->url, tok);
            continue;
        }
        char *eq = strchr(tok, '=');
        if (!eq)
            return gf_error_set(GF_E_INVALID_ARG, "http: option '%s' is not key=value", tok);
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        double d;
        if (!strcmp(k, "model")) {
            if (!*v || strlen(v) >= sizeof out->model)
                return gf_error_set(GF_E_INVALID_ARG, "http: model= needs a name (at most %zu bytes)",
                                    sizeof out->model - 1);
            strcpy(out->model, v);
        } else if (!strcmp(k, "k")) {
            if (!parse_num(v, 1, HB_TOPK_MAX, &d) || d != (int)d)
                return gf_error_set(GF_E_INVALID_ARG, "http: k=%s: want an integer in [1, %d]", v, HB_TOPK_MAX);
            out->k = (int)d;
        } else if (!strcmp(k, "timeout") || !strcmp(k, "connect_timeout") || !strcmp(k, "retry_wait")) {
            if (!parse_num(v, 0.001, 86400, &d))
                return gf_error_set(GF_E_INVALID_ARG, "http: %s=%s: want seconds in (0, 86400]", k, v);
            *(!strcmp(k, "timeout")      ? &out->timeout
              : !strcmp(k, "retry_wait") ? &out->retry_wait
                                         : &out->connect_timeout) = d;
        } else if (!strcmp(k, "retries")) {
            if (!parse_num(v, 0, 10, &d) || d != (int)d)
                return gf_error_set(GF_E_INVALID_ARG, "http: retries=%s: want an integer in [0, 10]", v);
            out->retries = (int)d;
        } else if (!strcmp(k, "stream")) {
            if (strcmp(v, "on") && strcmp(v, "off"))
                return gf_error_set(GF_E_INVALID_ARG, "http: stream=%s: want on or off", v);
            out->stream = !strcmp(v, "on");
        } else if (!strcmp(k, "integrity")) {
            if (strcmp(v, "on") && strcmp(v, "off"))
                return gf_error_set(GF_E_INVALID_ARG, "http: integrity=%s: want on or off", v);
            out->integrity = !strcmp(v, "on");
        } else if (!strcmp(k, "api")) {
            if (strcmp(v, "completions") && strcmp(v, "chat"))
                return gf_error_set(GF_E_INVALID_ARG, "http: api=%s: want completions or chat", v);
            out->chat = !strcmp(v, "chat");
        } else {
            return gf_error_set(GF_E_INVALID_ARG,
                                "http: unknown option '%s' (model, k, timeout, connect_timeout, "
                                "retries, retry_wait, stream, integrity, api)",
                                k);
        }
    }
    return GF_OK;
}

void hb_completion_free(hb_completion *c)
{
    if (!c)
        return;
    free(c->text);
    free(c->steps);
    memset(c, 0, sizeof *c);
}

/* "token_id:123" (vLLM's return_tokens_as_token_ids) -> 123; -1 otherwise. */
static int32_t id_of_key(const char *s)
{
    if (strncmp(s, "token_id:", 9))
        return -1;
    char *end = NULL;
    long v = strtol(s + 9, &end, 10);
    return end != s + 9 && !*end && v >= 0 && v < INT32_MAX ? (int32_t)v : -1;
}

static int num(json_t *j, double *out)
{
    if (json_is_number(j)) {
        *out = json_number_value(j);
        return 1;
    }
    return 0;
}

/* An entry's token id: its integer "id" (llama-server), else a "token" of
 * the form token_id:N (vLLM's return_tokens_as_token_ids); -1 if neither. */
static int32_t entry_id(json_t *e)
{
    json_t *id = json_object_get(e, "id"), *tok = json_object_get(e, "token");
    if (json_is_integer(id))
        return json_integer_value(id) >= 0 && json_integer_value(id) < INT32_MAX ? (int32_t)json_integer_value(id) : -1;
    return json_is_string(tok) ? id_of_key(json_string_value(tok)) : -1;
}

/* One entry of logprobs.content (completions and chat alike): {id, logprob,
 * top_logprobs: [{id, logprob}]}. */
static gf_status read_content_step(json_t *e, size_t i, hb_step *st)
{
    json_t *top = json_object_get(e, "top_logprobs");
    st->id = entry_id(e);
    if (st->id < 0)
        return gf_error_set(GF_E_BACKEND,
                            "http: logprobs.content[%zu] has no integer \"id\" (nor a token_id:N token): the "
                            "server does not name its tokens by id, so its logprobs cannot be placed (docs/http.md)",
                            i);
    if (!num(json_object_get(e, "logprob"), &st->logprob))
        return gf_error_set(GF_E_BACKEND, "http: logprobs.content[%zu] has no numeric \"logprob\"", i);
    size_t n = json_is_array(top) ? json_array_size(top) : 0;
    for (size_t t = 0; t < n && st->n_top < HB_TOPK_MAX; t++) {
        json_t *te = json_array_get(top, t);
        int32_t tid = entry_id(te);
        double lp;
        if (tid < 0 || !num(json_object_get(te, "logprob"), &lp))
            return gf_error_set(GF_E_BACKEND, "http: logprobs.content[%zu].top_logprobs[%zu] lacks id or logprob", i,
                                t);
        st->top_id[st->n_top] = tid;
        st->top_lp[st->n_top++] = lp;
    }
    return GF_OK;
}

/* The OpenAI layout: tokens[i], token_logprobs[i], top_logprobs[i] = {key: lp}. */
static gf_status read_legacy_step(json_t *lp, size_t i, hb_step *st)
{
    json_t *tok = json_array_get(json_object_get(lp, "tokens"), i);
    json_t *tlp = json_array_get(json_object_get(lp, "token_logprobs"), i);
    json_t *top = json_array_get(json_object_get(lp, "top_logprobs"), i);
    st->id = json_is_string(tok) ? id_of_key(json_string_value(tok)) : -1;
    if (st->id < 0)
        return gf_error_set(GF_E_BACKEND,
                            "http: logprobs.tokens[%zu] is not 'token_id:N': the server names its "
                            "tokens by text, which cannot be mapped to ids exactly (vLLM: "
                            "return_tokens_as_token_ids; docs/http.md)",
                            i);
    if (!num(tlp, &st->logprob))
        return gf_error_set(GF_E_BACKEND, "http: logprobs.token_logprobs[%zu] is not a number", i);
    const char *key;
    json_t *v;
    json_object_foreach(top, key, v)
    {
        double d;
        int32_t id = id_of_key(key);
        if (id < 0 || !num(v, &d))
            return gf_error_set(GF_E_BACKEND, "http: logprobs.top_logprobs[%zu] key '%s' is not 'token_id:N'", i, key);
        if (st->n_top < HB_TOPK_MAX) {
            st->top_id[st->n_top] = id;
            st->top_lp[st->n_top++] = d;
        }
    }
    return GF_OK;
}

static gf_status read_usage(json_t *root, hb_completion *out)
{
    json_t *u = json_object_get(root, "usage");
    json_t *p = json_object_get(u, "prompt_tokens"), *c = json_object_get(u, "completion_tokens");
    out->usage_prompt = json_is_integer(p) ? json_integer_value(p) : -1;
    out->usage_completion = json_is_integer(c) ? json_integer_value(c) : -1;
    return GF_OK;
}

static void set_finish(json_t *choice, hb_completion *out)
{
    json_t *f = json_object_get(choice, "finish_reason");
    if (json_is_string(f))
        snprintf(out->finish, sizeof out->finish, "%s", json_string_value(f));
}

static gf_status append_text(hb_completion *out, const char *s, size_t n)
{
    char *nt = realloc(out->text, out->text_len + n + 1);
    if (!nt)
        return gf_error_set(GF_E_NOMEM, "http: out of memory");
    memcpy(nt + out->text_len, s, n);
    out->text_len += n;
    nt[out->text_len] = '\0';
    out->text = nt;
    return GF_OK;
}

static json_t *load_json(const char *body, size_t len, const char *what, gf_status *st)
{
    json_error_t e;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
    *st = GF_OK;
    if (!root)
        *st = gf_error_set(GF_E_BACKEND, "http: %s is not valid JSON (%s at byte %d of %zu%s)", what, e.text,
                           e.position, len, e.position >= (int)len ? ": truncated" : "");
    else if (!json_is_object(root)) {
        json_decref(root);
        root = NULL;
        *st = gf_error_set(GF_E_BACKEND, "http: %s is not a JSON object", what);
    }
    return root;
}

gf_status hb_parse_completion(const char *body, size_t len, hb_completion *out)
{
    memset(out, 0, sizeof *out);
    gf_status st;
    json_t *root = load_json(body, len, "the completion reply", &st);
    if (!root)
        return st;
    json_t *choices = json_object_get(root, "choices"), *ch = json_array_get(choices, 0);
    if (!json_is_object(ch)) {
        json_decref(root);
        return gf_error_set(GF_E_BACKEND, "http: the completion reply has no choices[0]");
    }
    json_t *text = json_object_get(ch, "text");
    if (!json_is_string(text)) /* chat: choices[0].message.content */
        text = json_object_get(json_object_get(ch, "message"), "content");
    st = append_text(out, json_is_string(text) ? json_string_value(text) : "",
                     json_is_string(text) ? json_string_length(text) : 0);
    set_finish(ch, out);
    read_usage(root, out);
    json_t *lp = json_object_get(ch, "logprobs"), *content = json_object_get(lp, "content");
    json_t *legacy = json_object_get(lp, "tokens");
    size_t n = json_is_array(content) ? json_array_size(content) : json_is_array(legacy) ? json_array_size(legacy) : 0;
    if (st == GF_OK && n) {
        out->steps = calloc(n, sizeof *out->steps);
        if (!out->steps)
            st = gf_error_set(GF_E_NOMEM, "http: out of memory");
        for (size_t i = 0; st == GF_OK && i < n; i++)
            st = json_is_array(content) ? read_content_step(json_array_get(content, i), i, &out->steps[i])
                                        : read_legacy_step(lp, i, &out->steps[i]);
        out->n_steps = (int32_t)n;
    }
    json_decref(root);
    if (st != GF_OK)
        hb_completion_free(out);
    return st;
}

gf_status hb_parse_stream(const char *body, size_t len, hb_completion *out)
{
    memset(out, 0, sizeof *out);
    gf_status st = append_text(out, "", 0);
    size_t i = 0;
    int done = 0, events = 0;
    while (st == GF_OK && i < len) {
        /* one event: up to a blank line (\n\n or \r\n\r\n) */
        const char *p = body + i, *end = NULL;
        size_t skip = 0;
        for (size_t j = i; j + 1 < len; j++) {
            if (body[j] == '\n' && body[j + 1] == '\n') {
                end = body + j, skip = 2;
                break;
            }
            if (j + 3 < len && !memcmp(body + j, "\r\n\r\n", 4)) {
                end = body + j, skip = 4;
                break;
            }
        }
        int blank = 1;
        for (size_t j = i; j < len && blank; j++)
            blank = body[j] == '\n' || body[j] == '\r' || body[j] == ' ';
        if (blank)
            break;
        if (done)
            return hb_completion_free(out), gf_error_set(GF_E_BACKEND,
                                                         "http: the stream has text after its final "
                                                         "event (data: [DONE]) at byte %zu",
                                                         i);
        if (!end)
            return hb_completion_free(out),
                   gf_error_set(GF_E_BACKEND,
                                "http: the stream was cut inside event %d (byte %zu of %zu: no blank "
                                "line ends it)",
                                events + 1, i, len);
        size_t n = (size_t)(end - p);
        events++;
        if (n >= 6 && !strncmp(p, "data: ", 6)) {
            p += 6, n -= 6;
            if (n == 6 && !strncmp(p, "[DONE]", 6)) {
                done = 1;
            } else {
                json_t *root = load_json(p, n, "a stream event", &st);
                if (root) {
                    json_t *ch = json_array_get(json_object_get(root, "choices"), 0), *t = json_object_get(ch, "text");
                    if (!json_is_string(t)) /* chat: choices[0].delta.content */
                        t = json_object_get(json_object_get(ch, "delta"), "content");
                    if (json_is_string(t))
                        st = append_text(out, json_string_value(t), json_string_length(t));
                    set_finish(ch, out);
                    if (json_object_get(root, "usage"))
                        read_usage(root, out);
                    json_decref(root);
                } else {
                    gf_error_prefix(st, "http: stream event %d", events);
                }
            }
        }
        i = (size_t)(end - body) + skip;
    }
    if (st == GF_OK && !done)
        st = gf_error_set(GF_E_BACKEND, "http: the stream ended after %d event%s without its final data: [DONE]",
                          events, events == 1 ? "" : "s");
    if (st != GF_OK)
        hb_completion_free(out);
    return st;
}

void hb_error_text(const char *body, size_t len, char *buf, size_t buf_len)
{
    buf[0] = '\0';
    json_t *root = json_loadb(body, len, 0, NULL);
    json_t *e = json_object_get(root, "error");
    json_t *m = json_is_object(e) ? json_object_get(e, "message") : e;
    if (json_is_string(m))
        snprintf(buf, buf_len, "%s", json_string_value(m));
    else
        snprintf(buf, buf_len, "%.*s", (int)(len < 200 ? len : 200), body);
    json_decref(root);
}

int hb_is_context_error(long status, const char *body, size_t len)
{
    if (status != 400 && status != 413 && status != 422)
        return 0;
    /* llama-server: exceed_context_size_error; vLLM/OpenAI: "maximum context
     * length"; TGI: "must be <= ... tokens" */
    static const char *const marks[] = {"exceed_context_size", "context size",    "context length",
                                        "context_length",      "maximum context", "too long"};
    for (size_t i = 0; i < sizeof marks / sizeof *marks; i++)
        if (memmem(body, len, marks[i], strlen(marks[i])))
            return 1;
    return 0;
}

static json_t *ids_json(const int32_t *ids, int32_t n)
{
    json_t *a = json_array();
    for (int32_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    return a;
}

/* api=chat: the text of n ids, the server's own /detokenize (llama-server:
 * {"tokens"} -> {"content"}; vLLM: {"model", "tokens"} -> {"prompt"}), so
 * that the message holds exactly the text of genfence's tokens. */
static gf_status detokenize(const hb_conf *c, const char *model, const int32_t *ids, int32_t n, char **out)
{
    *out = NULL;
    json_t *o = json_pack("{s:o}", "tokens", ids_json(ids, n));
    if (o && model && model[0])
        json_object_set_new(o, "model", json_string(model));
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!body)
        return gf_error_set(GF_E_NOMEM, "http: out of memory");
    hb_reply r;
    gf_status st = hb_request(c, "/detokenize", body, &r);
    free(body);
    if (st != GF_OK)
        return gf_error_prefix(st, "http: api=chat: detokenize");
    if (r.status != 200) {
        char msg[300];
        hb_error_text(r.body, r.len, msg, sizeof msg);
        st = gf_error_set(GF_E_BACKEND,
                          "http: api=chat sends genfence's token ids as a message's text, made by the server's "
                          "POST %s/detokenize (llama-server, vLLM): HTTP %ld: %s",
                          c->url, r.status, msg);
    } else {
        json_t *root = load_json(r.body, r.len, "the detokenize reply", &st);
        json_t *t = json_object_get(root, "content");
        if (!json_is_string(t))
            t = json_object_get(root, "prompt");
        if (root && !json_is_string(t))
            st = gf_error_set(GF_E_BACKEND, "http: the detokenize reply has no \"content\" (or \"prompt\") string");
        else if (root && !(*out = strdup(json_string_value(t))))
            st = gf_error_set(GF_E_NOMEM, "http: out of memory");
        json_decref(root);
    }
    hb_reply_free(&r);
    return st;
}

gf_status hb_complete(const hb_conf *c, const char *model, const hb_ask *a, int keep_error, hb_reply *r)
{
    memset(r, 0, sizeof *r);
    json_t *o = NULL;
    const char *path = c->chat ? "/v1/chat/completions" : "/v1/completions";
    if (c->chat) {
        if (a->echo)
            return gf_error_set(GF_E_UNSUPPORTED, "http: chat completions have no echo (no prompt logprobs)");
        char *text = NULL;
        gf_status dst = detokenize(c, model, a->prompt, a->n, &text);
        if (dst != GF_OK)
            return dst;
        o = json_pack("{s:[{s:s, s:s}], s:i, s:f, s:b, s:i, s:b}", "messages", "role", "user", "content", text,
                      "max_tokens", a->max_tokens, "temperature", a->temperature, "logprobs", 1, "top_logprobs", c->k,
                      "stream", a->stream);
        free(text);
        if (!o)
            return gf_error_set(GF_E_BACKEND,
                                "http: api=chat: the text of the prompt's %d tokens is not valid UTF-8 "
                                "(a message is text: a token that splits a character cannot be sent)",
                                a->n);
    } else {
        o = json_pack("{s:o, s:i, s:f, s:i, s:b, s:b}", "prompt", ids_json(a->prompt, a->n), "max_tokens",
                      a->max_tokens, "temperature", a->temperature, "logprobs", c->k, "echo", a->echo, "stream",
                      a->stream);
    }
    if (o && model && model[0])
        json_object_set_new(o, "model", json_string(model));
    if (o && a->seed >= 0)
        json_object_set_new(o, "seed", json_integer(a->seed));
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!body)
        return gf_error_set(GF_E_NOMEM, "http: out of memory");
    gf_status st = hb_request(c, path, body, r);
    free(body);
    if (st != GF_OK || r->status == 200 || keep_error)
        return st;
    char msg[300];
    hb_error_text(r->body, r->len, msg, sizeof msg);
    if (hb_is_context_error(r->status, r->body, r->len))
        st = gf_error_set(GF_E_CONTEXT_LIMIT,
                          "http: the server refused a prompt of %d tokens as over its context (HTTP %ld: %s)", a->n,
                          r->status, msg);
    else
        st = gf_error_set(GF_E_BACKEND, "http: POST %s%s: HTTP %ld after %d tr%s: %s", c->url, path, r->status,
                          r->tries, r->tries == 1 ? "y" : "ies", msg);
    hb_reply_free(r);
    return st;
}
